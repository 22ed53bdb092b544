/* Sliding window of time slots (@o1s/rate-limiter), as a pure function of
 * (parameters, stored slots, now, cost).
 *
 * Time is cut into slots of `resolution`, aligned to the Unix epoch: slot
 * k covers [k * resolution, (k + 1) * resolution). The window is the
 * N = window / resolution newest slots, the current one included, so slot
 * k counts until (k + N) * resolution and is then dropped. Each slot keeps
 * the count of what passed in it, and the total is their sum. A request
 * passes when total + cost <= max, and is counted in the current slot.
 *
 * Parameters (conf/limits.h struct limits_sliding_window):
 *   max            1 .. SLIDING_WINDOW_MAX_COUNT (2^53 - 1)
 *   window_ms      1 .. SLIDING_WINDOW_MAX_WINDOW_MS (3650 days), a
 *                  multiple of resolution_ms
 *   resolution_ms  >= 1, with window_ms / resolution_ms <=
 *                  SLIDING_WINDOW_MAX_SLOTS (3600)
 *
 * State: the slots still inside the window, (start_ns, count) with
 * count > 0, at most N of them, and their total. Input slots may come in
 * any order (HGETALL has none) and may hold expired, duplicate (the
 * resolution changed: starts fall into the same slot) or zero entries:
 * the model drops, merges and sorts them. The stored total is not read:
 * the slots are the truth, and the output total is their sum.
 *
 * Redis (the Lua twin, algorithms/lua/sliding_window.lua): one HASH per key,
 *   field <slot start in microseconds, decimal> = count, field "total" =
 *   the sum
 *   admission: the HASH becomes the `next` slots: HDEL the other fields
 *   (expired, empty, or off the slot grid after a resolution change), HSET
 *   the changed counts (the current slot's, merged ones) and total,
 *   PEXPIRE <key> <expiry_ms>
 * written only when a request passes with cost >= 1. The expiry is the time
 * until the newest slot leaves the window, rounded up to whole ms: then
 * every slot has expired and the key is worth nothing. Slot starts are
 * multiples of resolution_ms * 1000 us (start_ns is the field * 1000). The
 * twin refuses as malformed a slot field or count that is not a decimal
 * integer in 0 .. 2^53 - 1, and live counts that sum to 2^53 or more (legal
 * use keeps the sum at most max). A refund (another slot of the request
 * refused) takes the cost back from the slot its token names (the slot
 * start) while that slot is in the window, HDELs an emptied slot and
 * deletes a key left with "total" only. An ADJUST (sliding_window_adjust,
 * below) writes as an admission does, or deletes the key when it gives
 * back every live count.
 *
 * Reply fields (struct rl_decision):
 *   limited         1 when total + cost > max, or cost > max
 *   limit           max
 *   remaining       max - total after this request, at least 0
 *   retry_after_ns  when refused: the time until enough of the oldest
 *                   slots have left the window for `cost` to fit (exact,
 *                   it falls on a slot boundary); -1 s when allowed or when
 *                   cost > max (it can never pass)
 *   reset_after_ns  the time until the newest slot leaves the window (then
 *                   the total is 0); 0 when the total is 0
 * Durations that do not fit an int64 saturate at INT64_MAX.
 *
 * Cost 0 is a peek: it passes unless the total exceeds a lowered max, and
 * never writes. A refused request writes nothing (expired slots stay in
 * Redis until the next admission or the expiry; they count for nothing).
 *
 * Clock: the effective slot is the later of now's slot and the newest
 * stored slot. When a node's clock jumped back behind stored slots, nothing
 * expires until the clock passes them again, and a request that passes is
 * counted in that newest slot: a clock jump never empties the window early,
 * and the state never holds more than N slots.
 *
 * Leaf layer: libc only, no globals, no allocation: the caller provides
 * the output array. */
#ifndef PX_ALGORITHMS_SLIDING_WINDOW_H
#define PX_ALGORITHMS_SLIDING_WINDOW_H

#include <stddef.h>
#include <stdint.h>

#include "algorithms/rl.h"

#define SLIDING_WINDOW_OK     0
#define SLIDING_WINDOW_EARGS  -1 /* parameters, time, cost or buffer */
#define SLIDING_WINDOW_ESTATE -2 /* stored slots no decision can come from */

/* Largest max: conf/limits.h LIMITS_MAX_COUNT. */
#define SLIDING_WINDOW_MAX_COUNT INT64_C(9007199254740991)
/* Longest window, 3650 days: conf/limits.h LIMITS_MAX_DURATION_MS. */
#define SLIDING_WINDOW_MAX_WINDOW_MS INT64_C(315360000000)
/* Most slots per window: conf/limits.h LIMITS_MAX_SLOTS. */
#define SLIDING_WINDOW_MAX_SLOTS 3600

/* Error texts (static, lowercase, fit for "-ERR <text>"). */
#define SLIDING_WINDOW_ERR_MAX                                                 \
    "sliding_window max must be between 1 and 2^53 - 1"
#define SLIDING_WINDOW_ERR_WINDOW                                              \
    "sliding_window window must be between 1 ms and 3650 days"
#define SLIDING_WINDOW_ERR_RESOLUTION                                          \
    "sliding_window resolution must be at least 1 ms and divide the window"
#define SLIDING_WINDOW_ERR_SLOTS                                               \
    "sliding_window window / resolution must be at most 3600 slots"
#define SLIDING_WINDOW_ERR_TIME "sliding_window time must not be negative"
#define SLIDING_WINDOW_ERR_COST "sliding_window cost must not be negative"
#define SLIDING_WINDOW_ERR_DELTA                                               \
    "sliding_window delta must be between -(2^53 - 1) and 2^53 - 1"
#define SLIDING_WINDOW_ERR_BUFFER                                              \
    "sliding_window output buffer holds fewer than window / resolution slots"
#define SLIDING_WINDOW_ERR_STATE                                               \
    "sliding_window state is malformed (negative slot start or count, or "     \
    "counts whose sum does not fit)"

/* Validated parameters, durations in ns. */
struct sliding_window_params {
    int64_t max;           /* >= 1 */
    int64_t window_ns;     /* window_ms * 1e6 */
    int64_t resolution_ns; /* resolution_ms * 1e6, divides window_ns */
    int64_t nslots;        /* N = window / resolution, 1 .. 3600 */
};

/* One time slot. */
struct sliding_window_slot {
    int64_t start_ns; /* k * resolution, ns since the Unix epoch */
    int64_t count;    /* what passed in the slot */
};

/* What a store does after a decision. */
enum sliding_window_write {
    SLIDING_WINDOW_WRITE_NONE, /* leave the key as it is */
    SLIDING_WINDOW_WRITE_SET,  /* make the HASH the `next` slots and total,
                                  PEXPIRE expiry_ms */
    SLIDING_WINDOW_WRITE_DEL,  /* delete the key (an adjust gave back every
                                  live count) */
};

/* The outcome of sliding_window_decide(). The slots themselves are in the
 * caller's `next` array. */
struct sliding_window_result {
    struct rl_decision d;            /* the five integers, unrounded */
    enum sliding_window_write write; /* what to do with the key */
    size_t next_n;                   /* slots in next, oldest first, each
                                        count > 0, at most nslots */
    int64_t total;                   /* sum of the next slots */
    int64_t expiry_ms;               /* PEXPIRE when write is SET, >= 1 */
};

/* Fills *p from the conf units. Returns SLIDING_WINDOW_OK, or
 * SLIDING_WINDOW_EARGS with *err a static text. */
int sliding_window_params_init(struct sliding_window_params *p, int64_t max,
                               int64_t window_ms, int64_t resolution_ms,
                               const char **err);

/* The decision for a request of `cost` (>= 0; 0 peeks) at now_ns (>= 0)
 * against the n stored slots (any order; slots may be NULL when n is 0,
 * which is also a missing key). The slots after this decision (dropped,
 * merged, sorted, cost counted if it passed) are written to next[0 ..
 * out->next_n); next has room for next_cap >= p->nslots slots and must not
 * overlap `slots`. Returns SLIDING_WINDOW_OK with *out set;
 * SLIDING_WINDOW_EARGS for bad parameters, time, cost or next_cap;
 * SLIDING_WINDOW_ESTATE for a negative slot start or count, or counts
 * whose sum does not fit an int64. Nothing may be written on an error. */
int sliding_window_decide(const struct sliding_window_params *p,
                          const struct sliding_window_slot *slots, size_t n,
                          int64_t now_ns, int64_t cost,
                          struct sliding_window_slot *next, size_t next_cap,
                          struct sliding_window_result *out, const char **err);

/* LIMITER ADJUST: charges delta more units (delta > 0, never refused) or
 * gives back -delta (delta < 0) at now_ns, |delta| <= 2^53 - 1.
 *   delta > 0  the effective slot (as a check counts in) += delta: the
 *              total may pass max (debt: checks are refused until enough
 *              slots leave the window). The total stays at most 2^53 - 1
 *              (the twin refuses more as malformed): the excess is
 *              dropped.
 *   delta < 0  takes -delta from the live slots, newest first, each
 *              floored at 0: at most the total, never beyond a fresh
 *              state.
 *   delta 0    changes nothing.
 * Arguments, state, next and errors as for sliding_window_decide(). out->d
 * is what sliding_window_decide() with cost 1 (a PEEK) answers on the
 * state after the change; out->write is SET (the `next` slots, their total
 * and the expiry of the newest, as a check's), DEL when no live count is
 * left, NONE when nothing changed (delta 0, nothing to give back, or a
 * total already at 2^53 - 1). */
int sliding_window_adjust(const struct sliding_window_params *p,
                          const struct sliding_window_slot *slots, size_t n,
                          int64_t now_ns, int64_t delta,
                          struct sliding_window_slot *next, size_t next_cap,
                          struct sliding_window_result *out, const char **err);

#endif /* PX_ALGORITHMS_SLIDING_WINDOW_H */
