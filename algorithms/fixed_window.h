/* Fixed window counter, as a pure function of (parameters, stored state,
 * now, cost).
 *
 * Time is cut into windows aligned to the Unix epoch: the window of now
 * starts at now - now mod window. At most `max` is counted per window; a
 * request passes when count + cost <= max, and the count starts again from
 * 0 in the next window.
 *
 * Calendar windows (fixed_window_params_calendar): the window is the day,
 * the week (Monday to Sunday) or the calendar month (28 to 31 days) of
 * now's date at a fixed UTC offset (-14:00 .. +14:00, in minutes). Dates
 * come from integer civil-from-days arithmetic (proleptic Gregorian),
 * never from libc's time zones: the Lua twin must do the same arithmetic
 * in Redis, which has no os.date, and every proxy and node must agree on
 * where a window starts. A window that would start before the epoch
 * (the first hours of 1970 at a positive offset) starts at 0.
 *
 * Parameters (conf/limits.h struct limits_fixed_window):
 *   max        1 .. FIXED_WINDOW_MAX_COUNT (2^53 - 1)
 *   window_ms  1 .. FIXED_WINDOW_MAX_WINDOW_MS (3650 days); or
 *   unit       day, week or month, with
 *   offset     -840 .. 840 minutes east of UTC
 *
 * State:
 *   start_ns  the start of the window the count belongs to (ns since the
 *             Unix epoch; a multiple of the window)
 *   count     what passed in that window, >= 0
 * A stored window that is not the current one (older, or of another
 * window length after the file changed) reads as count 0, with one
 * exception below (the clock). The end of a stored window is start +
 * window, or for a calendar window the end of the calendar window that
 * holds its start.
 *
 * Redis (the Lua twin, algorithms/lua/fixed_window.lua): one HASH per key,
 *   HSET <key> start <start_us> count <count>   (decimal integers)
 *   PEXPIRE <key> <expiry_ms>
 * written only when a request passes with cost >= 1. Times are whole
 * microseconds there (Redis's TIME has no finer unit): start_ns =
 * start_us * 1000. The expiry is the time until the window ends, rounded up
 * to whole ms: the key expires with its window. Replies carry the durations
 * floored to microseconds (beyond 2^53 us, as decimal text). Its undo token
 * is the start (us) of the window a check counted in: a refund takes the
 * cost back from that window's count (not below 0; the key goes when
 * nothing is left counted in now's own window) while it is the stored one,
 * and does nothing otherwise.
 *
 * Reply fields (struct rl_decision):
 *   limited         1 when count + cost > max, or cost > max
 *   limit           max
 *   remaining       max - count after this request, at least 0
 *   retry_after_ns  when refused: the time until the window ends (the next
 *                   window starts empty, and cost <= max fits it); -1 s
 *                   when allowed or when cost > max (it can never pass)
 *   reset_after_ns  the time until the window ends when something is
 *                   counted in it; 0 when the count is 0 (already full
 *                   capacity, as for gcra's new key)
 *
 * Cost 0 is a peek: it passes unless the count exceeds a lowered max, and
 * never writes. A refused request writes nothing.
 *
 * Clock: a stored window that starts after the current one (a node's clock
 * jumped back) stays the effective window: the request counts in it, and
 * both durations run to its end, so a clock jump never opens a fresh
 * window early.
 *
 * Leaf layer: libc only, no globals. */
#ifndef PX_ALGORITHMS_FIXED_WINDOW_H
#define PX_ALGORITHMS_FIXED_WINDOW_H

#include <stdint.h>

#include "algorithms/rl.h"

#define FIXED_WINDOW_OK     0
#define FIXED_WINDOW_EARGS  -1 /* parameters, time or cost out of range */
#define FIXED_WINDOW_ESTATE -2 /* a stored state no decision can come from */

/* Largest max: conf/limits.h LIMITS_MAX_COUNT. */
#define FIXED_WINDOW_MAX_COUNT INT64_C(9007199254740991)
/* Longest window, 3650 days: conf/limits.h LIMITS_MAX_DURATION_MS. */
#define FIXED_WINDOW_MAX_WINDOW_MS INT64_C(315360000000)

/* Error texts (static, lowercase, fit for "-ERR <text>"). */
#define FIXED_WINDOW_ERR_MAX "fixed_window max must be between 1 and 2^53 - 1"
#define FIXED_WINDOW_ERR_WINDOW                                                \
    "fixed_window window must be between 1 ms and 3650 days"
#define FIXED_WINDOW_ERR_TIME "fixed_window time must not be negative"
#define FIXED_WINDOW_ERR_COST "fixed_window cost must not be negative"
#define FIXED_WINDOW_ERR_STATE                                                 \
    "fixed_window state is malformed (negative start or count)"
#define FIXED_WINDOW_ERR_UNIT                                                  \
    "fixed_window calendar window must be day, week or month"
#define FIXED_WINDOW_ERR_TZ                                                    \
    "fixed_window tz must be between -14:00 and +14:00 (-840 to 840 minutes)"

/* Widest UTC offset of a calendar window, in minutes (14:00). */
#define FIXED_WINDOW_MAX_OFFSET_MIN 840

/* How windows are cut. */
enum fixed_window_unit {
    FIXED_WINDOW_EPOCH = 0, /* window_ns long, aligned to the epoch */
    FIXED_WINDOW_DAY = 1,   /* the date at the offset */
    FIXED_WINDOW_WEEK = 2,  /* Monday 00:00 to the next Monday */
    FIXED_WINDOW_MONTH = 3, /* the 1st 00:00 to the next month's 1st */
};

/* Validated parameters, durations in ns. */
struct fixed_window_params {
    int64_t max;                 /* >= 1 */
    int64_t window_ns;           /* window_ms * 1e6; 0 for a calendar unit */
    enum fixed_window_unit unit; /* FIXED_WINDOW_EPOCH: window_ns */
    int64_t offset_ns;           /* a calendar unit's UTC offset */
};

/* Where an instant lies in its calendar window. */
struct fixed_window_span {
    int64_t since_ns; /* from the window's start to the instant, >= 0 */
    int64_t until_ns; /* from the instant to the window's end, >= 1 */
};

/* The stored state (see the file comment). */
struct fixed_window_state {
    int64_t start_ns; /* start of the counted window */
    int64_t count;    /* counted in it, >= 0 */
};

/* What a store does after a decision. */
enum fixed_window_write {
    FIXED_WINDOW_WRITE_NONE, /* leave the key as it is */
    FIXED_WINDOW_WRITE_SET,  /* HSET the fields of next, PEXPIRE expiry_ms */
};

/* The outcome of fixed_window_decide(). */
struct fixed_window_result {
    struct rl_decision d;           /* the five integers, before rounding */
    enum fixed_window_write write;  /* what to do with the key */
    struct fixed_window_state next; /* the effective window and its count
                                       after this decision; stored only
                                       when write is SET */
    int64_t expiry_ms;              /* PEXPIRE when write is SET, >= 1 */
};

/* Fills *p from the conf units. Returns FIXED_WINDOW_OK, or
 * FIXED_WINDOW_EARGS with *err a static text. */
int fixed_window_params_init(struct fixed_window_params *p, int64_t max,
                             int64_t window_ms, const char **err);

/* Fills *p for a calendar window of `unit` at `offset_min` minutes east of
 * UTC. Returns FIXED_WINDOW_OK, or FIXED_WINDOW_EARGS with *err a static
 * text. */
int fixed_window_params_calendar(struct fixed_window_params *p, int64_t max,
                                 enum fixed_window_unit unit,
                                 int64_t offset_min, const char **err);

/* The calendar window of `unit` (DAY, WEEK or MONTH) holding the instant
 * t_ns (any int64) at offset_ns east of UTC (|offset| <= 14 h): how long
 * since it started and until it ends. The window is [t - since, t +
 * until), its bounds whole local days; nothing overflows (both are at
 * most 31 days). */
void fixed_window_calendar(enum fixed_window_unit unit, int64_t offset_ns,
                           int64_t t_ns, struct fixed_window_span *out);

/* The decision for a request of `cost` (>= 0; 0 peeks) at now_ns (>= 0)
 * against the stored state `st` (NULL when the key does not exist).
 * Returns FIXED_WINDOW_OK with *out set; FIXED_WINDOW_EARGS for bad
 * parameters, time or cost; FIXED_WINDOW_ESTATE for a negative stored
 * field. Nothing may be written on an error. */
int fixed_window_decide(const struct fixed_window_params *p,
                        const struct fixed_window_state *st, int64_t now_ns,
                        int64_t cost, struct fixed_window_result *out,
                        const char **err);

/* LIMITER ADJUST of `delta` units (|delta| <= 2^53 - 1) at now_ns on
 * `st` (NULL: no key), never refused. delta > 0 adds to the effective
 * window's count (a stale or missing window starts now's), saturating at
 * 2^53 - 1: the count may pass max (a debt the next window pays off);
 * written as a check's write. delta < 0 takes back from the effective
 * window's count, floored at 0 (a stale or missing window has nothing
 * to give back: no write); a count back at 0 is written with its
 * window's expiry (it decides like no key). delta 0 writes nothing.
 * out->d is fixed_window_decide()'s for cost 1 right after it. Errors as
 * fixed_window_decide's (the cost's none), nothing written. */
int fixed_window_adjust(const struct fixed_window_params *p,
                        const struct fixed_window_state *st, int64_t now_ns,
                        int64_t delta, struct fixed_window_result *out,
                        const char **err);

#endif /* PX_ALGORITHMS_FIXED_WINDOW_H */
