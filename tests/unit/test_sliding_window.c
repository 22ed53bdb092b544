/* Sliding window of slots: slot edges to the ns, retry as the oldest slots
 * leave, reset, what is written, peeks, refusals, messy input (any order,
 * duplicates, expired, zero, another resolution), clock jumps, idle years,
 * the conf maxima (3600 slots, 2^53 - 1, 3650 days), and that many small
 * requests equal one big one.
 *
 * Time is a parameter: every test steps `now` explicitly, and a tiny
 * in-memory store applies the writes sliding_window_decide() asks for. */
#include "tests/support/px_test.h"
#include "tests/support/rl_test.h"

#include <criterion/parameterized.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/rl.h"
#include "algorithms/sliding_window.h"

PX_TEST_SUITE(sliding_window);

#define S  RL_NS_PER_SEC
#define MS RL_NS_PER_MS

/* 2023-11-14T22:13:00Z: a minute boundary. */
#define M0 INT64_C(1699999980000000000)

#define MAX_N  SLIDING_WINDOW_MAX_COUNT
#define MAX_MS SLIDING_WINDOW_MAX_WINDOW_MS
#define NMAX   SLIDING_WINDOW_MAX_SLOTS

/* The one key of a test, as a store holds it. */
struct mem {
    struct sliding_window_slot v[NMAX]; /* the slot fields */
    size_t n;                           /* slots stored; 0: no key */
    int64_t total;                      /* the total field */
    int64_t expiry_ms;                  /* the PEXPIRE of the last write */
};

/* What one decision returns, with its slots. */
struct out {
    struct sliding_window_result r;        /* the result */
    struct sliding_window_slot next[NMAX]; /* next[0 .. r.next_n) */
};

static struct sliding_window_params mk(int64_t max, int64_t window_ms,
                                       int64_t resolution_ms)
{
    struct sliding_window_params p;
    const char *err = NULL;

    cr_assert_eq(
        sliding_window_params_init(&p, max, window_ms, resolution_ms, &err),
        SLIDING_WINDOW_OK, "params: %s", err);
    return p;
}

/* Asserts the shape every output must have: sorted, non-empty, aligned,
 * inside the window, at most N slots, summing to total. */
static void check_next(const struct sliding_window_params *p,
                       const struct out *o)
{
    int64_t sum = 0;

    cr_assert(o->r.next_n <= (size_t)p->nslots);
    for (size_t i = 0; i < o->r.next_n; i++) {
        cr_assert(o->next[i].count > 0);
        cr_assert_eq(o->next[i].start_ns % p->resolution_ns, 0);
        if (i > 0) {
            cr_assert(o->next[i].start_ns > o->next[i - 1].start_ns);
            cr_assert(o->next[i].start_ns - o->next[0].start_ns < p->window_ns);
        }
        sum += o->next[i].count;
    }
    cr_assert_eq(sum, o->r.total);
}

/* One decision against the store into *o; applies the write. */
static void step(const struct sliding_window_params *p, struct mem *m,
                 int64_t now, int64_t cost, struct out *o)
{
    const char *err = NULL;
    int rc = sliding_window_decide(p, m->v, m->n, now, cost, o->next, NMAX,
                                   &o->r, &err);

    cr_assert_eq(rc, SLIDING_WINDOW_OK, "decide: %s", err);
    cr_assert(o->r.d.reset_after_ns >= 0);
    cr_assert(o->r.d.retry_after_ns > 0 || o->r.d.retry_after_ns == -S,
              "retry %lld", (long long)o->r.d.retry_after_ns);
    cr_assert(o->r.d.remaining >= 0 && o->r.d.remaining <= p->max);
    check_next(p, o);
    if (o->r.write == SLIDING_WINDOW_WRITE_SET) {
        cr_assert(!o->r.d.limited && cost > 0, "only admissions write");
        cr_assert(o->r.expiry_ms >= 1);
        memcpy(m->v, o->next, o->r.next_n * sizeof(*o->next));
        m->n = o->r.next_n;
        m->total = o->r.total;
        m->expiry_ms = o->r.expiry_ms;
    }
}

/* Decides on a copy of the store: *m stays as it was. */
static void peek_at(const struct sliding_window_params *p, const struct mem *m,
                    int64_t now, int64_t cost, struct out *o)
{
    static struct mem copy;

    copy = *m;
    step(p, &copy, now, cost, o);
}

/* Asserts that a refusal's retry_after is exact. */
static void check_retry_exact(const struct sliding_window_params *p,
                              const struct mem *m, int64_t now, int64_t cost,
                              int64_t retry)
{
    static struct out o;

    peek_at(p, m, now + retry, cost, &o);
    cr_assert_eq(o.r.d.limited, 0, "refused at now + retry");
    peek_at(p, m, now + retry - 1, cost, &o);
    cr_assert_eq(o.r.d.limited, 1, "admitted 1 ns before retry");
}

static void check_reply(const struct sliding_window_result *r, int64_t l,
                        int64_t lim, int64_t rem, int64_t retry, int64_t reset)
{
    rl_test_check_reply(&r->d, l, lim, rem, retry, reset);
}

/* The store and the output are large: one of each per test, zeroed. */
static struct mem M;
static struct out O;

static void setup(void)
{
    memset(&M, 0, sizeof(M));
    memset(&O, 0, sizeof(O));
}

/* ---------------- Basics ---------------- */

Test(sliding_window, new_key_counts_in_the_current_slot, .init = setup)
{
    struct sliding_window_params p = mk(10, 60000, 1000);

    step(&p, &M, M0 + 15300 * MS, 1, &O);
    /* Slot M0 + 15 s leaves the window at M0 + 75 s: 59.7 s from now. */
    check_reply(&O.r, 0, 10, 9, -1, 60);
    cr_assert_eq(O.r.d.reset_after_ns, 59700 * MS);
    cr_assert_eq(M.n, 1);
    cr_assert_eq(M.v[0].start_ns, M0 + 15 * S);
    cr_assert_eq(M.v[0].count, 1);
    cr_assert_eq(M.total, 1);
    cr_assert_eq(M.expiry_ms, 59700);
}

Test(sliding_window, full_window_refuses_until_the_oldest_slots_leave,
     .init = setup)
{
    struct sliding_window_params p = mk(3, 60000, 1000);

    step(&p, &M, M0 + 500 * MS, 1, &O);
    step(&p, &M, M0 + 10500 * MS, 1, &O);
    step(&p, &M, M0 + 20500 * MS, 1, &O);
    cr_assert_eq(O.r.d.remaining, 0);
    step(&p, &M, M0 + 30 * S, 1, &O);
    /* The slot of M0 leaves at M0 + 60 s; the newest at M0 + 80 s. */
    check_reply(&O.r, 1, 3, 0, 30, 50);
    cr_assert_eq(O.r.write, SLIDING_WINDOW_WRITE_NONE);
    check_retry_exact(&p, &M, M0 + 30 * S, 1, O.r.d.retry_after_ns);
    step(&p, &M, M0 + 30 * S, 2, &O);
    cr_assert_eq(O.r.d.retry_after_ns, 40 * S);
    check_retry_exact(&p, &M, M0 + 30 * S, 2, O.r.d.retry_after_ns);
    step(&p, &M, M0 + 30 * S, 3, &O);
    cr_assert_eq(O.r.d.retry_after_ns, 50 * S);
    cr_assert_eq(M.total, 3);
}

Test(sliding_window, a_slot_leaves_exactly_n_slots_after_its_start,
     .init = setup)
{
    struct sliding_window_params p = mk(1, 3000, 1000);

    step(&p, &M, M0 + 999 * MS, 1, &O); /* slot M0 */
    peek_at(&p, &M, M0 + 3 * S - 1, 1, &O);
    cr_assert_eq(O.r.d.limited, 1);
    cr_assert_eq(O.r.d.retry_after_ns, 1);
    peek_at(&p, &M, M0 + 3 * S, 1, &O);
    cr_assert_eq(O.r.d.limited, 0);
    cr_assert_eq(O.r.next_n, 1);
    cr_assert_eq(O.next[0].start_ns, M0 + 3 * S);
}

Test(sliding_window, cost_above_max_never_passes_and_writes_nothing,
     .init = setup)
{
    struct sliding_window_params p = mk(4, 1000, 100);

    step(&p, &M, M0, 5, &O);
    check_reply(&O.r, 1, 4, 4, -1, 0);
    cr_assert_eq(M.n, 0);
    step(&p, &M, M0 + 50 * MS, 1, &O);
    step(&p, &M, M0 + 250 * MS, 5, &O);
    check_reply(&O.r, 1, 4, 3, -1, 1);
    cr_assert_eq(O.r.d.reset_after_ns, 750 * MS);
}

Test(sliding_window, peek_never_writes_and_refusal_keeps_the_store,
     .init = setup)
{
    struct sliding_window_params p = mk(2, 1000, 100);
    struct mem before;

    step(&p, &M, M0, 0, &O);
    check_reply(&O.r, 0, 2, 2, -1, 0);
    cr_assert_eq(O.r.write, SLIDING_WINDOW_WRITE_NONE);
    cr_assert_eq(M.n, 0);
    step(&p, &M, M0, 2, &O);
    before = M;
    step(&p, &M, M0 + 500 * MS, 0, &O);
    cr_assert_eq(O.r.write, SLIDING_WINDOW_WRITE_NONE);
    step(&p, &M, M0 + 500 * MS, 1, &O);
    cr_assert_eq(O.r.d.limited, 1);
    cr_assert_eq(O.r.write, SLIDING_WINDOW_WRITE_NONE);
    cr_assert(memcmp(&M, &before, sizeof(M)) == 0);
}

Test(sliding_window, messy_input_is_dropped_merged_and_sorted, .init = setup)
{
    struct sliding_window_params p = mk(100, 10000, 1000);

    /* As HGETALL may give it: no order, an expired slot, an empty one,
     * and two starts of one slot (the resolution was 500 ms before). */
    M.v[0] = (struct sliding_window_slot){ M0 + 7 * S, 3 };
    M.v[1] = (struct sliding_window_slot){ M0 - 5 * S, 50 }; /* expired */
    M.v[2] = (struct sliding_window_slot){ M0 + 2 * S, 4 };
    M.v[3] = (struct sliding_window_slot){ M0 + 9 * S, 0 };
    M.v[4] = (struct sliding_window_slot){ M0 + 2500 * MS, 6 };
    M.v[5] = (struct sliding_window_slot){ M0 + 1 * S, 1 };
    M.n = 6;
    M.total = 99; /* stale: never read */
    step(&p, &M, M0 + 10200 * MS, 1, &O);
    cr_assert_eq(O.r.d.limited, 0);
    cr_assert_eq(O.r.next_n, 4);
    cr_assert_eq(O.next[0].start_ns, M0 + 1 * S);
    cr_assert_eq(O.next[0].count, 1);
    cr_assert_eq(O.next[1].start_ns, M0 + 2 * S);
    cr_assert_eq(O.next[1].count, 10);
    cr_assert_eq(O.next[2].start_ns, M0 + 7 * S);
    cr_assert_eq(O.next[3].start_ns, M0 + 10 * S);
    cr_assert_eq(O.r.total, 15);
    cr_assert_eq(O.r.d.remaining, 85);
}

Test(sliding_window, max_lowered_below_the_total_refuses_even_a_peek,
     .init = setup)
{
    struct sliding_window_params p = mk(2, 1000, 100);

    M.v[0] = (struct sliding_window_slot){ M0, 3 };
    M.v[1] = (struct sliding_window_slot){ M0 + 100 * MS, 2 };
    M.n = 2;
    step(&p, &M, M0 + 500 * MS, 0, &O);
    cr_assert_eq(O.r.d.limited, 1);
    cr_assert_eq(O.r.d.remaining, 0);
    cr_assert_eq(O.r.d.retry_after_ns, 500 * MS);
}

/* ---------------- Time ---------------- */

Test(sliding_window, clock_not_moving_keeps_the_same_answer, .init = setup)
{
    struct sliding_window_params p = mk(3, 1000, 100);

    for (int i = 2; i >= 0; i--) {
        step(&p, &M, M0 + 150 * MS, 1, &O);
        cr_assert_eq(O.r.d.remaining, i);
    }
    for (int i = 0; i < 3; i++) {
        step(&p, &M, M0 + 150 * MS, 1, &O);
        check_reply(&O.r, 1, 3, 0, 1, 1);
        cr_assert_eq(O.r.d.retry_after_ns, 950 * MS);
    }
    cr_assert_eq(M.n, 1);
    cr_assert_eq(M.v[0].count, 3);
}

Test(sliding_window, clock_going_back_counts_in_the_newest_slot, .init = setup)
{
    struct sliding_window_params p = mk(3, 1000, 100);

    step(&p, &M, M0 + 5 * S + 50 * MS, 1, &O); /* slot M0 + 5 s */
    step(&p, &M, M0 + 50 * MS, 1, &O);         /* the clock jumped 5 s */
    cr_assert_eq(O.r.d.limited, 0);
    cr_assert_eq(M.n, 1);
    cr_assert_eq(M.v[0].start_ns, M0 + 5 * S);
    cr_assert_eq(M.v[0].count, 2);
    cr_assert_eq(O.r.d.reset_after_ns, 5950 * MS);
    step(&p, &M, M0 + 50 * MS, 2, &O);
    cr_assert_eq(O.r.d.limited, 1);
    cr_assert_eq(O.r.d.retry_after_ns, 5950 * MS);
    check_retry_exact(&p, &M, M0 + 50 * MS, 2, O.r.d.retry_after_ns);
}

Test(sliding_window, years_idle_and_the_last_representable_time, .init = setup)
{
    struct sliding_window_params p = mk(2, MAX_MS, MAX_MS / NMAX);
    int64_t res = MAX_MS / NMAX * MS;

    M.v[0] = (struct sliding_window_slot){ 0, 2 };
    M.n = 1;
    step(&p, &M, INT64_MAX, 2, &O);
    cr_assert_eq(O.r.d.limited, 0);
    cr_assert_eq(O.r.next_n, 1);
    cr_assert_eq(O.next[0].start_ns, INT64_MAX - INT64_MAX % res);
    cr_assert_eq(O.r.d.reset_after_ns,
                 INT64_C(315360000000) * MS - INT64_MAX % res);

    p = mk(2, 1000, 10);
    M.v[0] = (struct sliding_window_slot){ M0, 2 };
    M.n = 1;
    step(&p, &M, M0 + INT64_C(3650) * 86400 * S, 2, &O);
    cr_assert_eq(O.r.d.limited, 0);
    cr_assert_eq(O.r.next_n, 1);
}

Test(sliding_window, a_slot_stored_near_int64_max_saturates, .init = setup)
{
    struct sliding_window_params p = mk(1, MAX_MS, MAX_MS);

    M.v[0] = (struct sliding_window_slot){ INT64_MAX - 5, 1 };
    M.n = 1;
    step(&p, &M, 0, 1, &O);
    cr_assert_eq(O.r.d.limited, 1);
    cr_assert_eq(O.r.d.retry_after_ns, INT64_MAX);
    cr_assert_eq(O.r.d.reset_after_ns, INT64_MAX);
}

/* ---------------- Extremes and exactness ---------------- */

Test(sliding_window, all_3600_slots_fill_and_the_oldest_drops_first,
     .init = setup)
{
    struct sliding_window_params p = mk(MAX_N, 3600, 1);

    cr_assert_eq(p.nslots, NMAX);
    for (int64_t i = 0; i < NMAX; i++) {
        step(&p, &M, M0 + i * MS + 7, 1, &O);
    }
    cr_assert_eq(M.n, NMAX);
    cr_assert_eq(M.total, NMAX);
    step(&p, &M, M0 + NMAX * MS, MAX_N - NMAX, &O);
    cr_assert_eq(O.r.d.limited, 0);
    cr_assert_eq(M.n, NMAX);
    cr_assert_eq(M.v[0].start_ns, M0 + 1 * MS);
    cr_assert_eq(M.total, MAX_N - 1);
    step(&p, &M, M0 + NMAX * MS, 2, &O);
    cr_assert_eq(O.r.d.retry_after_ns, 1 * MS); /* slot M0 + 1 ms leaves */
    check_retry_exact(&p, &M, M0 + NMAX * MS, 2, O.r.d.retry_after_ns);
    step(&p, &M, M0 + NMAX * MS, MAX_N, &O);
    cr_assert_eq(O.r.d.retry_after_ns, 3600 * MS);
    check_retry_exact(&p, &M, M0 + NMAX * MS, MAX_N, O.r.d.retry_after_ns);
}

Test(sliding_window, max_count_in_the_longest_window, .init = setup)
{
    struct sliding_window_params p = mk(MAX_N, MAX_MS, MAX_MS / NMAX);
    int64_t w = MAX_MS * MS;

    step(&p, &M, M0, MAX_N, &O);
    cr_assert_eq(O.r.d.remaining, 0);
    step(&p, &M, M0, 1, &O);
    cr_assert_eq(O.r.d.limited, 1);
    cr_assert_eq(O.r.d.retry_after_ns, M.v[0].start_ns + w - M0);
    check_retry_exact(&p, &M, M0, 1, O.r.d.retry_after_ns);
}

Test(sliding_window, a_too_small_output_buffer_is_refused, .init = setup)
{
    struct sliding_window_params p = mk(5, 1000, 10); /* 100 slots */
    const char *err = NULL;

    cr_assert_eq(
        sliding_window_decide(&p, NULL, 0, M0, 1, O.next, 99, &O.r, &err),
        SLIDING_WINDOW_EARGS);
    cr_assert_str_eq(err, SLIDING_WINDOW_ERR_BUFFER);
    cr_assert_eq(
        sliding_window_decide(&p, NULL, 0, M0, 1, NULL, 100, &O.r, &err),
        SLIDING_WINDOW_EARGS);
    cr_assert_eq(
        sliding_window_decide(&p, NULL, 0, M0, 1, O.next, 100, &O.r, &err),
        SLIDING_WINDOW_OK);
    /* A missing key may come as NULL, also for a peek. */
    cr_assert_eq(
        sliding_window_decide(&p, NULL, 0, M0, 0, O.next, 100, &O.r, &err),
        SLIDING_WINDOW_OK);
    check_reply(&O.r, 0, 5, 5, -1, 0);
    cr_assert_eq(O.r.next_n, 0);
}

Test(sliding_window, many_small_requests_equal_one_big_request, .init = setup)
{
    struct sliding_window_params p = mk(1000, 60000, 1000);
    static struct mem big;

    M.v[0] = (struct sliding_window_slot){ M0 - 30 * S, 100 };
    M.n = 1;
    big = M;
    for (int i = 0; i < 500; i++) {
        step(&p, &M, M0 + 40 * S + i * MS, 1, &O);
    }
    step(&p, &big, M0 + 40 * S + 499 * MS, 500, &O);
    cr_assert_eq(M.n, big.n);
    cr_assert(memcmp(M.v, big.v, M.n * sizeof(*M.v)) == 0);
    cr_assert_eq(M.total, big.total);
    cr_assert_eq(M.expiry_ms, big.expiry_ms);
}

Test(sliding_window, deciding_from_a_normalised_state_changes_nothing,
     .init = setup)
{
    struct sliding_window_params p = mk(50, 10000, 1000);
    static struct out first, again;
    static struct mem norm;
    uint64_t seed = 3;

    /* Scatter counts over 20 s, unsorted, with duplicates. */
    for (size_t i = 0; i < 40; i++) {
        seed = seed * 6364136223846793005u + 1442695040888963407u;
        M.v[i].start_ns = M0 + (int64_t)((seed >> 33) % 20) * S;
        M.v[i].count = (int64_t)((seed >> 20) % 3);
    }
    M.n = 40;
    for (int64_t t = 0; t < 25; t++) {
        peek_at(&p, &M, M0 + 12 * S + t * 333 * MS, 0, &first);
        memset(&norm, 0, sizeof(norm));
        memcpy(norm.v, first.next, first.r.next_n * sizeof(*first.next));
        norm.n = first.r.next_n;
        peek_at(&p, &norm, M0 + 12 * S + t * 333 * MS, 0, &again);
        cr_assert(memcmp(&first.r, &again.r, sizeof(first.r)) == 0);
        cr_assert(memcmp(first.next, again.next,
                         first.r.next_n * sizeof(*first.next)) == 0);
    }
}

Test(sliding_window, random_sequences_keep_invariants_and_exact_retries,
     .init = setup)
{
    struct sliding_window_params p = mk(9, 1000, 125);
    uint64_t seed = 13;
    int64_t now = M0;

    for (int k = 0; k < 3000; k++) {
        int64_t cost;

        seed = seed * 6364136223846793005u + 1442695040888963407u;
        now += (int64_t)((seed >> 33) % (120 * MS));
        cost = (int64_t)((seed >> 20) % 11);
        step(&p, &M, now, cost, &O);
        if (O.r.d.limited && cost <= p.max) {
            check_retry_exact(&p, &M, now, cost, O.r.d.retry_after_ns);
        }
        if (O.r.d.limited) {
            cr_assert_eq(O.r.write, SLIDING_WINDOW_WRITE_NONE);
        }
    }
}

/* ---------------- Errors ---------------- */

/* One bad parameter set and its text. */
struct param_case {
    int64_t max, window_ms, resolution_ms;
    const char *err;
};

static const struct param_case PARAM_CASES[] = {
    { 0, 1000, 100, SLIDING_WINDOW_ERR_MAX },
    { MAX_N + 1, 1000, 100, SLIDING_WINDOW_ERR_MAX },
    { 5, 0, 100, SLIDING_WINDOW_ERR_WINDOW },
    { 5, MAX_MS + 1, 1, SLIDING_WINDOW_ERR_WINDOW },
    { 5, 1000, 0, SLIDING_WINDOW_ERR_RESOLUTION },
    { 5, 1000, -100, SLIDING_WINDOW_ERR_RESOLUTION },
    { 5, 1000, 300, SLIDING_WINDOW_ERR_RESOLUTION },
    { 5, 1000, 2000, SLIDING_WINDOW_ERR_RESOLUTION },
    { 5, 3601, 1, SLIDING_WINDOW_ERR_SLOTS },
    { 5, MAX_MS, 1, SLIDING_WINDOW_ERR_SLOTS },
};
#define NPARAM (sizeof(PARAM_CASES) / sizeof(*PARAM_CASES))

ParameterizedTestParameters(sliding_window, rejects_nonsense_parameters)
{
    static size_t ids[NPARAM];

    return px_param_ids(ids, NPARAM);
}

ParameterizedTest(size_t *id, sliding_window, rejects_nonsense_parameters)
{
    const struct param_case *c = &PARAM_CASES[*id];
    struct sliding_window_params p;
    const char *err = NULL;

    cr_assert_eq(sliding_window_params_init(&p, c->max, c->window_ms,
                                            c->resolution_ms, &err),
                 SLIDING_WINDOW_EARGS);
    cr_assert_str_eq(err, c->err);
}

Test(sliding_window, decide_guards_parameters_init_never_made, .init = setup)
{
    struct sliding_window_params good = mk(5, 1000, 100), p;
    const char *err = NULL;

    p = good;
    p.resolution_ns = 0; /* would divide by zero */
    cr_assert_eq(
        sliding_window_decide(&p, NULL, 0, M0, 1, O.next, NMAX, &O.r, &err),
        SLIDING_WINDOW_EARGS);
    cr_assert_str_eq(err, SLIDING_WINDOW_ERR_RESOLUTION);
    p = good;
    p.nslots = NMAX + 1; /* disagrees with window / resolution */
    cr_assert_eq(
        sliding_window_decide(&p, NULL, 0, M0, 1, O.next, NMAX, &O.r, &err),
        SLIDING_WINDOW_EARGS);
    cr_assert_str_eq(err, SLIDING_WINDOW_ERR_SLOTS);
    p = good;
    p.window_ns = 0;
    cr_assert_eq(
        sliding_window_decide(&p, NULL, 0, M0, 1, O.next, NMAX, &O.r, &err),
        SLIDING_WINDOW_EARGS);
    cr_assert_str_eq(err, SLIDING_WINDOW_ERR_WINDOW);
}

Test(sliding_window, rejects_a_malformed_state_negative_time_and_cost,
     .init = setup)
{
    static const struct sliding_window_slot neg_start[] = { { -1, 1 } };
    static const struct sliding_window_slot neg_count[] = { { M0, -1 } };
    static const struct sliding_window_slot huge[] = { { M0, INT64_MAX },
                                                       { M0 + 100 * MS, 1 } };
    struct sliding_window_params p = mk(5, 1000, 100);
    const char *err = NULL;

    cr_assert_eq(sliding_window_decide(&p, neg_start, 1, M0, 1, O.next, NMAX,
                                       &O.r, &err),
                 SLIDING_WINDOW_ESTATE);
    cr_assert_str_eq(err, SLIDING_WINDOW_ERR_STATE);
    cr_assert_eq(sliding_window_decide(&p, neg_count, 1, M0, 1, O.next, NMAX,
                                       &O.r, &err),
                 SLIDING_WINDOW_ESTATE);
    cr_assert_eq(sliding_window_decide(&p, huge, 2, M0 + 150 * MS, 1, O.next,
                                       NMAX, &O.r, &err),
                 SLIDING_WINDOW_ESTATE);
    cr_assert_eq(O.r.write, SLIDING_WINDOW_WRITE_NONE);
    cr_assert_eq(
        sliding_window_decide(&p, NULL, 0, -1, 1, O.next, NMAX, &O.r, &err),
        SLIDING_WINDOW_EARGS);
    cr_assert_str_eq(err, SLIDING_WINDOW_ERR_TIME);
    cr_assert_eq(
        sliding_window_decide(&p, NULL, 0, M0, -1, O.next, NMAX, &O.r, &err),
        SLIDING_WINDOW_EARGS);
    cr_assert_str_eq(err, SLIDING_WINDOW_ERR_COST);
}

/* ---------------- ADJUST ---------------- */

/* One adjust against the store into *o; applies the write (DEL empties
 * the store). Asserts its reply is what a cost-1 decide answers on the
 * state it leaves (a PEEK), and the write's shape. */
static void adjust(const struct sliding_window_params *p, struct mem *m,
                   int64_t now, int64_t delta, struct out *o)
{
    static struct out pk;
    const char *err = NULL;
    int rc = sliding_window_adjust(p, m->v, m->n, now, delta, o->next, NMAX,
                                   &o->r, &err);

    cr_assert_eq(rc, SLIDING_WINDOW_OK, "adjust: %s", err);
    check_next(p, o);
    cr_assert_eq(sliding_window_decide(p, o->next, o->r.next_n, now, 1, pk.next,
                                       NMAX, &pk.r, &err),
                 SLIDING_WINDOW_OK);
    cr_assert(memcmp(&o->r.d, &pk.r.d, sizeof(pk.r.d)) == 0,
              "adjust's reply is not a peek's");
    if (o->r.write == SLIDING_WINDOW_WRITE_SET) {
        cr_assert(delta != 0 && o->r.next_n > 0 && o->r.expiry_ms >= 1);
        memcpy(m->v, o->next, o->r.next_n * sizeof(*o->next));
        m->n = o->r.next_n;
        m->total = o->r.total;
        m->expiry_ms = o->r.expiry_ms;
    } else if (o->r.write == SLIDING_WINDOW_WRITE_DEL) {
        cr_assert(delta < 0 && o->r.next_n == 0);
        m->n = 0;
        m->total = 0;
    }
}

Test(sliding_window, adjust_into_debt_refuses_until_the_slots_leave,
     .init = setup)
{
    struct sliding_window_params p = mk(10, 60000, 1000);

    step(&p, &M, M0, 4, &O);
    /* 25 more units of work done 10 s later: 29 of 10, never refused. */
    adjust(&p, &M, M0 + 10 * S, 25, &O);
    cr_assert_eq(O.r.write, SLIDING_WINDOW_WRITE_SET);
    check_reply(&O.r, 1, 10, 0, 60, 60);
    cr_assert_eq(M.n, 2);
    cr_assert_eq(M.v[1].start_ns, M0 + 10 * S);
    cr_assert_eq(M.v[1].count, 25);
    cr_assert_eq(M.total, 29);
    cr_assert_eq(M.expiry_ms, 60000);
    /* Only the slot of the debt leaving frees room: at M0 + 70 s. */
    step(&p, &M, M0 + 61 * S, 1, &O);
    cr_assert_eq(O.r.d.limited, 1);
    cr_assert_eq(O.r.d.retry_after_ns, 9 * S);
    check_retry_exact(&p, &M, M0 + 61 * S, 1, O.r.d.retry_after_ns);
    step(&p, &M, M0 + 70 * S, 10, &O);
    cr_assert_eq(O.r.d.limited, 0);
    /* A total at 2^53 - 1 takes no more (the twin stores no more). */
    setup();
    p = mk(MAX_N, 60000, 1000);
    adjust(&p, &M, M0, MAX_N, &O);
    cr_assert_eq(M.total, MAX_N);
    adjust(&p, &M, M0 + S, MAX_N, &O);
    cr_assert_eq(O.r.write, SLIDING_WINDOW_WRITE_NONE);
    check_reply(&O.r, 1, MAX_N, 0, 59, 59);
}

Test(sliding_window, adjust_gives_back_newest_slots_first_down_to_fresh,
     .init = setup)
{
    struct sliding_window_params p = mk(10, 1000, 100);
    struct out fresh;
    const char *err = NULL;

    step(&p, &M, M0, 3, &O);
    step(&p, &M, M0 + 100 * MS, 2, &O);
    step(&p, &M, M0 + 200 * MS, 4, &O);
    /* 5 back: the newest slot's 4, then 1 of the one before. */
    adjust(&p, &M, M0 + 250 * MS, -5, &O);
    cr_assert_eq(O.r.write, SLIDING_WINDOW_WRITE_SET);
    cr_assert_eq(M.n, 2);
    cr_assert_eq(M.v[0].count, 3);
    cr_assert_eq(M.v[1].start_ns, M0 + 100 * MS);
    cr_assert_eq(M.v[1].count, 1);
    cr_assert_eq(M.total, 4);
    cr_assert_eq(M.expiry_ms, 850); /* the newest left: slot M0 + 100 ms */
    /* A delta of 0 changes nothing. */
    adjust(&p, &M, M0 + 250 * MS, 0, &O);
    cr_assert_eq(O.r.write, SLIDING_WINDOW_WRITE_NONE);
    /* Far more than stored: the key goes, and the reply is a fresh key's
     * peek. Giving back again has nothing to take. */
    adjust(&p, &M, M0 + 300 * MS, -MAX_N, &O);
    cr_assert_eq(O.r.write, SLIDING_WINDOW_WRITE_DEL);
    cr_assert_eq(M.n, 0);
    cr_assert_eq(sliding_window_decide(&p, NULL, 0, M0 + 300 * MS, 1,
                                       fresh.next, NMAX, &fresh.r, &err),
                 SLIDING_WINDOW_OK);
    cr_assert(memcmp(&O.r.d, &fresh.r.d, sizeof(O.r.d)) == 0);
    adjust(&p, &M, M0 + 300 * MS, -1, &O);
    cr_assert_eq(O.r.write, SLIDING_WINDOW_WRITE_NONE);
    /* Expired slots give nothing back: only the live ones count. */
    step(&p, &M, M0, 3, &O);
    adjust(&p, &M, M0 + 1500 * MS, -2, &O);
    cr_assert_eq(O.r.write, SLIDING_WINDOW_WRITE_NONE);
    check_reply(&O.r, 0, 10, 9, -1, 1);
}

Test(sliding_window, random_adjusts_answer_as_a_peek_and_keep_invariants,
     .init = setup)
{
    struct sliding_window_params p = mk(9, 1000, 125);
    uint64_t seed = 29;
    int64_t now = M0;

    for (int k = 0; k < 3000; k++) {
        int64_t before = M.n > 0 ? M.total : 0, x;

        seed = seed * 6364136223846793005u + 1442695040888963407u;
        now += (int64_t)((seed >> 33) % (120 * MS));
        x = (int64_t)((seed >> 20) % 31) - 15;
        if ((seed >> 40) % 3 == 0) {
            step(&p, &M, now, x < 0 ? -x : x, &O);
            continue;
        }
        /* The live total before, as the adjust sees it. */
        peek_at(&p, &M, now, 0, &O);
        before = O.r.total;
        adjust(&p, &M, now, x, &O);
        cr_assert_eq(O.r.total,
                     x >= 0 ? before + x : (before + x > 0 ? before + x : 0));
        if (O.r.d.limited) {
            check_retry_exact(&p, &M, now, 1, O.r.d.retry_after_ns);
        }
    }
}

Test(sliding_window, adjust_rejects_a_bad_delta_and_state_writing_nothing,
     .init = setup)
{
    static const struct sliding_window_slot neg_count[] = { { M0, -1 } };
    struct sliding_window_params p = mk(5, 1000, 100);
    const char *err = NULL;

    cr_assert_eq(sliding_window_adjust(&p, NULL, 0, M0, MAX_N + 1, O.next, NMAX,
                                       &O.r, &err),
                 SLIDING_WINDOW_EARGS);
    cr_assert_str_eq(err, SLIDING_WINDOW_ERR_DELTA);
    cr_assert_eq(sliding_window_adjust(&p, NULL, 0, M0, -MAX_N - 1, O.next,
                                       NMAX, &O.r, &err),
                 SLIDING_WINDOW_EARGS);
    cr_assert_eq(sliding_window_adjust(&p, neg_count, 1, M0, 1, O.next, NMAX,
                                       &O.r, &err),
                 SLIDING_WINDOW_ESTATE);
    cr_assert_str_eq(err, SLIDING_WINDOW_ERR_STATE);
    cr_assert_eq(O.r.write, SLIDING_WINDOW_WRITE_NONE);
}
