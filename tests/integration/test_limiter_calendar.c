/* Calendar budgets (fixed_window with window: day|week|month and tz)
 * through the real binary, in its three modes (embedded: the C model;
 * single Redis and a cluster of 3 masters: the Lua twin):
 *
 * - A monthly budget in Tokyo, a weekly one at -05:00 and a daily one at
 *   +14:00, and two levels of one identity (a month and a day, one slot):
 *   reset_after and, once refused, retry_after count to the real end of
 *   the calendar window, as the test's own calendar (libc's timegm, UTC
 *   shifted by the offset) places it.
 * - LIMITER RULES shows the calendar windows; a LIMITER RELOAD of a file
 *   whose tz is out of range is refused with the file's error, and the old
 *   tree keeps deciding.
 *
 * No clock can be set in the proxy or in Redis, so the test reads the wall
 * clock just before and just after each call and accepts any answer
 * between the window ends of those two instants (1 s of slack for the
 * reply's whole seconds): nothing can flake at a window's edge, and no
 * epoch-aligned window of any length could answer the end of a calendar
 * month at +09:00. */
#define _DEFAULT_SOURCE /* timegm */

#include "tests/support/px_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/integration/cluster_fixture.h"
#include "tests/integration/fixture.h"
#include "tests/integration/limiter_support.h"

PX_TEST_SUITE(it_limiter_calendar);

static const char calendar_yaml[] =
    "mo:\n  children:\n    \"*\":\n      limits:\n"
    "        - {algorithm: fixed_window, max: 2, window: month, "
    "tz: \"+09:00\"}\n"
    "wk:\n  children:\n    \"*\":\n      limits:\n"
    "        - {algorithm: fixed_window, max: 2, window: week, tz: -05:00}\n"
    "dy:\n  children:\n    \"*\":\n      limits:\n"
    "        - {algorithm: fixed_window, max: 2, window: day, tz: \"+14:00\"}\n"
    "api:\n  children:\n    \"*\":\n      limits:\n"
    "        - {algorithm: fixed_window, max: 5, window: month, "
    "tz: \"+09:00\"}\n"
    "      children:\n        search:\n          limits:\n"
    "            - {algorithm: fixed_window, max: 2, window: day, "
    "tz: \"-10:00\"}\n";

static const char calendar_rules[] =
    "api:*  fixed_window(max=5,window=month,tz=+09:00)\n"
    "api:*:search  fixed_window(max=2,window=day,tz=-10:00)\n"
    "dy:*  fixed_window(max=2,window=day,tz=+14:00)\n"
    "mo:*  fixed_window(max=2,window=month,tz=+09:00)\n"
    "wk:*  fixed_window(max=2,window=week,tz=-05:00)\n";

enum unit { DAY, WEEK, MONTH };

static void init_embedded(void)
{
    px_limits_start(PX_MODE_EMBEDDED, calendar_yaml, NULL);
}

static void init_single(void)
{
    px_limits_start(PX_MODE_SINGLE, calendar_yaml, NULL);
}

static void init_cluster(void)
{
    px_limits_start(PX_MODE_CLUSTER, calendar_yaml, NULL);
}

static void fini(void)
{
    if (px_mode_now() == PX_MODE_CLUSTER) {
        px_cluster_fini();
    } else {
        px_env_fini();
    }
}

/* The wall clock in seconds. */
static double wall_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The end (epoch seconds) of the calendar window holding instant t (whole
 * seconds) at off_min minutes east of UTC, by libc's UTC calendar of the
 * shifted instant: the oracle, independent of the model's arithmetic. */
static double window_end(enum unit u, int off_min, double t)
{
    time_t local = (time_t)t + off_min * 60;
    struct tm tm, next = { 0 };

    cr_assert_not_null(gmtime_r(&local, &tm));
    next.tm_year = tm.tm_year;
    next.tm_mon = tm.tm_mon;
    next.tm_mday = tm.tm_mday + 1; /* timegm normalizes */
    if (u == WEEK) {
        next.tm_mday = tm.tm_mday + 7 - (tm.tm_wday + 6) % 7;
    } else if (u == MONTH) {
        next.tm_mon = tm.tm_mon + 1;
        next.tm_mday = 1;
    }
    return (double)(timegm(&next) - (time_t)off_min * 60);
}

/* A calendar window: its unit and offset in minutes. */
struct win {
    enum unit u;
    int off;
};

/* The end of the latest of n windows holding t. */
static double latest_end(const struct win *w, int n, double t)
{
    double end = 0;

    for (int i = 0; i < n; i++) {
        double e = window_end(w[i].u, w[i].off, t);
        end = e > end ? e : end;
    }
    return end;
}

/* Calls `cmd` and asserts its reply: limited and remaining exactly;
 * retry_after (when refused: the end of the refusing window `rw`) and
 * reset_after (the latest end of the nw windows `w`, every level's) within
 * the window ends seen before and after the call. */
static void check_ends(redisContext *c, const char *cmd, long long limited,
                       long long remaining, struct win rw, const struct win *w,
                       int nw)
{
    double t0 = wall_s(), t1, lo, hi;
    char verb[16], path[64];
    int cost = 1;
    struct px_five f;

    cr_assert_geq(sscanf(cmd, "LIMITER %15s %63s COST %d", verb, path, &cost),
                  2);
    f = px_take_five(px_cmd(c, "LIMITER %s %s COST %d", verb, path, cost), cmd);

    t1 = wall_s();
    cr_assert_eq(f.limited, limited, "%s: limited %lld", cmd, f.limited);
    cr_assert_eq(f.remaining, remaining, "%s: remaining %lld", cmd,
                 f.remaining);
    lo = latest_end(w, nw, t0) - t1 - 1;
    hi = latest_end(w, nw, t1) - t0 + 1;
    cr_assert((double)f.reset >= lo && (double)f.reset <= hi,
              "%s: reset_after %lld, the window ends in %.0f .. %.0f s", cmd,
              f.reset, lo, hi);
    if (!limited) {
        cr_assert_eq(f.retry, -1, "%s: retry_after", cmd);
        return;
    }
    lo = window_end(rw.u, rw.off, t0) - t1 - 1;
    hi = window_end(rw.u, rw.off, t1) - t0 + 1;
    cr_assert((double)f.retry >= lo && (double)f.retry <= hi,
              "%s: retry_after %lld, the window ends in %.0f .. %.0f s", cmd,
              f.retry, lo, hi);
}

/* check_ends of a call whose every level has window (u, off). */
static void check_to_end(redisContext *c, const char *cmd, long long limited,
                         long long remaining, enum unit u, int off)
{
    const struct win w = { u, off };

    check_ends(c, cmd, limited, remaining, w, &w, 1);
}

static void budgets_end_with_their_calendar_windows(void)
{
    /* reset_after is the later end of the two levels' windows. */
    static const struct win both[] = { { MONTH, 540 }, { DAY, -600 } };
    redisContext *c = px_connect(px_env()->proxy.port);
    char *rules;

    rules = px_lines_text(px_cmd(c, "LIMITER RULES"));
    cr_assert_str_eq(rules, calendar_rules);
    free(rules);
    check_to_end(c, "LIMITER CHECK mo:acme", 0, 1, MONTH, 540);
    check_to_end(c, "LIMITER CHECK mo:acme COST 1", 0, 0, MONTH, 540);
    check_to_end(c, "LIMITER CHECK mo:acme", 1, 0, MONTH, 540);
    check_to_end(c, "LIMITER CHECK wk:acme COST 2", 0, 0, WEEK, -300);
    check_to_end(c, "LIMITER CHECK wk:acme", 1, 0, WEEK, -300);
    check_to_end(c, "LIMITER CHECK dy:acme", 0, 1, DAY, 840);
    check_to_end(c, "LIMITER PEEK dy:acme COST 2", 1, 1, DAY, 840);
    /* Two levels of one identity: the day at -10:00 binds first (its
     * remaining is the smaller), then refuses to its own end; nothing is
     * taken from the month level by the refused call. */
    check_ends(c, "LIMITER CHECK api:acme:search COST 2", 0, 0, both[1], both,
               2);
    check_ends(c, "LIMITER CHECK api:acme:search", 1, 0, both[1], both, 2);
    /* The month level kept its own count: 3 of 5 left. */
    check_to_end(c, "LIMITER CHECK api:acme", 0, 2, MONTH, 540);
    redisFree(c);
}

Test(it_limiter_calendar, budgets_end_with_their_windows_embedded,
     .init = init_embedded, .fini = fini, .timeout = 60)
{
    budgets_end_with_their_calendar_windows();
}

Test(it_limiter_calendar, budgets_end_with_their_windows_single,
     .init = init_single, .fini = fini, .timeout = 60)
{
    budgets_end_with_their_calendar_windows();
}

Test(it_limiter_calendar, budgets_end_with_their_windows_cluster,
     .init = init_cluster, .fini = fini, .timeout = 120)
{
    budgets_end_with_their_calendar_windows();
}

Test(it_limiter_calendar, a_reload_with_a_bad_tz_keeps_the_old_tree,
     .init = init_single, .fini = fini, .timeout = 60)
{
    static const char bad_yaml[] =
        "mo:\n  children:\n    \"*\":\n      limits:\n"
        "        - {algorithm: fixed_window, max: 9, window: month, "
        "tz: \"+15:00\"}\n";
    static const char numeric_tz_yaml[] =
        "mo:\n  limits:\n    - {algorithm: fixed_window, max: 9, window: 1d, "
        "tz: \"+09:00\"}\n";
    redisContext *c = px_connect(px_env()->proxy.port);
    char path[PX_PATH_MAX], *rules;
    redisReply *r;

    check_to_end(c, "LIMITER CHECK mo:acme", 0, 1, MONTH, 540);
    px_write_file(path, sizeof(path), "limits.yaml", bad_yaml);
    r = px_cmd_admin(c, "LIMITER RELOAD");
    cr_assert_eq(r->type, REDIS_REPLY_ERROR, "RELOAD: type %d", r->type);
    cr_assert_not_null(strstr(r->str, "tz: \"+15:00\" is out of range "
                                      "(-14:00 to +14:00)"),
                       "RELOAD: %s", r->str);
    freeReplyObject(r);
    px_write_file(path, sizeof(path), "limits.yaml", numeric_tz_yaml);
    r = px_cmd_admin(c, "LIMITER RELOAD");
    cr_assert_eq(r->type, REDIS_REPLY_ERROR, "RELOAD: type %d", r->type);
    cr_assert_not_null(strstr(r->str, "tz needs a calendar window"),
                       "RELOAD: %s", r->str);
    freeReplyObject(r);
    /* The old tree still decides: the second of 2 this month. */
    rules = px_lines_text(px_cmd(c, "LIMITER RULES"));
    cr_assert_str_eq(rules, calendar_rules);
    free(rules);
    check_to_end(c, "LIMITER CHECK mo:acme", 0, 0, MONTH, 540);
    check_to_end(c, "LIMITER CHECK mo:acme", 1, 0, MONTH, 540);
    redisFree(c);
}
