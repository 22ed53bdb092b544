/* algorithms/lua/sliding_counter.lua (through limiter.lua) against the C model
 * algorithms/sliding_counter.c, on a real redis-server.
 *
 * The test keeps the model's state itself: every script call is compared
 * with sliding_counter_decide() fed with that state at the same explicit time
 * (now_us * 1000 ns), and after each call the key must hold exactly the
 * model's next state in microseconds (HGETALL) with the model's expiry
 * (PTTL). Once checked, the key is made persistent, so real time never
 * takes it away while the sequence runs on its own clock; the test drops
 * it itself when the model's clock passes the expiry, after asserting that
 * the model then reads the state like a missing key.
 *
 * Randomized sequences print their seed; set PX_LUA_SC_SEED to replay. */
#include "tests/integration/fixture.h"
#include "tests/integration/lua_twin.h"
#include "tests/support/px_test.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/rl.h"
#include "algorithms/sliding_counter.h"

PX_TEST_SUITE(it_lua_sliding_counter);

#define US  INT64_C(1000) /* ns per us */
#define SEC INT64_C(1000000)
#define MAX SLIDING_COUNTER_MAX_COUNT
#define WIN SLIDING_COUNTER_MAX_WINDOW_MS
/* A realistic clock, 2023-11-14T22:13:20Z, in microseconds. */
#define T0 INT64_C(1700000000000000)
/* The last microsecond the script accepts (2^53 - 1). */
#define NOW_MAX INT64_C(9007199254740991)

#define ALGO        "sliding_counter"
#define PARAMS(m)   (m)->a_max, (m)->a_win
#define COST_MAX(m) (m)->p.max

#define SEQUENCES   12 /* randomized sequences per run */
#define OPS_PER_SEQ 24 /* operations in each */
#define ARG_BYTES   24 /* an int64 in decimal, sign and NUL */

static void it_init(void)
{
    px_redis_start(&px_env()->redis, NULL);
}

/* ---------------- The model side ---------------- */

/* One key as the test believes it is stored. */
struct sc_model {
    struct sliding_counter_params p; /* the parameters of the next calls */
    char a_max[ARG_BYTES];           /* ...as the script's arguments */
    char a_win[ARG_BYTES];
    int have;                        /* the key exists */
    struct sliding_counter_state st; /* its state, in ns */
    int exp_valid;                   /* exp_at_us applies to st and p */
    int64_t exp_at_us;               /* model time at which the key expires */
};

static void sc_set_params(struct sc_model *m, int64_t max, int64_t win_ms)
{
    const char *err = NULL;

    cr_assert_eq(sliding_counter_params_init(&m->p, max, win_ms, &err),
                 SLIDING_COUNTER_OK, "params %" PRId64 " %" PRId64 ": %s", max,
                 win_ms, err);
    snprintf(m->a_max, sizeof(m->a_max), "%" PRId64, max);
    snprintf(m->a_win, sizeof(m->a_win), "%" PRId64, win_ms);
    m->exp_valid = 0;
}

/* The model's decision for `st` (NULL: no key) at now_us. */
static struct sliding_counter_result
sc_decide(const struct sliding_counter_params *p,
          const struct sliding_counter_state *st, int64_t now_us, int64_t cost)
{
    struct sliding_counter_result r;
    const char *err = NULL;

    cr_assert_eq(sliding_counter_decide(p, st, now_us * US, cost, &r, &err),
                 SLIDING_COUNTER_OK, "model: %s", err);
    return r;
}

/* ---------------- The key, as Redis holds it ---------------- */

/* Reads the key's HASH, PEXPIRETIME (into *pexat) and Redis's clock after
 * it (into *t_ms), then makes the key persistent (lua_twin_read_hash). Returns
 * 0 when the key is missing; else asserts it holds exactly start, count and
 * prev as decimal integers and fills st (start converted to ns). */
static int sc_read(redisContext *c, const char *key,
                   struct sliding_counter_state *st, long long *pexat,
                   long long *t_ms)
{
    static const char *const names[3] = { "start", "count", "prev" };
    int64_t v[3];

    if (!lua_twin_read_hash(c, key, names, 3, v, pexat, t_ms)) {
        return 0;
    }
    st->start_ns = v[0] * US;
    st->count = v[1];
    st->prev = v[2];
    return 1;
}

/* Plants a state (start in ns, a multiple of 1000) without expiry. */
static void sc_plant(redisContext *c, const char *key,
                     const struct sliding_counter_state *st)
{
    freeReplyObject(px_cmd(c, "DEL %s", key));
    freeReplyObject(px_cmd(c, "HSET %s start %lld count %lld prev %lld", key,
                           (long long)(st->start_ns / US), (long long)st->count,
                           (long long)st->prev));
}

/* Asserts the key holds what the model has (nothing was written). */
static void sc_expect_unchanged(redisContext *c, const char *key,
                                const struct sc_model *m, const char *ctx)
{
    struct sliding_counter_state got;
    long long pexat, t_ms;
    int have = sc_read(c, key, &got, &pexat, &t_ms);

    cr_assert_eq(have, m->have, "%s: key presence %d, model %d", ctx, have,
                 m->have);
    if (have) {
        cr_assert(got.start_ns == m->st.start_ns && got.count == m->st.count &&
                      got.prev == m->st.prev,
                  "%s: state changed without a write", ctx);
        cr_assert_eq(pexat, -1, "%s: an expiry was set", ctx);
    }
}

/* ---------------- One checked call ---------------- */

/* Calls the script in `mode` ("check" or "peek") and checks it against the
 * model as the file header says; applies a check's write to m. Returns the
 * model's result; the undo token goes to undo (LUA_TWIN_UNDO_BYTES). */
static struct sliding_counter_result
sc_call(redisContext *c, const char *key, struct sc_model *m, const char *mode,
        int64_t now_us, int64_t cost, char *undo, const char *ctx)
{
    const char *p[4] = { m->a_max, m->a_win, NULL, NULL };
    struct sliding_counter_result want =
        sc_decide(&m->p, m->have ? &m->st : NULL, now_us, cost);
    struct lua_twin_out o;
    char err[256], buf[ARG_BYTES];
    long long t0 = lua_twin_redis_ms(c);

    cr_assert_eq(lua_twin_call(c, mode, key, ALGO, p, now_us, cost, NULL, &o,
                               err, sizeof(err)),
                 0, "%s: %s", ctx, err);
    cr_assert_eq(o.now_us, now_us, "%s: the script's clock", ctx);
    lua_twin_expect(&o, &want.d, ctx);
    snprintf(undo, LUA_TWIN_UNDO_BYTES, "%s", o.undo);
    /* The undo token names the window counted in. */
    buf[0] = '\0';
    if (want.write == SLIDING_COUNTER_WRITE_SET) {
        snprintf(buf, sizeof(buf), "%" PRId64, want.next.start_ns / US);
    }
    cr_assert_str_eq(o.undo, buf, "%s: undo", ctx);
    if (strcmp(mode, "check") != 0 || want.write != SLIDING_COUNTER_WRITE_SET) {
        sc_expect_unchanged(c, key, m, ctx);
        return want;
    }

    struct sliding_counter_state got;
    long long pexat, t1;
    int have = sc_read(c, key, &got, &pexat, &t1);

    cr_assert_eq(want.next.start_ns % US, 0, "%s: start off the us grid", ctx);
    if (!have) {
        /* Real time took it: only once that much time has passed (equal
         * at a millisecond's edge: Redis counts the expiry from the
         * millisecond it saw, which may be the one before t0's TIME). */
        cr_assert_geq(t1 - t0, want.expiry_ms, "%s: key gone early", ctx);
        m->have = 0;
        return want;
    }
    cr_assert(got.start_ns == want.next.start_ns &&
                  got.count == want.next.count && got.prev == want.next.prev,
              "%s: stored %lld %lld %lld, model %lld %lld %lld", ctx,
              (long long)got.start_ns, (long long)got.count,
              (long long)got.prev, (long long)want.next.start_ns,
              (long long)want.next.count, (long long)want.next.prev);
    lua_twin_expect_expiry(pexat, t0, t1, want.expiry_ms, ctx);
    m->have = 1;
    m->st = want.next;
    m->exp_valid = 1;
    m->exp_at_us = now_us + want.expiry_ms * 1000;
    return want;
}

static void sc_refund(redisContext *c, const char *key,
                      const struct sc_model *m, int64_t now_us, int64_t cost,
                      const char *undo)
{
    const char *p[4] = { PARAMS(m), NULL, NULL };

    lua_twin_ok(c, "refund", key, ALGO, p, now_us, cost, undo);
}

/* ---------------- Randomized sequences ---------------- */

/* Parameters from tiny to the conf maxima. */
static void rnd_params(uint64_t *s, struct sc_model *m)
{
    int64_t max, win;

    lua_twin_rnd_limit(s, MAX, WIN, &max, &win);
    sc_set_params(m, max, win);
}

/* The next time: same, a little later, exactly a window edge or the last
 * retry (or one us off them), a long idle, or a jump back. */
static int64_t rnd_time(uint64_t *s, int64_t now, const struct sc_model *m,
                        const struct sliding_counter_result *last)
{
    int64_t w = m->p.window_ns / US, dt = 0;

    switch (lua_twin_rnd_in(s, 0, 10)) {
    case 10:
        if (last->d.retry_after_ns > 0 &&
            last->d.retry_after_ns < INT64_MAX / 2) {
            dt = last->d.retry_after_ns / US + lua_twin_rnd_in(s, -1, 1);
        }
        break;
    case 0:
        break;
    case 1:
        dt = lua_twin_rnd_in(s, 1, 1000);
        break;
    case 2:
    case 3:
        /* The next window's start, or the one after. */
        dt = w - now % w + lua_twin_rnd_in(s, -1, 1) +
             (lua_twin_rnd_in(s, 0, 3) == 0 ? w : 0);
        break;
    case 4:
        dt = lua_twin_rnd_in(s, 1,
                             INT64_C(4000) * 86400 * SEC); /* up to 11 years */
        break;
    case 5:
        dt = -lua_twin_rnd_in(
            s, 1, lua_twin_rnd_in(s, 0, 1) ? 2 * w : 100 * SEC); /* jump back */
        break;
    default:
        dt = lua_twin_rnd_in(s, 1, w < 3 * SEC ? w : 3 * SEC);
        break;
    }
    now += dt;
    return now < 0 ? 0 : now > NOW_MAX ? NOW_MAX : now;
}

/* peek, check, refund and peek again at one time: the refund leaves the
 * state of before the check, rolled to now's window (no key when nothing
 * is counted in now's own window nor before it: a later or unaligned one
 * holds its place), with the check's expiry; and the peeks agree. */
static void sc_check_refund(redisContext *c, const char *key,
                            struct sc_model *m, int64_t now, uint64_t *s,
                            struct lua_twin_tally *t, const char *ctx)
{
    int64_t cost = lua_twin_rnd_cost(s, COST_MAX(m)),
            pc = lua_twin_rnd_cost(s, COST_MAX(m));
    char undo[LUA_TWIN_UNDO_BYTES];
    struct sliding_counter_state after;
    struct sliding_counter_result a, r, b, want;
    long long pexat, t_ms;
    int drop;

    struct sliding_counter_state before = m->st;

    want = sc_decide(&m->p, m->have ? &m->st : NULL, now, 0);
    a = sc_call(c, key, m, "peek", now, pc, undo, ctx);
    r = sc_call(c, key, m, "check", now, cost, undo, ctx);
    t->calls += 2;
    if (r.write != SLIDING_COUNTER_WRITE_SET || !m->have) {
        return;
    }
    drop = want.next.count == 0 && want.next.prev == 0 &&
           want.next.start_ns == now * US - now * US % m->p.window_ns;
    sc_refund(c, key, m, now, cost, undo);
    t->refunds++;
    m->have = sc_read(c, key, &after, &pexat, &t_ms);
    cr_assert_eq(m->have, !drop, "%s: key after the refund", ctx);
    if (m->have) {
        cr_assert(after.start_ns == want.next.start_ns &&
                      after.count == want.next.count &&
                      after.prev == want.next.prev,
                  "%s: refunded to %lld %lld %lld, want %lld %lld %lld", ctx,
                  (long long)after.start_ns, (long long)after.count,
                  (long long)after.prev, (long long)want.next.start_ns,
                  (long long)want.next.count, (long long)want.next.prev);
        cr_assert_eq(pexat, -1, "%s: the refund set an expiry", ctx);
        m->st = after;
    }
    m->exp_valid = 0;
    b = sc_call(c, key, m, "peek", now, pc, undo, ctx);
    cr_assert(lua_twin_same_decision(&a.d, &b.d),
              "%s: peeks differ around a refund: before %lld %lld %lld, now "
              "%lld, w %lld, cost %lld: %d %lld %lld %lld vs %d %lld %lld %lld",
              ctx, (long long)before.start_ns, (long long)before.count,
              (long long)before.prev, (long long)now, (long long)m->p.window_ns,
              (long long)pc, a.d.limited, (long long)a.d.remaining,
              (long long)a.d.retry_after_ns, (long long)a.d.reset_after_ns,
              b.d.limited, (long long)b.d.remaining,
              (long long)b.d.retry_after_ns, (long long)b.d.reset_after_ns);
}

/* Past the expiry on the model's clock the state must read like no key;
 * then the test drops the key as Redis would (or keeps it, still alike). */
static void sc_expire(redisContext *c, const char *key, struct sc_model *m,
                      int64_t now, uint64_t *s, struct lua_twin_tally *t,
                      const char *ctx)
{
    const int64_t costs[3] = { 0, 1, m->p.max };

    if (!m->have || !m->exp_valid || now < m->exp_at_us) {
        return;
    }
    for (int i = 0; i < 3; i++) {
        struct sliding_counter_result x =
            sc_decide(&m->p, &m->st, now, costs[i]);
        struct sliding_counter_result y = sc_decide(&m->p, NULL, now, costs[i]);
        cr_assert(lua_twin_same_decision(&x.d, &y.d),
                  "%s: an expired state differs from none", ctx);
    }
    t->expired++;
    if (lua_twin_rnd_in(s, 0, 1)) {
        freeReplyObject(px_cmd(c, "DEL %s", key));
        m->have = 0;
    }
}

/* A valid state in an unusual place: above max, a window of another length
 * (not aligned), a later window (the clock was ahead), or an old one. */
static void sc_plant_random(redisContext *c, const char *key,
                            struct sc_model *m, int64_t now, uint64_t *s)
{
    int64_t w = m->p.window_ns / US, start;

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
        start = lua_twin_rnd_in(s, 0, NOW_MAX);
        break;
    }
    start = start < 0 ? 0 : start > NOW_MAX ? NOW_MAX : start;
    m->st.start_ns = start * US;
    m->st.count = lua_twin_rnd_in(s, 0, m->p.max < MAX ? m->p.max + 1 : MAX);
    m->st.prev =
        lua_twin_rnd_in(s, 0, 2) == 0 ? 0 : lua_twin_rnd_in(s, 0, m->p.max);
    m->have = 1;
    m->exp_valid = 0;
    sc_plant(c, key, &m->st);
}

static void sc_sequence(redisContext *c, uint64_t *s, int seq,
                        unsigned long long seed, struct lua_twin_tally *t)
{
    struct sc_model m;
    char key[32], ctx[96], undo[LUA_TWIN_UNDO_BYTES];
    struct sliding_counter_result last;
    int64_t now;

    memset(&m, 0, sizeof(m));
    memset(&last, 0, sizeof(last));
    snprintf(key, sizeof(key), "sc:%d", seq);
    rnd_params(s, &m);
    now = lua_twin_rnd_start(s);
    for (int op = 0; op < OPS_PER_SEQ; op++) {
        int64_t kind = lua_twin_rnd_in(s, 0, 99);

        snprintf(ctx, sizeof(ctx), "seed %llu seq %d op %d", seed, seq, op);
        now = rnd_time(s, now, &m, &last);
        sc_expire(c, key, &m, now, s, t, ctx);
        if (kind < 55) {
            last = sc_call(c, key, &m, "check", now,
                           lua_twin_rnd_cost(s, COST_MAX(&m)), undo, ctx);
            t->calls++;
            t->limited += last.d.limited;
            t->writes += last.write == SLIDING_COUNTER_WRITE_SET;
            t->gone += last.write == SLIDING_COUNTER_WRITE_SET && !m.have;
        } else if (kind < 70) {
            last = sc_call(c, key, &m, "peek", now,
                           lua_twin_rnd_cost(s, COST_MAX(&m)), undo, ctx);
            t->calls++;
        } else if (kind < 85) {
            sc_check_refund(c, key, &m, now, s, t, ctx);
        } else if (kind < 92) {
            rnd_params(s, &m); /* same key, other limits */
        } else {
            sc_plant_random(c, key, &m, now, s);
        }
    }
}

Test(it_lua_sliding_counter, randomized_sequences_match_the_c_model,
     .init = it_init, .fini = px_env_fini, .timeout = 120)
{
    redisContext *c = lua_twin_connect();
    uint64_t seed = lua_twin_seed("it_lua_sliding_counter", "PX_LUA_SC_SEED"),
             s = seed | 1;
    struct lua_twin_tally t = { 0 };

    for (int seq = 0; seq < SEQUENCES; seq++) {
        sc_sequence(c, &s, seq, (unsigned long long)seed, &t);
    }
    lua_twin_tally_report("it_lua_sliding_counter", &t);
    redisFree(c);
}

/* ---------------- Peeks, refusals, refunds ---------------- */

/* The script's entry for key k (asserts no error). */
static struct lua_twin_out sc_at(redisContext *c, const char *mode,
                                 const char *const p[4], int64_t now,
                                 int64_t cost, const char *undo)
{
    return lua_twin_ok(c, mode, "k", ALGO, p, now, cost, undo);
}

Test(it_lua_sliding_counter, peek_and_refusal_write_nothing, .init = it_init,
     .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = lua_twin_connect();
    const char *p[4] = { "10", "1000", NULL, NULL };
    struct lua_twin_out o;

    o = sc_at(c, "peek", p, T0, 3, NULL);
    cr_assert_eq(o.remaining, 7);
    cr_assert_str_eq(o.undo, "1700000000000000");
    o = sc_at(c, "check", p, T0, 11, NULL);
    cr_assert_eq(o.limited, 1);
    px_check_int(px_cmd(c, "EXISTS k"), 0);

    /* 4 now and 6 before, a quarter into the window: 4 + ceil(4.5) = 9. */
    px_check_int(px_cmd(c, "HSET k start %lld count 4 prev 6", (long long)T0),
                 3);
    px_check_int(px_cmd(c, "PEXPIRE k 900000"), 1);
    o = sc_at(c, "peek", p, T0 + 250000, 1, NULL);
    cr_assert_eq(o.limited, 0);
    cr_assert_eq(o.remaining, 0);
    cr_assert_eq(o.reset_us, 1750000);
    /* 2 fit once 6 * left <= 4 * window: 1/3 of it left, 83333.3 us on. */
    o = sc_at(c, "check", p, T0 + 250000, 2, NULL);
    cr_assert_eq(o.limited, 1);
    cr_assert_eq(o.retry_us, 83333);
    cr_assert_str_eq(o.undo, "");
    px_check_str(px_cmd(c, "HGET k count"), "4");
    px_check_str(px_cmd(c, "HGET k prev"), "6");
    px_check_int(px_cmd(c, "HLEN k"), 3);
    cr_assert_gt(lua_twin_pttl(c, "k"), 800000);
    o = sc_at(c, "check", p, T0 + 333334, 2, NULL);
    cr_assert_eq(o.limited, 0);
    redisFree(c);
}

Test(it_lua_sliding_counter, refund_takes_the_cost_back_from_its_window,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = lua_twin_connect();
    const char *p[4] = { "10", "1000", NULL, NULL };
    struct lua_twin_out r, x;

    /* Nothing else counted: refunded, the key goes. */
    r = sc_at(c, "check", p, T0, 4, NULL);
    cr_assert_str_eq(r.undo, "1700000000000000");
    sc_at(c, "refund", p, T0 + 5, 4, r.undo);
    px_check_int(px_cmd(c, "EXISTS k"), 0);
    /* A rolled-over window: the previous count stays and still weighs. */
    px_check_int(
        px_cmd(c, "HSET k start %lld count 5 prev 0", (long long)(T0 - SEC)),
        3);
    r = sc_at(c, "check", p, T0 + 500000, 2, NULL);
    cr_assert_eq(r.remaining, 5, "10 - 2 - ceil(2.5)");
    sc_at(c, "refund", p, T0 + 500000, 2, r.undo);
    px_check_str(px_cmd(c, "HGET k start"), "1700000000000000");
    px_check_str(px_cmd(c, "HGET k count"), "0");
    px_check_str(px_cmd(c, "HGET k prev"), "5");
    x = sc_at(c, "peek", p, T0 + 500000, 2, NULL);
    cr_assert_eq(x.remaining, 5);
    /* Never below 0. */
    sc_at(c, "check", p, T0 + 500000, 1, NULL);
    sc_at(c, "refund", p, T0 + 500000, 3, r.undo);
    px_check_str(px_cmd(c, "HGET k count"), "0");
    /* The next window: an old token does nothing; nor do a token that is
     * no start, or a cost of 0. */
    x = sc_at(c, "check", p, T0 + SEC, 1, NULL);
    cr_assert_str_eq(x.undo, "1700000001000000");
    sc_at(c, "refund", p, T0 + SEC, 1, r.undo);
    sc_at(c, "refund", p, T0 + SEC, 1, "");
    sc_at(c, "refund", p, T0 + SEC, 1, "-1");
    sc_at(c, "refund", p, T0 + SEC, 0, x.undo);
    px_check_str(px_cmd(c, "HGET k count"), "1");
    /* An expired key stays expired. */
    px_check_int(px_cmd(c, "DEL k"), 1);
    sc_at(c, "refund", p, T0 + SEC, 1, x.undo);
    px_check_int(px_cmd(c, "EXISTS k"), 0);
    redisFree(c);
}

/* ---------------- Durations beyond 2^53 us ---------------- */

Test(it_lua_sliding_counter, huge_durations_come_back_exact_or_saturated,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = lua_twin_connect();
    struct sc_model m;
    char undo[LUA_TWIN_UNDO_BYTES];
    struct sliding_counter_result r;

    /* A window of 10^11 ms stored near 2^53 us, the clock at 0: the next
     * window ends 9.2e15 us away, past 2^53 but within the int64 ns. */
    memset(&m, 0, sizeof(m));
    sc_set_params(&m, MAX, INT64_C(100000000000));
    m.have = 1;
    m.st.start_ns = (NOW_MAX - 7) * US;
    m.st.count = MAX - 2;
    m.st.prev = MAX / 2;
    sc_plant(c, "a", &m.st);
    r = sc_call(c, "a", &m, "check", 0, 1, undo, "refused in phase 2");
    cr_assert_eq(r.d.limited, 1);
    cr_assert_eq(r.d.reset_after_ns, (NOW_MAX - 7 + 200000000000000) * US);
    m.st.prev = 0;
    sc_plant(c, "a", &m.st);
    r = sc_call(c, "a", &m, "check", 0, 2, undo, "exact");
    cr_assert_eq(r.d.limited, 0);
    /* The longest window: saturated at INT64_MAX ns. */
    sc_set_params(&m, MAX, WIN);
    r = sc_call(c, "a", &m, "check", 0, 1, undo, "saturated");
    cr_assert_eq(r.d.retry_after_ns, INT64_MAX);
    cr_assert_eq(r.d.reset_after_ns, INT64_MAX);
    m.st.count = 0;
    m.st.prev = MAX;
    sc_plant(c, "a", &m.st);
    r = sc_call(c, "a", &m, "check", 0, 1, undo, "prev weighs fully");
    cr_assert_eq(r.d.limited, 1);
    m.st.count = 0;
    m.st.prev = 0;
    sc_plant(c, "a", &m.st);
    r = sc_call(c, "a", &m, "check", 0, MAX, undo, "saturated expiry");
    cr_assert_eq(r.expiry_ms, INT64_C(9223372036855));
    redisFree(c);
}

/* ---------------- Errors ---------------- */

#define E_WRONGTYPE                                                            \
    "WRONGTYPE Operation against a key holding the wrong kind of value"

static void expect_error(redisContext *c, const char *key,
                         const char *const p[4], int64_t cost, const char *want)
{
    lua_twin_expect_error(c, key, ALGO, p, T0, cost, want);
}

Test(it_lua_sliding_counter, bad_parameters_give_the_c_model_errors,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    static const char *const bad_max[] = { "0",   "-1", "9007199254740992",
                                           "2.0", "",   "ten" };
    static const char *const bad_win[] = { "0",   "-1000", "315360000001",
                                           "1e3", "",      "1s" };
    redisContext *c = lua_twin_connect();
    struct sliding_counter_params sp;
    const char *err = NULL;
    char want_max[128], want_win[128];

    cr_assert_eq(sliding_counter_params_init(&sp, 0, 1000, &err),
                 SLIDING_COUNTER_EARGS);
    snprintf(want_max, sizeof(want_max), "ERR %s", err);
    cr_assert_eq(sliding_counter_params_init(&sp, 1, 0, &err),
                 SLIDING_COUNTER_EARGS);
    snprintf(want_win, sizeof(want_win), "ERR %s", err);
    for (size_t i = 0; i < sizeof(bad_max) / sizeof(*bad_max); i++) {
        const char *p[4] = { bad_max[i], "1000", NULL, NULL };
        expect_error(c, "k", p, 1, want_max);
        p[1] = "0"; /* both bad: max is checked first */
        expect_error(c, "k", p, 1, want_max);
    }
    for (size_t i = 0; i < sizeof(bad_win) / sizeof(*bad_win); i++) {
        const char *p[4] = { "5", bad_win[i], NULL, NULL };
        expect_error(c, "k", p, 1, want_win);
    }
    const char *p[4] = { "9007199254740991", "315360000000", NULL, NULL };
    sc_at(c, "peek", p, T0, 1, NULL);
    px_check_int(px_cmd(c, "DBSIZE"), 0);
    redisFree(c);
}

Test(it_lua_sliding_counter, wrong_type_and_malformed_state_give_errors,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    static const char *const bad[][3] = {
        { "-1", "0", "0" },
        { "1700000000000000", "-1", "0" },
        { "0", "0", "-1" },
        { "x", "0", "0" },
        { "0", "1.0", "0" },
        { "0", "0", "" },
        { "9007199254740992", "0", "0" },
    };
    redisContext *c = lua_twin_connect();
    const char *p[4] = { "5", "1000", NULL, NULL };
    struct sliding_counter_state st = { .prev = -1 };
    struct sliding_counter_params sp;
    struct sliding_counter_result r;
    const char *err = NULL;
    char want[128];

    px_check_status(px_cmd(c, "SET s 1"), "OK");
    expect_error(c, "s", p, 1, E_WRONGTYPE);
    px_check_int(px_cmd(c, "RPUSH z a"), 1);
    expect_error(c, "z", p, 0, E_WRONGTYPE);
    px_check_str(px_cmd(c, "GET s"), "1");

    cr_assert_eq(sliding_counter_params_init(&sp, 5, 1000, &err),
                 SLIDING_COUNTER_OK);
    cr_assert_eq(sliding_counter_decide(&sp, &st, T0 * US, 1, &r, &err),
                 SLIDING_COUNTER_ESTATE);
    snprintf(want, sizeof(want), "ERR %s", err);
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        freeReplyObject(px_cmd(c, "DEL h"));
        px_check_int(px_cmd(c, "HSET h start %s count %s prev %s", bad[i][0],
                            bad[i][1], bad[i][2]),
                     3);
        expect_error(c, "h", p, 1, want);
        px_check_str(px_cmd(c, "HGET h start"), bad[i][0]);
    }
    px_check_int(px_cmd(c, "HDEL h prev"), 1);
    px_check_int(px_cmd(c, "HSET h start 0"), 0);
    expect_error(c, "h", p, 1, want);
    redisFree(c);
}
