/* The limiter reply shape: redis-cell's rounding of durations to seconds
 * and the order of the five integers. */
#include "tests/support/px_test.h"

#include <criterion/parameterized.h>
#include <stdint.h>

#include "algorithms/rl.h"

PX_TEST_SUITE(rl);

/* One duration and the seconds redis-cell reports for it. */
struct rl_case {
    int64_t ns;
    int64_t s;
};

static const struct rl_case RL_CASES[] = {
    { 0, 0 },
    { 1, 0 },                            /* a positive fraction under 1 ms */
    { 999999, 0 },                       /* just under 1 ms: rounds down */
    { 1000000, 1 },                      /* exactly 1 ms: rounds up */
    { 100000000, 1 },                    /* 100 ms */
    { 999999999, 1 },                    /* just under 1 s */
    { 1000000000, 1 },                   /* whole second, no fraction */
    { 1000999999, 1 },                   /* 1 s + 999.999 us */
    { 1001000000, 2 },                   /* 1 s + 1 ms */
    { 2000000000, 2 },                   /* 2 s */
    { -1000000000, -1 },                 /* the -1 s of "allowed" */
    { -1500000000, -1 },                 /* negative: truncates, no +1 */
    { -999999, 0 },                      /* negative sub-ms */
    { -1000000, 0 },                     /* negative 1 ms: no round up */
    { INT64_MAX, INT64_C(9223372037) },  /* 9223372036 s + 854 ms */
    { INT64_MIN, INT64_C(-9223372036) }, /* truncated toward zero */
};

ParameterizedTestParameters(rl, seconds_round_like_redis_cell)
{
    return cr_make_param_array(struct rl_case, RL_CASES,
                               sizeof(RL_CASES) / sizeof(*RL_CASES));
}

ParameterizedTest(struct rl_case *tc, rl, seconds_round_like_redis_cell)
{
    int64_t got = rl_seconds(tc->ns);

    cr_assert_eq(got, tc->s, "rl_seconds(%lld) = %lld, expected %lld",
                 (long long)tc->ns, (long long)got, (long long)tc->s);
}

Test(rl, reply_ints_are_limited_limit_remaining_retry_reset)
{
    struct rl_decision d = {
        .limited = 1,
        .limit = 16,
        .remaining = 3,
        .retry_after_ns = 1500000000,
        .reset_after_ns = 2000500000,
    };
    int64_t out[5];

    rl_reply_ints(&d, out);
    cr_assert_eq(out[0], 1);
    cr_assert_eq(out[1], 16);
    cr_assert_eq(out[2], 3);
    cr_assert_eq(out[3], 2); /* 1.5 s rounds up */
    cr_assert_eq(out[4], 2); /* 2 s + 0.5 ms: under 1 ms, rounds down */
}

Test(rl, reply_ints_keep_minus_one_second_and_normalise_limited)
{
    struct rl_decision d = {
        .limited = 7, /* any true value is reported as 1 */
        .limit = 1,
        .remaining = 0,
        .retry_after_ns = -RL_NS_PER_SEC,
        .reset_after_ns = 0,
    };
    int64_t out[5];

    rl_reply_ints(&d, out);
    cr_assert_eq(out[0], 1);
    cr_assert_eq(out[3], -1);
    cr_assert_eq(out[4], 0);
    d.limited = 0;
    rl_reply_ints(&d, out);
    cr_assert_eq(out[0], 0);
}
