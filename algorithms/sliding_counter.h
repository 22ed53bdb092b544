/* Sliding window counter (current window plus the weighted previous one),
 * as a pure function of (parameters, stored state, now, cost).
 *
 * Windows are aligned to the Unix epoch as in fixed_window. The estimate
 * of what passed in the last `window` is
 *
 *   estimate = count + prev * (window - elapsed) / window
 *
 * where count is the current window's count, prev the previous window's,
 * and elapsed = now - start of the current window: the previous window is
 * weighted by the part of it still inside the sliding window. A request
 * passes when estimate + cost <= max.
 *
 * Rounding: the weighted previous count is rounded up,
 *   weighted = ceil(prev * (window - elapsed) / window),
 * which makes the integer test count + weighted + cost <= max exactly the
 * real-number test (for integers a, x: a + x <= max iff a + ceil(x) <=
 * max). Nothing is ever admitted that the exact formula would refuse, and
 * remaining = max - count - weighted is the floor of the exact room.
 *
 * Parameters (conf/limits.h struct limits_sliding_counter):
 *   max        1 .. SLIDING_COUNTER_MAX_COUNT (2^53 - 1)
 *   window_ms  1 .. SLIDING_COUNTER_MAX_WINDOW_MS (3650 days)
 *
 * State:
 *   start_ns  the start of the window `count` belongs to (ns since the
 *             Unix epoch, a multiple of the window)
 *   count     what passed in that window
 *   prev      what passed in the window before it
 * When now is one window later, count becomes prev and count starts at 0;
 * later still, both are 0. A stored start between those (the window length
 * changed) counts as the previous window.
 *
 * Redis (the Lua twin, algorithms/lua/sliding_counter.lua): one HASH per
 * key,
 *   HSET <key> start <start_us> count <count> prev <prev>
 *   PEXPIRE <key> <expiry_ms>
 * written only when a request passes with cost >= 1. Times are whole
 * microseconds there (Redis's TIME has no finer unit): start_ns =
 * start_us * 1000. The expiry is the end of the window after the current
 * one (until then the count still weighs as prev), rounded up to whole ms.
 * The product prev * (window - elapsed) reaches 2^101 in microseconds, and
 * the retry's room * window reaches 2^112 in ns: the twin forms them from
 * split integers (algorithms/lua/xint.lua), as the C model does with 32-bit
 * halves, and replies with the durations floored to microseconds. Its undo
 * token is the start (us) of the window a check counted in: a refund takes
 * the cost back from that window's count (not below 0; the key goes when
 * nothing is counted in now's own window nor before it) while it is the
 * stored one, and does nothing otherwise.
 *
 * Reply fields (struct rl_decision):
 *   limited         1 when count + weighted + cost > max, or cost > max
 *   limit           max
 *   remaining       max - count - weighted after this request, at least 0
 *   retry_after_ns  when refused: the least time after which the estimate
 *                   leaves room for `cost` (exact to the ns, given no other
 *                   request: either while prev fades in this window, or
 *                   while count fades as prev in the next one); -1 s when
 *                   allowed or when cost > max (it can never pass)
 *   reset_after_ns  the time until the estimate is 0: the end of the next
 *                   window when count > 0, the end of this one when only
 *                   prev > 0, else 0
 * Durations that do not fit an int64 saturate at INT64_MAX.
 *
 * Cost 0 is a peek: it passes unless the estimate exceeds a lowered max,
 * and never writes. A refused request writes nothing.
 *
 * Clock: a stored window that starts after the current one (a node's clock
 * jumped back) stays the effective window; until the clock reaches its
 * start, the previous window weighs fully and durations run to that
 * window's end. A clock jump never opens a fresh window early.
 *
 * Leaf layer: libc only, no globals. */
#ifndef PX_ALGORITHMS_SLIDING_COUNTER_H
#define PX_ALGORITHMS_SLIDING_COUNTER_H

#include <stdint.h>

#include "algorithms/rl.h"

#define SLIDING_COUNTER_OK    0
#define SLIDING_COUNTER_EARGS -1 /* parameters, time or cost out of range */
#define SLIDING_COUNTER_ESTATE                                                 \
    -2 /* a stored state no decision can come from                             \
        */

/* Largest max: conf/limits.h LIMITS_MAX_COUNT. */
#define SLIDING_COUNTER_MAX_COUNT INT64_C(9007199254740991)
/* Longest window, 3650 days: conf/limits.h LIMITS_MAX_DURATION_MS. */
#define SLIDING_COUNTER_MAX_WINDOW_MS INT64_C(315360000000)

/* Error texts (static, lowercase, fit for "-ERR <text>"). */
#define SLIDING_COUNTER_ERR_MAX                                                \
    "sliding_counter max must be between 1 and 2^53 - 1"
#define SLIDING_COUNTER_ERR_WINDOW                                             \
    "sliding_counter window must be between 1 ms and 3650 days"
#define SLIDING_COUNTER_ERR_TIME "sliding_counter time must not be negative"
#define SLIDING_COUNTER_ERR_COST "sliding_counter cost must not be negative"
#define SLIDING_COUNTER_ERR_STATE                                              \
    "sliding_counter state is malformed (negative or too large field)"

/* Validated parameters, durations in ns. */
struct sliding_counter_params {
    int64_t max;       /* >= 1 */
    int64_t window_ns; /* window_ms * 1e6 */
};

/* The stored state (see the file comment). */
struct sliding_counter_state {
    int64_t start_ns; /* start of the window of count */
    int64_t count;    /* counted in it, >= 0 */
    int64_t prev;     /* counted in the window before, >= 0 */
};

/* What a store does after a decision. */
enum sliding_counter_write {
    SLIDING_COUNTER_WRITE_NONE, /* leave the key as it is */
    SLIDING_COUNTER_WRITE_SET,  /* HSET the fields of next, PEXPIRE */
};

/* The outcome of sliding_counter_decide(). */
struct sliding_counter_result {
    struct rl_decision d;              /* the five integers, unrounded */
    enum sliding_counter_write write;  /* what to do with the key */
    struct sliding_counter_state next; /* the effective window after this
                                          decision (rolled over, cost
                                          counted if it passed); stored only
                                          when write is SET */
    int64_t expiry_ms;                 /* PEXPIRE when write is SET, >= 1 */
    int64_t weighted;                  /* ceil(prev * (window - elapsed) /
                                          window), for the curious */
};

/* Fills *p from the conf units. Returns SLIDING_COUNTER_OK, or
 * SLIDING_COUNTER_EARGS with *err a static text. */
int sliding_counter_params_init(struct sliding_counter_params *p, int64_t max,
                                int64_t window_ms, const char **err);

/* The decision for a request of `cost` (>= 0; 0 peeks) at now_ns (>= 0)
 * against the stored state `st` (NULL when the key does not exist).
 * Returns SLIDING_COUNTER_OK with *out set; SLIDING_COUNTER_EARGS for bad
 * parameters, time or cost; SLIDING_COUNTER_ESTATE for a negative stored
 * field, or counts whose sum does not fit an int64. Nothing may be written
 * on an error. */
int sliding_counter_decide(const struct sliding_counter_params *p,
                           const struct sliding_counter_state *st,
                           int64_t now_ns, int64_t cost,
                           struct sliding_counter_result *out,
                           const char **err);

/* LIMITER ADJUST of `delta` units (|delta| <= 2^53 - 1) at now_ns on
 * `st` (NULL: no key), never refused: the current window's count, as
 * fixed_window_adjust() (the state rolled to now's window first; the
 * previous window's count is never touched). delta > 0 adds, saturating
 * at 2^53 - 1; delta < 0 takes back, floored at 0. Written (HSET of the
 * three fields, PEXPIRE as a check's: the end of the next window, or of
 * this one when count is 0) whenever the count changes; delta 0 writes
 * nothing. out->d is sliding_counter_decide()'s for cost 1 right after
 * it. Errors as sliding_counter_decide's, nothing written. */
int sliding_counter_adjust(const struct sliding_counter_params *p,
                           const struct sliding_counter_state *st,
                           int64_t now_ns, int64_t delta,
                           struct sliding_counter_result *out,
                           const char **err);

#endif /* PX_ALGORITHMS_SLIDING_COUNTER_H */
