/* algorithms/lua/sliding_log.lua (through limiter.lua) against the C model
 * algorithms/sliding_log.c, on a real redis-server, through the shared
 * driver of twin_walk.h: the descriptor, the walk, and tables of edges.
 * The state is a ZSET of entries scored by their time (us), members
 * "<score>:<L><j>" numbering the entries of one time. */
#include "tests/integration/fixture.h"
#include "tests/integration/twin_walk.h"
#include "tests/support/px_test.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "algorithms/sliding_log.h"

PX_TEST_SUITE(it_lua_sliding_log);

#define MAX_E    SLIDING_LOG_MAX_ENTRIES
#define MAX_DUR  SLIDING_LOG_MAX_DURATION_MS
#define CARRY    (MAX_E + 1024) /* entries a state holds */
#define PLANTED  64             /* entries beyond which nothing is planted */
#define BIG_COST 1000           /* costs above it only for big, rare cases */
#define P(cf)    ((struct sliding_log_params *)(cf)->p)

_Static_assert(sizeof(struct sliding_log_params) <= TWIN_PARAMS_BYTES,
               "params");

/* The log as the model sees it. */
struct sl_state {
    size_t n;         /* entries; 0: no key */
    int64_t e[CARRY]; /* the timestamps, sorted, ns */
};

static const struct twin_algo SL;

static void it_init(void)
{
    px_redis_start(&px_env()->redis, NULL);
}

/* ---------------- The descriptor ---------------- */

/* Asserts a member is "<score>:<L><j>": j >= 1 in canonical decimal, L
 * the letter for its digit count ('a' for 1). */
static void sl_member(const char *mem, int64_t score, const char *ctx)
{
    char want[TWIN_DIGITS + 1];
    size_t wl = (size_t)snprintf(want, sizeof(want), "%" PRId64 ":", score);
    const char *j = mem + wl + 1;
    int64_t v;

    if (strncmp(mem, want, wl) != 0 || !lua_twin_dec(j, &v) || v < 1 ||
        mem[wl] != 'a' + (int)strlen(j) - 1) {
        cr_assert_fail("%s: member '%s', score %" PRId64, ctx, mem, score);
    }
}

static int sl_parse(const redisReply *r, void *st, const char *ctx)
{
    struct sl_state *m = st;

    m->n = 0;
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s: ZRANGE", ctx);
    cr_assert_leq(r->elements / 2, (size_t)CARRY, "%s: entries", ctx);
    for (size_t i = 0; i < r->elements; i += 2) {
        int64_t t;

        if (!lua_twin_dec(r->element[i + 1]->str, &t)) {
            cr_assert_fail("%s: score '%s'", ctx, r->element[i + 1]->str);
        }
        sl_member(r->element[i]->str, t, ctx);
        m->e[m->n++] = t * 1000;
    }
    return m->n > 0;
}

static void sl_same(const void *a, const void *b, const char *ctx)
{
    const struct sl_state *x = a, *y = b;

    cr_assert_eq(x->n, y->n, "%s: %zu entries stored, model %zu", ctx, x->n,
                 y->n);
    for (size_t i = 0; i < x->n; i++) {
        if (x->e[i] != y->e[i]) {
            cr_assert_fail("%s: entry %zu: %" PRId64
                           " ns stored, model %" PRId64,
                           ctx, i, x->e[i], y->e[i]);
        }
    }
}

static const char *sl_conf(struct twin_conf *cf, const int64_t n[3])
{
    const char *err = NULL;

    return sliding_log_params_init(P(cf), n[0], n[1], n[2], &err) ==
                   SLIDING_LOG_OK
               ? NULL
               : err;
}

static void sl_decide(const struct twin_conf *cf, const void *st, int64_t now,
                      int64_t cost, struct twin_result *r, void *next)
{
    const struct sl_state *m = st;
    struct sl_state *nx = next;
    struct sliding_log_result x;
    const char *err = NULL;

    cr_assert_eq(sliding_log_decide(P(cf), m && m->n ? m->e : NULL,
                                    m ? m->n : 0, now * 1000, cost, nx->e,
                                    MAX_E, &x, &err),
                 SLIDING_LOG_OK, "model: %s", err);
    r->d = x.d;
    r->write = x.write == SLIDING_LOG_WRITE_SET;
    nx->n = x.next_n;
    r->have_next = x.next_n > 0;
    r->expiry_ms = x.expiry_ms;
    /* Refused attempts stay logged: nothing to undo. */
    if (r->write && !x.d.limited) {
        snprintf(r->undo, sizeof(r->undo), "%" PRId64, now);
    }
}

/* LIMITER ADJUST: sliding_log_adjust(), its write a check's (SET) or the
 * key's deletion (DEL, every entry given back). */
static void sl_adjust(const struct twin_conf *cf, const void *st, int64_t now,
                      int64_t delta, struct twin_result *r, void *next)
{
    const struct sl_state *m = st;
    struct sl_state *nx = next;
    struct sliding_log_result x;
    const char *err = NULL;

    cr_assert_eq(sliding_log_adjust(P(cf), m && m->n ? m->e : NULL,
                                    m ? m->n : 0, now * 1000, delta, nx->e,
                                    MAX_E, &x, &err),
                 SLIDING_LOG_OK, "model: %s", err);
    r->d = x.d;
    r->write = x.write != SLIDING_LOG_WRITE_NONE;
    nx->n = x.next_n;
    r->have_next = x.write != SLIDING_LOG_WRITE_DEL;
    r->expiry_ms = x.expiry_ms;
}

/* Random parameters: small, ordinary and the maxima (100000 entries,
 * 3650 days), min_interval off, shorter or longer than the window; with
 * `old`, half the time only min_interval changes. */
static void sl_rnd_conf(uint64_t *s, struct twin_conf *cf,
                        const struct twin_conf *old)
{
    static const int64_t maxes[] = { 1, 2, 3, 10, 100, 0, 0, -1 };
    static const int64_t windows[] = { 1, 10, 1000, 60000, MAX_DUR, 0 };
    int64_t max = lua_twin_pick(s, maxes, sizeof(maxes) / sizeof(*maxes));
    int64_t w = lua_twin_pick(s, windows, sizeof(windows) / sizeof(*windows));
    int64_t mi;

    if (old != NULL && lua_twin_rnd_in(s, 0, 1)) {
        twin_conf_set(&SL, cf, old->n[0], old->n[1],
                      old->n[2] == 0 ? lua_twin_rnd_in(s, 1, old->n[1]) : 0);
        return;
    }
    if (max == 0) {
        max = lua_twin_rnd_in(s, 1, 50);
    } else if (max == -1) {
        max = lua_twin_rnd_in(s, 0, 3) == 0 ? MAX_E
                                            : lua_twin_rnd_in(s, 1, MAX_E);
    }
    if (w == 0) {
        w = lua_twin_rnd_in(s, 1, lua_twin_rnd_in(s, 0, 1) ? 5000 : MAX_DUR);
    }
    switch (lua_twin_rnd_in(s, 0, 7)) {
    case 0:
        mi = 1;
        break;
    case 1:
        mi = w / 2;
        break;
    case 2:
        mi = w < MAX_DUR / 2 ? 2 * w : MAX_DUR;
        break;
    case 3:
        mi =
            lua_twin_rnd_in(s, 0, 1) ? MAX_DUR : lua_twin_rnd_in(s, 0, MAX_DUR);
        break;
    default:
        mi = 0;
        break;
    }
    twin_conf_set(&SL, cf, max, w, mi);
}

/* A cost: 0, 1, exactly max, above it, or anything up to it (costs above
 * BIG_COST only now and then: each is that many entries). */
static int64_t sl_rnd_cost(uint64_t *s, const struct twin_conf *cf)
{
    int64_t max = P(cf)->max, cap = max < BIG_COST ? max : BIG_COST;

    switch (lua_twin_rnd_in(s, 0, 11)) {
    case 0:
        return 0;
    case 1:
        return max <= BIG_COST || lua_twin_rnd_in(s, 0, 3) == 0 ? max : cap;
    case 2:
        return max + 1;
    case 3:
        return lua_twin_rnd_in(s, 1, cap);
    default:
        return lua_twin_rnd_in(s, 1, cap < 3 ? cap : 3);
    }
}

/* A delta: past max (it logs max entries, when that is cheap), a give
 * back of more than any log holds, or a cost of either sign. */
static int64_t sl_rnd_delta(uint64_t *s, const struct twin_conf *cf)
{
    int64_t max = P(cf)->max, d;

    switch (lua_twin_rnd_in(s, 0, 9)) {
    case 0:
        return 0;
    case 1:
        return max <= BIG_COST ? max + lua_twin_rnd_in(s, 1, TWIN_US_MAX - max)
                               : 1;
    case 2:
        return -TWIN_US_MAX;
    default:
        d = sl_rnd_cost(s, cf);
        return lua_twin_rnd_in(s, 0, 1) ? d : -d;
    }
}

static int64_t sl_unit(const struct twin_conf *cf)
{
    int64_t half = P(cf)->window_ns / 2000;

    return half > 0 ? half : 1;
}

/* Where the newest entry is min_interval old, or an entry leaves the
 * window (or 1 us before). */
static int64_t sl_edge(uint64_t *s, const struct twin_key *k, int64_t now)
{
    const struct sl_state *m = k->st;
    int64_t w = P(&k->cf)->window_ns / 1000;
    int64_t mi = P(&k->cf)->min_interval_ns / 1000;

    (void)now;
    if (!k->have || m->n == 0) {
        return -1;
    }
    if (lua_twin_rnd_in(s, 0, 2) == 0) {
        return m->e[m->n - 1] / 1000 + mi - lua_twin_rnd_in(s, 0, 1);
    }
    return m->e[lua_twin_rnd_in(s, 0, (int64_t)m->n - 1)] / 1000 + w -
           lua_twin_rnd_in(s, 0, 1);
}

/* Adds one entry the twin did not log: from the future (a clock jumped
 * back), live, past the window, past the horizon, or at now, numbered
 * high. */
static int sl_plant(uint64_t *s, struct twin_key *k, int64_t now)
{
    const struct sl_state *m = k->st;
    int64_t w = P(&k->cf)->window_ns / 1000, h = P(&k->cf)->horizon_ns / 1000;
    int64_t t;

    if (k->have && m->n >= PLANTED) {
        return 0;
    }
    switch (lua_twin_rnd_in(s, 0, 4)) {
    case 0:
        t = now + lua_twin_rnd_in(s, 1, w);
        break;
    case 1:
        t = now - lua_twin_rnd_in(s, 0, w - 1);
        break;
    case 2:
        t = now - w - lua_twin_rnd_in(s, 0, h - w);
        break;
    case 3:
        t = now - h - lua_twin_rnd_in(s, 0, w);
        break;
    default:
        t = now;
        break;
    }
    if (t < 0 || t > TWIN_US_MAX) {
        return 0;
    }
    twin_plant(k, "ZADD %%s %" PRId64 " %" PRId64 ":c%" PRId64, t, t,
               lua_twin_rnd_in(s, 500, 999));
    return 1;
}

/* Entries of m at now. */
static size_t sl_at(const struct sl_state *m, int64_t now)
{
    size_t at = 0;

    for (size_t i = 0; i < m->n; i++) {
        at += m->e[i] == now * 1000;
    }
    return at;
}

/* The refund sets no expiry and takes exactly cost entries at now. */
static int sl_after_refund(struct twin_key *k, const void *pre, int pre_have,
                           int64_t now, int64_t cost,
                           const struct lua_twin_txn *tx, const char *ctx)
{
    size_t after = k->have ? sl_at(k->st, now) : 0;

    (void)pre_have;
    cr_assert_eq(tx->pttl, k->have ? -1 : -2, "%s: PTTL after refund", ctx);
    twin_model(k, pre, now, cost); /* the check's own log again */
    cr_assert_eq(sl_at(k->next, now) - after, (size_t)cost,
                 "%s: the refund removed %zu entries", ctx,
                 sl_at(k->next, now) - after);
    return 1;
}

static const struct twin_algo SL = {
    .name = "sliding_log",
    .read_fmt = "ZRANGE %s 0 -1 WITHSCORES",
    .nparams = 3,
    .state_size = sizeof(struct sl_state),
    .parse = sl_parse,
    .expect_same = sl_same,
    .conf = sl_conf,
    .decide = sl_decide,
    .state_error = SLIDING_LOG_ERR_STATE,
    .rnd_conf = sl_rnd_conf,
    .rnd_cost = sl_rnd_cost,
    .unit_us = sl_unit,
    .rnd_edge = sl_edge,
    .plant = sl_plant,
    .after_refund = sl_after_refund,
    .adjust = sl_adjust,
    .rnd_delta = sl_rnd_delta,
};

/* ---------------- The walk and the tables ---------------- */

Test(it_lua_sliding_log, randomized_sequences_match_the_c_model,
     .init = it_init, .fini = px_env_fini, .timeout = 120)
{
    twin_walk(&SL, "it_lua_sliding_log");
}

#define SAT_NS "9223372036854775807"
#define SAT_US "9223372036854775"

Test(it_lua_sliding_log, durations_past_2_53_us_are_exact_text_then_saturate,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    static const struct twin_row rows[] = {
        /* An entry far in the future of time 0 (a clock far behind): it
         * leaves the window and the horizon past 2^53 us (as text). The
         * refused attempt is logged and capped away at once (the future
         * entry is newer). */
        TWIN_SET(1, MAX_DUR, 0),
        TWIN_CMD("ZADD %s 8800000000000000 8800000000000000:a1"),
        TWIN_CALL("check", 0, 1,
                  "limited 1 retry_us 9115360000000000 reset_us "
                  "9115360000000000 expiry_ms 9115360000000 retry_text 1 "
                  "reset_text 1 zcard 1"),
        TWIN_CALL("peek", INT64_C(8800000000000000), 1,
                  "reset_us 315360000000000 reset_text 0"),
        /* Just under 2^53 us, with the longest min_interval: saturated. */
        TWIN_SET(2, MAX_DUR, MAX_DUR),
        TWIN_CMD("DEL %s"),
        TWIN_CMD("ZADD %s 9007199254740990 9007199254740990:a1"),
        TWIN_CALL("check", 0, 1,
                  "limited 1 retry_ns " SAT_NS " reset_ns " SAT_NS
                  " expiry_ms 9223372036855 retry_us " SAT_US
                  " reset_us " SAT_US),
    };
    TWIN_ROWS(&SL, rows);
}

Test(it_lua_sliding_log, a_log_of_100000_entries_is_capped_and_refunded,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    static const struct twin_row rows[] = {
        TWIN_SET(MAX_E, 1000, 0),
        TWIN_CALL("check", TWIN_T0, MAX_E, "limited 0 zcard 100000"),
        /* Refused, logged, and capped: the oldest attempts go. */
        TWIN_CALL("check", TWIN_T0 + 10, 3,
                  "limited 1 zcard 100000 zcount:1700000000000010 3"),
    };
    redisContext *c = lua_twin_connect();
    struct twin_key k;

    twin_key_init(&k, &SL, c, "k");
    twin_rows(&k, rows, sizeof(rows) / sizeof(*rows));
    /* A window later, one admission of everything, refunded: back to the
     * log as it was, less what left the window. */
    cr_assert(twin_refund_cycle(&k, TWIN_T0 + 1000010, MAX_E, TWIN_T0 + 1500000,
                                "refund"),
              "refund ran");
    twin_key_free(&k);
    redisFree(c);
}

Test(it_lua_sliding_log, adjust_logs_debt_and_gives_back_the_newest,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
#define AT4 "1700000000400000"
#define AT6 "1700000000600000"
    static const struct twin_row rows[] = {
        TWIN_SET(5, 1000, 100),
        TWIN_CALL("check", TWIN_T0, 2, NULL),
        /* 1000 units of work: max entries at now, the older ones capped. */
        TWIN_CALL("adjust", TWIN_T0 + 400000, 1000,
                  "limited 1 retry_us 1000000 zcard 5 zcount:" AT4
                  " 5 expiry_ms 1000 undo -"),
        /* 2 back: the newest go; spaced and under max again. */
        TWIN_CALL("adjust", TWIN_T0 + 500000, -2,
                  "limited 0 remaining 1 zcard 3 pttl_max 900"),
        /* An adjust numbers its entries after a check's of the same
         * time, so the check's refund still finds its own. */
        TWIN_CALL("check", TWIN_T0 + 600000, 1, "limited 0 undo " AT6),
        TWIN_CALL("adjust", TWIN_T0 + 600000, 1, "zcount:" AT6 " 2"),
        TWIN_REFUND(TWIN_T0 + 600000, 1, AT6, "zcount:" AT6 " 1 zcard 4"),
        /* Newest first, across timestamps. */
        TWIN_CALL("adjust", TWIN_T0 + 700000, -2,
                  "zcount:" AT6 " 0 zcount:" AT4 " 2"),
        /* More than the log holds: it is gone; then nothing to give. */
        TWIN_CALL("adjust", TWIN_T0 + 700000, -100, "limited 0 exists 0"),
        TWIN_CALL("adjust", TWIN_T0 + 700000, -1, "exists 0"),
        TWIN_CALL("adjust", TWIN_T0 + 700000, 0, "exists 0"),
    };
    TWIN_ROWS(&SL, rows);
}

Test(it_lua_sliding_log, edges_to_the_microsecond_match_the_c_model,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    static const struct twin_row rows[] = {
        /* min_interval 100 ms: 1 us early is refused (and logged),
         * exactly min_interval after that attempt passes. */
        TWIN_SET(10, 1000, 100),
        TWIN_CALL("check", TWIN_T0, 1, NULL),
        TWIN_CALL("check", TWIN_T0 + 99999, 1, "limited 1 retry_us 100000"),
        TWIN_CALL("check", TWIN_T0 + 199999, 1, "limited 0"),
        /* The window: an entry exactly W old no longer counts. */
        TWIN_CMD("DEL %s"),
        TWIN_SET(2, 1000, 0),
        TWIN_CALL("check", TWIN_T0, 2, NULL),
        TWIN_CALL("peek", TWIN_T0 + 999999, 1, "limited 1 retry_ns 1000"),
        TWIN_CALL("peek", TWIN_T0 + 1000000, 2, NULL),
        TWIN_CALL("check", TWIN_T0 + 1000000, 2, "limited 0"),
        /* max lowered below the live entries: a peek (cost 0) is refused
         * until enough leave the window, whatever min_interval says. */
        TWIN_CMD("DEL %s"),
        TWIN_SET(3, 1000, 2000),
        TWIN_CALL("check", TWIN_T0, 3, NULL),
        TWIN_SET(2, 1000, 2000),
        TWIN_CALL("check", TWIN_T0 + 1000, 0, "limited 1 retry_us 999000"),
        TWIN_CALL("check", TWIN_T0 + 1000, 1, "limited 1 retry_us 2000000"),
    };
    TWIN_ROWS(&SL, rows);
}

Test(it_lua_sliding_log, members_number_entries_of_one_timestamp_in_order,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
#define AT(j) "score:1700000000000000:" j " 1700000000000000"
    static const struct twin_row rows[] = {
        TWIN_SET(20, 1000, 0),
        TWIN_CALL("check", TWIN_T0, 9, AT("a1") " " AT("a9") " zcard 9"),
        TWIN_CALL("check", TWIN_T0, 3,
                  AT("b10") " " AT("b12") " zcard 12 undo 1700000000000000"),
        /* A refund takes the newest numbered: the next write numbers on
         * from the largest left. */
        TWIN_REFUND(TWIN_T0, 2, NULL,
                    "zcard 10 score:1700000000000000:b11 nil"),
        TWIN_CALL("check", TWIN_T0, 1, AT("b11")),
        /* One entry on a fresh key is numbered 1, the next at its
         * instant 2. */
        TWIN_CMD("DEL %s"),
        TWIN_CALL("check", TWIN_T0, 1, AT("a1")),
        TWIN_CALL("check", TWIN_T0, 1, AT("a2") " zcard 2"),
    };
    TWIN_ROWS(&SL, rows);
}

Test(it_lua_sliding_log, peek_writes_nothing, .init = it_init,
     .fini = px_env_fini, .timeout = 60)
{
    /* A missing key stays missing; a stored log with its TTL stays
     * untouched by peeks that would pass, be refused by min_interval or
     * the count (a check would log those), or never pass (each step
     * asserts nothing was written). */
    static const struct twin_row rows[] = {
        TWIN_SET(3, 1000, 100),
        TWIN_CALL("peek", TWIN_T0, 0, "exists 0"),
        TWIN_CALL("peek", TWIN_T0, 2, "exists 0"),
        TWIN_CALL("peek", TWIN_T0, 4, "exists 0"),
        TWIN_CALL("check", TWIN_T0, 2, "pttl_min 1 pttl_max 1000"),
        TWIN_CALL("peek", TWIN_T0 + 50000, 0, NULL),
        TWIN_CALL("peek", TWIN_T0 + 50000, 1, "limited 1"),
        TWIN_CALL("peek", TWIN_T0 + 50000, 4, NULL),
        TWIN_CALL("peek", TWIN_T0 + 150000, 0, NULL),
        TWIN_CALL("peek", TWIN_T0 + 150000, 1, "limited 0"),
        TWIN_CALL("peek", TWIN_T0 + 150000, 2, "limited 1"),
        TWIN_CALL("peek", TWIN_T0 + 150000, 4, "zcard 2"),
    };
    TWIN_ROWS(&SL, rows);
}

Test(it_lua_sliding_log, refund_restores_then_is_a_no_op_once_moved_on,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
#define LATER (TWIN_T0 + 2000000)
    static const struct twin_row rows[] = {
        TWIN_SET(5, 1000, 0),
        /* Everything back: the key goes. */
        TWIN_CALL("check", TWIN_T0, 2, NULL),
        TWIN_REFUND(TWIN_T0 + 50000, 2, NULL, "exists 0"),
        /* Only the entries of its own timestamp go. */
        TWIN_CALL("check", TWIN_T0, 2, "undo 1700000000000000"),
        TWIN_CALL("check", TWIN_T0 + 10, 1, "undo 1700000000000010"),
        TWIN_REFUND(TWIN_T0 + 10, 2, "1700000000000000",
                    "zcard 1 zcount:1700000000000010 1"),
        /* A refused attempt stays logged: it has no token. */
        TWIN_SET(1, 1000, 0),
        TWIN_CALL("check", TWIN_T0 + 20, 1, "limited 1 undo -"),
        TWIN_REFUND(TWIN_T0 + 20, 1, "", "zcard 1 zcount:1700000000000020 1"),
        /* Entries past the horizon were dropped by a later write: a
         * no-op. */
        TWIN_SET(5, 1000, 0),
        TWIN_CALL("check", LATER, 1, NULL),
        TWIN_REFUND(LATER, 1, "1700000000000010", "zcard 1"),
        /* Cost 0 or above max, an empty or malformed token: no-ops. */
        TWIN_REFUND(LATER, 0, "1700000002000000", NULL),
        TWIN_REFUND(LATER, 6, "1700000002000000", NULL),
        TWIN_REFUND(LATER, 1, "", NULL),
        TWIN_REFUND(LATER, 1, "x", "zcard 1"),
        /* An expired key stays missing. */
        TWIN_CMD("DEL %s"),
        TWIN_REFUND(LATER, 1, "1700000002000000", "exists 0"),
    };
    const char *p[4] = { "5", "1000", "0", NULL };
    redisContext *c = twin_run_rows(&SL, rows, sizeof(rows) / sizeof(*rows));

    /* Another type is left alone. */
    px_check_status(px_cmd(c, "SET k v"), "OK");
    lua_twin_ok(c, "refund", "k", "sliding_log", p, LATER, 1,
                "1700000002000000");
    px_check_str(px_cmd(c, "GET k"), "v");
    redisFree(c);
}

Test(it_lua_sliding_log, bad_parameters_give_the_c_model_errors,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
#define E_MAX SLIDING_LOG_ERR_MAX
#define E_WIN SLIDING_LOG_ERR_WINDOW
#define E_MI  SLIDING_LOG_ERR_INTERVAL
    static const struct twin_bad bad[] = {
        { { "0", "1000", "0" }, E_MAX },
        { { "-1", "1000", "0" }, E_MAX },
        { { "100001", "1000", "0" }, E_MAX },
        { { "", "1000", "0" }, E_MAX },
        { { "0", "0", "-1" }, E_MAX },
        { { "5", "0", "0" }, E_WIN },
        { { "5", "315360000001", "0" }, E_WIN },
        { { "5", "1e3", "0" }, E_WIN },
        { { "5", "1000", "-1" }, E_MI },
        { { "5", "1000", "315360000001" }, E_MI },
        { { "5", "1000", "" }, E_MI },
        { { "5", "1000", "0.5" }, E_MI },
    };
    twin_run_bad_params(&SL, bad, sizeof(bad) / sizeof(*bad));
}

Test(it_lua_sliding_log, wrong_type_and_malformed_state_are_errors,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    /* Scores the twin cannot read as timestamps: negative (the model's
     * error too), fractional, infinite, 2^53 and more. */
    static const char *const bad[] = {
        "ZADD %s -5 bad 1699999999999000 ok",
        "ZADD %s 1.5 bad 1699999999999000 ok",
        "ZADD %s +inf bad 1699999999999000 ok",
        "ZADD %s -inf bad 1699999999999000 ok",
        "ZADD %s 9007199254740992 bad 1699999999999000 ok",
    };
    twin_run_bad_states(&SL, 5, 1000, 0, "HSET %s f v", bad,
                        sizeof(bad) / sizeof(*bad));
}
