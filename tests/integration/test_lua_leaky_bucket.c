/* algorithms/lua/leaky_bucket.lua (through limiter.lua) against the C
 * model algorithms/leaky_bucket.c, on a real redis-server, through the
 * shared driver of twin_walk.h: the descriptor, the walk, and tables of
 * edges. The state is a HASH of level and ts (us, the last drip
 * boundary). */
#include "tests/integration/fixture.h"
#include "tests/integration/twin_walk.h"
#include "tests/support/px_test.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "algorithms/leaky_bucket.h"

PX_TEST_SUITE(it_lua_leaky_bucket);

#define MAX_N    LEAKY_BUCKET_MAX_COUNT
#define MAX_DRIP LEAKY_BUCKET_MAX_DRIP_MS
#define P(cf)    ((struct leaky_bucket_params *)(cf)->p)

_Static_assert(sizeof(struct leaky_bucket_params) <= TWIN_PARAMS_BYTES,
               "params");

static const struct twin_algo LB;

static void it_init(void)
{
    px_redis_start(&px_env()->redis, NULL);
}

/* ---------------- The descriptor ---------------- */

static int lb_parse(const redisReply *r, void *st, const char *ctx)
{
    static const char *const names[2] = { "level", "ts" };
    struct leaky_bucket_state *s = st;
    int64_t v[2];

    if (!twin_hash(r, names, 2, v, ctx)) {
        return 0;
    }
    s->level = v[0];
    s->ts_ns = v[1] * 1000;
    return 1;
}

static void lb_same(const void *a, const void *b, const char *ctx)
{
    const struct leaky_bucket_state *x = a, *y = b;

    cr_assert(x->level == y->level && x->ts_ns == y->ts_ns,
              "%s: stored level %" PRId64 " ts %" PRId64 " ns, model %" PRId64
              " %" PRId64,
              ctx, x->level, x->ts_ns, y->level, y->ts_ns);
}

static const char *lb_conf(struct twin_conf *cf, const int64_t n[3])
{
    const char *err = NULL;

    return leaky_bucket_params_init(P(cf), n[0], n[1], n[2], &err) ==
                   LEAKY_BUCKET_OK
               ? NULL
               : err;
}

static void lb_decide(const struct twin_conf *cf, const void *st, int64_t now,
                      int64_t cost, struct twin_result *r, void *next)
{
    struct leaky_bucket_result x;
    const char *err = NULL;

    cr_assert_eq(leaky_bucket_decide_wait(P(cf), st, now * 1000, cost,
                                          lua_twin_wait() * 1000, &x, &err),
                 LEAKY_BUCKET_OK, "model: %s", err);
    r->d = x.d;
    r->write = x.write == LEAKY_BUCKET_WRITE_SET;
    r->have_next = 1;
    r->expiry_ms = x.expiry_ms;
    /* The undo token is the phase the cost went into. */
    if (r->write) {
        snprintf(r->undo, sizeof(r->undo), "%" PRId64, x.next.ts_ns / 1000);
    }
    memcpy(next, &x.next, sizeof(x.next));
}

/* LIMITER ADJUST through the model (the hook's contract: twin_walk.h). */
static void lb_adjust(const struct twin_conf *cf, const void *st, int64_t now,
                      int64_t delta, struct twin_result *r, void *next)
{
    struct leaky_bucket_result x;
    const char *err = NULL;

    cr_assert_eq(leaky_bucket_adjust(P(cf), st, now * 1000, delta, &x, &err),
                 LEAKY_BUCKET_OK, "model: %s", err);
    r->d = x.d;
    r->write = x.write == LEAKY_BUCKET_WRITE_SET;
    r->have_next = r->write || st != NULL;
    r->expiry_ms = x.expiry_ms;
    memcpy(next, &x.next, sizeof(x.next));
}

/* Random parameters: small, ordinary and the maxima; with `old`, half the
 * time only drip_size changes. */
static void lb_rnd_conf(uint64_t *s, struct twin_conf *cf,
                        const struct twin_conf *old)
{
    static const int64_t sizes[] = { 1, 2, 3, 5, 10, 1000, MAX_N, 0 };
    static const int64_t drips[] = { 1, 2, 10, 1000, 60000, MAX_DRIP, 0 };
    int64_t size = lua_twin_pick(s, sizes, sizeof(sizes) / sizeof(*sizes));
    int64_t drip = lua_twin_pick(s, drips, sizeof(drips) / sizeof(*drips));
    int64_t ds;

    if (old != NULL && lua_twin_rnd_in(s, 0, 1)) {
        twin_conf_set(&LB, cf, old->n[0], old->n[1], old->n[2] == 1 ? 2 : 1);
        return;
    }
    if (size == 0) {
        size = lua_twin_rnd_in(s, 1, lua_twin_rnd_in(s, 0, 1) ? 100 : MAX_N);
    }
    if (drip == 0) {
        drip =
            lua_twin_rnd_in(s, 1, lua_twin_rnd_in(s, 0, 1) ? 5000 : MAX_DRIP);
    }
    switch (lua_twin_rnd_in(s, 0, 5)) {
    case 0:
        ds = size;
        break;
    case 1:
        ds = MAX_N;
        break;
    case 2:
        ds = lua_twin_rnd_in(s, 1, MAX_N);
        break;
    default:
        ds = lua_twin_rnd_in(s, 1, 3);
        break;
    }
    twin_conf_set(&LB, cf, size, drip, ds);
}

/* A cost: 0, 1, exactly the size, above it, or anything up to it. */
static int64_t lb_rnd_cost(uint64_t *s, const struct twin_conf *cf)
{
    int64_t size = P(cf)->size;

    switch (lua_twin_rnd_in(s, 0, 9)) {
    case 0:
        return 0;
    case 1:
        return size;
    case 2:
        return size < MAX_N ? size + 1 : MAX_N;
    case 3:
        return lua_twin_rnd_in(s, 1, size);
    default:
        return lua_twin_rnd_in(s, 1, size < 3 ? size : 3);
    }
}

static int64_t lb_unit(const struct twin_conf *cf)
{
    return P(cf)->drip_ns / 1000;
}

/* A drip boundary of the stored phase (or 1 us before). */
static int64_t lb_edge(uint64_t *s, const struct twin_key *k, int64_t now)
{
    const struct leaky_bucket_state *st = k->st;
    int64_t unit = lb_unit(&k->cf), n = lua_twin_rnd_in(s, 1, 3);
    int64_t anchor = k->have ? st->ts_ns / 1000 : now;
    int64_t b = anchor <= now ? anchor + ((now - anchor) / unit + n) * unit
                              : anchor + (n - 1) * unit;

    return b - lua_twin_rnd_in(s, 0, 1);
}

/* A valid state the twin would not write now: above the size (the size
 * was lowered), or a phase ahead of the clock (it jumped back). */
static int lb_plant(uint64_t *s, struct twin_key *k, int64_t now)
{
    int64_t unit = lb_unit(&k->cf), size = P(&k->cf)->size;
    int64_t ts = now + lua_twin_rnd_in(s, -3 * unit, unit);

    if (ts < 0 || ts > TWIN_US_MAX) {
        return 0;
    }
    freeReplyObject(px_cmd(k->c, "DEL %s", k->name));
    twin_plant(k, "HSET %%s level %" PRId64 " ts %" PRId64,
               lua_twin_rnd_in(s, 0, size < MAX_N ? size + 1 : MAX_N), ts);
    return 1;
}

/* The refund leaves the expiry of the bucket it left. */
static int lb_after_refund(struct twin_key *k, const void *pre, int pre_have,
                           int64_t now, int64_t cost,
                           const struct lua_twin_txn *tx, const char *ctx)
{
    int64_t ms;

    (void)pre;
    (void)pre_have;
    (void)cost;
    if (!k->have) {
        cr_assert_eq(tx->pttl, -2, "%s: PTTL of a deleted key", ctx);
        return 1;
    }
    ms = rl_ceil_ms(twin_model(k, k->st, now, 0)->d.reset_after_ns);
    cr_assert(tx->pttl <= ms && tx->pttl >= ms - tx->elapsed_ms,
              "%s: PTTL %lld after the refund, expiry %" PRId64, ctx, tx->pttl,
              ms);
    return 1;
}

static const struct twin_algo LB = {
    .name = "leaky_bucket",
    .read_fmt = "HGETALL %s",
    .nparams = 3,
    .state_size = sizeof(struct leaky_bucket_state),
    .parse = lb_parse,
    .expect_same = lb_same,
    .conf = lb_conf,
    .decide = lb_decide,
    .state_error = LEAKY_BUCKET_ERR_STATE,
    .rnd_conf = lb_rnd_conf,
    .rnd_cost = lb_rnd_cost,
    .unit_us = lb_unit,
    .rnd_edge = lb_edge,
    .plant = lb_plant,
    .after_refund = lb_after_refund,
    .adjust = lb_adjust,
    .waits = 1,
};

/* ---------------- The walk and the tables ---------------- */

Test(it_lua_leaky_bucket, randomized_sequences_match_the_c_model,
     .init = it_init, .fini = px_env_fini, .timeout = 120)
{
    twin_walk(&LB, "it_lua_leaky_bucket");
}

#define SAT_NS "9223372036854775807"
#define SAT_US "9223372036854775"

Test(it_lua_leaky_bucket, durations_past_2_53_us_are_exact_text_then_saturate,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    static const struct twin_row rows[] = {
        /* 9007199254741 drips of 1 ms, 8 us into the phase: exactly 2^53
         * us (as text), then 1 us less (an integer). */
        TWIN_SET(MAX_N, 1, 1),
        TWIN_CMD("HSET %s level 9007199254741 ts 1700000000000000"),
        TWIN_CALL("check", TWIN_T0 + 8, 0,
                  "reset_us 9007199254740992 reset_text 1"),
        TWIN_CALL("peek", TWIN_T0 + 9, 0,
                  "reset_us 9007199254740991 reset_text 0"),
        /* A refused cost of the whole size waits for every drip: past
         * 2^53. */
        TWIN_CALL("check", TWIN_T0 + 8, MAX_N,
                  "limited 1 retry_us 9007199254740992"),
        /* The longest drip and 2^53 - 1 of them: the C model saturates at
         * INT64_MAX ns, the twin sends its floor in us, and the expiry is
         * the saturated one. */
        TWIN_SET(MAX_N, MAX_DRIP, 1),
        TWIN_CMD("DEL %s"),
        TWIN_CALL("check", TWIN_T0, MAX_N,
                  "reset_ns " SAT_NS
                  " expiry_ms 9223372036855 reset_us " SAT_US),
        TWIN_CALL("check", TWIN_T0 + 5, 1, "retry_us 315359999999995"),
        TWIN_CALL("peek", TWIN_T0 + 5, MAX_N,
                  "retry_ns " SAT_NS " retry_us " SAT_US " reset_us " SAT_US
                  " retry_text 1 reset_text 1"),
        /* The exact edge: 9223372036854 drips of 1 ms are 9223372036854
         * ms, and INT64_MAX ns leaves 775 us more. 775 us of phase ahead
         * of now fit; 776 us saturate (one us less, in the floor); with
         * one drip more, the product alone saturates, even with the phase
         * behind. */
        TWIN_SET(MAX_N, 1, 1),
        TWIN_CMD("HSET %s level 9223372036854 ts 1700000000000775"),
        TWIN_CALL("check", TWIN_T0, 0,
                  "reset_ns 9223372036854775000 reset_us " SAT_US),
        TWIN_CMD("HSET %s level 9223372036854 ts 1700000000000776"),
        TWIN_CALL("check", TWIN_T0, 0, "reset_ns " SAT_NS " reset_us " SAT_US),
        TWIN_CMD("HSET %s level 9223372036855 ts 1699999999999500"),
        TWIN_CALL("check", TWIN_T0, 0, "reset_ns " SAT_NS " reset_us " SAT_US),
        /* Near the end of the script's clock: ts - now + k * drip passes
         * INT64_MAX ns only through the sum. */
        TWIN_SET(1000, MAX_DRIP, 1),
        TWIN_CMD("HSET %s level 29 ts 9007199254740990"),
        TWIN_CALL("check", 0, 0, "reset_ns " SAT_NS " reset_us " SAT_US),
        TWIN_CALL("check", TWIN_US_MAX, 0, "reset_us 9145439999999999"),
    };

    TWIN_ROWS(&LB, rows);
}

Test(it_lua_leaky_bucket, peek_writes_nothing, .init = it_init,
     .fini = px_env_fini, .timeout = 60)
{
    /* A missing key stays missing, whatever the cost; a stored bucket
     * and its TTL stay untouched by peeks that would pass, be refused,
     * or drain it (each step asserts nothing was written). */
    static const struct twin_row rows[] = {
        TWIN_SET(3, 1000, 1),
        TWIN_CALL("peek", TWIN_T0, 0, "exists 0"),
        TWIN_CALL("peek", TWIN_T0, 1, "exists 0"),
        TWIN_CALL("peek", TWIN_T0, 3, "exists 0"),
        TWIN_CALL("peek", TWIN_T0, 4, "exists 0"),
        TWIN_CALL("check", TWIN_T0, 2, "pttl_min 1 pttl_max 2000"),
        TWIN_CALL("peek", TWIN_T0 + 1500000, 0, "field:level 2"),
        TWIN_CALL("peek", TWIN_T0 + 1500000, 1, "field:level 2"),
        TWIN_CALL("peek", TWIN_T0 + 1500000, 2, "field:level 2"),
        TWIN_CALL("peek", TWIN_T0 + 1500000, 3, "field:level 2"),
        TWIN_CALL("peek", TWIN_T0 + 1500000, 4,
                  "field:level 2 field:ts 1700000000000000"),
    };

    TWIN_ROWS(&LB, rows);
}

Test(it_lua_leaky_bucket, refund_restores_then_is_a_no_op_once_moved_on,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
#define LATER (TWIN_T0 + 10600000)
    static const struct twin_row rows[] = {
        TWIN_SET(5, 1000, 1),
        /* The whole bucket back: the key goes. */
        TWIN_CALL("check", TWIN_T0, 2, NULL),
        TWIN_REFUND(TWIN_T0 + 300000, 2, NULL, "exists 0"),
        /* Part of it back, after a drip fell: 3 + 1 - 1 drip - 1 = 2. */
        TWIN_CALL("check", TWIN_T0, 3, "undo 1700000000000000"),
        TWIN_CALL("check", TWIN_T0 + 1000000, 1, NULL),
        TWIN_REFUND(TWIN_T0 + 1500000, 1, NULL,
                    "field:level 2 field:ts 1700000001000000"),
        /* An older token of the same phase still counts. */
        TWIN_REFUND(TWIN_T0 + 1500000, 1, "1700000000000000",
                    "field:level 1 pttl_max 500"),
        /* The bucket emptied and restarted in another phase: a no-op. */
        TWIN_CMD("DEL %s"),
        TWIN_CALL("check", TWIN_T0, 2, NULL),
        TWIN_CALL("check", TWIN_T0 + 10500000, 1, "undo 1700000010500000"),
        TWIN_REFUND(LATER, 2, "1700000000000000",
                    "field:level 1 field:ts 1700000010500000"),
        /* Cost 0, an empty or malformed token: no-ops. */
        TWIN_REFUND(LATER, 0, "1700000010500000", NULL),
        TWIN_REFUND(LATER, 1, "", NULL),
        TWIN_REFUND(LATER, 1, "x", "field:level 1"),
        /* An expired key stays missing. */
        TWIN_CMD("DEL %s"),
        TWIN_REFUND(LATER, 1, "1700000010500000", "exists 0"),
    };
    const char *p[4] = { "5", "1000", "1", NULL };
    redisContext *c = twin_run_rows(&LB, rows, sizeof(rows) / sizeof(*rows));

    /* A key of another type is left alone, without an error. */
    px_check_status(px_cmd(c, "SET k v"), "OK");
    lua_twin_ok(c, "refund", "k", "leaky_bucket", p, LATER, 1,
                "1700000010500000");
    px_check_str(px_cmd(c, "GET k"), "v");
    redisFree(c);
}

Test(it_lua_leaky_bucket, bad_parameters_give_the_c_model_errors,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    static const struct twin_bad bad[] = {
        { { "0", "1000", "1" }, LEAKY_BUCKET_ERR_SIZE },
        { { "-1", "1000", "1" }, LEAKY_BUCKET_ERR_SIZE },
        { { "9007199254740992", "1000", "1" }, LEAKY_BUCKET_ERR_SIZE },
        { { "", "1000", "1" }, LEAKY_BUCKET_ERR_SIZE },
        { { "1.5", "1000", "1" }, LEAKY_BUCKET_ERR_SIZE },
        { { "0", "0", "0" }, LEAKY_BUCKET_ERR_SIZE },
        { { "10", "0", "1" }, LEAKY_BUCKET_ERR_DRIP_MS },
        { { "10", "315360000001", "1" }, LEAKY_BUCKET_ERR_DRIP_MS },
        { { "10", "1e3", "1" }, LEAKY_BUCKET_ERR_DRIP_MS },
        { { "10", "1000", "0" }, LEAKY_BUCKET_ERR_DRIP_SIZE },
        { { "10", "1000", "9007199254740992" }, LEAKY_BUCKET_ERR_DRIP_SIZE },
        { { "10", "1000", "" }, LEAKY_BUCKET_ERR_DRIP_SIZE },
    };
    twin_run_bad_params(&LB, bad, sizeof(bad) / sizeof(*bad));
}

Test(it_lua_leaky_bucket, wrong_type_and_malformed_state_are_errors,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    static const char *const bad[] = {
        "HSET %s level -1 ts 5",
        "HSET %s level 3 ts -5",
        "HSET %s level abc ts 5",
        "HSET %s level 3 ts 5.5",
        "HSET %s level 9007199254740992 ts 5",
        "HSET %s level 3 other 5",
    };
    twin_run_bad_states(&LB, 5, 1000, 1, "ZADD %s 1 m", bad,
                        sizeof(bad) / sizeof(*bad));
}
