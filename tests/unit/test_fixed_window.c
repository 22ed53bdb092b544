/* Fixed window: epoch-aligned windows, the edge to the ns, the reply fields,
 * what is written and for how long, peeks, refusals, stale and future
 * windows (clock jumps), idle years, the conf maxima, and that many small
 * requests equal one big one.
 *
 * Time is a parameter: every test steps `now` explicitly, and a tiny
 * in-memory store applies the writes fixed_window_decide() asks for. */
#include "tests/support/px_test.h"
#include "tests/support/rl_test.h"

#include <criterion/parameterized.h>
#include <stdint.h>
#include <string.h>

#include "algorithms/fixed_window.h"
#include "algorithms/rl.h"

PX_TEST_SUITE(fixed_window);

#define S  RL_NS_PER_SEC
#define MS RL_NS_PER_MS

/* 2023-11-14T22:13:00Z: a minute boundary (1700000000 s is 20 s past). */
#define M0 INT64_C(1699999980000000000)

#define MAX_N  FIXED_WINDOW_MAX_COUNT
#define MAX_MS FIXED_WINDOW_MAX_WINDOW_MS

/* The one key of a test, as a store holds it. */
struct mem {
    int have;                    /* the key exists */
    struct fixed_window_state v; /* its fields */
    int64_t expiry_ms;           /* the PEXPIRE of the last write */
};

static struct fixed_window_params mk(int64_t max, int64_t window_ms)
{
    struct fixed_window_params p;
    const char *err = NULL;

    cr_assert_eq(fixed_window_params_init(&p, max, window_ms, &err),
                 FIXED_WINDOW_OK, "params: %s", err);
    return p;
}

/* One decision against the store; applies the write. */
static struct fixed_window_result step(const struct fixed_window_params *p,
                                       struct mem *m, int64_t now, int64_t cost)
{
    struct fixed_window_result r;
    const char *err = NULL;
    int rc =
        fixed_window_decide(p, m->have ? &m->v : NULL, now, cost, &r, &err);

    cr_assert_eq(rc, FIXED_WINDOW_OK, "decide: %s", err);
    cr_assert(r.d.reset_after_ns >= 0);
    cr_assert(r.d.retry_after_ns > 0 || r.d.retry_after_ns == -S);
    cr_assert(r.d.remaining >= 0 && r.d.remaining <= p->max);
    if (r.write == FIXED_WINDOW_WRITE_SET) {
        cr_assert(!r.d.limited && cost > 0, "only admissions write");
        cr_assert(r.expiry_ms >= 1);
        m->have = 1;
        m->v = r.next;
        m->expiry_ms = r.expiry_ms;
    }
    return r;
}

/* Decides against a given state (NULL: no key). */
static struct fixed_window_result at(const struct fixed_window_params *p,
                                     const struct fixed_window_state *st,
                                     int64_t now, int64_t cost)
{
    struct mem m = { 0 };

    if (st != NULL) {
        m.have = 1;
        m.v = *st;
    }
    return step(p, &m, now, cost);
}

/* Asserts that a refusal's retry_after is exact. */
static void check_retry_exact(const struct fixed_window_params *p,
                              const struct mem *m, int64_t now, int64_t cost,
                              int64_t retry)
{
    struct mem a = *m, b = *m;

    cr_assert_eq(step(p, &a, now + retry, cost).d.limited, 0,
                 "refused at now + retry");
    cr_assert_eq(step(p, &b, now + retry - 1, cost).d.limited, 1,
                 "admitted 1 ns before retry");
}

static void check_reply(const struct fixed_window_result *r, int64_t l,
                        int64_t lim, int64_t rem, int64_t retry, int64_t reset)
{
    rl_test_check_reply(&r->d, l, lim, rem, retry, reset);
}

/* ---------------- Basics ---------------- */

Test(fixed_window, windows_are_aligned_to_the_epoch)
{
    struct fixed_window_params p = mk(3, 60000);
    struct mem m = { 0 };
    struct fixed_window_result r = step(&p, &m, M0 + 20 * S, 1);

    check_reply(&r, 0, 3, 2, -1, 40);
    cr_assert_eq(r.d.reset_after_ns, 40 * S);
    cr_assert_eq(m.v.start_ns, M0);
    cr_assert_eq(m.v.count, 1);
    cr_assert_eq(m.expiry_ms, 40000);
}

Test(fixed_window, exactly_full_then_refused_until_the_window_ends)
{
    struct fixed_window_params p = mk(3, 60000);
    struct mem m = { 0 };
    struct fixed_window_result r;

    r = step(&p, &m, M0 + 10 * S, 3);
    check_reply(&r, 0, 3, 0, -1, 50);
    r = step(&p, &m, M0 + 15 * S, 1);
    check_reply(&r, 1, 3, 0, 45, 45);
    cr_assert_eq(r.write, FIXED_WINDOW_WRITE_NONE);
    cr_assert_eq(m.v.count, 3);
    check_retry_exact(&p, &m, M0 + 15 * S, 1, r.d.retry_after_ns);
}

Test(fixed_window, the_edge_belongs_to_the_next_window)
{
    struct fixed_window_params p = mk(1, 1000);
    struct mem m = { 0 };
    struct fixed_window_result r;

    step(&p, &m, M0, 1);
    r = step(&p, &m, M0 + 1 * S - 1, 1);
    cr_assert_eq(r.d.limited, 1);
    cr_assert_eq(r.d.retry_after_ns, 1);
    r = step(&p, &m, M0 + 1 * S, 1);
    cr_assert_eq(r.d.limited, 0);
    cr_assert_eq(m.v.start_ns, M0 + 1 * S);
    cr_assert_eq(r.d.reset_after_ns, 1 * S);
}

Test(fixed_window, expiry_rounds_the_window_end_up_to_whole_ms)
{
    struct fixed_window_params p = mk(5, 1000);
    struct mem m = { 0 };
    struct fixed_window_result r = step(&p, &m, M0 + 250 * MS + 1, 1);

    cr_assert_eq(r.d.reset_after_ns, 750 * MS - 1);
    cr_assert_eq(r.expiry_ms, 750);
}

Test(fixed_window, cost_above_max_never_passes_and_writes_nothing)
{
    struct fixed_window_params p = mk(4, 1000);
    struct mem m = { 0 };
    struct fixed_window_result r;

    r = step(&p, &m, M0, 5);
    check_reply(&r, 1, 4, 4, -1, 0);
    cr_assert_eq(m.have, 0);
    step(&p, &m, M0, 1);
    r = step(&p, &m, M0 + 400 * MS, 5);
    check_reply(&r, 1, 4, 3, -1, 1);
    cr_assert_eq(r.d.reset_after_ns, 600 * MS);
    cr_assert_eq(m.v.count, 1);
}

Test(fixed_window, peek_counts_nothing_and_reports_zero_reset_when_empty)
{
    struct fixed_window_params p = mk(4, 1000);
    struct mem m = { 0 };
    struct fixed_window_result r;

    r = step(&p, &m, M0, 0);
    check_reply(&r, 0, 4, 4, -1, 0);
    cr_assert_eq(r.write, FIXED_WINDOW_WRITE_NONE);
    step(&p, &m, M0, 3);
    r = step(&p, &m, M0 + 100 * MS, 0);
    check_reply(&r, 0, 4, 1, -1, 1);
    cr_assert_eq(r.write, FIXED_WINDOW_WRITE_NONE);
    cr_assert_eq(m.v.count, 3);
}

Test(fixed_window, a_stale_window_counts_as_empty)
{
    struct fixed_window_params p = mk(2, 1000);
    struct fixed_window_state st = { M0 - 1 * S, 2 };
    struct fixed_window_result r = at(&p, &st, M0 + 500 * MS, 2);

    check_reply(&r, 0, 2, 0, -1, 1);
    cr_assert_eq(r.next.start_ns, M0);
    cr_assert_eq(r.next.count, 2);
}

Test(fixed_window, max_lowered_below_the_count_refuses_even_a_peek)
{
    struct fixed_window_params p = mk(2, 1000);
    struct fixed_window_state st = { M0, 5 };
    struct fixed_window_result r = at(&p, &st, M0 + 300 * MS, 0);

    cr_assert_eq(r.d.limited, 1);
    cr_assert_eq(r.d.remaining, 0);
    cr_assert_eq(r.d.retry_after_ns, 700 * MS);
    cr_assert_eq(r.write, FIXED_WINDOW_WRITE_NONE);
}

/* ---------------- Time ---------------- */

Test(fixed_window, clock_not_moving_keeps_counting_in_one_window)
{
    struct fixed_window_params p = mk(3, 1000);
    struct mem m = { 0 };
    struct fixed_window_result r;

    for (int i = 2; i >= 0; i--) {
        r = step(&p, &m, M0 + 10, 1);
        cr_assert_eq(r.d.remaining, i);
    }
    for (int i = 0; i < 3; i++) {
        r = step(&p, &m, M0 + 10, 1);
        cr_assert_eq(r.d.retry_after_ns, 1 * S - 10);
    }
}

Test(fixed_window, clock_going_back_keeps_the_later_stored_window)
{
    struct fixed_window_params p = mk(2, 1000);
    struct mem m = { 0 };
    struct fixed_window_result r;

    step(&p, &m, M0 + 5 * S + 200 * MS, 1); /* window M0 + 5 s */
    r = step(&p, &m, M0 + 100 * MS, 1);     /* the clock jumped ~5 s back */
    cr_assert_eq(r.d.limited, 0);
    cr_assert_eq(m.v.start_ns, M0 + 5 * S);
    cr_assert_eq(m.v.count, 2);
    cr_assert_eq(r.d.reset_after_ns, 5900 * MS);
    cr_assert_eq(m.expiry_ms, 5900);
    r = step(&p, &m, M0 + 100 * MS, 1);
    cr_assert_eq(r.d.limited, 1);
    cr_assert_eq(r.d.retry_after_ns, 5900 * MS);
    check_retry_exact(&p, &m, M0 + 100 * MS, 1, r.d.retry_after_ns);
}

Test(fixed_window, years_idle_and_the_last_representable_time_do_not_overflow)
{
    struct fixed_window_params p = mk(2, MAX_MS);
    struct fixed_window_state st = { 0, 2 };
    struct fixed_window_result r;
    int64_t w = MAX_MS * MS;

    r = at(&p, &st, INT64_MAX, 1);
    cr_assert_eq(r.d.limited, 0);
    cr_assert_eq(r.next.start_ns, INT64_MAX - INT64_MAX % w);
    cr_assert_eq(r.d.reset_after_ns, w - INT64_MAX % w);

    p = mk(2, 1000);
    st = (struct fixed_window_state){ M0, 2 };
    r = at(&p, &st, M0 + INT64_C(3650) * 86400 * S + 1, 2);
    check_reply(&r, 0, 2, 0, -1, 1);
}

Test(fixed_window, a_window_stored_near_int64_max_saturates_the_durations)
{
    struct fixed_window_params p = mk(1, MAX_MS);
    struct fixed_window_state st = { INT64_MAX - 5, 1 };
    struct fixed_window_result r = at(&p, &st, 0, 1);

    cr_assert_eq(r.d.limited, 1);
    cr_assert_eq(r.d.retry_after_ns, INT64_MAX);
    cr_assert_eq(r.d.reset_after_ns, INT64_MAX);
}

/* ---------------- Extremes and exactness ---------------- */

Test(fixed_window, max_count_in_the_longest_window)
{
    struct fixed_window_params p = mk(MAX_N, MAX_MS);
    struct mem m = { 0 };
    struct fixed_window_result r;
    int64_t w = MAX_MS * MS;
    int64_t start = M0 - M0 % w;

    r = step(&p, &m, M0, MAX_N - 1);
    cr_assert_eq(r.d.remaining, 1);
    r = step(&p, &m, M0, 2);
    cr_assert_eq(r.d.limited, 1);
    cr_assert_eq(r.d.retry_after_ns, start + w - M0);
    r = step(&p, &m, M0, 1);
    cr_assert_eq(r.d.remaining, 0);
    r = step(&p, &m, M0, MAX_N);
    cr_assert_eq(r.d.retry_after_ns, start + w - M0);
    check_retry_exact(&p, &m, M0, MAX_N, r.d.retry_after_ns);
}

Test(fixed_window, many_small_requests_equal_one_big_request)
{
    struct fixed_window_params p = mk(1000, 60000);
    struct mem small = { 0 }, big = { 0 };
    struct fixed_window_result r;

    for (int i = 0; i < 600; i++) {
        step(&p, &small, M0 + 1000 + i * 50 * MS, 1);
    }
    r = step(&p, &big, M0 + 1000 + 599 * 50 * MS, 600);
    cr_assert(memcmp(&small.v, &big.v, sizeof(small.v)) == 0);
    cr_assert_eq(small.expiry_ms, big.expiry_ms);
    cr_assert_eq(r.d.remaining, 400);
}

Test(fixed_window, random_sequences_keep_invariants_and_exact_retries)
{
    struct fixed_window_params p = mk(9, 777);
    struct mem m = { 0 };
    uint64_t seed = 11;
    int64_t now = M0;

    for (int k = 0; k < 3000; k++) {
        struct fixed_window_result r;
        int64_t cost;

        seed = seed * 6364136223846793005u + 1442695040888963407u;
        now += (int64_t)((seed >> 33) % (200 * MS));
        cost = (int64_t)((seed >> 20) % 11);
        r = step(&p, &m, now, cost);
        if (r.d.limited && cost <= p.max) {
            check_retry_exact(&p, &m, now, cost, r.d.retry_after_ns);
        }
        if (r.d.limited) {
            cr_assert_eq(r.write, FIXED_WINDOW_WRITE_NONE);
        }
    }
}

/* ---------------- Errors ---------------- */

/* One bad parameter set and its text. */
struct param_case {
    int64_t max, window_ms;
    const char *err;
};

static const struct param_case PARAM_CASES[] = {
    { 0, 1000, FIXED_WINDOW_ERR_MAX },
    { -1, 1000, FIXED_WINDOW_ERR_MAX },
    { MAX_N + 1, 1000, FIXED_WINDOW_ERR_MAX },
    { 5, 0, FIXED_WINDOW_ERR_WINDOW },
    { 5, -1000, FIXED_WINDOW_ERR_WINDOW },
    { 5, MAX_MS + 1, FIXED_WINDOW_ERR_WINDOW },
};
#define NPARAM (sizeof(PARAM_CASES) / sizeof(*PARAM_CASES))

ParameterizedTestParameters(fixed_window, rejects_nonsense_parameters)
{
    static size_t ids[NPARAM];

    return px_param_ids(ids, NPARAM);
}

ParameterizedTest(size_t *id, fixed_window, rejects_nonsense_parameters)
{
    const struct param_case *c = &PARAM_CASES[*id];
    struct fixed_window_params p;
    struct fixed_window_result r;
    const char *err = NULL;

    cr_assert_eq(fixed_window_params_init(&p, c->max, c->window_ms, &err),
                 FIXED_WINDOW_EARGS);
    cr_assert_str_eq(err, c->err);
    /* decide guards too: a zero window would divide by zero. */
    p.max = c->max;
    p.window_ns =
        c->window_ms > 0 && c->window_ms <= MAX_MS ? c->window_ms * MS : 0;
    err = NULL;
    cr_assert_eq(fixed_window_decide(&p, NULL, M0, 1, &r, &err),
                 FIXED_WINDOW_EARGS);
    cr_assert_str_eq(err, c->err);
    cr_assert_eq(r.write, FIXED_WINDOW_WRITE_NONE);
}

Test(fixed_window, rejects_a_malformed_state_negative_time_and_cost)
{
    static const struct fixed_window_state bad[] = { { -1, 0 },
                                                     { M0, -1 },
                                                     { INT64_MIN, 1 } };
    struct fixed_window_params p = mk(5, 1000);
    struct fixed_window_result r;
    const char *err = NULL;

    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        cr_assert_eq(fixed_window_decide(&p, &bad[i], M0, 1, &r, &err),
                     FIXED_WINDOW_ESTATE);
        cr_assert_str_eq(err, FIXED_WINDOW_ERR_STATE);
    }
    cr_assert_eq(fixed_window_decide(&p, NULL, -1, 1, &r, &err),
                 FIXED_WINDOW_EARGS);
    cr_assert_str_eq(err, FIXED_WINDOW_ERR_TIME);
    cr_assert_eq(fixed_window_decide(&p, NULL, M0, -1, &r, &err),
                 FIXED_WINDOW_EARGS);
    cr_assert_str_eq(err, FIXED_WINDOW_ERR_COST);
}

/* ---------------- LIMITER ADJUST ---------------- */

/* fixed_window_adjust() against the store; applies its write. */
static struct fixed_window_result adj(const struct fixed_window_params *p,
                                      struct mem *m, int64_t now, int64_t delta)
{
    struct fixed_window_result r;
    const char *err = NULL;

    cr_assert_eq(
        fixed_window_adjust(p, m->have ? &m->v : NULL, now, delta, &r, &err),
        FIXED_WINDOW_OK, "adjust: %s", err);
    if (r.write == FIXED_WINDOW_WRITE_SET) {
        cr_assert(r.expiry_ms >= 1);
        m->have = 1;
        m->v = r.next;
        m->expiry_ms = r.expiry_ms;
    }
    return r;
}

Test(fixed_window,
     adjust_charges_into_debt_never_refused_and_gives_back_to_fresh)
{
    struct fixed_window_params p = mk(10, 60000);
    struct mem m = { 0 };
    struct fixed_window_result r;

    step(&p, &m, M0 + S, 4);
    /* 4 + 9 = 13 > 10: charged all the same, the next check refused. */
    r = adj(&p, &m, M0 + 2 * S, 9);
    cr_assert_eq(r.write, FIXED_WINDOW_WRITE_SET);
    cr_assert_eq(m.v.count, 13);
    cr_assert_eq(m.v.start_ns, M0);
    cr_assert_eq(m.expiry_ms, 58000); /* the window's end */
    cr_assert(r.d.limited && r.d.remaining == 0);
    cr_assert_eq(r.d.retry_after_ns, 58 * S);
    cr_assert(step(&p, &m, M0 + 3 * S, 1).d.limited);
    cr_assert_eq(m.v.count, 13, "a refused check took nothing");
    /* Giving back 5: 8 counted, 2 left after a peek of cost 1. */
    r = adj(&p, &m, M0 + 3 * S, -5);
    cr_assert(!r.d.limited && r.d.remaining == 1 && m.v.count == 8);
    /* Never beyond fresh: count 0, which decides as no key. */
    r = adj(&p, &m, M0 + 3 * S, -1000);
    cr_assert_eq(m.v.count, 0);
    {
        struct fixed_window_result fresh = at(&p, NULL, M0 + 3 * S, 1);

        cr_assert(memcmp(&r.d, &fresh.d, sizeof(r.d)) == 0, "not as fresh");
    }
    /* delta 0, and nothing left to give back: no write. */
    cr_assert_eq(adj(&p, &m, M0 + 3 * S, 0).write, FIXED_WINDOW_WRITE_NONE);
    cr_assert_eq(adj(&p, &m, M0 + 3 * S, -1).write, FIXED_WINDOW_WRITE_NONE);
    /* The next window starts empty: the debt is paid. */
    cr_assert_eq(adj(&p, &m, M0 + 3 * S, 30).write, FIXED_WINDOW_WRITE_SET);
    r = at(&p, &m.v, M0 + 60 * S, 10);
    cr_assert(!r.d.limited);
}

Test(fixed_window, adjust_on_a_stale_window_and_at_the_cap)
{
    struct fixed_window_params p = mk(MAX_N, 1000);
    struct fixed_window_state old = { .start_ns = M0, .count = 5 };
    struct mem m = { .have = 1, .v = old };
    struct fixed_window_result r;

    /* A stale window has nothing to give back... */
    cr_assert_eq(adj(&p, &m, M0 + 5 * S, -3).write, FIXED_WINDOW_WRITE_NONE);
    cr_assert_eq(m.v.start_ns, M0);
    /* ...and a charge starts now's window. */
    adj(&p, &m, M0 + 5 * S, 2);
    cr_assert(m.v.start_ns == M0 + 5 * S && m.v.count == 2);
    /* The count saturates at 2^53 - 1. */
    r = adj(&p, &m, M0 + 5 * S, MAX_N);
    cr_assert_eq(m.v.count, MAX_N);
    cr_assert(r.d.limited && r.d.remaining == 0);
    cr_assert_eq(adj(&p, &m, M0 + 5 * S, 7).write, FIXED_WINDOW_WRITE_NONE);
    /* Bad parameters and states as decide's. */
    m.v.count = -1;
    {
        const char *err = NULL;

        cr_assert_eq(fixed_window_adjust(&p, &m.v, M0, 1, &r, &err),
                     FIXED_WINDOW_ESTATE);
        cr_assert_str_eq(err, FIXED_WINDOW_ERR_STATE);
    }
}
