/* The limiter aggregate: the decisions of a tree call's limits (one per
 * limit of every level on the path) combined into the one reply of
 * LIMITER CHECK/PEEK, and the WAIT reservation's delay. Pure: no loop, no
 * store, no request. */
#ifndef PX_PROXY_LIMITER_LIMITER_AGGREGATE_H
#define PX_PROXY_LIMITER_LIMITER_AGGREGATE_H

#include <stdint.h>

#include "algorithms/rl.h"

struct store_limit;

/* The reply of a tree call from its n >= 1 decisions: limited if any limit
 * is; limit and remaining from the most restrictive limit (the least
 * remaining; on a tie the one with the longest reset_after); retry_after
 * the largest among refusing limits, but a refusing limit the request can
 * never pass (retry_after < 0) outweighs any wait; reset_after the largest
 * of all. An admitted reply has retry_after -1 s. */
void limiter_aggregate(const struct rl_decision *res, unsigned n,
                       struct rl_decision *out);

/* With WAIT (wait_ns > 0): when every refusing limit is due within the
 * wait, the request is reserved; returns the delay (the latest due time of
 * the refusing limits, >= 0), else -1. */
int64_t limiter_aggregate_wait_delay(const struct rl_decision *res, unsigned n,
                                     int64_t wait_ns);

/* Whether the store must give back what a CHECK took (the refund op): a
 * real limit refused and no WAIT reservation was made. Shadow limits never
 * refuse a check. */
int limiter_aggregate_refunds(const struct rl_decision *res,
                              const struct store_limit *lim, unsigned n,
                              int64_t wait_ns);

/* Shadow levels that refused (lim[i].shadow_limited, counted once per
 * level). */
unsigned limiter_aggregate_shadow_limited(const struct store_limit *lim,
                                          unsigned n);

/* The reply `v` of a LIMITER CHECK whose n >= 1 limits `lim` decided `res`
 * and would be in state `peek` without this request; a LIMITER PEEK's too
 * (wait_ns 0): the reply of the CHECK it shows. Returns -1 when `v` goes
 * out at once, or the delay after which it does (a reservation of
 * CHECK ... WAIT: gcra limits only).
 *
 * A refused check consumed nothing, so the limits that would have admitted
 * report their state without it (res[i] is replaced by peek[i]); a
 * reserved one reports the state it left: not limited, nothing remaining,
 * reset after the reservation (each refusing limit's reset plus its INC).
 *
 * Shadow limits (lim[i].shadow) are left out: the reply is the one of the
 * real limits alone. When every limit is shadow, the reply is admitted:
 * [0, limit, remaining, -1, reset] of limiter_aggregate over them as the
 * check left them (a shadow level that refused took nothing: its limits
 * that admitted show their state without the cost, res[i] replaced by
 * peek[i]). */
int64_t limiter_aggregate_check(struct rl_decision *res,
                                const struct rl_decision *peek,
                                const struct store_limit *lim, unsigned n,
                                int64_t wait_ns, int64_t v[5]);

/* limiter_aggregate_check before the rounding: the reply's decision in
 * `out` (durations in ns), and in *bind (when not NULL) the index of the
 * real limit that binds the reply: the refusing limit its retry_after
 * comes from (one the request can never pass first), or with none
 * refusing the most restrictive one; n when every limit is shadow. */
int64_t limiter_aggregate_check_ns(struct rl_decision *res,
                                   const struct rl_decision *peek,
                                   const struct store_limit *lim, unsigned n,
                                   int64_t wait_ns, struct rl_decision *out,
                                   unsigned *bind);

#endif /* PX_PROXY_LIMITER_LIMITER_AGGREGATE_H */
