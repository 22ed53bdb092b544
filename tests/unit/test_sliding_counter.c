/* Sliding counter: the weighted previous window and its rounding, the
 * window edges, retry in this window and in the next, reset, what is
 * written, peeks, refusals, stale and future windows (clock jumps), idle
 * years, the conf maxima, and that many small requests equal one big one.
 *
 * Time is a parameter: every test steps `now` explicitly, and a tiny
 * in-memory store applies the writes sliding_counter_decide() asks for. */
#include "tests/support/px_test.h"
#include "tests/support/rl_test.h"

#include <criterion/parameterized.h>
#include <stdint.h>
#include <string.h>

#include "algorithms/rl.h"
#include "algorithms/sliding_counter.h"

PX_TEST_SUITE(sliding_counter);

#define S  RL_NS_PER_SEC
#define MS RL_NS_PER_MS

/* 2023-11-14T22:13:00Z: a minute boundary. */
#define M0 INT64_C(1699999980000000000)

#define MAX_N  SLIDING_COUNTER_MAX_COUNT
#define MAX_MS SLIDING_COUNTER_MAX_WINDOW_MS

/* The one key of a test, as a store holds it. */
struct mem {
    int have;                       /* the key exists */
    struct sliding_counter_state v; /* its fields */
    int64_t expiry_ms;              /* the PEXPIRE of the last write */
};

static struct sliding_counter_params mk(int64_t max, int64_t window_ms)
{
    struct sliding_counter_params p;
    const char *err = NULL;

    cr_assert_eq(sliding_counter_params_init(&p, max, window_ms, &err),
                 SLIDING_COUNTER_OK, "params: %s", err);
    return p;
}

/* One decision against the store; applies the write. */
static struct sliding_counter_result
step(const struct sliding_counter_params *p, struct mem *m, int64_t now,
     int64_t cost)
{
    struct sliding_counter_result r;
    const char *err = NULL;
    int rc =
        sliding_counter_decide(p, m->have ? &m->v : NULL, now, cost, &r, &err);

    cr_assert_eq(rc, SLIDING_COUNTER_OK, "decide: %s", err);
    cr_assert(r.d.reset_after_ns >= 0);
    cr_assert(r.d.retry_after_ns > 0 || r.d.retry_after_ns == -S, "retry %lld",
              (long long)r.d.retry_after_ns);
    cr_assert(r.d.remaining >= 0 && r.d.remaining <= p->max);
    if (r.write == SLIDING_COUNTER_WRITE_SET) {
        cr_assert(!r.d.limited && cost > 0, "only admissions write");
        cr_assert(r.expiry_ms >= 1);
        m->have = 1;
        m->v = r.next;
        m->expiry_ms = r.expiry_ms;
    }
    return r;
}

/* Decides against a given state (NULL: no key). */
static struct sliding_counter_result at(const struct sliding_counter_params *p,
                                        const struct sliding_counter_state *st,
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
static void check_retry_exact(const struct sliding_counter_params *p,
                              const struct mem *m, int64_t now, int64_t cost,
                              int64_t retry)
{
    struct mem a = *m, b = *m;

    cr_assert_eq(step(p, &a, now + retry, cost).d.limited, 0,
                 "refused at now + retry %lld", (long long)retry);
    cr_assert_eq(step(p, &b, now + retry - 1, cost).d.limited, 1,
                 "admitted 1 ns before retry %lld", (long long)retry);
}

static void check_reply(const struct sliding_counter_result *r, int64_t l,
                        int64_t lim, int64_t rem, int64_t retry, int64_t reset)
{
    rl_test_check_reply(&r->d, l, lim, rem, retry, reset);
}

/* ---------------- Basics ---------------- */

Test(sliding_counter, new_key_counts_in_the_current_window)
{
    struct sliding_counter_params p = mk(10, 60000);
    struct mem m = { 0 };
    struct sliding_counter_result r = step(&p, &m, M0 + 15 * S, 1);

    /* The count weighs until the end of the next window: 45 s + 60 s. */
    check_reply(&r, 0, 10, 9, -1, 105);
    cr_assert_eq(m.v.start_ns, M0);
    cr_assert_eq(m.v.count, 1);
    cr_assert_eq(m.v.prev, 0);
    cr_assert_eq(m.expiry_ms, 105000);
}

Test(sliding_counter, previous_window_weighs_by_its_part_still_inside)
{
    struct sliding_counter_params p = mk(10, 60000);
    struct sliding_counter_state st = { M0 - 60 * S, 10, 0 };
    struct sliding_counter_result r;

    /* 15 s into the window: 45/60 of the previous 10 is 7.5, rounded up. */
    r = at(&p, &st, M0 + 15 * S, 2);
    cr_assert_eq(r.weighted, 8);
    check_reply(&r, 0, 10, 0, -1, 105);
    cr_assert_eq(r.next.start_ns, M0);
    cr_assert_eq(r.next.count, 2);
    cr_assert_eq(r.next.prev, 10);
    r = at(&p, &st, M0 + 15 * S, 3);
    cr_assert_eq(r.d.limited, 1);
    cr_assert_eq(r.d.remaining, 2);
}

Test(sliding_counter, rounding_up_matches_the_exact_estimate_to_the_ns)
{
    struct sliding_counter_params p = mk(5, 1000);
    struct sliding_counter_state st = { M0 - 1 * S, 4, 0 };
    struct sliding_counter_result r;

    /* At 250 ms the weight is exactly 4 * 750 / 1000 = 3: 3 + 2 fits 5. */
    r = at(&p, &st, M0 + 250 * MS, 2);
    cr_assert_eq(r.weighted, 3);
    cr_assert_eq(r.d.limited, 0);
    /* One ns earlier it is 3.000000004: over, and 1 ns to wait. */
    r = at(&p, &st, M0 + 250 * MS - 1, 2);
    cr_assert_eq(r.weighted, 4);
    cr_assert_eq(r.d.limited, 1);
    cr_assert_eq(r.d.retry_after_ns, 1);
}

Test(sliding_counter, retry_while_the_previous_window_fades_is_exact)
{
    struct sliding_counter_params p = mk(10, 60000);
    struct mem m = { 1, { M0 - 60 * S, 10, 0 }, 0 };
    struct sliding_counter_result r;

    r = step(&p, &m, M0 + 15 * S, 5);
    cr_assert_eq(r.d.limited, 1);
    /* 10 * rem / 60 s <= 5 once rem <= 30 s: at M0 + 30 s. */
    cr_assert_eq(r.d.retry_after_ns, 15 * S);
    cr_assert_eq(r.d.reset_after_ns, 45 * S);
    check_retry_exact(&p, &m, M0 + 15 * S, 5, r.d.retry_after_ns);
}

Test(sliding_counter, retry_in_the_next_window_while_the_count_fades_is_exact)
{
    struct sliding_counter_params p = mk(10, 60000);
    struct mem m = { 0 };
    struct sliding_counter_result r;

    step(&p, &m, M0 + 10 * S, 10);
    r = step(&p, &m, M0 + 30 * S, 1);
    /* Next window: 10 * rem / 60 s <= 9 once rem <= 54 s, at M0 + 66 s. */
    cr_assert_eq(r.d.retry_after_ns, 36 * S);
    cr_assert_eq(r.d.reset_after_ns, 90 * S);
    check_retry_exact(&p, &m, M0 + 30 * S, 1, r.d.retry_after_ns);
    /* A full-size request waits until the count no longer weighs. */
    r = step(&p, &m, M0 + 30 * S, 10);
    cr_assert_eq(r.d.retry_after_ns, 90 * S);
    check_retry_exact(&p, &m, M0 + 30 * S, 10, r.d.retry_after_ns);
}

Test(sliding_counter, reset_is_the_end_of_this_window_when_only_prev_counts)
{
    struct sliding_counter_params p = mk(10, 60000);
    struct sliding_counter_state st = { M0 - 60 * S, 3, 7 };
    struct sliding_counter_result r = at(&p, &st, M0 + 20 * S, 0);

    cr_assert_eq(r.next.count, 0);
    cr_assert_eq(r.next.prev, 3);
    cr_assert_eq(r.weighted, 2);
    cr_assert_eq(r.d.reset_after_ns, 40 * S);
    cr_assert_eq(r.write, SLIDING_COUNTER_WRITE_NONE);
}

Test(sliding_counter, cost_above_max_never_passes_and_writes_nothing)
{
    struct sliding_counter_params p = mk(4, 1000);
    struct mem m = { 0 };
    struct sliding_counter_result r;

    r = step(&p, &m, M0, 5);
    check_reply(&r, 1, 4, 4, -1, 0);
    cr_assert_eq(m.have, 0);
    step(&p, &m, M0, 1);
    r = step(&p, &m, M0, 5);
    check_reply(&r, 1, 4, 3, -1, 2);
    cr_assert_eq(r.write, SLIDING_COUNTER_WRITE_NONE);
}

Test(sliding_counter, peek_and_refusal_never_write)
{
    struct sliding_counter_params p = mk(2, 1000);
    struct mem m = { 0 };
    struct sliding_counter_result r;
    struct sliding_counter_state before;

    r = step(&p, &m, M0, 0);
    check_reply(&r, 0, 2, 2, -1, 0);
    cr_assert_eq(m.have, 0);
    step(&p, &m, M0, 2);
    before = m.v;
    r = step(&p, &m, M0 + 1500 * MS, 0);
    cr_assert_eq(r.write, SLIDING_COUNTER_WRITE_NONE);
    cr_assert_eq(r.d.remaining, 1);
    r = step(&p, &m, M0 + 1500 * MS, 2);
    cr_assert_eq(r.d.limited, 1);
    cr_assert_eq(r.write, SLIDING_COUNTER_WRITE_NONE);
    cr_assert(memcmp(&m.v, &before, sizeof(before)) == 0);
}

Test(sliding_counter, two_windows_old_counts_nothing)
{
    struct sliding_counter_params p = mk(2, 1000);
    struct sliding_counter_state st = { M0 - 2 * S, 2, 2 };
    struct sliding_counter_result r = at(&p, &st, M0, 2);

    cr_assert_eq(r.d.limited, 0);
    cr_assert_eq(r.next.prev, 0);
    cr_assert_eq(r.weighted, 0);
}

Test(sliding_counter, window_edge_moves_count_to_prev_at_the_exact_ns)
{
    struct sliding_counter_params p = mk(4, 1000);
    struct mem m = { 0 };
    struct sliding_counter_result r;

    step(&p, &m, M0, 4);
    r = step(&p, &m, M0 + 1 * S - 1, 0);
    cr_assert_eq(r.next.start_ns, M0);
    cr_assert_eq(r.d.remaining, 0);
    r = step(&p, &m, M0 + 1 * S, 0);
    cr_assert_eq(r.next.start_ns, M0 + 1 * S);
    cr_assert_eq(r.next.prev, 4);
    cr_assert_eq(r.weighted, 4); /* the whole previous window is inside */
    r = step(&p, &m, M0 + 2 * S, 0);
    check_reply(&r, 0, 4, 4, -1, 0);
}

Test(sliding_counter, max_lowered_below_the_estimate_refuses_even_a_peek)
{
    struct sliding_counter_params p = mk(2, 1000);
    struct sliding_counter_state st = { M0, 5, 0 };
    struct sliding_counter_result r = at(&p, &st, M0 + 500 * MS, 0);

    cr_assert_eq(r.d.limited, 1);
    cr_assert_eq(r.d.remaining, 0);
    /* 5 * rem / 1 s <= 2 from rem = 400 ms on: next window, at 1.6 s. */
    cr_assert_eq(r.d.retry_after_ns, 1100 * MS);
}

/* ---------------- Time ---------------- */

Test(sliding_counter, clock_not_moving_keeps_the_same_answer)
{
    struct sliding_counter_params p = mk(3, 1000);
    struct mem m = { 0 };
    struct sliding_counter_result r;

    for (int i = 2; i >= 0; i--) {
        r = step(&p, &m, M0 + 100 * MS, 1);
        cr_assert_eq(r.d.remaining, i);
    }
    for (int i = 0; i < 3; i++) {
        r = step(&p, &m, M0 + 100 * MS, 1);
        /* 3 * rem / 1 s <= 2 once rem <= 666666666 ns in the next window. */
        cr_assert_eq(r.d.retry_after_ns, 900 * MS + 1 * S - 666666666);
    }
}

Test(sliding_counter, clock_going_back_keeps_the_later_window_weighing_fully)
{
    struct sliding_counter_params p = mk(4, 1000);
    struct mem m = { 0 };
    struct sliding_counter_result r;

    step(&p, &m, M0 + 1 * S, 2);        /* window M0 + 1 s, count 2 */
    step(&p, &m, M0 + 2 * S, 2);        /* window M0 + 2 s, prev 2, count 2 */
    r = step(&p, &m, M0 + 500 * MS, 0); /* 1.5 s back */
    cr_assert_eq(r.next.start_ns, M0 + 2 * S);
    cr_assert_eq(r.weighted, 2); /* rem is capped at the window */
    cr_assert_eq(r.d.remaining, 0);
    cr_assert_eq(r.d.reset_after_ns, 3500 * MS);
    r = step(&p, &m, M0 + 500 * MS, 1);
    cr_assert_eq(r.d.limited, 1);
    /* 2 * rem / 1 s <= 1 once rem <= 0.5 s: at M0 + 2.5 s. */
    cr_assert_eq(r.d.retry_after_ns, 2 * S);
    check_retry_exact(&p, &m, M0 + 500 * MS, 1, r.d.retry_after_ns);
}

Test(sliding_counter, years_idle_and_the_last_representable_time)
{
    struct sliding_counter_params p = mk(2, MAX_MS);
    struct sliding_counter_state st = { 0, 2, 2 };
    struct sliding_counter_result r;
    int64_t w = MAX_MS * MS;

    r = at(&p, &st, INT64_MAX, 2);
    cr_assert_eq(r.d.limited, 0);
    cr_assert_eq(r.next.start_ns, INT64_MAX - INT64_MAX % w);
    cr_assert_eq(r.d.reset_after_ns, 2 * w - INT64_MAX % w);

    p = mk(2, 1000);
    st = (struct sliding_counter_state){ M0, 2, 2 };
    r = at(&p, &st, M0 + INT64_C(3650) * 86400 * S, 2);
    cr_assert_eq(r.d.limited, 0);
    cr_assert_eq(r.next.prev, 0);
}

Test(sliding_counter, a_window_stored_near_int64_max_saturates)
{
    struct sliding_counter_params p = mk(1, MAX_MS);
    struct sliding_counter_state st = { INT64_MAX - 5, 1, 0 };
    struct sliding_counter_result r = at(&p, &st, 0, 1);

    cr_assert_eq(r.d.limited, 1);
    cr_assert_eq(r.d.retry_after_ns, INT64_MAX);
    cr_assert_eq(r.d.reset_after_ns, INT64_MAX);
}

/* ---------------- Extremes and exactness ---------------- */

Test(sliding_counter, max_counts_in_the_longest_window_weigh_exactly)
{
    struct sliding_counter_params p = mk(MAX_N, MAX_MS);
    int64_t w = MAX_MS * MS;
    int64_t start = M0 - M0 % w;
    struct sliding_counter_state st = { start - w, MAX_N, 0 };
    struct sliding_counter_result r;

    /* Half-way: prev * (w / 2) / w = 2^52 - 0.5, rounded up. */
    r = at(&p, &st, start + w / 2, 0);
    cr_assert_eq(r.weighted, (MAX_N + 1) / 2);
    cr_assert_eq(r.d.remaining, MAX_N - (MAX_N + 1) / 2);
    /* One ns before the window ends, the weight is still 1. */
    r = at(&p, &st, start + w - 1, MAX_N - 1);
    cr_assert_eq(r.weighted, 1);
    cr_assert_eq(r.d.limited, 0);
    r = at(&p, &st, start, MAX_N);
    cr_assert_eq(r.d.limited, 1);
    cr_assert_eq(r.d.retry_after_ns, w);
}

Test(sliding_counter, many_small_requests_equal_one_big_request)
{
    struct sliding_counter_params p = mk(1000, 60000);
    struct mem small = { 1, { M0 - 60 * S, 300, 50 }, 0 }, big = small;
    struct sliding_counter_result r;

    for (int i = 0; i < 400; i++) {
        step(&p, &small, M0 + 30 * S + i * MS, 1);
    }
    r = step(&p, &big, M0 + 30 * S + 399 * MS, 400);
    cr_assert_eq(r.d.limited, 0);
    cr_assert(memcmp(&small.v, &big.v, sizeof(small.v)) == 0);
    cr_assert_eq(small.expiry_ms, big.expiry_ms);
}

Test(sliding_counter, random_sequences_keep_invariants_and_exact_retries)
{
    struct sliding_counter_params p = mk(9, 777);
    struct mem m = { 0 };
    uint64_t seed = 5;
    int64_t now = M0;

    for (int k = 0; k < 3000; k++) {
        struct sliding_counter_result r;
        int64_t cost, w = p.window_ns, rem;

        seed = seed * 6364136223846793005u + 1442695040888963407u;
        now += (int64_t)((seed >> 33) % (150 * MS));
        cost = (int64_t)((seed >> 20) % 11);
        r = step(&p, &m, now, cost);
        /* Small numbers: the weight can be checked in plain int64. */
        rem = r.next.start_ns + w - now;
        cr_assert_eq(r.weighted, (r.next.prev * rem + w - 1) / w);
        if (r.d.limited && cost <= p.max) {
            check_retry_exact(&p, &m, now, cost, r.d.retry_after_ns);
        }
        if (r.d.limited) {
            cr_assert_eq(r.write, SLIDING_COUNTER_WRITE_NONE);
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
    { 0, 1000, SLIDING_COUNTER_ERR_MAX },
    { -1, 1000, SLIDING_COUNTER_ERR_MAX },
    { MAX_N + 1, 1000, SLIDING_COUNTER_ERR_MAX },
    { 5, 0, SLIDING_COUNTER_ERR_WINDOW },
    { 5, -1, SLIDING_COUNTER_ERR_WINDOW },
    { 5, MAX_MS + 1, SLIDING_COUNTER_ERR_WINDOW },
};
#define NPARAM (sizeof(PARAM_CASES) / sizeof(*PARAM_CASES))

ParameterizedTestParameters(sliding_counter, rejects_nonsense_parameters)
{
    static size_t ids[NPARAM];

    return px_param_ids(ids, NPARAM);
}

ParameterizedTest(size_t *id, sliding_counter, rejects_nonsense_parameters)
{
    const struct param_case *c = &PARAM_CASES[*id];
    struct sliding_counter_params p;
    struct sliding_counter_result r;
    const char *err = NULL;

    cr_assert_eq(sliding_counter_params_init(&p, c->max, c->window_ms, &err),
                 SLIDING_COUNTER_EARGS);
    cr_assert_str_eq(err, c->err);
    /* decide guards too: a zero window would divide by zero. */
    p.max = c->max;
    p.window_ns =
        c->window_ms > 0 && c->window_ms <= MAX_MS ? c->window_ms * MS : 0;
    err = NULL;
    cr_assert_eq(sliding_counter_decide(&p, NULL, M0, 1, &r, &err),
                 SLIDING_COUNTER_EARGS);
    cr_assert_str_eq(err, c->err);
    cr_assert_eq(r.write, SLIDING_COUNTER_WRITE_NONE);
}

/* One malformed stored state. */
struct state_case {
    struct sliding_counter_state st;
};

static const struct state_case STATE_CASES[] = {
    { { -1, 0, 0 } },
    { { M0, -1, 0 } },
    { { M0, 0, -1 } },
    /* Both counts at INT64_MAX: their sum does not fit. */
    { { M0, INT64_MAX, INT64_MAX } },
};
#define NSTATE (sizeof(STATE_CASES) / sizeof(*STATE_CASES))

ParameterizedTestParameters(sliding_counter, rejects_a_malformed_state)
{
    static size_t ids[NSTATE];

    return px_param_ids(ids, NSTATE);
}

ParameterizedTest(size_t *id, sliding_counter, rejects_a_malformed_state)
{
    struct sliding_counter_params p = mk(5, 1000);
    struct sliding_counter_result r;
    const char *err = NULL;

    cr_assert_eq(
        sliding_counter_decide(&p, &STATE_CASES[*id].st, M0, 1, &r, &err),
        SLIDING_COUNTER_ESTATE);
    cr_assert_str_eq(err, SLIDING_COUNTER_ERR_STATE);
    cr_assert_eq(r.write, SLIDING_COUNTER_WRITE_NONE);
}

Test(sliding_counter, rejects_negative_time_and_negative_cost)
{
    struct sliding_counter_params p = mk(5, 1000);
    struct sliding_counter_result r;
    const char *err = NULL;

    cr_assert_eq(sliding_counter_decide(&p, NULL, -1, 1, &r, &err),
                 SLIDING_COUNTER_EARGS);
    cr_assert_str_eq(err, SLIDING_COUNTER_ERR_TIME);
    cr_assert_eq(sliding_counter_decide(&p, NULL, M0, -1, &r, &err),
                 SLIDING_COUNTER_EARGS);
    cr_assert_str_eq(err, SLIDING_COUNTER_ERR_COST);
}

/* ---------------- LIMITER ADJUST ---------------- */

/* sliding_counter_adjust() against the store; applies its write. */
static struct sliding_counter_result adj(const struct sliding_counter_params *p,
                                         struct mem *m, int64_t now,
                                         int64_t delta)
{
    struct sliding_counter_result r;
    const char *err = NULL;

    cr_assert_eq(
        sliding_counter_adjust(p, m->have ? &m->v : NULL, now, delta, &r, &err),
        SLIDING_COUNTER_OK, "adjust: %s", err);
    if (r.write == SLIDING_COUNTER_WRITE_SET) {
        cr_assert(r.expiry_ms >= 1);
        m->have = 1;
        m->v = r.next;
        m->expiry_ms = r.expiry_ms;
    }
    return r;
}

Test(sliding_counter, adjust_charges_the_current_window_and_gives_back_from_it)
{
    struct sliding_counter_params p = mk(10, 60000);
    struct mem m = { 0 };
    struct sliding_counter_result r;

    step(&p, &m, M0 + S, 6);
    /* A charge past max: the debt weighs on into the next window. */
    r = adj(&p, &m, M0 + 2 * S, 10);
    cr_assert(m.v.count == 16 && m.v.prev == 0);
    cr_assert_eq(m.expiry_ms, 118000); /* the next window's end */
    cr_assert(r.d.limited && r.d.remaining == 0);
    cr_assert(step(&p, &m, M0 + 3 * S, 1).d.limited);
    /* Half into the next window 16 weighs 8: 2 more fit, not 3. */
    cr_assert(at(&p, &m.v, M0 + 90 * S, 3).d.limited);
    cr_assert(!at(&p, &m.v, M0 + 90 * S, 2).d.limited);
    /* There the previous window's count is not given back. */
    m.v = (struct sliding_counter_state){ .start_ns = M0, .count = 16 };
    r = adj(&p, &m, M0 + 90 * S, -5);
    cr_assert_eq(r.write, SLIDING_COUNTER_WRITE_NONE);
    /* A charge rolls the state over first. */
    adj(&p, &m, M0 + 90 * S, 1);
    cr_assert(m.v.start_ns == M0 + 60 * S && m.v.count == 1 && m.v.prev == 16);
    /* Giving back floors at 0; with prev alone the key lasts this
     * window. */
    r = adj(&p, &m, M0 + 90 * S, -9);
    cr_assert(m.v.count == 0 && m.v.prev == 16);
    cr_assert_eq(m.expiry_ms, 30000);
    cr_assert_eq(adj(&p, &m, M0 + 90 * S, 0).write, SLIDING_COUNTER_WRITE_NONE);
}

Test(sliding_counter, adjust_saturates_at_2_53_and_validates_as_decide)
{
    struct sliding_counter_params p = mk(MAX_N, 1000);
    struct mem m = { 0 };
    struct sliding_counter_state bad = { .start_ns = M0,
                                         .count = 1,
                                         .prev = -1 };
    struct sliding_counter_result r;
    const char *err = NULL;

    adj(&p, &m, M0, MAX_N);
    adj(&p, &m, M0, MAX_N);
    cr_assert_eq(m.v.count, MAX_N);
    cr_assert_eq(adj(&p, &m, M0, 1).write, SLIDING_COUNTER_WRITE_NONE);
    cr_assert_eq(sliding_counter_adjust(&p, &bad, M0, 1, &r, &err),
                 SLIDING_COUNTER_ESTATE);
    cr_assert_str_eq(err, SLIDING_COUNTER_ERR_STATE);
}
