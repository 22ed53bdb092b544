/* The limiter aggregate (proxy/limiter/limiter_aggregate.h): how the
 * decisions of a LIMITER path's limits become its one reply. The most
 * restrictive limit decides limit and remaining, the longest refusal
 * decides retry_after, a limit the request can never pass outweighs any
 * wait, WAIT reserves only when every refusal is due within it, and a
 * refused check reports the admitting limits as they were before it.
 *
 * Pure functions: decisions are written by hand, no store, no loop. */
#include "tests/support/px_test.h"

#include <stdint.h>
#include <string.h>

#include "algorithms/rl.h"
#include "proxy/limiter/limiter_aggregate.h"
#include "proxy/limiter/store.h"

PX_TEST_SUITE(limiter_aggregate);

#define S  RL_NS_PER_SEC
#define MS RL_NS_PER_MS

/* An admitting decision. */
static struct rl_decision ok(int64_t limit, int64_t remaining, int64_t reset)
{
    struct rl_decision d = { 0, limit, remaining, -S, reset };
    return d;
}

/* A refusing decision, due again after `retry` (< 0: never). */
static struct rl_decision no(int64_t limit, int64_t remaining, int64_t retry,
                             int64_t reset)
{
    struct rl_decision d = { 1, limit, remaining, retry, reset };
    return d;
}

static void assert_decision(const struct rl_decision *d, int limited,
                            int64_t limit, int64_t remaining, int64_t retry,
                            int64_t reset)
{
    cr_assert_eq(d->limited, limited, "limited %d, want %d", d->limited,
                 limited);
    cr_assert_eq(d->limit, limit, "limit %lld, want %lld", (long long)d->limit,
                 (long long)limit);
    cr_assert_eq(d->remaining, remaining, "remaining %lld, want %lld",
                 (long long)d->remaining, (long long)remaining);
    cr_assert_eq(d->retry_after_ns, retry, "retry %lld, want %lld",
                 (long long)d->retry_after_ns, (long long)retry);
    cr_assert_eq(d->reset_after_ns, reset, "reset %lld, want %lld",
                 (long long)d->reset_after_ns, (long long)reset);
}

static void assert_ints(const int64_t v[5], int64_t a, int64_t b, int64_t c,
                        int64_t d, int64_t e)
{
    const int64_t want[5] = { a, b, c, d, e };

    for (int k = 0; k < 5; k++) {
        cr_assert_eq(v[k], want[k], "reply[%d] = %lld, want %lld", k,
                     (long long)v[k], (long long)want[k]);
    }
}

/* ---------------- limiter_aggregate ---------------- */

Test(limiter_aggregate, one_admitting_level_is_its_own_reply)
{
    struct rl_decision res[] = { ok(10, 7, 3 * S) };
    struct rl_decision out;

    limiter_aggregate(res, 1, &out);
    assert_decision(&out, 0, 10, 7, -S, 3 * S);
}

Test(limiter_aggregate, least_remaining_decides_limit_and_remaining)
{
    /* The org has plenty left, the user little: the user's limit shows. */
    struct rl_decision res[] = { ok(100, 80, 2 * S), ok(5, 1, 4 * S),
                                 ok(20, 9, 1 * S) };
    struct rl_decision out;

    limiter_aggregate(res, 3, &out);
    assert_decision(&out, 0, 5, 1, -S, 4 * S);
}

Test(limiter_aggregate, equal_remaining_the_longest_reset_decides)
{
    struct rl_decision res[] = { ok(10, 2, 1 * S), ok(30, 2, 9 * S),
                                 ok(20, 2, 5 * S) };
    struct rl_decision out;

    limiter_aggregate(res, 3, &out);
    cr_assert_eq(out.limit, 30);
    cr_assert_eq(out.remaining, 2);
}

Test(limiter_aggregate, reset_after_is_the_largest_of_all_levels)
{
    /* The level with the most remaining resets last: reset_after still
     * comes from it, limit/remaining do not. */
    struct rl_decision res[] = { ok(100, 90, 60 * S), ok(5, 0, 2 * S) };
    struct rl_decision out;

    limiter_aggregate(res, 2, &out);
    assert_decision(&out, 0, 5, 0, -S, 60 * S);
}

Test(limiter_aggregate, any_refusing_level_refuses)
{
    struct rl_decision res[] = { ok(100, 50, 1 * S), no(10, 0, 3 * S, 8 * S),
                                 ok(20, 19, 1 * S) };
    struct rl_decision out;

    limiter_aggregate(res, 3, &out);
    assert_decision(&out, 1, 10, 0, 3 * S, 8 * S);
}

Test(limiter_aggregate, retry_after_is_the_largest_of_the_refusing_levels)
{
    /* An admitting level's -1 s and a shorter refusal do not win. */
    struct rl_decision res[] = { no(10, 0, 2 * S, 5 * S), ok(50, 0, 7 * S),
                                 no(20, 0, 6 * S, 6 * S),
                                 no(30, 0, 4 * S, 4 * S) };
    struct rl_decision out;

    limiter_aggregate(res, 4, &out);
    cr_assert_eq(out.limited, 1);
    cr_assert_eq(out.retry_after_ns, 6 * S);
    cr_assert_eq(out.reset_after_ns, 7 * S);
}

Test(limiter_aggregate, a_level_never_passable_outweighs_any_wait)
{
    /* retry_after -1 on a refusal: the request is larger than the burst,
     * waiting does not help, before or after a long refusal. */
    struct rl_decision before[] = { no(10, 0, -S, 1 * S),
                                    no(10, 0, 30 * S, 30 * S) };
    struct rl_decision after[] = { no(10, 0, 30 * S, 30 * S),
                                   no(10, 0, -S, 1 * S) };
    struct rl_decision out;

    limiter_aggregate(before, 2, &out);
    cr_assert_eq(out.limited, 1);
    cr_assert_eq(out.retry_after_ns, -S);
    limiter_aggregate(after, 2, &out);
    cr_assert_eq(out.limited, 1);
    cr_assert_eq(out.retry_after_ns, -S);
}

/* ---------------- limiter_aggregate_wait_delay ---------------- */

Test(limiter_aggregate, wait_delay_is_the_latest_refusal_within_the_wait)
{
    struct rl_decision res[] = { no(10, 0, 300 * MS, 1 * S), ok(5, 3, 1 * S),
                                 no(10, 0, 800 * MS, 1 * S) };

    cr_assert_eq(limiter_aggregate_wait_delay(res, 3, 1 * S), 800 * MS);
    cr_assert_eq(limiter_aggregate_wait_delay(res, 3, 800 * MS), 800 * MS);
}

Test(limiter_aggregate, wait_delay_refuses_a_refusal_past_the_wait)
{
    struct rl_decision res[] = { no(10, 0, 300 * MS, 1 * S),
                                 no(10, 0, 2 * S, 2 * S) };

    cr_assert_eq(limiter_aggregate_wait_delay(res, 2, 1 * S), -1);
    cr_assert_eq(limiter_aggregate_wait_delay(res, 2, 2 * S - 1), -1);
}

Test(limiter_aggregate, wait_delay_refuses_a_never_passable_level)
{
    struct rl_decision res[] = { no(10, 0, -S, 1 * S) };

    cr_assert_eq(limiter_aggregate_wait_delay(res, 1, 3600 * S), -1);
}

Test(limiter_aggregate, wait_delay_is_zero_when_nothing_refuses)
{
    struct rl_decision res[] = { ok(10, 3, 1 * S), ok(10, 0, 2 * S) };

    cr_assert_eq(limiter_aggregate_wait_delay(res, 2, 1 * S), 0);
}

/* ---------------- limiter_aggregate_check ---------------- */

/* Limits whose gcra INC is `inc` (only the reservation reads it). */
static void limits_with_inc(struct store_limit *lim, unsigned n, int64_t inc)
{
    memset(lim, 0, n * sizeof(*lim));
    for (unsigned i = 0; i < n; i++) {
        lim[i].algo = LIMITS_GCRA;
        lim[i].p.inc_ns = inc;
    }
}

Test(limiter_aggregate, check_admitted_replies_at_once_from_the_decisions)
{
    struct rl_decision res[] = { ok(100, 40, 5 * S), ok(10, 3, 2 * S) };
    struct rl_decision peek[] = { ok(100, 41, 4 * S), ok(10, 4, 1 * S) };
    struct store_limit lim[2];
    int64_t v[5];

    limits_with_inc(lim, 2, 1 * S);
    cr_assert_eq(limiter_aggregate_check(res, peek, lim, 2, 0, v), -1);
    assert_ints(v, 0, 10, 3, -1, 5);
}

Test(limiter_aggregate, check_refused_reports_admitting_levels_without_it)
{
    /* The user refuses; the org would have admitted and taken one: since
     * the check consumed nothing, the org shows its state before it. */
    struct rl_decision res[] = { ok(100, 0, 9 * S), no(10, 0, 2 * S, 3 * S) };
    struct rl_decision peek[] = { ok(100, 1, 8 * S), no(10, 0, 2 * S, 3 * S) };
    struct store_limit lim[2];
    int64_t v[5];

    limits_with_inc(lim, 2, 1 * S);
    cr_assert_eq(limiter_aggregate_check(res, peek, lim, 2, 0, v), -1);
    /* With res (org remaining 0) the org would have decided limit 100. */
    assert_ints(v, 1, 10, 0, 2, 8);
    assert_decision(&res[0], 0, 100, 1, -S, 8 * S);
}

Test(limiter_aggregate, check_wait_reserves_when_due_within_the_wait)
{
    struct rl_decision res[] = { no(10, 0, 1500 * MS, 2 * S),
                                 ok(100, 50, 3 * S) };
    struct rl_decision peek[2];
    struct store_limit lim[2];
    int64_t v[5];

    memcpy(peek, res, sizeof(peek));
    limits_with_inc(lim, 2, 2 * S);
    cr_assert_eq(limiter_aggregate_check(res, peek, lim, 2, 2 * S, v),
                 1500 * MS);
    /* Reserved: not limited, nothing remaining, reset after the
     * reservation (2 s + INC 2 s beats the other level's 3 s). */
    assert_ints(v, 0, 10, 0, -1, 4);
}

Test(limiter_aggregate, check_wait_too_short_refuses_at_once)
{
    struct rl_decision res[] = { no(10, 0, 1500 * MS, 2 * S) };
    struct rl_decision peek[] = { no(10, 0, 1500 * MS, 2 * S) };
    struct store_limit lim[1];
    int64_t v[5];

    limits_with_inc(lim, 1, 2 * S);
    cr_assert_eq(limiter_aggregate_check(res, peek, lim, 1, 1 * S, v), -1);
    assert_ints(v, 1, 10, 0, 2, 2);
}

Test(limiter_aggregate, check_wait_admitted_replies_at_once)
{
    struct rl_decision res[] = { ok(10, 4, 1 * S) };
    struct rl_decision peek[] = { ok(10, 5, 0) };
    struct store_limit lim[1];
    int64_t v[5];

    limits_with_inc(lim, 1, 1 * S);
    cr_assert_eq(limiter_aggregate_check(res, peek, lim, 1, 5 * S, v), -1);
    assert_ints(v, 0, 10, 4, -1, 1);
}

/* ---------------- Shadow levels ---------------- */

/* Level 1 of `lim` (limits [from, n)) is shadow; shadow_limited as the
 * store marks it when `refused`. */
static void shadow_level(struct store_limit *lim, unsigned from, unsigned n,
                         int refused)
{
    for (unsigned i = from; i < n; i++) {
        lim[i].level = 1;
        lim[i].shadow = true;
        lim[i].shadow_limited = refused;
    }
}

Test(limiter_aggregate, a_refusing_shadow_level_changes_no_reply)
{
    /* The real level admits with 3 left; the shadow level refuses with a
     * longer reset: the reply is the real level's alone, no refund. */
    struct rl_decision res[] = { ok(10, 3, 2 * S), no(5, 0, 7 * S, 9 * S) };
    struct rl_decision peek[] = { ok(10, 4, 1 * S), no(5, 0, 7 * S, 9 * S) };
    struct store_limit lim[2];
    int64_t v[5];

    limits_with_inc(lim, 2, 1 * S);
    shadow_level(lim, 1, 2, 1);
    cr_assert_not(limiter_aggregate_refunds(res, lim, 2, 0));
    cr_assert_eq(limiter_aggregate_shadow_limited(lim, 2), 1);
    cr_assert_eq(limiter_aggregate_check(res, peek, lim, 2, 0, v), -1);
    assert_ints(v, 0, 10, 3, -1, 2);
}

Test(limiter_aggregate, a_refusing_real_level_decides_beside_a_shadow_one)
{
    struct rl_decision res[] = { no(10, 0, 3 * S, 4 * S), ok(5, 0, 9 * S) };
    struct rl_decision peek[] = { no(10, 0, 3 * S, 4 * S), ok(5, 1, 8 * S) };
    struct store_limit lim[2];
    int64_t v[5];

    limits_with_inc(lim, 2, 1 * S);
    shadow_level(lim, 1, 2, 0);
    cr_assert(limiter_aggregate_refunds(res, lim, 2, 0));
    cr_assert_eq(limiter_aggregate_shadow_limited(lim, 2), 0);
    cr_assert_eq(limiter_aggregate_check(res, peek, lim, 2, 0, v), -1);
    assert_ints(v, 1, 10, 0, 3, 4);
    /* WAIT long enough: reserved by the real level; no refund. */
    res[0] = no(10, 0, 3 * S, 4 * S);
    cr_assert_not(limiter_aggregate_refunds(res, lim, 2, 5 * S));
    cr_assert_eq(limiter_aggregate_check(res, peek, lim, 2, 5 * S, v), 3 * S);
    assert_ints(v, 0, 10, 0, -1, 5);
}

Test(limiter_aggregate, only_shadow_levels_admit_showing_what_was_left)
{
    /* One shadow level of two limits refused by its second: its first took
     * nothing and shows its state without the cost (peek). */
    struct rl_decision res[] = { ok(10, 2, 2 * S), no(5, 0, 7 * S, 9 * S) };
    struct rl_decision peek[] = { ok(10, 3, 1 * S), no(5, 0, 7 * S, 9 * S) };
    struct store_limit lim[2];
    int64_t v[5];

    limits_with_inc(lim, 2, 1 * S);
    shadow_level(lim, 0, 2, 1);
    cr_assert_not(limiter_aggregate_refunds(res, lim, 2, 0));
    cr_assert_eq(limiter_aggregate_shadow_limited(lim, 2), 1);
    cr_assert_eq(limiter_aggregate_check(res, peek, lim, 2, 0, v), -1);
    assert_ints(v, 0, 5, 0, -1, 9);
    assert_decision(&res[0], 0, 10, 3, -S, 1 * S);
}

/* ---------------- The binding limit (HEADERS' RateLimit) ---------------- */

Test(limiter_aggregate, binding_limit_admitted_is_the_most_restrictive)
{
    /* Level 0 has 40 left, level 1 3: level 1 binds; the reply in ns. */
    struct rl_decision res[] = { ok(100, 40, 5 * S), ok(10, 3, 2 * S + 1) };
    struct rl_decision peek[] = { ok(100, 41, 4 * S), ok(10, 4, 1 * S) };
    struct store_limit lim[2];
    struct rl_decision agg;
    unsigned bind = 99;

    limits_with_inc(lim, 2, 1 * S);
    cr_assert_eq(limiter_aggregate_check_ns(res, peek, lim, 2, 0, &agg, &bind),
                 -1);
    cr_assert_eq(bind, 1);
    assert_decision(&agg, 0, 10, 3, -S, 5 * S);
}

Test(limiter_aggregate, binding_limit_refused_is_the_one_retry_comes_from)
{
    /* Both refuse; level 0 has less left, but level 1's retry is the
     * longer one: level 1 binds (Retry-After is its). A level that can
     * never pass binds over any wait. */
    struct rl_decision res[] = { no(5, 0, 1 * S, 6 * S),
                                 no(10, 1, 3 * S, 4 * S), ok(7, 0, 1 * S) };
    struct rl_decision peek[3];
    struct store_limit lim[3];
    struct rl_decision agg;
    unsigned bind = 99;

    memcpy(peek, res, sizeof(peek));
    limits_with_inc(lim, 3, 1 * S);
    limiter_aggregate_check_ns(res, peek, lim, 3, 0, &agg, &bind);
    cr_assert_eq(bind, 1);
    cr_assert_eq(agg.retry_after_ns, 3 * S);
    res[0] = no(5, 0, -S, 6 * S);
    res[1] = no(10, 1, 3 * S, 4 * S);
    memcpy(peek, res, sizeof(peek));
    limiter_aggregate_check_ns(res, peek, lim, 3, 0, &agg, &bind);
    cr_assert_eq(bind, 0);
}

Test(limiter_aggregate, binding_limit_is_never_a_shadow_one)
{
    /* The shadow level refuses with nothing left: the real one binds. */
    struct rl_decision res[] = { ok(10, 3, 2 * S), no(5, 0, 7 * S, 9 * S) };
    struct rl_decision peek[] = { ok(10, 4, 1 * S), no(5, 0, 7 * S, 9 * S) };
    struct store_limit lim[2];
    struct rl_decision agg;
    unsigned bind = 99;

    limits_with_inc(lim, 2, 1 * S);
    shadow_level(lim, 1, 2, 1);
    limiter_aggregate_check_ns(res, peek, lim, 2, 0, &agg, &bind);
    cr_assert_eq(bind, 0);
    /* Every level shadow: none binds (n). */
    shadow_level(lim, 0, 2, 1);
    limiter_aggregate_check_ns(res, peek, lim, 2, 0, &agg, &bind);
    cr_assert_eq(bind, 2);
    cr_assert_eq(agg.limited, 0);
}
