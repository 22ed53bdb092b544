/* Helpers of the limiter integration tests: the mode of the running test,
 * the node of a key, and checkers for limiter replies and stored TATs. The
 * test files keep what only one of them needs (mirrors, reference tables,
 * expiry checks); what they all read the same way lives here. */
#include "tests/integration/limiter_support.h"

#include <stdio.h>
#include <stdlib.h>

#include <criterion/criterion.h>

#include "tests/integration/cluster_fixture.h"
#include "tests/integration/fixture.h"
#include "tests/integration/lstate.h"

/* Digits of a TAT in nanoseconds from 2001-09-09 to 2286-11-20. */
#define TAT_DIGITS 19

enum px_mode px_mode_now(void)
{
    if (px_cluster()->nnodes > 0) {
        return PX_MODE_CLUSTER;
    }
    return px_env()->redis.port > 0 ? PX_MODE_SINGLE : PX_MODE_EMBEDDED;
}

redisContext *px_direct_for(const char *key, size_t klen)
{
    struct px_cluster *cl = px_cluster();

    switch (px_mode_now()) {
    case PX_MODE_CLUSTER:
        return px_cluster_connect(cl, px_cluster_master_of_key(cl, key, klen));
    case PX_MODE_SINGLE:
        return px_redis_connect(&px_env()->redis, NULL);
    default:
        return NULL;
    }
}

struct px_five px_take_five(redisReply *r, const char *what)
{
    struct px_five f;

    cr_assert_eq(r->type, REDIS_REPLY_ARRAY,
                 "%s: expected five integers, got type %d \"%s\"", what,
                 r->type, r->str != NULL ? r->str : "");
    cr_assert_eq(r->elements, 5, "%s: %zu elements", what, (size_t)r->elements);
    for (size_t k = 0; k < 5; k++) {
        cr_assert_eq(r->element[k]->type, REDIS_REPLY_INTEGER,
                     "%s: element %zu is not an integer", what, k);
    }
    f.limited = r->element[0]->integer;
    f.limit = r->element[1]->integer;
    f.remaining = r->element[2]->integer;
    f.retry = r->element[3]->integer;
    f.reset = r->element[4]->integer;
    freeReplyObject(r);
    return f;
}

void px_check_five(redisReply *r, const char *what, long long limited,
                   long long limit, long long remaining, long long retry,
                   long long reset)
{
    struct px_five f = px_take_five(r, what);

    cr_assert(f.limited == limited && f.limit == limit &&
                  f.remaining == remaining && f.retry == retry &&
                  f.reset == reset,
              "%s: got [%lld, %lld, %lld, %lld, %lld], want [%lld, %lld, "
              "%lld, %lld, %lld]",
              what, f.limited, f.limit, f.remaining, f.retry, f.reset, limited,
              limit, remaining, retry, reset);
}

int64_t px_get_tat(redisContext *d, const char *key, size_t klen)
{
    char hash[256], name[512];
    const char *field;
    redisReply *r;
    int64_t tat;

    /* A LIMITER level's TAT is a record of its identity's state string. */
    snprintf(name, sizeof(name), "%.*s", (int)klen, key);
    r = strlen(name) == klen && lstate_split(name, hash, sizeof(hash), &field)
            ? lstate_cmd(d, "GET %s", name)
            : px_cmd(d, "GET %b", key, klen);

    cr_assert_eq(r->type, REDIS_REPLY_STRING, "GET %.*s: type %d", (int)klen,
                 key, r->type);
    cr_assert_eq(r->len, TAT_DIGITS, "%.*s: stored \"%s\" is not 19 digits",
                 (int)klen, key, r->str);
    cr_assert(r->str[0] >= '1' && r->str[0] <= '9', "%.*s: stored \"%s\"",
              (int)klen, key, r->str);
    for (size_t k = 0; k < r->len; k++) {
        cr_assert(r->str[k] >= '0' && r->str[k] <= '9',
                  "%.*s: stored \"%s\" is not decimal", (int)klen, key, r->str);
    }
    tat = strtoll(r->str, NULL, 10);
    freeReplyObject(r);
    return tat;
}

void px_check_client_order(redisContext *c, redisContext *o, const char *tag,
                           int rounds)
{
    char what[128];
    redisReply *r;
    int i;

    for (i = 0; i < rounds; i++) {
        redisAppendCommand(c, "CL.THROTTLE {%s}a%d 0 1 60", tag, i);
        redisAppendCommand(c, "GET {%s}a%d", tag, i);
        redisAppendCommand(c, "CL.THROTTLE {%s}b%d 0 1 60", tag, i);
        redisAppendCommand(c, "DEL {%s}b%d", tag, i);
        redisAppendCommand(c, "CL.THROTTLE {%s}b%d 0 1 60", tag, i);
        redisAppendCommand(c, "SET {%s}c%d x", tag, i);
        redisAppendCommand(c, "CL.THROTTLE {%s}c%d 0 1 60", tag, i);
        redisAppendCommand(c, "DEL {%s}c%d", tag, i);
        redisAppendCommand(c, "CL.THROTTLE {%s}c%d 0 1 60", tag, i);
        redisAppendCommand(c, "EXISTS {%s}c%d", tag, i);
        redisAppendCommand(o, "CL.THROTTLE o{%s}%d 1 1 60", tag, i);
        redisAppendCommand(o, "CL.THROTTLE o{%s}%d 1 1 60", tag, i);
    }
    px_flush(o);
    px_flush(c);
    for (i = 0; i < rounds; i++) {
        snprintf(what, sizeof(what), "round %d: CL.THROTTLE a", i);
        px_check_five(px_next(c), what, 0, 1, 0, -1, 60);
        r = px_next(c);
        cr_assert(r->type == REDIS_REPLY_STRING && r->len == TAT_DIGITS,
                  "round %d: GET after CL.THROTTLE saw no TAT (type %d)", i,
                  r->type);
        freeReplyObject(r);
        snprintf(what, sizeof(what), "round %d: CL.THROTTLE b", i);
        px_check_five(px_next(c), what, 0, 1, 0, -1, 60);
        px_check_int(px_next(c), 1); /* DEL found the TAT */
        snprintf(what, sizeof(what), "round %d: CL.THROTTLE b after DEL", i);
        px_check_five(px_next(c), what, 0, 1, 0, -1, 60);
        px_check_status(px_next(c), "OK");
        px_check_error(px_next(c), "WRONGTYPE Operation against a key holding "
                                   "the wrong kind of value");
        px_check_int(px_next(c), 1);
        snprintf(what, sizeof(what), "round %d: CL.THROTTLE c after DEL", i);
        px_check_five(px_next(c), what, 0, 1, 0, -1, 60);
        px_check_int(px_next(c), 1);
    }
    for (i = 0; i < rounds; i++) {
        snprintf(what, sizeof(what), "beside, round %d", i);
        px_check_five(px_next(o), what, 0, 2, 1, -1, 60);
        px_check_five(px_next(o), what, 0, 2, 0, -1, 120);
    }
}

void px_check_absent(const char *key, size_t klen, const char *what)
{
    redisContext *d = px_direct_for(key, klen);
    redisReply *r;

    if (d == NULL) {
        return;
    }
    {
        char hash[256], name[512];
        const char *field;

        snprintf(name, sizeof(name), "%.*s", (int)klen, key);
        r = strlen(name) == klen &&
                    lstate_split(name, hash, sizeof(hash), &field)
                ? lstate_cmd(d, "EXISTS %s", name)
                : px_cmd(d, "EXISTS %b", key, klen);
    }
    cr_assert(r->type == REDIS_REPLY_INTEGER && r->integer == 0,
              "%s: %.*s exists", what, (int)klen, key);
    freeReplyObject(r);
    redisFree(d);
}

/* The limits file of the running test (each test runs in its own
 * process), and the argv / proxy.yaml lines that name it. */
static char limits_path[PX_PATH_MAX];
static char limits_conf[PX_PATH_MAX + 256];
static const char *limits_args[] = { "--limits", limits_path, NULL };

void px_limits_start(enum px_mode mode, const char *yaml, const char *more)
{
    px_write_file(limits_path, sizeof(limits_path), "limits.yaml", yaml);
    snprintf(limits_conf, sizeof(limits_conf), "limits_file: %s\n%s",
             limits_path, more != NULL ? more : "");
    switch (mode) {
    case PX_MODE_EMBEDDED:
        px_proxy_start(&px_env()->proxy, more, limits_args);
        break;
    case PX_MODE_SINGLE:
        px_redis_start(&px_env()->redis, NULL);
        px_proxy_start_for(&px_env()->proxy, &px_env()->redis, limits_conf);
        break;
    case PX_MODE_CLUSTER:
        px_cluster_init();
        px_cluster_proxy_start(&px_env()->proxy, px_cluster(), limits_conf);
        break;
    }
}

const char *px_limits_conf(void)
{
    return limits_conf;
}

const char *const *px_limits_args(void)
{
    return limits_args;
}

void px_ident_off(const char *prefix, const char *base, const char *avoid,
                  char *out, size_t outlen)
{
    struct px_cluster *cl = px_cluster();
    char tag[512];
    int am;

    snprintf(out, outlen, "%s", base);
    if (px_mode_now() != PX_MODE_CLUSTER || avoid == NULL) {
        return;
    }
    am = px_cluster_master_of_key(cl, avoid, strlen(avoid));
    for (int i = 0; i < PX_IDENT_TRIES; i++) {
        snprintf(out, outlen, "%s%d", base, i);
        snprintf(tag, sizeof(tag), "%s%s", prefix, out);
        if (px_cluster_master_of_key(cl, tag, strlen(tag)) != am) {
            return;
        }
    }
    cr_assert_fail("no id %s<n> off the master of %s", base, avoid);
}

void px_wait_refusal_invalidation(redisContext *c, long long before,
                                  const char *what)
{
    int i;

    for (i = 0; i < 2000 && px_info_int(c, "limiter_refusal_cache_"
                                           "invalidations") == before;
         i++) {
        px_sleep_ms(1);
    }
    cr_assert_lt(i, 2000, "%s never reached the cache", what);
}
