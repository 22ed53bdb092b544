/* algorithms/lua/fixed_window.lua (through limiter.lua) against the C model
 * algorithms/fixed_window.c, on a real redis-server, through the shared
 * driver of twin_walk.h: the descriptor, the walks (numeric windows, and
 * calendar windows at random offsets, whose edges include month and year
 * ends), and tables of edges. The state is a HASH of start (us) and
 * count. The parameters are max, the window (ms, or -1 day, -2 week, -3
 * month) and a calendar window's offset in minutes. */
#define _DEFAULT_SOURCE /* timegm: the test's own calendar for year ends */

#include "tests/integration/fixture.h"
#include "tests/integration/twin_walk.h"
#include "tests/support/px_test.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "algorithms/fixed_window.h"

PX_TEST_SUITE(it_lua_fixed_window);

#define MAX   FIXED_WINDOW_MAX_COUNT
#define WIN   FIXED_WINDOW_MAX_WINDOW_MS
#define P(cf) ((struct fixed_window_params *)(cf)->p)

_Static_assert(sizeof(struct fixed_window_params) <= TWIN_PARAMS_BYTES,
               "params");

static const struct twin_algo FW, FW_CAL;

static void it_init(void)
{
    px_redis_start(&px_env()->redis, NULL);
}

/* ---------------- The descriptor ---------------- */

static int fw_parse(const redisReply *r, void *st, const char *ctx)
{
    static const char *const names[2] = { "start", "count" };
    struct fixed_window_state *s = st;
    int64_t v[2];

    if (!twin_hash(r, names, 2, v, ctx)) {
        return 0;
    }
    s->start_ns = v[0] * 1000;
    s->count = v[1];
    return 1;
}

static void fw_same(const void *a, const void *b, const char *ctx)
{
    const struct fixed_window_state *x = a, *y = b;

    cr_assert(x->start_ns == y->start_ns && x->count == y->count,
              "%s: stored %" PRId64 " %" PRId64 ", model %" PRId64 " %" PRId64,
              ctx, x->start_ns, x->count, y->start_ns, y->count);
}

static const char *fw_conf(struct twin_conf *cf, const int64_t n[3])
{
    const char *err = NULL;
    int rc = n[1] >= -3 && n[1] <= -1
                 ? fixed_window_params_calendar(
                       P(cf), n[0], (enum fixed_window_unit)(-n[1]), n[2], &err)
                 : fixed_window_params_init(P(cf), n[0], n[1], &err);

    return rc == FIXED_WINDOW_OK ? NULL : err;
}

/* The start (us) of now's window under cf, as the model places it. */
static int64_t fw_start_us(const struct twin_conf *cf, int64_t now)
{
    const struct fixed_window_params *p = P(cf);
    struct fixed_window_span sp;

    if (p->unit == FIXED_WINDOW_EPOCH) {
        return now - now % (p->window_ns / 1000);
    }
    fixed_window_calendar(p->unit, p->offset_ns, now * 1000, &sp);
    return now - sp.since_ns / 1000 < 0 ? 0 : now - sp.since_ns / 1000;
}

static void fw_decide(const struct twin_conf *cf, const void *st, int64_t now,
                      int64_t cost, struct twin_result *r, void *next)
{
    struct fixed_window_result x;
    const char *err = NULL;

    cr_assert_eq(fixed_window_decide(P(cf), st, now * 1000, cost, &x, &err),
                 FIXED_WINDOW_OK, "model: %s", err);
    cr_assert_eq(x.next.start_ns % 1000, 0, "start off the us grid");
    r->d = x.d;
    r->write = x.write == FIXED_WINDOW_WRITE_SET;
    r->have_next = 1;
    r->expiry_ms = x.expiry_ms;
    /* The undo token names the window counted in. */
    if (r->write) {
        snprintf(r->undo, sizeof(r->undo), "%" PRId64, x.next.start_ns / 1000);
    }
    memcpy(next, &x.next, sizeof(x.next));
}

/* LIMITER ADJUST: fixed_window_adjust(), its write as a check's. */
static void fw_adjust(const struct twin_conf *cf, const void *st, int64_t now,
                      int64_t delta, struct twin_result *r, void *next)
{
    struct fixed_window_result x;
    const char *err = NULL;

    cr_assert_eq(fixed_window_adjust(P(cf), st, now * 1000, delta, &x, &err),
                 FIXED_WINDOW_OK, "model: %s", err);
    r->d = x.d;
    r->write = x.write == FIXED_WINDOW_WRITE_SET;
    r->have_next = 1;
    r->expiry_ms = x.expiry_ms;
    memcpy(next, &x.next, sizeof(x.next));
}

static void fw_rnd_conf(uint64_t *s, struct twin_conf *cf,
                        const struct twin_conf *old)
{
    int64_t max, win;

    (void)old;
    lua_twin_rnd_limit(s, MAX, WIN, &max, &win);
    twin_conf_set(&FW, cf, max, win, 0);
}

static int64_t fw_rnd_cost(uint64_t *s, const struct twin_conf *cf)
{
    return lua_twin_rnd_cost(s, P(cf)->max);
}

/* Calendar windows: a unit and an offset, often the widest ones. */
static void fw_rnd_cal(uint64_t *s, struct twin_conf *cf,
                       const struct twin_conf *old)
{
    static const int64_t offs[] = { 0, 540, -300, 330, 840, -840 };
    int64_t max, win, off = offs[lua_twin_rnd_in(s, 0, 5)];

    (void)old;
    lua_twin_rnd_limit(s, MAX, WIN, &max, &win);
    if (lua_twin_rnd_in(s, 0, 2) == 0) {
        off = lua_twin_rnd_in(s, -840, 840);
    }
    twin_conf_set(&FW_CAL, cf, max, -lua_twin_rnd_in(s, 1, 3), off);
}

static int64_t fw_unit(const struct twin_conf *cf)
{
    static const int64_t days[] = { 0, 1, 7, 30 };

    return P(cf)->unit == FIXED_WINDOW_EPOCH ? P(cf)->window_ns / 1000
                                             : days[P(cf)->unit] * TWIN_DAY_US;
}

/* The next Jan 1st 00:00 at the window's offset after now (us). */
static int64_t fw_year_end(const struct twin_conf *cf, int64_t now)
{
    int64_t off_s = P(cf)->offset_ns / RL_NS_PER_SEC;
    time_t local = (time_t)(now / TWIN_SEC + off_s);
    struct tm tm;

    cr_assert_not_null(gmtime_r(&local, &tm));
    tm = (struct tm){ .tm_year = tm.tm_year + 1, .tm_mday = 1 };
    return ((int64_t)timegm(&tm) - off_s) * TWIN_SEC;
}

/* The next window's start, or the one after (or 1 us off); for a
 * calendar window sometimes the next year's start. */
static int64_t fw_edge(uint64_t *s, const struct twin_key *k, int64_t now)
{
    const struct fixed_window_params *p = P(&k->cf);
    struct fixed_window_span sp;
    int64_t w = fw_unit(&k->cf), end;

    if (p->unit == FIXED_WINDOW_EPOCH) {
        return now + w - now % w + lua_twin_rnd_in(s, -1, 1) +
               (lua_twin_rnd_in(s, 0, 3) == 0 ? w : 0);
    }
    fixed_window_calendar(p->unit, p->offset_ns, now * 1000, &sp);
    end = now + sp.until_ns / 1000;
    if (lua_twin_rnd_in(s, 0, 3) == 0) {
        fixed_window_calendar(p->unit, p->offset_ns, end * 1000, &sp);
        end += sp.until_ns / 1000;
    } else if (lua_twin_rnd_in(s, 0, 3) == 0) {
        end = fw_year_end(&k->cf, now);
    }
    return end + lua_twin_rnd_in(s, -1, 1);
}

/* A valid state in an unusual place: above max, a window of another
 * length (not aligned), a later window (the clock was ahead), or an old
 * one. */
static int fw_plant(uint64_t *s, struct twin_key *k, int64_t now)
{
    int64_t w = fw_unit(&k->cf), start, max = P(&k->cf)->max;

    switch (lua_twin_rnd_in(s, 0, 3)) {
    case 0:
        start = fw_start_us(&k->cf, now);
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
    twin_plant(k, "HSET %%s start %" PRId64 " count %" PRId64, start,
               lua_twin_rnd_in(s, 0, max < MAX ? max + 1 : MAX));
    return 1;
}

/* The refund leaves the state of before the check rolled to now's window
 * (no key when nothing is counted in now's own window: a later or
 * unaligned one holds its place), and sets no expiry. */
static int fw_after_refund(struct twin_key *k, const void *pre, int pre_have,
                           int64_t now, int64_t cost,
                           const struct lua_twin_txn *tx, const char *ctx)
{
    struct fixed_window_state want;
    int drop;

    (void)pre_have;
    (void)cost;
    twin_model(k, pre, now, 0);
    memcpy(&want, k->next, sizeof(want));
    drop = want.count == 0 && want.start_ns == fw_start_us(&k->cf, now) * 1000;
    cr_assert_eq(k->have, !drop, "%s: key after the refund", ctx);
    if (k->have) {
        fw_same(k->st, &want, ctx);
        cr_assert_eq(tx->pttl, -1, "%s: the refund set an expiry", ctx);
    }
    return 1;
}

static const struct twin_algo FW = {
    .name = "fixed_window",
    .read_fmt = "HGETALL %s",
    .nparams = 3,
    .state_size = sizeof(struct fixed_window_state),
    .parse = fw_parse,
    .expect_same = fw_same,
    .conf = fw_conf,
    .decide = fw_decide,
    .state_error = FIXED_WINDOW_ERR_STATE,
    .rnd_conf = fw_rnd_conf,
    .rnd_cost = fw_rnd_cost,
    .unit_us = fw_unit,
    .rnd_edge = fw_edge,
    .plant = fw_plant,
    .after_refund = fw_after_refund,
    .adjust = fw_adjust,
};

/* The same, drawing calendar windows. */
static const struct twin_algo FW_CAL = {
    .name = "fixed_window",
    .read_fmt = "HGETALL %s",
    .nparams = 3,
    .state_size = sizeof(struct fixed_window_state),
    .parse = fw_parse,
    .expect_same = fw_same,
    .conf = fw_conf,
    .decide = fw_decide,
    .state_error = FIXED_WINDOW_ERR_STATE,
    .rnd_conf = fw_rnd_cal,
    .rnd_cost = fw_rnd_cost,
    .unit_us = fw_unit,
    .rnd_edge = fw_edge,
    .plant = fw_plant,
    .after_refund = fw_after_refund,
    .adjust = fw_adjust,
};

/* ---------------- The walk and the tables ---------------- */

Test(it_lua_fixed_window, randomized_sequences_match_the_c_model,
     .init = it_init, .fini = px_env_fini, .timeout = 120)
{
    twin_walk(&FW, "it_lua_fixed_window");
}

Test(it_lua_fixed_window, calendar_sequences_match_the_c_model, .init = it_init,
     .fini = px_env_fini, .timeout = 120)
{
    twin_walk(&FW_CAL, "it_lua_fixed_window calendar");
}

/* 2024-03-01 00:00 JST, 2027-01-01 00:00 UTC, in us. */
#define JST_MAR_2024 INT64_C(1709218800000000)
#define UTC_2027     INT64_C(1798761600000000)
#define MONTH31_US   INT64_C(2678400000000)

Test(it_lua_fixed_window, calendar_windows_end_at_month_and_year_ends,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    static const struct twin_row rows[] = {
        /* A Tokyo budget of 2 a month: February (JST) ends 1 us later. */
        TWIN_SET(2, -3, 540),
        TWIN_CALL("check", JST_MAR_2024 - 1, 1,
                  "limited 0 reset_us 1 expiry_ms 1 undo 1706713200000000"),
        TWIN_CALL("check", JST_MAR_2024 - 1, 2, "limited 1 retry_us 1"),
        /* March (JST): 31 days, a new count. */
        TWIN_CALL("check", JST_MAR_2024, 2,
                  "limited 0 remaining 0 reset_us 2678400000000 "
                  "expiry_ms 2678400000 undo 1709218800000000"),
        TWIN_CALL("peek", JST_MAR_2024 + MONTH31_US - 1, 1,
                  "limited 1 retry_us 1"),
        /* The refund of a window's only count drops the key. */
        TWIN_CALL("check", JST_MAR_2024 + MONTH31_US, 1, NULL),
        TWIN_REFUND(JST_MAR_2024 + MONTH31_US, 1, NULL, "exists 0"),
        /* The year end in UTC: December to January. */
        TWIN_SET(1, -3, 0),
        TWIN_CMD("DEL %s"),
        TWIN_CALL("check", UTC_2027 - 1, 1,
                  "limited 0 reset_us 1 undo 1796083200000000"),
        TWIN_CALL("check", UTC_2027 - 1, 1, "limited 1 retry_us 1"),
        TWIN_CALL("check", UTC_2027, 1,
                  "limited 0 reset_us 2678400000000 undo 1798761600000000"),
        /* A week from Monday at -05:00: Monday 2026-11-30 05:00 UTC. */
        TWIN_SET(1, -2, -300),
        TWIN_CMD("DEL %s"),
        TWIN_CALL("check", INT64_C(1796014800000000) - 1, 1,
                  "limited 0 reset_us 1"),
        TWIN_CALL("check", INT64_C(1796014800000000), 1,
                  "limited 0 reset_us 604800000000 undo 1796014800000000"),
        /* A day at +14:00 starts 14 h before UTC's. */
        TWIN_SET(1, -1, 840),
        TWIN_CMD("DEL %s"),
        TWIN_CALL("check", UTC_2027 - 14 * 3600 * TWIN_SEC, 1,
                  "limited 0 reset_us 86400000000 undo 1798711200000000"),
        /* 2000 is leap, 2100 is not: from Feb 28th, 2 days and 1 left. */
        TWIN_SET(1, -3, 0),
        TWIN_CMD("DEL %s"),
        TWIN_CALL("check", INT64_C(951696000000000), 1,
                  "reset_us 172800000000"),
        TWIN_CALL("check", INT64_C(4107456000000000), 1,
                  "reset_us 86400000000"),
        /* January 1970 in Tokyo began 9 h before the epoch: from 0. */
        TWIN_SET(3, -3, 540),
        TWIN_CMD("DEL %s"),
        TWIN_CALL("check", 0, 1, "limited 0 reset_us 2646000000000 undo 0"),
        TWIN_CALL("check", 5 * 3600 * TWIN_SEC, 1, "remaining 1 undo 0"),
    };

    TWIN_ROWS(&FW, rows);
}

Test(it_lua_fixed_window, peek_and_refusal_write_nothing, .init = it_init,
     .fini = px_env_fini, .timeout = 60)
{
    static const struct twin_row rows[] = {
        TWIN_SET(5, 1000, 0),
        TWIN_CALL("peek", TWIN_T0, 3, "remaining 2 undo 1700000000000000"),
        TWIN_CALL("check", TWIN_T0, 6, "limited 1 exists 0"),
        /* A stored window with an expiry of our own: untouched. */
        TWIN_CMD("HSET %s start 1700000000000000 count 4"),
        TWIN_CMD("PEXPIRE %s 900000"),
        TWIN_CALL("peek", TWIN_T0 + 999999, 1,
                  "limited 0 remaining 0 reset_us 1"),
        TWIN_CALL("check", TWIN_T0 + 999999, 2,
                  "limited 1 retry_us 1 undo - field:count 4 "
                  "pttl_min 800000"),
        /* The next window starts empty. */
        TWIN_CALL("peek", TWIN_T0 + 1000000, 5, "limited 0 reset_us 1000000"),
    };

    TWIN_ROWS(&FW, rows);
}

Test(it_lua_fixed_window, refund_takes_the_cost_back_from_its_window,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    static const struct twin_row rows[] = {
        TWIN_SET(10, 60000, 0),
        /* The first count of a window: refunded, the key goes. */
        TWIN_CALL("check", TWIN_T0, 4, "undo 1699999980000000"),
        TWIN_REFUND(TWIN_T0 + 5, 4, NULL, "exists 0"),
        /* On top of others: only our cost goes, the expiry stays. */
        TWIN_CALL("check", TWIN_T0, 3, NULL),
        TWIN_CALL("check", TWIN_T0 + 1, 4, "remaining 3"),
        TWIN_REFUND(TWIN_T0 + 1, 4, NULL, "field:count 3 pttl_min 1"),
        /* Never below 0 (a refund of more than is counted). */
        TWIN_REFUND(TWIN_T0 + 1, 9, "1699999980000000", "exists 0"),
        /* The next window: an old token does nothing. */
        TWIN_CALL("check", TWIN_T0, 2, NULL),
        TWIN_CALL("check", TWIN_T0 + 40 * TWIN_SEC, 2, "undo 1700000040000000"),
        TWIN_REFUND(TWIN_T0 + 40 * TWIN_SEC, 2, "1699999980000000",
                    "field:count 2"),
        /* Nor do a token that is no start, a cost of 0, or an expired
         * key. */
        TWIN_REFUND(TWIN_T0 + 40 * TWIN_SEC, 2, "", NULL),
        TWIN_REFUND(TWIN_T0 + 40 * TWIN_SEC, 2, "1700000040000000x", NULL),
        TWIN_REFUND(TWIN_T0 + 40 * TWIN_SEC, 0, "1700000040000000",
                    "field:count 2"),
        TWIN_CMD("DEL %s"),
        TWIN_REFUND(TWIN_T0 + 40 * TWIN_SEC, 2, "1700000040000000", "exists 0"),
        /* A later window (the clock was ahead) keeps its key at count 0:
         * it still holds the window in place. */
        TWIN_CMD("HSET %s start 1700000100000000 count 0"),
        TWIN_CALL("check", TWIN_T0, 2,
                  "undo 1700000100000000 reset_us 160000000"),
        TWIN_REFUND(TWIN_T0, 2, NULL, "field:count 0"),
    };

    TWIN_ROWS(&FW, rows);
}

Test(it_lua_fixed_window, huge_durations_come_back_exact_or_saturated,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    static const struct twin_row rows[] = {
        /* A window of 10^11 ms stored near 2^53 us, the clock at 0: the
         * end is 9.1e15 us away, past 2^53 but within the int64 ns. */
        TWIN_SET(MAX, INT64_C(100000000000), 0),
        TWIN_CMD("HSET %s start 9007199254740984 count 9007199254740990"),
        TWIN_CALL("check", 0, 1, "limited 0 reset_ns 9107199254740984000"),
        TWIN_CALL("check", 0, 1, "limited 1"),
        /* The longest window: saturated at INT64_MAX ns. */
        TWIN_SET(MAX, WIN, 0),
        TWIN_CALL("check", 0, 1,
                  "retry_ns 9223372036854775807 reset_ns 9223372036854775807"),
        TWIN_CMD("HSET %s count 0"),
        TWIN_CALL("check", 0, MAX, "expiry_ms 9223372036855"),
    };

    TWIN_ROWS(&FW, rows);
}

Test(it_lua_fixed_window, bad_parameters_give_the_c_model_errors,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
#define E_MAX FIXED_WINDOW_ERR_MAX
#define E_WIN FIXED_WINDOW_ERR_WINDOW
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
        /* Calendar windows: -1 day, -2 week, -3 month, and an offset. */
        { { "5", "-4", "0" }, E_WIN },
        { { "0", "-3", "9999" }, E_MAX },
        { { "5", "-3", "841" }, FIXED_WINDOW_ERR_TZ },
        { { "5", "-1", "-841" }, FIXED_WINDOW_ERR_TZ },
        { { "5", "-2", "x" }, FIXED_WINDOW_ERR_TZ },
        { { "5", "-2", "1.5" }, FIXED_WINDOW_ERR_TZ },
    };
    /* The limits themselves are fine. */
    static const struct twin_row fine[] = {
        TWIN_SET(MAX, WIN, 0),
        TWIN_CALL("peek", TWIN_T0, 1, "exists 0"),
        TWIN_SET(MAX, -3, 840),
        TWIN_CALL("peek", TWIN_T0, 1, "exists 0"),
    };
    redisContext *c;

    twin_run_bad_params(&FW, bad, sizeof(bad) / sizeof(*bad));
    c = twin_run_rows(&FW, fine, sizeof(fine) / sizeof(*fine));
    px_check_int(px_cmd(c, "DBSIZE"), 0);
    redisFree(c);
}

Test(it_lua_fixed_window, wrong_type_and_malformed_state_give_errors,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    static const char *const bad[] = {
        "HSET %s start -1 count 0",
        "HSET %s start 1700000000000000 count -1",
        "HSET %s start x count 0",
        "HSET %s start 1700000000000000 count 1.0",
        "HSET %s start '' count 0",
        "HSET %s start 9007199254740992 count 0",
        "HSET %s start 0 count 9007199254740992",
        "HSET %s start 0", /* a field missing */
    };
    twin_run_bad_states(&FW, 5, 1000, 0, "SADD %s a", bad,
                        sizeof(bad) / sizeof(*bad));
}
