/* Sliding log (a sorted set of timestamps), as a pure function of
 * (parameters, stored log, now, cost).
 *
 * The log holds one timestamp per unit of cost. An entry counts while it is
 * younger than the window: entry t is live at now when t > now - window. A
 * request of `cost` passes when
 *   live + cost <= max, and
 *   min_interval is 0, or now - (the newest entry) >= min_interval,
 * and then logs `cost` entries at now.
 *
 * Refused attempts are logged too (cost entries at now): a client that
 * keeps hammering keeps the log full and its newest entry fresh, so it
 * stays limited until it pauses. Precisely:
 *   - a refused request with 1 <= cost <= max logs cost entries at now;
 *   - a request that can never pass (cost > max) is refused without being
 *     logged, like an invalid argument: logging it would lock the identity
 *     out for a whole window over a request that was never possible;
 *   - a peek (cost 0) is never refused by min_interval and logs nothing.
 * min_interval is measured from the newest logged entry, admitted or not.
 *
 * Bounded memory: entries older than the horizon H = max(window,
 * min_interval) are dropped (they decide nothing), and the log keeps only
 * its `max` newest entries. So it never holds more than `max` (at most
 * SLIDING_LOG_MAX_ENTRIES = 100000) entries, whatever a client does. The
 * cap never drops a live entry on an admission (live + cost <= max); on a
 * refusal it forgets the oldest attempts, which only the newest `max`
 * could keep limited anyway.
 *
 * Parameters (conf/limits.h struct limits_sliding_log):
 *   max              1 .. SLIDING_LOG_MAX_ENTRIES
 *   window_ms        1 .. SLIDING_LOG_MAX_DURATION_MS (3650 days)
 *   min_interval_ms  0 .. SLIDING_LOG_MAX_DURATION_MS, default 0
 *
 * State: the timestamps, sorted ascending (equal ones allowed), ns since
 * the Unix epoch. Input in any other order is refused (a ZSET is sorted).
 *
 * Redis (the Lua twin, algorithms/lua/sliding_log.lua): one ZSET per key,
 *   score  the timestamp in microseconds (exact in a double: TIME has
 *          microseconds, and 2^53 us lasts until the year 2255)
 *   member "<timestamp in us>:<L><j>", j = 1, 2, ... making the members of
 *          one timestamp distinct (the twin takes j above the largest
 *          stored for that timestamp), L the letter of j's digit count
 *          ('a' for 1 digit, 'b' for 2, ...), so that they sort by j
 *   on a write: ZREMRANGEBYSCORE key -inf <now - H> (inclusive), ZADD the
 *   added entries (those the cap keeps), ZREMRANGEBYRANK key 0 -(max + 1),
 *   PEXPIRE key <expiry_ms>
 * written when cost >= 1 and cost <= max (admitted or refused). The expiry
 * is reset_after rounded up to whole ms: by then every entry is older than
 * the horizon and the log decides nothing. The twin refuses as malformed a
 * score that is not an integer in 0 .. 2^53 - 1. A refund of an admission
 * (another slot of the request refused) removes up to cost entries at the
 * timestamp its token names (entries of one timestamp are
 * interchangeable; an admission never caps a live entry away); refused
 * attempts stay logged. An ADJUST (sliding_log_adjust, below) writes as a
 * check does (the same drop, members and cap), or removes the newest
 * entries (ZREMRANGEBYRANK) and sets the expiry of the newest left.
 *
 * Reply fields (struct rl_decision):
 *   limited         1 when refused (count, min_interval, or cost > max)
 *   limit           max
 *   remaining       max - live entries after this request (the refused
 *                   attempt's own entries included), at least 0
 *   retry_after_ns  when refused: the time until the same request would
 *                   pass against the log as it is after this one (its own
 *                   entries included), if nothing else arrives: the later
 *                   of newest + min_interval and the moment enough old
 *                   entries have left the window; exact to the ns. -1 s
 *                   when allowed or when cost > max (it can never pass)
 *   reset_after_ns  the time until the newest entry is older than the
 *                   horizon (then the key is as good as missing); 0 for an
 *                   empty log
 * Durations that do not fit an int64 saturate at INT64_MAX.
 *
 * Clock: entries from the future (a node's clock jumped back) are live and
 * are the newest entry for min_interval, so a clock jump never opens the
 * limit; new entries are logged at the (earlier) now, in order, and the
 * durations include the jump.
 *
 * Leaf layer: libc only, no globals, no allocation: the caller provides
 * the output array. */
#ifndef PX_ALGORITHMS_SLIDING_LOG_H
#define PX_ALGORITHMS_SLIDING_LOG_H

#include <stddef.h>
#include <stdint.h>

#include "algorithms/rl.h"

#define SLIDING_LOG_OK     0
#define SLIDING_LOG_EARGS  -1 /* parameters, time, cost or buffer */
#define SLIDING_LOG_ESTATE -2 /* a stored log no decision can come from */

/* Most entries of one log: conf/limits.h LIMITS_MAX_LOG_ENTRIES. */
#define SLIDING_LOG_MAX_ENTRIES 100000
/* Longest window and min_interval, 3650 days: LIMITS_MAX_DURATION_MS. */
#define SLIDING_LOG_MAX_DURATION_MS INT64_C(315360000000)

/* Error texts (static, lowercase, fit for "-ERR <text>"). */
#define SLIDING_LOG_ERR_MAX "sliding_log max must be between 1 and 100000"
#define SLIDING_LOG_ERR_WINDOW                                                 \
    "sliding_log window must be between 1 ms and 3650 days"
#define SLIDING_LOG_ERR_INTERVAL                                               \
    "sliding_log min_interval must be between 0 and 3650 days"
#define SLIDING_LOG_ERR_TIME "sliding_log time must not be negative"
#define SLIDING_LOG_ERR_COST "sliding_log cost must not be negative"
#define SLIDING_LOG_ERR_DELTA                                                  \
    "sliding_log delta must be between -(2^53 - 1) and 2^53 - 1"
#define SLIDING_LOG_ERR_BUFFER                                                 \
    "sliding_log output buffer holds fewer than max entries"
#define SLIDING_LOG_ERR_STATE                                                  \
    "sliding_log state is malformed (negative or unsorted timestamps)"

/* Validated parameters, durations in ns. */
struct sliding_log_params {
    int64_t max;             /* 1 .. SLIDING_LOG_MAX_ENTRIES */
    int64_t window_ns;       /* window_ms * 1e6 */
    int64_t min_interval_ns; /* min_interval_ms * 1e6, >= 0 */
    int64_t horizon_ns;      /* max(window, min_interval) */
};

/* What a store does after a decision. */
enum sliding_log_write {
    SLIDING_LOG_WRITE_NONE, /* leave the key as it is */
    SLIDING_LOG_WRITE_SET,  /* make the ZSET the `next` entries (see the
                               file comment), PEXPIRE expiry_ms */
    SLIDING_LOG_WRITE_DEL,  /* delete the key (an adjust gave back every
                               entry) */
};

/* The outcome of sliding_log_decide(). The entries are in the caller's
 * `next` array. */
struct sliding_log_result {
    struct rl_decision d;         /* the five integers, before rounding */
    enum sliding_log_write write; /* what to do with the key */
    size_t next_n;                /* entries in next, sorted, <= max */
    int64_t added;                /* entries this request added at now,
                                     before the cap at max */
    int64_t expiry_ms;            /* PEXPIRE when write is SET, >= 1 */
};

/* Fills *p from the conf units. Returns SLIDING_LOG_OK, or
 * SLIDING_LOG_EARGS with *err a static text. */
int sliding_log_params_init(struct sliding_log_params *p, int64_t max,
                            int64_t window_ms, int64_t min_interval_ms,
                            const char **err);

/* The decision for a request of `cost` (>= 0; 0 peeks) at now_ns (>= 0)
 * against the n stored timestamps in `log` (sorted ascending; log may be
 * NULL when n is 0, which is also a missing key). The log after this
 * decision (pruned, this request's entries added, capped at max) is
 * written to next[0 .. out->next_n); when write is NONE that is the
 * pruned log capped at max, for information. next has room for next_cap
 * >= max entries and must not overlap `log`. Returns SLIDING_LOG_OK with
 * *out set; SLIDING_LOG_EARGS for bad parameters, time, cost or next_cap;
 * SLIDING_LOG_ESTATE for a negative or out-of-order timestamp. Nothing
 * may be written on an error. */
int sliding_log_decide(const struct sliding_log_params *p, const int64_t *log,
                       size_t n, int64_t now_ns, int64_t cost, int64_t *next,
                       size_t next_cap, struct sliding_log_result *out,
                       const char **err);

/* LIMITER ADJUST: charges delta more units (delta > 0, never refused) or
 * gives back -delta (delta < 0) at now_ns, |delta| <= 2^53 - 1. The log
 * is first pruned to the horizon, as a check's write prunes it.
 *   delta > 0  logs min(delta, max) entries at now, as an admitted check
 *              of that cost would (entries from the future stay newer),
 *              and keeps the max newest: the debt is at most a full
 *              window. The newest entry moves to now, so min_interval
 *              counts from the adjust as from a request: the work it
 *              charges for was done.
 *   delta < 0  removes the -delta newest entries (whatever their
 *              timestamps; older ones, kept only for min_interval,
 *              too), never more than the log holds; then caps at max.
 *   delta 0    changes nothing.
 * Arguments, state, next and errors as for sliding_log_decide() (delta
 * for cost). out->d is what sliding_log_decide() with cost 1 (a PEEK)
 * answers on the log after the change; out->write is SET (the `next`
 * entries, PEXPIRE until the newest leaves the horizon), DEL when no entry
 * is left, NONE when nothing changed (delta 0, or nothing to give back);
 * out->added is the entries logged at now before the cap. */
int sliding_log_adjust(const struct sliding_log_params *p, const int64_t *log,
                       size_t n, int64_t now_ns, int64_t delta, int64_t *next,
                       size_t next_cap, struct sliding_log_result *out,
                       const char **err);

#endif /* PX_ALGORITHMS_SLIDING_LOG_H */
