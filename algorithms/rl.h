/* The one reply shape of every limiter algorithm: redis-cell's five integers
 * [limited, limit, remaining, retry_after_s, reset_after_s].
 *
 * Algorithms work in integer nanoseconds and fill a struct rl_decision; the
 * conversion to whole seconds (redis-cell's rounding) happens once, here.
 * Leaf layer: libc only. */
#ifndef PX_ALGORITHMS_RL_H
#define PX_ALGORITHMS_RL_H

#include <stdint.h>

#define RL_NS_PER_MS  INT64_C(1000000)
#define RL_NS_PER_SEC INT64_C(1000000000)

/* The outcome of one check, before rounding to seconds. */
struct rl_decision {
    int limited;            /* 1 when the request is refused */
    int64_t limit;          /* the most the identity may do at once */
    int64_t remaining;      /* what is left after this request */
    int64_t retry_after_ns; /* -1 s when allowed or never possible */
    int64_t reset_after_ns; /* until the state is back to full */
};

/* Seconds for a duration as redis-cell reports them: whole seconds, plus one
 * when the sub-second part is at least 1 ms (so -1 s stays -1). */
int64_t rl_seconds(int64_t ns);

/* The five reply integers of `d`, seconds rounded by rl_seconds(). */
void rl_reply_ints(const struct rl_decision *d, int64_t out[5]);

/* Milliseconds for a duration of LIMITER CHECK|PEEK ... MS: rounded up to
 * the next whole millisecond (a client that waits that long is never
 * early), and any negative duration (-1 s: admitted, or never possible)
 * is -1, as in the seconds form. */
int64_t rl_ms(int64_t ns);

/* The five reply integers of `d` with retry_after and reset_after in
 * milliseconds (rl_ms); the other three as rl_reply_ints. */
void rl_reply_ints_ms(const struct rl_decision *d, int64_t out[5]);

/* ---------------- Arithmetic shared by the algorithms ---------------- */

/* a + b for b >= 0, saturating at INT64_MAX. */
int64_t rl_add_sat(int64_t a, int64_t b);

/* Whole milliseconds of an expiry, rounded up (ns >= 0): a key must not
 * vanish before its state stops mattering. */
int64_t rl_ceil_ms(int64_t ns);

/* floor((a * b + c) / d) for a, b, c >= 0 and d > 0, computed in 128 bits
 * (products reach 2^113), with the remainder in *rem when rem is not NULL.
 * A quotient above INT64_MAX saturates to INT64_MAX (*rem is then 0):
 * "more than any int64 can say". */
int64_t rl_muladd_div(int64_t a, int64_t b, int64_t c, int64_t d, int64_t *rem);

#endif /* PX_ALGORITHMS_RL_H */
