/* CL.THROTTLE and the raw LIMITER form through the real binary, in its three
 * modes: single Redis (the script runs on it), embedded (no Redis, the
 * in-process store) and cluster (the script runs on the master that owns
 * the key).
 *
 * Replies are checked against the reference values of docs/ARCHITECTURE.md
 * ("CL.THROTTLE, exactly"), which come from redis-cell itself; error texts byte
 * for byte; stored values straight from the node that holds them, against that
 * node's own TIME. Where a reply field depends on how much time passed between
 * steps that may be slow (a migration, a write straight to Redis), the
 * expected range is computed from TIME read before and after, or the limit
 * is slow enough not to care; the docs/ARCHITECTURE.md reference rows
 * themselves assume back-to-back calls less than a second apart, as
 * redis-cell's own values do. Elapsed time is simulated by moving a stored TAT
 * (SET ... KEEPTTL), except in embedded mode, which has no store to edit (one 2
 * s sleep there, whose outcome does not depend on how long it overran). Nothing
 * asserts how fast anything is. */
#include "tests/support/px_test.h"

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/scripts.h"
#include "parser/slot.h"
#include "tests/integration/cluster_fixture.h"
#include "tests/integration/fixture.h"
#include "tests/integration/limiter_support.h"

PX_TEST_SUITE(it_limiter);

#define NS ((int64_t)1000000000) /* nanoseconds per second */
#define MS ((int64_t)1000000)    /* nanoseconds per millisecond */

/* Error texts, as the client sees them (hiredis drops the leading '-'). */
#define E_CELL "Cell error: Store error: "
#define E_USAGE                                                                \
    E_CELL "Usage: cl.throttle <key> <max_burst> <count per period> <period> " \
           "[<quantity>]"
#define E_NOT_INT   E_CELL "Couldn't parse as integer: "
#define E_ZERO_RATE E_CELL "Zero rates are not supported"
#define E_NEG_RATE  E_CELL "Negative rates are not supported"
#define E_NEG_Q     E_CELL "Negative quantities are not supported"
#define E_WRONGTYPE                                                            \
    "WRONGTYPE Operation against a key holding the wrong kind of value"
#define E_LIMITER_ARITY "ERR wrong number of arguments for 'limiter' command"

/* The reference limit: CL.THROTTLE <key> 15 30 60 (EI = 2 s, DVT = 32 s). */
#define REF_ARGS  "15 30 60"
#define REF_LIMIT 16
#define REF_EI    (2 * NS)
#define REF_DVT   (32 * NS)

#define KEY_MAX      64    /* room for every key the tests build */
#define PREFIX_TRIES 10000 /* bound of the search for a tag on a master */
#define RECOVER_MS   15000 /* bound of the wait for a restarted store */
#define RECOVER_STEP 100   /* ms between two probes of that wait */
/* A stopped Redis, failed fast (no allowance for a long command). */
#define DOWN_TIMEOUT   "command_timeout_ms: 300\nbusy_reply_threshold_ms: 0\n"
#define FAILOVER_KEYS  6     /* limited keys on the master that fails over */
#define FAILOVER_WAIT  20000 /* ms allowed for the proxy to follow it */
#define FAILOVER_STEP  20    /* ms between two rounds during it */
#define FLUSH_KEYS     20    /* keys per node in the SCRIPT FLUSH pipeline */
#define CONC_PROXIES   2     /* cellgate processes sharing one Redis */
#define CONC_CONNS     50    /* client connections per proxy */
#define CONC_DEPTH     4     /* pipelined requests per connection per round */
#define CONC_RUN_MS    5000  /* how long the clients keep hammering */
#define CONC_MAX_ROUND 20000 /* bound of the rounds, whatever the clock */
#define CONC_BURST     10    /* CL.THROTTLE shared 10 20 1: max_burst */
#define CONC_COUNT     20    /* count per period */
#define CONC_PERIOD_S  1     /* period, seconds */
#define RESTART_KEYS   20    /* keys per node of the client beside a restart */

/* limits.yaml of the restart tests: LIMITER CHECK user:<id> is the
 * reference limit (CL.THROTTLE <key> 15 30 60) on the node of user:<id>. */
static const char restart_limits[] = "user:\n"
                                     "  children:\n"
                                     "    \"*\":\n"
                                     "      limits: [15, 30, 60]\n";

/* Its path and the proxy.yaml line naming it: static, the proxy borrows
 * them for restarts. */
static char limits_path[PX_PATH_MAX];
static char limits_extra[PX_PATH_MAX + 64];

/* A second cellgate of the test (the embedded twin or a peer in front of
 * the same Redis); stopped in the test body, and by fini_second when the
 * test failed before. Each test runs in its own process. */
static struct px_child second;

/* ---------------- Modes and nodes ---------------- */

static void init_embedded(void)
{
    px_proxy_start(&px_env()->proxy, NULL, NULL);
}

static void init_cluster(void)
{
    px_cluster_init();
    px_cluster_proxy_start(&px_env()->proxy, px_cluster(), NULL);
}

static void init_fail_closed(void)
{
    px_redis_start(&px_env()->redis, NULL);
    px_proxy_start_for(&px_env()->proxy, &px_env()->redis, DOWN_TIMEOUT);
}

static void init_fail_open(void)
{
    px_redis_start(&px_env()->redis, NULL);
    px_proxy_start_for(&px_env()->proxy, &px_env()->redis,
                       "store_down_policy: fail_open\n" DOWN_TIMEOUT);
}

/* Writes restart_limits and limits_extra. */
static void prepare_restart_limits(void)
{
    px_write_file(limits_path, sizeof(limits_path), "limits.yaml",
                  restart_limits);
    snprintf(limits_extra, sizeof(limits_extra), "limits_file: %s\n",
             limits_path);
}

/* A Redis that keeps nothing across a restart (what the fixture starts
 * anyway; named here because the restart tests depend on it). */
static void init_restart_single(void)
{
    static const char *const no_persistence[] = {
        "--save", "", "--appendonly", "no", NULL,
    };

    prepare_restart_limits();
    px_redis_start(&px_env()->redis, no_persistence);
    px_proxy_start_for(&px_env()->proxy, &px_env()->redis, limits_extra);
}

/* Masters without replicas (the fixture's nodes keep nothing either): a
 * restarted master comes back empty as the owner of its slots, with no
 * replica to take them over or to resync it. */
static void init_restart_cluster(void)
{
    prepare_restart_limits();
    px_cluster_start(px_cluster(), PX_CLUSTER_DEFAULT_MASTERS, 0);
    px_cluster_proxy_start(&px_env()->proxy, px_cluster(), limits_extra);
}

/* .fini of the tests with a second proxy: kills it if the body did not get
 * to stop it cleanly, then the usual teardown. */
static void fini_second(void)
{
    if (second.pid > 0) {
        px_proxy_stop(&second, SIGKILL);
    }
    px_env_fini();
}

/* Starts `second` with its own log file: embedded when redis is NULL, else
 * in front of redis. */
static void start_second(const struct px_child *redis)
{
    px_path(second.log, sizeof(second.log), "cellgate-second.stderr");
    if (redis == NULL) {
        px_proxy_start(&second, NULL, NULL);
    } else {
        px_proxy_start_for(&second, redis, NULL);
    }
}

/* Writes to out "<base><n>", the text of a hash tag whose slot master `m`
 * serves (a LIMITER path is the tag of its keys). */
static void tag_on_master(int m, const char *base, char *out, size_t outlen)
{
    struct px_cluster *cl = px_cluster();

    for (int i = 0; i < PREFIX_TRIES; i++) {
        snprintf(out, outlen, "%s%d", base, i);
        if (px_cluster_master_of_key(cl, out, strlen(out)) == m) {
            return;
        }
    }
    cr_assert_fail("no tag {%s<n>} lands on master %d", base, m);
}

/* Writes to out a hash tag "{<base><n>}" whose slot master `m` serves. */
static void prefix_on_master(int m, const char *base, char *out, size_t outlen)
{
    char tag[24]; /* a short base and a number: the callers' 32 bytes hold
                     it with its braces */

    tag_on_master(m, base, tag, sizeof(tag));
    snprintf(out, outlen, "{%s}", tag);
}

/* ---------------- Replies ---------------- */

/* GCRA rule, step 9: whole seconds of a duration, plus one when its sub-second
 * part is at least 1 ms. */
static long long secs_of(int64_t d)
{
    long long s = d / NS;

    return d % NS >= MS ? s + 1 : s;
}

/* GCRA rule, step 7: remaining for a ttl, in microseconds as redis-cell. */
static long long remaining_of(int64_t dvt, int64_t ei, int64_t ttl)
{
    int64_t next = dvt - ttl;

    return next > -ei ? (next / 1000) / (ei / 1000) : 0;
}

/* ---------------- Stored values ---------------- */

/* The node's clock (TIME) in nanoseconds. */
static int64_t node_time_ns(redisContext *d)
{
    redisReply *r = px_cmd(d, "TIME");
    int64_t t;

    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 2, "TIME");
    t = strtoll(r->element[0]->str, NULL, 10) * NS +
        strtoll(r->element[1]->str, NULL, 10) * 1000;
    freeReplyObject(r);
    return t;
}

/* Stores a TAT the way redis-cell does: SET key <ns> PX <ms>. */
static void set_tat(redisContext *d, const char *key, int64_t tat,
                    long long px_ms)
{
    char v[32], px[32];

    snprintf(v, sizeof(v), "%lld", (long long)tat);
    snprintf(px, sizeof(px), "%lld", px_ms);
    px_check_status(px_cmd(d, "SET %s %s PX %s", key, v, px), "OK");
}

/* Asserts the key expires at its TAT and no later than the reset_after the
 * reply announced. written_ns is the node's TIME read just before the
 * request that wrote the key. The script sets a relative expiry (TAT minus
 * its TIME), which Redis adds to its clock when the SET runs, so a script
 * delayed between its TIME and its SET expires that much later: no bound
 * taken around the PTTL alone holds on a busy machine. These do: the
 * expiry is at least the TAT (less the 1 ms its floor drops), and at most
 * the TAT plus the whole time the writing request took, that is, PTTL <=
 * TAT - written_ns when read after it (5 ms of slack for the rounding of
 * TIME's microseconds and PTTL's milliseconds). */
static void check_pttl(redisContext *d, const char *key, int64_t tat,
                       int64_t written_ns, long long reset_s)
{
    int64_t after;
    redisReply *r = px_cmd(d, "PTTL %s", key);
    long long pttl;

    after = node_time_ns(d);
    cr_assert_eq(r->type, REDIS_REPLY_INTEGER);
    pttl = r->integer;
    freeReplyObject(r);
    cr_assert_gt(pttl, 0, "%s has no expiry (PTTL %lld)", key, pttl);
    cr_assert_leq(pttl, reset_s * 1000, "PTTL %lld beyond reset_after %lld s",
                  pttl, reset_s);
    cr_assert(pttl >= (tat - after) / MS - 5 &&
                  pttl <= (tat - written_ns) / MS + 5,
              "PTTL %lld ms does not expire the key at its TAT (%lld ms "
              "ahead of the write's start, %lld ms of the PTTL's reply)",
              pttl, (long long)((tat - written_ns) / MS),
              (long long)((tat - after) / MS));
}

/* Asserts that nothing is stored for key: no key on its node, and a peek
 * through the proxy sees a fresh key (in embedded mode, the only check). */
static void check_fresh(redisContext *c, const char *key, size_t klen,
                        const char *what)
{
    px_check_absent(key, klen, what);
    px_check_five(px_cmd(c, "CL.THROTTLE %b " REF_ARGS " 0", key, klen), what,
                  0, REF_LIMIT, REF_LIMIT, -1, 0);
}

/* ---------------- Shared bodies ---------------- */

/* The docs/ARCHITECTURE.md reference replies on keys under prefix p. */
static void reference_replies(redisContext *c, const char *p)
{
    char k[KEY_MAX];
    redisContext *d;

    snprintf(k, sizeof(k), "%suser123", p);
    px_check_five(px_cmd(c, "CL.THROTTLE %s 15 30 60", k), "user123 15 30 60",
                  0, 16, 15, -1, 2);

    snprintf(k, sizeof(k), "%suser123:b", p);
    px_check_five(px_cmd(c, "CL.THROTTLE %s 0 1 2 1", k), "0 1 2 first", 0, 1,
                  0, -1, 2);
    px_check_five(px_cmd(c, "CL.THROTTLE %s 0 1 2 1", k), "0 1 2 at once", 1, 1,
                  0, 2, 2);
    /* 2 s later: move the stored TAT back, or wait where nothing is
     * stored outside the proxy (any overrun gives the same reply). */
    d = px_direct_for(k, strlen(k));
    if (d == NULL) {
        px_sleep_ms(2100);
    } else {
        int64_t tat = px_get_tat(d, k, strlen(k));
        long long seen = px_info_int(c, "limiter_refusal_cache_invalidations");
        char v[32];
        snprintf(v, sizeof(v), "%lld", (long long)(tat - 2 * NS));
        px_check_status(px_cmd(d, "SET %s %s KEEPTTL", k, v), "OK");
        redisFree(d);
        /* The refused call above put the key in the refusal cache; a write
         * behind the proxy's back reaches it as Redis's invalidation
         * message, which may arrive after our next command. */
        for (int i = 0; i < 2000 && px_info_int(c, "limiter_refusal_cache_"
                                                   "invalidations") == seen;
             i++) {
            px_sleep_ms(1);
        }
    }
    px_check_five(px_cmd(c, "CL.THROTTLE %s 0 1 2 1", k), "0 1 2 after 2 s", 0,
                  1, 0, -1, 2);

    /* A peek on a new key reports remaining = limit and stores nothing. */
    snprintf(k, sizeof(k), "%speek", p);
    px_check_five(px_cmd(c, "CL.THROTTLE %s 15 30 60 0", k), "peek", 0, 16, 16,
                  -1, 0);
    check_fresh(c, k, strlen(k), "peek stored nothing");

    /* More than the limit at once can never succeed: retry_after -1, and
     * the refused request consumes nothing. */
    snprintf(k, sizeof(k), "%sbig", p);
    px_check_five(px_cmd(c, "CL.THROTTLE %s 15 30 60 17", k), "quantity 17", 1,
                  16, 16, -1, 0);
    check_fresh(c, k, strlen(k), "refused quantity stored nothing");
    px_check_five(px_cmd(c, "CL.THROTTLE %s 15 30 60 16", k), "quantity 16", 0,
                  16, 0, -1, 32);
}

/* One step of the burst-4 table at t0 (CL.THROTTLE foo 4 1 1 q). */
struct burst4_step {
    long long q;         /* quantity */
    long long limited;   /* docs/ARCHITECTURE.md */
    long long remaining; /* docs/ARCHITECTURE.md */
};

static const struct burst4_step burst4[] = {
    { 6, 1, 5 }, { 1, 0, 4 }, { 1, 0, 3 }, { 1, 0, 2 }, { 1, 0, 1 },
    { 1, 0, 0 }, { 1, 1, 0 }, { 0, 0, 0 }, { 2, 1, 0 }, { 5, 1, 0 },
};

#define BURST4_STEPS (sizeof(burst4) / sizeof(burst4[0]))

/* Runs the t0 part of the burst-4 table on key, asserts the
 * docs/ARCHITECTURE.md values and keeps the replies in out. */
static void burst4_run(redisContext *c, const char *key,
                       struct px_five out[BURST4_STEPS])
{
    char what[64];

    for (size_t i = 0; i < BURST4_STEPS; i++) {
        snprintf(what, sizeof(what), "burst 4 step %zu (q %lld)", i,
                 burst4[i].q);
        out[i] = px_take_five(
            px_cmd(c, "CL.THROTTLE %s 4 1 1 %lld", key, burst4[i].q), what);
        cr_assert(out[i].limited == burst4[i].limited && out[i].limit == 5 &&
                      out[i].remaining == burst4[i].remaining,
                  "%s: got (%lld, %lld, %lld), want (%lld, 5, %lld)", what,
                  out[i].limited, out[i].limit, out[i].remaining,
                  burst4[i].limited, burst4[i].remaining);
        if (!out[i].limited || burst4[i].q > 5) {
            cr_assert_eq(out[i].retry, -1, "%s: retry_after %lld", what,
                         out[i].retry);
        }
    }
}

/* One malformed request: the arguments after the command name ("K" is
 * replaced by the test's key) and the exact error. */
struct bad_case {
    int argc;            /* arguments after the name */
    const char *argv[8]; /* them */
    const char *error;   /* exact error text */
};

static const struct bad_case bad_cases[] = {
    { 0, { NULL }, E_USAGE },
    { 1, { "K" }, E_USAGE },
    { 3, { "K", "15", "30" }, E_USAGE },
    { 6, { "K", "15", "30", "60", "1", "1" }, E_USAGE },
    { 7, { "K", "15", "30", "60", "1", "1", "1" }, E_USAGE },
    { 4, { "K", "b!", "30", "60" }, E_NOT_INT "b!" },
    { 4, { "K", "15", "3.0", "60" }, E_NOT_INT "3.0" },
    { 4, { "K", "15", "30", "6e1" }, E_NOT_INT "6e1" },
    { 5, { "K", "15", "30", "60", "1x" }, E_NOT_INT "1x" },
    { 5, { "K", "1.5", "abc", "--60", "q" }, E_NOT_INT "1.5" },
    { 5, { "K", "15", "abc", "--60", "q" }, E_NOT_INT "abc" },
    { 5, { "K", "15", "30", "--60", "q" }, E_NOT_INT "--60" },
    { 4, { "K", " 15", "30", "60" }, E_NOT_INT " 15" },
    { 4, { "K", "15", "30 ", "60" }, E_NOT_INT "30 " },
    { 4, { "K", "15", "0x1e", "60" }, E_NOT_INT "0x1e" },
    { 5, { "K", "15", "30", "60", "" }, E_NOT_INT },
    { 4,
      { "K", "9223372036854775808", "30", "60" },
      E_NOT_INT "9223372036854775808" },
    /* Every argument is parsed before the rate is looked at. */
    { 5, { "K", "15", "0", "60", "x" }, E_NOT_INT "x" },
    { 4, { "K", "15", "0", "60" }, E_ZERO_RATE },
    { 4, { "K", "15", "30", "0" }, E_ZERO_RATE },
    { 4, { "K", "15", "-0", "60" }, E_ZERO_RATE },
    { 4, { "K", "15", "-30", "60" }, E_NEG_RATE },
    { 5, { "K", "15", "30", "60", "-1" }, E_NEG_Q },
    { 5, { "K", "15", "30", "60", "-9223372036854775808" }, E_NEG_Q },
};

#define BAD_CASES (sizeof(bad_cases) / sizeof(bad_cases[0]))

/* Sends every bad case as `name` on keys under prefix p and asserts the
 * exact error and that nothing was stored. */
static void error_texts(redisContext *c, const char *p, const char *name)
{
    char key[KEY_MAX], what[96];
    const char *argv[9];
    size_t lens[9];

    for (size_t i = 0; i < BAD_CASES; i++) {
        const struct bad_case *bc = &bad_cases[i];
        redisReply *r;

        snprintf(key, sizeof(key), "%serr:%zu", p, i);
        snprintf(what, sizeof(what), "%s case %zu", name, i);
        argv[0] = name;
        lens[0] = strlen(name);
        for (int k = 0; k < bc->argc; k++) {
            argv[1 + k] = k == 0 ? key : bc->argv[k];
            lens[1 + k] = strlen(argv[1 + k]);
        }
        r = redisCommandArgv(c, 1 + bc->argc, argv, lens);
        cr_assert_not_null(r, "%s: no reply: %s", what, c->errstr);
        cr_assert_eq(r->type, REDIS_REPLY_ERROR, "%s: not an error (type %d)",
                     what, r->type);
        if (bc->argc == 0 && strcmp(name, "LIMITER") == 0) {
            /* LIMITER with nothing after it has no key: Redis's text. */
            cr_assert_str_eq(r->str, E_LIMITER_ARITY, "%s", what);
        } else {
            cr_assert_str_eq(r->str, bc->error, "%s", what);
        }
        freeReplyObject(r);
        if (bc->argc > 0) {
            check_fresh(c, key, strlen(key), what);
        }
    }
    /* Signs and leading zeros are fine. */
    snprintf(key, sizeof(key), "%serr:ok", p);
    px_check_five(px_cmd(c, "%s %s +15 030 60 +1", name, key), "signs", 0, 16,
                  15, -1, 2);
}

/* The zero rate is refused before the key is read: a hash key gives the
 * rate error, not WRONGTYPE (single and cluster only). */
static void zero_rate_before_key(redisContext *c, const char *p)
{
    char key[KEY_MAX];
    redisContext *d;

    snprintf(key, sizeof(key), "%serr:hash", p);
    d = px_direct_for(key, strlen(key));
    px_check_int(px_cmd(d, "HSET %s f v", key), 1);
    px_check_error(px_cmd(c, "CL.THROTTLE %s 15 0 60", key), E_ZERO_RATE);
    px_check_error(px_cmd(c, "CL.THROTTLE %s 15 30 60 -2", key), E_NEG_Q);
    px_check_error(px_cmd(c, "CL.THROTTLE %s 15 30 x", key), E_NOT_INT "x");
    px_check_int(px_cmd(d, "HLEN %s", key), 1);
    redisFree(d);
}

/* LIMITER <key> ... is the same operation: same replies side by side, and
 * one state when both name the same key. */
static void limiter_alias(redisContext *c, const char *p)
{
    static const long long qs[] = { 1, 1, 0, 17, 5, 16, 9, 2 };
    char a[KEY_MAX], b[KEY_MAX], what[64];

    snprintf(a, sizeof(a), "%salias:cl", p);
    snprintf(b, sizeof(b), "%salias:raw", p);
    for (size_t i = 0; i < sizeof(qs) / sizeof(qs[0]); i++) {
        snprintf(what, sizeof(what), "alias step %zu", i);
        struct px_five fa = px_take_five(
            px_cmd(c, "CL.THROTTLE %s " REF_ARGS " %lld", a, qs[i]), what);
        struct px_five fb = px_take_five(
            px_cmd(c, "LIMITER %s " REF_ARGS " %lld", b, qs[i]), what);
        /* The two calls are a moment apart: the second counts may have
         * rounded across one second boundary. */
        cr_assert(fa.limited == fb.limited && fa.limit == fb.limit &&
                      fa.remaining == fb.remaining &&
                      llabs(fa.retry - fb.retry) <= 1 &&
                      llabs(fa.reset - fb.reset) <= 1,
                  "%s: CL.THROTTLE [%lld, %lld, %lld, %lld, %lld] vs LIMITER "
                  "[%lld, %lld, %lld, %lld, %lld]",
                  what, fa.limited, fa.limit, fa.remaining, fa.retry, fa.reset,
                  fb.limited, fb.limit, fb.remaining, fb.retry, fb.reset);
    }
    snprintf(a, sizeof(a), "%salias:both", p);
    px_check_five(px_cmd(c, "CL.THROTTLE %s " REF_ARGS, a), "both 1", 0, 16, 15,
                  -1, 2);
    px_check_five(px_cmd(c, "LIMITER %s " REF_ARGS, a), "both 2", 0, 16, 14, -1,
                  4);
    px_check_five(px_cmd(c, "limiter %s " REF_ARGS " 0", a), "both 3", 0, 16,
                  14, -1, 4);
}

/* The stored value is redis-cell's: a decimal nanosecond TAT from the
 * node's clock, with an expiry matching reset_after; refused requests
 * store nothing. */
static void stored_value(redisContext *c, const char *p)
{
    char k[KEY_MAX], kb[KEY_MAX];
    redisContext *d;
    int64_t t0, t1, tat, tat2, tat_b;
    struct px_five f;

    snprintf(k, sizeof(k), "%sstored", p);
    d = px_direct_for(k, strlen(k));
    t0 = node_time_ns(d);
    px_check_five(px_cmd(c, "CL.THROTTLE %s " REF_ARGS, k), "stored 1", 0, 16,
                  15, -1, 2);
    t1 = node_time_ns(d);
    tat = px_get_tat(d, k, strlen(k));
    cr_assert(tat >= t0 + REF_EI && tat <= t1 + REF_EI,
              "TAT %lld is not the node's TIME + 2 s (TIME in [%lld, %lld])",
              (long long)tat, (long long)t0, (long long)t1);
    check_pttl(d, k, tat, t0, 2);

    /* The next request continues exactly from the stored TAT. */
    t0 = node_time_ns(d);
    f = px_take_five(px_cmd(c, "CL.THROTTLE %s " REF_ARGS, k), "stored 2");
    t1 = node_time_ns(d);
    cr_assert(f.limited == 0 && f.limit == 16 && f.remaining == 14 &&
                  f.retry == -1,
              "stored 2: [%lld, %lld, %lld, %lld]", f.limited, f.limit,
              f.remaining, f.retry);
    cr_assert(f.reset >= secs_of(tat + REF_EI - t1) &&
                  f.reset <= secs_of(tat + REF_EI - t0),
              "stored 2: reset_after %lld", f.reset);
    tat2 = px_get_tat(d, k, strlen(k));
    cr_assert_eq(tat2, tat + REF_EI, "TAT %lld, want %lld", (long long)tat2,
                 (long long)(tat + REF_EI));
    check_pttl(d, k, tat2, t0, f.reset);

    /* Refused for its size: nothing changes, not even the expiry. */
    f = px_take_five(px_cmd(c, "CL.THROTTLE %s " REF_ARGS " 17", k),
                     "stored 3");
    cr_assert(f.limited == 1 && f.remaining == 14 && f.retry == -1,
              "stored 3: [%lld, %lld, %lld, %lld]", f.limited, f.limit,
              f.remaining, f.retry);
    cr_assert_eq(px_get_tat(d, k, strlen(k)), tat2);
    check_pttl(d, k, tat2, t0, f.reset);

    /* Refused for its rate: nothing changes either. */
    snprintf(kb, sizeof(kb), "%sstored:b", p);
    t0 = node_time_ns(d);
    px_check_five(px_cmd(c, "CL.THROTTLE %s 0 1 60", kb), "rate 1", 0, 1, 0, -1,
                  60);
    tat_b = px_get_tat(d, kb, strlen(kb));
    f = px_take_five(px_cmd(c, "CL.THROTTLE %s 0 1 60", kb), "rate 2");
    cr_assert(f.limited == 1 && f.limit == 1 && f.remaining == 0 &&
                  f.retry > 0 && f.retry <= 60,
              "rate 2: [%lld, %lld, %lld, %lld]", f.limited, f.limit,
              f.remaining, f.retry);
    cr_assert_eq(px_get_tat(d, kb, strlen(kb)), tat_b);
    check_pttl(d, kb, tat_b, t0, 60);
    redisFree(d);
}

/* Keys written by redis-cell (SET key <ns> PX <ms>) are continued. */
static void cell_compat(redisContext *c, const char *p)
{
    char k[KEY_MAX];
    redisContext *d;
    int64_t now, tat, t0, t1;
    struct px_five f;

    /* A TAT 100 s ahead: limited until 30 s before it (DVT is 32 s, one
     * request 2 s), nothing written. */
    snprintf(k, sizeof(k), "%scell:far", p);
    d = px_direct_for(k, strlen(k));
    now = node_time_ns(d);
    tat = now + 100 * NS;
    set_tat(d, k, tat, 100000);
    t0 = node_time_ns(d);
    f = px_take_five(px_cmd(c, "CL.THROTTLE %s " REF_ARGS, k), "far");
    t1 = node_time_ns(d);
    cr_assert(f.limited == 1 && f.limit == 16 && f.remaining == 0,
              "far: [%lld, %lld, %lld]", f.limited, f.limit, f.remaining);
    cr_assert(f.retry >= secs_of(tat - t1 - 30 * NS) &&
                  f.retry <= secs_of(tat - t0 - 30 * NS),
              "far: retry_after %lld, want about 70", f.retry);
    cr_assert(f.reset >= secs_of(tat - t1) && f.reset <= secs_of(tat - t0),
              "far: reset_after %lld, want about 100", f.reset);
    cr_assert_eq(px_get_tat(d, k, strlen(k)), tat, "far: the TAT changed");

    /* A TAT 10 s ahead (five requests ago): allowed, continued from it. */
    snprintf(k, sizeof(k), "%scell:near", p);
    now = node_time_ns(d);
    tat = now + 10 * NS;
    set_tat(d, k, tat, 10000);
    t0 = node_time_ns(d);
    f = px_take_five(px_cmd(c, "CL.THROTTLE %s " REF_ARGS, k), "near");
    t1 = node_time_ns(d);
    cr_assert(f.limited == 0 && f.limit == 16 && f.retry == -1,
              "near: [%lld, %lld, %lld, %lld]", f.limited, f.limit, f.remaining,
              f.retry);
    cr_assert(f.remaining >= remaining_of(REF_DVT, REF_EI, tat + REF_EI - t0) &&
                  f.remaining <=
                      remaining_of(REF_DVT, REF_EI, tat + REF_EI - t1),
              "near: remaining %lld, want about 10", f.remaining);
    cr_assert(f.reset >= secs_of(tat + REF_EI - t1) &&
                  f.reset <= secs_of(tat + REF_EI - t0),
              "near: reset_after %lld, want about 12", f.reset);
    cr_assert_eq(px_get_tat(d, k, strlen(k)), tat + REF_EI);
    check_pttl(d, k, tat + REF_EI, t0, f.reset);

    /* A TAT in the past (key not expired yet) counts as a new key. */
    snprintf(k, sizeof(k), "%scell:past", p);
    now = node_time_ns(d);
    set_tat(d, k, now - 10 * NS, 5000);
    px_check_five(px_cmd(c, "CL.THROTTLE %s " REF_ARGS, k), "past", 0, 16, 15,
                  -1, 2);
    cr_assert_geq(px_get_tat(d, k, strlen(k)), now + REF_EI);

    /* redis-cell's "-1" means no TAT. */
    snprintf(k, sizeof(k), "%scell:none", p);
    now = node_time_ns(d);
    px_check_status(px_cmd(d, "SET %s -1 PX 60000", k), "OK");
    px_check_five(px_cmd(c, "CL.THROTTLE %s " REF_ARGS, k), "minus one", 0, 16,
                  15, -1, 2);
    cr_assert_geq(px_get_tat(d, k, strlen(k)), now + REF_EI);
    redisFree(d);
}

/* True when the node `d` has the proxy's function library. */
static int has_library(redisContext *d)
{
    redisReply *r =
        px_cmd(d, "FUNCTION LIST LIBRARYNAME %s", scripts_library()->name);
    int has;

    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    has = r->elements == 1;
    freeReplyObject(r);
    return has;
}

/* fcall+evalsha+eval calls the node `d` has run. */
static long long script_calls(redisContext *d)
{
    return px_cmdstat_calls(d, "fcall") + px_cmdstat_calls(d, "evalsha") +
           px_cmdstat_calls(d, "eval");
}

/* True when the node `d` has the gcra script cached. */
static int has_script(redisContext *d)
{
    redisReply *r = px_cmd(d, "SCRIPT EXISTS %s", scripts_gcra()->sha1);
    int has;

    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    has = r->element[0]->integer == 1;
    freeReplyObject(r);
    return has;
}

/* FUNCTION FLUSH (or SCRIPT FLUSH, `scripts`: a Redis without functions)
 * on the nodes of prefixes[0..n-1]: the proxy's FCALL gets "Function not
 * found" there (its EVALSHA NOSCRIPT) and must recover without the client
 * ever seeing it, also with many calls in flight at once. */
static void code_flush(redisContext *c, const char *const *prefixes, int n,
                       int scripts)
{
    char k[KEY_MAX];

    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < n; i++) {
            snprintf(k, sizeof(k), "%ssf:warm%d", prefixes[i], round);
            px_check_five(px_cmd(c, "CL.THROTTLE %s " REF_ARGS " 0", k), "warm",
                          0, 16, 16, -1, 0);
            redisContext *d = px_direct_for(k, strlen(k));
            if (scripts) {
                cr_assert(has_script(d), "the gcra script is not cached");
                px_check_status(px_cmd(d, "SCRIPT FLUSH"), "OK");
            } else {
                cr_assert(has_library(d), "the library is not on the node");
                cr_assert(!has_script(d), "the proxy used EVALSHA where "
                                          "FCALL works");
                px_check_status(px_cmd(d, "FUNCTION FLUSH"), "OK");
            }
            redisFree(d);
        }
        /* Pipelined: every call of this batch meets the empty cache. */
        for (int rep = 0; rep < 2; rep++) {
            for (int j = 0; j < FLUSH_KEYS; j++) {
                for (int i = 0; i < n; i++) {
                    redisAppendCommand(c, "CL.THROTTLE %ssf:%d:%d " REF_ARGS,
                                       prefixes[i], round, j);
                }
            }
        }
        for (int rep = 0; rep < 2; rep++) {
            for (int j = 0; j < FLUSH_KEYS * n; j++) {
                redisReply *r = px_next(c);
                cr_assert(r->type != REDIS_REPLY_ERROR,
                          "a call after the flush failed: %s", r->str);
                struct px_five f = px_take_five(r, "after flush");
                cr_assert(f.limited == 0 && f.remaining == 15 - rep,
                          "after flush: limited %lld remaining %lld", f.limited,
                          f.remaining);
            }
        }
        for (int i = 0; i < n; i++) {
            snprintf(k, sizeof(k), "%ssf:warm%d", prefixes[i], round);
            px_check_five(px_cmd(c, "CL.THROTTLE %s " REF_ARGS " 2", k),
                          "after flush, one call", 0, 16, 14, -1, 4);
            redisContext *d = px_direct_for(k, strlen(k));
            cr_assert(scripts ? has_script(d) : has_library(d),
                      "the flushed code was never loaded again");
            redisFree(d);
        }
    }
}

/* Keys holding something other than a TAT get WRONGTYPE and are left as
 * they were; keys that are not text work. */
static void types_and_binary(redisContext *c, const char *p)
{
    static const char *const strings[] = {
        "hello", "12abc", "1.5", "", " 1", "99999999999999999999", "1e9",
    };
    char k[KEY_MAX], bin[KEY_MAX];
    redisContext *d;
    redisReply *r;
    size_t blen;

    snprintf(k, sizeof(k), "%swt:hash", p);
    d = px_direct_for(k, strlen(k));
    px_check_int(px_cmd(d, "HSET %s f v", k), 1);
    px_check_error(px_cmd(c, "CL.THROTTLE %s " REF_ARGS, k), E_WRONGTYPE);
    r = px_cmd(d, "HGETALL %s", k);
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
                  strcmp(r->element[1]->str, "v") == 0,
              "the hash changed");
    freeReplyObject(r);
    px_check_int(px_cmd(d, "TTL %s", k), -1);

    snprintf(k, sizeof(k), "%swt:list", p);
    px_check_int(px_cmd(d, "RPUSH %s a", k), 1);
    px_check_error(px_cmd(c, "CL.THROTTLE %s " REF_ARGS, k), E_WRONGTYPE);
    px_check_int(px_cmd(d, "LLEN %s", k), 1);

    for (size_t i = 0; i < sizeof(strings) / sizeof(strings[0]); i++) {
        snprintf(k, sizeof(k), "%swt:s%zu", p, i);
        px_check_status(px_cmd(d, "SET %s %s", k, strings[i]), "OK");
        px_check_error(px_cmd(c, "CL.THROTTLE %s " REF_ARGS, k), E_WRONGTYPE);
        px_check_str(px_cmd(d, "GET %s", k), strings[i]);
        px_check_int(px_cmd(d, "TTL %s", k), -1);
    }

    /* NUL and 0xff bytes: a key of its own, not its text prefix. */
    blen = (size_t)snprintf(bin, sizeof(bin), "%sbin", p);
    memcpy(bin + blen, "\0\xff\xfe", 3);
    blen += 3;
    px_check_five(px_cmd(c, "CL.THROTTLE %b " REF_ARGS, bin, blen), "binary 1",
                  0, 16, 15, -1, 2);
    px_check_five(px_cmd(c, "CL.THROTTLE %b " REF_ARGS, bin, blen), "binary 2",
                  0, 16, 14, -1, 4);
    px_get_tat(d, bin, blen);
    check_fresh(c, bin, blen - 3, "the key's text prefix");
    redisFree(d);
}

/* Waits (bounded) until the proxy answers from the store again. With key
 * NULL, until the limiter does: a fresh key gets the real first reply, not
 * an error or a fail-open admission. Else until EXISTS key through it gets
 * its answer, which runs no script on the node, so the node's function
 * library stays as it is. */
static void wait_store_back(redisContext *c, const char *key)
{
    long long deadline = px_now_ms() + RECOVER_MS;

    for (int n = 0;; n++) {
        redisReply *r = key != NULL
                            ? px_cmd(c, "EXISTS %s", key)
                            : px_cmd(c, "CL.THROTTLE probe:%d " REF_ARGS, n);
        int back = key != NULL
                       ? r->type == REDIS_REPLY_INTEGER
                       : r->type == REDIS_REPLY_ARRAY && r->elements == 5 &&
                             r->element[2]->integer == 15;
        if (r->type == REDIS_REPLY_ERROR) {
            cr_assert(strncmp(r->str, "ERR upstream ", 13) == 0,
                      "unexpected error while the store recovers: %s", r->str);
        }
        freeReplyObject(r);
        if (back) {
            return;
        }
        cr_assert_lt(px_now_ms(), deadline, "the limiter never recovered");
        px_sleep_ms(RECOVER_STEP);
    }
}

/* Asserts that the node `d` has just started with nothing: no key, no
 * function library, no FCALL run yet. */
static void check_node_empty(redisContext *d)
{
    redisReply *r = px_cmd(d, "FUNCTION LIST");

    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    cr_assert_eq(r->elements, 0, "%zu libraries after the restart",
                 (size_t)r->elements);
    freeReplyObject(r);
    px_check_int(px_cmd(d, "DBSIZE"), 0);
    cr_assert_eq(px_cmdstat_calls(d, "fcall"), 0);
}

/* The node that stores the key "<p>rs" and LIMITER path `path` (the
 * proxy's limits_extra) restarts, through `restart`, without persistence:
 * it comes back with neither the TATs nor the function library. Each of
 * the proxy's new connections there loads the library before anything
 * else, so no FCALL meets its absence ("Function not found", which the
 * proxy would retry after commands pipelined behind the call had run) and
 * no client sees it: neither the client whose state was lost nor a second
 * one with calls on keys under others[0..n-1] in flight at the same
 * time. */
static void restart_empty(const char *p, const char *path,
                          const char *const *others, int n,
                          void (*restart)(void))
{
    struct px_child *proxy = &px_env()->proxy;
    /* Connected one after the other, so with consecutive ids: between
     * them they ride both shared connections (lanes) of the default
     * upstream pool of 2. */
    redisContext *c = px_connect(proxy->port);
    redisContext *b = px_connect(proxy->port);
    char k[KEY_MAX], what[KEY_MAX + 32];
    redisContext *d;

    snprintf(k, sizeof(k), "%srs", p);
    d = px_direct_for(k, strlen(k));
    /* Before any call: the library the proxy's connections loaded at
     * start is there. */
    for (long long end = px_now_ms() + RECOVER_MS; !has_library(d);) {
        cr_assert_lt(px_now_ms(), end, "the library never reached the node");
        px_sleep_ms(RECOVER_STEP);
    }
    redisFree(d);
    px_check_five(px_cmd(c, "CL.THROTTLE %s " REF_ARGS, k), "before", 0, 16, 15,
                  -1, 2);
    px_check_five(px_cmd(c, "LIMITER CHECK %s", path), "LIMITER before", 0, 16,
                  15, -1, 2);

    /* The proxy is frozen across the restart: nothing it sends can reach
     * the new node before it is checked empty. */
    cr_assert_eq(kill(proxy->pid, SIGSTOP), 0);
    restart();
    d = px_direct_for(k, strlen(k));
    check_node_empty(d);
    cr_assert_eq(kill(proxy->pid, SIGCONT), 0);
    /* The proxy lost its connections to the node: the calls below go out
     * once both lanes are back, and no limiter call goes before them. */
    wait_store_back(c, k);
    wait_store_back(b, k);

    /* In flight together: c's calls, whose state the node lost (fresh
     * replies again), with an EXISTS of the key the first one writes
     * between them (a call retried after it would leave it 0), then b's
     * on fresh keys. */
    redisAppendCommand(c, "CL.THROTTLE %s " REF_ARGS, k);
    redisAppendCommand(c, "EXISTS %s", k);
    redisAppendCommand(c, "LIMITER CHECK %s", path);
    px_flush(c);
    for (int j = 0; j < RESTART_KEYS; j++) {
        for (int i = 0; i < n; i++) {
            redisAppendCommand(b, "CL.THROTTLE %srs:%d " REF_ARGS, others[i],
                               j);
        }
    }
    px_flush(b);
    px_check_five(px_next(c), "after the restart", 0, 16, 15, -1, 2);
    px_check_int(px_next(c), 1);
    px_check_five(px_next(c), "LIMITER after the restart", 0, 16, 15, -1, 2);
    for (int j = 0; j < RESTART_KEYS * n; j++) {
        redisReply *r = px_next(b);
        snprintf(what, sizeof(what), "the client beside, call %d", j);
        cr_assert(r->type != REDIS_REPLY_ERROR, "%s: %s", what, r->str);
        px_check_five(r, what, 0, 16, 15, -1, 2);
    }

    cr_assert(has_library(d), "the library never came back");
    cr_assert_gt(px_cmdstat_calls(d, "function|load"), 0,
                 "the node never got FUNCTION LOAD");
    cr_assert_gt(px_cmdstat_calls(d, "fcall"), 0, "the node never ran FCALL");
    cr_assert_eq(px_cmdstat_failed(d, "fcall"), 0,
                 "an FCALL met the library's absence");
    redisFree(d);
    redisFree(b);
    redisFree(c);
}

/* ---------------- Single Redis ---------------- */

Test(it_limiter, reference_replies_match_redis_cell_in_single_mode,
     .init = px_env_init, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    struct px_five out[BURST4_STEPS];

    reference_replies(c, "");
    burst4_run(c, "foo", out);
    redisFree(c);
}

Test(it_limiter, error_texts_are_byte_exact_and_store_nothing_in_single_mode,
     .init = px_env_init, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);

    error_texts(c, "", "CL.THROTTLE");
    error_texts(c, "raw:", "LIMITER");
    zero_rate_before_key(c, "");
    redisFree(c);
}

Test(it_limiter, stored_tat_is_the_nodes_time_in_ns_with_matching_pttl,
     .init = px_env_init, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);

    stored_value(c, "");
    redisFree(c);
}

Test(it_limiter, keys_written_by_redis_cell_are_continued, .init = px_env_init,
     .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);

    cell_compat(c, "");
    redisFree(c);
}

Test(it_limiter, function_flush_never_shows_an_error_in_single_mode,
     .init = px_env_init, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    static const char *const prefixes[] = { "" };

    code_flush(c, prefixes, 1, 0);
    redisFree(c);
}

/* kill -9 and start again: with no persistence, an empty Redis. */
static void restart_redis(void)
{
    px_redis_kill(&px_env()->redis, SIGKILL);
    px_redis_restart(&px_env()->redis);
}

Test(it_limiter, redis_restarted_without_its_library_never_shows_an_error,
     .init = init_restart_single, .fini = px_env_fini, .timeout = 60)
{
    static const char *const others[] = { "other:" };

    restart_empty("", "user:rs", others, 1, restart_redis);
}

/* A Redis whose FCALL and FUNCTION are gone (as on Redis 6, where they do
 * not exist: "unknown command"). */
static void init_no_functions(void)
{
    static const char *const extra[] = {
        "--rename-command", "FCALL", "",   "--rename-command",
        "FUNCTION",         "",      NULL,
    };

    px_redis_start(&px_env()->redis, extra);
    px_proxy_start_for(&px_env()->proxy, &px_env()->redis, NULL);
}

Test(it_limiter, without_functions_scripts_run_and_survive_script_flush,
     .init = init_no_functions, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    static const char *const prefixes[] = { "" };

    code_flush(c, prefixes, 1, 1);
    /* LIMITER's script too. */
    px_check_error_prefix(px_cmd(c, "LIMITER CHECK nosuchroot:x"), "ERR ");
    redisFree(c);
}

Test(it_limiter, wrong_types_get_wrongtype_and_binary_keys_work,
     .init = px_env_init, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);

    types_and_binary(c, "");
    redisFree(c);
}

Test(it_limiter, limiter_raw_form_equals_cl_throttle, .init = px_env_init,
     .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);

    limiter_alias(c, "");
    redisFree(c);
}

Test(it_limiter, redis_down_fails_closed_with_upstream_error_then_recovers,
     .init = init_fail_closed, .fini = px_env_fini, .timeout = 60)
{
    struct px_env *env = px_env();
    redisContext *c = px_connect(env->proxy.port);

    px_check_five(px_cmd(c, "CL.THROTTLE dn " REF_ARGS), "before", 0, 16, 15,
                  -1, 2);
    /* Redis stops answering: the command times out. */
    cr_assert_eq(kill(env->redis.pid, SIGSTOP), 0);
    px_check_error_prefix(px_cmd(c, "CL.THROTTLE dn " REF_ARGS),
                          "ERR upstream ");
    cr_assert_eq(kill(env->redis.pid, SIGCONT), 0);
    wait_store_back(c, NULL);
    /* Redis is gone: refused connections. */
    px_redis_kill(&env->redis, SIGKILL);
    for (int i = 0; i < 3; i++) {
        px_check_error_prefix(px_cmd(c, "CL.THROTTLE dn " REF_ARGS),
                              "ERR upstream ");
    }
    /* Arguments are still checked first. */
    px_check_error(px_cmd(c, "CL.THROTTLE dn 15 30 x"), E_NOT_INT "x");
    px_redis_restart(&env->redis);
    wait_store_back(c, NULL);
    px_check_five(px_cmd(c, "CL.THROTTLE dn2 0 1 60"), "after restart", 0, 1, 0,
                  -1, 60);
    struct px_five f =
        px_take_five(px_cmd(c, "CL.THROTTLE dn2 0 1 60"), "limited");
    cr_assert_eq(f.limited, 1, "not limited after the restart");
    redisFree(c);
}

Test(it_limiter, redis_down_with_fail_open_admits_with_zero_remaining,
     .init = init_fail_open, .fini = px_env_fini, .timeout = 60)
{
    struct px_env *env = px_env();
    redisContext *c = px_connect(env->proxy.port);

    px_check_five(px_cmd(c, "CL.THROTTLE up " REF_ARGS), "before", 0, 16, 15,
                  -1, 2);
    cr_assert_eq(kill(env->redis.pid, SIGSTOP), 0);
    px_check_five(px_cmd(c, "CL.THROTTLE up " REF_ARGS), "stopped", 0, 16, 0,
                  -1, 0);
    cr_assert_eq(kill(env->redis.pid, SIGCONT), 0);
    wait_store_back(c, NULL);
    px_redis_kill(&env->redis, SIGKILL);
    for (int i = 0; i < 3; i++) {
        px_check_five(px_cmd(c, "CL.THROTTLE up " REF_ARGS), "down", 0, 16, 0,
                      -1, 0);
        px_check_five(px_cmd(c, "CL.THROTTLE up 0 1 60"), "down, limit 1", 0, 1,
                      0, -1, 0);
    }
    /* Only the limiter fails open: bad arguments and ordinary commands
     * still get their errors. */
    px_check_error(px_cmd(c, "CL.THROTTLE up 15 30 60 -1"), E_NEG_Q);
    px_check_error_prefix(px_cmd(c, "GET up"), "ERR upstream ");
    px_redis_restart(&env->redis);
    wait_store_back(c, NULL);
    px_check_five(px_cmd(c, "CL.THROTTLE up2 0 1 60"), "after restart", 0, 1, 0,
                  -1, 60);
    struct px_five f =
        px_take_five(px_cmd(c, "CL.THROTTLE up2 0 1 60"), "limited");
    cr_assert_eq(f.limited, 1, "not limited after the restart");
    redisFree(c);
}

Test(it_limiter, two_proxies_on_one_redis_never_admit_more_than_the_rate,
     .init = px_env_init, .fini = fini_second, .timeout = 60)
{
    struct px_env *env = px_env();
    redisContext *cs[CONC_PROXIES * CONC_CONNS];
    long long admitted = 0, refused = 0, start, elapsed, bound;
    const int n = CONC_PROXIES * CONC_CONNS;
    int rounds = 0;

    start_second(&env->redis);
    for (int i = 0; i < n; i++) {
        cs[i] = px_connect(i % 2 == 0 ? env->proxy.port : second.port);
    }
    start = px_now_ms();
    do {
        for (int i = 0; i < n; i++) {
            for (int j = 0; j < CONC_DEPTH; j++) {
                redisAppendCommand(cs[i], "CL.THROTTLE shared %d %d %d",
                                   CONC_BURST, CONC_COUNT, CONC_PERIOD_S);
            }
            px_flush(cs[i]);
        }
        for (int i = 0; i < n; i++) {
            for (int j = 0; j < CONC_DEPTH; j++) {
                struct px_five f = px_take_five(px_next(cs[i]), "shared key");
                cr_assert_eq(f.limit, CONC_BURST + 1);
                cr_assert(f.remaining >= 0 && f.remaining <= CONC_BURST + 1);
                if (f.limited) {
                    refused++;
                    cr_assert(f.retry >= 0 && f.retry <= 1, "retry %lld",
                              f.retry);
                } else {
                    admitted++;
                    cr_assert_eq(f.retry, -1);
                }
            }
        }
        rounds++;
    } while (px_now_ms() - start < CONC_RUN_MS && rounds < CONC_MAX_ROUND);
    elapsed = px_now_ms() - start;
    for (int i = 0; i < n; i++) {
        redisFree(cs[i]);
    }
    /* GCRA admits the burst plus one per emission interval of the time
     * the run spanned, plus one at the boundary. */
    bound = CONC_BURST + 1 +
            (long long)CONC_COUNT * ((elapsed + 999) / 1000) / CONC_PERIOD_S +
            1;
    cr_log_info("shared key: %lld admitted, %lld refused in %lld ms, %d "
                "rounds, bound %lld",
                admitted, refused, elapsed, rounds, bound);
    cr_assert_geq(admitted, 1);
    cr_assert_leq(admitted, bound, "%lld admitted in %lld ms (bound %lld)",
                  admitted, elapsed, bound);
    px_proxy_stop_clean(&second, SIGTERM);
}

/* ---------------- Embedded ---------------- */

Test(it_limiter, reference_replies_match_redis_cell_in_embedded_mode,
     .init = init_embedded, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    struct px_five out[BURST4_STEPS];

    reference_replies(c, "");
    burst4_run(c, "foo", out);
    limiter_alias(c, "");
    redisFree(c);
}

Test(it_limiter, error_texts_are_byte_exact_and_store_nothing_in_embedded_mode,
     .init = init_embedded, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);

    error_texts(c, "", "CL.THROTTLE");
    error_texts(c, "raw:", "LIMITER");
    redisFree(c);
}

Test(it_limiter, embedded_keys_are_independent_and_outlive_connections,
     .init = init_embedded, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    static const char bin[] = "bin\0\xff\xfe";

    px_check_five(px_cmd(c, "CL.THROTTLE a " REF_ARGS), "a 1", 0, 16, 15, -1,
                  2);
    px_check_five(px_cmd(c, "CL.THROTTLE a " REF_ARGS), "a 2", 0, 16, 14, -1,
                  4);
    px_check_five(px_cmd(c, "CL.THROTTLE b " REF_ARGS), "b 1", 0, 16, 15, -1,
                  2);
    px_check_five(px_cmd(c, "CL.THROTTLE %b " REF_ARGS, bin, sizeof(bin) - 1),
                  "binary 1", 0, 16, 15, -1, 2);
    redisFree(c);
    /* A new connection sees the same state. */
    c = px_connect(px_env()->proxy.port);
    px_check_five(px_cmd(c, "CL.THROTTLE a " REF_ARGS), "a 3", 0, 16, 13, -1,
                  6);
    px_check_five(px_cmd(c, "CL.THROTTLE b " REF_ARGS), "b 2", 0, 16, 14, -1,
                  4);
    px_check_five(px_cmd(c, "CL.THROTTLE %b " REF_ARGS, bin, sizeof(bin) - 1),
                  "binary 2", 0, 16, 14, -1, 4);
    check_fresh(c, "bin", 3, "the binary key's text prefix");
    check_fresh(c, "c", 1, "an untouched key");
    /* Ordinary commands still have no store. */
    px_check_error(px_cmd(c, "GET a"), "ERR no upstream configured");
    redisFree(c);
}

Test(it_limiter, embedded_and_single_mode_agree_on_the_burst_4_sequence,
     .init = px_env_init, .fini = fini_second, .timeout = 60)
{
    redisContext *cr, *ce;
    struct px_five fr[BURST4_STEPS], fe[BURST4_STEPS];

    start_second(NULL);
    cr = px_connect(px_env()->proxy.port);
    ce = px_connect(second.port);
    burst4_run(cr, "foo", fr);
    burst4_run(ce, "foo", fe);
    for (size_t i = 0; i < BURST4_STEPS; i++) {
        cr_assert(fr[i].limited == fe[i].limited &&
                      fr[i].limit == fe[i].limit &&
                      fr[i].remaining == fe[i].remaining,
                  "step %zu: redis (%lld, %lld, %lld) vs embedded (%lld, "
                  "%lld, %lld)",
                  i, fr[i].limited, fr[i].limit, fr[i].remaining, fe[i].limited,
                  fe[i].limit, fe[i].remaining);
    }
    redisFree(cr);
    redisFree(ce);
    px_proxy_stop_clean(&second, SIGTERM);
}

/* ---------------- Cluster ---------------- */

Test(it_limiter, reference_replies_and_errors_hold_on_every_master,
     .init = init_cluster, .fini = px_cluster_fini, .timeout = 120)
{
    struct px_cluster *cl = px_cluster();
    redisContext *c = px_connect(px_env()->proxy.port);
    struct px_five out[BURST4_STEPS];
    char p[32], k[KEY_MAX];

    for (int m = 0; m < cl->nmasters; m++) {
        prefix_on_master(m, "r", p, sizeof(p));
        reference_replies(c, p);
        snprintf(k, sizeof(k), "%sfoo", p);
        burst4_run(c, k, out);
        error_texts(c, p, "CL.THROTTLE");
        snprintf(k, sizeof(k), "%sraw:", p);
        error_texts(c, k, "LIMITER");
        zero_rate_before_key(c, p);
        limiter_alias(c, p);
    }
    redisFree(c);
}

Test(it_limiter, stored_values_live_on_the_owning_master_only,
     .init = init_cluster, .fini = px_cluster_fini, .timeout = 120)
{
    struct px_cluster *cl = px_cluster();
    redisContext *c = px_connect(px_env()->proxy.port);
    char p[32];

    for (int m = 0; m < cl->nmasters; m++) {
        prefix_on_master(m, "s", p, sizeof(p));
        stored_value(c, p);
        cell_compat(c, p);
        types_and_binary(c, p);
    }
    /* Every master holds only the keys of its own slots. */
    for (int m = 0; m < cl->nmasters; m++) {
        redisContext *d = px_cluster_connect(cl, m);
        redisReply *r = px_cmd(d, "KEYS *");
        cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
        cr_assert_gt(r->elements, 0, "master %d holds no key", m);
        for (size_t i = 0; i < r->elements; i++) {
            const redisReply *e = r->element[i];
            cr_assert_eq(px_cluster_master_of_key(cl, e->str, e->len), m,
                         "master %d holds %s", m, e->str);
        }
        freeReplyObject(r);
        redisFree(d);
    }
    redisFree(c);
}

Test(it_limiter, function_flush_on_every_master_never_shows_an_error,
     .init = init_cluster, .fini = px_cluster_fini, .timeout = 120)
{
    struct px_cluster *cl = px_cluster();
    redisContext *c = px_connect(px_env()->proxy.port);
    char ps[PX_CLUSTER_MAX_NODES][32];
    const char *prefixes[PX_CLUSTER_MAX_NODES];

    for (int m = 0; m < cl->nmasters; m++) {
        prefix_on_master(m, "f", ps[m], sizeof(ps[m]));
        prefixes[m] = ps[m];
    }
    code_flush(c, prefixes, cl->nmasters, 0);
    redisFree(c);
}

/* The master that restart_master restarts. */
static int restarted;

/* kill -9 the master `restarted` and start it again: with no persistence
 * and no replica, it serves its slots again empty. */
static void restart_master(void)
{
    struct px_cluster *cl = px_cluster();

    px_cluster_kill(cl, restarted);
    px_cluster_restart(cl, restarted);
    px_cluster_wait_ok(cl);
}

Test(it_limiter, master_restarted_without_its_library_never_shows_an_error,
     .init = init_restart_cluster, .fini = px_cluster_fini, .timeout = 120)
{
    struct px_cluster *cl = px_cluster();
    char p[32], path[KEY_MAX], ps[PX_CLUSTER_MAX_NODES][32];
    const char *others[PX_CLUSTER_MAX_NODES];

    restarted = 1;
    prefix_on_master(restarted, "rs", p, sizeof(p));
    tag_on_master(restarted, "user:rs", path, sizeof(path));
    for (int m = 0; m < cl->nmasters; m++) {
        prefix_on_master(m, "o", ps[m], sizeof(ps[m]));
        others[m] = ps[m];
    }
    restart_empty(p, path, others, cl->nmasters, restart_master);
}

/* One call on key with a slow limit (EI 20 s, so the few seconds a
 * migration step takes never change `remaining`): asserts it is admitted
 * with `remaining` left. */
static void slow_call(redisContext *c, const char *key, long long remaining)
{
    redisReply *r = px_cmd(c, "CL.THROTTLE %s 15 3 60", key);
    struct px_five f;

    cr_assert(r->type != REDIS_REPLY_ERROR, "%s: %s", key, r->str);
    f = px_take_five(r, key);
    cr_assert(f.limited == 0 && f.limit == 16 && f.remaining == remaining &&
                  f.retry == -1,
              "%s: [%lld, %lld, %lld, %lld], want remaining %lld", key,
              f.limited, f.limit, f.remaining, f.retry, remaining);
}

Test(it_limiter, limiter_calls_follow_ask_and_moved_during_resharding,
     .init = init_cluster, .fini = px_cluster_fini, .timeout = 120)
{
    struct px_cluster *cl = px_cluster();
    redisContext *c = px_connect(px_env()->proxy.port);
    struct px_cluster_migration mig;
    unsigned slot = slot_for_key("mig", 3);
    int from = px_cluster_master_of_slot(cl, slot);
    int to = (from + 1) % cl->nmasters;
    redisContext *d;
    int64_t tat;

    slow_call(c, "{mig}a", 15);
    slow_call(c, "{mig}a", 14);
    px_cluster_migrate_begin(cl, &mig, slot, to);
    /* Migrating: the source still runs calls on the keys it holds, and
     * answers -ASK for keys it does not have. */
    slow_call(c, "{mig}a", 13);
    slow_call(c, "{mig}b", 15);
    d = px_cluster_connect(cl, to);
    /* The new key landed on the target, which shows it only after
     * ASKING while the slot is still importing. */
    px_check_error_prefix(px_cmd(d, "EXISTS {mig}b"), "MOVED ");
    px_check_status(px_cmd(d, "ASKING"), "OK");
    px_check_int(px_cmd(d, "EXISTS {mig}b"), 1);
    /* The key moves; the target has lost the library: -ASK, then
     * "Function not found" after ASKING, and neither may reach the
     * client. */
    px_check_status(px_cmd(d, "FUNCTION FLUSH"), "OK");
    px_cluster_migrate_keys(cl, &mig, 0);
    slow_call(c, "{mig}a", 12);
    slow_call(c, "{mig}b", 14);
    px_cluster_migrate_finish(cl, &mig);
    /* Moved: -MOVED once, then straight to the new owner, which gets the
     * library again. */
    slow_call(c, "{mig}a", 11);
    cr_assert(has_library(d), "the library never reached the target");
    slow_call(c, "{mig}c", 15);
    tat = px_get_tat(d, "{mig}a", 6);
    slow_call(c, "{mig}a", 10);
    cr_assert_eq(px_get_tat(d, "{mig}a", 6), tat + 20 * NS,
                 "the call did not continue from the migrated TAT");
    redisFree(d);
    d = px_cluster_connect(cl, from);
    px_check_int(px_cmd(d, "DBSIZE"), 0);
    redisFree(d);
    redisFree(c);
}

/* Keys a failover test works on: limited keys of master 0, and one hash
 * tag per master for fresh keys (tags keep their slot, whoever serves it). */
struct failover_keys {
    char limited[FAILOVER_KEYS][KEY_MAX]; /* limited for a minute */
    int64_t tats[FAILOVER_KEYS];          /* their TATs before the switch */
    char fresh[PX_CLUSTER_MAX_NODES][32]; /* a tag per initial master */
};

/* One round of calls on the limited keys and on fresh keys of every
 * master. Returns the number of error replies (none may be NOSCRIPT); a
 * limited key must never be admitted. */
static int failover_round(redisContext *c, const struct failover_keys *fk,
                          int round)
{
    int nm = px_cluster()->nmasters, errors = 0;

    for (int i = 0; i < FAILOVER_KEYS; i++) {
        redisAppendCommand(c, "CL.THROTTLE %s 0 1 60", fk->limited[i]);
    }
    for (int m = 0; m < nm; m++) {
        redisAppendCommand(c, "CL.THROTTLE %sn%d " REF_ARGS, fk->fresh[m],
                           round);
    }
    for (int i = 0; i < FAILOVER_KEYS + nm; i++) {
        redisReply *r = px_next(c);
        if (r->type == REDIS_REPLY_ERROR) {
            cr_assert_null(strstr(r->str, "NOSCRIPT"), "NOSCRIPT leaked: %s",
                           r->str);
            cr_log_info("round %d, call %d: %s", round, i, r->str);
            errors++;
            freeReplyObject(r);
        } else if (i < FAILOVER_KEYS) {
            struct px_five f = px_take_five(r, fk->limited[i]);
            cr_assert(f.limited == 1 && f.limit == 1 && f.retry > 0 &&
                          f.retry <= 60,
                      "%s: limited before the failover, now [%lld, %lld, "
                      "%lld, %lld, %lld]",
                      fk->limited[i], f.limited, f.limit, f.remaining, f.retry,
                      f.reset);
        } else {
            px_check_five(r, "fresh key", 0, 16, 15, -1, 2);
        }
    }
    return errors;
}

Test(it_limiter, failover_keeps_limiting_and_honours_replicated_state,
     .init = init_cluster, .fini = px_cluster_fini, .timeout = 120)
{
    struct px_cluster *cl = px_cluster();
    redisContext *c = px_connect(px_env()->proxy.port);
    static struct failover_keys fk;
    int replicas[4], promoted, errors = 0, round = 0, last, switched;
    long long deadline;
    redisContext *d;
    redisReply *r;
    char p[32];

    /* Keys on master 0, each limited for a minute. */
    for (int i = 0; i < FAILOVER_KEYS; i++) {
        char base[16];
        snprintf(base, sizeof(base), "fo%d_", i);
        prefix_on_master(0, base, p, sizeof(p));
        snprintf(fk.limited[i], sizeof(fk.limited[i]), "%slimited", p);
        px_check_five(px_cmd(c, "CL.THROTTLE %s 0 1 60", fk.limited[i]),
                      "first", 0, 1, 0, -1, 60);
        struct px_five f = px_take_five(
            px_cmd(c, "CL.THROTTLE %s 0 1 60", fk.limited[i]), "second");
        cr_assert_eq(f.limited, 1);
    }
    for (int m = 0; m < cl->nmasters; m++) {
        prefix_on_master(m, "new", fk.fresh[m], sizeof(fk.fresh[m]));
    }
    d = px_cluster_connect(cl, 0);
    for (int i = 0; i < FAILOVER_KEYS; i++) {
        fk.tats[i] = px_get_tat(d, fk.limited[i], strlen(fk.limited[i]));
    }
    r = px_cmd(d, "WAIT 1 5000");
    cr_assert(r->type == REDIS_REPLY_INTEGER && r->integer >= 1,
              "WAIT did not confirm the replication");
    freeReplyObject(r);
    redisFree(d);

    /* The replica to promote has the library before any failover: Redis
     * replicates FUNCTION LOAD, so the promoted node needs no load. */
    cr_assert_gt(px_cluster_replicas_of(cl, 0, replicas, 4), 0);
    promoted = replicas[0];
    d = px_cluster_connect(cl, promoted);
    cr_assert(has_library(d), "the replica did not get the library");
    redisFree(d);

    /* The failover runs while rounds of calls go on: CLUSTER FAILOVER only
     * starts it; the rounds continue until the replica reports itself
     * master and a whole round went through without an error. */
    errors += failover_round(c, &fk, round++);
    d = px_cluster_connect(cl, promoted);
    px_check_status(px_cmd(d, "CLUSTER FAILOVER"), "OK");
    deadline = px_now_ms() + FAILOVER_WAIT;
    do {
        last = failover_round(c, &fk, round++);
        errors += last;
        r = px_cmd(d, "ROLE");
        switched = r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
                   strcmp(r->element[0]->str, "master") == 0;
        freeReplyObject(r);
        cr_assert_lt(px_now_ms(), deadline,
                     "no clean round within %d ms of the failover (switched: "
                     "%d)",
                     FAILOVER_WAIT, switched);
        if (!switched || last != 0) {
            px_sleep_ms(FAILOVER_STEP);
        }
    } while (!switched || last != 0);
    redisFree(d);
    px_cluster_wait_ok(cl);
    cr_assert(px_cluster_is_master(cl, promoted));
    cr_assert_eq(failover_round(c, &fk, round++), 0,
                 "errors after the cluster settled");
    cr_log_info("failover: %d transient errors over %d rounds", errors, round);

    /* The promoted node holds the replicated TATs and ran the library. */
    d = px_cluster_connect(cl, promoted);
    for (int i = 0; i < FAILOVER_KEYS; i++) {
        cr_assert_eq(
            px_cluster_master_of_key(cl, fk.limited[i], strlen(fk.limited[i])),
            promoted);
        cr_assert_eq(px_get_tat(d, fk.limited[i], strlen(fk.limited[i])),
                     fk.tats[i], "%s: the TAT changed", fk.limited[i]);
    }
    cr_assert(has_library(d), "the library is gone from the promoted node");
    cr_assert_gt(px_cmdstat_calls(d, "fcall"), 0,
                 "the promoted node never ran FCALL");
    redisFree(d);
    redisFree(c);
}

/* Calls of one loop turn go out as one script call per node (or slot):
 * within it each call still sees the ones before it, in request order. */
static void batched_calls_keep_order(void)
{
    redisContext *c = px_connect(px_env()->proxy.port);

    for (int i = 0; i < 40; i++) {
        redisAppendCommand(c, "CL.THROTTLE batch:a 4 1 60");
        redisAppendCommand(c, "CL.THROTTLE batch:b 9 1 60 2");
    }
    for (int i = 0; i < 40; i++) {
        redisReply *a = px_next(c);
        redisReply *b = px_next(c);
        cr_assert_eq(a->type, REDIS_REPLY_ARRAY);
        cr_assert_eq(b->type, REDIS_REPLY_ARRAY);
        /* a: 5 admitted (remaining 4..0), then refused with 0 left. */
        cr_assert_eq(a->element[0]->integer, i < 5 ? 0 : 1, "a call %d", i);
        cr_assert_eq(a->element[2]->integer, i < 5 ? 4 - i : 0, "a call %d", i);
        /* b: quantity 2 of 10: 5 admitted (8, 6, 4, 2, 0 left). */
        cr_assert_eq(b->element[0]->integer, i < 5 ? 0 : 1, "b call %d", i);
        cr_assert_eq(b->element[2]->integer, i < 5 ? 8 - 2 * i : 0, "b call %d",
                     i);
        freeReplyObject(a);
        freeReplyObject(b);
    }
    /* A wrong-type key in the same batch fails alone. */
    redisContext *d = px_connect(px_env()->proxy.port);
    px_check_int(px_cmd(d, "HSET batch:h f v"), 1);
    redisFree(d);
    redisAppendCommand(c, "CL.THROTTLE batch:c 1 1 60");
    redisAppendCommand(c, "CL.THROTTLE batch:h 1 1 60");
    redisAppendCommand(c, "CL.THROTTLE batch:c 1 1 60");
    redisReply *r = px_next(c);
    cr_assert_eq(r->element[2]->integer, 1);
    freeReplyObject(r);
    px_check_error(px_next(c), "WRONGTYPE Operation against a key holding "
                               "the wrong kind of value");
    r = px_next(c);
    cr_assert_eq(r->element[0]->integer, 0);
    cr_assert_eq(r->element[2]->integer, 0);
    freeReplyObject(r);
    redisFree(c);
}

Test(it_limiter, batched_calls_keep_request_order_in_single_mode,
     .init = px_env_init, .fini = px_env_fini, .timeout = 60)
{
    redisContext *direct = px_redis_connect(&px_env()->redis, NULL);
    long long before = script_calls(direct);

    batched_calls_keep_order();
    /* 83 calls, nearly all arriving in one read: a handful of script
     * calls, not one each. */
    long long used = script_calls(direct) - before;
    cr_assert_lt(used, 20, "%lld script calls for 83 CL.THROTTLE", used);
    cr_assert_gt(used, 0);
    redisFree(direct);
}

Test(it_limiter, batched_calls_keep_request_order_in_cluster_mode,
     .init = init_cluster, .fini = px_cluster_fini, .timeout = 120)
{
    batched_calls_keep_order();
}
