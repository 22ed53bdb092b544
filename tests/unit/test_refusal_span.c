/* The refusal cache's clock rule (proxy/limiter/refusal_span.h): the span
 * of the node's clock a call's round trip gives, its narrowing, and the
 * rule that a cached refusal answers only when its reply is the same at
 * both ends of the span. Time is a parameter: the local clock starts at
 * L0, the node's is N0 ahead of it (the true offset, which every span
 * must hold). */
#include "tests/support/px_test.h"

#include <stdint.h>

#include "algorithms/gcra.h"
#include "algorithms/rl.h"
#include "proxy/limiter/refusal_span.h"

PX_TEST_SUITE(refusal_span);

#define US INT64_C(1000)
#define MS RL_NS_PER_MS
#define S  RL_NS_PER_SEC

/* A local monotonic clock and a node clock (2023-11-14T22:13:20Z). */
#define L0  INT64_C(5000000000000)
#define N0  INT64_C(1700000000000000000)
#define OFF (N0 - L0)

/* The clock bounds of a call sent at local `sent` and read at `recv`,
 * which the node decided at local `at` (sent <= at <= recv), TIME
 * truncating the node's clock to the microsecond. */
static struct refusal_span_clock call(int64_t sent, int64_t at, int64_t recv)
{
    struct refusal_span_clock c;
    int64_t node = at + OFF;

    refusal_span_clock_of_call(node - node % US, (uint64_t)sent, (uint64_t)recv,
                               &c);
    return c;
}

/* The span at local `now` under c (which must not be empty). */
static struct refusal_span span_at(const struct refusal_span_clock *c,
                                   int64_t now)
{
    struct refusal_span s;

    cr_assert_eq(refusal_span_now(c, (uint64_t)now, &s), 1);
    return s;
}

/* CL.THROTTLE k 0 1 60: one call a minute, no burst. A first call at
 * node time `tat - 60 s` set `tat`; every call before it is refused, with
 * retry_after and reset_after running down to it. */
static struct gcra_params per_minute(void)
{
    struct gcra_params p;
    const char *err;

    cr_assert_eq(gcra_params_init(&p, 0, 1, 60, 1, &err), GCRA_OK);
    return p;
}

Test(refusal_span, a_call_bounds_the_node_clock_by_its_round_trip)
{
    /* Sent at L0, decided 300 us later, read 1 ms after sending. */
    struct refusal_span_clock c = call(L0, L0 + 300 * US, L0 + MS);
    struct refusal_span s;

    cr_assert_leq(c.lo_ns, OFF);
    cr_assert_geq(c.hi_ns, OFF);
    /* As wide as the round trip, plus TIME's microsecond. */
    cr_assert_eq(c.hi_ns - c.lo_ns, MS + US);
    /* Later, the span moves with the local clock and still holds the
     * node's time, at TIME's resolution. */
    s = span_at(&c, L0 + 7 * S + 123);
    cr_assert_leq(s.lo_ns, N0 + 7 * S);
    cr_assert_geq(s.hi_ns, N0 + 7 * S);
    cr_assert_eq(s.lo_ns % US, 0);
    cr_assert_eq(s.hi_ns % US, 0);
}

Test(refusal_span, narrowing_keeps_the_intersection)
{
    /* A slow learning call (2 s in a batch), then a quick TIME (50 us). */
    struct refusal_span_clock c = call(L0, L0 + S + 7, L0 + 2 * S);
    struct refusal_span_clock quick =
        call(L0 + 3 * S, L0 + 3 * S + 20 * US, L0 + 3 * S + 50 * US);

    cr_assert_eq(c.hi_ns - c.lo_ns, 2 * S + US);
    refusal_span_clock_tighten(&c, &quick);
    cr_assert_leq(c.lo_ns, OFF);
    cr_assert_geq(c.hi_ns, OFF);
    cr_assert_eq(c.hi_ns - c.lo_ns, 50 * US + US);
    /* A looser call later does not widen it again. */
    refusal_span_clock_tighten(
        &c, &(struct refusal_span_clock){ .lo_ns = OFF - S, .hi_ns = OFF + S });
    cr_assert_eq(c.hi_ns - c.lo_ns, 50 * US + US);
}

Test(refusal_span, empty_bounds_answer_nothing)
{
    /* Bounds that cross (the clocks drifted apart): no span. */
    struct refusal_span_clock c = { .lo_ns = OFF + 10, .hi_ns = OFF };
    struct refusal_span s;
    struct gcra_params p = per_minute();
    struct gcra_result r;

    cr_assert_eq(refusal_span_now(&c, (uint64_t)L0, &s), 0);
    /* And a span given upside down is no answer either. */
    s.lo_ns = N0 + S;
    s.hi_ns = N0;
    cr_assert_eq(refusal_span_gcra(&p, 1, N0 + 30 * S, &s, &r), 0);
}

Test(refusal_span, a_zero_width_span_answers_what_the_model_says)
{
    struct gcra_params p = per_minute();
    struct refusal_span s = { .lo_ns = N0, .hi_ns = N0 };
    struct gcra_result r, m;
    const char *err;
    int64_t v[5];

    /* The TAT is 30.5 s ahead: refused, 31 s to wait (redis-cell rounds a
     * part of a second up). */
    cr_assert_eq(refusal_span_gcra(&p, 1, N0 + 30 * S + 500 * MS, &s, &r), 1);
    cr_assert_eq(gcra_decide(&p, 1, N0 + 30 * S + 500 * MS, N0, &m, &err),
                 GCRA_OK);
    cr_assert(refusal_span_same(&r.d, &m.d, REFUSAL_SPAN_SECONDS));
    rl_reply_ints(&r.d, v);
    cr_assert(v[0] == 1 && v[1] == 1 && v[2] == 0 && v[3] == 31 && v[4] == 31,
              "%lld %lld %lld %lld %lld", (long long)v[0], (long long)v[1],
              (long long)v[2], (long long)v[3], (long long)v[4]);
    /* Exactly at a rounding edge too: zero width crosses nothing. */
    cr_assert_eq(refusal_span_gcra(&p, 1, N0 + 30 * S + MS, &s, &r), 1);
    /* What the model admits is Redis's to decide. */
    cr_assert_eq(refusal_span_gcra(&p, 0, 0, &s, &r), 0);
    cr_assert_eq(refusal_span_gcra(&p, 1, N0 - S, &s, &r), 0);
}

Test(refusal_span,
     a_wait_crossing_a_second_boundary_inside_the_span_goes_to_redis)
{
    struct gcra_params p = per_minute();
    struct gcra_result r;
    /* A 200 us span. */
    struct refusal_span s = { .lo_ns = N0, .hi_ns = N0 + 200 * US };

    /* The wait is 1.000 1 s at lo (rounded: 1 s, its part of a second is
     * under a millisecond) and 0.999 9 s at hi (rounded: 1 s): the same. */
    cr_assert_eq(refusal_span_gcra(&p, 1, N0 + S + 100 * US, &s, &r), 1);
    /* A wait of 1.001 05 s at lo shows 2 s, at hi (1.000 85 s) 1 s: Redis
     * may say either, the cache says neither. This is the edge the
     * cache's old upper bound alone got wrong (0 where Redis says 1). */
    cr_assert_eq(refusal_span_gcra(&p, 1, N0 + S + MS + 50 * US, &s, &r), 0);
    /* The same edge below a second: 1.05 ms at lo shows 1, 0.85 ms at hi
     * shows 0. */
    cr_assert_eq(refusal_span_gcra(&p, 1, N0 + MS + 50 * US, &s, &r), 0);
    /* Past the edge at both ends: answered again. */
    cr_assert_eq(refusal_span_gcra(&p, 1, N0 + S + MS + 300 * US, &s, &r), 1);
    cr_assert_eq(rl_seconds(r.d.retry_after_ns), 2);
}

Test(refusal_span, a_wide_span_after_a_slow_call_goes_to_redis_until_narrowed)
{
    struct gcra_params p = per_minute();
    struct gcra_result r;
    /* The learning call waited 3 s in a batch (decided after 2). */
    struct refusal_span_clock c = call(L0, L0 + 2 * S, L0 + 3 * S);
    struct refusal_span_clock quick =
        call(L0 + 3 * S, L0 + 3 * S + 10 * US, L0 + 3 * S + 40 * US);
    struct refusal_span s = span_at(&c, L0 + 4 * S);
    int64_t tat = N0 + 40 * S + 500 * MS;

    /* A refusal at every instant of it (the TAT is 36.5 s ahead of the
     * node's clock), but the wait shows anything from 35 to 38 s. */
    cr_assert_eq(s.hi_ns - s.lo_ns, 3 * S + US);
    cr_assert_eq(refusal_span_gcra(&p, 1, tat, &s, &r), 0);
    /* The tracker's quick TIME narrows it to 41 us: answered, 37 s. */
    refusal_span_clock_tighten(&c, &quick);
    s = span_at(&c, L0 + 4 * S);
    cr_assert_eq(refusal_span_gcra(&p, 1, tat, &s, &r), 1);
    cr_assert_eq(rl_seconds(r.d.retry_after_ns), 37);
}

Test(refusal_span, remaining_crossing_inside_the_span_goes_to_redis)
{
    /* 10 a second, a burst of 3: remaining grows by one every 100 ms. */
    struct gcra_params p;
    struct gcra_result r;
    const char *err;
    struct refusal_span s = { .lo_ns = N0, .hi_ns = N0 + 2 * MS };

    cr_assert_eq(gcra_params_init(&p, 2, 10, 1, 3, &err), GCRA_OK);
    /* A quantity of 3 needs the TAT behind the clock: 250 ms ahead, it
     * is refused with 0 remaining at both ends (50 and 52 ms of room). */
    cr_assert_eq(refusal_span_gcra(&p, 1, N0 + 250 * MS, &s, &r), 1);
    /* A TAT whose next 100 ms step falls inside the span: remaining is 0
     * at lo and 1 at hi. */
    cr_assert_eq(refusal_span_gcra(&p, 1, N0 + 201 * MS, &s, &r), 0);
}

Test(refusal_span, same_compares_the_reply_as_shown)
{
    struct rl_decision a = { .limited = 1,
                             .limit = 5,
                             .remaining = 0,
                             .retry_after_ns = 2 * S + 400 * US,
                             .reset_after_ns = 3 * S };
    struct rl_decision b = a;

    cr_assert(refusal_span_same(&a, &b, REFUSAL_SPAN_SECONDS));
    cr_assert(refusal_span_same(&a, &b, REFUSAL_SPAN_MS));
    /* 2.000 4 s and 2.000 9 s: 2 s, and 2000..2001 ms both. */
    b.retry_after_ns = 2 * S + 900 * US;
    cr_assert(refusal_span_same(&a, &b, REFUSAL_SPAN_SECONDS));
    cr_assert(refusal_span_same(&a, &b, REFUSAL_SPAN_MS));
    /* 2.001 1 s: 3 s, 2002 ms rounded up. */
    b.retry_after_ns = 2 * S + 1100 * US;
    cr_assert_not(refusal_span_same(&a, &b, REFUSAL_SPAN_SECONDS));
    cr_assert_not(refusal_span_same(&a, &b, REFUSAL_SPAN_MS));
    /* A whole millisecond against a part of the next: the seconds agree,
     * milliseconds rounded up do not. */
    a.retry_after_ns = 2 * S + 500 * MS;
    b.retry_after_ns = 2 * S + 500 * MS + 1;
    cr_assert(refusal_span_same(&a, &b, REFUSAL_SPAN_SECONDS));
    cr_assert_not(refusal_span_same(&a, &b, REFUSAL_SPAN_MS));
    /* Every other field counts. */
    b = a;
    b.remaining = 1;
    cr_assert_not(refusal_span_same(&a, &b, REFUSAL_SPAN_SECONDS));
    b = a;
    b.limited = 0;
    cr_assert_not(refusal_span_same(&a, &b, REFUSAL_SPAN_SECONDS));
    b = a;
    b.limit = 6;
    cr_assert_not(refusal_span_same(&a, &b, REFUSAL_SPAN_SECONDS));
    b = a;
    b.reset_after_ns = 4 * S;
    cr_assert_not(refusal_span_same(&a, &b, REFUSAL_SPAN_SECONDS));
    /* -1 s, never: equal to itself in both. */
    a.retry_after_ns = b.retry_after_ns = -S;
    b.reset_after_ns = a.reset_after_ns;
    cr_assert(refusal_span_same(&a, &b, REFUSAL_SPAN_MS));
}
