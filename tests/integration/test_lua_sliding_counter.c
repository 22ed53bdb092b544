/* algorithms/lua/sliding_counter.lua (through limiter.lua) against the C
 * model algorithms/sliding_counter.c, on a real redis-server, through the
 * shared driver of twin_walk.h: the descriptor, the walk, and tables of
 * edges. The state is a HASH of start (us), count and prev. */
#include "tests/integration/fixture.h"
#include "tests/integration/twin_walk.h"
#include "tests/support/px_test.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "algorithms/sliding_counter.h"

PX_TEST_SUITE(it_lua_sliding_counter);

#define MAX   SLIDING_COUNTER_MAX_COUNT
#define WIN   SLIDING_COUNTER_MAX_WINDOW_MS
#define P(cf) ((struct sliding_counter_params *)(cf)->p)

_Static_assert(sizeof(struct sliding_counter_params) <= TWIN_PARAMS_BYTES,
               "params");

static const struct twin_algo SC;

static void it_init(void)
{
    px_redis_start(&px_env()->redis, NULL);
}

/* ---------------- The descriptor ---------------- */

static int sc_parse(const redisReply *r, void *st, const char *ctx)
{
    static const char *const names[3] = { "start", "count", "prev" };
    struct sliding_counter_state *s = st;
    int64_t v[3];

    if (!twin_hash(r, names, 3, v, ctx)) {
        return 0;
    }
    s->start_ns = v[0] * 1000;
    s->count = v[1];
    s->prev = v[2];
    return 1;
}

static void sc_same(const void *a, const void *b, const char *ctx)
{
    const struct sliding_counter_state *x = a, *y = b;

    cr_assert(x->start_ns == y->start_ns && x->count == y->count &&
                  x->prev == y->prev,
              "%s: stored %" PRId64 " %" PRId64 " %" PRId64 ", model %" PRId64
              " %" PRId64 " %" PRId64,
              ctx, x->start_ns, x->count, x->prev, y->start_ns, y->count,
              y->prev);
}

static const char *sc_conf(struct twin_conf *cf, const int64_t n[3])
{
    const char *err = NULL;

    return sliding_counter_params_init(P(cf), n[0], n[1], &err) ==
                   SLIDING_COUNTER_OK
               ? NULL
               : err;
}

static void sc_decide(const struct twin_conf *cf, const void *st, int64_t now,
                      int64_t cost, struct twin_result *r, void *next)
{
    struct sliding_counter_result x;
    const char *err = NULL;

    cr_assert_eq(sliding_counter_decide(P(cf), st, now * 1000, cost, &x, &err),
                 SLIDING_COUNTER_OK, "model: %s", err);
    cr_assert_eq(x.next.start_ns % 1000, 0, "start off the us grid");
    r->d = x.d;
    r->write = x.write == SLIDING_COUNTER_WRITE_SET;
    r->have_next = 1;
    r->expiry_ms = x.expiry_ms;
    /* The undo token names the window counted in. */
    if (r->write) {
        snprintf(r->undo, sizeof(r->undo), "%" PRId64, x.next.start_ns / 1000);
    }
    memcpy(next, &x.next, sizeof(x.next));
}

/* LIMITER ADJUST: sliding_counter_adjust(), its write as a check's. */
static void sc_adjust(const struct twin_conf *cf, const void *st, int64_t now,
                      int64_t delta, struct twin_result *r, void *next)
{
    struct sliding_counter_result x;
    const char *err = NULL;

    cr_assert_eq(sliding_counter_adjust(P(cf), st, now * 1000, delta, &x, &err),
                 SLIDING_COUNTER_OK, "model: %s", err);
    r->d = x.d;
    r->write = x.write == SLIDING_COUNTER_WRITE_SET;
    r->have_next = 1;
    r->expiry_ms = x.expiry_ms;
    memcpy(next, &x.next, sizeof(x.next));
}

static void sc_rnd_conf(uint64_t *s, struct twin_conf *cf,
                        const struct twin_conf *old)
{
    int64_t max, win;

    (void)old;
    lua_twin_rnd_limit(s, MAX, WIN, &max, &win);
    twin_conf_set(&SC, cf, max, win, 0);
}

static int64_t sc_rnd_cost(uint64_t *s, const struct twin_conf *cf)
{
    return lua_twin_rnd_cost(s, P(cf)->max);
}

static int64_t sc_unit(const struct twin_conf *cf)
{
    return P(cf)->window_ns / 1000;
}

/* The next window's start, or the one after (or 1 us off). */
static int64_t sc_edge(uint64_t *s, const struct twin_key *k, int64_t now)
{
    int64_t w = sc_unit(&k->cf);

    return now + w - now % w + lua_twin_rnd_in(s, -1, 1) +
           (lua_twin_rnd_in(s, 0, 3) == 0 ? w : 0);
}

/* A valid state in an unusual place: above max, a window of another
 * length (not aligned), a later window (the clock was ahead), or an old
 * one; with or without a previous count. */
static int sc_plant(uint64_t *s, struct twin_key *k, int64_t now)
{
    int64_t w = sc_unit(&k->cf), start, max = P(&k->cf)->max;

    switch (lua_twin_rnd_in(s, 0, 3)) {
    case 0:
        start = now - now % w;
        break;
    case 1:
        start = now - lua_twin_rnd_in(s, 0, 2 * w);
        break;
    case 2:
        start = now + lua_twin_rnd_in(s, 0, 2 * w);
        break;
    default:
        start = lua_twin_rnd_in(s, 0, TWIN_US_MAX);
        break;
    }
    start = start < 0 ? 0 : start > TWIN_US_MAX ? TWIN_US_MAX : start;
    freeReplyObject(px_cmd(k->c, "DEL %s", k->name));
    twin_plant(k, "HSET %%s start %" PRId64 " count %" PRId64 " prev %" PRId64,
               start, lua_twin_rnd_in(s, 0, max < MAX ? max + 1 : MAX),
               lua_twin_rnd_in(s, 0, 2) == 0 ? 0 : lua_twin_rnd_in(s, 0, max));
    return 1;
}

/* The refund leaves the state of before the check rolled to now's window
 * (no key when nothing is counted in now's own window nor before it: a
 * later or unaligned one holds its place), and sets no expiry. */
static int sc_after_refund(struct twin_key *k, const void *pre, int pre_have,
                           int64_t now, int64_t cost,
                           const struct lua_twin_txn *tx, const char *ctx)
{
    struct sliding_counter_state want;
    int drop;

    (void)pre_have;
    (void)cost;
    twin_model(k, pre, now, 0);
    memcpy(&want, k->next, sizeof(want));
    drop = want.count == 0 && want.prev == 0 &&
           want.start_ns == now * 1000 - now * 1000 % P(&k->cf)->window_ns;
    cr_assert_eq(k->have, !drop, "%s: key after the refund", ctx);
    if (k->have) {
        sc_same(k->st, &want, ctx);
        cr_assert_eq(tx->pttl, -1, "%s: the refund set an expiry", ctx);
    }
    return 1;
}

static const struct twin_algo SC = {
    .name = "sliding_counter",
    .read_fmt = "HGETALL %s",
    .nparams = 2,
    .state_size = sizeof(struct sliding_counter_state),
    .parse = sc_parse,
    .expect_same = sc_same,
    .conf = sc_conf,
    .decide = sc_decide,
    .state_error = SLIDING_COUNTER_ERR_STATE,
    .rnd_conf = sc_rnd_conf,
    .rnd_cost = sc_rnd_cost,
    .unit_us = sc_unit,
    .rnd_edge = sc_edge,
    .plant = sc_plant,
    .after_refund = sc_after_refund,
    .adjust = sc_adjust,
};

/* ---------------- The walk and the tables ---------------- */

Test(it_lua_sliding_counter, randomized_sequences_match_the_c_model,
     .init = it_init, .fini = px_env_fini, .timeout = 120)
{
    twin_walk(&SC, "it_lua_sliding_counter");
}

Test(it_lua_sliding_counter, peek_and_refusal_write_nothing, .init = it_init,
     .fini = px_env_fini, .timeout = 60)
{
    static const struct twin_row rows[] = {
        TWIN_SET(10, 1000, 0),
        TWIN_CALL("peek", TWIN_T0, 3, "remaining 7 undo 1700000000000000"),
        TWIN_CALL("check", TWIN_T0, 11, "limited 1 exists 0"),
        /* 4 now and 6 before, a quarter into the window: 4 + ceil(4.5) =
         * 9; a stored state with an expiry of our own stays untouched. */
        TWIN_CMD("HSET %s start 1700000000000000 count 4 prev 6"),
        TWIN_CMD("PEXPIRE %s 900000"),
        TWIN_CALL("peek", TWIN_T0 + 250000, 1,
                  "limited 0 remaining 0 reset_us 1750000"),
        /* 2 fit once 6 * left <= 4 * window: 1/3 of it left, 83333.3 us
         * on. */
        TWIN_CALL("check", TWIN_T0 + 250000, 2,
                  "limited 1 retry_us 83333 undo - field:count 4 field:prev 6 "
                  "pttl_min 800000"),
        TWIN_CALL("check", TWIN_T0 + 333334, 2, "limited 0"),
    };

    TWIN_ROWS(&SC, rows);
}

Test(it_lua_sliding_counter, refund_takes_the_cost_back_from_its_window,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    static const struct twin_row rows[] = {
        TWIN_SET(10, 1000, 0),
        /* Nothing else counted: refunded, the key goes. */
        TWIN_CALL("check", TWIN_T0, 4, "undo 1700000000000000"),
        TWIN_REFUND(TWIN_T0 + 5, 4, NULL, "exists 0"),
        /* A rolled-over window: the previous count stays and weighs. */
        TWIN_CMD("HSET %s start 1699999999000000 count 5 prev 0"),
        TWIN_CALL("check", TWIN_T0 + 500000, 2, "remaining 5"),
        TWIN_REFUND(TWIN_T0 + 500000, 2, NULL,
                    "field:start 1700000000000000 field:count 0 field:prev 5"),
        TWIN_CALL("peek", TWIN_T0 + 500000, 2, "remaining 5"),
        /* Never below 0. */
        TWIN_CALL("check", TWIN_T0 + 500000, 1, NULL),
        TWIN_REFUND(TWIN_T0 + 500000, 3, NULL, "field:count 0"),
        /* The next window: an old token does nothing; nor do a token that
         * is no start, or a cost of 0. */
        TWIN_CALL("check", TWIN_T0 + TWIN_SEC, 1, "undo 1700000001000000"),
        TWIN_REFUND(TWIN_T0 + TWIN_SEC, 1, "1700000000000000", NULL),
        TWIN_REFUND(TWIN_T0 + TWIN_SEC, 1, "", NULL),
        TWIN_REFUND(TWIN_T0 + TWIN_SEC, 1, "-1", NULL),
        TWIN_REFUND(TWIN_T0 + TWIN_SEC, 0, "1700000001000000", "field:count 1"),
        /* An expired key stays expired. */
        TWIN_CMD("DEL %s"),
        TWIN_REFUND(TWIN_T0 + TWIN_SEC, 1, "1700000001000000", "exists 0"),
    };

    TWIN_ROWS(&SC, rows);
}

Test(it_lua_sliding_counter, huge_durations_come_back_exact_or_saturated,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    static const struct twin_row rows[] = {
        /* A window of 10^11 ms stored near 2^53 us, the clock at 0: the
         * next window ends 9.2e15 us away, past 2^53 but within the int64
         * ns. */
        TWIN_SET(MAX, INT64_C(100000000000), 0),
        TWIN_CMD("HSET %s start 9007199254740984 count 9007199254740989 "
                 "prev 4503599627370495"),
        TWIN_CALL("check", 0, 1, "limited 1 reset_ns 9207199254740984000"),
        TWIN_CMD("HSET %s prev 0"),
        TWIN_CALL("check", 0, 2, "limited 0"),
        /* The longest window: saturated at INT64_MAX ns. */
        TWIN_SET(MAX, WIN, 0),
        TWIN_CALL("check", 0, 1,
                  "retry_ns 9223372036854775807 reset_ns 9223372036854775807"),
        /* prev weighs fully. */
        TWIN_CMD("HSET %s count 0 prev 9007199254740991"),
        TWIN_CALL("check", 0, 1, "limited 1"),
        TWIN_CMD("HSET %s count 0 prev 0"),
        TWIN_CALL("check", 0, MAX, "expiry_ms 9223372036855"),
    };

    TWIN_ROWS(&SC, rows);
}

Test(it_lua_sliding_counter, bad_parameters_give_the_c_model_errors,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
#define E_MAX SLIDING_COUNTER_ERR_MAX
#define E_WIN SLIDING_COUNTER_ERR_WINDOW
    static const struct twin_bad bad[] = {
        { { "0", "1000" }, E_MAX },
        { { "-1", "1000" }, E_MAX },
        { { "9007199254740992", "1000" }, E_MAX },
        { { "2.0", "1000" }, E_MAX },
        { { "", "1000" }, E_MAX },
        { { "ten", "1000" }, E_MAX },
        { { "0", "0" }, E_MAX }, /* both bad: max is checked first */
        { { "ten", "0" }, E_MAX },
        { { "5", "0" }, E_WIN },
        { { "5", "-1000" }, E_WIN },
        { { "5", "315360000001" }, E_WIN },
        { { "5", "1e3" }, E_WIN },
        { { "5", "" }, E_WIN },
        { { "5", "1s" }, E_WIN },
    };
    /* The limits themselves are fine. */
    static const struct twin_row fine[] = {
        TWIN_SET(MAX, WIN, 0),
        TWIN_CALL("peek", TWIN_T0, 1, "exists 0"),
    };
    redisContext *c;

    twin_run_bad_params(&SC, bad, sizeof(bad) / sizeof(*bad));
    c = twin_run_rows(&SC, fine, 2);
    px_check_int(px_cmd(c, "DBSIZE"), 0);
    redisFree(c);
}

Test(it_lua_sliding_counter, wrong_type_and_malformed_state_give_errors,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    static const char *const bad[] = {
        "HSET %s start -1 count 0 prev 0",
        "HSET %s start 1700000000000000 count -1 prev 0",
        "HSET %s start 0 count 0 prev -1",
        "HSET %s start x count 0 prev 0",
        "HSET %s start 0 count 1.0 prev 0",
        "HSET %s start 0 count 0 prev ''",
        "HSET %s start 9007199254740992 count 0 prev 0",
        "HSET %s start 0 count 0", /* a field missing */
    };
    twin_run_bad_states(&SC, 5, 1000, 0, "RPUSH %s a", bad,
                        sizeof(bad) / sizeof(*bad));
}
