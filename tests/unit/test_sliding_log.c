/* Sliding log: window edges to the ns, refused attempts logged (hammering
 * stays limited until it pauses), min_interval from the newest logged
 * entry, the cap at max entries, the horizon, peeks, never-passing costs,
 * clock jumps, idle years, the conf maxima (100000 entries, 3650 days),
 * and that many small requests equal one big one.
 *
 * Time is a parameter: every test steps `now` explicitly, and a tiny
 * in-memory store applies the writes sliding_log_decide() asks for. */
#include "tests/support/px_test.h"
#include "tests/support/rl_test.h"

#include <criterion/parameterized.h>
#include <stdint.h>
#include <string.h>

#include "algorithms/rl.h"
#include "algorithms/sliding_log.h"

PX_TEST_SUITE(sliding_log);

#define S  RL_NS_PER_SEC
#define MS RL_NS_PER_MS

/* A realistic clock: 2023-11-14T22:13:20Z in nanoseconds. */
#define T0 INT64_C(1700000000000000000)

#define NMAX   SLIDING_LOG_MAX_ENTRIES
#define MAX_MS SLIDING_LOG_MAX_DURATION_MS

/* The one key of a test, as a store holds it. */
struct mem {
    int64_t v[NMAX];   /* the timestamps, sorted */
    size_t n;          /* entries; 0: no key */
    int64_t expiry_ms; /* the PEXPIRE of the last write */
};

/* What one decision returns, with its entries. */
struct out {
    struct sliding_log_result r; /* the result */
    int64_t next[NMAX];          /* next[0 .. r.next_n) */
};

/* The store, a scratch copy and the output are large: static, zeroed. */
static struct mem M, COPY;
static struct out O, O2;

static void setup(void)
{
    memset(&M, 0, sizeof(M));
    memset(&O, 0, sizeof(O));
}

static struct sliding_log_params mk(int64_t max, int64_t window_ms,
                                    int64_t interval_ms)
{
    struct sliding_log_params p;
    const char *err = NULL;

    cr_assert_eq(sliding_log_params_init(&p, max, window_ms, interval_ms, &err),
                 SLIDING_LOG_OK, "params: %s", err);
    return p;
}

/* One decision against the store into *o; applies the write. */
static void step(const struct sliding_log_params *p, struct mem *m, int64_t now,
                 int64_t cost, struct out *o)
{
    const char *err = NULL;
    int rc = sliding_log_decide(p, m->v, m->n, now, cost, o->next, NMAX, &o->r,
                                &err);

    cr_assert_eq(rc, SLIDING_LOG_OK, "decide: %s", err);
    cr_assert(o->r.d.reset_after_ns >= 0);
    cr_assert(o->r.d.retry_after_ns > 0 || o->r.d.retry_after_ns == -S,
              "retry %lld", (long long)o->r.d.retry_after_ns);
    cr_assert(o->r.d.remaining >= 0 && o->r.d.remaining <= p->max);
    cr_assert(o->r.next_n <= (size_t)p->max);
    for (size_t i = 1; i < o->r.next_n; i++) {
        cr_assert(o->next[i - 1] <= o->next[i], "next is not sorted");
    }
    if (o->r.write == SLIDING_LOG_WRITE_SET) {
        cr_assert(cost > 0 && cost <= p->max);
        cr_assert_eq(o->r.added, cost);
        cr_assert(o->r.expiry_ms >= 1);
        memcpy(m->v, o->next, o->r.next_n * sizeof(*o->next));
        m->n = o->r.next_n;
        m->expiry_ms = o->r.expiry_ms;
    } else {
        cr_assert_eq(o->r.added, 0);
    }
}

/* Decides on a copy of the store: *m stays as it was. */
static void peek_at(const struct sliding_log_params *p, const struct mem *m,
                    int64_t now, int64_t cost, struct out *o)
{
    memcpy(&COPY, m, sizeof(COPY));
    step(p, &COPY, now, cost, o);
}

/* Asserts that a refusal's retry_after is exact against the log as stored
 * after it (the refused attempt's own entries included). */
static void check_retry_exact(const struct sliding_log_params *p,
                              const struct mem *m, int64_t now, int64_t cost,
                              int64_t retry)
{
    peek_at(p, m, now + retry, cost, &O2);
    cr_assert_eq(O2.r.d.limited, 0, "refused at now + retry %lld",
                 (long long)retry);
    peek_at(p, m, now + retry - 1, cost, &O2);
    cr_assert_eq(O2.r.d.limited, 1, "admitted 1 ns before retry %lld",
                 (long long)retry);
}

static void check_reply(const struct sliding_log_result *r, int64_t l,
                        int64_t lim, int64_t rem, int64_t retry, int64_t reset)
{
    rl_test_check_reply(&r->d, l, lim, rem, retry, reset);
}

/* ---------------- Basics ---------------- */

Test(sliding_log, new_key_logs_the_first_attempt, .init = setup)
{
    struct sliding_log_params p = mk(5, 900000, 1000); /* 5 per 15 min */

    step(&p, &M, T0, 1, &O);
    check_reply(&O.r, 0, 5, 4, -1, 900);
    cr_assert_eq(O.r.write, SLIDING_LOG_WRITE_SET);
    cr_assert_eq(M.n, 1);
    cr_assert_eq(M.v[0], T0);
    cr_assert_eq(M.expiry_ms, 900000);
}

Test(sliding_log, full_log_refuses_and_logs_the_refused_attempt, .init = setup)
{
    struct sliding_log_params p = mk(5, 900000, 1000);

    for (int64_t i = 0; i < 5; i++) {
        step(&p, &M, T0 + i * S, 1, &O);
        cr_assert_eq(O.r.d.limited, 0);
    }
    step(&p, &M, T0 + 5 * S, 1, &O);
    cr_assert_eq(O.r.d.limited, 1);
    cr_assert_eq(O.r.write, SLIDING_LOG_WRITE_SET);
    /* Capped at 5: T0 is forgotten, the refused attempt is the newest. */
    cr_assert_eq(M.n, 5);
    cr_assert_eq(M.v[0], T0 + 1 * S);
    cr_assert_eq(M.v[4], T0 + 5 * S);
    /* Room for one once T0 + 1 s leaves: 896 s from now. */
    check_reply(&O.r, 1, 5, 0, 896, 900);
    cr_assert_eq(O.r.d.retry_after_ns, 896 * S);
    check_retry_exact(&p, &M, T0 + 5 * S, 1, O.r.d.retry_after_ns);
}

Test(sliding_log, hammering_stays_limited_until_the_client_pauses,
     .init = setup)
{
    struct sliding_log_params p = mk(3, 1000, 0);
    int64_t now = T0;

    step(&p, &M, now, 3, &O);
    /* An attempt every 100 ms for 5 s: every one refused, though a log of
     * admitted requests only would have had room after 1 s. */
    for (int i = 0; i < 50; i++) {
        now += 100 * MS;
        step(&p, &M, now, 1, &O);
        cr_assert_eq(O.r.d.limited, 1, "attempt %d passed", i);
    }
    cr_assert_eq(M.n, 3);
    /* The oldest of the three newest attempts leaves after 800 ms. */
    cr_assert_eq(O.r.d.retry_after_ns, 800 * MS);
    check_retry_exact(&p, &M, now, 1, O.r.d.retry_after_ns);
}

Test(sliding_log, min_interval_counts_from_the_newest_logged_attempt,
     .init = setup)
{
    struct sliding_log_params p = mk(100, 60000, 1000);

    step(&p, &M, T0, 1, &O);
    peek_at(&p, &M, T0 + 1 * S - 1, 1, &O);
    cr_assert_eq(O.r.d.limited, 1);
    cr_assert_eq(O.r.d.retry_after_ns, 1 * S); /* from its own entry */
    peek_at(&p, &M, T0 + 1 * S, 1, &O);
    cr_assert_eq(O.r.d.limited, 0);

    step(&p, &M, T0 + 500 * MS, 1, &O); /* too soon: refused, logged */
    cr_assert_eq(O.r.d.limited, 1);
    cr_assert_eq(O.r.d.retry_after_ns, 1 * S);
    cr_assert_eq(O.r.d.remaining, 98);
    step(&p, &M, T0 + 1 * S, 1, &O); /* 1 s after T0, 0.5 s after that */
    cr_assert_eq(O.r.d.limited, 1);
    step(&p, &M, T0 + 2 * S, 1, &O);
    cr_assert_eq(O.r.d.limited, 0);
    cr_assert_eq(M.n, 4);
}

Test(sliding_log, an_entry_leaves_the_window_exactly_window_after_it,
     .init = setup)
{
    struct sliding_log_params p = mk(1, 1000, 0);

    step(&p, &M, T0, 1, &O);
    peek_at(&p, &M, T0 + 1 * S - 1, 1, &O);
    cr_assert_eq(O.r.d.limited, 1);
    cr_assert_eq(O.r.d.retry_after_ns, 1 * S); /* its own entry now */
    peek_at(&p, &M, T0 + 1 * S, 1, &O);
    cr_assert_eq(O.r.d.limited, 0);
    cr_assert_eq(O.r.next_n, 1);
    cr_assert_eq(O.next[0], T0 + 1 * S);
}

Test(sliding_log, cost_above_max_is_refused_without_being_logged, .init = setup)
{
    struct sliding_log_params p = mk(4, 1000, 0);

    step(&p, &M, T0, 5, &O);
    check_reply(&O.r, 1, 4, 4, -1, 0);
    cr_assert_eq(O.r.write, SLIDING_LOG_WRITE_NONE);
    cr_assert_eq(M.n, 0);
    step(&p, &M, T0, 1, &O);
    step(&p, &M, T0 + 250 * MS, 5, &O);
    check_reply(&O.r, 1, 4, 3, -1, 1);
    cr_assert_eq(O.r.d.reset_after_ns, 750 * MS);
    cr_assert_eq(M.n, 1);
}

Test(sliding_log, peek_is_never_refused_by_min_interval_and_never_writes,
     .init = setup)
{
    struct sliding_log_params p = mk(3, 1000, 500);

    step(&p, &M, T0, 0, &O);
    check_reply(&O.r, 0, 3, 3, -1, 0);
    cr_assert_eq(M.n, 0);
    step(&p, &M, T0, 2, &O);
    step(&p, &M, T0 + 100 * MS, 0, &O);
    cr_assert_eq(O.r.d.limited, 0);
    cr_assert_eq(O.r.d.remaining, 1);
    cr_assert_eq(O.r.write, SLIDING_LOG_WRITE_NONE);
    cr_assert_eq(M.n, 2);
}

Test(sliding_log, a_cost_logs_that_many_entries_at_now, .init = setup)
{
    struct sliding_log_params p = mk(10, 1000, 0);

    step(&p, &M, T0, 4, &O);
    cr_assert_eq(M.n, 4);
    for (size_t i = 0; i < 4; i++) {
        cr_assert_eq(M.v[i], T0);
    }
    step(&p, &M, T0 + 10, 7, &O); /* refused: 7 more entries, capped */
    cr_assert_eq(O.r.d.limited, 1);
    cr_assert_eq(M.n, 10);
    cr_assert_eq(M.v[0], T0);
    cr_assert_eq(M.v[3], T0 + 10);
    cr_assert_eq(M.v[9], T0 + 10);
    /* 3 more need the 7 oldest gone: the last of them is T0 + 10. */
    cr_assert_eq(O.r.d.retry_after_ns, 1 * S);
    check_retry_exact(&p, &M, T0 + 10, 7, O.r.d.retry_after_ns);
}

Test(sliding_log, max_lowered_below_the_log_refuses_even_a_peek, .init = setup)
{
    struct sliding_log_params p = mk(2, 1000, 0);

    for (size_t i = 0; i < 5; i++) {
        M.v[i] = T0 + (int64_t)i * 100 * MS;
    }
    M.n = 5;
    step(&p, &M, T0 + 450 * MS, 0, &O);
    cr_assert_eq(O.r.d.limited, 1);
    cr_assert_eq(O.r.d.remaining, 0);
    /* At most 2 live: T0 + 200 ms must leave, at T0 + 1.2 s. */
    cr_assert_eq(O.r.d.retry_after_ns, 750 * MS);
    cr_assert_eq(O.r.next_n, 2); /* informative: the newest 2 */
    step(&p, &M, T0 + 450 * MS, 1, &O);
    cr_assert_eq(O.r.d.limited, 1);
    cr_assert_eq(M.n, 2);
    cr_assert_eq(M.v[0], T0 + 400 * MS);
    cr_assert_eq(M.v[1], T0 + 450 * MS);
}

Test(sliding_log, min_interval_longer_than_the_window_keeps_the_newest_entry,
     .init = setup)
{
    struct sliding_log_params p = mk(10, 1000, 5000);

    cr_assert_eq(p.horizon_ns, 5 * S);
    step(&p, &M, T0, 1, &O);
    cr_assert_eq(O.r.d.reset_after_ns, 5 * S);
    step(&p, &M, T0 + 3 * S, 1, &O);
    cr_assert_eq(O.r.d.limited, 1);
    cr_assert_eq(O.r.d.remaining, 9); /* T0 has left the window */
    cr_assert_eq(O.r.d.retry_after_ns, 5 * S);
    step(&p, &M, T0 + 8 * S, 1, &O);
    cr_assert_eq(O.r.d.limited, 0);
    /* T0 and T0 + 3 s are past the horizon (5 s): dropped. */
    cr_assert_eq(M.n, 1);
    cr_assert_eq(M.v[0], T0 + 8 * S);
}

/* ---------------- Time ---------------- */

Test(sliding_log, clock_not_moving_with_min_interval_refuses_every_retry,
     .init = setup)
{
    struct sliding_log_params p = mk(100, 1000, 200);

    step(&p, &M, T0, 1, &O);
    for (int i = 0; i < 5; i++) {
        step(&p, &M, T0, 1, &O);
        cr_assert_eq(O.r.d.limited, 1);
        cr_assert_eq(O.r.d.retry_after_ns, 200 * MS);
    }
    cr_assert_eq(M.n, 6);
}

Test(sliding_log, clock_going_back_keeps_future_entries_live_and_newest,
     .init = setup)
{
    struct sliding_log_params p = mk(3, 1000, 100);

    step(&p, &M, T0 + 5 * S, 1, &O);
    step(&p, &M, T0, 1, &O); /* 5 s back: within min_interval of T0 + 5 s */
    cr_assert_eq(O.r.d.limited, 1);
    cr_assert_eq(M.n, 2);
    cr_assert_eq(M.v[0], T0);
    cr_assert_eq(M.v[1], T0 + 5 * S);
    cr_assert_eq(O.r.d.retry_after_ns, 5100 * MS);
    cr_assert_eq(O.r.d.reset_after_ns, 6 * S);
    check_retry_exact(&p, &M, T0, 1, O.r.d.retry_after_ns);
    /* Without min_interval the count still includes the future entry. */
    p = mk(1, 1000, 0);
    step(&p, &M, T0 + 2 * S, 1, &O);
    cr_assert_eq(O.r.d.limited, 1);
    cr_assert_eq(O.r.d.remaining, 0);
}

Test(sliding_log, years_idle_and_the_last_representable_time, .init = setup)
{
    struct sliding_log_params p = mk(2, MAX_MS, MAX_MS);

    M.v[0] = 0;
    M.v[1] = 1;
    M.n = 2;
    step(&p, &M, INT64_MAX, 2, &O);
    cr_assert_eq(O.r.d.limited, 0);
    cr_assert_eq(M.n, 2);
    cr_assert_eq(M.v[0], INT64_MAX);
    cr_assert_eq(O.r.d.reset_after_ns, MAX_MS * MS);

    p = mk(2, 1000, 1000);
    M.v[0] = T0;
    M.v[1] = T0;
    M.n = 2;
    step(&p, &M, T0 + INT64_C(3650) * 86400 * S, 2, &O);
    cr_assert_eq(O.r.d.limited, 0);
    cr_assert_eq(M.n, 2);
}

Test(sliding_log, an_entry_near_int64_max_saturates, .init = setup)
{
    struct sliding_log_params p = mk(1, MAX_MS, MAX_MS);

    M.v[0] = INT64_MAX - 5;
    M.n = 1;
    step(&p, &M, 0, 1, &O);
    cr_assert_eq(O.r.d.limited, 1);
    cr_assert_eq(O.r.d.retry_after_ns, INT64_MAX);
    cr_assert_eq(O.r.d.reset_after_ns, INT64_MAX);
}

/* ---------------- Extremes and exactness ---------------- */

Test(sliding_log, the_largest_log_stays_at_100000_entries, .init = setup)
{
    struct sliding_log_params p = mk(NMAX, MAX_MS, 0);
    int64_t w = MAX_MS * MS;

    step(&p, &M, T0, NMAX - 1, &O);
    step(&p, &M, T0 + 1, 1, &O);
    cr_assert_eq(O.r.d.remaining, 0);
    cr_assert_eq(M.n, NMAX);
    step(&p, &M, T0 + 2, NMAX, &O); /* refused, logged, capped */
    cr_assert_eq(O.r.d.limited, 1);
    cr_assert_eq(M.n, NMAX);
    cr_assert_eq(M.v[0], T0 + 2);
    cr_assert_eq(O.r.d.retry_after_ns, w);
    check_retry_exact(&p, &M, T0 + 2, NMAX, O.r.d.retry_after_ns);
    step(&p, &M, T0 + 3, 1, &O);
    cr_assert_eq(O.r.d.retry_after_ns, w - 1);
    cr_assert_eq(M.v[0], T0 + 2);
    cr_assert_eq(M.v[NMAX - 1], T0 + 3);
}

Test(sliding_log, many_small_requests_equal_one_big_request, .init = setup)
{
    struct sliding_log_params p = mk(500, 60000, 0);
    static struct mem big;

    M.v[0] = T0 - 30 * S;
    M.v[1] = T0 - 10 * S;
    M.n = 2;
    memcpy(&big, &M, sizeof(big));
    for (int i = 0; i < 300; i++) {
        step(&p, &M, T0, 1, &O);
        cr_assert_eq(O.r.d.limited, 0);
    }
    step(&p, &big, T0, 300, &O);
    cr_assert_eq(M.n, big.n);
    cr_assert(memcmp(M.v, big.v, M.n * sizeof(*M.v)) == 0);
    cr_assert_eq(M.expiry_ms, big.expiry_ms);
}

Test(sliding_log, deciding_from_the_pruned_log_changes_nothing, .init = setup)
{
    struct sliding_log_params p = mk(50, 10000, 300);
    static struct mem pruned;
    static struct out first;

    for (size_t i = 0; i < 40; i++) {
        M.v[i] = T0 + (int64_t)i * 500 * MS;
    }
    M.n = 40;
    for (int64_t t = 0; t < 30; t++) {
        int64_t now = T0 + 15 * S + t * 777 * MS;

        peek_at(&p, &M, now, 0, &first);
        memset(&pruned, 0, sizeof(pruned));
        memcpy(pruned.v, first.next, first.r.next_n * sizeof(*first.next));
        pruned.n = first.r.next_n;
        peek_at(&p, &pruned, now, 0, &O);
        cr_assert(memcmp(&first.r, &O.r, sizeof(O.r)) == 0);
        peek_at(&p, &M, now, 1, &first);
        peek_at(&p, &pruned, now, 1, &O);
        cr_assert(memcmp(&first.r.d, &O.r.d, sizeof(O.r.d)) == 0);
    }
}

Test(sliding_log, random_sequences_keep_invariants_and_exact_retries,
     .init = setup)
{
    struct sliding_log_params p = mk(9, 1000, 90);
    uint64_t seed = 17;
    int64_t now = T0;

    for (int k = 0; k < 3000; k++) {
        int64_t cost;

        seed = seed * 6364136223846793005u + 1442695040888963407u;
        now += (int64_t)((seed >> 33) % (150 * MS));
        cost = (int64_t)((seed >> 20) % 11);
        step(&p, &M, now, cost, &O);
        if (O.r.d.limited && cost <= p.max) {
            check_retry_exact(&p, &M, now, cost, O.r.d.retry_after_ns);
        }
    }
}

/* ---------------- Errors ---------------- */

/* One bad parameter set and its text. */
struct param_case {
    int64_t max, window_ms, interval_ms;
    const char *err;
};

static const struct param_case PARAM_CASES[] = {
    { 0, 1000, 0, SLIDING_LOG_ERR_MAX },
    { NMAX + 1, 1000, 0, SLIDING_LOG_ERR_MAX },
    { 5, 0, 0, SLIDING_LOG_ERR_WINDOW },
    { 5, MAX_MS + 1, 0, SLIDING_LOG_ERR_WINDOW },
    { 5, 1000, -1, SLIDING_LOG_ERR_INTERVAL },
    { 5, 1000, MAX_MS + 1, SLIDING_LOG_ERR_INTERVAL },
};
#define NPARAM (sizeof(PARAM_CASES) / sizeof(*PARAM_CASES))

ParameterizedTestParameters(sliding_log, rejects_nonsense_parameters)
{
    static size_t ids[NPARAM];

    return px_param_ids(ids, NPARAM);
}

ParameterizedTest(size_t *id, sliding_log, rejects_nonsense_parameters)
{
    const struct param_case *c = &PARAM_CASES[*id];
    struct sliding_log_params p;
    const char *err = NULL;

    cr_assert_eq(
        sliding_log_params_init(&p, c->max, c->window_ms, c->interval_ms, &err),
        SLIDING_LOG_EARGS);
    cr_assert_str_eq(err, c->err);
}

Test(sliding_log, decide_guards_parameters_and_the_buffer, .init = setup)
{
    struct sliding_log_params good = mk(5, 1000, 100), p;
    const char *err = NULL;

    p = good;
    p.window_ns = 0;
    cr_assert_eq(
        sliding_log_decide(&p, NULL, 0, T0, 1, O.next, NMAX, &O.r, &err),
        SLIDING_LOG_EARGS);
    cr_assert_str_eq(err, SLIDING_LOG_ERR_WINDOW);
    p = good;
    p.horizon_ns = 0; /* not max(window, min_interval) */
    cr_assert_eq(
        sliding_log_decide(&p, NULL, 0, T0, 1, O.next, NMAX, &O.r, &err),
        SLIDING_LOG_EARGS);
    cr_assert_str_eq(err, SLIDING_LOG_ERR_INTERVAL);
    cr_assert_eq(
        sliding_log_decide(&good, NULL, 0, T0, 1, O.next, 4, &O.r, &err),
        SLIDING_LOG_EARGS);
    cr_assert_str_eq(err, SLIDING_LOG_ERR_BUFFER);
    cr_assert_eq(sliding_log_decide(&good, NULL, 0, T0, 1, NULL, 5, &O.r, &err),
                 SLIDING_LOG_EARGS);
    cr_assert_eq(
        sliding_log_decide(&good, NULL, 0, T0, 1, O.next, 5, &O.r, &err),
        SLIDING_LOG_OK);
}

Test(sliding_log, rejects_a_malformed_log_negative_time_and_cost, .init = setup)
{
    static const int64_t unsorted[] = { T0, T0 - 1 };
    static const int64_t negative[] = { -1, T0 };
    struct sliding_log_params p = mk(5, 1000, 0);
    const char *err = NULL;

    cr_assert_eq(
        sliding_log_decide(&p, unsorted, 2, T0, 1, O.next, NMAX, &O.r, &err),
        SLIDING_LOG_ESTATE);
    cr_assert_str_eq(err, SLIDING_LOG_ERR_STATE);
    cr_assert_eq(O.r.write, SLIDING_LOG_WRITE_NONE);
    cr_assert_eq(
        sliding_log_decide(&p, negative, 2, T0, 1, O.next, NMAX, &O.r, &err),
        SLIDING_LOG_ESTATE);
    cr_assert_eq(
        sliding_log_decide(&p, NULL, 0, -1, 1, O.next, NMAX, &O.r, &err),
        SLIDING_LOG_EARGS);
    cr_assert_str_eq(err, SLIDING_LOG_ERR_TIME);
    cr_assert_eq(
        sliding_log_decide(&p, NULL, 0, T0, -1, O.next, NMAX, &O.r, &err),
        SLIDING_LOG_EARGS);
    cr_assert_str_eq(err, SLIDING_LOG_ERR_COST);
}

/* ---------------- ADJUST ---------------- */

static struct out PK;

/* One adjust against the store into *o; applies the write (DEL empties
 * the store). Asserts its reply is what a cost-1 decide answers on the log
 * it leaves (a PEEK), and the write's shape. */
static void adjust(const struct sliding_log_params *p, struct mem *m,
                   int64_t now, int64_t delta, struct out *o)
{
    const char *err = NULL;
    int rc = sliding_log_adjust(p, m->v, m->n, now, delta, o->next, NMAX, &o->r,
                                &err);

    cr_assert_eq(rc, SLIDING_LOG_OK, "adjust: %s", err);
    cr_assert(o->r.next_n <= (size_t)p->max);
    for (size_t i = 1; i < o->r.next_n; i++) {
        cr_assert(o->next[i - 1] <= o->next[i], "next is not sorted");
    }
    cr_assert_eq(sliding_log_decide(p, o->next, o->r.next_n, now, 1, PK.next,
                                    NMAX, &PK.r, &err),
                 SLIDING_LOG_OK);
    if (memcmp(&o->r.d, &PK.r.d, sizeof(PK.r.d)) != 0) {
        cr_assert_fail(
            "adjust's reply is not a peek's: %lld %lld %lld %lld "
            "vs %lld %lld %lld %lld",
            (long long)o->r.d.limited, (long long)o->r.d.remaining,
            (long long)o->r.d.retry_after_ns, (long long)o->r.d.reset_after_ns,
            (long long)PK.r.d.limited, (long long)PK.r.d.remaining,
            (long long)PK.r.d.retry_after_ns, (long long)PK.r.d.reset_after_ns);
    }
    if (o->r.write == SLIDING_LOG_WRITE_SET) {
        cr_assert(delta != 0 && o->r.next_n > 0 && o->r.expiry_ms >= 1);
        memcpy(m->v, o->next, o->r.next_n * sizeof(*o->next));
        m->n = o->r.next_n;
        m->expiry_ms = o->r.expiry_ms;
    } else if (o->r.write == SLIDING_LOG_WRITE_DEL) {
        cr_assert(delta < 0 && o->r.next_n == 0);
        m->n = 0;
    }
}

Test(sliding_log, adjust_logs_at_most_max_entries_into_debt, .init = setup)
{
    struct sliding_log_params p = mk(5, 1000, 100);

    step(&p, &M, T0, 2, &O);
    /* 1000 units of work: the log holds at most max, all at now. */
    adjust(&p, &M, T0 + 400 * MS, 1000, &O);
    cr_assert_eq(O.r.write, SLIDING_LOG_WRITE_SET);
    cr_assert_eq(O.r.added, 5);
    cr_assert_eq(M.n, 5);
    for (size_t i = 0; i < M.n; i++) {
        cr_assert_eq(M.v[i], T0 + 400 * MS);
    }
    cr_assert_eq(M.expiry_ms, 1000);
    check_reply(&O.r, 1, 5, 0, 1, 1);
    cr_assert_eq(O.r.d.retry_after_ns, 1000 * MS);
    /* Refused (and logged) until a whole window after the debt. */
    step(&p, &M, T0 + 1300 * MS, 1, &O);
    cr_assert_eq(O.r.d.limited, 1);
    step(&p, &M, T0 + 1400 * MS, 1, &O);
    cr_assert_eq(O.r.d.limited, 0);
    /* The newest entry moves to the adjust: min_interval counts from it
     * (100 ms after T0 + 1400 ms was spaced; 50 after the adjust is not,
     * and the refused attempt is logged). */
    adjust(&p, &M, T0 + 1450 * MS, 1, &O);
    step(&p, &M, T0 + 1500 * MS, 1, &O);
    cr_assert_eq(O.r.d.limited, 1);
    cr_assert_eq(O.r.d.retry_after_ns, 100 * MS);
}

Test(sliding_log, adjust_gives_back_the_newest_entries_down_to_empty,
     .init = setup)
{
    struct sliding_log_params p = mk(10, 1000, 0);
    struct out fresh;
    const char *err = NULL;

    step(&p, &M, T0, 2, &O);
    step(&p, &M, T0 + 300 * MS, 3, &O);
    step(&p, &M, T0 + 600 * MS, 1, &O);
    /* 2 back: the newest (T0 + 600 ms), then one of T0 + 300 ms. */
    adjust(&p, &M, T0 + 700 * MS, -2, &O);
    cr_assert_eq(O.r.write, SLIDING_LOG_WRITE_SET);
    cr_assert_eq(M.n, 4);
    cr_assert_eq(M.v[3], T0 + 300 * MS);
    cr_assert_eq(M.v[1], T0);
    cr_assert_eq(M.expiry_ms, 600); /* until T0 + 300 ms leaves */
    check_reply(&O.r, 0, 10, 5, -1, 1);
    adjust(&p, &M, T0 + 700 * MS, 0, &O);
    cr_assert_eq(O.r.write, SLIDING_LOG_WRITE_NONE);
    /* More than the log holds: the key goes, the reply is a fresh key's. */
    adjust(&p, &M, T0 + 800 * MS, -100, &O);
    cr_assert_eq(O.r.write, SLIDING_LOG_WRITE_DEL);
    cr_assert_eq(sliding_log_decide(&p, NULL, 0, T0 + 800 * MS, 1, fresh.next,
                                    NMAX, &fresh.r, &err),
                 SLIDING_LOG_OK);
    cr_assert(memcmp(&O.r.d, &fresh.r.d, sizeof(O.r.d)) == 0);
    adjust(&p, &M, T0 + 800 * MS, -1, &O);
    cr_assert_eq(O.r.write, SLIDING_LOG_WRITE_NONE);
    /* Entries past the horizon give nothing back. */
    step(&p, &M, T0, 3, &O);
    adjust(&p, &M, T0 + 2 * S, -1, &O);
    cr_assert_eq(O.r.write, SLIDING_LOG_WRITE_NONE);
}

Test(sliding_log, random_adjusts_answer_as_a_peek_and_keep_invariants,
     .init = setup)
{
    struct sliding_log_params p = mk(9, 1000, 90);
    uint64_t seed = 41;
    int64_t now = T0;

    for (int k = 0; k < 4000; k++) {
        int64_t x;
        size_t before;

        seed = seed * 6364136223846793005u + 1442695040888963407u;
        /* Mostly forward, now and then back (a clock jump: future
         * entries), now and then a lower max (a log above it). */
        now += (seed >> 60) == 0 ? -(int64_t)((seed >> 33) % (900 * MS))
                                 : (int64_t)((seed >> 33) % (150 * MS));
        if ((seed >> 8) % 97 == 0) {
            p = mk(1 + (int64_t)((seed >> 16) % 12), 1000,
                   (int64_t)((seed >> 24) % 3) * 700);
        }
        x = (int64_t)((seed >> 20) % 31) - 15;
        if ((seed >> 40) % 3 == 0) {
            step(&p, &M, now, x < 0 ? -x : x, &O);
            continue;
        }
        peek_at(&p, &M, now, 0, &O);
        before = O.r.next_n; /* the pruned log, capped at max */
        adjust(&p, &M, now, x, &O);
        if (x > 0) {
            cr_assert_eq(O.r.added, x < p.max ? x : p.max);
        } else if (x < 0) {
            cr_assert(O.r.next_n + (size_t)-x >= before || O.r.next_n == 0);
        }
        if (O.r.d.limited) {
            /* The peek's retry counts its own attempt, which a request
             * logs: exact against the log with it. */
            static struct mem tried;
            memcpy(&tried, &M, sizeof(tried));
            step(&p, &tried, now, 1, &O2);
            check_retry_exact(&p, &tried, now, 1, O.r.d.retry_after_ns);
        }
    }
}

Test(sliding_log, adjust_rejects_a_bad_delta_and_log_writing_nothing,
     .init = setup)
{
    static const int64_t unsorted[] = { T0 + S, T0 };
    struct sliding_log_params p = mk(5, 1000, 0);
    const int64_t most = INT64_C(9007199254740991);
    const char *err = NULL;

    cr_assert_eq(
        sliding_log_adjust(&p, NULL, 0, T0, most + 1, O.next, NMAX, &O.r, &err),
        SLIDING_LOG_EARGS);
    cr_assert_str_eq(err, SLIDING_LOG_ERR_DELTA);
    cr_assert_eq(sliding_log_adjust(&p, NULL, 0, T0, -most - 1, O.next, NMAX,
                                    &O.r, &err),
                 SLIDING_LOG_EARGS);
    cr_assert_eq(
        sliding_log_adjust(&p, unsorted, 2, T0, 1, O.next, NMAX, &O.r, &err),
        SLIDING_LOG_ESTATE);
    cr_assert_str_eq(err, SLIDING_LOG_ERR_STATE);
    cr_assert_eq(O.r.write, SLIDING_LOG_WRITE_NONE);
    cr_assert_eq(
        sliding_log_adjust(&p, NULL, 0, T0, most, O.next, NMAX, &O.r, &err),
        SLIDING_LOG_OK);
    cr_assert_eq(O.r.next_n, 5);
}
