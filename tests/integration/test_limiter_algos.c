/* Every algorithm of limits.yaml through the proxy, in the embedded store,
 * a single Redis and a cluster: the same five integers in each; several
 * limits on one node admitting only together; a refused check consuming
 * nothing, also across slots; run-time overrides (LIMITER OVERRIDE) taking
 * effect on a second proxy without a restart, and one this proxy has not
 * heard of deciding its identity's check in a batch of others.
 *
 * Refills and windows are long (a token per 1000 s, windows of an hour or
 * a day), so nothing a test does can drift with the machine's speed: every
 * expected value is exact except the durations, which are checked to lie
 * within the limit's own bounds, never against the wall clock. */
#include "tests/integration/cluster_fixture.h"
#include "tests/integration/fixture.h"
#include "tests/integration/limiter_support.h"
#include "tests/integration/lstate.h"
#include "tests/support/px_test.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

PX_TEST_SUITE(it_limiter_algos);

#define KEY_MAX 160   /* room for every key and path the tests build */
#define DAY_S   86400 /* seconds in a day */
#define HOUR_S  3600  /* seconds in an hour */

static const char algos_yaml[] = PX_ALGOS_YAML
    "gc:\n"
    "  children:\n"
    "    \"*\":\n"
    "      limits: [2, 1, 1000]\n"
    "both:            # once every 5 s and 5 times per hour\n"
    "  children:\n"
    "    \"*\":\n"
    "      limits:\n"
    "        - {algorithm: sliding_log, max: 1, window: 5s}\n"
    "        - {algorithm: fixed_window, max: 5, window: 1h}\n"
    "api:\n"
    "  limits:\n"
    "    - {algorithm: fixed_window, max: 1000, window: 1d}\n"
    "  children:\n"
    "    \"*\":\n"
    "      limits:\n"
    "        - {algorithm: token_bucket, capacity: 2, refill_per_sec: 0.001}\n";

/* The six algorithms with a limit of 3, the longest retry each can
 * answer (their window, drip or refill time), and what remains after a
 * refused COST 2 with 1 left (the sliding log counts refused attempts). */
static const struct {
    const char *base;
    long long max_retry;
    long long left_after_refusal;
} three[] = {
    { "tb", 1000, 1 },   { "lb", 1000, 1 },   { "fw", DAY_S, 1 },
    { "sw", HOUR_S, 1 }, { "sl", HOUR_S, 0 }, { "sc", 2 * DAY_S, 1 },
};

static struct px_child second; /* a peer proxy in front of the same Redis */

static void init_embedded(void)
{
    px_limits_start(PX_MODE_EMBEDDED, algos_yaml, NULL);
}

static void init_single(void)
{
    px_limits_start(PX_MODE_SINGLE, algos_yaml, NULL);
}

static void init_cluster(void)
{
    px_limits_start(PX_MODE_CLUSTER, algos_yaml, NULL);
}

static void fini_second(void)
{
    if (second.pid > 0) {
        px_proxy_stop(&second, SIGKILL);
    }
    px_env_fini();
}

/* ---------------- Checks ---------------- */

/* Asserts a refused reply: limit, what remains, a retry within
 * (0, max_retry] and a reset after it. */
static void check_refused(redisReply *r, const char *what, long long limit,
                          long long remaining, long long max_retry)
{
    struct px_five f = px_take_five(r, what);

    cr_assert_eq(f.limited, 1, "%s: limited", what);
    cr_assert_eq(f.limit, limit, "%s: limit", what);
    cr_assert_eq(f.remaining, remaining, "%s: remaining %lld", what,
                 f.remaining);
    cr_assert(f.retry > 0 && f.retry <= max_retry, "%s: retry %lld", what,
              f.retry);
    cr_assert(f.reset > 0, "%s: reset %lld", what, f.reset);
}

/* Asserts an admitted reply with `remaining` left of `limit`. */
static void check_admitted(redisReply *r, const char *what, long long limit,
                           long long remaining)
{
    struct px_five f = px_take_five(r, what);

    cr_assert_eq(f.limited, 0, "%s: limited", what);
    cr_assert_eq(f.limit, limit, "%s: limit", what);
    cr_assert_eq(f.remaining, remaining, "%s: remaining %lld, want %lld", what,
                 f.remaining, remaining);
    cr_assert_eq(f.retry, -1, "%s: retry", what);
}

/* Each algorithm: three pass, the fourth is refused, PEEK and COST agree,
 * RESET starts over. */
static void each_algorithm(redisContext *c, const char *id)
{
    char path[64], what[KEY_MAX];

    for (size_t a = 0; a < sizeof(three) / sizeof(three[0]); a++) {
        snprintf(path, sizeof(path), "%s:%s", three[a].base, id);
        for (int i = 0; i < 3; i++) {
            snprintf(what, sizeof(what), "%s check %d", path, i + 1);
            check_admitted(px_cmd(c, "LIMITER CHECK %s", path), what, 3, 2 - i);
        }
        snprintf(what, sizeof(what), "%s check 4", path);
        check_refused(px_cmd(c, "LIMITER CHECK %s", path), what, 3, 0,
                      three[a].max_retry);
        snprintf(what, sizeof(what), "%s peek", path);
        check_admitted(px_cmd(c, "LIMITER PEEK %s COST 0", path), what, 3, 0);
        px_check_int(px_cmd_admin(c, "LIMITER RESET %s", path), 1);
        snprintf(what, sizeof(what), "%s after reset", path);
        check_admitted(px_cmd(c, "LIMITER CHECK %s COST 2", path), what, 3, 1);
        snprintf(what, sizeof(what), "%s cost 2 of 1", path);
        check_refused(px_cmd(c, "LIMITER CHECK %s COST 2", path), what, 3,
                      three[a].left_after_refusal, three[a].max_retry);
        /* What the refusal left (the log keeps refused attempts). */
        snprintf(what, sizeof(what), "%s peek after refusal", path);
        check_admitted(px_cmd(c, "LIMITER PEEK %s COST 0", path), what, 3,
                       three[a].left_after_refusal);
        /* A cost above the limit can never pass: retry -1. */
        struct px_five f =
            px_take_five(px_cmd(c, "LIMITER CHECK %s COST 4", path), path);
        cr_assert_eq(f.limited, 1, "%s cost 4: limited", path);
        cr_assert_eq(f.retry, -1, "%s cost 4: retry", path);
        px_check_int(px_cmd_admin(c, "LIMITER RESET %s", path), 1);
    }
}

/* A field of a hash straight from the node (Redis modes). */
static long long hash_int(const char *key, const char *field)
{
    redisContext *d = px_direct_for(key, strlen(key));
    redisReply *r = lstate_cmd(d, "HGET %s %s", key, field);
    long long v;

    cr_assert_eq(r->type, REDIS_REPLY_STRING, "HGET %s %s", key, field);
    v = strtoll(r->str, NULL, 10);
    freeReplyObject(r);
    redisFree(d);
    return v;
}

/* Two limits on one node: once every 5 s and 5 times per hour. The second
 * check is refused by the first limit and takes nothing from the other. */
static void several_limits(redisContext *c, const char *id)
{
    char path[64], key[KEY_MAX];

    snprintf(path, sizeof(path), "both:%s", id);
    check_admitted(px_cmd(c, "LIMITER CHECK %s", path), "both 1", 1, 0);
    check_refused(px_cmd(c, "LIMITER CHECK %s", path), "both 2", 1, 0, 5);
    if (px_mode_now() != PX_MODE_EMBEDDED) {
        snprintf(key, sizeof(key), "cellgate:{%s}#1:fixed_window", path);
        cr_assert_eq(hash_int(key, "count"), 1,
                     "the refused check took from the hourly limit");
    }
    px_check_int(px_cmd_admin(c, "LIMITER RESET %s", path), 2);
}

/* Levels in two slots: api (fixed window, shared) and api:<id> (token
 * bucket of 2). The third check is refused at the identity's level; what
 * the shared level took is given back. */
static void across_slots(redisContext *c, const char *id)
{
    char path[KEY_MAX];

    snprintf(path, sizeof(path), "api:%s", id);
    check_admitted(px_cmd(c, "LIMITER CHECK %s", path), "api 1", 2, 1);
    check_admitted(px_cmd(c, "LIMITER CHECK %s", path), "api 2", 2, 0);
    check_refused(px_cmd(c, "LIMITER CHECK %s", path), "api 3", 2, 0, 1000);
    if (px_mode_now() != PX_MODE_EMBEDDED) {
        cr_assert_eq(hash_int("cellgate:{api}#0:fixed_window", "count"), 2,
                     "the refused check kept what the shared level took");
    }
}

/* An id whose "cellgate:{api:<id>}" lives on another master than
 * "cellgate:{api}" (any id outside cluster mode). */
static void id_off_api(char *out, size_t outlen)
{
    struct px_cluster *cl = px_cluster();
    const char *api = "cellgate:{api}";
    char key[KEY_MAX];

    snprintf(out, outlen, "x0");
    if (px_mode_now() != PX_MODE_CLUSTER) {
        return;
    }
    for (int i = 0; i < PX_IDENT_TRIES; i++) {
        snprintf(out, outlen, "x%d", i);
        snprintf(key, sizeof(key), "cellgate:{api:%s}", out);
        if (px_cluster_master_of_key(cl, key, strlen(key)) !=
            px_cluster_master_of_key(cl, api, strlen(api))) {
            return;
        }
    }
    cr_assert_fail("no id off the master of {api}");
}

/* Run-time overrides set on `c` and seen on `peer` (the same proxy in
 * embedded mode): parameters, a factor, unlimited, and back. */
static void overrides(redisContext *c, redisContext *peer)
{
    redisReply *r;

    /* A parameter of the node's one limit (the NERD way). */
    px_check_status(px_cmd_admin(c, "LIMITER OVERRIDE SET tb:vip capacity 10"),
                    "OK");
    check_admitted(px_cmd(peer, "LIMITER CHECK tb:vip"), "vip", 10, 9);
    r = px_cmd_admin(peer, "LIMITER OVERRIDE GET tb:vip");
    px_check_str(r, "capacity 10");
    /* A factor (the Sharkey way): max 3 / 3 = 1. */
    px_check_status(px_cmd_admin(c, "LIMITER OVERRIDE SET fw:slow FACTOR 3"),
                    "OK");
    check_admitted(px_cmd(peer, "LIMITER CHECK fw:slow"), "slow 1", 1, 0);
    check_refused(px_cmd(peer, "LIMITER CHECK fw:slow"), "slow 2", 1, 0, DAY_S);
    /* Unlimited. */
    px_check_status(px_cmd_admin(c, "LIMITER OVERRIDE SET sl:free UNLIMITED"),
                    "OK");
    for (int i = 0; i < 5; i++) {
        px_check_five(px_cmd(peer, "LIMITER CHECK sl:free"), "free", 0, 0, 0,
                      -1, 0);
    }
    /* Removed: the file's limits again; the bucket of 10 holding 9 reads
     * as a full bucket of 3. */
    px_check_int(px_cmd_admin(c, "LIMITER OVERRIDE DEL tb:vip"), 1);
    px_check_int(px_cmd_admin(c, "LIMITER OVERRIDE DEL tb:vip"), 0);
    px_check_nil(px_cmd_admin(peer, "LIMITER OVERRIDE GET tb:vip"));
    check_admitted(px_cmd(peer, "LIMITER CHECK tb:vip"), "vip back", 3, 2);
    px_check_int(px_cmd_admin(c, "LIMITER OVERRIDE DEL sl:free"), 1);
    check_admitted(px_cmd(peer, "LIMITER CHECK sl:free"), "free back", 3, 2);
    /* A changed override is seen at once, on either proxy. */
    px_check_status(
        px_cmd_admin(peer, "LIMITER OVERRIDE SET fw:slow FACTOR 0.5"), "OK");
    check_admitted(px_cmd(c, "LIMITER CHECK fw:slow"), "slow x0.5", 6, 4);

    /* Bad overrides: clear errors, nothing stored. */
    px_check_error(px_cmd_admin(c, "LIMITER OVERRIDE SET tb:vip bogus 1"),
                   "ERR unknown parameter 'bogus' of token_bucket (expected "
                   "capacity, refill_per_sec, warmup, cold_factor)");
    px_check_error(px_cmd_admin(c, "LIMITER OVERRIDE SET tb:vip capacity 0"),
                   "ERR capacity: expected a positive integer, got \"0\"");
    px_check_error(px_cmd_admin(c, "LIMITER OVERRIDE SET tb:vip capacity"),
                   "ERR parameters come in pairs: <name> <value>");
    px_check_error(px_cmd_admin(c, "LIMITER OVERRIDE SET both:x capacity 1"),
                   "ERR parameters need a node with exactly one limit, this "
                   "one has 2 (use FACTOR or UNLIMITED)");
    px_check_error(px_cmd_admin(c, "LIMITER OVERRIDE SET tb:x FACTOR 0"),
                   "ERR factor must be a number from 0.000001 to 1000000");
    px_check_error(px_cmd_admin(c, "LIMITER OVERRIDE SET tb:x FACTOR abc"),
                   "ERR factor must be a number from 0.000001 to 1000000");
    px_check_error(px_cmd_admin(c, "LIMITER OVERRIDE SET tb FACTOR 2"),
                   "ERR no limits at path 'tb' (an override names a node "
                   "with limits)");
    px_check_error(px_cmd_admin(c, "LIMITER OVERRIDE SET nope:x FACTOR 2"),
                   "ERR no limits at path 'nope:x' (an override names a node "
                   "with limits)");
    px_check_error(px_cmd_admin(c, "LIMITER OVERRIDE SET tb:{x} FACTOR 2"),
                   "ERR limiter path may not contain '{' or '}'");
    px_check_error(px_cmd_admin(c, "LIMITER OVERRIDE SET tb:x"),
                   "ERR syntax error: LIMITER OVERRIDE SET <path> FACTOR f | "
                   "UNLIMITED | <param> <value> ...");
    px_check_error(px_cmd_admin(c, "LIMITER OVERRIDE FOO tb:x"),
                   "ERR syntax error: LIMITER OVERRIDE SET|DEL|GET <path> ...");
    px_check_error(px_cmd_admin(c, "LIMITER OVERRIDE GET tb:x extra"),
                   "ERR syntax error: LIMITER OVERRIDE SET|DEL|GET <path> ...");
    px_check_nil(px_cmd_admin(c, "LIMITER OVERRIDE GET tb:x"));
}

static void everything(redisContext *c, redisContext *peer)
{
    char id[32];

    each_algorithm(c, "u1");
    px_check_error(px_cmd(c, "LIMITER CHECK fw:w WAIT 100"),
                   "ERR the WAIT option needs gcra, token_bucket or "
                   "leaky_bucket limits: the other algorithms cannot reserve "
                   "a later slot");
    several_limits(c, "u1");
    id_off_api(id, sizeof(id));
    across_slots(c, id);
    overrides(c, peer);
}

Test(it_limiter_algos, every_algorithm_in_embedded_mode, .init = init_embedded,
     .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);

    everything(c, c);
    redisFree(c);
}

Test(it_limiter_algos, every_algorithm_in_single_mode_and_a_peer_proxy,
     .init = init_single, .fini = fini_second, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port), *peer;

    px_path(second.log, sizeof(second.log), "cellgate-second.stderr");
    px_proxy_start_for(&second, &px_env()->redis, px_limits_conf());
    peer = px_connect(second.port);
    everything(c, peer);
    redisFree(peer);
    redisFree(c);
    px_proxy_stop_clean(&second, SIGTERM);
}

Test(it_limiter_algos, every_algorithm_in_cluster_mode, .init = init_cluster,
     .fini = px_cluster_fini, .timeout = 120)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    redisContext *peer = px_connect(px_env()->proxy.port);

    everything(c, peer);
    redisFree(peer);
    redisFree(c);
}

/* An override another proxy wrote, whose news this proxy has not heard
 * (written straight into Redis here), on node `node`'s identity ob,
 * checked in one batch with the identity oa beside it: the batch carries
 * each group's own override fields, so ob is decided by the override (as
 * oc, whose override the proxy knows) and oa by the file. */
static void hidden_override(redisContext *c, redisContext *redis,
                            const char *node, const char *spec)
{
    char path[KEY_MAX], hash[KEY_MAX];
    struct px_five want, oa, ob;
    redisReply *r;

    snprintf(path, sizeof(path), "LIMITER OVERRIDE SET %s:oc %s", node, spec);
    px_check_status(px_cmd_admin(c, path), "OK");
    snprintf(path, sizeof(path), "LIMITER CHECK %s:oc", node);
    want = px_take_five(px_cmd(c, path), "oc");
    cr_assert_neq(want.limit, 3, "%s: the override changes the limit", node);

    snprintf(path, sizeof(path), "LIMITER OVERRIDE SET %s:ob %s", node, spec);
    px_check_status(px_cmd_admin(c, path), "OK");
    snprintf(hash, sizeof(hash), "cellgate:{%s:ob}#overrides", node);
    r = px_cmd(redis, "HGETALL %s", hash);
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    cr_assert_eq(r->elements, 2, "%s: one field", hash);
    snprintf(path, sizeof(path), "LIMITER OVERRIDE DEL %s:ob", node);
    px_check_int(px_cmd_admin(c, path), 1);
    px_check_int(px_cmd(redis, "HSET %s %s %s", hash, r->element[0]->str,
                        r->element[1]->str),
                 1);
    freeReplyObject(r);

    redisAppendCommand(c, "LIMITER CHECK %s:oa", node);
    redisAppendCommand(c, "LIMITER CHECK %s:ob", node);
    cr_assert_eq(redisGetReply(c, (void **)&r), REDIS_OK);
    oa = px_take_five(r, "oa");
    cr_assert_eq(redisGetReply(c, (void **)&r), REDIS_OK);
    ob = px_take_five(r, "ob");
    cr_assert_eq(oa.limited, 0, "%s: oa limited", node);
    cr_assert_eq(oa.limit, 3, "%s: oa's limit %lld", node, oa.limit);
    cr_assert_eq(ob.limited, want.limited, "%s: ob limited", node);
    cr_assert_eq(ob.limit, want.limit, "%s: ob's limit %lld, want %lld", node,
                 ob.limit, want.limit);
    cr_assert_eq(ob.remaining, want.remaining, "%s: ob's remaining", node);
}

Test(it_limiter_algos, a_batched_check_sees_its_own_unheard_override,
     .init = init_single, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    redisContext *redis = px_connect(px_env()->redis.port);

    hidden_override(c, redis, "tb", "capacity 10");
    hidden_override(c, redis, "gc", "FACTOR 0.5");
    redisFree(redis);
    redisFree(c);
}

static void init_embedded_admin(void)
{
    px_limits_start(PX_MODE_EMBEDDED, algos_yaml, "admin_password: s3cret\n");
}

Test(it_limiter_algos, overrides_need_admin, .init = init_embedded_admin,
     .fini = px_env_fini, .timeout = 60)
{
    static const char noperm[] = "NOPERM LIMITER OVERRIDE needs AUTH admin";
    redisContext *c = px_connect(px_env()->proxy.port);

    px_check_error(px_cmd(c, "LIMITER OVERRIDE SET tb:u capacity 9"), noperm);
    px_check_error(px_cmd(c, "LIMITER OVERRIDE GET tb:u"), noperm);
    px_check_error(px_cmd(c, "LIMITER OVERRIDE DEL tb:u"), noperm);
    check_admitted(px_cmd(c, "LIMITER CHECK tb:u"), "not overridden", 3, 2);
    px_check_status(px_cmd(c, "AUTH admin s3cret"), "OK");
    px_check_status(px_cmd(c, "LIMITER OVERRIDE SET tb:u capacity 9"), "OK");
    /* The bucket keeps its level (2): a larger capacity refills, it does
     * not hand out tokens. */
    check_admitted(px_cmd(c, "LIMITER CHECK tb:u"), "overridden", 9, 1);
    redisFree(c);
}
