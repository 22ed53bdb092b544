/* The Redis limiter store: the state of every limit on the Redis nodes,
 * decided and written by the scripts of algorithms/ (gcra.lua for
 * CL.THROTTLE, limiter.lua for the limits tree: one state string per
 * identity), the run-time overrides in one hash per identity. Used when a Redis
 * is configured; behind the limiter's store interface (store.h), so nothing
 * outside this module knows about scripts, batches, NOSCRIPT or refunds.
 * limiter_init names this table; nothing else outside this module calls it. */
#ifndef PX_PROXY_LIMITER_STORE_REDIS_H
#define PX_PROXY_LIMITER_STORE_REDIS_H

struct store_ops;

/* The Redis store behind the store interface (store.h). */
extern const struct store_ops store_redis_ops;

#endif /* PX_PROXY_LIMITER_STORE_REDIS_H */
