/* algorithms/lua/token_bucket.lua (through limiter.lua) against the C model
 * algorithms/token_bucket.c, on a real redis-server.
 *
 * The test keeps the model's state itself: every script call is compared
 * with token_bucket_decide() fed with that state at the same explicit time
 * (now_us * 1000 ns), and after each call the key must hold exactly the
 * model's next state in microseconds (HGETALL) with the model's expiry
 * (PTTL). Once checked, the key is made persistent, so real time never
 * takes it away while the sequence runs on its own clock; the test drops
 * it itself when the model's clock passes the expiry, after asserting that
 * the model then reads the state like a missing key.
 *
 * Randomized sequences print their seed; set PX_LUA_TB_SEED to replay. */
#include "tests/integration/fixture.h"
#include "tests/integration/lua_twin.h"
#include "tests/support/px_test.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "algorithms/rl.h"
#include "algorithms/token_bucket.h"

PX_TEST_SUITE(it_lua_token_bucket);

#define US  INT64_C(1000) /* ns per us */
#define SEC INT64_C(1000000)
#define M   INT64_C(1000000) /* one token per second, in millionths */
#define ONE TOKEN_BUCKET_FRAC_ONE
#define CAP TOKEN_BUCKET_MAX_CAPACITY
/* A realistic clock, 2023-11-14T22:13:20Z, in microseconds. */
#define T0 INT64_C(1700000000000000)
/* The last microsecond the script accepts (2^53 - 1). */
#define NOW_MAX INT64_C(9007199254740991)

#define ALGO        "token_bucket"
#define PARAMS(m)   (m)->a_cap, (m)->a_rate
#define COST_MAX(m) (m)->p.capacity

#define SEQUENCES   12 /* randomized sequences per run */
#define OPS_PER_SEQ 24 /* operations in each */
#define ARG_BYTES   24 /* an int64 in decimal, sign and NUL */

static void it_init(void)
{
    px_redis_start(&px_env()->redis, NULL);
}

/* ---------------- The model side ---------------- */

/* One key as the test believes it is stored. */
struct tb_model {
    struct token_bucket_params p; /* the parameters of the next calls */
    char a_cap[ARG_BYTES];        /* ...as the script's arguments */
    char a_rate[ARG_BYTES];
    int have;                     /* the key exists */
    struct token_bucket_state st; /* its state, in ns */
    int exp_valid;                /* exp_at_us applies to st and p */
    int64_t exp_at_us;            /* model time at which the key expires */
};

static void tb_set_params(struct tb_model *m, int64_t cap, int64_t rate)
{
    const char *err = NULL;

    cr_assert_eq(token_bucket_params_init(&m->p, cap, rate, &err),
                 TOKEN_BUCKET_OK, "params %" PRId64 " %" PRId64 ": %s", cap,
                 rate, err);
    snprintf(m->a_cap, sizeof(m->a_cap), "%" PRId64, cap);
    if (rate == TOKEN_BUCKET_RATE_INF) {
        snprintf(m->a_rate, sizeof(m->a_rate), "inf");
    } else {
        snprintf(m->a_rate, sizeof(m->a_rate), "%" PRId64, rate);
    }
    m->exp_valid = 0;
}

/* The model's decision for `st` (NULL: no key) at now_us. */
static struct token_bucket_result tb_decide(const struct token_bucket_params *p,
                                            const struct token_bucket_state *st,
                                            int64_t now_us, int64_t cost)
{
    struct token_bucket_result r;
    const char *err = NULL;

    cr_assert_eq(token_bucket_decide(p, st, now_us * US, cost, &r, &err),
                 TOKEN_BUCKET_OK, "model: %s", err);
    return r;
}

/* ---------------- The key, as Redis holds it ---------------- */

/* Reads the key's HASH, PEXPIRETIME (into *pexat) and Redis's clock after
 * it (into *t_ms), then makes the key persistent (lua_twin_read_hash). Returns
 * 0 when the key is missing; else asserts it holds exactly the three fields as
 * decimal integers and fills st (ts converted to ns). */
static int tb_read(redisContext *c, const char *key,
                   struct token_bucket_state *st, long long *pexat,
                   long long *t_ms)
{
    static const char *const names[3] = { "tokens", "frac", "ts" };
    int64_t v[3];

    if (!lua_twin_read_hash(c, key, names, 3, v, pexat, t_ms)) {
        return 0;
    }
    st->tokens = v[0];
    st->frac = v[1];
    st->ts_ns = v[2] * US;
    return 1;
}

/* Plants a state (ts in ns, a multiple of 1000) without expiry. */
static void tb_plant(redisContext *c, const char *key,
                     const struct token_bucket_state *st)
{
    redisReply *r = px_cmd(c, "DEL %s", key);

    freeReplyObject(r);
    r = px_cmd(c, "HSET %s tokens %lld frac %lld ts %lld", key,
               (long long)st->tokens, (long long)st->frac,
               (long long)(st->ts_ns / US));
    freeReplyObject(r);
}

/* Asserts the key holds what the model has (nothing was written). */
static void tb_expect_unchanged(redisContext *c, const char *key,
                                struct tb_model *m, const char *ctx)
{
    struct token_bucket_state got;
    long long pexat, t_ms;
    int have = tb_read(c, key, &got, &pexat, &t_ms);

    cr_assert_eq(have, m->have, "%s: key presence %d, model %d", ctx, have,
                 m->have);
    if (have) {
        cr_assert(got.tokens == m->st.tokens && got.frac == m->st.frac &&
                      got.ts_ns == m->st.ts_ns,
                  "%s: state changed without a write", ctx);
        cr_assert_eq(pexat, -1, "%s: an expiry was set", ctx);
    }
}

/* ---------------- One checked call ---------------- */

/* The refill instant (us) the undo token of `r` names: the stored ts plus
 * the wait until full, rounded up; -1 when the wait saturated. */
static int64_t tb_full_at_us(const struct token_bucket_result *r,
                             int64_t now_us)
{
    int64_t gap = r->next.ts_ns - now_us * US;

    if (r->d.reset_after_ns == INT64_MAX) {
        return -1;
    }
    gap = gap > 0 ? gap : 0;
    return r->next.ts_ns / US + (r->d.reset_after_ns - gap + US - 1) / US;
}

/* Calls the script in `mode` ("check" or "peek") and checks it against the
 * model as the file header says; applies a check's write to m. Returns the
 * model's result; the undo token goes to undo (LUA_TWIN_UNDO_BYTES). */
static struct token_bucket_result tb_call(redisContext *c, const char *key,
                                          struct tb_model *m, const char *mode,
                                          int64_t now_us, int64_t cost,
                                          char *undo, const char *ctx)
{
    const char *p[4] = { m->a_cap, m->a_rate, NULL, NULL };
    struct token_bucket_result want =
        tb_decide(&m->p, m->have ? &m->st : NULL, now_us, cost);
    struct lua_twin_out o;
    char err[256];
    long long t0 = lua_twin_redis_ms(c);

    cr_assert_eq(lua_twin_call(c, mode, key, ALGO, p, now_us, cost, NULL, &o,
                               err, sizeof(err)),
                 0, "%s: %s", ctx, err);
    cr_assert_eq(o.now_us, now_us, "%s: the script's clock", ctx);
    lua_twin_expect(&o, &want.d, ctx);
    snprintf(undo, LUA_TWIN_UNDO_BYTES, "%s", o.undo);
    if (want.write != TOKEN_BUCKET_WRITE_SET) {
        cr_assert_str_eq(o.undo, "", "%s: undo without a write", ctx);
    } else {
        int64_t full = tb_full_at_us(&want, now_us);
        char buf[ARG_BYTES];

        cr_assert(strspn(o.undo, "0123456789") == strlen(o.undo) &&
                      o.undo[0] != '\0',
                  "%s: undo '%s'", ctx, o.undo);
        snprintf(buf, sizeof(buf), "%" PRId64, full);
        cr_assert(full < 0 || strcmp(buf, o.undo) == 0,
                  "%s: undo '%s', expected %s", ctx, o.undo, buf);
    }
    if (strcmp(mode, "check") != 0 || want.write != TOKEN_BUCKET_WRITE_SET) {
        tb_expect_unchanged(c, key, m, ctx);
        return want;
    }

    struct token_bucket_state got;
    long long pexat, t1;
    int have = tb_read(c, key, &got, &pexat, &t1);

    cr_assert_eq(want.next.ts_ns % US, 0, "%s: model ts off the us grid", ctx);
    if (!have) {
        /* Real time took it: only once that much time has passed (equal
         * at a millisecond's edge: Redis counts the expiry from the
         * millisecond it saw, which may be the one before t0's TIME). */
        cr_assert_geq(t1 - t0, want.expiry_ms, "%s: key gone early", ctx);
        m->have = 0;
        return want;
    }
    cr_assert(got.tokens == want.next.tokens && got.frac == want.next.frac &&
                  got.ts_ns == want.next.ts_ns,
              "%s: stored %lld %lld %lld, model %lld %lld %lld", ctx,
              (long long)got.tokens, (long long)got.frac, (long long)got.ts_ns,
              (long long)want.next.tokens, (long long)want.next.frac,
              (long long)want.next.ts_ns);
    lua_twin_expect_expiry(pexat, t0, t1, want.expiry_ms, ctx);
    m->have = 1;
    m->st = want.next;
    m->exp_valid = 1;
    m->exp_at_us = now_us + want.expiry_ms * 1000;
    return want;
}

static void tb_refund(redisContext *c, const char *key, struct tb_model *m,
                      int64_t now_us, int64_t cost, const char *undo)
{
    const char *p[4] = { PARAMS(m), NULL, NULL };

    lua_twin_ok(c, "refund", key, ALGO, p, now_us, cost, undo);
}

/* ---------------- Randomized sequences ---------------- */

/* Parameters from tiny to the conf maxima. */
static void rnd_params(uint64_t *s, struct tb_model *m)
{
    int64_t cap, rate;

    switch (lua_twin_rnd_in(s, 0, 5)) {
    case 0:
        cap = 1;
        break;
    case 1:
        cap = CAP - lua_twin_rnd_in(s, 0, 1);
        break;
    case 2:
        cap = lua_twin_rnd_in(s, 1, INT64_C(1) << lua_twin_rnd_in(s, 20, 52));
        break;
    default:
        cap = lua_twin_rnd_in(s, 1, 50);
        break;
    }
    switch (lua_twin_rnd_in(s, 0, 7)) {
    case 0:
        rate = lua_twin_rnd_in(s, 1, 10); /* a token every ~10^5 s and slower */
        break;
    case 1:
        rate = TOKEN_BUCKET_MAX_RATE_MICRO - lua_twin_rnd_in(s, 0, 1);
        break;
    case 2:
        rate = lua_twin_rnd_in(s, 1, TOKEN_BUCKET_MAX_RATE_MICRO);
        break;
    case 3:
        rate = lua_twin_rnd_in(s, 0, 19) == 0 ? TOKEN_BUCKET_RATE_INF : 7 * M;
        break;
    default:
        rate = lua_twin_rnd_in(s, 1, 100) *
               (lua_twin_rnd_in(s, 0, 1) ? M : M / 10 + 7);
        break;
    }
    tb_set_params(m, cap, rate);
}

/* The next time: same, a little later, exactly the last retry or reset,
 * a long idle, or a jump back. */
static int64_t rnd_time(uint64_t *s, int64_t now,
                        const struct token_bucket_result *last)
{
    int64_t dt = 0;
    int64_t edge;

    switch (lua_twin_rnd_in(s, 0, 9)) {
    case 0:
        break;
    case 1:
        dt = lua_twin_rnd_in(s, 1, 1000);
        break;
    case 2:
    case 3:
        edge = lua_twin_rnd_in(s, 0, 1) ? last->d.retry_after_ns
                                        : last->d.reset_after_ns;
        if (edge > 0 && edge < INT64_MAX / 2) {
            /* Just before, at, or just after the edge on the us grid. */
            dt = edge / US + lua_twin_rnd_in(s, -1, 1);
        }
        break;
    case 4:
        dt = lua_twin_rnd_in(
            s, 1, INT64_C(400) * 86400 * SEC); /* idle up to a year */
        break;
    case 5:
        dt = -lua_twin_rnd_in(s, 1, 100 * SEC); /* the clock jumps back */
        break;
    default:
        dt = lua_twin_rnd_in(s, 1, 3 * SEC);
        break;
    }
    now += dt;
    return now < 0 ? 0 : now > NOW_MAX ? NOW_MAX : now;
}

/* Asserts that the model reads st like a missing key for several costs at
 * now and later (what a key past its expiry must be). */
static void tb_expect_like_none(const struct tb_model *m,
                                const struct token_bucket_state *st,
                                int64_t now_us, uint64_t *s, const char *ctx)
{
    const int64_t costs[4] = { 0, 1, m->p.capacity, lua_twin_rnd_in(s, 1, 5) };
    const int64_t later[3] = { 0, 1, lua_twin_rnd_in(s, 1, 10 * SEC) };

    for (int i = 0; i < 4; i++) {
        for (int j = 0; j < 3; j++) {
            int64_t t =
                now_us > NOW_MAX - later[j] ? now_us : now_us + later[j];
            struct token_bucket_result x = tb_decide(&m->p, st, t, costs[i]);
            struct token_bucket_result y = tb_decide(&m->p, NULL, t, costs[i]);
            cr_assert(lua_twin_same_decision(&x.d, &y.d),
                      "%s: an expired state differs from none for cost %" PRId64
                      " at +%" PRId64 " us",
                      ctx, costs[i], later[j]);
        }
    }
}

/* peek, check, refund and peek again at one time: the refund leaves the
 * state of before the check, refilled to now (no key when that is full),
 * expiring when it is full; and the peeks agree. */
static void tb_check_refund(redisContext *c, const char *key,
                            struct tb_model *m, int64_t now, uint64_t *s,
                            struct lua_twin_tally *t, const char *ctx)
{
    int64_t cost = lua_twin_rnd_cost(s, COST_MAX(m)),
            pc = lua_twin_rnd_cost(s, COST_MAX(m));
    char undo[LUA_TWIN_UNDO_BYTES];
    struct token_bucket_state after;
    struct token_bucket_result a, r, b, want;
    int64_t expiry_ms;
    long long pexat, t0, t1;
    int full;

    want = tb_decide(&m->p, m->have ? &m->st : NULL, now, 0);
    a = tb_call(c, key, m, "peek", now, pc, undo, ctx);
    r = tb_call(c, key, m, "check", now, cost, undo, ctx);
    t->calls += 2;
    if (r.write != TOKEN_BUCKET_WRITE_SET || !m->have) {
        return;
    }
    full = want.next.tokens >= m->p.capacity;
    expiry_ms = full ? rl_ceil_ms(want.next.ts_ns - now * US)
                     : rl_ceil_ms(want.d.reset_after_ns);
    t0 = lua_twin_redis_ms(c);
    tb_refund(c, key, m, now, cost, undo);
    t->refunds++;
    m->have = tb_read(c, key, &after, &pexat, &t1);
    if (!m->have) {
        /* Gone before the read: Redis's clock passed the expiry, set from
         * the refund's millisecond (>= t0's), so at least expiry_ms went
         * by between t0 and t1 (both cut to the millisecond). */
        cr_assert(expiry_ms == 0 || t1 - t0 >= expiry_ms,
                  "%s: refund dropped a bucket that is not full", ctx);
        t->gone += expiry_ms > 0;
    } else {
        cr_assert(expiry_ms > 0, "%s: a full bucket stays", ctx);
        cr_assert(after.tokens == want.next.tokens &&
                      after.frac == want.next.frac &&
                      after.ts_ns == want.next.ts_ns,
                  "%s: refunded to %lld %lld %lld, want %lld %lld %lld", ctx,
                  (long long)after.tokens, (long long)after.frac,
                  (long long)after.ts_ns, (long long)want.next.tokens,
                  (long long)want.next.frac, (long long)want.next.ts_ns);
        lua_twin_expect_expiry(pexat, t0, t1, expiry_ms, ctx);
        m->st = after;
    }
    m->exp_valid = 0;
    if (m->have || expiry_ms == 0) {
        b = tb_call(c, key, m, "peek", now, pc, undo, ctx);
        cr_assert(lua_twin_same_decision(&a.d, &b.d),
                  "%s: peeks differ around a refund", ctx);
    }
}

/* Past the expiry on the model's clock the state must read like no key;
 * then the test drops the key as Redis would (or keeps it, still alike). */
static void tb_expire(redisContext *c, const char *key, struct tb_model *m,
                      int64_t now, uint64_t *s, struct lua_twin_tally *t,
                      const char *ctx)
{
    if (!m->have || !m->exp_valid || now < m->exp_at_us) {
        return;
    }
    tb_expect_like_none(m, &m->st, now, s, ctx);
    t->expired++;
    if (lua_twin_rnd_in(s, 0, 1)) {
        freeReplyObject(px_cmd(c, "DEL %s", key));
        m->have = 0;
    }
}

static void tb_sequence(redisContext *c, uint64_t *s, int seq,
                        unsigned long long seed, struct lua_twin_tally *t)
{
    struct tb_model m;
    char key[32], ctx[96], undo[LUA_TWIN_UNDO_BYTES];
    struct token_bucket_result last;
    int64_t now;

    memset(&m, 0, sizeof(m));
    memset(&last, 0, sizeof(last));
    snprintf(key, sizeof(key), "tb:%d", seq);
    rnd_params(s, &m);
    now = lua_twin_rnd_start(s);
    for (int op = 0; op < OPS_PER_SEQ; op++) {
        int64_t kind = lua_twin_rnd_in(s, 0, 99);

        snprintf(ctx, sizeof(ctx), "seed %llu seq %d op %d", seed, seq, op);
        now = rnd_time(s, now, &last);
        tb_expire(c, key, &m, now, s, t, ctx);
        if (kind < 55) {
            last = tb_call(c, key, &m, "check", now,
                           lua_twin_rnd_cost(s, COST_MAX(&m)), undo, ctx);
            t->calls++;
            t->limited += last.d.limited;
            t->writes += last.write == TOKEN_BUCKET_WRITE_SET;
            t->gone += last.write == TOKEN_BUCKET_WRITE_SET && !m.have;
        } else if (kind < 70) {
            last = tb_call(c, key, &m, "peek", now,
                           lua_twin_rnd_cost(s, COST_MAX(&m)), undo, ctx);
            t->calls++;
        } else if (kind < 85) {
            tb_check_refund(c, key, &m, now, s, t, ctx);
        } else if (kind < 92) {
            rnd_params(s, &m); /* same key, other limits */
        } else {
            /* A valid state in an unusual place: above capacity, a refill
             * point in the future or far in the past. */
            int64_t ts = lua_twin_rnd_in(s, 0, 2) == 0
                             ? now + lua_twin_rnd_in(s, 0, 100 * SEC)
                             : lua_twin_rnd_in(s, 0, now);
            int64_t top = m.p.capacity < CAP ? m.p.capacity + 1 : CAP;

            m.st.tokens = lua_twin_rnd_in(
                s, 0, lua_twin_rnd_in(s, 0, 3) == 0 ? top : top - 1);
            m.st.frac = lua_twin_rnd_in(s, 0, 3) == 0
                            ? 0
                            : lua_twin_rnd_in(s, 0, ONE - 1);
            m.st.ts_ns = (ts > NOW_MAX ? NOW_MAX : ts) * US;
            m.have = 1;
            m.exp_valid = 0;
            tb_plant(c, key, &m.st);
        }
    }
}

Test(it_lua_token_bucket, randomized_sequences_match_the_c_model,
     .init = it_init, .fini = px_env_fini, .timeout = 120)
{
    redisContext *c = lua_twin_connect();
    uint64_t seed = lua_twin_seed("it_lua_token_bucket", "PX_LUA_TB_SEED"),
             s = seed | 1;
    struct lua_twin_tally t = { 0 };

    for (int seq = 0; seq < SEQUENCES; seq++) {
        tb_sequence(c, &s, seq, (unsigned long long)seed, &t);
    }
    lua_twin_tally_report("it_lua_token_bucket", &t);
    redisFree(c);
}

/* ---------------- Peeks and refusals ---------------- */

Test(it_lua_token_bucket, peek_and_refusal_write_nothing, .init = it_init,
     .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = lua_twin_connect();
    const char *p[4] = { "5", "1000000", NULL, NULL };
    struct lua_twin_out o;
    char err[256];

    /* No key: a peek and a refused check create none. */
    cr_assert_eq(lua_twin_call(c, "peek", "k", ALGO, p, T0, 3, NULL, &o, err,
                               sizeof(err)),
                 0, "%s", err);
    cr_assert_eq(o.remaining, 2);
    cr_assert_eq(lua_twin_call(c, "check", "k", ALGO, p, T0, 6, NULL, &o, err,
                               sizeof(err)),
                 0, "%s", err);
    cr_assert_eq(o.limited, 1);
    px_check_int(px_cmd(c, "EXISTS k"), 0);

    /* A stored bucket with an expiry of our own: neither touches it. */
    px_check_int(px_cmd(c, "HSET k tokens 1 frac 5 ts %lld", (long long)T0), 3);
    px_check_int(px_cmd(c, "PEXPIRE k 900000"), 1);
    cr_assert_eq(lua_twin_call(c, "peek", "k", ALGO, p, T0 + 1, 1, NULL, &o,
                               err, sizeof(err)),
                 0, "%s", err);
    cr_assert_eq(o.limited, 0);
    cr_assert_eq(o.remaining, 0);
    cr_assert_str_neq(o.undo, "", "a peek names what a check would do");
    cr_assert_eq(lua_twin_call(c, "check", "k", ALGO, p, T0 + 1, 4, NULL, &o,
                               err, sizeof(err)),
                 0, "%s", err);
    cr_assert_eq(o.limited, 1);
    cr_assert_str_eq(o.undo, "");
    px_check_str(px_cmd(c, "HGET k tokens"), "1");
    px_check_str(px_cmd(c, "HGET k frac"), "5");
    px_check_int(px_cmd(c, "HLEN k"), 3);
    cr_assert_gt(lua_twin_pttl(c, "k"), 800000);
    /* Unlimited: admitted, nothing written either. */
    p[1] = "inf";
    cr_assert_eq(lua_twin_call(c, "check", "k", ALGO, p, T0 + 1, 99, NULL, &o,
                               err, sizeof(err)),
                 0, "%s", err);
    cr_assert_eq(o.limited, 0);
    cr_assert_eq(o.remaining, 5);
    px_check_str(px_cmd(c, "HGET k tokens"), "1");
    cr_assert_gt(lua_twin_pttl(c, "k"), 800000);
    redisFree(c);
}

/* ---------------- Refunds ---------------- */

/* The script's entry at now for cost on key k (asserts no error). */
static struct lua_twin_out tb_at(redisContext *c, const char *mode,
                                 const char *const p[4], int64_t now,
                                 int64_t cost, const char *undo)
{
    return lua_twin_ok(c, mode, "k", ALGO, p, now, cost, undo);
}

static void expect_same(const struct lua_twin_out *a,
                        const struct lua_twin_out *b, const char *ctx)
{
    cr_assert(a->limited == b->limited && a->remaining == b->remaining &&
                  a->retry_us == b->retry_us && a->reset_us == b->reset_us,
              "%s: [%d %lld %lld %lld] vs [%d %lld %lld %lld]", ctx, a->limited,
              (long long)a->remaining, (long long)a->retry_us,
              (long long)a->reset_us, b->limited, (long long)b->remaining,
              (long long)b->retry_us, (long long)b->reset_us);
}

Test(it_lua_token_bucket, refund_gives_the_tokens_back, .init = it_init,
     .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = lua_twin_connect();
    const char *p[4] = { "10", "1500000", NULL, NULL }; /* 1.5 tokens/s */
    struct lua_twin_out a, b, r;

    /* From a full bucket: the refund leaves a full one, i.e. no key. */
    a = tb_at(c, "peek", p, T0, 4, NULL);
    r = tb_at(c, "check", p, T0, 4, NULL);
    cr_assert_eq(r.remaining, 6);
    tb_at(c, "refund", p, T0, 4, r.undo);
    px_check_int(px_cmd(c, "EXISTS k"), 0);
    b = tb_at(c, "peek", p, T0, 4, NULL);
    expect_same(&a, &b, "full");

    /* From a partial bucket, later: the level comes back with its
     * fraction, and the key expires when that level is full again. */
    tb_at(c, "check", p, T0, 7, NULL);
    a = tb_at(c, "peek", p, T0 + 1234567, 2, NULL);
    r = tb_at(c, "check", p, T0 + 1234567, 2, NULL);
    tb_at(c, "refund", p, T0 + 1234567, 2, r.undo);
    b = tb_at(c, "peek", p, T0 + 1234567, 2, NULL);
    expect_same(&a, &b, "partial");
    /* 4.85 tokens: full in 3.43 s, when the key expires. */
    b = tb_at(c, "peek", p, T0 + 1234567, 0, NULL);
    cr_assert_eq(b.reset_us, 3432099);
    cr_assert_leq(lua_twin_pttl(c, "k"), 3433);
    cr_assert_gt(lua_twin_pttl(c, "k"), 3433 - 100);
    /* A second later, 1.5 tokens more. */
    a = tb_at(c, "peek", p, T0 + 2234567, 1, NULL);
    cr_assert_eq(a.remaining, 5);

    /* Full, but refilled up to a time ahead of the clock: the refund
     * keeps that time (it still differs from no key) until the clock
     * reaches it. */
    px_check_int(px_cmd(c, "DEL k"), 1);
    px_check_int(
        px_cmd(c, "HSET k tokens 10 frac 0 ts %lld", (long long)(T0 + 2500000)),
        3);
    a = tb_at(c, "peek", p, T0, 3, NULL);
    r = tb_at(c, "check", p, T0, 3, NULL);
    tb_at(c, "refund", p, T0, 3, r.undo);
    b = tb_at(c, "peek", p, T0, 3, NULL);
    expect_same(&a, &b, "full, clock behind");
    px_check_str(px_cmd(c, "HGET k tokens"), "10");
    px_check_str(px_cmd(c, "HGET k ts"), "1700000002500000");
    cr_assert_leq(lua_twin_pttl(c, "k"), 2500);
    cr_assert_gt(lua_twin_pttl(c, "k"), 2400);
    redisFree(c);
}

Test(it_lua_token_bucket, refund_is_a_noop_once_the_state_moved_on,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = lua_twin_connect();
    const char *p[4] = { "3", "1000000", NULL, NULL }; /* 1 token/s */
    struct lua_twin_out r, x;
    redisReply *h;

    /* The check empties the bucket: full again 3 s later. */
    r = tb_at(c, "check", p, T0, 3, NULL);
    cr_assert_str_eq(r.undo, "1700000003000000");
    /* The key expired (Redis dropped it): nothing to give back. */
    px_check_int(px_cmd(c, "DEL k"), 1);
    tb_at(c, "refund", p, T0, 3, r.undo);
    px_check_int(px_cmd(c, "EXISTS k"), 0);
    /* A new key written at the full instant or later is not ours. */
    x = tb_at(c, "check", p, T0 + 3 * SEC, 2, NULL);
    tb_at(c, "refund", p, T0 + 3 * SEC, 3, r.undo);
    px_check_str(px_cmd(c, "HGET k tokens"), "1");
    /* A token that is no instant, a cost of 0, or bad parameters: no-ops. */
    tb_at(c, "refund", p, T0 + 3 * SEC, 2, "");
    tb_at(c, "refund", p, T0 + 3 * SEC, 2, "12x");
    tb_at(c, "refund", p, T0 + 3 * SEC, 0, x.undo);
    p[0] = "0";
    tb_at(c, "refund", p, T0 + 3 * SEC, 2, x.undo);
    px_check_str(px_cmd(c, "HGET k tokens"), "1");
    /* Our own token still works while the state is the one we wrote. */
    p[0] = "3";
    tb_at(c, "refund", p, T0 + 3 * SEC, 2, x.undo);
    px_check_int(px_cmd(c, "EXISTS k"), 0);
    /* A refund never creates the key, nor touches another type. */
    tb_at(c, "refund", p, T0 + 3 * SEC, 2, x.undo);
    px_check_int(px_cmd(c, "EXISTS k"), 0);
    px_check_int(px_cmd(c, "RPUSH k a"), 1);
    tb_at(c, "refund", p, T0 + 3 * SEC, 2, x.undo);
    h = px_cmd(c, "LRANGE k 0 -1");
    cr_assert_eq(h->elements, 1);
    freeReplyObject(h);
    redisFree(c);
}

/* ---------------- Durations beyond 2^53 us ---------------- */

Test(it_lua_token_bucket, huge_durations_come_back_exact_or_saturated,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = lua_twin_connect();
    struct tb_model m;
    char undo[LUA_TWIN_UNDO_BYTES];
    struct token_bucket_result r;
    struct lua_twin_out o;

    /* 9100 tokens at a millionth of a token per second: 9.1e15 us, past
     * 2^53 and below the int64 ns limit. */
    memset(&m, 0, sizeof(m));
    tb_set_params(&m, 9101, 1);
    r = tb_call(c, "a", &m, "check", T0, 9100, undo, "9100");
    cr_assert_eq(r.d.reset_after_ns, INT64_C(9100) * ONE);
    o = tb_at(c, "peek", (const char *const[4]){ "9101", "1", NULL, NULL }, T0,
              0, NULL);
    cr_assert_eq(o.reset_us, 0, "no key k: full");
    /* The largest bucket at the slowest rate saturates. */
    m.have = 0;
    tb_set_params(&m, CAP, 1);
    r = tb_call(c, "b", &m, "check", NOW_MAX - 5, CAP, undo, "max");
    cr_assert_eq(r.d.reset_after_ns, INT64_MAX);
    cr_assert_eq(r.expiry_ms, INT64_C(9223372036855));
    r = tb_call(c, "b", &m, "check", NOW_MAX, 1, undo, "max refused");
    cr_assert_eq(r.d.limited, 1);
    cr_assert_eq(r.d.retry_after_ns, INT64_C(999999999995000));
    /* A clock far behind a stored ts: the gap counts, and saturates
     * with a long enough wait. */
    tb_set_params(&m, 300, 1);
    m.have = 1; /* planted below */
    m.st.tokens = 0;
    m.st.frac = 0;
    m.st.ts_ns = NOW_MAX * US;
    tb_plant(c, "c", &m.st);
    r = tb_call(c, "c", &m, "check", 0, 1, undo, "gap");
    cr_assert_eq(r.d.retry_after_ns, NOW_MAX * US + ONE);
    r = tb_call(c, "c", &m, "check", 0, 300, undo, "gap saturated");
    cr_assert_eq(r.d.retry_after_ns, INT64_MAX);
    redisFree(c);
}

/* ---------------- Errors ---------------- */

#define E_WRONGTYPE                                                            \
    "WRONGTYPE Operation against a key holding the wrong kind of value"

/* The error text of a call (asserts there is one). */
static void expect_error(redisContext *c, const char *key,
                         const char *const p[4], int64_t cost, const char *want)
{
    lua_twin_expect_error(c, key, ALGO, p, T0, cost, want);
}

Test(it_lua_token_bucket, bad_parameters_give_the_c_model_errors,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    static const char *const bad_cap[] = { "0",   "-1", "9007199254740992",
                                           "1.5", "",   "x" };
    static const char *const bad_rate[] = { "0",   "-5", "1000000000000001",
                                            "INF", "",   "1e6" };
    redisContext *c = lua_twin_connect();
    struct token_bucket_params tp;
    const char *err = NULL;
    char want_cap[128], want_rate[128];

    /* The texts are the C model's. */
    cr_assert_eq(token_bucket_params_init(&tp, 0, M, &err), TOKEN_BUCKET_EARGS);
    snprintf(want_cap, sizeof(want_cap), "ERR %s", err);
    cr_assert_eq(token_bucket_params_init(&tp, 1, 0, &err), TOKEN_BUCKET_EARGS);
    snprintf(want_rate, sizeof(want_rate), "ERR %s", err);
    for (size_t i = 0; i < sizeof(bad_cap) / sizeof(*bad_cap); i++) {
        const char *p[4] = { bad_cap[i], "1000000", NULL, NULL };
        expect_error(c, "k", p, 1, want_cap);
        p[1] = "0"; /* both bad: capacity is checked first */
        expect_error(c, "k", p, 1, want_cap);
    }
    for (size_t i = 0; i < sizeof(bad_rate) / sizeof(*bad_rate); i++) {
        const char *p[4] = { "5", bad_rate[i], NULL, NULL };
        expect_error(c, "k", p, 1, want_rate);
    }
    /* The limits themselves are fine. */
    const char *p[4] = { "9007199254740991", "1000000000000000", NULL, NULL };
    tb_at(c, "peek", p, T0, 1, NULL);
    px_check_int(px_cmd(c, "DBSIZE"), 0);
    redisFree(c);
}

Test(it_lua_token_bucket, wrong_type_and_malformed_state_give_errors,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    static const char *const bad[][3] = {
        { "-1", "0", "5" },
        { "1", "-1", "5" },
        { "1", "1000000000000000", "5" },
        { "1", "0", "-5" },
        { "x", "0", "5" },
        { "1", "0.5", "5" },
        { "1", "0", "9007199254740992" },
        { "1", "0", "" },
    };
    redisContext *c = lua_twin_connect();
    const char *p[4] = { "5", "1000000", NULL, NULL };
    struct token_bucket_state st = { .tokens = -1 };
    struct token_bucket_params tp;
    struct token_bucket_result r;
    const char *err = NULL;
    char want[128];

    px_check_status(px_cmd(c, "SET s 1"), "OK");
    expect_error(c, "s", p, 1, E_WRONGTYPE);
    px_check_int(px_cmd(c, "ZADD z 1 a"), 1);
    expect_error(c, "z", p, 0, E_WRONGTYPE);
    p[1] = "inf"; /* even when nothing limits */
    expect_error(c, "z", p, 1, E_WRONGTYPE);
    px_check_str(px_cmd(c, "GET s"), "1");

    /* The state error is the model's. */
    cr_assert_eq(token_bucket_params_init(&tp, 5, M, &err), TOKEN_BUCKET_OK);
    cr_assert_eq(token_bucket_decide(&tp, &st, T0 * US, 1, &r, &err),
                 TOKEN_BUCKET_ESTATE);
    snprintf(want, sizeof(want), "ERR %s", err);
    p[1] = "1000000";
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        freeReplyObject(px_cmd(c, "DEL h"));
        px_check_int(px_cmd(c, "HSET h tokens %s frac %s ts %s", bad[i][0],
                            bad[i][1], bad[i][2]),
                     3);
        expect_error(c, "h", p, 1, want);
        px_check_str(px_cmd(c, "HGET h tokens"), bad[i][0]);
    }
    /* A missing field is malformed too. */
    px_check_int(px_cmd(c, "HDEL h frac"), 1);
    px_check_int(px_cmd(c, "HSET h frac 0"), 1);
    px_check_int(px_cmd(c, "HDEL h ts"), 1);
    expect_error(c, "h", p, 1, want);
    redisFree(c);
}

/* ---------------- The exact integers of algorithms/lua/xint.lua -------- */

/* A number of `bits` random bits (0 .. 53). */
static int64_t rnd_bits(uint64_t *s, int bits)
{
    return bits == 0 ? 0 : (int64_t)(lua_twin_rnd(s) >> (64 - bits));
}

Test(it_lua_token_bucket, xint_part_divides_like_rl_muladd_div, .init = it_init,
     .fini = px_env_fini, .timeout = 60)
{
    enum { N = 500 };
    static const char driver[] =
        "local out = {}\n"
        "for i = 1, #ARGV, 4 do\n"
        "  local x = xint_add(xint_mul(xint_of(tonumber(ARGV[i])),\n"
        "    xint_of(tonumber(ARGV[i + 1]))), xint_of(tonumber(ARGV[i + 2])))\n"
        "  local q, r = xint_divmod(x, tonumber(ARGV[i + 3]))\n"
        "  out[#out + 1] = xint_str(q)\n"
        "  out[#out + 1] = lib_str(r)\n"
        "end\n"
        "return out\n";
    redisContext *c = px_redis_connect(&px_env()->redis, NULL);
    char *lib = px_read_file(PX_SOURCE_DIR "/algorithms/lua/lib.lua", NULL);
    char *xint = px_read_file(PX_SOURCE_DIR "/algorithms/lua/xint.lua", NULL);
    static int64_t v[N][4];
    static char txt[N][4][ARG_BYTES];
    static const char *argv[3 + 4 * N];
    uint64_t s = (uint64_t)time(NULL) | 1;
    size_t len;
    char *script;
    redisReply *r;

    cr_assert(lib != NULL && xint != NULL);
    len = strlen(lib) + strlen(xint) + sizeof(driver) + 2;
    script = malloc(len);
    cr_assert_not_null(script);
    snprintf(script, len, "%s\n%s\n%s", lib, xint, driver);
    for (int i = 0; i < N; i++) {
        int64_t q = rnd_bits(&s, (int)lua_twin_rnd_in(&s, 0, 53));
        int64_t d = rnd_bits(&s, (int)lua_twin_rnd_in(&s, 1, 53)) | 1;

        if (i % 5 < 2) {
            /* q * d + c for c at 0, d - 1 or d: quotient limbs on the
             * edge of a floating-point estimate. */
            v[i][0] = q;
            v[i][1] = d;
            v[i][2] = (i % 5 == 0) ? 0 : d - (lua_twin_rnd_in(&s, 0, 1));
        } else {
            v[i][0] = rnd_bits(&s, (int)lua_twin_rnd_in(&s, 0, 53));
            v[i][1] = rnd_bits(&s, (int)lua_twin_rnd_in(&s, 0, 53));
            v[i][2] = rnd_bits(&s, (int)lua_twin_rnd_in(&s, 0, 53));
        }
        v[i][3] = i % 7 == 0 ? NOW_MAX - lua_twin_rnd_in(&s, 0, 1)
                             : (i % 11 == 0 ? lua_twin_rnd_in(&s, 1, 3) : d);
        for (int k = 0; k < 4; k++) {
            snprintf(txt[i][k], ARG_BYTES, "%" PRId64, v[i][k]);
            argv[3 + 4 * i + k] = txt[i][k];
        }
    }
    argv[0] = "EVAL";
    argv[1] = script;
    argv[2] = "0";
    r = redisCommandArgv(c, 3 + 4 * N, argv, NULL);
    cr_assert_not_null(r);
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s",
                 r->type == REDIS_REPLY_ERROR ? r->str : "");
    cr_assert_eq(r->elements, 2 * N);
    for (int i = 0; i < N; i++) {
        int64_t rem,
            q = rl_muladd_div(v[i][0], v[i][1], v[i][2], v[i][3], &rem);
        const char *lq = r->element[2 * i]->str;
        char want[ARG_BYTES];

        if (q == INT64_MAX) {
            /* Saturated: the exact quotient is at least that. */
            cr_assert(strlen(lq) > 19 ||
                          (strlen(lq) == 19 &&
                           strcmp(lq, "9223372036854775807") >= 0),
                      "%s * %s + %s / %s: %s", txt[i][0], txt[i][1], txt[i][2],
                      txt[i][3], lq);
            continue;
        }
        snprintf(want, sizeof(want), "%" PRId64, q);
        cr_assert_str_eq(lq, want, "%s * %s + %s / %s", txt[i][0], txt[i][1],
                         txt[i][2], txt[i][3]);
        snprintf(want, sizeof(want), "%" PRId64, rem);
        cr_assert_str_eq(r->element[2 * i + 1]->str, want,
                         "remainder of %s * "
                         "%s + %s / %s",
                         txt[i][0], txt[i][1], txt[i][2], txt[i][3]);
    }
    freeReplyObject(r);
    free(script);
    free(lib);
    free(xint);
    redisFree(c);
}
