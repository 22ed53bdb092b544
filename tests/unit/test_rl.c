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

/* One duration and the milliseconds LIMITER ... MS reports for it. */
static const struct rl_case RL_MS_CASES[] = {
    { 0, 0 },
    { 1, 1 },                              /* 1 ns: rounds up to 1 ms */
    { 999999, 1 },                         /* just under 1 ms */
    { 1000000, 1 },                        /* exactly 1 ms: no round up */
    { 1000001, 2 },                        /* 1 ms + 1 ns */
    { 755000000, 755 },                    /* 0.755 s */
    { 1500000000, 1500 },                  /* 1.5 s */
    { -1000000000, -1 },                   /* the -1 s of "allowed": -1 */
    { -1, -1 },                            /* any negative: -1 */
    { INT64_MIN, -1 },                     /* ... even the most negative */
    { INT64_MAX, INT64_C(9223372036855) }, /* huge: rounds up, no wrap */
};

ParameterizedTestParameters(rl, ms_round_up_and_keep_minus_one)
{
    return cr_make_param_array(struct rl_case, RL_MS_CASES,
                               sizeof(RL_MS_CASES) / sizeof(*RL_MS_CASES));
}

ParameterizedTest(struct rl_case *tc, rl, ms_round_up_and_keep_minus_one)
{
    int64_t got = rl_ms(tc->ns);

    cr_assert_eq(got, tc->s, "rl_ms(%lld) = %lld, expected %lld",
                 (long long)tc->ns, (long long)got, (long long)tc->s);
}

Test(rl, reply_ints_ms_converts_only_the_two_durations)
{
    struct rl_decision d = {
        .limited = 1,
        .limit = 10,
        .remaining = 0,
        .retry_after_ns = 754000001, /* 754 ms and 1 ns */
        .reset_after_ns = 1500000000,
    };
    int64_t out[5];

    rl_reply_ints_ms(&d, out);
    cr_assert(out[0] == 1 && out[1] == 10 && out[2] == 0 && out[3] == 755 &&
                  out[4] == 1500,
              "got %lld %lld %lld %lld %lld", (long long)out[0],
              (long long)out[1], (long long)out[2], (long long)out[3],
              (long long)out[4]);
    d.limited = 0;
    d.remaining = 3;
    d.retry_after_ns = -RL_NS_PER_SEC;
    rl_reply_ints_ms(&d, out);
    cr_assert(out[0] == 0 && out[2] == 3 && out[3] == -1 && out[4] == 1500);
}

/* rl_muladd_div against 128-bit arithmetic (the test may use the compiler's
 * extension the library avoids), on both of its paths: sums that fit 64
 * bits (divided by the machine) and sums that do not (long division), and
 * quotients that saturate. */
__extension__ typedef unsigned __int128 rl_u128;

static void rl_check_muladd(int64_t a, int64_t b, int64_t c, int64_t d)
{
    rl_u128 sum = (rl_u128)(uint64_t)a * (uint64_t)b + (uint64_t)c;
    rl_u128 q = sum / (uint64_t)d;
    int64_t want_q = q > INT64_MAX ? INT64_MAX : (int64_t)q;
    int64_t want_r = q > INT64_MAX ? 0 : (int64_t)(sum % (uint64_t)d);
    int64_t rem = -1, got = rl_muladd_div(a, b, c, d, &rem);

    cr_assert(got == want_q && rem == want_r,
              "rl_muladd_div(%lld, %lld, %lld, %lld) = %lld rem %lld, "
              "expected %lld rem %lld",
              (long long)a, (long long)b, (long long)c, (long long)d,
              (long long)got, (long long)rem, (long long)want_q,
              (long long)want_r);
    cr_assert_eq(rl_muladd_div(a, b, c, d, NULL), want_q);
}

Test(rl, muladd_div_is_exact_in_128_bits)
{
    static const int64_t edge[] = { 0,
                                    1,
                                    2,
                                    999,
                                    1000000,
                                    INT64_C(4294967295),
                                    INT64_C(4294967296),
                                    INT64_C(1000000000000000),
                                    INT64_C(9007199254740991),
                                    INT64_MAX - 1,
                                    INT64_MAX };
    const size_t n = sizeof(edge) / sizeof(*edge);
    uint64_t x = UINT64_C(0x9e3779b97f4a7c15);

    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < n; j++) {
            for (size_t k = 0; k < n; k++) {
                rl_check_muladd(edge[i], edge[j], edge[k % 4],
                                edge[k] > 0 ? edge[k] : 1);
            }
        }
    }
    /* Random operands of every width (xorshift, a fixed seed). */
    for (int t = 0; t < 100000; t++) {
        int64_t v[4];
        for (int m = 0; m < 4; m++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            v[m] = (int64_t)(x >> (1 + x % 63));
        }
        rl_check_muladd(v[0], v[1], v[2], v[3] > 0 ? v[3] : 1);
    }
}
