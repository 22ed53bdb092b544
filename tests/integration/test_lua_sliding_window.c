/* algorithms/lua/sliding_window.lua (through limiter.lua) against the C
 * model algorithms/sliding_window.c, on a real redis-server.
 *
 * The test keeps the model's state itself (the slots as the HASH holds
 * them, in any order, stale, empty and duplicate ones included): every
 * check's reply must equal sliding_window_decide() fed with that state at
 * the same now (the script's explicit clock, us * 1000 ns), and afterwards
 * the HASH must hold exactly the model's next slots (starts in us) and
 * total when the model writes, or be untouched. Each check runs in MULTI
 * with PTTL, HGETALL and PERSIST: the reads see exactly what the script
 * left (PTTL within the model's expiry minus the wall time the transaction
 * took), and the key never expires in wall time, since the test's clock is
 * simulated. A simulated expiry deletes the key on both sides once the
 * test's clock has passed it.
 *
 * Randomized sequences print their seed; PX_LUA_TWIN_SEED replays one. */
#include "tests/integration/fixture.h"
#include "tests/integration/lua_twin.h"
#include "tests/support/px_test.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/rl.h"
#include "algorithms/scripts.h"
#include "algorithms/sliding_window.h"

PX_TEST_SUITE(it_lua_sliding_window);

#define ALGO       "sliding_window"
#define SEED_ENV   "PX_LUA_TWIN_SEED"
#define MAX_N      SLIDING_WINDOW_MAX_COUNT
#define MAX_WIN    SLIDING_WINDOW_MAX_WINDOW_MS
#define MAX_SLOTS  SLIDING_WINDOW_MAX_SLOTS
#define US_MAX     INT64_C(9007199254740991) /* the script's latest time */
#define SAT_US     INT64_C(9223372036854775) /* floor(INT64_MAX ns / 1000) */
#define SAT_MS     INT64_C(9223372036855)    /* its expiry, ceil(... / 1e6) */
#define T0         INT64_C(1700000000000000) /* a realistic now, in us */
#define DAY_US     INT64_C(86400000000)
#define SEQUENCES  12   /* randomized sequences per run */
#define OPS        30   /* operations in each */
#define CARRY      4096 /* slots the test carries: N, plus planted ones */
#define PLANTED    64   /* carried slots beyond which nothing is planted */
#define DIGITS     24   /* an int64 in decimal, sign and NUL */
#define ERR_BYTES  256
#define CTX_BYTES  200
#define READ_STATE "HGETALL %s"

#define E_WRONGTYPE                                                            \
    "WRONGTYPE Operation against a key holding the wrong kind of value"

static void it_init(void)
{
    px_redis_start(&px_env()->redis, NULL);
}

/* ---------------- Parameters and the model ---------------- */

/* One limit's parameters, as numbers, as the script's strings, and as the
 * model's. */
struct conf {
    int64_t max, window_ms, res_ms;
    char s[3][DIGITS];
    const char *v[4]; /* the four parameter strings of the script */
    struct sliding_window_params p;
};

static void conf_set(struct conf *cf, int64_t max, int64_t window_ms,
                     int64_t res_ms)
{
    const char *err = NULL;

    cf->max = max;
    cf->window_ms = window_ms;
    cf->res_ms = res_ms;
    snprintf(cf->s[0], DIGITS, "%" PRId64, max);
    snprintf(cf->s[1], DIGITS, "%" PRId64, window_ms);
    snprintf(cf->s[2], DIGITS, "%" PRId64, res_ms);
    cf->v[0] = cf->s[0];
    cf->v[1] = cf->s[1];
    cf->v[2] = cf->s[2];
    cf->v[3] = NULL;
    cr_assert_eq(
        sliding_window_params_init(&cf->p, max, window_ms, res_ms, &err),
        SLIDING_WINDOW_OK, "params: %s", err);
}

/* The state the test carries for the key: what Redis must hold. */
struct model {
    int have;                            /* the key exists */
    size_t n;                            /* slots in s */
    struct sliding_window_slot s[CARRY]; /* the slot fields, ns */
    int has_total;                       /* "total" is stored */
    int64_t total;                       /* its value */
    int64_t deadline_us;                 /* expiry of the last write */
};

/* The model's output slots of the last model_at() (overwritten by the
 * next call). */
static struct sliding_window_slot NEXT[MAX_SLOTS];

static struct sliding_window_result model_at(const struct conf *cf,
                                             const struct model *m, int64_t now,
                                             int64_t cost, const char *ctx)
{
    struct sliding_window_result r;
    const char *err = NULL;

    cr_assert_eq(sliding_window_decide(&cf->p, m->have ? m->s : NULL,
                                       m->have ? m->n : 0, now * 1000, cost,
                                       NEXT, MAX_SLOTS, &r, &err),
                 SLIDING_WINDOW_OK, "%s: model: %s", ctx, err);
    return r;
}

/* ---------------- Script calls ---------------- */

/* A peek (or any mode) through lua_twin_call; asserts it succeeded. */
static void call_plain(redisContext *c, const char *mode, const char *key,
                       const struct conf *cf, int64_t now, int64_t cost,
                       const char *undo, struct lua_twin_out *o,
                       const char *ctx)
{
    char err[ERR_BYTES];

    cr_assert_eq(lua_twin_call(c, mode, key, ALGO, cf->v, now, cost, undo, o,
                               err, sizeof(err)),
                 0, "%s: %s %s", ctx, mode, err);
    cr_assert_eq(o->now_us, now, "%s: the script's clock", ctx);
}

/* ---------------- The stored state ---------------- */

/* An HGETALL reply as a model state (slot fields and total); asserts
 * every field is canonical. */
static void parse_state(const redisReply *r, struct model *m, const char *ctx)
{
    m->have = 0;
    m->n = 0;
    m->has_total = 0;
    m->total = 0;
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s: HGETALL", ctx);
    for (size_t i = 0; i < r->elements; i += 2) {
        const char *f = r->element[i]->str, *v = r->element[i + 1]->str;
        int64_t start, count;

        m->have = 1;
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
}

/* Reads the key into *m (the deadline is kept). */
static void read_state(redisContext *c, const char *key, struct model *m,
                       const char *ctx)
{
    redisReply *r = px_cmd(c, READ_STATE, key);

    parse_state(r, m, ctx);
    freeReplyObject(r);
}

static int slot_cmp(const void *a, const void *b)
{
    const struct sliding_window_slot *x = a, *y = b;

    if (x->start_ns != y->start_ns) {
        return x->start_ns < y->start_ns ? -1 : 1;
    }
    return (x->count > y->count) - (x->count < y->count);
}

/* Asserts two states hold the same fields (slots in any order). */
static void same_state(const struct model *a, const struct model *b,
                       const char *ctx)
{
    static struct sliding_window_slot x[CARRY], y[CARRY];

    cr_assert_eq(a->have, b->have, "%s: key exists %d vs %d", ctx, a->have,
                 b->have);
    cr_assert_eq(a->n, b->n, "%s: %zu slots vs %zu", ctx, a->n, b->n);
    cr_assert_eq(a->has_total, b->has_total, "%s: total stored", ctx);
    cr_assert(!a->has_total || a->total == b->total,
              "%s: total %" PRId64 " vs %" PRId64, ctx, a->total, b->total);
    memcpy(x, a->s, a->n * sizeof(*x));
    memcpy(y, b->s, b->n * sizeof(*y));
    qsort(x, a->n, sizeof(*x), slot_cmp);
    qsort(y, b->n, sizeof(*y), slot_cmp);
    for (size_t i = 0; i < a->n; i++) {
        cr_assert(x[i].start_ns == y[i].start_ns && x[i].count == y[i].count,
                  "%s: slot %zu: %" PRId64 " = %" PRId64 " vs %" PRId64
                  " = %" PRId64,
                  ctx, i, x[i].start_ns, x[i].count, y[i].start_ns, y[i].count);
    }
}

/* Asserts the HGETALL reply equals the model's state. */
static void expect_state(const redisReply *r, const struct model *m,
                         const char *ctx)
{
    static struct model got;

    parse_state(r, &got, ctx);
    same_state(&got, m, ctx);
}

/* ---------------- One checked call ---------------- */

/* Tallies of a randomized run: which branches it reached. */
struct tally {
    long calls, limited, writes, peeks, refunds, expiries, changes, plants;
};

/* A check compared with the model as the file header says; updates the
 * model. Returns the model's result; the twin's entry is in *o. */
static struct sliding_window_result
check(redisContext *c, const char *key, const struct conf *cf, struct model *m,
      int64_t now, int64_t cost, struct lua_twin_out *o, const char *ctx)
{
    struct sliding_window_result want = model_at(cf, m, now, cost, ctx);
    struct lua_twin_txn k;

    lua_twin_call_multi(c, "check", key, ALGO, cf->v, now, cost, NULL,
                        READ_STATE, &k, ctx);
    cr_assert(!k.failed, "%s: %s", ctx, k.err);
    cr_assert_eq(k.out.now_us, now, "%s: the script's clock", ctx);
    lua_twin_expect(&k.out, &want.d, ctx);
    if (want.write == SLIDING_WINDOW_WRITE_SET) {
        char tok[DIGITS];

        m->have = 1;
        m->n = want.next_n;
        memcpy(m->s, NEXT, want.next_n * sizeof(*NEXT));
        m->has_total = 1;
        m->total = want.total;
        m->deadline_us = now + want.expiry_ms * 1000;
        if (lua_twin_expired(&k, want.expiry_ms, ctx)) {
            /* Real time took it: gone on both sides. */
            m->have = 0;
            m->n = 0;
            m->has_total = 0;
        } else {
            cr_assert(k.pttl <= want.expiry_ms &&
                          k.pttl >= want.expiry_ms - k.elapsed_ms,
                      "%s: PTTL %lld, expiry %" PRId64 " ms, %lld ms elapsed",
                      ctx, k.pttl, want.expiry_ms, k.elapsed_ms);
        }
        /* The token is the start of the newest slot, where cost went. */
        snprintf(tok, sizeof(tok), "%" PRId64,
                 NEXT[want.next_n - 1].start_ns / 1000);
        cr_assert_str_eq(k.out.undo, tok, "%s: undo token", ctx);
    } else {
        cr_assert_eq(k.pttl, m->have ? -1 : -2, "%s: PTTL after no write", ctx);
        cr_assert_str_eq(k.out.undo, "", "%s: undo without a write", ctx);
    }
    expect_state(k.state, m, ctx);
    *o = k.out;
    freeReplyObject(k.exec);
    return want;
}

/* A peek: the model's decision, and nothing written (the state and its
 * absent TTL unchanged). */
static void peek(redisContext *c, const char *key, const struct conf *cf,
                 const struct model *m, int64_t now, int64_t cost,
                 const char *ctx)
{
    static struct model back;
    struct sliding_window_result want = model_at(cf, m, now, cost, ctx);
    struct lua_twin_out o;

    call_plain(c, "peek", key, cf, now, cost, NULL, &o, ctx);
    lua_twin_expect(&o, &want.d, ctx);
    cr_assert_eq(lua_twin_pttl(c, key), m->have ? -1 : -2, "%s: peek TTL", ctx);
    read_state(c, key, &back, ctx);
    same_state(&back, m, ctx);
}

/* Peek, check, refund, peek at one now: when the check admitted, the
 * refund must restore its decisions (the twin's two peeks agree, and the
 * model decides alike from the state before the check and from the state
 * the refund left, now and at `later` >= now). The model then carries the
 * refunded state. Returns 1 when a refund ran. */
static int refund_cycle(redisContext *c, const char *key, const struct conf *cf,
                        struct model *m, int64_t now, int64_t cost,
                        int64_t later, const char *ctx)
{
    static struct model pre;
    struct lua_twin_out before, after, o;
    struct sliding_window_result r;
    struct lua_twin_txn k;

    pre = *m;
    call_plain(c, "peek", key, cf, now, cost, NULL, &before, ctx);
    r = check(c, key, cf, m, now, cost, &o, ctx);
    if (r.d.limited || cost == 0 ||
        (r.write == SLIDING_WINDOW_WRITE_SET && !m->have)) {
        return 0; /* refused, nothing taken, or real time took the key */
    }
    lua_twin_call_multi(c, "refund", key, ALGO, cf->v, now, cost, o.undo,
                        READ_STATE, &k, ctx);
    cr_assert(!k.failed, "%s: refund: %s", ctx, k.err);
    parse_state(k.state, m, ctx);
    /* The refund sets no expiry (the check's was removed by the test). */
    cr_assert_eq(k.pttl, m->have ? -1 : -2, "%s: PTTL after refund", ctx);
    freeReplyObject(k.exec);
    /* What the check counted is gone again: the total is the one before
     * the check (only live slots stay). */
    r = model_at(cf, &pre, now, 0, ctx);
    cr_assert(!m->have || m->total == r.total,
              "%s: total %" PRId64 " after refund, %" PRId64 " before", ctx,
              m->total, r.total);

    call_plain(c, "peek", key, cf, now, cost, NULL, &after, ctx);
    cr_assert(before.limited == after.limited &&
                  before.remaining == after.remaining &&
                  before.retry_us == after.retry_us &&
                  before.reset_us == after.reset_us,
              "%s: peek after refund [%d %" PRId64 " %" PRId64 " %" PRId64
              "], before check [%d %" PRId64 " %" PRId64 " %" PRId64 "]",
              ctx, after.limited, after.remaining, after.retry_us,
              after.reset_us, before.limited, before.remaining, before.retry_us,
              before.reset_us);
    r = model_at(cf, m, now, cost, ctx);
    lua_twin_expect(&after, &r.d, ctx);
    for (int q = 0; q <= 1; q++) {
        int64_t when = q == 0 ? now : later;
        struct sliding_window_result a = model_at(cf, &pre, when, cost, ctx);
        struct sliding_window_result b = model_at(cf, m, when, cost, ctx);

        lua_twin_expect_same_decision(&a.d, &b.d, ctx);
    }
    return 1;
}

/* ---------------- Randomized sequences ---------------- */

/* Random parameters: small, ordinary and the maxima (3600 slots, 3650
 * days, 2^53 - 1). */
static void rnd_conf(uint64_t *rs, struct conf *cf)
{
    static const int64_t maxes[] = { 1, 2, 5, 100, MAX_N, 0 };
    static const int64_t slots[] = { 1, 2, 3, 10, 60, MAX_SLOTS, 0 };
    static const int64_t ress[] = { 1, 7, 1000, 60000, -1, 0 };
    int64_t max = lua_twin_pick(rs, maxes, sizeof(maxes) / sizeof(*maxes));
    int64_t n = lua_twin_pick(rs, slots, sizeof(slots) / sizeof(*slots));
    int64_t res = lua_twin_pick(rs, ress, sizeof(ress) / sizeof(*ress));

    if (max == 0) {
        max = lua_twin_rnd_in(rs, 1, lua_twin_rnd_in(rs, 0, 1) ? 50 : MAX_N);
    }
    if (n == 0) {
        n = lua_twin_rnd_in(rs, 1, MAX_SLOTS);
    }
    if (res == -1) {
        res = MAX_WIN / n; /* the longest window with n slots */
    } else if (res == 0) {
        res = lua_twin_rnd_in(rs, 1,
                              lua_twin_rnd_in(rs, 0, 1) ? 2000 : MAX_WIN / n);
    }
    conf_set(cf, max, res * n, res);
}

/* A cost: 0, 1, exactly max, above it, or anything up to it. */
static int64_t rnd_cost(uint64_t *rs, const struct conf *cf)
{
    switch (lua_twin_rnd_in(rs, 0, 9)) {
    case 0:
        return 0;
    case 1:
        return cf->max;
    case 2:
        return cf->max < MAX_N ? cf->max + 1 : MAX_N;
    case 3:
        return lua_twin_rnd_in(rs, 1, cf->max);
    default:
        return lua_twin_rnd_in(rs, 1, cf->max < 3 ? cf->max : 3);
    }
}

/* The oldest slot start the model holds (us), or now. */
static int64_t oldest_us(const struct model *m, int64_t now)
{
    int64_t t = now;

    for (size_t i = 0; m->have && i < m->n; i++) {
        if (m->s[i].count > 0 && m->s[i].start_ns / 1000 < t) {
            t = m->s[i].start_ns / 1000;
        }
    }
    return t;
}

/* The next time: the same, a little later, exactly on a slot boundary or
 * where the oldest slot leaves the window (or 1 us before), much later,
 * years later, or back. */
static int64_t rnd_time(uint64_t *rs, const struct conf *cf,
                        const struct model *m, int64_t now)
{
    int64_t unit = cf->res_ms * 1000, w = cf->window_ms * 1000, t = now;

    switch (lua_twin_rnd_in(rs, 0, 11)) {
    case 0:
        break;
    case 1:
    case 2:
        t = (now / unit + lua_twin_rnd_in(rs, 1, 2)) * unit -
            lua_twin_rnd_in(rs, 0, 1);
        break;
    case 3:
    case 4:
        t = oldest_us(m, now) / unit * unit + w - lua_twin_rnd_in(rs, 0, 1);
        if (t < now) {
            t = now + w;
        }
        break;
    case 5:
        t = now + lua_twin_rnd_in(rs, unit, 2 * w);
        break;
    case 6:
        t = now + lua_twin_rnd_in(rs, 1, 400) * DAY_US;
        break;
    case 7:
        t = now -
            lua_twin_rnd_in(rs, 1, lua_twin_rnd_in(rs, 0, 1) ? 2 * unit : w);
        break;
    default:
        t = now + lua_twin_rnd_in(rs, 0, unit / 2 + 1);
        break;
    }
    if (t < 0 || t > US_MAX) {
        return now;
    }
    return t;
}

/* Adds a field the twin does not write itself to the key and the model:
 * an empty slot, an expired one, one off the slot grid (a resolution
 * changed), or one from the future (a clock jumped back). */
static int plant(redisContext *c, uint64_t *rs, const char *key,
                 const struct conf *cf, struct model *m, int64_t now)
{
    int64_t unit = cf->res_ms * 1000, w = cf->window_ms * 1000;
    int64_t start, count = lua_twin_rnd_in(rs, 1, 3), sum = 0;

    for (size_t i = 0; i < m->n; i++) {
        sum += m->s[i].count;
    }
    if (m->n >= PLANTED || sum > MAX_N / 2) {
        return 0; /* the twin refuses totals of 2^53 and more */
    }
    switch (lua_twin_rnd_in(rs, 0, 3)) {
    case 0:
        start = now / unit * unit;
        count = 0;
        break;
    case 1:
        start = now - w - lua_twin_rnd_in(rs, 0, w);
        break;
    case 2:
        start = now - lua_twin_rnd_in(rs, 0, w - 1);
        break;
    default:
        start = now + lua_twin_rnd_in(rs, 1, 2 * unit);
        break;
    }
    if (start < 0 || start > US_MAX) {
        return 0;
    }
    for (size_t i = 0; i < m->n; i++) {
        if (m->s[i].start_ns == start * 1000) {
            return 0; /* one field per start */
        }
    }
    px_check_int(px_cmd(c, "HSET %s %" PRId64 " %" PRId64, key, start, count),
                 1);
    m->have = 1;
    m->s[m->n].start_ns = start * 1000;
    m->s[m->n].count = count;
    m->n++;
    m->deadline_us = INT64_MAX; /* the last expiry does not cover it */
    return 1;
}

Test(it_lua_sliding_window, randomized_sequences_match_the_c_model,
     .init = it_init, .fini = px_env_fini, .timeout = 120)
{
    static struct model m;
    redisContext *c = lua_twin_connect();
    uint64_t seed = lua_twin_seed("it_lua_" ALGO, SEED_ENV), rs = seed | 1;
    struct tally n = { 0 };

    for (int seq = 0; seq < SEQUENCES; seq++) {
        static const int64_t starts[] = { T0, 5000000, US_MAX - DAY_US };
        struct conf cf;
        struct lua_twin_out o;
        char key[32];
        int64_t now =
            lua_twin_pick(&rs, starts, 3) + lua_twin_rnd_in(&rs, 0, 1000000);

        memset(&m, 0, sizeof(m));
        snprintf(key, sizeof(key), "sw:%d", seq);
        rnd_conf(&rs, &cf);
        for (int op = 0; op < OPS; op++) {
            char ctx[CTX_BYTES];
            int64_t kind = lua_twin_rnd_in(&rs, 0, 99),
                    cost = rnd_cost(&rs, &cf);

            now = rnd_time(&rs, &cf, &m, now);
            snprintf(ctx, sizeof(ctx),
                     SEED_ENV "=%llu seq %d op %d: max %s window_ms %s "
                              "resolution_ms %s now %" PRId64 " cost %" PRId64,
                     (unsigned long long)seed, seq, op, cf.s[0], cf.s[1],
                     cf.s[2], now, cost);
            if (kind < 60) {
                struct sliding_window_result r =
                    check(c, key, &cf, &m, now, cost, &o, ctx);
                n.calls++;
                n.limited += r.d.limited;
                n.writes += r.write == SLIDING_WINDOW_WRITE_SET;
            } else if (kind < 70) {
                peek(c, key, &cf, &m, now, cost, ctx);
                n.peeks++;
            } else if (kind < 80) {
                /* Equal decisions from then on. */
                int64_t later =
                    now + lua_twin_rnd_in(&rs, 0, 2 * cf.window_ms * 1000);

                n.refunds += refund_cycle(c, key, &cf, &m, now, cost,
                                          later <= US_MAX ? later : now, ctx);
            } else if (kind < 85) {
                /* Same key, other limits: slots off the new grid, and the
                 * expiry written under the old ones says nothing. Now and
                 * then only the resolution changes (to the whole window):
                 * the script keeps the last parameters it parsed, and must
                 * see a change in any one. */
                if (cf.res_ms != cf.window_ms && lua_twin_rnd_in(&rs, 0, 1)) {
                    conf_set(&cf, cf.max, cf.window_ms, cf.window_ms);
                } else {
                    rnd_conf(&rs, &cf);
                }
                m.deadline_us = INT64_MAX;
                n.changes++;
            } else if (kind < 92) {
                n.plants += plant(c, &rs, key, &cf, &m, now);
            } else if (m.have && now >= m.deadline_us) {
                /* The key would have expired by now: gone on both sides,
                 * and the model must not care. */
                static struct model none;
                struct sliding_window_result a = model_at(&cf, &m, now, 1, ctx);
                struct sliding_window_result b =
                    model_at(&cf, &none, now, 1, ctx);

                lua_twin_expect_same_decision(&a.d, &b.d, ctx);
                px_check_int(px_cmd(c, "DEL %s", key), 1);
                m.have = 0;
                m.n = 0;
                m.has_total = 0;
                n.expiries++;
            }
        }
    }
    fprintf(stderr,
            "it_lua_" ALGO ": %ld checks (%ld limited, %ld writes), %ld "
            "peeks, %ld refunds, %ld expiries, %ld changes, %ld plants\n",
            n.calls, n.limited, n.writes, n.peeks, n.refunds, n.expiries,
            n.changes, n.plants);
    cr_assert_gt(n.limited, 0);
    cr_assert_gt(n.calls - n.limited, 0);
    cr_assert_gt(n.writes, 0);
    cr_assert_gt(n.peeks, 0);
    cr_assert_gt(n.refunds, 0);
    cr_assert_gt(n.plants, 0);
    redisFree(c);
}

/* ---------------- Large numbers ---------------- */

/* Replaces the key with one slot field (start in us) and returns the
 * model's state for it. */
static void plant_one(redisContext *c, const char *key, struct model *m,
                      int64_t start_us, int64_t count)
{
    freeReplyObject(px_cmd(c, "DEL %s", key));
    px_check_int(
        px_cmd(c, "HSET %s %" PRId64 " %" PRId64, key, start_us, count), 1);
    memset(m, 0, sizeof(*m));
    m->have = 1;
    m->n = 1;
    m->s[0].start_ns = start_us * 1000;
    m->s[0].count = count;
}

Test(it_lua_sliding_window, durations_past_2_53_us_are_exact_text_then_saturate,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    static struct model m;
    redisContext *c = lua_twin_connect();
    struct conf cf;
    struct lua_twin_out o;
    struct lua_twin_txn k;
    struct sliding_window_result r;
    const int64_t res = MAX_WIN * 1000; /* one slot of 3650 days, us */

    /* Slot 28 seen from time 0 (a clock far behind): it leaves the window
     * at 29 * 3650 days, past 2^53 us; exact text. */
    conf_set(&cf, MAX_N, MAX_WIN, MAX_WIN);
    plant_one(c, "k", &m, 28 * res, 1);
    r = check(c, "k", &cf, &m, 0, 0, &o, "2^53");
    cr_assert_eq(o.reset_us, 29 * res);
    lua_twin_call_multi(c, "peek", "k", ALGO, cf.v, 0, 0, NULL, READ_STATE, &k,
                        "2^53 type");
    cr_assert_eq(k.entry->element[4]->type, REDIS_REPLY_STRING);
    cr_assert_str_eq(k.entry->element[4]->str, "9145440000000000");
    freeReplyObject(k.exec);
    /* Seen from its own start, a number. */
    lua_twin_call_multi(c, "peek", "k", ALGO, cf.v, 28 * res, 0, NULL,
                        READ_STATE, &k, "number");
    cr_assert_eq(k.entry->element[4]->type, REDIS_REPLY_INTEGER);
    cr_assert_eq(k.entry->element[4]->integer, res);
    freeReplyObject(k.exec);
    /* An admission there counts in that newest slot and expires with it. */
    r = check(c, "k", &cf, &m, 0, 1, &o, "admit");
    cr_assert_eq(r.write, SLIDING_WINDOW_WRITE_SET);
    cr_assert_eq(r.expiry_ms, 29 * MAX_WIN);
    cr_assert_str_eq(o.undo, "8830080000000000");

    /* 3600 slots of one day, the newest just under 2^53 us, seen from
     * time 0: the sum passes INT64_MAX ns and saturates. */
    conf_set(&cf, 1, MAX_WIN, MAX_WIN / MAX_SLOTS);
    plant_one(c, "k", &m, US_MAX - 1, 1);
    r = check(c, "k", &cf, &m, 0, 0, &o, "saturated reset");
    cr_assert_eq(r.d.reset_after_ns, INT64_MAX);
    cr_assert_eq(o.reset_us, SAT_US);
    lua_twin_call_multi(c, "peek", "k", ALGO, cf.v, 0, 1, NULL, READ_STATE, &k,
                        "saturated retry");
    cr_assert_eq(k.entry->element[3]->type, REDIS_REPLY_STRING);
    cr_assert_str_eq(k.entry->element[3]->str, "9223372036854775");
    freeReplyObject(k.exec);
    r = model_at(&cf, &m, 0, 1, "saturated retry");
    cr_assert_eq(r.d.retry_after_ns, INT64_MAX);
    /* A cost of 0 passes and writes nothing; max 2 admits one more, with
     * the saturated expiry. */
    conf_set(&cf, 2, MAX_WIN, MAX_WIN / MAX_SLOTS);
    r = check(c, "k", &cf, &m, 0, 1, &o, "saturated expiry");
    cr_assert_eq(r.expiry_ms, SAT_MS);
    redisFree(c);
}

/* ---------------- Peeks and refunds ---------------- */

Test(it_lua_sliding_window, peek_writes_nothing, .init = it_init,
     .fini = px_env_fini, .timeout = 60)
{
    static struct model m, back;
    redisContext *c = lua_twin_connect();
    struct conf cf;
    struct lua_twin_out o;
    long long ttl;

    conf_set(&cf, 3, 1000, 100);
    for (int64_t cost = 0; cost <= 4; cost++) {
        peek(c, "k", &cf, &m, T0, cost, "peek missing");
    }
    /* A stored window with stale fields and its TTL: untouched by peeks
     * that would pass or be refused. */
    call_plain(c, "check", "k", &cf, T0, 2, NULL, &o, "fill");
    px_check_int(px_cmd(c, "HSET k 1 5 %" PRId64 " 0", T0 + 100000), 2);
    read_state(c, "k", &m, "fill");
    ttl = lua_twin_pttl(c, "k");
    cr_assert(ttl > 0 && ttl <= 1000, "PTTL %lld", ttl);
    for (int64_t cost = 0; cost <= 4; cost++) {
        call_plain(c, "peek", "k", &cf, T0 + 150000, cost, NULL, &o, "peek");
        read_state(c, "k", &back, "peek");
        same_state(&back, &m, "peek");
        cr_assert_leq(lua_twin_pttl(c, "k"), ttl, "peek set a TTL");
    }
    redisFree(c);
}

/* A refund through lua_twin_call; asserts it succeeded. */
static void refund(redisContext *c, const char *key, const struct conf *cf,
                   int64_t now, int64_t cost, const char *undo)
{
    struct lua_twin_out o;

    call_plain(c, "refund", key, cf, now, cost, undo, &o, "refund");
}

Test(it_lua_sliding_window, refund_restores_then_is_a_no_op_once_moved_on,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    static struct model m;
    redisContext *c = lua_twin_connect();
    struct conf cf;
    struct lua_twin_out a, b;
    char field[DIGITS];

    conf_set(&cf, 5, 1000, 100);
    /* The only slot back: the key goes. */
    check(c, "k", &cf, &m, T0, 2, &a, "check 2");
    cr_assert_str_eq(a.undo, "1700000000000000");
    refund(c, "k", &cf, T0 + 50000, 2, a.undo);
    px_check_int(px_cmd(c, "EXISTS k"), 0);

    /* Two requests in one slot, one in the next: each refund takes its
     * own cost from its own slot, and the total follows. */
    memset(&m, 0, sizeof(m));
    check(c, "k", &cf, &m, T0, 2, &a, "first");
    check(c, "k", &cf, &m, T0 + 10, 1, &b, "second");
    cr_assert_str_eq(a.undo, b.undo);
    check(c, "k", &cf, &m, T0 + 100000, 1, &b, "next slot");
    cr_assert_str_eq(b.undo, "1700000000100000");
    refund(c, "k", &cf, T0 + 100000, 2, a.undo);
    px_check_str(px_cmd(c, "HGET k %s", a.undo), "1");
    px_check_str(px_cmd(c, "HGET k total"), "2");
    /* More than the slot holds: only what is there. */
    refund(c, "k", &cf, T0 + 100000, 5, a.undo);
    px_check_int(px_cmd(c, "HEXISTS k %s", a.undo), 0);
    px_check_str(px_cmd(c, "HGET k total"), "1");

    /* The slot has left the window: a no-op. */
    snprintf(field, sizeof(field), "%" PRId64, T0 + 100000);
    refund(c, "k", &cf, T0 + 1100000, 1, b.undo);
    px_check_str(px_cmd(c, "HGET k %s", field), "1");
    /* Cost 0, an empty or malformed token, a missing slot: no-ops. */
    refund(c, "k", &cf, T0 + 100000, 0, b.undo);
    refund(c, "k", &cf, T0 + 100000, 1, "");
    refund(c, "k", &cf, T0 + 100000, 1, "x");
    refund(c, "k", &cf, T0 + 100000, 1, "1700000000200000");
    px_check_str(px_cmd(c, "HGET k %s", field), "1");
    px_check_str(px_cmd(c, "HGET k total"), "1");
    /* An expired key stays missing; another type is left alone. */
    freeReplyObject(px_cmd(c, "DEL k"));
    refund(c, "k", &cf, T0 + 100000, 1, b.undo);
    px_check_int(px_cmd(c, "EXISTS k"), 0);
    px_check_status(px_cmd(c, "SET k v"), "OK");
    refund(c, "k", &cf, T0 + 100000, 1, b.undo);
    px_check_str(px_cmd(c, "GET k"), "v");
    redisFree(c);
}

/* ---------------- Errors ---------------- */

/* Bad parameters and the C model's text for them. */
struct bad_case {
    const char *p[3];
    const char *err;
};

static const struct bad_case BAD[] = {
    { { "0", "1000", "100" }, SLIDING_WINDOW_ERR_MAX },
    { { "-1", "1000", "100" }, SLIDING_WINDOW_ERR_MAX },
    { { "9007199254740992", "1000", "100" }, SLIDING_WINDOW_ERR_MAX },
    { { "", "1000", "100" }, SLIDING_WINDOW_ERR_MAX },
    { { "0", "0", "0" }, SLIDING_WINDOW_ERR_MAX },
    { { "5", "0", "100" }, SLIDING_WINDOW_ERR_WINDOW },
    { { "5", "315360000001", "1" }, SLIDING_WINDOW_ERR_WINDOW },
    { { "5", "1.5", "1" }, SLIDING_WINDOW_ERR_WINDOW },
    { { "5", "1000", "0" }, SLIDING_WINDOW_ERR_RESOLUTION },
    { { "5", "1000", "-100" }, SLIDING_WINDOW_ERR_RESOLUTION },
    { { "5", "1000", "300" }, SLIDING_WINDOW_ERR_RESOLUTION },
    { { "5", "1000", "2000" }, SLIDING_WINDOW_ERR_RESOLUTION },
    { { "5", "1000", "" }, SLIDING_WINDOW_ERR_RESOLUTION },
    { { "5", "3601", "1" }, SLIDING_WINDOW_ERR_SLOTS },
    { { "5", "315360000000", "87599999" }, SLIDING_WINDOW_ERR_RESOLUTION },
    { { "5", "315360000000", "86400000" }, SLIDING_WINDOW_ERR_SLOTS },
};

Test(it_lua_sliding_window, bad_parameters_give_the_c_model_errors,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = lua_twin_connect();

    for (size_t i = 0; i < sizeof(BAD) / sizeof(*BAD); i++) {
        const struct bad_case *b = &BAD[i];
        const char *v[4] = { b->p[0], b->p[1], b->p[2], NULL };
        char err[ERR_BYTES], want[ERR_BYTES];
        struct lua_twin_out o;
        int64_t n[3];

        snprintf(want, sizeof(want), "ERR %s", b->err);
        if (lua_twin_dec(b->p[0], &n[0]) && lua_twin_dec(b->p[1], &n[1]) &&
            lua_twin_dec(b->p[2], &n[2])) {
            struct sliding_window_params p;
            const char *cerr = NULL;

            cr_assert_eq(
                sliding_window_params_init(&p, n[0], n[1], n[2], &cerr),
                SLIDING_WINDOW_EARGS, "case %zu", i);
            cr_assert_str_eq(cerr, b->err, "case %zu: the model's text", i);
        }
        for (int mode = 0; mode < 2; mode++) {
            cr_assert_eq(lua_twin_call(c, mode ? "peek" : "check", "k", ALGO, v,
                                       T0, 1, NULL, &o, err, sizeof(err)),
                         -1, "case %zu: no error", i);
            cr_assert_str_eq(err, want, "case %zu", i);
        }
        cr_assert_eq(lua_twin_call(c, "refund", "k", ALGO, v, T0, 1, "1", &o,
                                   err, sizeof(err)),
                     0, "case %zu: %s", i, err);
        px_check_int(px_cmd(c, "EXISTS k"), 0);
    }
    redisFree(c);
}

Test(it_lua_sliding_window, wrong_type_and_malformed_state_are_errors,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    /* Field, value pairs; the twin refuses what the model refuses (a
     * negative start or count) and what it cannot read (not an integer,
     * or 2^53 and more: legal use never stores that). */
    static const char *const fields[][4] = {
        { "1699999999900000", "-1", "1699999999800000", "1" },
        { "-100000", "1", "1699999999800000", "1" },
        { "abc", "1", "1699999999800000", "1" },
        { "1699999999900000", "x", "1699999999800000", "1" },
        { "1699999999900000", "1.5", "1699999999800000", "1" },
        { "1699999999900000", "9007199254740991", "1699999999800000", "1" },
    };
    static struct model m;
    redisContext *c = lua_twin_connect();
    struct conf cf;
    struct lua_twin_out o;
    char err[ERR_BYTES], want[ERR_BYTES];
    struct sliding_window_slot bad = { 1000, -1 };
    struct sliding_window_result r;
    const char *cerr = NULL;

    conf_set(&cf, 5, 1000, 100);
    px_check_status(px_cmd(c, "SET k v"), "OK");
    px_check_int(px_cmd(c, "ZADD z 1 m"), 1);
    for (int mode = 0; mode < 3; mode++) {
        cr_assert_eq(lua_twin_call(c, mode ? "peek" : "check",
                                   mode == 2 ? "z" : "k", ALGO, cf.v, T0, 1,
                                   NULL, &o, err, sizeof(err)),
                     -1);
        cr_assert_str_eq(err, E_WRONGTYPE);
    }
    px_check_str(px_cmd(c, "GET k"), "v");

    cr_assert_eq(sliding_window_decide(&cf.p, &bad, 1, T0 * 1000, 1, NEXT,
                                       MAX_SLOTS, &r, &cerr),
                 SLIDING_WINDOW_ESTATE);
    snprintf(want, sizeof(want), "ERR %s", cerr);
    for (size_t i = 0; i < sizeof(fields) / sizeof(*fields); i++) {
        freeReplyObject(px_cmd(c, "DEL h"));
        px_check_int(px_cmd(c, "HSET h %s %s %s %s", fields[i][0], fields[i][1],
                            fields[i][2], fields[i][3]),
                     2);
        for (int mode = 0; mode < 2; mode++) {
            cr_assert_eq(lua_twin_call(c, mode ? "peek" : "check", "h", ALGO,
                                       cf.v, T0, 1, NULL, &o, err, sizeof(err)),
                         -1, "case %zu", i);
            cr_assert_str_eq(err, want, "case %zu", i);
        }
        px_check_int(px_cmd(c, "HLEN h"), 2);
        px_check_str(px_cmd(c, "HGET h %s", fields[i][0]), fields[i][1]);
        px_check_int(px_cmd(c, "PTTL h"), -1);
    }

    /* The stored total is not read (the slots are the truth), so a bad
     * one decides nothing and is rewritten by the next admission. */
    freeReplyObject(px_cmd(c, "DEL h"));
    px_check_int(px_cmd(c, "HSET h total junk 1699999999900000 4"), 2);
    memset(&m, 0, sizeof(m));
    m.have = 1;
    m.n = 1;
    m.s[0].start_ns = INT64_C(1699999999900000) * 1000;
    m.s[0].count = 4;
    check(c, "h", &cf, &m, T0, 1, &o, "junk total");
    px_check_str(px_cmd(c, "HGET h total"), "5");
    redisFree(c);
}
