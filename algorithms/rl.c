/* Reply-shape helpers shared by every algorithm (see rl.h). */
#include "algorithms/rl.h"

int64_t rl_seconds(int64_t ns)
{
    int64_t s = ns / RL_NS_PER_SEC;
    int64_t frac = ns % RL_NS_PER_SEC;

    /* redis-cell rounds a positive remainder of at least 1 ms up; C's `%`
     * keeps the sign of `ns`, so -1 s (no remainder) stays -1. */
    if (frac >= RL_NS_PER_MS) {
        s++;
    }
    return s;
}

void rl_reply_ints(const struct rl_decision *d, int64_t out[5])
{
    out[0] = d->limited ? 1 : 0;
    out[1] = d->limit;
    out[2] = d->remaining;
    out[3] = rl_seconds(d->retry_after_ns);
    out[4] = rl_seconds(d->reset_after_ns);
}
