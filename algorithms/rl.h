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

#endif /* PX_ALGORITHMS_RL_H */
