/* The limiter aggregate (see limiter_aggregate.h).
 *
 * A LIMITER path has levels ("org:acme/user:42": the org, then the user),
 * each with limits, each decided on its own by its algorithm (in the
 * process, or by limiter.lua on the nodes). The caller sees one reply, in
 * redis-cell's shape: the most restrictive limit decides it. These
 * functions are that rule, in one place, shared by both stores' paths and
 * unit tested (tests/unit/test_limiter_aggregate.c). */
#include "proxy/limiter/limiter_aggregate.h"

#include "proxy/limiter/store.h"

void limiter_aggregate(const struct rl_decision *res, unsigned n,
                       struct rl_decision *out)
{
    unsigned i, best = 0;
    int never = 0;

    *out = res[0];
    out->limited = 0;
    out->retry_after_ns = -RL_NS_PER_SEC;
    for (i = 0; i < n; i++) {
        const struct rl_decision *d = &res[i];
        if (d->remaining < res[best].remaining ||
            (d->remaining == res[best].remaining &&
             d->reset_after_ns > res[best].reset_after_ns)) {
            best = i;
        }
        if (d->limited) {
            /* A limit the request can never pass (retry -1) outweighs
             * any wait: waiting would not help. */
            if (!out->limited ||
                (never == 0 && (d->retry_after_ns < 0 ||
                                d->retry_after_ns > out->retry_after_ns))) {
                out->retry_after_ns = d->retry_after_ns;
            }
            never |= d->retry_after_ns < 0;
            out->limited = 1;
        }
        if (d->reset_after_ns > out->reset_after_ns) {
            out->reset_after_ns = d->reset_after_ns;
        }
    }
    out->limit = res[best].limit;
    out->remaining = res[best].remaining;
}

int64_t limiter_aggregate_wait_delay(const struct rl_decision *res, unsigned n,
                                     int64_t wait_ns)
{
    int64_t delay = 0;
    unsigned i;

    for (i = 0; i < n; i++) {
        const struct rl_decision *d = &res[i];
        if (!d->limited) {
            continue;
        }
        if (d->retry_after_ns < 0 || d->retry_after_ns > wait_ns) {
            return -1;
        }
        if (d->retry_after_ns > delay) {
            delay = d->retry_after_ns;
        }
    }
    return delay;
}

int64_t limiter_aggregate_check(struct rl_decision *res,
                                const struct rl_decision *peek,
                                const struct store_limit *lim, unsigned n,
                                int64_t wait_ns, int64_t v[5])
{
    struct rl_decision agg;
    int64_t delay;
    unsigned i;
    int limited = 0;

    for (i = 0; i < n; i++) {
        limited |= res[i].limited;
    }
    delay = limited && wait_ns > 0
                ? limiter_aggregate_wait_delay(res, n, wait_ns)
                : -1;
    if (delay >= 0) {
        limiter_aggregate(res, n, &agg);
        for (i = 0; i < n; i++) {
            int64_t reset = res[i].reset_after_ns;
            if (res[i].limited &&
                !__builtin_add_overflow(reset, lim[i].p.inc_ns, &reset) &&
                reset > agg.reset_after_ns) {
                agg.reset_after_ns = reset;
            }
        }
        agg.limited = 0;
        agg.remaining = 0;
        agg.retry_after_ns = -RL_NS_PER_SEC;
        rl_reply_ints(&agg, v);
        return delay;
    }
    if (limited) {
        for (i = 0; i < n; i++) {
            if (!res[i].limited) {
                res[i] = peek[i];
            }
        }
    }
    limiter_aggregate(res, n, &agg);
    rl_reply_ints(&agg, v);
    return -1;
}
