/* Leaky bucket (Sharkey's SkRateLimiterService), as a pure function of
 * (parameters, stored state, now, cost).
 *
 * Every request pours `cost` into a bucket of `size`; the bucket drains by
 * whole drips: drip_size every drip_ms, at drip boundaries counted from the
 * first request that found it empty. A request passes when the level plus
 * its cost fits the size (so `size` requests of cost 1 pass at once, as in
 * Sharkey, whose counter blocks at counter >= size).
 *
 * Parameters (conf/limits.h struct limits_leaky_bucket):
 *   size       1 .. LEAKY_BUCKET_MAX_COUNT (2^53 - 1)
 *   drip_ms    milliseconds between drips, 1 .. LEAKY_BUCKET_MAX_DRIP_MS
 *              (3650 days)
 *   drip_size  drained per drip, 1 .. LEAKY_BUCKET_MAX_COUNT
 *
 * State:
 *   level  what is in the bucket after the last drip, >= 0
 *   ts_ns  the time of the last drip boundary (ns since the Unix epoch):
 *          drips fall at ts_ns + k * drip_ms. It only moves by whole drips,
 *          so draining in many small steps gives the state one big step
 *          gives. An empty bucket has no phase: the next request that
 *          passes starts the drip clock at its own time, exactly as when
 *          the key has expired (so expiry never changes a decision).
 *
 * Redis (the Lua twin, algorithms/lua/leaky_bucket.lua): one HASH per key,
 *   HSET <key> level <level> ts <ts in microseconds>   (decimal integers)
 *   PEXPIRE <key> <expiry_ms>
 * written only when a request passes with cost >= 1. The expiry is the time
 * until the bucket is empty (reset_after), rounded up to whole ms. The
 * store keeps microseconds (TIME has them, and drips are whole ms, so ts_ns
 * is ts * 1000 exactly); the twin refuses as malformed a field that is not
 * a decimal integer in 0 .. 2^53 - 1 (legal use never stores more). A
 * refund (another slot of the request refused) drains to now and takes the
 * cost back (level at least 0, an emptied key is deleted); its token is the
 * ts the check stored, and it does nothing once the stored ts is no longer
 * that ts plus whole drips (the bucket emptied and restarted).
 *
 * Reply fields (struct rl_decision), with Sharkey's meanings:
 *   limited         1 when level + cost > size, or cost > size
 *   limit           size
 *   remaining       size - level after this request, at least 0: what can
 *                   still be poured without being refused (Sharkey's
 *                   X-RateLimit-Remaining)
 *   retry_after_ns  when refused: the time until enough drips have fallen
 *                   for this cost to fit (Sharkey's X-RateLimit-Reset;
 *                   exact, it falls on a drip boundary); -1 s when allowed
 *                   or when cost > size (it can never pass)
 *   reset_after_ns  the time until the bucket is empty (Sharkey's
 *                   X-RateLimit-Clear); 0 when it is empty
 * Durations that do not fit an int64 saturate at INT64_MAX.
 *
 * Cost 0 is a peek: it passes unless the bucket is over-full (a size
 * lowered below the level) and never writes. A refused request writes
 * nothing.
 *
 * Clock: when now is behind ts_ns (a node's clock jumped back) nothing
 * drains; drips resume at ts_ns + drip_ms of the stored clock, and both
 * durations include that gap. A level above a lowered size stays and
 * drains normally: requests are refused until it fits. So does a level
 * LIMITER ADJUST poured beyond the size (leaky_bucket_adjust): a debt.
 *
 * Leaf layer: libc only, no globals. */
#ifndef PX_ALGORITHMS_LEAKY_BUCKET_H
#define PX_ALGORITHMS_LEAKY_BUCKET_H

#include <stdint.h>

#include "algorithms/rl.h"

#define LEAKY_BUCKET_OK     0
#define LEAKY_BUCKET_EARGS  -1 /* parameters, time or cost out of range */
#define LEAKY_BUCKET_ESTATE -2 /* a stored state no decision can come from */

/* Largest size and drip_size: conf/limits.h LIMITS_MAX_COUNT. */
#define LEAKY_BUCKET_MAX_COUNT INT64_C(9007199254740991)
/* Longest drip, 3650 days: conf/limits.h LIMITS_MAX_DURATION_MS. */
#define LEAKY_BUCKET_MAX_DRIP_MS INT64_C(315360000000)

/* Error texts (static, lowercase, fit for "-ERR <text>"). */
#define LEAKY_BUCKET_ERR_SIZE "leaky_bucket size must be between 1 and 2^53 - 1"
#define LEAKY_BUCKET_ERR_DRIP_MS                                               \
    "leaky_bucket drip_ms must be between 1 and 315360000000 (3650 days)"
#define LEAKY_BUCKET_ERR_DRIP_SIZE                                             \
    "leaky_bucket drip_size must be between 1 and 2^53 - 1"
#define LEAKY_BUCKET_ERR_TIME "leaky_bucket time must not be negative"
#define LEAKY_BUCKET_ERR_COST "leaky_bucket cost must not be negative"
#define LEAKY_BUCKET_ERR_STATE                                                 \
    "leaky_bucket state is malformed (negative level or time)"
#define LEAKY_BUCKET_ERR_DELTA                                                 \
    "leaky_bucket adjustment must be between -(2^53 - 1) and 2^53 - 1"

/* Validated parameters, durations in ns. */
struct leaky_bucket_params {
    int64_t size;      /* >= 1 */
    int64_t drip_ns;   /* drip_ms * 1e6, >= 1 ms */
    int64_t drip_size; /* >= 1 */
};

/* The stored state (see the file comment). */
struct leaky_bucket_state {
    int64_t level; /* >= 0 */
    int64_t ts_ns; /* the last drip boundary, ns since the epoch */
};

/* What a store does after a decision. */
enum leaky_bucket_write {
    LEAKY_BUCKET_WRITE_NONE, /* leave the key as it is */
    LEAKY_BUCKET_WRITE_SET,  /* HSET the fields of next, PEXPIRE expiry_ms */
};

/* The outcome of leaky_bucket_decide(). */
struct leaky_bucket_result {
    struct rl_decision d;           /* the five integers, before rounding */
    enum leaky_bucket_write write;  /* what to do with the key */
    struct leaky_bucket_state next; /* the state after this decision
                                       (drained, cost poured if it passed);
                                       stored only when write is SET */
    int64_t expiry_ms;              /* PEXPIRE when write is SET, >= 1 */
};

/* Fills *p from the conf units. Returns LEAKY_BUCKET_OK, or
 * LEAKY_BUCKET_EARGS with *err a static text. */
int leaky_bucket_params_init(struct leaky_bucket_params *p, int64_t size,
                             int64_t drip_ms, int64_t drip_size,
                             const char **err);

/* The decision for a request of `cost` (>= 0; 0 peeks) at now_ns (>= 0)
 * against the stored state `st` (NULL when the key does not exist).
 * Returns LEAKY_BUCKET_OK with *out set; LEAKY_BUCKET_EARGS for bad
 * parameters, time or cost; LEAKY_BUCKET_ESTATE for a negative stored
 * field. Nothing may be written on an error. */
int leaky_bucket_decide(const struct leaky_bucket_params *p,
                        const struct leaky_bucket_state *st, int64_t now_ns,
                        int64_t cost, struct leaky_bucket_result *out,
                        const char **err);

/* leaky_bucket_decide with WAIT (wait_ns >= 0; 0: none): a request that
 * would be refused but is due within wait_ns (retry_after <= wait_ns, to
 * the ns) is reserved: poured now (the level may pass the size) and
 * written, and out->d says limited with that retry_after (the time the
 * reply is held), remaining 0 and reset_after the time to empty after
 * the pour. One ns beyond the wait it is refused as without WAIT,
 * nothing written. */
int leaky_bucket_decide_wait(const struct leaky_bucket_params *p,
                             const struct leaky_bucket_state *st,
                             int64_t now_ns, int64_t cost, int64_t wait_ns,
                             struct leaky_bucket_result *out, const char **err);

/* LIMITER ADJUST: `delta` (|delta| <= 2^53 - 1) more poured at now_ns
 * (delta > 0: never refused, the level may pass the size, a debt the
 * drips pay back, up to 2^53 - 1), or -delta taken out (delta < 0: down to
 * empty at most). out->d is what a peek of cost 1 answers after the
 * change; out->next the state (drained to now, then adjusted), written
 * (SET, expiring when empty; at least 1 ms: an emptied bucket equals no
 * key) unless nothing changed (delta 0, an empty bucket given back:
 * NONE). Errors as leaky_bucket_decide's, and EARGS for a delta out of
 * range. */
int leaky_bucket_adjust(const struct leaky_bucket_params *p,
                        const struct leaky_bucket_state *st, int64_t now_ns,
                        int64_t delta, struct leaky_bucket_result *out,
                        const char **err);

#endif /* PX_ALGORITHMS_LEAKY_BUCKET_H */
