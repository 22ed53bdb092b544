/* The limiter aggregate (see limiter_aggregate.h).
 *
 * A LIMITER path has levels ("org:acme/user:42": the org, then the user),
 * each with limits, each decided on its own by its algorithm (in the
 * process, or by limiter.lua on the nodes). The caller sees one reply, in
 * redis-cell's shape: the most restrictive limit decides it. These
 * functions are that rule, in one place, shared by both stores' paths and
 * unit tested (tests/unit/test_limiter_aggregate.c).
 *
 * Shadow levels (lim[i].shadow) are left out of the reply: the check
 * answers what its real levels alone answer, so adding a shadow level to a
 * path changes no reply. Only a path of shadow levels alone answers from
 * them, always admitted. */
#include "proxy/limiter/limiter_aggregate.h"

#include "proxy/limiter/store.h"

/* Whether limit i counts toward the reply: every limit without `lim`, else
 * the real (not shadow) ones. */
static int limiter_aggregate_real(const struct store_limit *lim, unsigned i)
{
    return lim == NULL || !lim[i].shadow;
}

/* limiter_aggregate over the limits limiter_aggregate_real selects (at
 * least one). */
static void limiter_aggregate_sel(const struct rl_decision *res,
                                  const struct store_limit *lim, unsigned n,
                                  struct rl_decision *out)
{
    unsigned i, best = n;
    int never = 0;

    for (i = 0; i < n; i++) {
        const struct rl_decision *d = &res[i];
        if (!limiter_aggregate_real(lim, i)) {
            continue;
        }
        if (best == n) {
            best = i;
            *out = res[i];
            out->limited = 0;
            out->retry_after_ns = -RL_NS_PER_SEC;
        }
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

void limiter_aggregate(const struct rl_decision *res, unsigned n,
                       struct rl_decision *out)
{
    limiter_aggregate_sel(res, NULL, n, out);
}

/* limiter_aggregate_wait_delay over the selected limits. */
static int64_t limiter_aggregate_delay_sel(const struct rl_decision *res,
                                           const struct store_limit *lim,
                                           unsigned n, int64_t wait_ns)
{
    int64_t delay = 0;
    unsigned i;

    for (i = 0; i < n; i++) {
        const struct rl_decision *d = &res[i];
        if (!d->limited || !limiter_aggregate_real(lim, i)) {
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

int64_t limiter_aggregate_wait_delay(const struct rl_decision *res, unsigned n,
                                     int64_t wait_ns)
{
    return limiter_aggregate_delay_sel(res, NULL, n, wait_ns);
}

/* Whether a real limit refused. */
static int limiter_aggregate_limited(const struct rl_decision *res,
                                     const struct store_limit *lim, unsigned n)
{
    unsigned i;

    for (i = 0; i < n; i++) {
        if (res[i].limited && limiter_aggregate_real(lim, i)) {
            return 1;
        }
    }
    return 0;
}

int limiter_aggregate_refunds(const struct rl_decision *res,
                              const struct store_limit *lim, unsigned n,
                              int64_t wait_ns)
{
    return limiter_aggregate_limited(res, lim, n) &&
           (wait_ns == 0 ||
            limiter_aggregate_delay_sel(res, lim, n, wait_ns) < 0);
}

unsigned limiter_aggregate_shadow_limited(const struct store_limit *lim,
                                          unsigned n)
{
    uint64_t levels = 0;
    unsigned i, count = 0;

    for (i = 0; i < n; i++) {
        if (lim[i].shadow_limited && (levels >> lim[i].level & 1) == 0) {
            levels |= UINT64_C(1) << lim[i].level;
            count++;
        }
    }
    return count;
}

/* The reply of a path of shadow levels only: admitted, the levels as the
 * check left them (a level that refused took nothing: its limits that
 * admitted show their state without the cost). */
static void limiter_aggregate_shadow_only(struct rl_decision *res,
                                          const struct rl_decision *peek,
                                          const struct store_limit *lim,
                                          unsigned n, struct rl_decision *out)
{
    unsigned i;

    for (i = 0; i < n; i++) {
        if (lim[i].shadow_limited && !res[i].limited) {
            res[i] = peek[i];
        }
    }
    limiter_aggregate_sel(res, NULL, n, out);
    out->limited = 0;
    out->retry_after_ns = -RL_NS_PER_SEC;
}

/* The real limit that binds: among refusing ones the one retry_after
 * comes from (one the request can never pass first, else the longest
 * wait); with none refusing, the most restrictive (the least remaining,
 * on a tie the longest reset_after). n when every limit is shadow. */
static unsigned limiter_aggregate_bind(const struct rl_decision *res,
                                       const struct store_limit *lim,
                                       unsigned n)
{
    unsigned i, best = n, refuser = n;

    for (i = 0; i < n; i++) {
        const struct rl_decision *d = &res[i];
        if (!limiter_aggregate_real(lim, i)) {
            continue;
        }
        if (best == n || d->remaining < res[best].remaining ||
            (d->remaining == res[best].remaining &&
             d->reset_after_ns > res[best].reset_after_ns)) {
            best = i;
        }
        if (d->limited &&
            (refuser == n ||
             (res[refuser].retry_after_ns >= 0 &&
              (d->retry_after_ns < 0 ||
               d->retry_after_ns > res[refuser].retry_after_ns)))) {
            refuser = i;
        }
    }
    return refuser != n ? refuser : best;
}

int64_t limiter_aggregate_check(struct rl_decision *res,
                                const struct rl_decision *peek,
                                const struct store_limit *lim, unsigned n,
                                int64_t wait_ns, int64_t v[5])
{
    struct rl_decision agg;
    int64_t delay;

    delay = limiter_aggregate_check_ns(res, peek, lim, n, wait_ns, &agg, NULL);
    rl_reply_ints(&agg, v);
    return delay;
}

int64_t limiter_aggregate_check_ns(struct rl_decision *res,
                                   const struct rl_decision *peek,
                                   const struct store_limit *lim, unsigned n,
                                   int64_t wait_ns, struct rl_decision *out,
                                   unsigned *bind)
{
    struct rl_decision agg;
    int64_t delay;
    unsigned i, nreal = 0;
    int limited;

    for (i = 0; i < n; i++) {
        nreal += !lim[i].shadow;
    }
    if (bind != NULL) {
        *bind = n;
    }
    if (nreal == 0) {
        limiter_aggregate_shadow_only(res, peek, lim, n, out);
        return -1;
    }
    limited = limiter_aggregate_limited(res, lim, n);
    delay = limited && wait_ns > 0
                ? limiter_aggregate_delay_sel(res, lim, n, wait_ns)
                : -1;
    if (delay >= 0) {
        limiter_aggregate_sel(res, lim, n, &agg);
        for (i = 0; i < n; i++) {
            int64_t reset = res[i].reset_after_ns;
            if (!lim[i].shadow && res[i].limited &&
                !__builtin_add_overflow(reset, lim[i].p.inc_ns, &reset) &&
                reset > agg.reset_after_ns) {
                agg.reset_after_ns = reset;
            }
        }
        agg.limited = 0;
        agg.remaining = 0;
        agg.retry_after_ns = -RL_NS_PER_SEC;
        if (bind != NULL) {
            *bind = limiter_aggregate_bind(res, lim, n);
        }
        *out = agg;
        return delay;
    }
    if (limited) {
        for (i = 0; i < n; i++) {
            if (!res[i].limited) {
                res[i] = peek[i];
            }
        }
    }
    limiter_aggregate_sel(res, lim, n, &agg);
    if (bind != NULL) {
        *bind = limiter_aggregate_bind(res, lim, n);
    }
    *out = agg;
    return -1;
}
