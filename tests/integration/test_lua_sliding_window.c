/* algorithms/lua/sliding_window.lua (through limiter.lua) against the C
 * model algorithms/sliding_window.c, on a real redis-server, through the
 * shared driver of twin_walk.h: the descriptor, the walk, and tables of
 * edges. The state is a HASH of slots (start in us -> count) and their
 * total. */
#include "tests/integration/fixture.h"
#include "tests/integration/twin_walk.h"
#include "tests/support/px_test.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/sliding_window.h"

PX_TEST_SUITE(it_lua_sliding_window);

#define MAX_N     SLIDING_WINDOW_MAX_COUNT
#define MAX_WIN   SLIDING_WINDOW_MAX_WINDOW_MS
#define MAX_SLOTS SLIDING_WINDOW_MAX_SLOTS
#define CARRY     4096 /* slots a state holds: N, plus planted ones */
#define PLANTED   64   /* slots beyond which nothing is planted */
#define P(cf)     ((struct sliding_window_params *)(cf)->p)

_Static_assert(sizeof(struct sliding_window_params) <= TWIN_PARAMS_BYTES,
               "params");
_Static_assert(MAX_SLOTS <= CARRY, "carry");

/* The key's fields as the model sees them. */
struct sw_state {
    size_t n;                            /* slots in s */
    int has_total;                       /* "total" is stored */
    int64_t total;                       /* its value */
    struct sliding_window_slot s[CARRY]; /* the slot fields, ns */
};

static const struct twin_algo SW;

static void it_init(void)
{
    px_redis_start(&px_env()->redis, NULL);
}

/* ---------------- The descriptor ---------------- */

/* Asserts every field is canonical. */
static int sw_parse(const redisReply *r, void *st, const char *ctx)
{
    struct sw_state *m = st;

    m->n = 0;
    m->has_total = 0;
    m->total = 0;
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s: HGETALL", ctx);
    for (size_t i = 0; i < r->elements; i += 2) {
        const char *f = r->element[i]->str, *v = r->element[i + 1]->str;
        int64_t start, count;

        if (strcmp(f, "total") == 0) {
            m->has_total = 1;
            cr_assert(lua_twin_dec(v, &m->total), "%s: total '%s'", ctx, v);
            continue;
        }
        cr_assert(lua_twin_dec(f, &start) && lua_twin_dec(v, &count),
                  "%s: field '%s' = '%s'", ctx, f, v);
        cr_assert_lt(m->n, (size_t)CARRY, "%s: slots", ctx);
        m->s[m->n].start_ns = start * 1000;
        m->s[m->n].count = count;
        m->n++;
    }
    return r->elements > 0;
}

static int sw_slot_cmp(const void *a, const void *b)
{
    const struct sliding_window_slot *x = a, *y = b;

    if (x->start_ns != y->start_ns) {
        return x->start_ns < y->start_ns ? -1 : 1;
    }
    return (x->count > y->count) - (x->count < y->count);
}

/* The same fields, slots in any order. */
static void sw_same(const void *a, const void *b, const char *ctx)
{
    static struct sliding_window_slot x[CARRY], y[CARRY];
    const struct sw_state *p = a, *q = b;

    cr_assert_eq(p->n, q->n, "%s: %zu slots vs %zu", ctx, p->n, q->n);
    cr_assert_eq(p->has_total, q->has_total, "%s: total stored", ctx);
    cr_assert(!p->has_total || p->total == q->total,
              "%s: total %" PRId64 " vs %" PRId64, ctx, p->total, q->total);
    memcpy(x, p->s, p->n * sizeof(*x));
    memcpy(y, q->s, q->n * sizeof(*y));
    qsort(x, p->n, sizeof(*x), sw_slot_cmp);
    qsort(y, q->n, sizeof(*y), sw_slot_cmp);
    for (size_t i = 0; i < p->n; i++) {
        if (x[i].start_ns != y[i].start_ns || x[i].count != y[i].count) {
            cr_assert_fail("%s: slot %zu: %" PRId64 " = %" PRId64 " vs %" PRId64
                           " = %" PRId64,
                           ctx, i, x[i].start_ns, x[i].count, y[i].start_ns,
                           y[i].count);
        }
    }
}

static const char *sw_conf(struct twin_conf *cf, const int64_t n[3])
{
    const char *err = NULL;

    return sliding_window_params_init(P(cf), n[0], n[1], n[2], &err) ==
                   SLIDING_WINDOW_OK
               ? NULL
               : err;
}

static void sw_decide(const struct twin_conf *cf, const void *st, int64_t now,
                      int64_t cost, struct twin_result *r, void *next)
{
    const struct sw_state *m = st;
    struct sw_state *nx = next;
    struct sliding_window_result x;
    const char *err = NULL;

    cr_assert_eq(sliding_window_decide(P(cf), m ? m->s : NULL, m ? m->n : 0,
                                       now * 1000, cost, nx->s, MAX_SLOTS, &x,
                                       &err),
                 SLIDING_WINDOW_OK, "model: %s", err);
    r->d = x.d;
    r->write = x.write == SLIDING_WINDOW_WRITE_SET;
    r->have_next = 1;
    r->expiry_ms = x.expiry_ms;
    nx->n = x.next_n;
    nx->has_total = 1;
    nx->total = x.total;
    /* The token is the start of the newest slot, where cost went. */
    if (r->write) {
        snprintf(r->undo, sizeof(r->undo), "%" PRId64,
                 nx->s[x.next_n - 1].start_ns / 1000);
    }
}

/* LIMITER ADJUST: sliding_window_adjust(), its write a check's (SET) or
 * the key's deletion (DEL, every live count given back). */
static void sw_adjust(const struct twin_conf *cf, const void *st, int64_t now,
                      int64_t delta, struct twin_result *r, void *next)
{
    const struct sw_state *m = st;
    struct sw_state *nx = next;
    struct sliding_window_result x;
    const char *err = NULL;

    cr_assert_eq(sliding_window_adjust(P(cf), m ? m->s : NULL, m ? m->n : 0,
                                       now * 1000, delta, nx->s, MAX_SLOTS, &x,
                                       &err),
                 SLIDING_WINDOW_OK, "model: %s", err);
    r->d = x.d;
    r->write = x.write != SLIDING_WINDOW_WRITE_NONE;
    r->have_next = x.write != SLIDING_WINDOW_WRITE_DEL;
    r->expiry_ms = x.expiry_ms;
    nx->n = x.next_n;
    nx->has_total = 1;
    nx->total = x.total;
}

/* Random parameters: small, ordinary and the maxima (3600 slots, 3650
 * days, 2^53 - 1); with `old`, now and then only the resolution changes
 * (to the whole window). */
static void sw_rnd_conf(uint64_t *s, struct twin_conf *cf,
                        const struct twin_conf *old)
{
    static const int64_t maxes[] = { 1, 2, 5, 100, MAX_N, 0 };
    static const int64_t slots[] = { 1, 2, 3, 10, 60, MAX_SLOTS, 0 };
    static const int64_t ress[] = { 1, 7, 1000, 60000, -1, 0 };
    int64_t max = lua_twin_pick(s, maxes, sizeof(maxes) / sizeof(*maxes));
    int64_t n = lua_twin_pick(s, slots, sizeof(slots) / sizeof(*slots));
    int64_t res = lua_twin_pick(s, ress, sizeof(ress) / sizeof(*ress));

    if (old != NULL && old->n[2] != old->n[1] && lua_twin_rnd_in(s, 0, 1)) {
        twin_conf_set(&SW, cf, old->n[0], old->n[1], old->n[1]);
        return;
    }
    if (max == 0) {
        max = lua_twin_rnd_in(s, 1, lua_twin_rnd_in(s, 0, 1) ? 50 : MAX_N);
    }
    if (n == 0) {
        n = lua_twin_rnd_in(s, 1, MAX_SLOTS);
    }
    if (res == -1) {
        res = MAX_WIN / n; /* the longest window with n slots */
    } else if (res == 0) {
        res = lua_twin_rnd_in(s, 1,
                              lua_twin_rnd_in(s, 0, 1) ? 2000 : MAX_WIN / n);
    }
    twin_conf_set(&SW, cf, max, res * n, res);
}

/* A cost: 0, 1, exactly max, above it, or anything up to it. */
static int64_t sw_rnd_cost(uint64_t *s, const struct twin_conf *cf)
{
    int64_t max = P(cf)->max;

    switch (lua_twin_rnd_in(s, 0, 9)) {
    case 0:
        return 0;
    case 1:
        return max;
    case 2:
        return max < MAX_N ? max + 1 : MAX_N;
    case 3:
        return lua_twin_rnd_in(s, 1, max);
    default:
        return lua_twin_rnd_in(s, 1, max < 3 ? max : 3);
    }
}

/* A delta: debt far past max (up to where the total stops at 2^53 - 1),
 * a give back of more than any window holds, or a cost of either sign. */
static int64_t sw_rnd_delta(uint64_t *s, const struct twin_conf *cf)
{
    int64_t d;

    switch (lua_twin_rnd_in(s, 0, 9)) {
    case 0:
        return 0;
    case 1:
        return lua_twin_rnd_in(s, 0, 1) ? MAX_N : lua_twin_rnd_in(s, 1, MAX_N);
    case 2:
        return -MAX_N;
    default:
        d = sw_rnd_cost(s, cf);
        return lua_twin_rnd_in(s, 0, 1) ? d : -d;
    }
}

static int64_t sw_unit(const struct twin_conf *cf)
{
    return P(cf)->resolution_ns / 1000;
}

/* A slot boundary, or where the oldest slot leaves the window (or 1 us
 * before). */
static int64_t sw_edge(uint64_t *s, const struct twin_key *k, int64_t now)
{
    const struct sw_state *m = k->st;
    int64_t unit = sw_unit(&k->cf), w = P(&k->cf)->window_ns / 1000, t = now;

    if (lua_twin_rnd_in(s, 0, 1)) {
        return (now / unit + lua_twin_rnd_in(s, 1, 2)) * unit -
               lua_twin_rnd_in(s, 0, 1);
    }
    for (size_t i = 0; k->have && i < m->n; i++) {
        if (m->s[i].count > 0 && m->s[i].start_ns / 1000 < t) {
            t = m->s[i].start_ns / 1000;
        }
    }
    t = t / unit * unit + w - lua_twin_rnd_in(s, 0, 1);
    return t < now ? now + w : t;
}

/* Adds a field the twin does not write itself: an empty slot, an expired
 * one, one off the slot grid (a resolution changed), or one from the
 * future (a clock jumped back). */
static int sw_plant(uint64_t *s, struct twin_key *k, int64_t now)
{
    const struct sw_state *m = k->st;
    int64_t unit = sw_unit(&k->cf), w = P(&k->cf)->window_ns / 1000;
    int64_t start, count = lua_twin_rnd_in(s, 1, 3), sum = 0;

    for (size_t i = 0; k->have && i < m->n; i++) {
        sum += m->s[i].count;
    }
    if ((k->have && m->n >= PLANTED) || sum > MAX_N / 2) {
        return 0; /* the twin refuses totals of 2^53 and more */
    }
    switch (lua_twin_rnd_in(s, 0, 3)) {
    case 0:
        start = now / unit * unit;
        count = 0;
        break;
    case 1:
        start = now - w - lua_twin_rnd_in(s, 0, w);
        break;
    case 2:
        start = now - lua_twin_rnd_in(s, 0, w - 1);
        break;
    default:
        start = now + lua_twin_rnd_in(s, 1, 2 * unit);
        break;
    }
    if (start < 0 || start > TWIN_US_MAX) {
        return 0;
    }
    for (size_t i = 0; k->have && i < m->n; i++) {
        if (m->s[i].start_ns == start * 1000) {
            return 0; /* one field per start */
        }
    }
    twin_plant(k, "HSET %%s %" PRId64 " %" PRId64, start, count);
    return 1;
}

/* The refund sets no expiry (the check's was removed by the test), and
 * what the check counted is gone again: the total is the one before the
 * check (only live slots stay). */
static int sw_after_refund(struct twin_key *k, const void *pre, int pre_have,
                           int64_t now, int64_t cost,
                           const struct lua_twin_txn *tx, const char *ctx)
{
    const struct sw_state *m = k->st, *want = k->next;

    (void)pre_have;
    (void)cost;
    cr_assert_eq(tx->pttl, k->have ? -1 : -2, "%s: PTTL after refund", ctx);
    twin_model(k, pre, now, 0);
    cr_assert(!k->have || m->total == want->total,
              "%s: total %" PRId64 " after refund, %" PRId64 " before", ctx,
              m->total, want->total);
    return 1;
}

static const struct twin_algo SW = {
    .name = "sliding_window",
    .read_fmt = "HGETALL %s",
    .nparams = 3,
    .state_size = sizeof(struct sw_state),
    .parse = sw_parse,
    .expect_same = sw_same,
    .conf = sw_conf,
    .decide = sw_decide,
    .state_error = SLIDING_WINDOW_ERR_STATE,
    .rnd_conf = sw_rnd_conf,
    .rnd_cost = sw_rnd_cost,
    .unit_us = sw_unit,
    .rnd_edge = sw_edge,
    .plant = sw_plant,
    .after_refund = sw_after_refund,
    .adjust = sw_adjust,
    .rnd_delta = sw_rnd_delta,
};

/* ---------------- The walk and the tables ---------------- */

Test(it_lua_sliding_window, randomized_sequences_match_the_c_model,
     .init = it_init, .fini = px_env_fini, .timeout = 120)
{
    twin_walk(&SW, "it_lua_sliding_window");
}

#define SAT_NS "9223372036854775807"
#define SAT_US "9223372036854775"

Test(it_lua_sliding_window, durations_past_2_53_us_are_exact_text_then_saturate,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    static const struct twin_row rows[] = {
        /* Slot 28 of 3650 days seen from time 0 (a clock far behind): it
         * leaves the window at 29 * 3650 days, past 2^53 us: exact text;
         * seen from its own start, a number. */
        TWIN_SET(MAX_N, MAX_WIN, MAX_WIN),
        TWIN_CMD("HSET %s 8830080000000000 1"),
        TWIN_CALL("check", 0, 0, "reset_us 9145440000000000 reset_text 1"),
        TWIN_CALL("peek", INT64_C(8830080000000000), 0,
                  "reset_us 315360000000000 reset_text 0"),
        /* An admission there counts in that newest slot and expires with
         * it. */
        TWIN_CALL("check", 0, 1,
                  "expiry_ms 9145440000000 undo 8830080000000000"),
        /* 3600 slots of one day, the newest just under 2^53 us, seen from
         * time 0: the sum passes INT64_MAX ns and saturates. */
        TWIN_SET(1, MAX_WIN, MAX_WIN / MAX_SLOTS),
        TWIN_CMD("DEL %s"),
        TWIN_CMD("HSET %s 9007199254740990 1"),
        TWIN_CALL("check", 0, 0, "reset_ns " SAT_NS " reset_us " SAT_US),
        TWIN_CALL("peek", 0, 1,
                  "retry_ns " SAT_NS " retry_us " SAT_US " retry_text 1"),
        /* max 2 admits one more, with the saturated expiry. */
        TWIN_SET(2, MAX_WIN, MAX_WIN / MAX_SLOTS),
        TWIN_CALL("check", 0, 1, "expiry_ms 9223372036855"),
    };
    TWIN_ROWS(&SW, rows);
}

Test(it_lua_sliding_window, adjust_goes_into_debt_and_gives_back_newest_first,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
#define S0  "1700000000000000"
#define S10 "1700000010000000"
    static const struct twin_row rows[] = {
        TWIN_SET(10, 60000, 1000),
        TWIN_CALL("check", TWIN_T0, 4, "undo " S0),
        /* 25 units of work: 29 of 10, refused until slot 10 s leaves. */
        TWIN_CALL("adjust", TWIN_T0 + 10 * TWIN_SEC, 25,
                  "limited 1 remaining 0 retry_us 60000000 field:" S10
                  " 25 field:total 29 expiry_ms 60000 undo -"),
        /* 3 back: from the newest slot. */
        TWIN_CALL("adjust", TWIN_T0 + 20 * TWIN_SEC, -3,
                  "field:" S0 " 4 field:" S10 " 22 field:total 26"),
        /* The check's refund still takes its own slot's cost. */
        TWIN_REFUND(TWIN_T0 + 30 * TWIN_SEC, 4, S0,
                    "field:" S0 " nil field:total 22"),
        TWIN_CALL("check", TWIN_T0 + 61 * TWIN_SEC, 1,
                  "limited 1 retry_us 9000000"),
        /* More than is left: the key goes. */
        TWIN_CALL("adjust", TWIN_T0 + 61 * TWIN_SEC, -30, "limited 0 exists 0"),
        TWIN_CALL("adjust", TWIN_T0 + 61 * TWIN_SEC, -1, "exists 0"),
        TWIN_CALL("check", TWIN_T0 + 61 * TWIN_SEC, 10, "limited 0"),
        /* The total stops at 2^53 - 1, which the twin can still read. */
        TWIN_SET(MAX_N, 60000, 1000),
        TWIN_CALL("adjust", TWIN_T0 + 62 * TWIN_SEC, MAX_N,
                  "field:total 9007199254740991"),
        TWIN_CALL("adjust", TWIN_T0 + 62 * TWIN_SEC, 5,
                  "limited 1 field:total 9007199254740991"),
    };
    TWIN_ROWS(&SW, rows);
}

Test(it_lua_sliding_window, peek_writes_nothing, .init = it_init,
     .fini = px_env_fini, .timeout = 60)
{
    /* A missing key stays missing; a stored window with stale fields and
     * its TTL stays untouched by peeks that would pass or be refused
     * (each step asserts nothing was written). */
    static const struct twin_row rows[] = {
        TWIN_SET(3, 1000, 100),
        TWIN_CALL("peek", TWIN_T0, 0, "exists 0"),
        TWIN_CALL("peek", TWIN_T0, 2, "exists 0"),
        TWIN_CALL("peek", TWIN_T0, 4, "exists 0"),
        TWIN_CALL("check", TWIN_T0, 2, "pttl_min 1 pttl_max 1000"),
        TWIN_CMD("HSET %s 1 5 1700000000100000 0"),
        TWIN_CALL("peek", TWIN_T0 + 150000, 0, NULL),
        TWIN_CALL("peek", TWIN_T0 + 150000, 1, NULL),
        TWIN_CALL("peek", TWIN_T0 + 150000, 2, "limited 1"),
        TWIN_CALL("peek", TWIN_T0 + 150000, 4, "field:1 5 field:total 2"),
    };
    TWIN_ROWS(&SW, rows);
}

Test(it_lua_sliding_window, refund_restores_then_is_a_no_op_once_moved_on,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
#define SLOT2 (TWIN_T0 + 100000)
    static const struct twin_row rows[] = {
        TWIN_SET(5, 1000, 100),
        /* The only slot back: the key goes. */
        TWIN_CALL("check", TWIN_T0, 2, "undo 1700000000000000"),
        TWIN_REFUND(TWIN_T0 + 50000, 2, NULL, "exists 0"),
        /* Two requests in one slot, one in the next: each refund takes
         * its own cost from its own slot, and the total follows. */
        TWIN_CALL("check", TWIN_T0, 2, "undo 1700000000000000"),
        TWIN_CALL("check", TWIN_T0 + 10, 1, "undo 1700000000000000"),
        TWIN_CALL("check", SLOT2, 1, "undo 1700000000100000"),
        TWIN_REFUND(SLOT2, 2, "1700000000000000",
                    "field:1700000000000000 1 field:total 2"),
        /* More than the slot holds: only what is there. */
        TWIN_REFUND(SLOT2, 5, "1700000000000000",
                    "field:1700000000000000 nil field:total 1"),
        /* The slot has left the window: a no-op. */
        TWIN_REFUND(TWIN_T0 + 1100000, 1, "1700000000100000",
                    "field:1700000000100000 1"),
        /* Cost 0, an empty or malformed token, a missing slot: no-ops. */
        TWIN_REFUND(SLOT2, 0, "1700000000100000", NULL),
        TWIN_REFUND(SLOT2, 1, "", NULL),
        TWIN_REFUND(SLOT2, 1, "x", NULL),
        TWIN_REFUND(SLOT2, 1, "1700000000200000",
                    "field:1700000000100000 1 field:total 1"),
        /* An expired key stays missing. */
        TWIN_CMD("DEL %s"),
        TWIN_REFUND(SLOT2, 1, "1700000000100000", "exists 0"),
    };
    const char *p[4] = { "5", "1000", "100", NULL };
    redisContext *c = twin_run_rows(&SW, rows, sizeof(rows) / sizeof(*rows));

    /* Another type is left alone. */
    px_check_status(px_cmd(c, "SET k v"), "OK");
    lua_twin_ok(c, "refund", "k", "sliding_window", p, SLOT2, 1,
                "1700000000100000");
    px_check_str(px_cmd(c, "GET k"), "v");
    redisFree(c);
}

Test(it_lua_sliding_window, bad_parameters_give_the_c_model_errors,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
#define E_MAX   SLIDING_WINDOW_ERR_MAX
#define E_WIN   SLIDING_WINDOW_ERR_WINDOW
#define E_RES   SLIDING_WINDOW_ERR_RESOLUTION
#define E_SLOTS SLIDING_WINDOW_ERR_SLOTS
    static const struct twin_bad bad[] = {
        { { "0", "1000", "100" }, E_MAX },
        { { "-1", "1000", "100" }, E_MAX },
        { { "9007199254740992", "1000", "100" }, E_MAX },
        { { "", "1000", "100" }, E_MAX },
        { { "0", "0", "0" }, E_MAX },
        { { "5", "0", "100" }, E_WIN },
        { { "5", "315360000001", "1" }, E_WIN },
        { { "5", "1.5", "1" }, E_WIN },
        { { "5", "1000", "0" }, E_RES },
        { { "5", "1000", "-100" }, E_RES },
        { { "5", "1000", "300" }, E_RES },
        { { "5", "1000", "2000" }, E_RES },
        { { "5", "1000", "" }, E_RES },
        { { "5", "3601", "1" }, E_SLOTS },
        { { "5", "315360000000", "87599999" }, E_RES },
        { { "5", "315360000000", "86400000" }, E_SLOTS },
    };
    twin_run_bad_params(&SW, bad, sizeof(bad) / sizeof(*bad));
}

Test(it_lua_sliding_window, wrong_type_and_malformed_state_are_errors,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    /* The twin refuses what the model refuses (a negative start or
     * count) and what it cannot read (not an integer, or 2^53 and more:
     * legal use never stores that). */
    static const char *const bad[] = {
        "HSET %s 1699999999900000 -1 1699999999800000 1",
        "HSET %s -100000 1 1699999999800000 1",
        "HSET %s abc 1 1699999999800000 1",
        "HSET %s 1699999999900000 x 1699999999800000 1",
        "HSET %s 1699999999900000 1.5 1699999999800000 1",
        "HSET %s 1699999999900000 9007199254740991 1699999999800000 1",
    };
    redisContext *c = lua_twin_connect();
    struct twin_key k;

    twin_key_init(&k, &SW, c, "k");
    twin_set(&k, 5, 1000, 100);
    twin_bad_states(&k, "ZADD %s 1 m", bad, sizeof(bad) / sizeof(*bad));
    /* The stored total is not read (the slots are the truth), so a bad
     * one decides nothing and is rewritten by the next admission. */
    freeReplyObject(px_cmd(c, "DEL k"));
    px_check_int(px_cmd(c, "HSET k total junk 1699999999900000 4"), 2);
    ((struct sw_state *)k.st)->n = 1;
    ((struct sw_state *)k.st)->has_total = 0;
    ((struct sw_state *)k.st)->s[0].start_ns = INT64_C(1699999999900000000);
    ((struct sw_state *)k.st)->s[0].count = 4;
    k.have = 1;
    k.ttl = -1;
    twin_step(&k, "check", TWIN_T0, 1, "junk total");
    px_check_str(px_cmd(c, "HGET k total"), "5");
    twin_key_free(&k);
    redisFree(c);
}
