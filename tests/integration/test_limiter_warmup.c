/* token_bucket's warm-up (Guava's SmoothWarmingUp) through the proxy, in
 * the embedded store, a single Redis and a cluster: a new identity is
 * cold, so a burst admits fewer requests than the same bucket without
 * warm-up, and the retry after a cold request is longer; a check another
 * level refuses (in another slot in cluster mode) takes nothing from the
 * warm level; LIMITER RULES shows the keys; a LIMITER RELOAD to a plain
 * bucket reads an identity's debt.
 *
 * The refill is slow (a token per 1000 s) and the warm-up long (4000 s),
 * so nothing a test does can drift with the machine's speed. Its
 * geometry, in tokens: W = 4000 s * 0.001 = 4, threshold 2, max 2 + 2 * 4
 * / (1 + 3) = 4. From a cold start, the first request takes the permits
 * [3, 4] and pays 1 + 2 * (3.5 - 2) / 2 = 2.5 tokens, the second [2, 3]:
 * 1 + 2 * (2.5 - 2) / 2 = 1.5, then 1 each: a bucket of 10 admits 8
 * (remaining 7, 6, 5, ... 0) where a plain one admits 10; a bucket of 1
 * owes 1.5 tokens after one request: the next waits 2500 s, not 1000 s. */
#include "tests/integration/cluster_fixture.h"
#include "tests/integration/fixture.h"
#include "tests/integration/limiter_support.h"
#include "tests/integration/lstate.h"
#include "tests/support/px_test.h"

#include <stdio.h>
#include <string.h>

PX_TEST_SUITE(it_limiter_warmup);

#define KEY_MAX 160

#define WARM "refill_per_sec: 0.001, warmup: 4000s}"

static const char warm_yaml[] = PX_LIMITS_STAR(
    "wu", "{algorithm: token_bucket, capacity: 10, " WARM)
    PX_LIMITS_STAR("pl", "{algorithm: token_bucket, capacity: 10, "
                         "refill_per_sec: 0.001}")
        PX_LIMITS_STAR("w1", "{algorithm: token_bucket, capacity: 1, " WARM)
            PX_LIMITS_STAR(
                "p1",
                "{algorithm: token_bucket, capacity: 1, "
                "refill_per_sec: 0.001}") "wx:\n"
                                          "  limits:\n"
                                          "    - {algorithm: fixed_window, max: 2, window: 1d}\n"
                                          "  children:\n"
                                          "    \"*\":\n"
                                          "      limits:\n"
                                          "        - {algorithm: token_bucket, capacity: 10, " WARM
                                          "\n";

static void init_embedded(void)
{
    px_limits_start(PX_MODE_EMBEDDED, warm_yaml, NULL);
}

static void init_single(void)
{
    px_limits_start(PX_MODE_SINGLE, warm_yaml, NULL);
}

static void init_cluster(void)
{
    px_limits_start(PX_MODE_CLUSTER, warm_yaml, NULL);
}

/* How many of `n` checks of `path` are admitted, asserting that each
 * admitted one reports remaining[i] and that every one after the first
 * refusal is refused too. */
static int admitted(redisContext *c, const char *path, int n,
                    const long long *remaining)
{
    int got = 0;

    for (int i = 0; i < n; i++) {
        struct px_five f =
            px_take_five(px_cmd(c, "LIMITER CHECK %s", path), path);

        if (f.limited) {
            continue;
        }
        cr_assert_eq(got, i, "%s: admitted after a refusal", path);
        cr_assert_eq(f.remaining, remaining[got], "%s %d: remaining %lld", path,
                     i, f.remaining);
        got++;
    }
    return got;
}

static void cold_burst(redisContext *c)
{
    static const long long warm_left[] = { 7, 6, 5, 4, 3, 2, 1, 0 };
    static const long long plain_left[] = { 9, 8, 7, 6, 5, 4, 3, 2, 1, 0 };

    cr_assert_eq(admitted(c, "wu:a", 12, warm_left), 8);
    cr_assert_eq(admitted(c, "pl:a", 12, plain_left), 10);
}

/* A bucket of 1: after a cold request the next waits out its 2.5 tokens
 * (2500 s, counted from the request: the seconds round up); a plain one
 * waits a token's 1000 s. */
static void cold_retry(redisContext *c)
{
    struct px_five f;

    f = px_take_five(px_cmd(c, "LIMITER CHECK w1:a"), "w1 1");
    cr_assert_eq(f.limited, 0);
    cr_assert_eq(f.reset, 2500, "reset %lld", f.reset);
    f = px_take_five(px_cmd(c, "LIMITER CHECK w1:a"), "w1 2");
    cr_assert_eq(f.limited, 1);
    cr_assert_eq(f.remaining, 0);
    cr_assert_eq(f.retry, 2500, "retry %lld", f.retry);
    f = px_take_five(px_cmd(c, "LIMITER CHECK p1:a"), "p1 1");
    cr_assert_eq(f.limited, 0);
    f = px_take_five(px_cmd(c, "LIMITER CHECK p1:a"), "p1 2");
    cr_assert_eq(f.retry, 1000, "retry %lld", f.retry);
}

/* The integer field `field` of hash `key` on its node. */
static long long hash_int(const char *key, const char *field)
{
    redisContext *d = px_direct_for(key, strlen(key));
    redisReply *r = lstate_cmd(d, "HGET %s %s", key, field);
    long long v;

    cr_assert_eq(r->type, REDIS_REPLY_STRING, "%s %s", key, field);
    v = strtoll(r->str, NULL, 10);
    freeReplyObject(r);
    redisFree(d);
    return v;
}

/* An id whose "cellgate:{wx:<id>}" lives on another master than
 * "cellgate:{wx}" (any id outside cluster mode). */
static void id_off_wx(char *out, size_t outlen)
{
    px_ident_off("cellgate:{wx:", "x",
                 px_mode_now() == PX_MODE_CLUSTER ? "cellgate:{wx}" : NULL, out,
                 outlen);
}

/* The shared level refuses the third check: the warm level keeps what the
 * first two paid (2.5 + 1.5 tokens, two permits of cold, 1000 s each) and
 * nothing of the third, whose charge came back (across slots in a
 * cluster). A fourth identity's first check is still a cold one. */
static void refused_takes_nothing(redisContext *c)
{
    char id[32], path[KEY_MAX], key[KEY_MAX];
    struct px_five f;

    id_off_wx(id, sizeof(id));
    snprintf(path, sizeof(path), "wx:%s", id);
    f = px_take_five(px_cmd(c, "LIMITER CHECK %s", path), "wx 1");
    cr_assert_eq(f.limited, 0);
    f = px_take_five(px_cmd(c, "LIMITER CHECK %s", path), "wx 2");
    cr_assert_eq(f.limited, 0);
    f = px_take_five(px_cmd(c, "LIMITER CHECK %s", path), "wx 3");
    cr_assert_eq(f.limited, 1);
    snprintf(key, sizeof(key), "cellgate:{wx:%s}#0:token_bucket", id);
    if (px_mode_now() == PX_MODE_CLUSTER) {
        struct px_cluster *cl = px_cluster();
        cr_assert_neq(px_cluster_master_of_key(cl, key, strlen(key)),
                      px_cluster_master_of_key(cl, "cellgate:{wx}", 13),
                      "the levels are on two masters");
    }
    if (px_mode_now() != PX_MODE_EMBEDDED) {
        cr_assert_eq(hash_int(key, "tokens"), 6, "the third paid nothing");
        cr_assert_eq(hash_int(key, "cold"), 2000000000000LL,
                     "the third took no cold");
    }
}

static void rules_show_the_keys(redisContext *c)
{
    redisReply *r = px_cmd(c, "LIMITER RULES");
    int seen = 0;

    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    for (size_t i = 0; i < r->elements; i++) {
        if (strstr(r->element[i]->str,
                   "wu:*  token_bucket(capacity=10,refill_per_sec=0.001,"
                   "warmup=4000s)") != NULL) {
            seen = 1;
        }
        if (strncmp(r->element[i]->str, "pl:*", 4) == 0) {
            cr_assert_str_eq(r->element[i]->str,
                             "pl:*  token_bucket(capacity=10,"
                             "refill_per_sec=0.001)");
        }
    }
    cr_assert(seen, "LIMITER RULES names the warm-up");
    freeReplyObject(r);
}

/* LIMITER RELOAD of w1 without its warm-up: the identity cold_retry left
 * in debt (-1.5 tokens, its hash with a cold) reads as the plain bucket's
 * debt, not as a malformed state: one token is 2500 s of refill away. */
static void reload_to_plain(redisContext *c)
{
    char path[PX_PATH_MAX];
    struct px_five f;

    px_write_file(path, sizeof(path), "limits.yaml",
                  PX_LIMITS_STAR("w1", "{algorithm: token_bucket, capacity: 1, "
                                       "refill_per_sec: 0.001}"));
    px_check_status(px_cmd_admin(c, "LIMITER RELOAD"), "OK");
    f = px_take_five(px_cmd(c, "LIMITER CHECK w1:a"), "w1 plain");
    cr_assert_eq(f.limited, 1);
    cr_assert_eq(f.remaining, 0);
    cr_assert_eq(f.retry, 2500, "retry %lld", f.retry);
}

static void everything(void)
{
    redisContext *c = px_connect(px_env()->proxy.port);

    cold_burst(c);
    cold_retry(c);
    refused_takes_nothing(c);
    rules_show_the_keys(c);
    reload_to_plain(c);
    redisFree(c);
}

Test(it_limiter_warmup, embedded, .init = init_embedded, .fini = px_env_fini,
     .timeout = 60)
{
    everything();
}

Test(it_limiter_warmup, single, .init = init_single, .fini = px_env_fini,
     .timeout = 60)
{
    everything();
}

Test(it_limiter_warmup, cluster, .init = init_cluster, .fini = px_cluster_fini,
     .timeout = 120)
{
    everything();
}
