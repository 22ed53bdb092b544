/* Token bucket: lazy refill with exact fixed-point, the reply fields, what
 * is written, peeks, refusals, the unlimited rate, clock jumps, idle years,
 * the conf maxima, and that many small refills equal one big one.
 *
 * Time is a parameter: every test steps `now` explicitly from T0, and a tiny
 * in-memory store applies the writes token_bucket_decide() asks for. */
#include "tests/support/px_test.h"
#include "tests/support/rl_test.h"

#include <criterion/parameterized.h>
#include <stdint.h>
#include <string.h>

#include "algorithms/rl.h"
#include "algorithms/token_bucket.h"

PX_TEST_SUITE(token_bucket);

#define S  RL_NS_PER_SEC
#define MS RL_NS_PER_MS
#define M  INT64_C(1000000) /* one token per second, in millionths */

/* A realistic clock: 2023-11-14T22:13:20Z in nanoseconds. */
#define T0 INT64_C(1700000000000000000)

#define MAX_CAP TOKEN_BUCKET_MAX_CAPACITY
#define ONE     TOKEN_BUCKET_FRAC_ONE

/* The one key of a test, as a store holds it. */
struct mem {
    int have;                    /* the key exists */
    struct token_bucket_state v; /* its fields */
    int64_t expiry_ms;           /* the PEXPIRE of the last write */
};

static struct token_bucket_params mk(int64_t cap, int64_t rate)
{
    struct token_bucket_params p;
    const char *err = NULL;

    cr_assert_eq(token_bucket_params_init(&p, cap, rate, &err), TOKEN_BUCKET_OK,
                 "params %lld %lld: %s", (long long)cap, (long long)rate, err);
    return p;
}

/* One decision against the store; applies the write. */
static struct token_bucket_result step(const struct token_bucket_params *p,
                                       struct mem *m, int64_t now, int64_t cost)
{
    struct token_bucket_result r;
    const char *err = NULL;
    int rc =
        token_bucket_decide(p, m->have ? &m->v : NULL, now, cost, &r, &err);

    cr_assert_eq(rc, TOKEN_BUCKET_OK, "decide: %s", err);
    cr_assert(r.d.reset_after_ns >= 0, "negative reset %lld",
              (long long)r.d.reset_after_ns);
    cr_assert(r.d.retry_after_ns >= 0 || r.d.retry_after_ns == -S,
              "bad retry %lld", (long long)r.d.retry_after_ns);
    cr_assert(r.d.remaining >= 0 && r.d.remaining <= p->capacity);
    if (r.write == TOKEN_BUCKET_WRITE_SET) {
        cr_assert(!r.d.limited && cost > 0, "only admissions write");
        cr_assert(r.expiry_ms >= 1);
        m->have = 1;
        m->v = r.next;
        m->expiry_ms = r.expiry_ms;
    }
    return r;
}

/* Decides without a store: the state is given. */
static struct token_bucket_result at(const struct token_bucket_params *p,
                                     const struct token_bucket_state *st,
                                     int64_t now, int64_t cost)
{
    struct mem m = { 0 };

    if (st != NULL) {
        m.have = 1;
        m.v = *st;
    }
    return step(p, &m, now, cost);
}

/* Asserts that a refusal's retry_after is exact: the same request passes
 * at now + retry and is still refused one ns earlier. */
static void check_retry_exact(const struct token_bucket_params *p,
                              const struct mem *m, int64_t now, int64_t cost,
                              int64_t retry)
{
    struct mem a = *m, b = *m;

    cr_assert(retry > 0, "retry %lld", (long long)retry);
    cr_assert_eq(step(p, &a, now + retry, cost).d.limited, 0,
                 "refused at now + retry");
    cr_assert_eq(step(p, &b, now + retry - 1, cost).d.limited, 1,
                 "admitted 1 ns before retry");
}

static void check_reply(const struct token_bucket_result *r, int64_t l,
                        int64_t lim, int64_t rem, int64_t retry, int64_t reset)
{
    rl_test_check_reply(&r->d, l, lim, rem, retry, reset);
}

/* ---------------- Basics ---------------- */

Test(token_bucket, new_key_is_a_full_bucket_and_first_request_writes)
{
    struct token_bucket_params p = mk(10, 1 * M);
    struct mem m = { 0 };
    struct token_bucket_result r = step(&p, &m, T0, 1);

    check_reply(&r, 0, 10, 9, -1, 1);
    cr_assert_eq(r.d.reset_after_ns, 1 * S);
    cr_assert_eq(r.write, TOKEN_BUCKET_WRITE_SET);
    cr_assert_eq(m.v.tokens, 9);
    cr_assert_eq(m.v.frac, 0);
    cr_assert_eq(m.v.ts_ns, T0);
    cr_assert_eq(m.expiry_ms, 1000);
}

Test(token_bucket, exactly_full_bucket_admits_its_capacity_then_refuses)
{
    struct token_bucket_params p = mk(5, 1 * M);
    struct mem m = { 0 };
    struct token_bucket_result r;

    r = step(&p, &m, T0, 5);
    check_reply(&r, 0, 5, 0, -1, 5);
    r = step(&p, &m, T0, 1);
    check_reply(&r, 1, 5, 0, 1, 5);
    cr_assert_eq(r.d.retry_after_ns, 1 * S);
    cr_assert_eq(r.write, TOKEN_BUCKET_WRITE_NONE);
    check_retry_exact(&p, &m, T0, 1, r.d.retry_after_ns);
}

Test(token_bucket, refused_request_writes_nothing_and_keeps_the_state)
{
    struct token_bucket_params p = mk(3, 1 * M);
    struct mem m = { 0 };
    struct token_bucket_state before;
    struct token_bucket_result r;

    step(&p, &m, T0, 3);
    before = m.v;
    r = step(&p, &m, T0 + 500 * MS, 1);
    cr_assert_eq(r.d.limited, 1);
    cr_assert_eq(r.write, TOKEN_BUCKET_WRITE_NONE);
    cr_assert_eq(r.d.retry_after_ns, 500 * MS);
    cr_assert(memcmp(&m.v, &before, sizeof(before)) == 0);
    /* The refusal consumed nothing: 1 s after the drain one token is back. */
    r = step(&p, &m, T0 + 1 * S, 1);
    cr_assert_eq(r.d.limited, 0);
    cr_assert_eq(r.d.remaining, 0);
}

Test(token_bucket, retry_is_the_time_until_cost_tokens_and_is_exact)
{
    struct token_bucket_params p = mk(10, 2500000); /* 2.5 tokens/s */
    struct mem m = { 0 };
    struct token_bucket_result r;

    step(&p, &m, T0, 10);
    r = step(&p, &m, T0, 3);
    /* 3 tokens at 2.5/s: 1.2 s. */
    cr_assert_eq(r.d.retry_after_ns, 1200 * MS);
    check_retry_exact(&p, &m, T0, 3, r.d.retry_after_ns);
    cr_assert_eq(r.d.reset_after_ns, 4 * S);
    check_reply(&r, 1, 10, 0, 2, 4);
}

Test(token_bucket, one_token_arrives_exactly_at_400_ms_for_2_5_per_second)
{
    struct token_bucket_params p = mk(10, 2500000);
    struct mem m = { 0 };
    struct token_bucket_result r;

    step(&p, &m, T0, 10);
    r = step(&p, &m, T0 + 400 * MS - 1, 0);
    cr_assert_eq(r.d.remaining, 0);
    cr_assert_eq(r.next.frac, ONE - 2500000); /* 1 ns short of a token */
    r = step(&p, &m, T0 + 400 * MS, 0);
    cr_assert_eq(r.d.remaining, 1);
    cr_assert_eq(r.next.frac, 0);
}

Test(token_bucket, cost_above_capacity_never_passes_and_writes_nothing)
{
    struct token_bucket_params p = mk(5, 1 * M);
    struct mem m = { 0 };
    struct token_bucket_result r;

    r = step(&p, &m, T0, 6);
    check_reply(&r, 1, 5, 5, -1, 0);
    cr_assert_eq(r.write, TOKEN_BUCKET_WRITE_NONE);
    cr_assert_eq(m.have, 0);
    step(&p, &m, T0, 2);
    r = step(&p, &m, T0, 6);
    check_reply(&r, 1, 5, 3, -1, 2);
}

Test(token_bucket, peek_reports_the_refilled_level_and_never_writes)
{
    struct token_bucket_params p = mk(10, 1 * M);
    struct mem m = { 0 };
    struct token_bucket_result r;

    r = step(&p, &m, T0, 0);
    check_reply(&r, 0, 10, 10, -1, 0);
    cr_assert_eq(r.write, TOKEN_BUCKET_WRITE_NONE);
    cr_assert_eq(m.have, 0);
    step(&p, &m, T0, 8);
    r = step(&p, &m, T0 + 3500 * MS, 0);
    cr_assert_eq(r.write, TOKEN_BUCKET_WRITE_NONE);
    cr_assert_eq(r.d.remaining, 5);
    cr_assert_eq(r.d.reset_after_ns, 4500 * MS);
    cr_assert_eq(m.v.tokens, 2);
    cr_assert_eq(m.v.ts_ns, T0);
}

Test(token_bucket, unlimited_rate_admits_everything_and_stores_nothing)
{
    struct token_bucket_params p = mk(7, TOKEN_BUCKET_RATE_INF);
    struct mem m = { 0 };
    struct token_bucket_result r;

    cr_assert(p.unlimited);
    for (int i = 0; i < 100; i++) {
        r = step(&p, &m, T0, 7);
        check_reply(&r, 0, 7, 7, -1, 0);
    }
    r = step(&p, &m, T0, 1000);
    check_reply(&r, 0, 7, 7, -1, 0);
    cr_assert_eq(m.have, 0);
}

Test(token_bucket, expiry_is_the_reset_rounded_up_to_whole_ms)
{
    struct token_bucket_params p = mk(1, 3 * M); /* a token every 1/3 s */
    struct mem m = { 0 };
    struct token_bucket_result r = step(&p, &m, T0, 1);

    cr_assert_eq(r.d.reset_after_ns, 333333334);
    cr_assert_eq(r.expiry_ms, 334);
}

/* ---------------- Time ---------------- */

Test(token_bucket, clock_not_moving_drains_then_refuses_with_a_stable_retry)
{
    struct token_bucket_params p = mk(4, 1 * M);
    struct mem m = { 0 };
    struct token_bucket_result r;

    for (int i = 3; i >= 0; i--) {
        r = step(&p, &m, T0, 1);
        cr_assert_eq(r.d.remaining, i);
    }
    for (int i = 0; i < 3; i++) {
        r = step(&p, &m, T0, 1);
        cr_assert_eq(r.d.limited, 1);
        cr_assert_eq(r.d.retry_after_ns, 1 * S);
        cr_assert_eq(r.d.reset_after_ns, 4 * S);
    }
}

Test(token_bucket, clock_going_back_refills_nothing_and_keeps_the_stored_time)
{
    struct token_bucket_params p = mk(4, 1 * M);
    struct mem m = { 0 };
    struct token_bucket_result r;

    step(&p, &m, T0 + 10 * S, 3); /* 1 token left, credited to T0 + 10 s */
    r = step(&p, &m, T0, 1);      /* the clock jumped 10 s back */
    cr_assert_eq(r.d.limited, 0);
    cr_assert_eq(m.v.ts_ns, T0 + 10 * S);
    cr_assert_eq(m.v.tokens, 0);
    /* Refill resumes at T0 + 10 s: the gap is part of both durations. */
    r = step(&p, &m, T0, 1);
    cr_assert_eq(r.d.limited, 1);
    cr_assert_eq(r.d.retry_after_ns, 11 * S);
    cr_assert_eq(r.d.reset_after_ns, 14 * S);
    check_retry_exact(&p, &m, T0, 1, r.d.retry_after_ns);
    /* Back on time, everything is as if the jump never happened. */
    r = step(&p, &m, T0 + 12 * S, 0);
    cr_assert_eq(r.d.remaining, 2);
}

Test(token_bucket, clock_far_behind_a_full_bucket_keeps_it_full)
{
    struct token_bucket_params p = mk(4, 1 * M);
    struct token_bucket_state st = { 4, 0, T0, 0 };
    struct token_bucket_result r = at(&p, &st, 0, 1);

    cr_assert_eq(r.d.limited, 0);
    cr_assert_eq(r.next.ts_ns, T0);
    cr_assert_eq(r.d.reset_after_ns, T0 + 1 * S);
}

Test(token_bucket, years_idle_refill_to_exactly_full_without_overflow)
{
    struct token_bucket_params p = mk(MAX_CAP, TOKEN_BUCKET_MAX_RATE_MICRO);
    struct token_bucket_state st = { 0, 0, 0, 0 };
    struct token_bucket_result r;

    /* From the epoch to 2262: e * rate is about 2^113. */
    r = at(&p, &st, INT64_MAX, 0);
    cr_assert_eq(r.d.remaining, MAX_CAP);
    cr_assert_eq(r.next.frac, 0);
    cr_assert_eq(r.d.reset_after_ns, 0);

    p = mk(10, 1);
    st = (struct token_bucket_state){ 0, 0, T0, 0 };
    r = at(&p, &st, T0 + 10 * 365 * 24 * 3600 * S, 0);
    /* 1e-6 tokens/s for 3650 days: 315.36 tokens worth, capped at 10. */
    cr_assert_eq(r.d.remaining, 10);
    r = at(&p, &st, INT64_MAX, 1);
    cr_assert_eq(r.d.remaining, 9);
}

/* ---------------- Extremes ---------------- */

Test(token_bucket, max_capacity_at_max_rate_refills_one_token_per_ns)
{
    struct token_bucket_params p = mk(MAX_CAP, TOKEN_BUCKET_MAX_RATE_MICRO);
    struct mem m = { 0 };
    struct token_bucket_result r;

    r = step(&p, &m, T0, MAX_CAP);
    cr_assert_eq(r.d.remaining, 0);
    cr_assert_eq(r.d.reset_after_ns, MAX_CAP); /* ~104 days */
    r = step(&p, &m, T0 + 1000, 0);
    cr_assert_eq(r.d.remaining, 1000);
    r = step(&p, &m, T0, MAX_CAP);
    cr_assert_eq(r.d.retry_after_ns, MAX_CAP);
    check_retry_exact(&p, &m, T0, MAX_CAP, r.d.retry_after_ns);
}

Test(token_bucket, max_capacity_at_the_slowest_rate_saturates_durations)
{
    struct token_bucket_params p = mk(MAX_CAP, 1);
    struct mem m = { 0 };
    struct token_bucket_result r;
    int64_t out[5];

    r = step(&p, &m, T0, MAX_CAP);
    cr_assert_eq(r.d.limited, 0);
    /* 2^53 tokens at 1e-6 tokens/s is ~2.9e14 years: beyond int64 ns. */
    cr_assert_eq(r.d.reset_after_ns, INT64_MAX);
    cr_assert_eq(r.expiry_ms, INT64_MAX / MS + 1);
    /* Asking for everything again: a wait beyond int64 nanoseconds. */
    r = step(&p, &m, T0, MAX_CAP);
    cr_assert_eq(r.d.limited, 1);
    cr_assert_eq(r.d.retry_after_ns, INT64_MAX);
    rl_reply_ints(&r.d, out);
    cr_assert_eq(out[3], INT64_MAX / S + 1);
    /* By 2262 the slowest rate has brought ~7500 tokens, no overflow. */
    r = step(&p, &m, INT64_MAX, 0);
    cr_assert_eq(r.d.remaining, (INT64_MAX - T0) / ONE);
    /* One token takes 1e6 s; one ns before it, still nothing. */
    r = step(&p, &m, T0 + 1000000 * S - 1, 0);
    cr_assert_eq(r.d.remaining, 0);
    cr_assert_eq(r.next.frac, ONE - 1);
    r = step(&p, &m, T0 + 1000000 * S, 1);
    cr_assert_eq(r.d.limited, 0);
}

Test(token_bucket, capacity_lowered_below_the_stored_level_reads_full)
{
    struct token_bucket_params p = mk(3, 1 * M);
    struct token_bucket_state st = { 100, 5, T0 - S, 0 };
    struct token_bucket_result r = at(&p, &st, T0, 1);

    check_reply(&r, 0, 3, 2, -1, 1);
    cr_assert_eq(r.next.frac, 0);
    cr_assert_eq(r.next.ts_ns, T0);
}

/* ---------------- Exactness ---------------- */

Test(token_bucket, many_small_refills_equal_one_big_refill)
{
    /* 7 millionths of a token per second: nothing divides evenly. */
    static const int64_t rates[] = { 7, 3 * M, 2500000, 999999999,
                                     TOKEN_BUCKET_MAX_RATE_MICRO };
    uint64_t seed = 42;

    for (size_t i = 0; i < sizeof(rates) / sizeof(*rates); i++) {
        struct token_bucket_params p = mk(MAX_CAP, rates[i]);
        struct token_bucket_state small = { 0, 0, T0, 0 }, big;
        struct token_bucket_result r;
        int64_t now = T0;

        for (int k = 0; k < 1000; k++) {
            seed = seed * 6364136223846793005u + 1442695040888963407u;
            now += (int64_t)(seed >> 40); /* up to ~16.7 ms per step */
            r = at(&p, &small, now, 0);
            small = r.next;
        }
        big = (struct token_bucket_state){ 0, 0, T0, 0 };
        r = at(&p, &big, now, 0);
        cr_assert(memcmp(&r.next, &small, sizeof(small)) == 0,
                  "rate %lld: steps %lld+%lld, one %lld+%lld",
                  (long long)rates[i], (long long)small.tokens,
                  (long long)small.frac, (long long)r.next.tokens,
                  (long long)r.next.frac);
    }
}

Test(token_bucket, random_sequences_keep_invariants_and_exact_retries)
{
    struct token_bucket_params p = mk(20, 3333333);
    struct mem m = { 0 };
    uint64_t seed = 7;
    int64_t now = T0;

    for (int k = 0; k < 3000; k++) {
        struct token_bucket_result r;
        int64_t cost;

        seed = seed * 6364136223846793005u + 1442695040888963407u;
        now += (int64_t)((seed >> 33) % (700 * MS));
        cost = (int64_t)((seed >> 20) % 23);
        r = step(&p, &m, now, cost);
        if (r.d.limited && cost <= p.capacity) {
            check_retry_exact(&p, &m, now, cost, r.d.retry_after_ns);
        }
        if (r.d.limited) {
            cr_assert_eq(r.write, TOKEN_BUCKET_WRITE_NONE);
        }
    }
}

/* ---------------- Errors ---------------- */

/* One bad parameter set. */
struct param_case {
    int64_t cap;  /* capacity */
    int64_t rate; /* refill_per_sec_micro */
    const char *err;
};

static const struct param_case PARAM_CASES[] = {
    { 0, M, TOKEN_BUCKET_ERR_CAPACITY },
    { -1, M, TOKEN_BUCKET_ERR_CAPACITY },
    { MAX_CAP + 1, M, TOKEN_BUCKET_ERR_CAPACITY },
    { 1, 0, TOKEN_BUCKET_ERR_RATE },
    { 1, -1, TOKEN_BUCKET_ERR_RATE },
    { 1, TOKEN_BUCKET_MAX_RATE_MICRO + 1, TOKEN_BUCKET_ERR_RATE },
    { 1, INT64_MAX - 1, TOKEN_BUCKET_ERR_RATE },
};
#define NPARAM (sizeof(PARAM_CASES) / sizeof(*PARAM_CASES))

ParameterizedTestParameters(token_bucket, rejects_nonsense_parameters)
{
    static size_t ids[NPARAM];

    return px_param_ids(ids, NPARAM);
}

ParameterizedTest(size_t *id, token_bucket, rejects_nonsense_parameters)
{
    const struct param_case *c = &PARAM_CASES[*id];
    struct token_bucket_params p;
    struct token_bucket_result r;
    const char *err = NULL;

    cr_assert_eq(token_bucket_params_init(&p, c->cap, c->rate, &err),
                 TOKEN_BUCKET_EARGS);
    cr_assert_str_eq(err, c->err);
    /* decide guards too, with parameters that init never made. */
    p.capacity = c->cap;
    p.rate_micro = c->rate;
    p.unlimited = 0;
    err = NULL;
    cr_assert_eq(token_bucket_decide(&p, NULL, T0, 1, &r, &err),
                 TOKEN_BUCKET_EARGS);
    cr_assert_str_eq(err, c->err);
    cr_assert_eq(r.write, TOKEN_BUCKET_WRITE_NONE);
}

/* One malformed stored state. */
struct state_case {
    struct token_bucket_state st;
};

static const struct state_case STATE_CASES[] = {
    { { -MAX_CAP - 1, 0, T0, 0 } }, /* a debt deeper than any adjust makes */
    { { 1, -1, T0, 0 } },
    { { 1, ONE, T0, 0 } },
    { { 1, 0, -1, 0 } },
    { { INT64_MIN, INT64_MIN, INT64_MIN, 0 } },
};
#define NSTATE (sizeof(STATE_CASES) / sizeof(*STATE_CASES))

ParameterizedTestParameters(token_bucket, rejects_a_malformed_state)
{
    static size_t ids[NSTATE];

    return px_param_ids(ids, NSTATE);
}

ParameterizedTest(size_t *id, token_bucket, rejects_a_malformed_state)
{
    struct token_bucket_params p = mk(10, M);
    struct token_bucket_result r;
    const char *err = NULL;

    cr_assert_eq(token_bucket_decide(&p, &STATE_CASES[*id].st, T0, 1, &r, &err),
                 TOKEN_BUCKET_ESTATE);
    cr_assert_str_eq(err, TOKEN_BUCKET_ERR_STATE);
    cr_assert_eq(r.write, TOKEN_BUCKET_WRITE_NONE);
}

Test(token_bucket, rejects_negative_time_and_negative_cost)
{
    struct token_bucket_params p = mk(10, M);
    struct token_bucket_result r;
    const char *err = NULL;

    cr_assert_eq(token_bucket_decide(&p, NULL, -1, 1, &r, &err),
                 TOKEN_BUCKET_EARGS);
    cr_assert_str_eq(err, TOKEN_BUCKET_ERR_TIME);
    cr_assert_eq(token_bucket_decide(&p, NULL, T0, -1, &r, &err),
                 TOKEN_BUCKET_EARGS);
    cr_assert_str_eq(err, TOKEN_BUCKET_ERR_COST);
}

/* ---------------- Debt: LIMITER ADJUST and WAIT ---------------- */

/* One adjustment against the store; applies the write. */
static struct token_bucket_result adj(const struct token_bucket_params *p,
                                      struct mem *m, int64_t now, int64_t delta)
{
    struct token_bucket_result r;
    const char *err = NULL;

    cr_assert_eq(
        token_bucket_adjust(p, m->have ? &m->v : NULL, now, delta, &r, &err),
        TOKEN_BUCKET_OK, "adjust: %s", err);
    if (r.write == TOKEN_BUCKET_WRITE_SET) {
        cr_assert(r.expiry_ms >= 1);
        m->have = 1;
        m->v = r.next;
        m->expiry_ms = r.expiry_ms;
    }
    return r;
}

Test(token_bucket, adjust_charges_into_a_debt_that_the_refill_pays_back)
{
    struct token_bucket_params p = mk(10, 1 * M);
    struct mem m = { 0 };
    struct token_bucket_result r;

    /* 15 tokens of work done against a full bucket of 10: never refused,
     * 5 tokens of debt, and the reply is a peek of cost 1 after it. */
    r = adj(&p, &m, T0, 15);
    cr_assert_eq(r.write, TOKEN_BUCKET_WRITE_SET);
    cr_assert_eq(m.v.tokens, -5);
    cr_assert_eq(r.d.limited, 1);
    cr_assert_eq(r.d.remaining, 0);
    cr_assert_eq(r.d.retry_after_ns, 6 * S);
    cr_assert_eq(r.d.reset_after_ns, 15 * S);
    cr_assert_eq(m.expiry_ms, 15000);
    /* Refused until the debt and one token are refilled, exactly. */
    cr_assert_eq(at(&p, &m.v, T0 + 6 * S - 1, 1).d.limited, 1);
    cr_assert_eq(at(&p, &m.v, T0 + 6 * S, 1).d.limited, 0);
    /* Charges add up, and stop at 2^53 - 1 below full. */
    adj(&p, &m, T0, MAX_CAP);
    cr_assert_eq(m.v.tokens, 10 - MAX_CAP);
    cr_assert_eq(m.v.frac, 0);
    r = adj(&p, &m, T0, 1);
    cr_assert_eq(m.v.tokens, 10 - MAX_CAP);
}

Test(token_bucket, adjust_gives_back_at_most_a_full_bucket_and_zero_writes_no)
{
    struct token_bucket_params p = mk(10, 1 * M);
    struct mem m = { 0 };
    struct token_bucket_result r;

    step(&p, &m, T0, 7); /* 3 left */
    r = adj(&p, &m, T0 + 500 * MS, -4);
    cr_assert_eq(m.v.tokens, 7);
    cr_assert_eq(m.v.frac, ONE / 2);
    check_reply(&r, 0, 10, 6, -1, 4); /* a peek of cost 1: 6.5 left */
    cr_assert_eq(r.d.reset_after_ns, 3500 * MS);
    r = adj(&p, &m, T0 + 500 * MS, -100);
    cr_assert_eq(m.v.tokens, 10);
    cr_assert_eq(m.v.frac, 0);
    cr_assert_eq(m.expiry_ms, 1);
    check_reply(&r, 0, 10, 9, -1, 1);
    /* Nothing to change: no write. */
    cr_assert_eq(adj(&p, &m, T0 + 1 * S, -1).write, TOKEN_BUCKET_WRITE_NONE);
    cr_assert_eq(adj(&p, &m, T0 + 1 * S, 0).write, TOKEN_BUCKET_WRITE_NONE);
    m.have = 0;
    cr_assert_eq(adj(&p, &m, T0, -3).write, TOKEN_BUCKET_WRITE_NONE);
    cr_assert_eq(m.have, 0);
}

Test(token_bucket, plain_bucket_reads_a_warm_up_bucket_in_debt)
{
    /* RELOAD from warm-up to plain: the warm state (tokens below 0, a
     * cold) is read as the debt it is. */
    struct token_bucket_params p = mk(10, 1 * M);
    struct token_bucket_state st = { -3, ONE / 4, T0, 5 * S };
    struct token_bucket_result r = at(&p, &st, T0, 1);

    cr_assert_eq(r.d.limited, 1);
    cr_assert_eq(r.d.retry_after_ns, 3750 * MS);
    cr_assert_eq(at(&p, &st, T0 + 3750 * MS, 1).d.limited, 0);
}

Test(token_bucket, wait_reserves_a_request_due_exactly_at_the_edge)
{
    struct token_bucket_params p = mk(2, 1 * M);
    struct token_bucket_result r;
    struct mem m = { 0 };
    struct token_bucket_state before;
    const char *err = NULL;

    step(&p, &m, T0, 2);
    before = m.v;
    /* Due in 1 s: a wait 1 ns shorter refuses it and writes nothing. */
    cr_assert_eq(token_bucket_decide_wait(&p, &m.v, T0, 1, S - 1, &r, &err),
                 TOKEN_BUCKET_OK);
    cr_assert_eq(r.d.limited, 1);
    cr_assert_eq(r.d.retry_after_ns, S);
    cr_assert_eq(r.write, TOKEN_BUCKET_WRITE_NONE);
    /* A wait of exactly 1 s reserves it: taken now, a debt of 1. */
    cr_assert_eq(token_bucket_decide_wait(&p, &m.v, T0, 1, S, &r, &err),
                 TOKEN_BUCKET_OK);
    cr_assert_eq(r.d.limited, 1);
    cr_assert_eq(r.d.retry_after_ns, S);
    cr_assert_eq(r.d.remaining, 0);
    cr_assert_eq(r.d.reset_after_ns, 3 * S);
    cr_assert_eq(r.write, TOKEN_BUCKET_WRITE_SET);
    cr_assert_eq(r.next.tokens, -1);
    cr_assert_eq(r.expiry_ms, 3000);
    cr_assert(memcmp(&m.v, &before, sizeof(before)) == 0);
    /* The next one queues behind it: due in 2 s. */
    m.v = r.next;
    cr_assert_eq(token_bucket_decide_wait(&p, &m.v, T0, 1, 2 * S, &r, &err),
                 TOKEN_BUCKET_OK);
    cr_assert_eq(r.d.retry_after_ns, 2 * S);
    cr_assert_eq(r.next.tokens, -2);
    /* A cost above the capacity is never reserved. */
    cr_assert_eq(token_bucket_decide_wait(&p, NULL, T0, 3, 100 * S, &r, &err),
                 TOKEN_BUCKET_OK);
    cr_assert_eq(r.write, TOKEN_BUCKET_WRITE_NONE);
    cr_assert_eq(r.d.retry_after_ns, -S);
}
