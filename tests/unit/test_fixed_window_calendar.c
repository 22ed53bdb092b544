/* Fixed window's calendar windows (day, week, month at a fixed UTC
 * offset): the window of an instant against dates worked out by hand
 * (leap years 2024 and 2000, 2100 not leap, month and year ends, a
 * Monday, offsets across the date line, the first instant of a window and
 * the last nanosecond of one), against libc's UTC calendar over every day
 * the int64 nanoseconds reach, and the decisions that use them (reset_after and
 * retry_after to the real end of the month).
 *
 * The epoch seconds of the dates were computed with `date -u -d`. */
#define _DEFAULT_SOURCE /* timegm, as an independent oracle */

#include "tests/support/px_test.h"

#include <stdint.h>
#include <string.h>
#include <time.h>

#include "algorithms/fixed_window.h"
#include "algorithms/rl.h"

PX_TEST_SUITE(fixed_window_calendar);

#define S   RL_NS_PER_SEC
#define H   (3600 * S)
#define DAY (86400 * S)
#define MIN (60 * S)

#define T_2024_02_29 INT64_C(1709164800) /* Thursday */
#define T_2024_03_01 INT64_C(1709251200)
#define T_2000_02_28 INT64_C(951696000)
#define T_2100_02_28 INT64_C(4107456000)
#define T_2026_11_23 INT64_C(1795392000) /* Monday */
#define T_2026_11_30 INT64_C(1795996800) /* Monday */
#define T_2026_12_31 INT64_C(1798675200)
#define T_2027_01_01 INT64_C(1798761600)

static struct fixed_window_span span(enum fixed_window_unit u, int64_t off_min,
                                     int64_t t_ns)
{
    struct fixed_window_span sp;

    memset(&sp, 0xa5, sizeof(sp));
    fixed_window_calendar(u, off_min * MIN, t_ns, &sp);
    return sp;
}

#define EXPECT_SPAN(u, off, t, since, until)                                   \
    do {                                                                       \
        struct fixed_window_span sp_ = span((u), (off), (t));                  \
        cr_assert(sp_.since_ns == (since) && sp_.until_ns == (until),          \
                  "unit %d off %d t %lld: since %lld until %lld, want %lld "   \
                  "%lld",                                                      \
                  (int)(u), (int)(off), (long long)(t),                        \
                  (long long)sp_.since_ns, (long long)sp_.until_ns,            \
                  (long long)(since), (long long)(until));                     \
    } while (0)

Test(fixed_window_calendar, leap_years_give_february_its_real_length)
{
    /* 2024-02-29 noon: 28 days into February, 12 h to March. */
    EXPECT_SPAN(FIXED_WINDOW_MONTH, 0, T_2024_02_29 * S + 12 * H,
                28 * DAY + 12 * H, 12 * H);
    /* 2000 is leap (divisible by 400): from the 28th, two days left. */
    EXPECT_SPAN(FIXED_WINDOW_MONTH, 0, T_2000_02_28 * S, 27 * DAY, 2 * DAY);
    /* 2100 is not (divisible by 100): from the 28th, one day left. */
    EXPECT_SPAN(FIXED_WINDOW_MONTH, 0, T_2100_02_28 * S, 27 * DAY, DAY);
    /* March 2024 starts on the 1st, 31 days long. */
    EXPECT_SPAN(FIXED_WINDOW_MONTH, 0, T_2024_03_01 * S, 0, 31 * DAY);
}

Test(fixed_window_calendar, the_first_instant_and_the_last_nanosecond)
{
    /* The last ns of 2026: a month, a week (Thursday) and a day end 1 ns
     * later; the first instant of 2027 starts each of them. */
    EXPECT_SPAN(FIXED_WINDOW_MONTH, 0, T_2027_01_01 * S - 1, 31 * DAY - 1, 1);
    EXPECT_SPAN(FIXED_WINDOW_DAY, 0, T_2027_01_01 * S - 1, DAY - 1, 1);
    EXPECT_SPAN(FIXED_WINDOW_MONTH, 0, T_2027_01_01 * S, 0, 31 * DAY);
    EXPECT_SPAN(FIXED_WINDOW_DAY, 0, T_2027_01_01 * S, 0, DAY);
    /* 2026-12-31 is a Thursday: its week began Monday the 28th. */
    EXPECT_SPAN(FIXED_WINDOW_WEEK, 0, T_2026_12_31 * S, 3 * DAY, 4 * DAY);
}

Test(fixed_window_calendar, weeks_start_on_monday)
{
    EXPECT_SPAN(FIXED_WINDOW_WEEK, 0, T_2026_11_30 * S, 0, 7 * DAY);
    EXPECT_SPAN(FIXED_WINDOW_WEEK, 0, T_2026_11_30 * S - 1, 7 * DAY - 1, 1);
    EXPECT_SPAN(FIXED_WINDOW_WEEK, 0, T_2026_11_23 * S + 5 * DAY + H,
                5 * DAY + H, 2 * DAY - H);
    /* The epoch was a Thursday; its week began Monday 1969-12-29. */
    EXPECT_SPAN(FIXED_WINDOW_WEEK, 0, 0, 3 * DAY, 4 * DAY);
    /* Sunday 23:00 in Tokyo is Monday's window from 15:00 UTC. */
    EXPECT_SPAN(FIXED_WINDOW_WEEK, 540, T_2026_11_30 * S - 9 * H, 0, 7 * DAY);
    EXPECT_SPAN(FIXED_WINDOW_WEEK, 540, T_2026_11_30 * S - 9 * H - 1,
                7 * DAY - 1, 1);
}

Test(fixed_window_calendar, offsets_move_the_window_across_the_date_line)
{
    /* 2027-01-01 05:00 UTC is still 2026-12-31 19:00 at -10:00: December
     * runs 5 h more. */
    EXPECT_SPAN(FIXED_WINDOW_MONTH, -600, T_2027_01_01 * S + 5 * H,
                30 * DAY + 19 * H, 5 * H);
    EXPECT_SPAN(FIXED_WINDOW_DAY, -600, T_2027_01_01 * S + 5 * H, 19 * H,
                5 * H);
    /* 2026-12-31 10:00 UTC is already 2027-01-01 00:00 at +14:00. */
    EXPECT_SPAN(FIXED_WINDOW_MONTH, 840, T_2026_12_31 * S + 10 * H, 0,
                31 * DAY);
    EXPECT_SPAN(FIXED_WINDOW_MONTH, 840, T_2026_12_31 * S + 10 * H - 1,
                31 * DAY - 1, 1);
    /* -14:00 and +14:00 are 28 h apart: the same instant two dates. */
    EXPECT_SPAN(FIXED_WINDOW_DAY, -840, T_2026_12_31 * S + 12 * H, 22 * H,
                2 * H);
    /* Half-hour offsets: Tokyo's month at JST, India's day at +05:30. */
    EXPECT_SPAN(FIXED_WINDOW_MONTH, 540, T_2026_11_30 * S + 15 * H, 0,
                31 * DAY);
    EXPECT_SPAN(FIXED_WINDOW_DAY, 330, T_2027_01_01 * S, 5 * H + 30 * MIN,
                18 * H + 30 * MIN);
}

Test(fixed_window_calendar, instants_before_the_epoch_and_near_int64_max)
{
    struct fixed_window_span sp;

    EXPECT_SPAN(FIXED_WINDOW_MONTH, 0, -1, 31 * DAY - 1, 1);
    EXPECT_SPAN(FIXED_WINDOW_DAY, 840, 0, 14 * H, 10 * H);
    for (int off = -840; off <= 840; off += 420) {
        for (int u = FIXED_WINDOW_DAY; u <= FIXED_WINDOW_MONTH; u++) {
            sp = span((enum fixed_window_unit)u, off, INT64_MAX);
            cr_assert(sp.since_ns >= 0 && sp.until_ns >= 1 &&
                      sp.since_ns + sp.until_ns <= 31 * DAY);
            sp = span((enum fixed_window_unit)u, off, INT64_MIN);
            cr_assert(sp.since_ns >= 0 && sp.until_ns >= 1 &&
                      sp.since_ns + sp.until_ns <= 31 * DAY);
        }
    }
}

/* Days in month `mon` (0..11) of `year`, from libc's UTC calendar. */
static int64_t libc_month_days(int year, int mon)
{
    struct tm a = { .tm_year = year - 1900, .tm_mon = mon, .tm_mday = 1 };
    struct tm b = { .tm_year = year - 1900 + (mon == 11),
                    .tm_mon = (mon + 1) % 12,
                    .tm_mday = 1 };

    return (int64_t)(timegm(&b) - timegm(&a)) / 86400;
}

Test(fixed_window_calendar, every_day_from_1679_to_2260_matches_libc_utc)
{
    /* Every day the int64 ns reach (1700, 1800, 1900, 2100 and 2200 not
     * leap, 2000 leap), at the offset +03:00 (libc sees the local instant
     * as UTC): each day's month and week windows. */
    for (int64_t d = -106000; d < 106000; d++) {
        int64_t local = d * 86400 + 7 * 3600 + 5, month_days;
        time_t tt = (time_t)local;
        struct tm tm;
        int64_t t = (local - 3 * 3600) * S, wd;

        cr_assert_not_null(gmtime_r(&tt, &tm));
        month_days = libc_month_days(tm.tm_year + 1900, tm.tm_mon);
        wd = (tm.tm_wday + 6) % 7; /* Monday 0 */
        {
            struct fixed_window_span m = span(FIXED_WINDOW_MONTH, 180, t);
            struct fixed_window_span w = span(FIXED_WINDOW_WEEK, 180, t);
            int64_t into = (7 * 3600 + 5) * S;

            if (m.since_ns != (tm.tm_mday - 1) * DAY + into ||
                m.until_ns != (month_days - tm.tm_mday + 1) * DAY - into ||
                w.since_ns != wd * DAY + into ||
                w.until_ns != (7 - wd) * DAY - into) {
                cr_assert_fail("day %lld (%04d-%02d-%02d): month %lld %lld "
                               "week %lld %lld",
                               (long long)d, tm.tm_year + 1900, tm.tm_mon + 1,
                               tm.tm_mday, (long long)m.since_ns,
                               (long long)m.until_ns, (long long)w.since_ns,
                               (long long)w.until_ns);
            }
        }
    }
}

/* ---------------- Decisions ---------------- */

static struct fixed_window_params cal(int64_t max, enum fixed_window_unit u,
                                      int64_t off_min)
{
    struct fixed_window_params p;
    const char *err = NULL;

    cr_assert_eq(fixed_window_params_calendar(&p, max, u, off_min, &err),
                 FIXED_WINDOW_OK, "params: %s", err);
    return p;
}

static struct fixed_window_result decide(const struct fixed_window_params *p,
                                         const struct fixed_window_state *st,
                                         int64_t now, int64_t cost)
{
    struct fixed_window_result r;
    const char *err = NULL;

    cr_assert_eq(fixed_window_decide(p, st, now, cost, &r, &err),
                 FIXED_WINDOW_OK, "decide: %s", err);
    return r;
}

Test(fixed_window_calendar, a_monthly_budget_resets_at_the_real_month_end)
{
    /* A Tokyo budget of 2 a month; 2024-02-29 20:00 UTC is already March
     * 1st 05:00 JST: the window is March (JST), ending 31 days on. */
    struct fixed_window_params p = cal(2, FIXED_WINDOW_MONTH, 540);
    int64_t now = T_2024_02_29 * S + 20 * H;
    int64_t start = T_2024_02_29 * S + 15 * H; /* March 1st 00:00 JST */
    int64_t end = start + 31 * DAY;
    struct fixed_window_result r = decide(&p, NULL, now, 2);
    struct fixed_window_state st;

    cr_assert(!r.d.limited && r.write == FIXED_WINDOW_WRITE_SET);
    cr_assert_eq(r.next.start_ns, start);
    cr_assert_eq(r.d.reset_after_ns, end - now);
    cr_assert_eq(r.expiry_ms, (end - now) / RL_NS_PER_MS);
    st = r.next;
    /* Refused until March ends in Tokyo, to the ns. */
    r = decide(&p, &st, end - 1, 1);
    cr_assert(r.d.limited && r.d.retry_after_ns == 1 &&
              r.d.reset_after_ns == 1);
    /* April (30 days) starts empty. */
    r = decide(&p, &st, end, 1);
    cr_assert(!r.d.limited && r.next.start_ns == end && r.next.count == 1);
    cr_assert_eq(r.d.reset_after_ns, 30 * DAY);
}

Test(fixed_window_calendar, a_later_stored_window_keeps_its_own_length)
{
    /* The clock went back into February (29 days) after a write in March
     * (31): the March window holds, to its own end. */
    struct fixed_window_params p = cal(5, FIXED_WINDOW_MONTH, 0);
    struct fixed_window_state st = { T_2024_03_01 * S, 5 };
    int64_t now = T_2024_03_01 * S - H;
    struct fixed_window_result r = decide(&p, &st, now, 1);

    cr_assert(r.d.limited);
    cr_assert_eq(r.d.retry_after_ns, H + 31 * DAY);
    cr_assert_eq(r.next.start_ns, T_2024_03_01 * S);
}

Test(fixed_window_calendar, a_window_before_the_epoch_starts_at_zero)
{
    /* 1970-01-01 00:00 UTC is 09:00 JST: the January window began 9 h
     * before the epoch; it is stored as 0 and still ends on Feb 1st JST. */
    struct fixed_window_params p = cal(3, FIXED_WINDOW_MONTH, 540);
    struct fixed_window_result r = decide(&p, NULL, 0, 1);
    struct fixed_window_state st;

    cr_assert_eq(r.next.start_ns, 0);
    cr_assert_eq(r.d.reset_after_ns, 31 * DAY - 9 * H);
    st = r.next;
    r = decide(&p, &st, 5 * H, 1);
    cr_assert_eq(r.next.count, 2, "the same window");
}

Test(fixed_window_calendar, a_day_window_in_utc_equals_one_day_from_the_epoch)
{
    struct fixed_window_params c = cal(3, FIXED_WINDOW_DAY, 0), n;
    const char *err = NULL;
    int64_t t = T_2024_02_29 * S + 17 * H + 3;

    cr_assert_eq(fixed_window_params_init(&n, 3, 86400000, &err), 0);
    for (int i = 0; i < 50; i++, t += 7 * H + 13 * S) {
        struct fixed_window_result a = decide(&c, NULL, t, 1);
        struct fixed_window_result b = decide(&n, NULL, t, 1);

        cr_assert(a.next.start_ns == b.next.start_ns &&
                  a.d.reset_after_ns == b.d.reset_after_ns);
    }
}

Test(fixed_window_calendar, bad_units_and_offsets_are_refused)
{
    struct fixed_window_params p;
    struct fixed_window_result r;
    const char *err = NULL;

    cr_assert_eq(
        fixed_window_params_calendar(&p, 1, FIXED_WINDOW_EPOCH, 0, &err),
        FIXED_WINDOW_EARGS);
    cr_assert_str_eq(err, FIXED_WINDOW_ERR_UNIT);
    cr_assert_eq(
        fixed_window_params_calendar(&p, 1, (enum fixed_window_unit)4, 0, &err),
        FIXED_WINDOW_EARGS);
    cr_assert_eq(
        fixed_window_params_calendar(&p, 1, FIXED_WINDOW_DAY, 841, &err),
        FIXED_WINDOW_EARGS);
    cr_assert_str_eq(err, FIXED_WINDOW_ERR_TZ);
    cr_assert_eq(
        fixed_window_params_calendar(&p, 1, FIXED_WINDOW_DAY, -841, &err),
        FIXED_WINDOW_EARGS);
    cr_assert_eq(fixed_window_params_calendar(&p, 0, FIXED_WINDOW_DAY, 0, &err),
                 FIXED_WINDOW_EARGS);
    cr_assert_str_eq(err, FIXED_WINDOW_ERR_MAX);
    cr_assert_eq(
        fixed_window_params_calendar(&p, 1, FIXED_WINDOW_WEEK, -840, &err),
        FIXED_WINDOW_OK);
    cr_assert_eq(
        fixed_window_params_calendar(&p, 1, FIXED_WINDOW_MONTH, 840, &err),
        FIXED_WINDOW_OK);
    /* Hand-made parameters out of range are refused by decide too. */
    p.offset_ns = 841 * MIN;
    cr_assert_eq(fixed_window_decide(&p, NULL, 0, 1, &r, &err),
                 FIXED_WINDOW_EARGS);
    cr_assert_str_eq(err, FIXED_WINDOW_ERR_TZ);
    p.offset_ns = 0;
    p.unit = (enum fixed_window_unit)7;
    cr_assert_eq(fixed_window_decide(&p, NULL, 0, 1, &r, &err),
                 FIXED_WINDOW_EARGS);
    cr_assert_str_eq(err, FIXED_WINDOW_ERR_UNIT);
}
