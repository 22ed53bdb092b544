/* GCRA as redis-cell computes it: argument parsing and error texts, the
 * decision with every reference value of docs/ARCHITECTURE.md "CL.THROTTLE,
 * exactly", the store writes, overflow handling, and the C side of the Lua
 * script (split arguments, reply checking).
 *
 * Time is a parameter: a test steps `now` explicitly, starting at T0, and a
 * tiny in-memory store applies the writes gcra_decide() asks for. */
#include "tests/support/px_test.h"
#include "tests/support/rl_test.h"

#include <criterion/parameterized.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "algorithms/gcra.h"
#include "algorithms/rl.h"

PX_TEST_SUITE(gcra);

#define S  RL_NS_PER_SEC
#define MS RL_NS_PER_MS

/* A realistic clock: 2023-11-14T22:13:20Z in nanoseconds. */
#define T0 INT64_C(1700000000000000000)

/* The exact error texts of docs/ARCHITECTURE.md and of our divergences. */
#define E_USAGE                                                                \
    "Cell error: Store error: Usage: cl.throttle <key> <max_burst> <count "    \
    "per period> <period> [<quantity>]"
#define E_NOT_INT   "Cell error: Store error: Couldn't parse as integer: "
#define E_ZERO_RATE "Cell error: Store error: Zero rates are not supported"
#define E_NEG_RATE  "Cell error: Store error: Negative rates are not supported"
#define E_NEG_Q     "Cell error: Store error: Negative quantities are not supported"
#define E_RANGE                                                                \
    "Cell error: Store error: Arguments out of range: 64-bit nanoseconds "     \
    "would overflow"
#define E_TAT_RANGE                                                            \
    "Cell error: Store error: Stored TAT out of range: 64-bit nanoseconds "    \
    "would overflow"

/* The one key of a test, as a store holds it. */
struct mem {
    int have;          /* the key exists */
    int64_t tat;       /* its value */
    int64_t expiry_ms; /* the PX of the last SET */
};

/* Parameters from B, C, P, Q; asserts they are valid. */
static struct gcra_params mk(int64_t b, int64_t c, int64_t p, int64_t q)
{
    struct gcra_params gp;
    const char *err = NULL;
    int rc = gcra_params_init(&gp, b, c, p, q, &err);

    cr_assert_eq(rc, GCRA_OK, "params %lld %lld %lld %lld: %s", (long long)b,
                 (long long)c, (long long)p, (long long)q, err);
    return gp;
}

/* One request against the store at now; applies the write. */
static struct gcra_result step(const struct gcra_params *p, struct mem *m,
                               int64_t now)
{
    struct gcra_result r;
    const char *err = NULL;
    int rc = gcra_decide(p, m->have, m->tat, now, &r, &err);

    cr_assert_eq(rc, GCRA_OK, "decide: %s", err);
    if (r.write == GCRA_WRITE_SET) {
        m->have = 1;
        m->tat = r.new_tat_ns;
        m->expiry_ms = r.expiry_ms;
    } else if (r.write == GCRA_WRITE_DEL) {
        m->have = 0;
    }
    return r;
}

/* Asserts the five reply integers. */
static void check_reply(const struct gcra_result *r, int64_t l, int64_t lim,
                        int64_t rem, int64_t retry, int64_t reset)
{
    rl_test_check_reply(&r->d, l, lim, rem, retry, reset);
}

/* ---------------- Reference values of docs/ARCHITECTURE.md ---------------- */

Test(gcra, user123_15_30_60_on_a_new_key_replies_0_16_15_minus1_2)
{
    struct gcra_params p = mk(15, 30, 60, 1);
    struct mem m = { 0 };
    struct gcra_result r = step(&p, &m, T0);

    cr_assert_eq(p.ei_ns, 2 * S);
    cr_assert_eq(p.dvt_ns, 32 * S);
    cr_assert_eq(p.inc_ns, 2 * S);
    check_reply(&r, 0, 16, 15, -1, 2);
    cr_assert_eq(r.write, GCRA_WRITE_SET);
    cr_assert_eq(r.new_tat_ns, T0 + 2 * S);
    cr_assert_eq(r.expiry_ms, 2000);
}

Test(gcra, user123_0_1_2_allows_then_denies_then_allows_after_2_s)
{
    struct gcra_params p = mk(0, 1, 2, 1);
    struct mem m = { 0 };
    struct gcra_result r;

    r = step(&p, &m, T0);
    check_reply(&r, 0, 1, 0, -1, 2);
    r = step(&p, &m, T0);
    check_reply(&r, 1, 1, 0, 2, 2);
    cr_assert_eq(r.write, GCRA_WRITE_NONE);
    cr_assert_eq(r.d.retry_after_ns, 2 * S);
    r = step(&p, &m, T0 + 2 * S);
    check_reply(&r, 0, 1, 0, -1, 2);
    cr_assert_eq(m.tat, T0 + 4 * S);
}

/* One row of docs/ARCHITECTURE.md's burst-4 table (`CL.THROTTLE foo 4 1 1
 * [q]`). */
struct burst_step {
    int64_t at_ms;     /* offset from T0 */
    int64_t q;         /* quantity */
    int limited;       /* raw values before rounding */
    int64_t remaining; /* */
    int64_t reset_ns;  /* */
    int64_t retry_ns;  /* */
    int64_t reply[5];  /* the rounded reply */
};

static const struct burst_step BURST[] = {
    { 0, 6, 1, 5, 0, -S, { 1, 5, 5, -1, 0 } },
    { 0, 1, 0, 4, 1 * S, -S, { 0, 5, 4, -1, 1 } },
    { 0, 1, 0, 3, 2 * S, -S, { 0, 5, 3, -1, 2 } },
    { 0, 1, 0, 2, 3 * S, -S, { 0, 5, 2, -1, 3 } },
    { 0, 1, 0, 1, 4 * S, -S, { 0, 5, 1, -1, 4 } },
    { 0, 1, 0, 0, 5 * S, -S, { 0, 5, 0, -1, 5 } },
    { 0, 1, 1, 0, 5 * S, 1 * S, { 1, 5, 0, 1, 5 } },
    { 3000, 1, 0, 2, 3000 * MS, -S, { 0, 5, 2, -1, 3 } },
    { 3100, 1, 0, 1, 3900 * MS, -S, { 0, 5, 1, -1, 4 } },
    { 4000, 1, 0, 1, 4000 * MS, -S, { 0, 5, 1, -1, 4 } },
    { 8000, 1, 0, 4, 1000 * MS, -S, { 0, 5, 4, -1, 1 } },
    { 9500, 1, 0, 4, 1000 * MS, -S, { 0, 5, 4, -1, 1 } },
    { 9500, 0, 0, 4, 1 * S, -S, { 0, 5, 4, -1, 1 } },
    { 9500, 2, 0, 2, 3 * S, -S, { 0, 5, 2, -1, 3 } },
    { 9500, 5, 1, 2, 3 * S, 3 * S, { 1, 5, 2, 3, 3 } },
};

Test(gcra, burst_4_table_matches_design_raw_and_rounded)
{
    struct mem m = { 0 };

    for (size_t i = 0; i < sizeof(BURST) / sizeof(*BURST); i++) {
        const struct burst_step *bs = &BURST[i];
        struct gcra_params p = mk(4, 1, 1, bs->q);
        int64_t now = T0 + bs->at_ms * MS;
        int64_t before = m.tat;
        int had = m.have;
        struct gcra_result r = step(&p, &m, now);
        int64_t out[5];

        cr_assert_eq(r.d.limited, bs->limited, "step %zu limited", i);
        cr_assert_eq(r.d.limit, 5, "step %zu limit", i);
        cr_assert_eq(r.d.remaining, bs->remaining, "step %zu remaining %lld", i,
                     (long long)r.d.remaining);
        cr_assert_eq(r.d.reset_after_ns, bs->reset_ns, "step %zu reset %lld", i,
                     (long long)r.d.reset_after_ns);
        cr_assert_eq(r.d.retry_after_ns, bs->retry_ns, "step %zu retry %lld", i,
                     (long long)r.d.retry_after_ns);
        rl_reply_ints(&r.d, out);
        cr_assert_arr_eq(out, bs->reply, sizeof(out), "step %zu reply", i);
        if (bs->limited) {
            cr_assert_eq(r.write, GCRA_WRITE_NONE, "step %zu writes", i);
            cr_assert(m.have == had && m.tat == before, "step %zu state", i);
        } else {
            cr_assert_eq(r.write, GCRA_WRITE_SET, "step %zu write", i);
            cr_assert_eq(m.tat, now + bs->reset_ns, "step %zu new tat", i);
            cr_assert_eq(m.expiry_ms, bs->reset_ns / MS, "step %zu px", i);
        }
    }
}

Test(gcra, peek_and_refusal_on_a_new_key_report_remaining_equal_to_limit)
{
    struct gcra_params peek = mk(9, 10, 1, 0);
    struct gcra_params big = mk(9, 10, 1, 11);
    struct gcra_result r;
    const char *err = NULL;

    cr_assert_eq(gcra_decide(&peek, 0, 0, T0, &r, &err), GCRA_OK);
    check_reply(&r, 0, 10, 10, -1, 0);
    /* Nothing to store: the expiry would be 0 ms and there is no key. */
    cr_assert_eq(r.write, GCRA_WRITE_NONE);

    cr_assert_eq(gcra_decide(&big, 0, 0, T0, &r, &err), GCRA_OK);
    check_reply(&r, 1, 10, 10, -1, 0);
    cr_assert_eq(r.write, GCRA_WRITE_NONE);
}

/* ---------------- Decision edge cases ---------------- */

Test(gcra, diff_of_exactly_zero_is_admitted_and_one_ns_less_is_not)
{
    struct gcra_params p = mk(2, 1, 1, 1); /* DVT 3 s, INC 1 s */
    struct gcra_result r;
    const char *err = NULL;

    /* new_tat = tat + 1 s; diff = now - (tat + 1 s - 3 s) = 0. */
    cr_assert_eq(gcra_decide(&p, 1, T0 + 2 * S, T0, &r, &err), GCRA_OK);
    cr_assert_eq(r.d.limited, 0);
    cr_assert_eq(r.d.remaining, 0);
    cr_assert_eq(gcra_decide(&p, 1, T0 + 2 * S + 1, T0, &r, &err), GCRA_OK);
    cr_assert_eq(r.d.limited, 1);
    cr_assert_eq(r.d.retry_after_ns, 1);
    /* A retry_after of 1 ns rounds to 0 s, as redis-cell reports it, and
     * reset_after = 2 s + 1 ns to 2 s. */
    check_reply(&r, 1, 3, 0, 0, 2);
}

Test(gcra, denies_when_burst_is_exhausted_and_reports_retry_after)
{
    struct gcra_params p = mk(1, 10, 1, 1); /* EI 100 ms, DVT 200 ms */
    struct mem m = { 0 };
    struct gcra_result r;

    step(&p, &m, T0);
    step(&p, &m, T0);
    r = step(&p, &m, T0 + 30 * MS);
    cr_assert_eq(r.d.limited, 1);
    cr_assert_eq(r.d.retry_after_ns, 70 * MS);
    cr_assert_eq(r.d.reset_after_ns, 170 * MS);
    /* 70 ms and 170 ms: under a second, at least 1 ms, so both are 1. */
    check_reply(&r, 1, 2, 0, 1, 1);
}

Test(gcra, sub_second_emission_interval_counts_remaining_in_microseconds)
{
    struct gcra_params p = mk(2, 3, 1, 1); /* EI = trunc(1e9 / 3) */
    struct mem m = { 0 };
    struct gcra_result r;

    cr_assert_eq(p.ei_ns, 333333333);
    cr_assert_eq(p.dvt_ns, 999999999);
    r = step(&p, &m, T0);
    /* next = 666666666 ns: 666666 us / 333333 us = 2.000002 -> 2. */
    cr_assert_eq(r.d.remaining, 2);
    cr_assert_eq(r.expiry_ms, 333);
    check_reply(&r, 0, 3, 2, -1, 1);
}

Test(gcra, remaining_divides_whole_microseconds_not_ns_or_ms)
{
    struct gcra_params p = mk(1, 2000, 3, 0); /* EI 1.5 ms, DVT 3 ms */
    struct gcra_result r;
    const char *err = NULL;

    /* next = 2.9 ms: 2900 us / 1500 us = 1.93 -> 1 (in ms it would be 2). */
    cr_assert_eq(gcra_decide(&p, 1, T0 + 100000, T0, &r, &err), GCRA_OK);
    cr_assert_eq(r.d.remaining, 1);

    /* EI 1999 ns: next = DVT = 3998 ns is 3 us over 1 us, so a peek on a
     * new key reports 3 although the limit is 2 (in ns it would be 2). */
    p = mk(1, 500250, 1, 0);
    cr_assert_eq(p.ei_ns, 1999);
    cr_assert_eq(gcra_decide(&p, 0, 0, T0, &r, &err), GCRA_OK);
    cr_assert_eq(r.d.remaining, 3);
    cr_assert_eq(r.d.limit, 2);
}

Test(gcra, expiry_under_one_ms_deletes_an_existing_key_and_rounds_to_0_s)
{
    struct gcra_params p = mk(0, 4000, 1, 1); /* EI 250 us */
    struct mem m = { .have = 1, .tat = T0 - S };
    struct gcra_result r;

    cr_assert_eq(p.ei_ns, 250000);
    r = step(&p, &m, T0);
    cr_assert_eq(r.d.limited, 0);
    cr_assert_eq(r.d.reset_after_ns, 250000);
    cr_assert_eq(r.expiry_ms, 0);
    cr_assert_eq(r.write, GCRA_WRITE_DEL);
    cr_assert_eq(m.have, 0);
    check_reply(&r, 0, 1, 0, -1, 0);
}

Test(gcra, expiry_truncates_to_whole_milliseconds)
{
    struct gcra_params p = mk(5, 1000, 1, 2); /* EI 1 ms, INC 2 ms */
    struct gcra_result r;
    const char *err = NULL;

    cr_assert_eq(gcra_decide(&p, 1, T0 - 1, T0 - 999999, &r, &err), GCRA_OK);
    /* base = now, ttl = INC = 2 ms exactly. */
    cr_assert_eq(r.expiry_ms, 2);
    cr_assert_eq(gcra_decide(&p, 1, T0 + 999999, T0, &r, &err), GCRA_OK);
    /* ttl = 0.999999 ms + 2 ms: PX 2, not 3. */
    cr_assert_eq(r.d.reset_after_ns, 2999999);
    cr_assert_eq(r.expiry_ms, 2);
    cr_assert_eq(r.write, GCRA_WRITE_SET);
    cr_assert_eq(r.new_tat_ns, T0 + 2999999);
}

Test(gcra, quantity_above_limit_is_never_possible_so_retry_is_minus_1_s)
{
    struct gcra_params p = mk(4, 1, 1, 6);
    struct gcra_result r;
    const char *err = NULL;

    /* Also with an empty state long in the past. */
    cr_assert_eq(gcra_decide(&p, 1, T0 - 100 * S, T0, &r, &err), GCRA_OK);
    cr_assert_eq(r.d.limited, 1);
    cr_assert_eq(r.d.retry_after_ns, -S);
    /* ttl = tat - now is negative; reported as is, like redis-cell. */
    cr_assert_eq(r.d.reset_after_ns, -100 * S);
    cr_assert_eq(r.write, GCRA_WRITE_NONE);
}

Test(gcra, peek_on_an_existing_key_rewrites_the_same_tat)
{
    struct gcra_params p = mk(4, 1, 1, 0);
    struct mem m = { .have = 1, .tat = T0 + 2500 * MS };
    struct gcra_result r = step(&p, &m, T0);

    check_reply(&r, 0, 5, 2, -1, 3);
    cr_assert_eq(r.write, GCRA_WRITE_SET);
    cr_assert_eq(m.tat, T0 + 2500 * MS);
    cr_assert_eq(m.expiry_ms, 2500);
}

Test(gcra, stored_minus_one_reads_as_no_tat_like_redis_cell)
{
    struct gcra_params p = mk(4, 1, 1, 6);
    struct gcra_result r;
    const char *err = NULL;

    cr_assert_eq(gcra_decide(&p, 1, -1, T0, &r, &err), GCRA_OK);
    /* tat = now: ttl 0 and remaining = limit, as on a new key. */
    check_reply(&r, 1, 5, 5, -1, 0);
}

Test(gcra, sub_microsecond_emission_interval_saturates_like_redis_cell)
{
    struct gcra_params p = mk(9, 2000000, 1, 0); /* EI 500 ns */
    struct gcra_result r;
    const char *err = NULL;

    cr_assert_eq(p.ei_ns, 500);
    /* next = 5000 ns = 5 us over 0 us: +inf, saturated by Rust's cast. */
    cr_assert_eq(gcra_decide(&p, 0, 0, T0, &r, &err), GCRA_OK);
    cr_assert_eq(r.d.remaining, INT64_MAX);
    /* next = 0 us over 0 us: NaN, which Rust casts to 0. */
    p = mk(0, 2000000, 1, 1);
    cr_assert_eq(gcra_decide(&p, 0, 0, T0, &r, &err), GCRA_OK);
    cr_assert_eq(r.d.limited, 0);
    cr_assert_eq(r.d.remaining, 0);
}

Test(gcra, negative_burst_is_always_limited_and_writes_nothing)
{
    struct gcra_params p = mk(-3, 1, 1, 1); /* limit -2, DVT -2 s */
    struct gcra_result r;
    const char *err = NULL;

    cr_assert_eq(p.limit, -2);
    cr_assert_eq(p.dvt_ns, -2 * S);
    cr_assert_eq(gcra_decide(&p, 0, 0, T0, &r, &err), GCRA_OK);
    cr_assert_eq(r.d.limited, 1);
    cr_assert_eq(r.d.retry_after_ns, -S);
    cr_assert_eq(r.write, GCRA_WRITE_NONE);
}

/* ---------------- Overflow ---------------- */

Test(gcra, tat_near_int64_max_gives_the_range_error_not_a_wrap)
{
    struct gcra_params p = mk(4, 1, 1, 1);
    struct gcra_result r;
    const char *err = NULL;

    cr_assert_eq(gcra_decide(&p, 1, INT64_MAX - 10, T0, &r, &err), GCRA_ERANGE);
    cr_assert_str_eq(err, E_TAT_RANGE);
    cr_assert_eq(r.write, GCRA_WRITE_NONE);
    /* The last TAT that still fits is decided normally. */
    err = NULL;
    cr_assert_eq(gcra_decide(&p, 1, INT64_MAX - S, T0, &r, &err), GCRA_OK);
    cr_assert_eq(r.d.limited, 1);
}

Test(gcra, very_negative_tat_on_a_refusal_gives_the_range_error)
{
    struct gcra_params p = mk(4, 1, 1, 6); /* never possible: refused */
    struct gcra_result r;
    const char *err = NULL;

    cr_assert_eq(gcra_decide(&p, 1, INT64_MIN, T0, &r, &err), GCRA_ERANGE);
    cr_assert_str_eq(err, E_TAT_RANGE);
}

Test(gcra, huge_but_valid_arguments_compute_exact_durations)
{
    /* 9223372036 s per request is the largest period that fits. */
    struct gcra_params p = mk(0, 1, INT64_C(9223372036), 1);
    struct gcra_result r;
    const char *err = NULL;

    cr_assert_eq(p.ei_ns, INT64_C(9223372036000000000));
    cr_assert_eq(gcra_decide(&p, 0, 0, 0, &r, &err), GCRA_OK);
    cr_assert_eq(r.new_tat_ns, INT64_C(9223372036000000000));
    /* At a real clock the same increment leaves 64 bits: an error. */
    cr_assert_eq(gcra_decide(&p, 0, 0, T0, &r, &err), GCRA_ERANGE);
}

/* ---------------- Arguments ---------------- */

/* One integer syntax case; the bytes live in the struct (no pointers). */
struct int_case {
    char in[32];
    size_t len;
    int ok;
    int64_t want;
};

#define INT_OK(s, v)                                                           \
    {                                                                          \
        s, sizeof(s) - 1, 1, v                                                 \
    }
#define INT_BAD(s)                                                             \
    {                                                                          \
        s, sizeof(s) - 1, 0, 0                                                 \
    }

static const struct int_case INT_CASES[] = {
    INT_OK("0", 0),
    INT_OK("15", 15),
    INT_OK("+15", 15),
    INT_OK("-15", -15),
    INT_OK("007", 7),
    INT_OK("-007", -7),
    INT_OK("+0", 0),
    INT_OK("-0", 0),
    INT_OK("00000000000000000000000000042", 42),
    INT_OK("9223372036854775807", INT64_MAX),
    INT_OK("-9223372036854775808", INT64_MIN),
    INT_BAD(""),
    INT_BAD("+"),
    INT_BAD("-"),
    INT_BAD("++1"),
    INT_BAD("+-1"),
    INT_BAD(" 1"),
    INT_BAD("1 "),
    INT_BAD("1\t"),
    INT_BAD("1.0"),
    INT_BAD("1."),
    INT_BAD(".5"),
    INT_BAD("1e3"),
    INT_BAD("1E3"),
    INT_BAD("0x10"),
    INT_BAD("12a"),
    INT_BAD("1_000"),
    INT_BAD("1\0002"),
    INT_BAD("\xd9\xa1"), /* ARABIC-INDIC DIGIT ONE */
    INT_BAD("9223372036854775808"),
    INT_BAD("-9223372036854775809"),
    INT_BAD("18446744073709551616"),
    INT_BAD("99999999999999999999999"),
};

ParameterizedTestParameters(gcra, integer_syntax_follows_design)
{
    return cr_make_param_array(struct int_case, INT_CASES,
                               sizeof(INT_CASES) / sizeof(*INT_CASES));
}

ParameterizedTest(struct int_case *tc, gcra, integer_syntax_follows_design)
{
    int64_t v = 12345;
    int rc = gcra_parse_int64(tc->in, tc->len, &v);

    if (tc->ok) {
        cr_assert_eq(rc, GCRA_OK, "\"%.*s\" refused", (int)tc->len, tc->in);
        cr_assert_eq(v, tc->want, "\"%.*s\" = %lld", (int)tc->len, tc->in,
                     (long long)v);
    } else {
        cr_assert_eq(rc, GCRA_EARGS, "\"%.*s\" accepted", (int)tc->len, tc->in);
        cr_assert_eq(v, 12345, "output written on error");
    }
}

/* A CL.THROTTLE command as up to 8 NUL-free arguments in one struct. */
struct argv_case {
    int argc;
    char argv[8][48];
    int rc;
    char err[200];
};

#define CMD(...) .argv = { "CL.THROTTLE", __VA_ARGS__ }

static const struct argv_case ARGV_CASES[] = {
    { 1, CMD(""), GCRA_EARGS, E_USAGE },
    { 4, CMD("k", "1", "2"), GCRA_EARGS, E_USAGE },
    { 7, CMD("k", "1", "2", "3", "4", "5"), GCRA_EARGS, E_USAGE },
    { 5, CMD("k", "x", "2", "3"), GCRA_EARGS, E_NOT_INT "x" },
    /* The first bad one is reported, in the order B, C, P, Q. */
    { 6, CMD("k", "1", "two", "three", "four"), GCRA_EARGS, E_NOT_INT "two" },
    { 6, CMD("k", "1", "2", "3.5", "z"), GCRA_EARGS, E_NOT_INT "3.5" },
    { 6, CMD("k", "1", "2", "3", " 4"), GCRA_EARGS, E_NOT_INT " 4" },
    { 5, CMD("k", "1e2", "2", "3"), GCRA_EARGS, E_NOT_INT "1e2" },
    { 5, CMD("k", "", "2", "3"), GCRA_EARGS, E_NOT_INT },
    { 5, CMD("k", "99999999999999999999", "2", "3"), GCRA_EARGS,
      E_NOT_INT "99999999999999999999" },
    /* Zero rates: zero count, zero period, or an EI that truncates to 0. */
    { 5, CMD("k", "1", "0", "3"), GCRA_EARGS, E_ZERO_RATE },
    { 5, CMD("k", "1", "2", "0"), GCRA_EARGS, E_ZERO_RATE },
    { 5, CMD("k", "1", "0", "99999999999999"), GCRA_EARGS, E_ZERO_RATE },
    { 5, CMD("k", "1", "2000000001", "1"), GCRA_EARGS, E_ZERO_RATE },
    /* Divergences from redis-cell. */
    { 6, CMD("k", "1", "2", "3", "-1"), GCRA_EARGS, E_NEG_Q },
    { 5, CMD("k", "1", "-2", "3"), GCRA_EARGS, E_NEG_RATE },
    { 5, CMD("k", "1", "2", "-3"), GCRA_EARGS, E_NEG_RATE },
    { 5, CMD("k", "1", "1", "9223372037"), GCRA_ERANGE, E_RANGE },
    { 5, CMD("k", "1", "1", "-9223372037"), GCRA_ERANGE, E_RANGE },
    { 5, CMD("k", "1", "1", "9223372036"), GCRA_ERANGE, E_RANGE },
    { 5, CMD("k", "9223372036854775807", "1", "1"), GCRA_ERANGE, E_RANGE },
    { 5, CMD("k", "9223372036", "1", "1"), GCRA_ERANGE, E_RANGE },
    { 6, CMD("k", "1", "1", "1", "9223372037"), GCRA_ERANGE, E_RANGE },
    /* Valid: signs, leading zeros, negative count and period together. */
    { 5, CMD("k", "+15", "030", "0060"), GCRA_OK, "" },
    { 6, CMD("k", "-0", "-1", "-1", "+0"), GCRA_OK, "" },
    { 5, CMD("\xff\xfe", "0", "1", "9223372036"), GCRA_OK, "" },
};

ParameterizedTestParameters(gcra, throttle_arguments_give_exact_error_texts)
{
    return cr_make_param_array(struct argv_case, ARGV_CASES,
                               sizeof(ARGV_CASES) / sizeof(*ARGV_CASES));
}

ParameterizedTest(struct argv_case *tc, gcra,
                  throttle_arguments_give_exact_error_texts)
{
    const char *argv[8];
    size_t lens[8];
    char err[GCRA_ERRBUF_LEN];
    struct gcra_params p;

    for (int i = 0; i < tc->argc; i++) {
        argv[i] = tc->argv[i];
        lens[i] = strlen(tc->argv[i]);
    }
    memset(err, 0, sizeof(err));
    int rc = gcra_parse_throttle(&p, tc->argc, argv, lens, err, sizeof(err));

    cr_assert_eq(rc, tc->rc, "rc %d, expected %d (%s)", rc, tc->rc, err);
    if (tc->rc != GCRA_OK) {
        cr_assert_str_eq(err, tc->err);
    }
}

Test(gcra, parses_spans_that_are_not_nul_terminated)
{
    /* "15" "30" "60" "2" cut out of one run of digits. */
    static const char buf[] = "CL.THROTTLEkey153060299";
    const char *argv[6] = { buf,      buf + 11, buf + 14,
                            buf + 16, buf + 18, buf + 20 };
    size_t lens[6] = { 11, 3, 2, 2, 2, 1 };
    char err[GCRA_ERRBUF_LEN] = "";
    struct gcra_params p;

    cr_assert_eq(gcra_parse_throttle(&p, 6, argv, lens, err, sizeof(err)),
                 GCRA_OK, "%s", err);
    cr_assert_eq(p.max_burst, 15);
    cr_assert_eq(p.count, 30);
    cr_assert_eq(p.period_s, 60);
    cr_assert_eq(p.quantity, 2);
    cr_assert_eq(p.limit, 16);
    cr_assert_eq(p.ei_ns, 2 * S);
    cr_assert_eq(p.dvt_ns, 32 * S);
    cr_assert_eq(p.inc_ns, 4 * S);

    /* A bad argument is quoted by its span only: P = "THRO". */
    argv[4] = buf + 3;
    lens[4] = 4;
    cr_assert_eq(gcra_parse_throttle(&p, 5, argv, lens, err, sizeof(err)),
                 GCRA_EARGS);
    cr_assert_str_eq(err, E_NOT_INT "THRO");
}

Test(gcra, quantity_defaults_to_one)
{
    const char *argv[5] = { "CL.THROTTLE", "k", "4", "1", "1" };
    size_t lens[5] = { 11, 1, 1, 1, 1 };
    char err[GCRA_ERRBUF_LEN];
    struct gcra_params p;

    cr_assert_eq(gcra_parse_throttle(&p, 5, argv, lens, err, sizeof(err)),
                 GCRA_OK);
    cr_assert_eq(p.quantity, 1);
    cr_assert_eq(p.inc_ns, S);
}

Test(gcra, long_bad_argument_is_truncated_into_the_buffer)
{
    char big[1000];
    const char *argv[5] = { "CL.THROTTLE", "k", big, "1", "1" };
    size_t lens[5] = { 11, 1, sizeof(big), 1, 1 };
    char err[64];
    struct gcra_params p;

    memset(big, 'x', sizeof(big));
    cr_assert_eq(gcra_parse_throttle(&p, 5, argv, lens, err, sizeof(err)),
                 GCRA_EARGS);
    cr_assert_eq(strlen(err), sizeof(err) - 1);
    cr_assert(strncmp(err, E_NOT_INT, strlen(E_NOT_INT)) == 0);
    cr_assert_eq(err[sizeof(err) - 2], 'x');
}

/* ---------------- The script's side ---------------- */

Test(gcra, script_args_split_durations_with_nanoseconds_in_range)
{
    struct gcra_params p = mk(-4, 2, 1, 5); /* EI 0.5 s */
    struct gcra_script_args a;

    cr_assert_eq(p.inc_ns, 2500 * MS);
    cr_assert_eq(p.dvt_ns, -1500 * MS);
    gcra_script_args(&p, &a);
    cr_assert_str_eq(a.v[0], "2");
    cr_assert_str_eq(a.v[1], "500000000");
    cr_assert_str_eq(a.v[2], "-2");
    cr_assert_str_eq(a.v[3], "500000000");
    for (int i = 0; i < GCRA_SCRIPT_NARGS; i++) {
        cr_assert_eq(a.len[i], strlen(a.v[i]));
    }

    p = mk(INT64_C(9223372035), 1, 1, 0); /* DVT 9223372036 s */
    gcra_script_args(&p, &a);
    cr_assert_str_eq(a.v[0], "0");
    cr_assert_str_eq(a.v[1], "0");
    cr_assert_str_eq(a.v[2], "9223372036");
    cr_assert_str_eq(a.v[3], "0");
}

Test(gcra, script_reply_decides_like_the_model)
{
    struct gcra_params p = mk(4, 1, 1, 1);
    struct gcra_script_reply sr = {
        .limited = 0,
        .now_s = 1700000003,
        .now_us = 100000,
        .tat = "+1700000006000000000",
        .tat_len = 20,
    };
    struct gcra_result got, want;
    const char *err = NULL;

    cr_assert_eq(gcra_decide_from_script(&p, &sr, &got, &err), GCRA_OK, "%s",
                 err);
    cr_assert_eq(gcra_decide(&p, 1, T0 + 6 * S, T0 + 3100 * MS, &want, &err),
                 GCRA_OK);
    cr_assert(memcmp(&got, &want, sizeof(got)) == 0);
    check_reply(&got, 0, 5, 1, -1, 4);
    cr_assert_eq(got.new_tat_ns, T0 + 7 * S);

    /* nil TAT: a new key. */
    sr.tat = NULL;
    sr.tat_len = 0;
    cr_assert_eq(gcra_decide_from_script(&p, &sr, &got, &err), GCRA_OK);
    check_reply(&got, 0, 5, 4, -1, 1);
}

Test(gcra, script_reply_that_disagrees_or_is_malformed_is_refused)
{
    struct gcra_params p = mk(4, 1, 1, 1);
    struct gcra_script_reply ok = {
        .limited = 0,
        .now_s = 1700000000,
        .now_us = 0,
    };
    struct gcra_script_reply sr;
    struct gcra_result r;
    const char *err = NULL;

    sr = ok;
    sr.limited = 1; /* a new key is never limited with Q 1 of 5 */
    cr_assert_eq(gcra_decide_from_script(&p, &sr, &r, &err), GCRA_ESCRIPT);
    cr_assert_str_eq(err, "ERR gcra script and model disagree on the decision");

    sr = ok;
    sr.limited = 2;
    cr_assert_eq(gcra_decide_from_script(&p, &sr, &r, &err), GCRA_ESCRIPT);
    cr_assert_str_eq(err, "ERR gcra script reply is malformed");
    sr = ok;
    sr.now_us = 1000000;
    cr_assert_eq(gcra_decide_from_script(&p, &sr, &r, &err), GCRA_ESCRIPT);
    sr = ok;
    sr.now_s = -1;
    cr_assert_eq(gcra_decide_from_script(&p, &sr, &r, &err), GCRA_ESCRIPT);
    sr = ok;
    sr.now_s = INT64_C(9223372037);
    cr_assert_eq(gcra_decide_from_script(&p, &sr, &r, &err), GCRA_ESCRIPT);
    sr = ok;
    sr.tat = "12x";
    sr.tat_len = 3;
    cr_assert_eq(gcra_decide_from_script(&p, &sr, &r, &err), GCRA_ESCRIPT);

    /* A TAT the arithmetic cannot hold is the range error, not malformed. */
    sr = ok;
    sr.tat = "9223372036854775807";
    sr.tat_len = 19;
    cr_assert_eq(gcra_decide_from_script(&p, &sr, &r, &err), GCRA_ERANGE);
    cr_assert_str_eq(err, E_TAT_RANGE);
}

Test(gcra, params_in_nanoseconds_allow_fractional_periods)
{
    struct gcra_params a, b;
    const char *err = NULL;

    cr_assert_eq(gcra_params_init_ns(&a, 4, 3, INT64_C(1500000000), 1, &err),
                 GCRA_OK);
    cr_assert_eq(a.ei_ns, INT64_C(500000000));
    cr_assert_eq(a.dvt_ns, INT64_C(2500000000));
    cr_assert_eq(a.limit, 5);
    /* Whole seconds give exactly what CL.THROTTLE's parser gives. */
    cr_assert_eq(gcra_params_init(&a, 15, 30, 60, 1, &err), GCRA_OK);
    cr_assert_eq(gcra_params_init_ns(&b, 15, 30, INT64_C(60000000000), 1, &err),
                 GCRA_OK);
    cr_assert_eq(a.ei_ns, b.ei_ns);
    cr_assert_eq(a.dvt_ns, b.dvt_ns);
    cr_assert_eq(a.inc_ns, b.inc_ns);
    cr_assert_eq(gcra_params_init_ns(&a, 1, 0, 1000, 1, &err), GCRA_EARGS);
    cr_assert_str_eq(err, GCRA_ERR_ZERO_RATE);
}

/* ---------------- LIMITER ADJUST ---------------- */

/* gcra_adjust() against the store at now; applies the write. */
static struct gcra_result adj(const struct gcra_params *p, struct mem *m,
                              int64_t now, int64_t delta)
{
    struct gcra_result r;
    const char *err = NULL;

    cr_assert_eq(gcra_adjust(p, m->have, m->tat, now, delta, &r, &err), GCRA_OK,
                 "adjust: %s", err);
    if (r.write == GCRA_WRITE_SET) {
        m->have = 1;
        m->tat = r.new_tat_ns;
        m->expiry_ms = r.expiry_ms;
    } else if (r.write == GCRA_WRITE_DEL) {
        m->have = 0;
    }
    return r;
}

Test(gcra, adjust_moves_the_tat_by_delta_emission_intervals_both_ways)
{
    /* Burst 4, 1 per second: EI 1 s, DVT 5 s. */
    struct gcra_params p = mk(4, 1, 1, 1);
    struct mem m = { 0 };
    struct gcra_result r;

    step(&p, &m, T0); /* TAT T0 + 1 s */
    /* Charging 9 more: TAT T0 + 10 s, 5 s past the tolerance; never
     * refused, and a peek of cost 1 now is. */
    r = adj(&p, &m, T0, 9);
    cr_assert_eq(r.write, GCRA_WRITE_SET);
    cr_assert_eq(m.tat, T0 + 10 * S);
    cr_assert_eq(m.expiry_ms, 10000);
    check_reply(&r, 1, 5, 0, 6, 10);
    cr_assert(step(&p, &m, T0 + 5 * S).d.limited, "in debt");
    cr_assert_eq(m.tat, T0 + 10 * S, "a refusal took nothing");
    /* Giving back 3 at T0 + 5 s: TAT T0 + 7 s, 2 s ahead. */
    r = adj(&p, &m, T0 + 5 * S, -3);
    cr_assert_eq(m.tat, T0 + 7 * S);
    check_reply(&r, 0, 5, 2, -1, 3);
    /* Never below now: the key goes, as a fresh one. */
    r = adj(&p, &m, T0 + 5 * S, -100);
    cr_assert_eq(r.write, GCRA_WRITE_DEL);
    cr_assert(!m.have);
    check_reply(&r, 0, 5, 4, -1, 1);
    /* delta 0, and no TAT ahead of now: nothing written. */
    cr_assert_eq(adj(&p, &m, T0 + 5 * S, 0).write, GCRA_WRITE_NONE);
    cr_assert_eq(adj(&p, &m, T0 + 5 * S, -1).write, GCRA_WRITE_NONE);
    /* A charge starts from now when the TAT is past. */
    m.have = 1;
    m.tat = T0;
    adj(&p, &m, T0 + 5 * S, 2);
    cr_assert_eq(m.tat, T0 + 7 * S);
}

Test(gcra, adjust_saturates_the_tat_below_int64_max)
{
    struct gcra_params p = mk(4, 1, 1, 7); /* the quantity is not looked at */
    struct mem m = { 0 };
    struct gcra_result r;
    const char *err = NULL;

    r = adj(&p, &m, T0, INT64_C(9007199254740991));
    cr_assert_eq(m.tat, INT64_MAX - S);
    cr_assert(r.d.limited);
    cr_assert_eq(r.d.limit, 5);
    /* Past the cap stays: a TAT at INT64_MAX - EI moves no further. */
    adj(&p, &m, T0, 1);
    cr_assert_eq(m.tat, INT64_MAX - S);
    /* A TAT beyond it: the range error of a check of cost 1. */
    cr_assert_eq(gcra_adjust(&p, 1, INT64_MAX - 1, T0, 1, &r, &err),
                 GCRA_ERANGE);
    cr_assert_str_eq(err, E_TAT_RANGE);
}
