/* algorithms/lua/fixed_window.lua (through limiter.lua) against the C model
 * algorithms/fixed_window.c, on a real redis-server.
 *
 * The test keeps the model's state itself: every script call is compared
 * with fixed_window_decide() fed with that state at the same explicit time
 * (now_us * 1000 ns), and after each call the key must hold exactly the
 * model's next state in microseconds (HGETALL) with the model's expiry
 * (PTTL). Once checked, the key is made persistent, so real time never
 * takes it away while the sequence runs on its own clock; the test drops
 * it itself when the model's clock passes the expiry, after asserting that
 * the model then reads the state like a missing key.
 *
 * Randomized sequences print their seed; set PX_LUA_FW_SEED to replay. */
#include "tests/integration/fixture.h"
#include "tests/integration/lua_twin.h"
#include "tests/support/px_test.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/fixed_window.h"
#include "algorithms/rl.h"

PX_TEST_SUITE(it_lua_fixed_window);

#define US  INT64_C(1000) /* ns per us */
#define SEC INT64_C(1000000)
#define MAX FIXED_WINDOW_MAX_COUNT
#define WIN FIXED_WINDOW_MAX_WINDOW_MS
/* A realistic clock, 2023-11-14T22:13:20Z, in microseconds. */
#define T0 INT64_C(1700000000000000)
/* The last microsecond the script accepts (2^53 - 1). */
#define NOW_MAX INT64_C(9007199254740991)

#define ALGO        "fixed_window"
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
struct fw_model {
    struct fixed_window_params p; /* the parameters of the next calls */
    char a_max[ARG_BYTES];        /* ...as the script's arguments */
    char a_win[ARG_BYTES];
    int have;                     /* the key exists */
    struct fixed_window_state st; /* its state, in ns */
    int exp_valid;                /* exp_at_us applies to st and p */
    int64_t exp_at_us;            /* model time at which the key expires */
};

static void fw_set_params(struct fw_model *m, int64_t max, int64_t win_ms)
{
    const char *err = NULL;

    cr_assert_eq(fixed_window_params_init(&m->p, max, win_ms, &err),
                 FIXED_WINDOW_OK, "params %" PRId64 " %" PRId64 ": %s", max,
                 win_ms, err);
    snprintf(m->a_max, sizeof(m->a_max), "%" PRId64, max);
    snprintf(m->a_win, sizeof(m->a_win), "%" PRId64, win_ms);
    m->exp_valid = 0;
}

/* The model's decision for `st` (NULL: no key) at now_us. */
static struct fixed_window_result fw_decide(const struct fixed_window_params *p,
                                            const struct fixed_window_state *st,
                                            int64_t now_us, int64_t cost)
{
    struct fixed_window_result r;
    const char *err = NULL;

    cr_assert_eq(fixed_window_decide(p, st, now_us * US, cost, &r, &err),
                 FIXED_WINDOW_OK, "model: %s", err);
    return r;
}

/* ---------------- The key, as Redis holds it ---------------- */

/* Reads the key's HASH, PEXPIRETIME (into *pexat) and Redis's clock after
 * it (into *t_ms), then makes the key persistent (lua_twin_read_hash). Returns
 * 0 when the key is missing; else asserts it holds exactly start and count as
 * decimal integers and fills st (start converted to ns). */
static int fw_read(redisContext *c, const char *key,
                   struct fixed_window_state *st, long long *pexat,
                   long long *t_ms)
{
    static const char *const names[2] = { "start", "count" };
    int64_t v[2];

    if (!lua_twin_read_hash(c, key, names, 2, v, pexat, t_ms)) {
        return 0;
    }
    st->start_ns = v[0] * US;
    st->count = v[1];
    return 1;
}

/* Plants a state (start in ns, a multiple of 1000) without expiry. */
static void fw_plant(redisContext *c, const char *key,
                     const struct fixed_window_state *st)
{
    freeReplyObject(px_cmd(c, "DEL %s", key));
    freeReplyObject(px_cmd(c, "HSET %s start %lld count %lld", key,
                           (long long)(st->start_ns / US),
                           (long long)st->count));
}

/* Asserts the key holds what the model has (nothing was written). */
static void fw_expect_unchanged(redisContext *c, const char *key,
                                const struct fw_model *m, const char *ctx)
{
    struct fixed_window_state got;
    long long pexat, t_ms;
    int have = fw_read(c, key, &got, &pexat, &t_ms);

    cr_assert_eq(have, m->have, "%s: key presence %d, model %d", ctx, have,
                 m->have);
    if (have) {
        cr_assert(got.start_ns == m->st.start_ns && got.count == m->st.count,
                  "%s: state changed without a write", ctx);
        cr_assert_eq(pexat, -1, "%s: an expiry was set", ctx);
    }
}

/* ---------------- One checked call ---------------- */

/* Calls the script in `mode` ("check" or "peek") and checks it against the
 * model as the file header says; applies a check's write to m. Returns the
 * model's result; the undo token goes to undo (LUA_TWIN_UNDO_BYTES). */
static struct fixed_window_result fw_call(redisContext *c, const char *key,
                                          struct fw_model *m, const char *mode,
                                          int64_t now_us, int64_t cost,
                                          char *undo, const char *ctx)
{
    const char *p[4] = { m->a_max, m->a_win, NULL, NULL };
    struct fixed_window_result want =
        fw_decide(&m->p, m->have ? &m->st : NULL, now_us, cost);
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
    if (want.write == FIXED_WINDOW_WRITE_SET) {
        snprintf(buf, sizeof(buf), "%" PRId64, want.next.start_ns / US);
    }
    cr_assert_str_eq(o.undo, buf, "%s: undo", ctx);
    if (strcmp(mode, "check") != 0 || want.write != FIXED_WINDOW_WRITE_SET) {
        fw_expect_unchanged(c, key, m, ctx);
        return want;
    }

    struct fixed_window_state got;
    long long pexat, t1;
    int have = fw_read(c, key, &got, &pexat, &t1);

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
                  got.count == want.next.count,
              "%s: stored %lld %lld, model %lld %lld", ctx,
              (long long)got.start_ns, (long long)got.count,
              (long long)want.next.start_ns, (long long)want.next.count);
    lua_twin_expect_expiry(pexat, t0, t1, want.expiry_ms, ctx);
    m->have = 1;
    m->st = want.next;
    m->exp_valid = 1;
    m->exp_at_us = now_us + want.expiry_ms * 1000;
    return want;
}

static void fw_refund(redisContext *c, const char *key,
                      const struct fw_model *m, int64_t now_us, int64_t cost,
                      const char *undo)
{
    const char *p[4] = { PARAMS(m), NULL, NULL };

    lua_twin_ok(c, "refund", key, ALGO, p, now_us, cost, undo);
}

/* ---------------- Randomized sequences ---------------- */

/* Parameters from tiny to the conf maxima. */
static void rnd_params(uint64_t *s, struct fw_model *m)
{
    int64_t max, win;

    lua_twin_rnd_limit(s, MAX, WIN, &max, &win);
    fw_set_params(m, max, win);
}

/* The next time: same, a little later, exactly a window edge (or one us
 * off it), a long idle, or a jump back. */
static int64_t rnd_time(uint64_t *s, int64_t now, const struct fw_model *m)
{
    int64_t w = m->p.window_ns / US, dt = 0;

    switch (lua_twin_rnd_in(s, 0, 9)) {
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
 * is counted in now's own window: a later or unaligned one holds its
 * place), with the check's expiry; and the peeks agree. */
static void fw_check_refund(redisContext *c, const char *key,
                            struct fw_model *m, int64_t now, uint64_t *s,
                            struct lua_twin_tally *t, const char *ctx)
{
    int64_t cost = lua_twin_rnd_cost(s, COST_MAX(m)),
            pc = lua_twin_rnd_cost(s, COST_MAX(m));
    char undo[LUA_TWIN_UNDO_BYTES];
    struct fixed_window_state after;
    struct fixed_window_result a, r, b, want;
    long long pexat, t_ms;
    int drop;

    want = fw_decide(&m->p, m->have ? &m->st : NULL, now, 0);
    a = fw_call(c, key, m, "peek", now, pc, undo, ctx);
    r = fw_call(c, key, m, "check", now, cost, undo, ctx);
    t->calls += 2;
    if (r.write != FIXED_WINDOW_WRITE_SET || !m->have) {
        return;
    }
    drop = want.next.count == 0 &&
           want.next.start_ns == now * US - now * US % m->p.window_ns;
    fw_refund(c, key, m, now, cost, undo);
    t->refunds++;
    m->have = fw_read(c, key, &after, &pexat, &t_ms);
    cr_assert_eq(m->have, !drop, "%s: key after the refund", ctx);
    if (m->have) {
        cr_assert(after.start_ns == want.next.start_ns &&
                      after.count == want.next.count,
                  "%s: refunded to %lld %lld, want %lld %lld", ctx,
                  (long long)after.start_ns, (long long)after.count,
                  (long long)want.next.start_ns, (long long)want.next.count);
        cr_assert_eq(pexat, -1, "%s: the refund set an expiry", ctx);
        m->st = after;
    }
    m->exp_valid = 0;
    b = fw_call(c, key, m, "peek", now, pc, undo, ctx);
    cr_assert(lua_twin_same_decision(&a.d, &b.d),
              "%s: peeks differ around a refund", ctx);
}

/* Past the expiry on the model's clock the state must read like no key;
 * then the test drops the key as Redis would (or keeps it, still alike). */
static void fw_expire(redisContext *c, const char *key, struct fw_model *m,
                      int64_t now, uint64_t *s, struct lua_twin_tally *t,
                      const char *ctx)
{
    const int64_t costs[3] = { 0, 1, m->p.max };

    if (!m->have || !m->exp_valid || now < m->exp_at_us) {
        return;
    }
    for (int i = 0; i < 3; i++) {
        struct fixed_window_result x = fw_decide(&m->p, &m->st, now, costs[i]);
        struct fixed_window_result y = fw_decide(&m->p, NULL, now, costs[i]);
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
static void fw_plant_random(redisContext *c, const char *key,
                            struct fw_model *m, int64_t now, uint64_t *s)
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
    m->have = 1;
    m->exp_valid = 0;
    fw_plant(c, key, &m->st);
}

static void fw_sequence(redisContext *c, uint64_t *s, int seq,
                        unsigned long long seed, struct lua_twin_tally *t)
{
    struct fw_model m;
    char key[32], ctx[96], undo[LUA_TWIN_UNDO_BYTES];
    struct fixed_window_result last;
    int64_t now;

    memset(&m, 0, sizeof(m));
    snprintf(key, sizeof(key), "fw:%d", seq);
    rnd_params(s, &m);
    now = lua_twin_rnd_start(s);
    for (int op = 0; op < OPS_PER_SEQ; op++) {
        int64_t kind = lua_twin_rnd_in(s, 0, 99);

        snprintf(ctx, sizeof(ctx), "seed %llu seq %d op %d", seed, seq, op);
        now = rnd_time(s, now, &m);
        fw_expire(c, key, &m, now, s, t, ctx);
        if (kind < 55) {
            last = fw_call(c, key, &m, "check", now,
                           lua_twin_rnd_cost(s, COST_MAX(&m)), undo, ctx);
            t->calls++;
            t->limited += last.d.limited;
            t->writes += last.write == FIXED_WINDOW_WRITE_SET;
            t->gone += last.write == FIXED_WINDOW_WRITE_SET && !m.have;
        } else if (kind < 70) {
            fw_call(c, key, &m, "peek", now, lua_twin_rnd_cost(s, COST_MAX(&m)),
                    undo, ctx);
            t->calls++;
        } else if (kind < 85) {
            fw_check_refund(c, key, &m, now, s, t, ctx);
        } else if (kind < 92) {
            rnd_params(s, &m); /* same key, other limits */
        } else {
            fw_plant_random(c, key, &m, now, s);
        }
    }
}

Test(it_lua_fixed_window, randomized_sequences_match_the_c_model,
     .init = it_init, .fini = px_env_fini, .timeout = 120)
{
    redisContext *c = lua_twin_connect();
    uint64_t seed = lua_twin_seed("it_lua_fixed_window", "PX_LUA_FW_SEED"),
             s = seed | 1;
    struct lua_twin_tally t = { 0 };

    for (int seq = 0; seq < SEQUENCES; seq++) {
        fw_sequence(c, &s, seq, (unsigned long long)seed, &t);
    }
    lua_twin_tally_report("it_lua_fixed_window", &t);
    redisFree(c);
}

/* ---------------- Peeks, refusals, refunds ---------------- */

/* The script's entry for key k (asserts no error). */
static struct lua_twin_out fw_at(redisContext *c, const char *mode,
                                 const char *const p[4], int64_t now,
                                 int64_t cost, const char *undo)
{
    return lua_twin_ok(c, mode, "k", ALGO, p, now, cost, undo);
}

Test(it_lua_fixed_window, peek_and_refusal_write_nothing, .init = it_init,
     .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = lua_twin_connect();
    const char *p[4] = { "5", "1000", NULL, NULL };
    struct lua_twin_out o;

    o = fw_at(c, "peek", p, T0, 3, NULL);
    cr_assert_eq(o.remaining, 2);
    cr_assert_str_eq(o.undo, "1700000000000000");
    o = fw_at(c, "check", p, T0, 6, NULL);
    cr_assert_eq(o.limited, 1);
    px_check_int(px_cmd(c, "EXISTS k"), 0);

    px_check_int(px_cmd(c, "HSET k start %lld count 4", (long long)T0), 2);
    px_check_int(px_cmd(c, "PEXPIRE k 900000"), 1);
    o = fw_at(c, "peek", p, T0 + 999999, 1, NULL);
    cr_assert_eq(o.limited, 0);
    cr_assert_eq(o.remaining, 0);
    cr_assert_eq(o.reset_us, 1);
    o = fw_at(c, "check", p, T0 + 999999, 2, NULL);
    cr_assert_eq(o.limited, 1);
    cr_assert_eq(o.retry_us, 1);
    cr_assert_str_eq(o.undo, "");
    px_check_str(px_cmd(c, "HGET k count"), "4");
    px_check_int(px_cmd(c, "HLEN k"), 2);
    cr_assert_gt(lua_twin_pttl(c, "k"), 800000);
    /* The next window starts empty. */
    o = fw_at(c, "peek", p, T0 + 1000000, 5, NULL);
    cr_assert_eq(o.limited, 0);
    cr_assert_eq(o.reset_us, 1000000);
    redisFree(c);
}

Test(it_lua_fixed_window, refund_takes_the_cost_back_from_its_window,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = lua_twin_connect();
    const char *p[4] = { "10", "60000", NULL, NULL };
    struct lua_twin_out r, x;

    /* The first count of a window: refunded, the key goes. */
    r = fw_at(c, "check", p, T0, 4, NULL);
    cr_assert_str_eq(r.undo, "1699999980000000");
    fw_at(c, "refund", p, T0 + 5, 4, r.undo);
    px_check_int(px_cmd(c, "EXISTS k"), 0);
    /* On top of others: only our cost goes, the expiry stays. */
    fw_at(c, "check", p, T0, 3, NULL);
    r = fw_at(c, "check", p, T0 + 1, 4, NULL);
    cr_assert_eq(r.remaining, 3);
    fw_at(c, "refund", p, T0 + 1, 4, r.undo);
    px_check_str(px_cmd(c, "HGET k count"), "3");
    cr_assert_gt(lua_twin_pttl(c, "k"), 0);
    /* Never below 0 (a refund of more than is counted). */
    fw_at(c, "refund", p, T0 + 1, 9, r.undo);
    px_check_int(px_cmd(c, "EXISTS k"), 0);
    /* The next window: an old token does nothing. */
    fw_at(c, "check", p, T0, 2, NULL);
    x = fw_at(c, "check", p, T0 + 40 * SEC, 2, NULL);
    cr_assert_str_eq(x.undo, "1700000040000000");
    fw_at(c, "refund", p, T0 + 40 * SEC, 2, r.undo);
    px_check_str(px_cmd(c, "HGET k count"), "2");
    /* Nor do a token that is no start, a cost of 0, or an expired key. */
    fw_at(c, "refund", p, T0 + 40 * SEC, 2, "");
    fw_at(c, "refund", p, T0 + 40 * SEC, 2, "1700000040000000x");
    fw_at(c, "refund", p, T0 + 40 * SEC, 0, x.undo);
    px_check_str(px_cmd(c, "HGET k count"), "2");
    px_check_int(px_cmd(c, "DEL k"), 1);
    fw_at(c, "refund", p, T0 + 40 * SEC, 2, x.undo);
    px_check_int(px_cmd(c, "EXISTS k"), 0);
    /* A later window (the clock was ahead) keeps its key at count 0: it
     * still holds the window in place. */
    px_check_int(px_cmd(c, "HSET k start 1700000100000000 count 0"), 2);
    x = fw_at(c, "check", p, T0, 2, NULL);
    cr_assert_str_eq(x.undo, "1700000100000000");
    cr_assert_eq(x.reset_us, 160 * SEC);
    fw_at(c, "refund", p, T0, 2, x.undo);
    px_check_str(px_cmd(c, "HGET k count"), "0");
    redisFree(c);
}

/* ---------------- Durations beyond 2^53 us ---------------- */

Test(it_lua_fixed_window, huge_durations_come_back_exact_or_saturated,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = lua_twin_connect();
    struct fw_model m;
    char undo[LUA_TWIN_UNDO_BYTES];
    struct fixed_window_result r;

    /* A window of 10^11 ms stored near 2^53 us, the clock at 0: the end
     * is 9.1e15 us away, past 2^53 but within the int64 ns. */
    memset(&m, 0, sizeof(m));
    fw_set_params(&m, MAX, INT64_C(100000000000));
    m.have = 1;
    m.st.start_ns = (NOW_MAX - 7) * US;
    m.st.count = MAX - 1;
    fw_plant(c, "a", &m.st);
    r = fw_call(c, "a", &m, "check", 0, 1, undo, "exact");
    cr_assert_eq(r.d.reset_after_ns, (NOW_MAX - 7 + 100000000000000) * US);
    r = fw_call(c, "a", &m, "check", 0, 1, undo, "refused");
    cr_assert_eq(r.d.limited, 1);
    /* The longest window: saturated at INT64_MAX ns. */
    fw_set_params(&m, MAX, WIN);
    r = fw_call(c, "a", &m, "check", 0, 1, undo, "saturated");
    cr_assert_eq(r.d.retry_after_ns, INT64_MAX);
    cr_assert_eq(r.d.reset_after_ns, INT64_MAX);
    m.st.count = 0;
    fw_plant(c, "a", &m.st);
    r = fw_call(c, "a", &m, "check", 0, MAX, undo, "saturated expiry");
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

Test(it_lua_fixed_window, bad_parameters_give_the_c_model_errors,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    static const char *const bad_max[] = { "0",   "-1", "9007199254740992",
                                           "2.0", "",   "ten" };
    static const char *const bad_win[] = { "0",   "-1000", "315360000001",
                                           "1e3", "",      "1s" };
    redisContext *c = lua_twin_connect();
    struct fixed_window_params fp;
    const char *err = NULL;
    char want_max[128], want_win[128];

    cr_assert_eq(fixed_window_params_init(&fp, 0, 1000, &err),
                 FIXED_WINDOW_EARGS);
    snprintf(want_max, sizeof(want_max), "ERR %s", err);
    cr_assert_eq(fixed_window_params_init(&fp, 1, 0, &err), FIXED_WINDOW_EARGS);
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
    fw_at(c, "peek", p, T0, 1, NULL);
    px_check_int(px_cmd(c, "DBSIZE"), 0);
    redisFree(c);
}

Test(it_lua_fixed_window, wrong_type_and_malformed_state_give_errors,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    static const char *const bad[][2] = {
        { "-1", "0" },
        { "1700000000000000", "-1" },
        { "x", "0" },
        { "1700000000000000", "1.0" },
        { "", "0" },
        { "9007199254740992", "0" },
        { "0", "9007199254740992" },
    };
    redisContext *c = lua_twin_connect();
    const char *p[4] = { "5", "1000", NULL, NULL };
    struct fixed_window_state st = { .start_ns = -1 };
    struct fixed_window_params fp;
    struct fixed_window_result r;
    const char *err = NULL;
    char want[128];

    px_check_status(px_cmd(c, "SET s 1"), "OK");
    expect_error(c, "s", p, 1, E_WRONGTYPE);
    px_check_int(px_cmd(c, "SADD z a"), 1);
    expect_error(c, "z", p, 0, E_WRONGTYPE);
    px_check_str(px_cmd(c, "GET s"), "1");

    cr_assert_eq(fixed_window_params_init(&fp, 5, 1000, &err), FIXED_WINDOW_OK);
    cr_assert_eq(fixed_window_decide(&fp, &st, T0 * US, 1, &r, &err),
                 FIXED_WINDOW_ESTATE);
    snprintf(want, sizeof(want), "ERR %s", err);
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        freeReplyObject(px_cmd(c, "DEL h"));
        px_check_int(
            px_cmd(c, "HSET h start %s count %s", bad[i][0], bad[i][1]), 2);
        expect_error(c, "h", p, 1, want);
        px_check_str(px_cmd(c, "HGET h start"), bad[i][0]);
    }
    px_check_int(px_cmd(c, "HDEL h count"), 1);
    px_check_int(px_cmd(c, "HSET h start 0"), 0);
    expect_error(c, "h", p, 1, want);
    redisFree(c);
}
