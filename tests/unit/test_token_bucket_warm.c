/* Token bucket warm-up (Guava's SmoothWarmingUp): the costs after a quiet
 * period pinned against Guava's own example worked out by hand, the burst
 * of a warm bucket, cooling while idle, the expiry, peeks, and the
 * parameters' bounds.
 *
 * Guava's example (RateLimiter.create(2, 4, SECONDS), coldFactor 3):
 *   stableInterval = 1 / 2 tokens/s          = 0.5 s
 *   coldInterval   = 3 * 0.5 s               = 1.5 s
 *   thresholdPermits = 0.5 * 4 s / 0.5 s     = 4
 *   maxPermits = 4 + 2 * 4 s / (0.5 + 1.5 s) = 8
 *   slope = (1.5 - 0.5) / (8 - 4)            = 0.25 s a permit
 * A permit taken at coldness x (stored permits) costs 0.5 + 0.25 * (x - 4)
 * seconds above the threshold; one permit from 8 down to 7 costs the mean
 * over [7, 8]: 0.5 + 0.25 * 3.5 = 1.375 s, then 1.125 s (7 -> 6), 0.875 s
 * (6 -> 5), 0.625 s (5 -> 4), then 0.5 s. In tokens of 0.5 s: 2.75, 2.25,
 * 1.75, 1.25, 1. */
#include "tests/support/px_test.h"

#include <stdint.h>

#include "algorithms/rl.h"
#include "algorithms/token_bucket.h"

PX_TEST_SUITE(token_bucket_warm);

#define S  RL_NS_PER_SEC
#define MS RL_NS_PER_MS
#define T0 INT64_C(1700000000000000000)

/* Guava's example with capacity `cap`: 2 tokens/s, warm-up 4 s, factor 3. */
static struct token_bucket_params guava(int64_t cap)
{
    struct token_bucket_params p;
    const char *err = NULL;

    cr_assert_eq(token_bucket_params_init(&p, cap, 2000000, &err),
                 TOKEN_BUCKET_OK);
    cr_assert_eq(token_bucket_params_warmup(&p, 4000, 0, &err), TOKEN_BUCKET_OK,
                 "%s", err);
    return p;
}

/* The key of a test, as a store holds it. */
struct mem {
    int have;
    struct token_bucket_state v;
    int64_t expiry_ms;
};

static struct token_bucket_result step(const struct token_bucket_params *p,
                                       struct mem *m, int64_t now, int64_t cost)
{
    struct token_bucket_result r;
    const char *err = NULL;

    cr_assert_eq(
        token_bucket_decide(p, m->have ? &m->v : NULL, now, cost, &r, &err),
        TOKEN_BUCKET_OK, "decide: %s", err);
    if (r.write == TOKEN_BUCKET_WRITE_SET) {
        m->have = 1;
        m->v = r.next;
        m->expiry_ms = r.expiry_ms;
    }
    return r;
}

Test(token_bucket_warm, guava_geometry)
{
    struct token_bucket_params p = guava(1);

    /* In millionths of a token: threshold 4, max - threshold 4. */
    cr_assert_eq(p.thr, 4000000);
    cr_assert_eq(p.span, 4000000);
    cr_assert_eq(p.cold_factor, 3);
    cr_assert_eq(p.warmup_ns, 4 * S);
}

/* Capacity 1 is Guava's tryAcquire: each request waits out what the one
 * before paid. The waits after a quiet period are Guava's 1.375, 1.125,
 * 0.875, 0.625 s, then the stable 0.5 s; a retry one ns early is refused,
 * and retry_after says exactly when to come back. */
Test(token_bucket_warm, guava_sequence_after_idle)
{
    static const int64_t waits_ms[] = { 1375, 1125, 875, 625, 500, 500 };
    struct token_bucket_params p = guava(1);
    struct mem m = { 0 };
    struct token_bucket_result r;
    int64_t now = T0;
    size_t i;

    for (i = 0; i < sizeof(waits_ms) / sizeof(*waits_ms); i++) {
        r = step(&p, &m, now, 1);
        cr_assert_eq(r.d.limited, 0, "request %zu", i);
        cr_assert_eq(r.d.remaining, 0);
        /* The bucket is full again once this request's cost is paid. */
        cr_assert_eq(r.d.reset_after_ns, waits_ms[i] * MS, "request %zu: %lld",
                     i, (long long)r.d.reset_after_ns);
        r = step(&p, &m, now + waits_ms[i] * MS - 1, 1);
        cr_assert_eq(r.d.limited, 1, "request %zu early", i);
        cr_assert_eq(r.d.retry_after_ns, 1);
        r = step(&p, &m, now, 1);
        cr_assert_eq(r.d.retry_after_ns, waits_ms[i] * MS);
        now += waits_ms[i] * MS;
    }
    /* After 6 requests the stored permits are 8 - 6 = 2: each took 1 / 8
     * of the 4 s of cold, 0.5 s. */
    cr_assert_eq(m.v.cold, S);
}

/* The first request's state: level 1 - 2.75 = -1.75 tokens (tokens -2,
 * frac 0.25), 7 permits stored (3.5 s of cold); the key lasts the refill
 * of 2.75 tokens (1.375 s) plus the time to cool from 7 to 8 (1 / 8 of 4 s =
 * 0.5 s): 1875 ms, when it equals a missing key. */
Test(token_bucket_warm, first_state_and_expiry)
{
    struct token_bucket_params p = guava(1);
    struct mem m = { 0 };
    struct token_bucket_result a, b;
    const char *err = NULL;

    step(&p, &m, T0, 1);
    cr_assert_eq(m.v.tokens, -2);
    cr_assert_eq(m.v.frac, TOKEN_BUCKET_FRAC_ONE / 4);
    cr_assert_eq(m.v.cold, 3500 * MS);
    cr_assert_eq(m.expiry_ms, 1875);
    /* At expiry the stored state decides as no key. */
    cr_assert_eq(token_bucket_decide(&p, &m.v, T0 + 1875 * MS, 1, &a, &err),
                 TOKEN_BUCKET_OK);
    cr_assert_eq(token_bucket_decide(&p, NULL, T0 + 1875 * MS, 1, &b, &err),
                 TOKEN_BUCKET_OK);
    cr_assert_eq(a.next.tokens, b.next.tokens);
    cr_assert_eq(a.next.frac, b.next.frac);
    cr_assert_eq(a.next.cold, b.next.cold);
    cr_assert_eq(a.expiry_ms, b.expiry_ms);
}

/* Idle time cools the bucket again, from the instant it stood full: a
 * full warm-up's worth makes it fully cold (2.75 tokens again), a quarter
 * of it adds 8 / 4 = 2 permits of cold (3 -> 5: 1.25 tokens). */
Test(token_bucket_warm, cools_while_full)
{
    struct token_bucket_params p = guava(1);
    struct mem m = { 0 }, m2;
    struct token_bucket_result r;
    int64_t now = T0 + (1375 + 1125 + 875 + 625 + 500) * MS;
    size_t i;

    for (i = 0; i < 5; i++) {
        step(&p, &m, i == 0 ? T0 : now, 1);
        now = i == 0 ? T0 + 1375 * MS
                     : now + (i == 1   ? 1125
                              : i == 2 ? 875
                              : i == 3 ? 625
                                       : 500) *
                                 MS;
    }
    /* Full again at `now`, 3 permits stored: 1.5 s of cold. */
    cr_assert_eq(m.v.cold, 1500 * MS);
    m2 = m;
    r = step(&p, &m, now + S, 1);
    cr_assert_eq(r.d.reset_after_ns, 625 * MS, "%lld",
                 (long long)r.d.reset_after_ns);
    r = step(&p, &m2, now + 4 * S, 1);
    cr_assert_eq(r.d.reset_after_ns, 1375 * MS);
    cr_assert_eq(m2.v.cold, 3500 * MS);
}

/* A bucket of 4: cold, its burst shrinks (2.75 + 2.25 tokens taken by two
 * requests, the third refused until 2 tokens of debt and 1 more refill: 1
 * s); warm (cold 0), it admits 4 at once as a plain bucket does. */
Test(token_bucket_warm, burst_cold_and_warm)
{
    struct token_bucket_params p = guava(4);
    struct mem m = { 0 };
    struct token_bucket_result r;
    int i;

    cr_assert_eq(step(&p, &m, T0, 1).d.remaining, 1);
    cr_assert_eq(step(&p, &m, T0, 1).d.limited, 0);
    r = step(&p, &m, T0, 1);
    cr_assert_eq(r.d.limited, 1);
    cr_assert_eq(r.d.remaining, 0);
    cr_assert_eq(r.d.retry_after_ns, S);
    cr_assert_eq(r.d.reset_after_ns, 5 * S / 2);

    m.have = 1;
    m.v = (struct token_bucket_state){ 4, 0, T0, 0 };
    for (i = 0; i < 4; i++) {
        cr_assert_eq(step(&p, &m, T0, 1).d.limited, 0, "request %d", i);
    }
    r = step(&p, &m, T0, 1);
    cr_assert_eq(r.d.limited, 1);
    cr_assert_eq(r.d.retry_after_ns, S / 2);
}

/* A cost of several tokens takes several permits of cold: 2 from 8 costs
 * the mean over [6, 8] (0.5 + 0.25 * 3 = 1.25 s a permit): 2.5 s, 5
 * tokens. A peek (cost 0) takes nothing and writes nothing. */
Test(token_bucket_warm, cost_and_peek)
{
    struct token_bucket_params p = guava(2);
    struct mem m = { 0 };
    struct token_bucket_result r;

    r = step(&p, &m, T0, 0);
    cr_assert_eq(r.d.limited, 0);
    cr_assert_eq(r.d.remaining, 2);
    cr_assert_eq(r.write, TOKEN_BUCKET_WRITE_NONE);
    r = step(&p, &m, T0, 2);
    cr_assert_eq(r.d.limited, 0);
    cr_assert_eq(r.d.reset_after_ns, 5 * S / 2);
    cr_assert_eq(m.v.cold, 3 * S);
    cr_assert_eq(m.v.tokens, -3);
    r = step(&p, &m, T0 + S, 0);
    cr_assert_eq(r.d.remaining, 0);
    cr_assert_eq(r.d.reset_after_ns, 3 * S / 2);
}

Test(token_bucket_warm, params_bounds)
{
    struct token_bucket_params p;
    const char *err = NULL;

    cr_assert_eq(token_bucket_params_init(&p, 10, 2000000, &err), 0);
    cr_assert_eq(token_bucket_params_warmup(&p, 0, 3, &err),
                 TOKEN_BUCKET_EARGS);
    cr_assert_str_eq(err, TOKEN_BUCKET_ERR_WARMUP);
    cr_assert_eq(token_bucket_params_warmup(&p, 86400001, 3, &err),
                 TOKEN_BUCKET_EARGS);
    cr_assert_eq(token_bucket_params_warmup(&p, 4000, 1, &err),
                 TOKEN_BUCKET_EARGS);
    cr_assert_str_eq(err, TOKEN_BUCKET_ERR_COLD);
    cr_assert_eq(token_bucket_params_warmup(&p, 4000, 1001, &err),
                 TOKEN_BUCKET_EARGS);
    /* 0.2 s at 2 tokens/s is under one token. */
    cr_assert_eq(token_bucket_params_warmup(&p, 200, 3, &err),
                 TOKEN_BUCKET_EARGS);
    cr_assert_str_eq(err, TOKEN_BUCKET_ERR_WARM_SPAN);
    cr_assert_eq(token_bucket_params_warmup(&p, 500, 3, &err), 0);
    cr_assert_eq(token_bucket_params_init(&p, 10, 1000000000000000, &err), 0);
    /* 1e9 tokens/s for 2 ms: 2e6 tokens, fine; a day: far too many. */
    cr_assert_eq(token_bucket_params_warmup(&p, 1000, 3, &err), 0);
    cr_assert_eq(token_bucket_params_warmup(&p, 1001, 3, &err),
                 TOKEN_BUCKET_EARGS);
    cr_assert_eq(token_bucket_params_init(&p, 10, TOKEN_BUCKET_RATE_INF, &err),
                 0);
    cr_assert_eq(token_bucket_params_warmup(&p, 4000, 3, &err),
                 TOKEN_BUCKET_EARGS);
    cr_assert_str_eq(err, TOKEN_BUCKET_ERR_WARM_INF);
}

/* The largest geometry and factor: every product stays in range and a
 * cold start charges cost * (just under) the factor. */
Test(token_bucket_warm, extremes)
{
    struct token_bucket_params p;
    struct mem m = { 0 };
    struct token_bucket_result r;
    const char *err = NULL;

    cr_assert_eq(token_bucket_params_init(&p, TOKEN_BUCKET_MAX_CAPACITY,
                                          1000000000000000, &err),
                 0);
    cr_assert_eq(token_bucket_params_warmup(&p, 1000, 1000, &err), 0);
    r = step(&p, &m, T0, TOKEN_BUCKET_MAX_CAPACITY);
    cr_assert_eq(r.d.limited, 0);
    cr_assert(m.v.tokens < 0 && m.v.tokens > -1000 * 2000000000LL);
    cr_assert_eq(m.v.cold, 0);
    r = step(&p, &m, T0 + 1, 1);
    cr_assert_eq(r.d.limited, 1);
    cr_assert(r.d.retry_after_ns > 0);
}
