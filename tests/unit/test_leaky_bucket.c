/* Leaky bucket: whole drips on boundaries, Sharkey's reply meanings, what
 * is written, peeks, refusals, the empty bucket's fresh drip clock, clock
 * jumps, idle years, the conf maxima, and that many small drains equal one
 * big one.
 *
 * Time is a parameter: every test steps `now` explicitly from T0, and a tiny
 * in-memory store applies the writes leaky_bucket_decide() asks for. */
#include "tests/support/px_test.h"
#include "tests/support/rl_test.h"

#include <criterion/parameterized.h>
#include <stdint.h>
#include <string.h>

#include "algorithms/leaky_bucket.h"
#include "algorithms/rl.h"

PX_TEST_SUITE(leaky_bucket);

#define S  RL_NS_PER_SEC
#define MS RL_NS_PER_MS

/* A realistic clock: 2023-11-14T22:13:20Z in nanoseconds. */
#define T0 INT64_C(1700000000000000000)

#define MAX_N  LEAKY_BUCKET_MAX_COUNT
#define MAX_MS LEAKY_BUCKET_MAX_DRIP_MS

/* The one key of a test, as a store holds it. */
struct mem {
    int have;                    /* the key exists */
    struct leaky_bucket_state v; /* its fields */
    int64_t expiry_ms;           /* the PEXPIRE of the last write */
};

static struct leaky_bucket_params mk(int64_t size, int64_t drip_ms,
                                     int64_t drip_size)
{
    struct leaky_bucket_params p;
    const char *err = NULL;

    cr_assert_eq(leaky_bucket_params_init(&p, size, drip_ms, drip_size, &err),
                 LEAKY_BUCKET_OK, "params: %s", err);
    return p;
}

/* One decision against the store; applies the write. */
static struct leaky_bucket_result step(const struct leaky_bucket_params *p,
                                       struct mem *m, int64_t now, int64_t cost)
{
    struct leaky_bucket_result r;
    const char *err = NULL;
    int rc =
        leaky_bucket_decide(p, m->have ? &m->v : NULL, now, cost, &r, &err);

    cr_assert_eq(rc, LEAKY_BUCKET_OK, "decide: %s", err);
    cr_assert(r.d.reset_after_ns >= 0, "negative reset %lld",
              (long long)r.d.reset_after_ns);
    cr_assert(r.d.retry_after_ns >= 0 || r.d.retry_after_ns == -S,
              "bad retry %lld", (long long)r.d.retry_after_ns);
    cr_assert(r.d.remaining >= 0 && r.d.remaining <= p->size);
    if (r.write == LEAKY_BUCKET_WRITE_SET) {
        cr_assert(!r.d.limited && cost > 0, "only admissions write");
        cr_assert(r.expiry_ms >= 1);
        cr_assert_eq(r.expiry_ms, r.d.reset_after_ns / MS +
                                      (r.d.reset_after_ns % MS != 0 ? 1 : 0));
        m->have = 1;
        m->v = r.next;
        m->expiry_ms = r.expiry_ms;
    }
    return r;
}

/* Decides against a given state (NULL: no key). */
static struct leaky_bucket_result at(const struct leaky_bucket_params *p,
                                     const struct leaky_bucket_state *st,
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
static void check_retry_exact(const struct leaky_bucket_params *p,
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

static void check_reply(const struct leaky_bucket_result *r, int64_t l,
                        int64_t lim, int64_t rem, int64_t retry, int64_t reset)
{
    rl_test_check_reply(&r->d, l, lim, rem, retry, reset);
}

/* ---------------- Basics ---------------- */

Test(leaky_bucket, new_key_pours_the_first_request_and_starts_the_drip_clock)
{
    struct leaky_bucket_params p = mk(5, 2000, 1);
    struct mem m = { 0 };
    struct leaky_bucket_result r = step(&p, &m, T0, 1);

    check_reply(&r, 0, 5, 4, -1, 2);
    cr_assert_eq(r.write, LEAKY_BUCKET_WRITE_SET);
    cr_assert_eq(m.v.level, 1);
    cr_assert_eq(m.v.ts_ns, T0);
    cr_assert_eq(m.expiry_ms, 2000);
}

Test(leaky_bucket, exactly_full_admits_size_requests_then_refuses)
{
    struct leaky_bucket_params p = mk(5, 1000, 1);
    struct mem m = { 0 };
    struct leaky_bucket_result r;

    for (int i = 4; i >= 0; i--) {
        r = step(&p, &m, T0, 1);
        cr_assert_eq(r.d.limited, 0);
        cr_assert_eq(r.d.remaining, i);
    }
    r = step(&p, &m, T0, 1);
    /* Sharkey: remaining 0, wait one drip to retry, five to clear. */
    check_reply(&r, 1, 5, 0, 1, 5);
    cr_assert_eq(r.d.retry_after_ns, 1 * S);
    cr_assert_eq(r.d.reset_after_ns, 5 * S);
    cr_assert_eq(r.write, LEAKY_BUCKET_WRITE_NONE);
    check_retry_exact(&p, &m, T0, 1, r.d.retry_after_ns);
}

Test(leaky_bucket, drains_only_on_whole_drip_boundaries)
{
    struct leaky_bucket_params p = mk(3, 1000, 1);
    struct mem m = { 0 };
    struct leaky_bucket_result r;

    step(&p, &m, T0, 3);
    r = step(&p, &m, T0 + 999 * MS, 1);
    cr_assert_eq(r.d.limited, 1);
    cr_assert_eq(r.d.retry_after_ns, 1 * MS);
    r = step(&p, &m, T0 + 1000 * MS - 1, 1);
    cr_assert_eq(r.d.retry_after_ns, 1);
    r = step(&p, &m, T0 + 1000 * MS, 1);
    cr_assert_eq(r.d.limited, 0);
    cr_assert_eq(m.v.ts_ns, T0 + 1 * S);
    /* 2.5 s in: two drips, the boundary stays on the whole second. */
    r = step(&p, &m, T0 + 2500 * MS, 0);
    cr_assert_eq(r.d.remaining, 1);
    cr_assert_eq(r.next.ts_ns, T0 + 2 * S);
    cr_assert_eq(r.d.reset_after_ns, 1500 * MS);
}

Test(leaky_bucket, drip_size_counts_whole_drips_for_retry_and_clear)
{
    struct leaky_bucket_params p = mk(10, 2000, 3);
    struct mem m = { 0 };
    struct leaky_bucket_result r;

    step(&p, &m, T0, 10);
    r = step(&p, &m, T0 + 500 * MS, 4);
    /* Level 10 must fall to 6: two drips of 3, at T0 + 4 s. */
    cr_assert_eq(r.d.retry_after_ns, 3500 * MS);
    /* Empty after four drips (12 >= 10), at T0 + 8 s. */
    cr_assert_eq(r.d.reset_after_ns, 7500 * MS);
    check_retry_exact(&p, &m, T0 + 500 * MS, 4, r.d.retry_after_ns);
    r = step(&p, &m, T0 + 2 * S, 0);
    cr_assert_eq(r.d.remaining, 3);
}

Test(leaky_bucket, empty_bucket_starts_a_fresh_drip_clock_like_a_missing_key)
{
    struct leaky_bucket_params p = mk(4, 1000, 1);
    struct leaky_bucket_state st = { 2, T0 };
    struct leaky_bucket_result a, b;

    /* Empty since T0 + 2 s; at T0 + 5.3 s it behaves as a new key. */
    a = at(&p, &st, T0 + 5300 * MS, 2);
    b = at(&p, NULL, T0 + 5300 * MS, 2);
    cr_assert(memcmp(&a.d, &b.d, sizeof(a.d)) == 0);
    cr_assert(memcmp(&a.next, &b.next, sizeof(a.next)) == 0);
    cr_assert_eq(a.next.ts_ns, T0 + 5300 * MS);
    cr_assert_eq(a.d.reset_after_ns, 2 * S);
}

Test(leaky_bucket, cost_above_size_never_passes_and_writes_nothing)
{
    struct leaky_bucket_params p = mk(5, 1000, 1);
    struct mem m = { 0 };
    struct leaky_bucket_result r;

    r = step(&p, &m, T0, 6);
    check_reply(&r, 1, 5, 5, -1, 0);
    cr_assert_eq(m.have, 0);
    step(&p, &m, T0, 2);
    r = step(&p, &m, T0, 6);
    check_reply(&r, 1, 5, 3, -1, 2);
    cr_assert_eq(r.write, LEAKY_BUCKET_WRITE_NONE);
}

Test(leaky_bucket, peek_reports_the_drained_level_and_never_writes)
{
    struct leaky_bucket_params p = mk(5, 1000, 1);
    struct mem m = { 0 };
    struct leaky_bucket_result r;

    r = step(&p, &m, T0, 0);
    check_reply(&r, 0, 5, 5, -1, 0);
    cr_assert_eq(m.have, 0);
    step(&p, &m, T0, 4);
    r = step(&p, &m, T0 + 2 * S, 0);
    check_reply(&r, 0, 5, 3, -1, 2);
    cr_assert_eq(r.write, LEAKY_BUCKET_WRITE_NONE);
    cr_assert_eq(m.v.level, 4);
    cr_assert_eq(m.v.ts_ns, T0);
}

Test(leaky_bucket, size_lowered_below_the_level_refuses_until_it_drains)
{
    struct leaky_bucket_params p = mk(3, 1000, 1);
    struct leaky_bucket_state st = { 6, T0 };
    struct leaky_bucket_result r;

    r = at(&p, &st, T0, 0);
    /* Even a peek does not fit an over-full bucket. */
    cr_assert_eq(r.d.limited, 1);
    cr_assert_eq(r.d.remaining, 0);
    cr_assert_eq(r.d.retry_after_ns, 3 * S);
    cr_assert_eq(r.d.reset_after_ns, 6 * S);
    r = at(&p, &st, T0, 1);
    cr_assert_eq(r.d.retry_after_ns, 4 * S);
    r = at(&p, &st, T0 + 4 * S, 1);
    cr_assert_eq(r.d.limited, 0);
    cr_assert_eq(r.next.level, 3);
}

/* ---------------- Time ---------------- */

Test(leaky_bucket, clock_not_moving_keeps_the_same_answer)
{
    struct leaky_bucket_params p = mk(2, 1000, 1);
    struct mem m = { 0 };
    struct leaky_bucket_result r;

    step(&p, &m, T0 + 300 * MS, 2);
    for (int i = 0; i < 5; i++) {
        r = step(&p, &m, T0 + 300 * MS, 1);
        check_reply(&r, 1, 2, 0, 1, 2);
        cr_assert_eq(r.d.retry_after_ns, 1 * S);
    }
}

Test(leaky_bucket, clock_going_back_drains_nothing_and_keeps_the_phase)
{
    struct leaky_bucket_params p = mk(3, 1000, 1);
    struct mem m = { 0 };
    struct leaky_bucket_result r;

    step(&p, &m, T0 + 10 * S, 2);
    r = step(&p, &m, T0, 1); /* 10 s back */
    cr_assert_eq(r.d.limited, 0);
    cr_assert_eq(m.v.level, 3);
    cr_assert_eq(m.v.ts_ns, T0 + 10 * S);
    cr_assert_eq(r.d.reset_after_ns, 13 * S);
    r = step(&p, &m, T0, 1);
    cr_assert_eq(r.d.limited, 1);
    cr_assert_eq(r.d.retry_after_ns, 11 * S);
    check_retry_exact(&p, &m, T0, 1, r.d.retry_after_ns);
}

Test(leaky_bucket, years_idle_empty_the_bucket_without_overflow)
{
    struct leaky_bucket_params p = mk(MAX_N, 1, MAX_N);
    struct leaky_bucket_state st = { MAX_N, 0 };
    struct leaky_bucket_result r;

    /* 9.2e12 drips of 2^53: the product overflows, the bucket is empty. */
    r = at(&p, &st, INT64_MAX, 1);
    cr_assert_eq(r.d.limited, 0);
    cr_assert_eq(r.next.level, 1);
    cr_assert_eq(r.next.ts_ns, INT64_MAX);
    cr_assert_eq(r.d.reset_after_ns, 1 * MS);

    p = mk(10, 1000, 1);
    st = (struct leaky_bucket_state){ 10, T0 };
    r = at(&p, &st, T0 + INT64_C(3650) * 86400 * S, 0);
    check_reply(&r, 0, 10, 10, -1, 0);
}

/* ---------------- Extremes ---------------- */

Test(leaky_bucket, max_size_with_the_longest_drip_saturates_durations)
{
    struct leaky_bucket_params p = mk(MAX_N, MAX_MS, 1);
    struct mem m = { 0 };
    struct leaky_bucket_result r;

    r = step(&p, &m, T0, MAX_N);
    cr_assert_eq(r.d.limited, 0);
    cr_assert_eq(r.d.remaining, 0);
    cr_assert_eq(r.d.reset_after_ns, INT64_MAX);
    r = step(&p, &m, T0, 1);
    cr_assert_eq(r.d.retry_after_ns, MAX_MS * MS);
    check_retry_exact(&p, &m, T0, 1, r.d.retry_after_ns);
    r = step(&p, &m, T0, MAX_N);
    cr_assert_eq(r.d.retry_after_ns, INT64_MAX);
    /* The latest representable time drains 23 drips of 3650 days. */
    r = step(&p, &m, INT64_MAX, 0);
    cr_assert_eq(r.d.remaining, (INT64_MAX - T0) / (MAX_MS * MS));
}

Test(leaky_bucket, max_drip_size_empties_in_one_drip)
{
    struct leaky_bucket_params p = mk(MAX_N, 1, MAX_N);
    struct mem m = { 0 };
    struct leaky_bucket_result r;

    step(&p, &m, T0, MAX_N);
    r = step(&p, &m, T0, MAX_N);
    cr_assert_eq(r.d.retry_after_ns, 1 * MS);
    cr_assert_eq(r.d.reset_after_ns, 1 * MS);
    r = step(&p, &m, T0 + 1 * MS, MAX_N);
    cr_assert_eq(r.d.limited, 0);
}

/* ---------------- Exactness ---------------- */

Test(leaky_bucket, many_small_drains_equal_one_big_drain)
{
    struct leaky_bucket_params p = mk(1000000, 7, 3);
    struct leaky_bucket_state small = { 1000000, T0 }, big = small;
    struct leaky_bucket_result r;
    uint64_t seed = 42;
    int64_t now = T0;

    for (int k = 0; k < 2000; k++) {
        seed = seed * 6364136223846793005u + 1442695040888963407u;
        now += (int64_t)((seed >> 33) % (20 * MS));
        r = at(&p, &small, now, 0);
        small = r.next;
    }
    r = at(&p, &big, now, 0);
    cr_assert(memcmp(&r.next, &small, sizeof(small)) == 0,
              "steps %lld@%lld, one %lld@%lld", (long long)small.level,
              (long long)small.ts_ns, (long long)r.next.level,
              (long long)r.next.ts_ns);
    cr_assert(small.level > 0, "the test must not drain to empty");
}

Test(leaky_bucket, random_sequences_keep_invariants_and_exact_retries)
{
    struct leaky_bucket_params p = mk(12, 333, 2);
    struct mem m = { 0 };
    uint64_t seed = 7;
    int64_t now = T0;

    for (int k = 0; k < 3000; k++) {
        struct leaky_bucket_result r;
        int64_t cost;

        seed = seed * 6364136223846793005u + 1442695040888963407u;
        now += (int64_t)((seed >> 33) % (400 * MS));
        cost = (int64_t)((seed >> 20) % 14);
        r = step(&p, &m, now, cost);
        if (r.d.limited && cost <= p.size) {
            check_retry_exact(&p, &m, now, cost, r.d.retry_after_ns);
        }
        if (r.d.limited) {
            cr_assert_eq(r.write, LEAKY_BUCKET_WRITE_NONE);
        }
    }
}

/* ---------------- Errors ---------------- */

/* One bad parameter set and its text. */
struct param_case {
    int64_t size, drip_ms, drip_size;
    const char *err;
};

static const struct param_case PARAM_CASES[] = {
    { 0, 1000, 1, LEAKY_BUCKET_ERR_SIZE },
    { -5, 1000, 1, LEAKY_BUCKET_ERR_SIZE },
    { MAX_N + 1, 1000, 1, LEAKY_BUCKET_ERR_SIZE },
    { 5, 0, 1, LEAKY_BUCKET_ERR_DRIP_MS },
    { 5, -1, 1, LEAKY_BUCKET_ERR_DRIP_MS },
    { 5, MAX_MS + 1, 1, LEAKY_BUCKET_ERR_DRIP_MS },
    { 5, INT64_MAX, 1, LEAKY_BUCKET_ERR_DRIP_MS },
    { 5, 1000, 0, LEAKY_BUCKET_ERR_DRIP_SIZE },
    { 5, 1000, MAX_N + 1, LEAKY_BUCKET_ERR_DRIP_SIZE },
};
#define NPARAM (sizeof(PARAM_CASES) / sizeof(*PARAM_CASES))

ParameterizedTestParameters(leaky_bucket, rejects_nonsense_parameters)
{
    static size_t ids[NPARAM];

    return px_param_ids(ids, NPARAM);
}

ParameterizedTest(size_t *id, leaky_bucket, rejects_nonsense_parameters)
{
    const struct param_case *c = &PARAM_CASES[*id];
    struct leaky_bucket_params p;
    struct leaky_bucket_result r;
    const char *err = NULL;
    int valid_drip;

    cr_assert_eq(
        leaky_bucket_params_init(&p, c->size, c->drip_ms, c->drip_size, &err),
        LEAKY_BUCKET_EARGS);
    cr_assert_str_eq(err, c->err);
    /* decide guards too, with parameters init never made (a drip out of
     * range becomes 0 ns). */
    valid_drip = c->drip_ms > 0 && c->drip_ms <= MAX_MS;
    p.size = c->size;
    p.drip_ns = valid_drip ? c->drip_ms * MS : 0;
    p.drip_size = c->drip_size;
    err = NULL;
    cr_assert_eq(leaky_bucket_decide(&p, NULL, T0, 1, &r, &err),
                 LEAKY_BUCKET_EARGS);
    cr_assert_str_eq(err, c->err);
    cr_assert_eq(r.write, LEAKY_BUCKET_WRITE_NONE);
}

Test(leaky_bucket, rejects_a_malformed_state_negative_time_and_cost)
{
    static const struct leaky_bucket_state bad[] = { { -1, T0 },
                                                     { 1, -1 },
                                                     { INT64_MIN, INT64_MIN } };
    struct leaky_bucket_params p = mk(5, 1000, 1);
    struct leaky_bucket_result r;
    const char *err = NULL;

    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        cr_assert_eq(leaky_bucket_decide(&p, &bad[i], T0, 1, &r, &err),
                     LEAKY_BUCKET_ESTATE);
        cr_assert_str_eq(err, LEAKY_BUCKET_ERR_STATE);
        cr_assert_eq(r.write, LEAKY_BUCKET_WRITE_NONE);
    }
    cr_assert_eq(leaky_bucket_decide(&p, NULL, -1, 1, &r, &err),
                 LEAKY_BUCKET_EARGS);
    cr_assert_str_eq(err, LEAKY_BUCKET_ERR_TIME);
    cr_assert_eq(leaky_bucket_decide(&p, NULL, T0, -1, &r, &err),
                 LEAKY_BUCKET_EARGS);
    cr_assert_str_eq(err, LEAKY_BUCKET_ERR_COST);
}

/* ---------------- Debt: LIMITER ADJUST and WAIT ---------------- */

/* One adjustment against the store; applies the write. */
static struct leaky_bucket_result adj(const struct leaky_bucket_params *p,
                                      struct mem *m, int64_t now, int64_t delta)
{
    struct leaky_bucket_result r;
    const char *err = NULL;

    cr_assert_eq(
        leaky_bucket_adjust(p, m->have ? &m->v : NULL, now, delta, &r, &err),
        LEAKY_BUCKET_OK, "adjust: %s", err);
    if (r.write == LEAKY_BUCKET_WRITE_SET) {
        cr_assert(r.expiry_ms >= 1);
        m->have = 1;
        m->v = r.next;
        m->expiry_ms = r.expiry_ms;
    }
    return r;
}

Test(leaky_bucket, adjust_pours_past_the_size_and_takes_back_to_empty)
{
    struct leaky_bucket_params p = mk(10, 1000, 2); /* 2 per second */
    struct leaky_bucket_result r;
    struct mem m = { 0 };

    /* 14 poured into an empty bucket of 10: never refused, a debt of 4
     * (plus 1 for a cost of 1) the drips pay in 3 s. */
    r = adj(&p, &m, T0, 14);
    cr_assert_eq(m.v.level, 14);
    cr_assert_eq(m.v.ts_ns, T0);
    check_reply(&r, 1, 10, 0, 3, 7);
    cr_assert_eq(m.expiry_ms, 7000);
    cr_assert_eq(at(&p, &m.v, T0 + 3 * S - 1, 1).d.limited, 1);
    cr_assert_eq(at(&p, &m.v, T0 + 3 * S, 1).d.limited, 0);
    /* Taken back after one drip (12 left): 5, then everything. */
    r = adj(&p, &m, T0 + 1500 * MS, -5);
    cr_assert_eq(m.v.level, 7);
    cr_assert_eq(m.v.ts_ns, T0 + 1 * S);
    check_reply(&r, 0, 10, 2, -1, 4);
    r = adj(&p, &m, T0 + 1500 * MS, -100);
    cr_assert_eq(m.v.level, 0);
    cr_assert_eq(m.expiry_ms, 1);
    check_reply(&r, 0, 10, 9, -1, 1);
    cr_assert_eq(adj(&p, &m, T0 + 2 * S, -1).write, LEAKY_BUCKET_WRITE_NONE);
    cr_assert_eq(adj(&p, &m, T0 + 2 * S, 0).write, LEAKY_BUCKET_WRITE_NONE);
    /* Pours stop at 2^53 - 1, what the twin can store. */
    adj(&p, &m, T0, MAX_N);
    adj(&p, &m, T0, MAX_N);
    cr_assert_eq(m.v.level, MAX_N);
}

Test(leaky_bucket, wait_reserves_a_request_due_exactly_at_the_edge)
{
    struct leaky_bucket_params p = mk(2, 1000, 1);
    struct leaky_bucket_result r;
    struct mem m = { 0 };
    const char *err = NULL;

    step(&p, &m, T0 + 250 * MS, 2); /* full; the first drip at +1.25 s */
    cr_assert_eq(leaky_bucket_decide_wait(&p, &m.v, T0 + 500 * MS, 1,
                                          750 * MS - 1, &r, &err),
                 LEAKY_BUCKET_OK);
    cr_assert_eq(r.d.limited, 1);
    cr_assert_eq(r.d.retry_after_ns, 750 * MS);
    cr_assert_eq(r.write, LEAKY_BUCKET_WRITE_NONE);
    cr_assert_eq(leaky_bucket_decide_wait(&p, &m.v, T0 + 500 * MS, 1, 750 * MS,
                                          &r, &err),
                 LEAKY_BUCKET_OK);
    cr_assert_eq(r.d.limited, 1);
    cr_assert_eq(r.d.retry_after_ns, 750 * MS);
    cr_assert_eq(r.d.remaining, 0);
    cr_assert_eq(r.d.reset_after_ns, 2750 * MS);
    cr_assert_eq(r.write, LEAKY_BUCKET_WRITE_SET);
    cr_assert_eq(r.next.level, 3);
    cr_assert_eq(r.next.ts_ns, T0 + 250 * MS);
    cr_assert_eq(r.expiry_ms, 2750);
}
