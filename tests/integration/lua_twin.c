/* Calls of algorithms/limiter.lua for the differential tests (see the
 * header). The script is called exactly as the proxy calls it, except for
 * the explicit clock, with an override hash that is never set. */
#include "tests/integration/lua_twin.h"

#include "tests/integration/fixture.h"

#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/scripts.h"

#define TWIN_ARGC 16 /* EVALSHA sha 2 key ovr mode now cost +6 +m */

redisContext *lua_twin_connect(void)
{
    redisContext *c = px_redis_connect(&px_env()->redis, NULL);
    const struct scripts_lua *s = scripts_limiter();

    px_check_str(px_cmd(c, "SCRIPT LOAD %b", s->body, s->len), s->sha1);
    return c;
}

/* An integer reply element, or a decimal bulk string (the script sends
 * durations of 2^53 us and more as text). */
static int64_t twin_int(const redisReply *r, const char *ctx)
{
    if (r->type == REDIS_REPLY_INTEGER) {
        return r->integer;
    }
    cr_assert_eq(r->type, REDIS_REPLY_STRING, "%s: element type %d", ctx,
                 r->type);
    char *end;
    long long v = strtoll(r->str, &end, 10);
    cr_assert(end == r->str + r->len && r->len > 0, "%s: '%s' is no integer",
              ctx, r->str);
    return v;
}

int lua_twin_call(redisContext *c, const char *mode, const char *key,
                  const char *algo, const char *const p[4], int64_t now_us,
                  int64_t cost, const char *undo, struct lua_twin_out *out,
                  char *err, size_t errlen)
{
    char now[24] = "", costs[24];
    const char *argv[TWIN_ARGC];
    redisReply *r;
    int argc = 0;

    if (now_us >= 0) {
        snprintf(now, sizeof(now), "%" PRId64, now_us);
    }
    snprintf(costs, sizeof(costs), "%" PRId64, cost);
    argv[argc++] = "EVALSHA";
    argv[argc++] = scripts_limiter()->sha1;
    argv[argc++] = "2";
    argv[argc++] = key;
    argv[argc++] = "lua-twin-test#overrides";
    argv[argc++] = mode;
    argv[argc++] = now;
    argv[argc++] = costs;
    argv[argc++] = algo;
    for (int i = 0; i < 4; i++) {
        argv[argc++] = p[i] != NULL ? p[i] : "";
    }
    argv[argc++] = undo != NULL ? undo : "";
    argv[argc++] = "0";
    r = redisCommandArgv(c, argc, argv, NULL);
    cr_assert_not_null(r, "EVALSHA: %s", c->errstr);
    memset(out, 0, sizeof(*out));
    if (r->type == REDIS_REPLY_ERROR) {
        snprintf(err, errlen, "%s", r->str);
        freeReplyObject(r);
        return -1;
    }
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s %s: reply type %d", mode, algo,
                 r->type);
    cr_assert_geq(r->elements, 3, "%s %s: elements", mode, algo);
    out->now_us = r->element[1]->integer * 1000000 + r->element[2]->integer;
    if (strcmp(mode, "refund") == 0) {
        cr_assert_eq(r->elements, 3, "refund %s: elements", algo);
        freeReplyObject(r);
        return 0;
    }
    cr_assert_eq(r->elements, 4, "%s %s: elements", mode, algo);
    const redisReply *e = r->element[3];
    cr_assert_eq(e->type, REDIS_REPLY_ARRAY, "%s %s: entry type", mode, algo);
    cr_assert_eq(e->elements, 6, "%s %s: entry elements", mode, algo);
    out->limited = (int)twin_int(e->element[0], "limited");
    cr_assert_eq(r->element[0]->integer, out->limited, "%s %s: limited", mode,
                 algo);
    out->limit = twin_int(e->element[1], "limit");
    out->remaining = twin_int(e->element[2], "remaining");
    out->retry_us = twin_int(e->element[3], "retry");
    out->reset_us = twin_int(e->element[4], "reset");
    cr_assert_eq(e->element[5]->type, REDIS_REPLY_STRING, "undo type");
    cr_assert_lt(e->element[5]->len, sizeof(out->undo), "undo length");
    memcpy(out->undo, e->element[5]->str, e->element[5]->len);
    freeReplyObject(r);
    return 0;
}

/* floor(ns / 1000), also for the -1 s of "allowed". */
static int64_t twin_floor_us(int64_t ns)
{
    int64_t q = ns / 1000;

    return (ns % 1000 < 0) ? q - 1 : q;
}

void lua_twin_expect(const struct lua_twin_out *o, const struct rl_decision *d,
                     const char *ctx)
{
    cr_assert_eq(o->limited, d->limited, "%s: limited lua %d c %d", ctx,
                 o->limited, d->limited);
    cr_assert_eq(o->limit, d->limit, "%s: limit lua %" PRId64 " c %" PRId64,
                 ctx, o->limit, d->limit);
    cr_assert_eq(o->remaining, d->remaining,
                 "%s: remaining lua %" PRId64 " c %" PRId64, ctx, o->remaining,
                 d->remaining);
    cr_assert_eq(o->retry_us, twin_floor_us(d->retry_after_ns),
                 "%s: retry lua %" PRId64 " us c %" PRId64 " ns", ctx,
                 o->retry_us, d->retry_after_ns);
    cr_assert_eq(o->reset_us, twin_floor_us(d->reset_after_ns),
                 "%s: reset lua %" PRId64 " us c %" PRId64 " ns", ctx,
                 o->reset_us, d->reset_after_ns);
}

long long lua_twin_pttl(redisContext *c, const char *key)
{
    redisReply *r = px_cmd(c, "PTTL %s", key);
    long long v;

    cr_assert_eq(r->type, REDIS_REPLY_INTEGER, "PTTL type");
    v = r->integer;
    freeReplyObject(r);
    return v;
}
