/* The warm-up of algorithms/lua/token_bucket.lua (Guava's SmoothWarmingUp)
 * against the C model algorithms/token_bucket.c, on a real redis-server,
 * through the shared driver of twin_walk.h: random limits with a warm-up,
 * random sequences on an explicit clock (idle stretches that cool the
 * bucket, bursts that warm it, refunds), and Guava's own example.
 * The state is a HASH of tokens (negative in debt), frac, ts (us) and
 * cold (ns). The driver's third number carries the warm-up in ms and the
 * cold factor: warmup * 10000 + cold_factor (0: the default). */
#include "tests/integration/fixture.h"
#include "tests/integration/twin_walk.h"
#include "tests/support/px_test.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "algorithms/token_bucket.h"

PX_TEST_SUITE(it_lua_token_bucket_warm);

#define M              INT64_C(1000000) /* one token per second, in millionths */
#define ONE            TOKEN_BUCKET_FRAC_ONE
#define P(cf)          ((struct token_bucket_params *)(cf)->p)
#define WARM(ms, cold) ((ms)*10000 + (cold))

static const struct twin_algo TBW;

static void it_init(void)
{
    px_redis_start(&px_env()->redis, NULL);
}

/* ---------------- The descriptor ---------------- */

static int tbw_parse(const redisReply *r, void *st, const char *ctx)
{
    static const char *const names[4] = { "tokens", "frac", "ts", "cold" };
    struct token_bucket_state *s = st;
    int64_t v[4];

    if (!twin_hash(r, names, 4, v, ctx)) {
        return 0;
    }
    s->tokens = v[0];
    s->frac = v[1];
    s->ts_ns = v[2] * 1000;
    s->cold = v[3];
    return 1;
}

static void tbw_same(const void *a, const void *b, const char *ctx)
{
    const struct token_bucket_state *x = a, *y = b;

    cr_assert(x->tokens == y->tokens && x->frac == y->frac &&
                  x->ts_ns == y->ts_ns && x->cold == y->cold,
              "%s: stored %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64
              ", model %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64,
              ctx, x->tokens, x->frac, x->ts_ns, x->cold, y->tokens, y->frac,
              y->ts_ns, y->cold);
}

/* The cold factors' text, for the script's fourth parameter. */
static char tbw_cold_txt[TOKEN_BUCKET_MAX_COLD + 1][8];

static const char *tbw_conf(struct twin_conf *cf, const int64_t n[3])
{
    const char *err = NULL;
    int64_t ms = n[2] / 10000, cold = n[2] % 10000;

    snprintf(cf->s[2], sizeof(cf->s[2]), "%" PRId64, ms);
    cf->v[2] = cf->s[2];
    if (cold > TOKEN_BUCKET_MAX_COLD) {
        return "cold factor out of the test's range";
    }
    snprintf(tbw_cold_txt[cold], sizeof(tbw_cold_txt[cold]), "%" PRId64, cold);
    cf->v[3] = tbw_cold_txt[cold];
    if (token_bucket_params_init(P(cf), n[0], n[1], &err) != TOKEN_BUCKET_OK ||
        token_bucket_params_warmup(P(cf), ms, cold, &err) != TOKEN_BUCKET_OK) {
        return err;
    }
    return NULL;
}

/* a - b, levels of tokens + frac / 1e15, as whole tokens and the
 * millionths beyond them (a charge is whole millionths). */
static void tbw_diff(const struct token_bucket_state *a,
                     const struct token_bucket_state *b, int64_t *tokens,
                     int64_t *micro)
{
    int64_t t = a->tokens - b->tokens, f = a->frac - b->frac;

    if (f < 0) {
        f += ONE;
        t--;
    }
    *tokens = t;
    *micro = f / 1000000000;
}

static void tbw_decide(const struct twin_conf *cf, const void *st, int64_t now,
                       int64_t cost, struct twin_result *r, void *next)
{
    struct token_bucket_result x, pre;
    const char *err = NULL;

    cr_assert_eq(token_bucket_decide_wait(P(cf), st, now * 1000, cost,
                                          lua_twin_wait() * 1000, &x, &err),
                 TOKEN_BUCKET_OK, "model: %s", err);
    r->d = x.d;
    r->write = x.write == TOKEN_BUCKET_WRITE_SET;
    r->have_next = 1;
    r->expiry_ms = x.expiry_ms;
    if (r->write && x.d.reset_after_ns == INT64_MAX) {
        r->undo_digits = 0;
        r->undo[0] = '\0';
    } else if (r->write) {
        /* "<full>:<tokens>:<millionths>:<cold>": the instant the bucket
         * is full again (as a plain bucket's token), then what the check
         * paid (the level before it, a peek's, less the level after) and
         * the cold it took. */
        int64_t gap = x.next.ts_ns - now * 1000, paid, paid_micro;

        cr_assert_eq(token_bucket_decide(P(cf), st, now * 1000, 0, &pre, &err),
                     TOKEN_BUCKET_OK);
        tbw_diff(&pre.next, &x.next, &paid, &paid_micro);
        gap = gap > 0 ? gap : 0;
        snprintf(r->undo, sizeof(r->undo),
                 "%" PRId64 ":%" PRId64 ":%" PRId64 ":%" PRId64,
                 x.next.ts_ns / 1000 + (x.d.reset_after_ns - gap + 999) / 1000,
                 paid, paid_micro, pre.next.cold - x.next.cold);
    }
    memcpy(next, &x.next, sizeof(x.next));
}

/* LIMITER ADJUST through the model (the hook's contract: twin_walk.h). */
static void tbw_adjust(const struct twin_conf *cf, const void *st, int64_t now,
                       int64_t delta, struct twin_result *r, void *next)
{
    struct token_bucket_result x;
    const char *err = NULL;

    cr_assert_eq(token_bucket_adjust(P(cf), st, now * 1000, delta, &x, &err),
                 TOKEN_BUCKET_OK, "model: %s", err);
    r->d = x.d;
    r->write = x.write == TOKEN_BUCKET_WRITE_SET;
    r->have_next = r->write || st != NULL;
    r->expiry_ms = x.expiry_ms;
    memcpy(next, &x.next, sizeof(x.next));
}

/* Buckets of 1 to 50 tokens (now and then up to 2^30: large, yet never
 * a wait that saturates, whose undo token the model cannot spell), 0.5 to 100
 * tokens/s, a warm-up from the shortest allowed to a minute, factors 2 to 10,
 * the default, or 1000. */
static void tbw_rnd_conf(uint64_t *s, struct twin_conf *cf,
                         const struct twin_conf *old)
{
    int64_t cap, rate, lo, hi, ms, cold;

    (void)old;
    cap = lua_twin_rnd_in(s, 0, 9) == 0
              ? lua_twin_rnd_in(s, 1, INT64_C(1) << 30)
              : lua_twin_rnd_in(s, 1, 50);
    rate = lua_twin_rnd_in(s, 0, 3) == 0 ? lua_twin_rnd_in(s, M / 2, 100 * M)
                                         : lua_twin_rnd_in(s, 1, 20) * M;
    /* warmup * rate between 1 and 1e9 tokens, at most a minute. */
    lo = (INT64_C(1000000000) + rate - 1) / rate;
    hi = 60000;
    ms = lua_twin_rnd_in(s, 0, 3) == 0 ? lo : lua_twin_rnd_in(s, lo, hi);
    switch (lua_twin_rnd_in(s, 0, 5)) {
    case 0:
        cold = 0;
        break;
    case 1:
        cold = TOKEN_BUCKET_MAX_COLD;
        break;
    default:
        cold = lua_twin_rnd_in(s, 2, 10);
        break;
    }
    twin_conf_set(&TBW, cf, cap, rate, WARM(ms, cold));
}

static int64_t tbw_rnd_cost(uint64_t *s, const struct twin_conf *cf)
{
    return lua_twin_rnd_cost(s, P(cf)->capacity);
}

/* Steps of a third of the warm-up: idle stretches cool the bucket. */
static int64_t tbw_unit(const struct twin_conf *cf)
{
    return P(cf)->warmup_ns / 3000 + 1;
}

/* Where the stored bucket is full again, or cold again (or 1 us off). */
static int64_t tbw_edge(uint64_t *s, const struct twin_key *k, int64_t now)
{
    int64_t edge = k->r.d.reset_after_ns;

    if (edge <= 0 || edge >= INT64_MAX / 4) {
        return -1;
    }
    if (k->have && lua_twin_rnd_in(s, 0, 1)) {
        edge += P(&k->cf)->warmup_ns -
                ((const struct token_bucket_state *)k->st)->cold;
    }
    return now + edge / 1000 + lua_twin_rnd_in(s, -1, 1);
}

/* A valid state in an unusual place: in debt, above capacity, any cold,
 * a refill point in the future or the past. */
static int tbw_plant(uint64_t *s, struct twin_key *k, int64_t now)
{
    const struct token_bucket_params *p = P(&k->cf);
    int64_t ts =
        lua_twin_rnd_in(s, 0, 2) == 0
            ? now + lua_twin_rnd_in(s, 0, 100 * TWIN_SEC)
            : lua_twin_rnd_in(
                  s, now > 1000 * TWIN_SEC ? now - 1000 * TWIN_SEC : 0, now);
    int64_t cap = p->capacity;
    int64_t tokens = lua_twin_rnd_in(s, -3 * cap, cap + 1);
    int64_t frac =
        lua_twin_rnd_in(s, 0, 3) == 0 ? 0 : lua_twin_rnd_in(s, 0, ONE - 1);
    int64_t cold = lua_twin_rnd_in(s, 0, p->warmup_ns + 5);

    freeReplyObject(px_cmd(k->c, "DEL %s", k->name));
    twin_plant(k,
               "HSET %%s tokens %" PRId64 " frac %" PRId64 " ts %" PRId64
               " cold %" PRId64,
               tokens, frac, ts > TWIN_US_MAX ? TWIN_US_MAX : ts, cold);
    return 1;
}

/* The refund leaves the state of before the check at now (no key when
 * that is full and fully cold), expiring when it is full and cold. */
static int tbw_after_refund(struct twin_key *k, const void *pre, int pre_have,
                            int64_t now, int64_t cost,
                            const struct lua_twin_txn *tx, const char *ctx)
{
    const struct token_bucket_params *p = P(&k->cf);
    struct token_bucket_state want;
    int64_t expiry_ms, heat, gap;
    int full;

    (void)pre_have;
    (void)cost;
    twin_model(k, pre, now, 0);
    memcpy(&want, k->next, sizeof(want));
    full = want.tokens >= p->capacity;
    heat = p->warmup_ns - want.cold;
    gap = want.ts_ns - now * 1000;
    expiry_ms = full ? rl_ceil_ms(gap + heat)
                     : rl_ceil_ms(rl_add_sat(k->r.d.reset_after_ns, heat));
    if (!k->have) {
        return expiry_ms == 0 || !lua_twin_expired(tx, expiry_ms, ctx);
    }
    cr_assert(expiry_ms > 0, "%s: a full, cold bucket stays", ctx);
    tbw_same(k->st, &want, ctx);
    cr_assert(tx->pttl <= expiry_ms && tx->pttl >= expiry_ms - tx->elapsed_ms,
              "%s: PTTL %lld after the refund, expiry %" PRId64 " ms", ctx,
              tx->pttl, expiry_ms);
    return 1;
}

static const struct twin_algo TBW = {
    .name = "token_bucket",
    .read_fmt = "HGETALL %s",
    .nparams = 3,
    .state_size = sizeof(struct token_bucket_state),
    .parse = tbw_parse,
    .expect_same = tbw_same,
    .conf = tbw_conf,
    .decide = tbw_decide,
    .state_error = TOKEN_BUCKET_ERR_STATE,
    .rnd_conf = tbw_rnd_conf,
    .rnd_cost = tbw_rnd_cost,
    .unit_us = tbw_unit,
    .rnd_edge = tbw_edge,
    .plant = tbw_plant,
    .after_refund = tbw_after_refund,
    .adjust = tbw_adjust,
    .waits = 1,
};

/* ---------------- The walk and the tables ---------------- */

Test(it_lua_token_bucket_warm, randomized_sequences_match_the_c_model,
     .init = it_init, .fini = px_env_fini, .timeout = 120)
{
    twin_walk(&TBW, "it_lua_token_bucket_warm");
}

/* Guava's example (2 tokens/s, warm-up 4 s, factor 3) with capacity 1:
 * after a quiet period each request waits out what the one before paid,
 * 1.375, 1.125, 0.875, 0.625 s, then 0.5 s; one us early is refused. */
Test(it_lua_token_bucket_warm, guava_example, .init = it_init,
     .fini = px_env_fini, .timeout = 60)
{
#define G(us) (TWIN_T0 + (us))
    static const struct twin_row rows[] = {
        TWIN_SET(1, 2 * M, WARM(4000, 0)),
        TWIN_CALL("check", G(0), 1,
                  "limited 0 reset_us 1375000 field:tokens -2 field:cold "
                  "3500000000"),
        TWIN_CALL("check", G(1374999), 1, "limited 1 retry_us 1"),
        TWIN_CALL("check", G(1375000), 1, "limited 0 reset_us 1125000"),
        TWIN_CALL("check", G(2499999), 1, "limited 1"),
        TWIN_CALL("check", G(2500000), 1, "limited 0 reset_us 875000"),
        TWIN_CALL("check", G(3375000), 1, "limited 0 reset_us 625000"),
        TWIN_CALL("check", G(4000000), 1, "limited 0 reset_us 500000"),
        TWIN_CALL("check", G(4500000), 1, "limited 0 reset_us 500000"),
        /* Full at 5 s with 2 permits stored (1 s of cold); 4 s idle makes
         * it cold again: 1.375 s. */
        TWIN_CALL("check", G(9000000), 1, "limited 0 reset_us 1375000"),
    };
    TWIN_ROWS(&TBW, rows);
}
