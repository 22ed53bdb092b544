/* algorithms/lua/sliding_log.lua (through limiter.lua) against the C
 * model algorithms/sliding_log.c, on a real redis-server.
 *
 * The test keeps the model's state itself (the log's timestamps): every
 * check's reply must equal sliding_log_decide() fed with that state at
 * the same now (the script's explicit clock, us * 1000 ns), and afterwards
 * the ZSET must hold exactly the model's next log (scores in us, members
 * "<score>:<L><j>") when the model writes (admitted or refused), or be
 * untouched. Each check runs in MULTI with PTTL, ZRANGE WITHSCORES and
 * PERSIST: the reads see exactly what the script left (PTTL within the
 * model's expiry minus the wall time the transaction took), and the key
 * never expires in wall time, since the test's clock is simulated. A
 * simulated expiry deletes the key on both sides once the test's clock
 * has passed it.
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
#include "algorithms/sliding_log.h"

PX_TEST_SUITE(it_lua_sliding_log);

#define ALGO       "sliding_log"
#define SEED_ENV   "PX_LUA_TWIN_SEED"
#define MAX_E      SLIDING_LOG_MAX_ENTRIES
#define MAX_DUR    SLIDING_LOG_MAX_DURATION_MS
#define US_MAX     INT64_C(9007199254740991) /* the script's latest time */
#define SAT_US     INT64_C(9223372036854775) /* floor(INT64_MAX ns / 1000) */
#define SAT_MS     INT64_C(9223372036855)    /* its expiry, ceil(... / 1e6) */
#define T0         INT64_C(1700000000000000) /* a realistic now, in us */
#define DAY_US     INT64_C(86400000000)
#define SEQUENCES  12             /* randomized sequences per run */
#define OPS        30             /* operations in each */
#define CARRY      (MAX_E + 1024) /* entries the test carries */
#define PLANTED    64             /* entries beyond which nothing is planted */
#define BIG_COST   1000           /* costs above it only for big, rare cases */
#define DIGITS     24             /* an int64 in decimal, sign and NUL */
#define ERR_BYTES  256
#define CTX_BYTES  200
#define READ_STATE "ZRANGE %s 0 -1 WITHSCORES"

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
    int64_t max, window_ms, mi_ms;
    char s[3][DIGITS];
    const char *v[4]; /* the four parameter strings of the script */
    struct sliding_log_params p;
};

static void conf_set(struct conf *cf, int64_t max, int64_t window_ms,
                     int64_t mi_ms)
{
    const char *err = NULL;

    cf->max = max;
    cf->window_ms = window_ms;
    cf->mi_ms = mi_ms;
    snprintf(cf->s[0], DIGITS, "%" PRId64, max);
    snprintf(cf->s[1], DIGITS, "%" PRId64, window_ms);
    snprintf(cf->s[2], DIGITS, "%" PRId64, mi_ms);
    cf->v[0] = cf->s[0];
    cf->v[1] = cf->s[1];
    cf->v[2] = cf->s[2];
    cf->v[3] = NULL;
    cr_assert_eq(sliding_log_params_init(&cf->p, max, window_ms, mi_ms, &err),
                 SLIDING_LOG_OK, "params: %s", err);
}

/* The state the test carries for the key: what Redis must hold. */
struct model {
    size_t n;            /* entries; 0: no key */
    int64_t e[CARRY];    /* the timestamps, sorted, ns */
    int64_t deadline_us; /* the expiry of the last write */
};

/* The model's output log of the last model_at() (overwritten by the next
 * call). */
static int64_t NEXT[MAX_E];

static struct sliding_log_result model_at(const struct conf *cf,
                                          const struct model *m, int64_t now,
                                          int64_t cost, const char *ctx)
{
    struct sliding_log_result r;
    const char *err = NULL;

    cr_assert_eq(sliding_log_decide(&cf->p, m->n > 0 ? m->e : NULL, m->n,
                                    now * 1000, cost, NEXT, MAX_E, &r, &err),
                 SLIDING_LOG_OK, "%s: model: %s", ctx, err);
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

/* Asserts a member is "<score>:<L><j>": j >= 1 in canonical decimal, L
 * the letter for its digit count ('a' for 1). */
static void check_member(const char *mem, int64_t score, const char *ctx)
{
    char want[DIGITS + 1];
    size_t wl = (size_t)snprintf(want, sizeof(want), "%" PRId64 ":", score);
    const char *j = mem + wl + 1;
    int64_t v;

    cr_assert(strncmp(mem, want, wl) == 0, "%s: member '%s', score %" PRId64,
              ctx, mem, score);
    cr_assert(lua_twin_dec(j, &v) && v >= 1 &&
                  mem[wl] == 'a' + (int)strlen(j) - 1,
              "%s: member '%s'", ctx, mem);
}

/* A ZRANGE WITHSCORES reply as a model state; asserts the members'
 * form. */
static void parse_state(const redisReply *r, struct model *m, const char *ctx)
{
    m->n = 0;
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s: ZRANGE", ctx);
    cr_assert_leq(r->elements / 2, (size_t)CARRY, "%s: entries", ctx);
    for (size_t i = 0; i < r->elements; i += 2) {
        int64_t t;

        cr_assert(lua_twin_dec(r->element[i + 1]->str, &t), "%s: score '%s'",
                  ctx, r->element[i + 1]->str);
        check_member(r->element[i]->str, t, ctx);
        m->e[m->n++] = t * 1000;
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

/* Asserts the stored log equals `e[0 .. n)`. */
static void same_log(const struct model *got, const int64_t *e, size_t n,
                     const char *ctx)
{
    cr_assert_eq(got->n, n, "%s: %zu entries stored, model %zu", ctx, got->n,
                 n);
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(got->e[i], e[i],
                     "%s: entry %zu: %" PRId64 " ns stored, model %" PRId64,
                     ctx, i, got->e[i], e[i]);
    }
}

/* Asserts the ZRANGE reply equals the model's state. */
static void expect_state(const redisReply *r, const struct model *m,
                         const char *ctx)
{
    static struct model got;

    parse_state(r, &got, ctx);
    same_log(&got, m->e, m->n, ctx);
}

/* ---------------- One checked call ---------------- */

/* Tallies of a randomized run: which branches it reached. */
struct tally {
    long calls, limited, writes, refused_writes, peeks, refunds, expiries,
        changes, plants;
};

/* A check compared with the model as the file header says; updates the
 * model. Returns the model's result; the twin's entry is in *o. */
static struct sliding_log_result check(redisContext *c, const char *key,
                                       const struct conf *cf, struct model *m,
                                       int64_t now, int64_t cost,
                                       struct lua_twin_out *o, const char *ctx)
{
    struct sliding_log_result want = model_at(cf, m, now, cost, ctx);
    struct lua_twin_txn k;

    lua_twin_call_multi(c, "check", key, ALGO, cf->v, now, cost, NULL,
                        READ_STATE, &k, ctx);
    cr_assert(!k.failed, "%s: %s", ctx, k.err);
    cr_assert_eq(k.out.now_us, now, "%s: the script's clock", ctx);
    lua_twin_expect(&k.out, &want.d, ctx);
    if (want.write == SLIDING_LOG_WRITE_SET) {
        m->n = want.next_n;
        memcpy(m->e, NEXT, want.next_n * sizeof(*NEXT));
        m->deadline_us = now + want.expiry_ms * 1000;
        if (m->n > 0 && lua_twin_expired(&k, want.expiry_ms, ctx)) {
            m->n = 0; /* real time took it: gone on both sides */
        } else if (m->n > 0) {
            cr_assert(k.pttl <= want.expiry_ms &&
                          k.pttl >= want.expiry_ms - k.elapsed_ms,
                      "%s: PTTL %lld, expiry %" PRId64 " ms, %lld ms elapsed",
                      ctx, k.pttl, want.expiry_ms, k.elapsed_ms);
        }
    } else {
        cr_assert_eq(k.pttl, m->n > 0 ? -1 : -2, "%s: PTTL after no write",
                     ctx);
    }
    if (want.write == SLIDING_LOG_WRITE_SET && !want.d.limited) {
        char tok[DIGITS];

        snprintf(tok, sizeof(tok), "%" PRId64, now);
        cr_assert_str_eq(k.out.undo, tok, "%s: undo token", ctx);
    } else {
        /* Refused attempts stay logged: nothing to undo. */
        cr_assert_str_eq(k.out.undo, "", "%s: undo without an admission", ctx);
    }
    expect_state(k.state, m, ctx);
    *o = k.out;
    freeReplyObject(k.exec);
    return want;
}

/* A peek: the model's decision, and nothing written (the log and its
 * absent TTL unchanged), even where a check would log the attempt. */
static void peek(redisContext *c, const char *key, const struct conf *cf,
                 const struct model *m, int64_t now, int64_t cost,
                 const char *ctx)
{
    static struct model back;
    struct sliding_log_result want = model_at(cf, m, now, cost, ctx);
    struct lua_twin_out o;

    call_plain(c, "peek", key, cf, now, cost, NULL, &o, ctx);
    lua_twin_expect(&o, &want.d, ctx);
    cr_assert_eq(lua_twin_pttl(c, key), m->n > 0 ? -1 : -2, "%s: peek TTL",
                 ctx);
    read_state(c, key, &back, ctx);
    same_log(&back, m->e, m->n, ctx);
}

/* Peek, check, refund, peek at one now: when the check admitted, the
 * refund must restore its decisions (the twin's two peeks agree, and the
 * model decides alike from the log before the check and from the log the
 * refund left, now and at `later` >= now). The model then carries the
 * refunded log. Returns 1 when a refund ran. */
static int refund_cycle(redisContext *c, const char *key, const struct conf *cf,
                        struct model *m, int64_t now, int64_t cost,
                        int64_t later, const char *ctx)
{
    static struct model pre;
    struct lua_twin_out before, after, o;
    struct sliding_log_result r;
    struct lua_twin_txn k;
    size_t at_now = 0;

    pre = *m;
    call_plain(c, "peek", key, cf, now, cost, NULL, &before, ctx);
    r = check(c, key, cf, m, now, cost, &o, ctx);
    if (r.d.limited || cost == 0 ||
        (r.write == SLIDING_LOG_WRITE_SET && r.next_n > 0 && m->n == 0)) {
        return 0; /* refused, nothing taken, or real time took the key */
    }
    for (size_t i = 0; i < m->n; i++) {
        at_now += m->e[i] == now * 1000;
    }
    lua_twin_call_multi(c, "refund", key, ALGO, cf->v, now, cost, o.undo,
                        READ_STATE, &k, ctx);
    cr_assert(!k.failed, "%s: refund: %s", ctx, k.err);
    parse_state(k.state, m, ctx);
    cr_assert_eq(k.pttl, m->n > 0 ? -1 : -2, "%s: PTTL after refund", ctx);
    freeReplyObject(k.exec);
    /* Exactly cost entries at now went. */
    for (size_t i = 0; i < m->n; i++) {
        at_now -= m->e[i] == now * 1000;
    }
    cr_assert_eq(at_now, (size_t)cost, "%s: refund removed %zu entries", ctx,
                 at_now);

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
        struct sliding_log_result a = model_at(cf, &pre, when, cost, ctx);
        struct sliding_log_result b = model_at(cf, m, when, cost, ctx);

        lua_twin_expect_same_decision(&a.d, &b.d, ctx);
    }
    return 1;
}

/* ---------------- Randomized sequences ---------------- */

/* Random parameters: small, ordinary and the maxima (100000 entries,
 * 3650 days), min_interval off, shorter or longer than the window. */
static void rnd_conf(uint64_t *rs, struct conf *cf)
{
    static const int64_t maxes[] = { 1, 2, 3, 10, 100, 0, 0, -1 };
    static const int64_t windows[] = { 1, 10, 1000, 60000, MAX_DUR, 0 };
    int64_t max = lua_twin_pick(rs, maxes, sizeof(maxes) / sizeof(*maxes));
    int64_t w = lua_twin_pick(rs, windows, sizeof(windows) / sizeof(*windows));
    int64_t mi;

    if (max == 0) {
        max = lua_twin_rnd_in(rs, 1, 50);
    } else if (max == -1) {
        max = lua_twin_rnd_in(rs, 0, 3) == 0 ? MAX_E
                                             : lua_twin_rnd_in(rs, 1, MAX_E);
    }
    if (w == 0) {
        w = lua_twin_rnd_in(rs, 1, lua_twin_rnd_in(rs, 0, 1) ? 5000 : MAX_DUR);
    }
    switch (lua_twin_rnd_in(rs, 0, 7)) {
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
        mi = lua_twin_rnd_in(rs, 0, 1) ? MAX_DUR
                                       : lua_twin_rnd_in(rs, 0, MAX_DUR);
        break;
    default:
        mi = 0;
        break;
    }
    conf_set(cf, max, w, mi);
}

/* A cost: 0, 1, exactly max, above it, or anything up to it (costs above
 * BIG_COST only now and then: each is that many entries). */
static int64_t rnd_cost(uint64_t *rs, const struct conf *cf)
{
    int64_t cap = cf->max < BIG_COST ? cf->max : BIG_COST;

    switch (lua_twin_rnd_in(rs, 0, 11)) {
    case 0:
        return 0;
    case 1:
        return cf->max <= BIG_COST || lua_twin_rnd_in(rs, 0, 3) == 0 ? cf->max
                                                                     : cap;
    case 2:
        return cf->max + 1;
    case 3:
        return lua_twin_rnd_in(rs, 1, cap);
    default:
        return lua_twin_rnd_in(rs, 1, cap < 3 ? cap : 3);
    }
}

/* The next time: the same, a little later, exactly where the newest entry
 * is min_interval old or the oldest leaves the window (or 1 us before),
 * much later, years later, or back. */
static int64_t rnd_time(uint64_t *rs, const struct conf *cf,
                        const struct model *m, int64_t now)
{
    int64_t w = cf->window_ms * 1000, mi = cf->mi_ms * 1000, t = now;

    switch (lua_twin_rnd_in(rs, 0, 11)) {
    case 0:
    case 1:
        break;
    case 2:
        if (m->n > 0) {
            t = m->e[m->n - 1] / 1000 + mi - lua_twin_rnd_in(rs, 0, 1);
        }
        break;
    case 3:
    case 4:
        if (m->n > 0) {
            size_t i = (size_t)lua_twin_rnd_in(rs, 0, (int64_t)m->n - 1);
            t = m->e[i] / 1000 + w - lua_twin_rnd_in(rs, 0, 1);
        }
        break;
    case 5:
        t = now + lua_twin_rnd_in(rs, w / 2 + 1, 2 * w);
        break;
    case 6:
        t = now + lua_twin_rnd_in(rs, 1, 400) * DAY_US;
        break;
    case 7:
        t = now - lua_twin_rnd_in(rs, 1, w);
        break;
    default:
        t = now + lua_twin_rnd_in(rs, 0, w / 4 + 1);
        break;
    }
    if (t < 0 || t > US_MAX) {
        return now;
    }
    return t;
}

/* Adds one entry the twin did not log to the key and the model: from the
 * future (a clock jumped back), live, past the window, past the horizon,
 * or at now, numbered high. */
static int plant(redisContext *c, uint64_t *rs, const char *key,
                 const struct conf *cf, struct model *m, int64_t now)
{
    int64_t w = cf->window_ms * 1000, h = cf->p.horizon_ns / 1000, t;
    char mem[2 * DIGITS];
    size_t i;
    redisReply *r;

    if (m->n >= PLANTED) {
        return 0;
    }
    switch (lua_twin_rnd_in(rs, 0, 4)) {
    case 0:
        t = now + lua_twin_rnd_in(rs, 1, w);
        break;
    case 1:
        t = now - lua_twin_rnd_in(rs, 0, w - 1);
        break;
    case 2:
        t = now - w - lua_twin_rnd_in(rs, 0, h - w);
        break;
    case 3:
        t = now - h - lua_twin_rnd_in(rs, 0, w);
        break;
    default:
        t = now;
        break;
    }
    if (t < 0 || t > US_MAX) {
        return 0;
    }
    snprintf(mem, sizeof(mem), "%" PRId64 ":c%" PRId64, t,
             lua_twin_rnd_in(rs, 500, 999));
    r = px_cmd(c, "ZADD %s %" PRId64 " %s", key, t, mem);
    cr_assert_eq(r->type, REDIS_REPLY_INTEGER);
    if (r->integer == 0) {
        freeReplyObject(r);
        return 0; /* the member existed: nothing changed */
    }
    freeReplyObject(r);
    for (i = m->n; i > 0 && m->e[i - 1] > t * 1000; i--) {
        m->e[i] = m->e[i - 1];
    }
    m->e[i] = t * 1000;
    m->n++;
    m->deadline_us = INT64_MAX; /* the last expiry does not cover it */
    return 1;
}

Test(it_lua_sliding_log, randomized_sequences_match_the_c_model,
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

        m.n = 0;
        m.deadline_us = 0;
        snprintf(key, sizeof(key), "sl:%d", seq);
        rnd_conf(&rs, &cf);
        for (int op = 0; op < OPS; op++) {
            char ctx[CTX_BYTES];
            int64_t kind = lua_twin_rnd_in(&rs, 0, 99),
                    cost = rnd_cost(&rs, &cf);

            now = rnd_time(&rs, &cf, &m, now);
            snprintf(ctx, sizeof(ctx),
                     SEED_ENV "=%llu seq %d op %d: max %s window_ms %s "
                              "min_interval_ms %s now %" PRId64
                              " cost %" PRId64,
                     (unsigned long long)seed, seq, op, cf.s[0], cf.s[1],
                     cf.s[2], now, cost);
            if (kind < 60) {
                struct sliding_log_result r =
                    check(c, key, &cf, &m, now, cost, &o, ctx);
                n.calls++;
                n.limited += r.d.limited;
                n.writes += r.write == SLIDING_LOG_WRITE_SET;
                n.refused_writes +=
                    r.write == SLIDING_LOG_WRITE_SET && r.d.limited;
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
                /* Same key, other limits: the expiry written under the old
                 * ones says nothing. Half the time only min_interval
                 * changes: the script keeps the last parameters it parsed,
                 * and must see a change in any one. */
                if (lua_twin_rnd_in(&rs, 0, 1)) {
                    rnd_conf(&rs, &cf);
                } else {
                    conf_set(&cf, cf.max, cf.window_ms,
                             cf.mi_ms == 0
                                 ? lua_twin_rnd_in(&rs, 1, cf.window_ms)
                                 : 0);
                }
                m.deadline_us = INT64_MAX;
                n.changes++;
            } else if (kind < 92) {
                n.plants += plant(c, &rs, key, &cf, &m, now);
            } else if (m.n > 0 && now >= m.deadline_us) {
                /* The key would have expired by now: gone on both sides,
                 * and the model must not care. */
                static struct model none;
                struct sliding_log_result a = model_at(&cf, &m, now, 1, ctx);
                struct sliding_log_result b = model_at(&cf, &none, now, 1, ctx);

                lua_twin_expect_same_decision(&a.d, &b.d, ctx);
                px_check_int(px_cmd(c, "DEL %s", key), 1);
                m.n = 0;
                n.expiries++;
            }
        }
    }
    fprintf(stderr,
            "it_lua_" ALGO ": %ld checks (%ld limited, %ld writes, %ld of "
            "them refused), %ld peeks, %ld refunds, %ld expiries, %ld "
            "changes, %ld plants\n",
            n.calls, n.limited, n.writes, n.refused_writes, n.peeks, n.refunds,
            n.expiries, n.changes, n.plants);
    cr_assert_gt(n.limited, 0);
    cr_assert_gt(n.calls - n.limited, 0);
    cr_assert_gt(n.refused_writes, 0);
    cr_assert_gt(n.peeks, 0);
    cr_assert_gt(n.refunds, 0);
    cr_assert_gt(n.plants, 0);
    redisFree(c);
}

/* ---------------- Large numbers and large logs ---------------- */

/* Replaces the key with one entry at t (us) and sets the model to it. */
static void plant_one(redisContext *c, const char *key, struct model *m,
                      int64_t t)
{
    freeReplyObject(px_cmd(c, "DEL %s", key));
    px_check_int(px_cmd(c, "ZADD %s %" PRId64 " %" PRId64 ":a1", key, t, t), 1);
    m->n = 1;
    m->e[0] = t * 1000;
}

Test(it_lua_sliding_log, durations_past_2_53_us_are_exact_text_then_saturate,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    static struct model m;
    redisContext *c = lua_twin_connect();
    struct conf cf;
    struct lua_twin_out o;
    struct lua_twin_txn k;
    struct sliding_log_result r;
    const int64_t w = MAX_DUR * 1000, t = INT64_C(8800000000000000);

    /* An entry far in the future of time 0 (a clock far behind): it leaves
     * the window and the horizon past 2^53 us. The refused attempt is
     * logged and capped away at once (the future entry is newer). */
    conf_set(&cf, 1, MAX_DUR, 0);
    plant_one(c, "k", &m, t);
    r = check(c, "k", &cf, &m, 0, 1, &o, "2^53");
    cr_assert(r.d.limited);
    cr_assert_eq(o.retry_us, t + w);
    cr_assert_eq(o.reset_us, t + w);
    cr_assert_eq(r.expiry_ms, (t + w) / 1000);
    lua_twin_call_multi(c, "peek", "k", ALGO, cf.v, 0, 1, NULL, READ_STATE, &k,
                        "2^53 type");
    cr_assert_eq(k.entry->element[3]->type, REDIS_REPLY_STRING);
    cr_assert_str_eq(k.entry->element[3]->str, "9115360000000000");
    cr_assert_str_eq(k.entry->element[4]->str, "9115360000000000");
    freeReplyObject(k.exec);
    lua_twin_call_multi(c, "peek", "k", ALGO, cf.v, t, 1, NULL, READ_STATE, &k,
                        "number");
    cr_assert_eq(k.entry->element[4]->type, REDIS_REPLY_INTEGER);
    cr_assert_eq(k.entry->element[4]->integer, w);
    freeReplyObject(k.exec);

    /* Just under 2^53 us, with the longest min_interval: saturated. */
    conf_set(&cf, 2, MAX_DUR, MAX_DUR);
    plant_one(c, "k", &m, US_MAX - 1);
    r = check(c, "k", &cf, &m, 0, 1, &o, "saturated");
    cr_assert(r.d.limited);
    cr_assert_eq(r.d.retry_after_ns, INT64_MAX);
    cr_assert_eq(r.d.reset_after_ns, INT64_MAX);
    cr_assert_eq(r.expiry_ms, SAT_MS);
    cr_assert_eq(o.retry_us, SAT_US);
    cr_assert_eq(o.reset_us, SAT_US);
    redisFree(c);
}

Test(it_lua_sliding_log, a_log_of_100000_entries_is_capped_and_refunded,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    static struct model m;
    redisContext *c = lua_twin_connect();
    struct conf cf;
    struct lua_twin_out o;
    struct sliding_log_result r;

    conf_set(&cf, MAX_E, 1000, 0);
    m.n = 0;
    r = check(c, "k", &cf, &m, T0, MAX_E, &o, "fill");
    cr_assert(!r.d.limited);
    cr_assert_eq(m.n, (size_t)MAX_E);
    /* Refused, logged, and capped: the oldest attempts go. */
    r = check(c, "k", &cf, &m, T0 + 10, 3, &o, "refused");
    cr_assert(r.d.limited);
    cr_assert_eq(m.n, (size_t)MAX_E);
    cr_assert_eq(m.e[MAX_E - 1], (T0 + 10) * 1000);
    /* A window later, one admission of everything, refunded: back to the
     * log as it was, less what left the window. */
    cr_assert(refund_cycle(c, "k", &cf, &m, T0 + 1000010, MAX_E, T0 + 1500000,
                           "refund"),
              "refund ran");
    redisFree(c);
}

/* ---------------- Edges ---------------- */

Test(it_lua_sliding_log, edges_to_the_microsecond_match_the_c_model,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    static struct model m;
    redisContext *c = lua_twin_connect();
    struct conf cf;
    struct lua_twin_out o;
    struct sliding_log_result r;

    /* min_interval 100 ms: 1 us early is refused (and logged), exactly
     * min_interval after that attempt passes. */
    conf_set(&cf, 10, 1000, 100);
    m.n = 0;
    check(c, "k", &cf, &m, T0, 1, &o, "first");
    r = check(c, "k", &cf, &m, T0 + 99999, 1, &o, "1 us early");
    cr_assert(r.d.limited);
    cr_assert_eq(o.retry_us, 100000);
    r = check(c, "k", &cf, &m, T0 + 199999, 1, &o, "exactly");
    cr_assert(!r.d.limited);
    /* The window: an entry exactly W old no longer counts. */
    freeReplyObject(px_cmd(c, "DEL k"));
    m.n = 0;
    conf_set(&cf, 2, 1000, 0);
    check(c, "k", &cf, &m, T0, 2, &o, "fill");
    peek(c, "k", &cf, &m, T0 + 999999, 1, "W - 1 us");
    r = model_at(&cf, &m, T0 + 999999, 1, "W - 1 us");
    cr_assert(r.d.limited);
    cr_assert_eq(r.d.retry_after_ns, 1000);
    peek(c, "k", &cf, &m, T0 + 1000000, 2, "W");
    r = check(c, "k", &cf, &m, T0 + 1000000, 2, &o, "W");
    cr_assert_eq(r.d.limited, 0);

    /* max lowered below the live entries: a peek (cost 0) is refused until
     * enough leave the window, whatever min_interval says. */
    freeReplyObject(px_cmd(c, "DEL k"));
    m.n = 0;
    conf_set(&cf, 3, 1000, 2000);
    check(c, "k", &cf, &m, T0, 3, &o, "fill");
    conf_set(&cf, 2, 1000, 2000);
    r = check(c, "k", &cf, &m, T0 + 1000, 0, &o, "over-full peek");
    cr_assert(r.d.limited);
    cr_assert_eq(o.retry_us, 999000);
    r = check(c, "k", &cf, &m, T0 + 1000, 1, &o, "over-full request");
    cr_assert(r.d.limited);
    cr_assert_eq(o.retry_us, 2000000);
    redisFree(c);
}

/* ---------------- Members, peeks and refunds ---------------- */

Test(it_lua_sliding_log, members_number_entries_of_one_timestamp_in_order,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    static struct model m;
    redisContext *c = lua_twin_connect();
    struct conf cf;
    struct lua_twin_out a, b;
    redisReply *r;

    conf_set(&cf, 20, 1000, 0);
    m.n = 0;
    check(c, "k", &cf, &m, T0, 9, &a, "nine");
    check(c, "k", &cf, &m, T0, 3, &b, "three more");
    r = px_cmd(c, "ZRANGE k 0 -1");
    cr_assert_eq(r->elements, 12);
    cr_assert_str_eq(r->element[0]->str, "1700000000000000:a1");
    cr_assert_str_eq(r->element[8]->str, "1700000000000000:a9");
    cr_assert_str_eq(r->element[9]->str, "1700000000000000:b10");
    cr_assert_str_eq(r->element[11]->str, "1700000000000000:b12");
    freeReplyObject(r);
    /* A refund takes the newest numbered: the next write numbers on from
     * the largest left. */
    cr_assert_str_eq(b.undo, "1700000000000000");
    call_plain(c, "refund", "k", &cf, T0, 2, b.undo, &b, "refund 2");
    px_check_int(px_cmd(c, "ZCARD k"), 10);
    px_check_nil(px_cmd(c, "ZSCORE k 1700000000000000:b11"));
    read_state(c, "k", &m, "after refund");
    check(c, "k", &cf, &m, T0, 1, &b, "one more");
    px_check_str(px_cmd(c, "ZSCORE k 1700000000000000:b11"),
                 "1700000000000000");
    /* One entry on a fresh key is numbered 1, the next at its instant 2. */
    m.n = 0;
    check(c, "k1", &cf, &m, T0, 1, &a, "one");
    check(c, "k1", &cf, &m, T0, 1, &a, "one more at its instant");
    r = px_cmd(c, "ZRANGE k1 0 -1");
    cr_assert_eq(r->elements, 2);
    cr_assert_str_eq(r->element[0]->str, "1700000000000000:a1");
    cr_assert_str_eq(r->element[1]->str, "1700000000000000:a2");
    freeReplyObject(r);
    redisFree(c);
}

Test(it_lua_sliding_log, peek_writes_nothing, .init = it_init,
     .fini = px_env_fini, .timeout = 60)
{
    static struct model m, back;
    redisContext *c = lua_twin_connect();
    struct conf cf;
    struct lua_twin_out o;
    long long ttl;

    conf_set(&cf, 3, 1000, 100);
    m.n = 0;
    for (int64_t cost = 0; cost <= 4; cost++) {
        peek(c, "k", &cf, &m, T0, cost, "peek missing");
    }
    /* A stored log with its TTL: untouched by peeks that would pass, be
     * refused by min_interval or the count (a check would log those), or
     * never pass. */
    call_plain(c, "check", "k", &cf, T0, 2, NULL, &o, "fill");
    read_state(c, "k", &m, "fill");
    ttl = lua_twin_pttl(c, "k");
    cr_assert(ttl > 0 && ttl <= 1000, "PTTL %lld", ttl);
    for (int64_t cost = 0; cost <= 4; cost++) {
        for (int64_t dt = 50000; dt <= 150000; dt += 100000) {
            call_plain(c, "peek", "k", &cf, T0 + dt, cost, NULL, &o, "peek");
            read_state(c, "k", &back, "peek");
            same_log(&back, m.e, m.n, "peek");
            cr_assert_leq(lua_twin_pttl(c, "k"), ttl, "peek set a TTL");
        }
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

Test(it_lua_sliding_log, refund_restores_then_is_a_no_op_once_moved_on,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    static struct model m;
    redisContext *c = lua_twin_connect();
    struct conf cf;
    struct lua_twin_out a, b;

    conf_set(&cf, 5, 1000, 0);
    m.n = 0;
    /* Everything back: the key goes. */
    check(c, "k", &cf, &m, T0, 2, &a, "check 2");
    refund(c, "k", &cf, T0 + 50000, 2, a.undo);
    px_check_int(px_cmd(c, "EXISTS k"), 0);

    /* Only the entries of its own timestamp go. */
    m.n = 0;
    check(c, "k", &cf, &m, T0, 2, &a, "first");
    check(c, "k", &cf, &m, T0 + 10, 1, &b, "second");
    refund(c, "k", &cf, T0 + 10, 2, a.undo);
    px_check_int(px_cmd(c, "ZCARD k"), 1);
    px_check_int(px_cmd(c, "ZCOUNT k %" PRId64 " %" PRId64, T0 + 10, T0 + 10),
                 1);
    /* A refused attempt stays logged: it has no token. */
    conf_set(&cf, 1, 1000, 0);
    m.n = 1;
    m.e[0] = (T0 + 10) * 1000;
    check(c, "k", &cf, &m, T0 + 20, 1, &a, "refused");
    cr_assert(a.limited);
    cr_assert_str_eq(a.undo, "");
    refund(c, "k", &cf, T0 + 20, 1, a.undo);
    px_check_int(px_cmd(c, "ZCARD k"), 1);
    px_check_int(px_cmd(c, "ZCOUNT k %" PRId64 " %" PRId64, T0 + 20, T0 + 20),
                 1);

    /* Entries past the horizon were dropped by a later write: a no-op. */
    conf_set(&cf, 5, 1000, 0);
    check(c, "k", &cf, &m, T0 + 2000000, 1, &a, "much later");
    refund(c, "k", &cf, T0 + 2000000, 1, b.undo);
    px_check_int(px_cmd(c, "ZCARD k"), 1);
    /* Cost 0 or above max, an empty or malformed token: no-ops. */
    refund(c, "k", &cf, T0 + 2000000, 0, a.undo);
    refund(c, "k", &cf, T0 + 2000000, 6, a.undo);
    refund(c, "k", &cf, T0 + 2000000, 1, "");
    refund(c, "k", &cf, T0 + 2000000, 1, "x");
    px_check_int(px_cmd(c, "ZCARD k"), 1);
    /* An expired key stays missing; another type is left alone. */
    freeReplyObject(px_cmd(c, "DEL k"));
    refund(c, "k", &cf, T0 + 2000000, 1, a.undo);
    px_check_int(px_cmd(c, "EXISTS k"), 0);
    px_check_status(px_cmd(c, "SET k v"), "OK");
    refund(c, "k", &cf, T0 + 2000000, 1, a.undo);
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
    { { "0", "1000", "0" }, SLIDING_LOG_ERR_MAX },
    { { "-1", "1000", "0" }, SLIDING_LOG_ERR_MAX },
    { { "100001", "1000", "0" }, SLIDING_LOG_ERR_MAX },
    { { "", "1000", "0" }, SLIDING_LOG_ERR_MAX },
    { { "0", "0", "-1" }, SLIDING_LOG_ERR_MAX },
    { { "5", "0", "0" }, SLIDING_LOG_ERR_WINDOW },
    { { "5", "315360000001", "0" }, SLIDING_LOG_ERR_WINDOW },
    { { "5", "1e3", "0" }, SLIDING_LOG_ERR_WINDOW },
    { { "5", "1000", "-1" }, SLIDING_LOG_ERR_INTERVAL },
    { { "5", "1000", "315360000001" }, SLIDING_LOG_ERR_INTERVAL },
    { { "5", "1000", "" }, SLIDING_LOG_ERR_INTERVAL },
    { { "5", "1000", "0.5" }, SLIDING_LOG_ERR_INTERVAL },
};

Test(it_lua_sliding_log, bad_parameters_give_the_c_model_errors,
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
            struct sliding_log_params p;
            const char *cerr = NULL;

            cr_assert_eq(sliding_log_params_init(&p, n[0], n[1], n[2], &cerr),
                         SLIDING_LOG_EARGS, "case %zu", i);
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

Test(it_lua_sliding_log, wrong_type_and_malformed_state_are_errors,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    /* Scores the twin cannot read as timestamps: negative (the model's
     * error too), fractional, infinite, 2^53 and more. */
    static const char *const scores[] = { "-5", "1.5", "+inf", "-inf",
                                          "9007199254740992" };
    redisContext *c = lua_twin_connect();
    struct conf cf;
    struct lua_twin_out o;
    char err[ERR_BYTES], want[ERR_BYTES];
    const int64_t bad = -5000;
    struct sliding_log_result r;
    const char *cerr = NULL;

    conf_set(&cf, 5, 1000, 0);
    px_check_status(px_cmd(c, "SET k v"), "OK");
    px_check_int(px_cmd(c, "HSET h f v"), 1);
    for (int mode = 0; mode < 3; mode++) {
        cr_assert_eq(lua_twin_call(c, mode ? "peek" : "check",
                                   mode == 2 ? "h" : "k", ALGO, cf.v, T0, 1,
                                   NULL, &o, err, sizeof(err)),
                     -1);
        cr_assert_str_eq(err, E_WRONGTYPE);
    }
    px_check_str(px_cmd(c, "GET k"), "v");

    cr_assert_eq(sliding_log_decide(&cf.p, &bad, 1, T0 * 1000, 1, NEXT, MAX_E,
                                    &r, &cerr),
                 SLIDING_LOG_ESTATE);
    snprintf(want, sizeof(want), "ERR %s", cerr);
    for (size_t i = 0; i < sizeof(scores) / sizeof(*scores); i++) {
        freeReplyObject(px_cmd(c, "DEL z"));
        px_check_int(px_cmd(c, "ZADD z %s bad 1699999999999000 ok", scores[i]),
                     2);
        for (int mode = 0; mode < 2; mode++) {
            cr_assert_eq(lua_twin_call(c, mode ? "peek" : "check", "z", ALGO,
                                       cf.v, T0, 1, NULL, &o, err, sizeof(err)),
                         -1, "case %zu", i);
            cr_assert_str_eq(err, want, "case %zu", i);
        }
        px_check_int(px_cmd(c, "ZCARD z"), 2);
        px_check_int(px_cmd(c, "PTTL z"), -1);
    }
    redisFree(c);
}
