/* Unit tests of conf/limits: fixed_window's calendar windows (`window:
 * day|week|month` and `tz`), as the file, LIMITER RULES and LIMITER
 * OVERRIDE see them, and what is refused. */
#include <stdlib.h>
#include <string.h>

#include "conf/limits.h"
#include "tests/support/limits_test.h"
#include "tests/support/px_test.h"

PX_TEST_SUITE(limits_calendar);

static const char calendar_yaml[] =
    "api:\n"
    "  children:\n"
    "    \"*\":\n"
    "      limits:\n"
    "        - {algorithm: fixed_window, max: 1000, window: month, "
    "tz: \"+09:00\"}\n"
    "        - {algorithm: fixed_window, max: 100, window: day, tz: -05:30}\n"
    "        - {algorithm: fixed_window, max: 500, window: week}\n"
    "        - {algorithm: fixed_window, max: 10, window: 1h}\n";

Test(limits_calendar, calendar_windows_and_offsets_are_read_and_shown)
{
    struct limits_tree *t = limits_test_load_ok(calendar_yaml);
    struct limits_levels *lv = limits_test_levels_new();
    const struct limits_limit *l;
    int64_t v[LIMITS_MAX_PARAMS];
    char *rules;

    limits_test_resolve(t, "api:acme", lv);
    cr_assert_eq(lv->n, 1);
    l = lv->level[0].limits;
    cr_assert_eq(l[0].u.fixed_window.window_ms, LIMITS_WINDOW_MONTH);
    cr_assert_eq(l[0].u.fixed_window.tz_min, 540);
    cr_assert_eq(l[1].u.fixed_window.window_ms, LIMITS_WINDOW_DAY);
    cr_assert_eq(l[1].u.fixed_window.tz_min, -330);
    cr_assert_eq(l[2].u.fixed_window.window_ms, LIMITS_WINDOW_WEEK);
    cr_assert_eq(l[2].u.fixed_window.tz_min, 0);
    cr_assert_eq(l[3].u.fixed_window.window_ms, 3600000);
    /* The script's parameters: max, window, offset in minutes. */
    cr_assert_eq(limits_params(&l[0], v), 3);
    cr_assert(v[0] == 1000 && v[1] == -3 && v[2] == 540);
    /* At +00:00 the offset is left out: a numeric window's words are as
     * they were before calendar windows. */
    cr_assert_eq(limits_params(&l[2], v), 2);
    cr_assert(v[0] == 500 && v[1] == -2);
    cr_assert_eq(limits_params(&l[3], v), 2);
    rules = limits_test_describe(t);
    cr_assert_str_eq(rules,
                     "api:*  fixed_window(max=1000,window=month,tz=+09:00) "
                     "fixed_window(max=100,window=day,tz=-05:30) "
                     "fixed_window(max=500,window=week) "
                     "fixed_window(max=10,window=3600s)\n");
    free(rules);
    free(lv);
    limits_free(t);
}

Test(limits_calendar, a_factor_keeps_the_window_and_the_offset)
{
    struct limits_tree *t = limits_test_load_ok(
        "api:\n  limits:\n    - {algorithm: fixed_window, max: 1000, "
        "window: month, tz: \"+09:00\"}\n"
        "overrides:\n  api: {factor: 4}\n");
    char *rules = limits_test_describe(t);

    cr_assert_str_eq(rules,
                     "api  fixed_window(max=1000,window=month,tz=+09:00)\n"
                     "override api  factor=4 "
                     "fixed_window(max=250,window=month,tz=+09:00)\n");
    free(rules);
    limits_free(t);
}

Test(limits_calendar, runtime_overrides_set_a_calendar_window)
{
    struct limits_tree *t = limits_test_load_ok(
        "api:\n  limits:\n    - {algorithm: fixed_window, max: 10, "
        "window: 1h}\n");
    struct limits_levels *lv = limits_test_levels_new();
    struct limits_runtime rt;
    char err[256];
    static const char ok[] = "window week tz -05:00";
    static const char bad[] = "tz +09:00";
    static const char far[] = "window month tz +14:01";

    limits_test_resolve(t, "api", lv);
    cr_assert_eq(limits_runtime_parse_text(lv->level[0].base, 1, ok, strlen(ok),
                                           &rt, err, sizeof(err)),
                 LIMITS_OK, "%s", err);
    cr_assert_eq(rt.limits[0].u.fixed_window.window_ms, LIMITS_WINDOW_WEEK);
    cr_assert_eq(rt.limits[0].u.fixed_window.tz_min, -300);
    cr_assert_str_eq(limits_test_fmt(&rt.limits[0]),
                     "fixed_window(max=10,window=week,tz=-05:00)");
    cr_assert_eq(limits_runtime_parse_text(lv->level[0].base, 1, bad,
                                           strlen(bad), &rt, err, sizeof(err)),
                 LIMITS_ERR);
    cr_assert_str_eq(err, "fixed_window: tz needs a calendar window (window: "
                          "day, week or month)");
    cr_assert_eq(limits_runtime_parse_text(lv->level[0].base, 1, far,
                                           strlen(far), &rt, err, sizeof(err)),
                 LIMITS_ERR);
    cr_assert_str_eq(err, "tz: expected a UTC offset such as +09:00 or "
                          "-05:30, got \"+14:01\"");
    free(lv);
    limits_free(t);
}

#define FW_LINE "user:\n  limits:\n    - {algorithm: fixed_window, max: 1, "

Test(limits_calendar, bad_offsets_and_windows_are_refused_with_their_place)
{
    static const struct {
        const char *yaml, *err;
    } cases[] = {
        { FW_LINE "window: month, tz: \"+9\"}\n",
          "limits.yaml:3:60: user: tz: expected a UTC offset such as +09:00 "
          "or -05:30, got \"+9\"" },
        { FW_LINE "window: month, tz: \"+09:60\"}\n",
          "limits.yaml:3:60: user: tz: expected a UTC offset such as +09:00 "
          "or -05:30, got \"+09:60\"" },
        { FW_LINE "window: month, tz: \"+15:00\"}\n",
          "limits.yaml:3:60: user: tz: \"+15:00\" is out of range (-14:00 to "
          "+14:00)" },
        { FW_LINE "window: day, tz: \"-14:30\"}\n",
          "limits.yaml:3:58: user: tz: \"-14:30\" is out of range (-14:00 to "
          "+14:00)" },
        { FW_LINE "window: day, tz: \"09:00\"}\n",
          "limits.yaml:3:58: user: tz: expected a UTC offset such as +09:00 "
          "or -05:30, got \"09:00\"" },
        { FW_LINE "window: 1d, tz: \"+09:00\"}\n",
          "limits.yaml:3:7: user: fixed_window: tz needs a calendar window "
          "(window: day, week or month)" },
        { FW_LINE "window: year}\n",
          "limits.yaml:3:49: user: window: expected a positive duration such "
          "as 60, 1.5, 500ms or 2m, or day, week or month, got \"year\"" },
        { FW_LINE "window: Month}\n",
          "limits.yaml:3:49: user: window: expected a positive duration such "
          "as 60, 1.5, 500ms or 2m, or day, week or month, got \"Month\"" },
        { "user:\n  limits:\n    - {algorithm: sliding_counter, max: 1, "
          "window: month}\n",
          "limits.yaml:3:52: user: window: expected a positive duration such "
          "as 60, 1.5, 500ms or 2m, got \"month\"" },
        { "user:\n  limits:\n    - {algorithm: token_bucket, capacity: 1, "
          "refill_per_sec: 1, tz: \"+09:00\"}\n",
          "limits.yaml:3:65: user: token_bucket: unknown parameter 'tz' "
          "(expected capacity, refill_per_sec, warmup, cold_factor)" },
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
        limits_test_expect_error(cases[i].yaml, cases[i].err);
    }
}

Test(limits_calendar, utc_offsets_at_the_edges_are_accepted)
{
    struct limits_tree *t = limits_test_load_ok(
        "a:\n  limits:\n    - {algorithm: fixed_window, max: 1, window: day, "
        "tz: \"+14:00\"}\n"
        "b:\n  limits:\n    - {algorithm: fixed_window, max: 1, window: day, "
        "tz: \"-14:00\"}\n"
        "c:\n  limits:\n    - {algorithm: fixed_window, max: 1, window: day, "
        "tz: \"-00:00\"}\n"
        "d:\n  limits:\n    - {algorithm: fixed_window, max: 1, window: 1d, "
        "tz: \"+00:00\"}\n");
    char *rules = limits_test_describe(t);

    cr_assert_str_eq(rules, "a  fixed_window(max=1,window=day,tz=+14:00)\n"
                            "b  fixed_window(max=1,window=day,tz=-14:00)\n"
                            "c  fixed_window(max=1,window=day)\n"
                            "d  fixed_window(max=1,window=86400s)\n");
    free(rules);
    limits_free(t);
}
