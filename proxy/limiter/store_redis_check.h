/* The Redis store's tree calls (LIMITER CHECK/PEEK/RESET): one limiter.lua
 * call per tag group, and the refunds. Part of the Redis store: used by
 * store_redis.c's ops table only. */
#ifndef PX_PROXY_LIMITER_STORE_REDIS_CHECK_H
#define PX_PROXY_LIMITER_STORE_REDIS_CHECK_H

#include "proxy/limiter/store.h"

/* The check op of the Redis store (store.h): counts the call in
 * c->root->owed, frees the orphan itself. */
void store_redis_check(struct limiter *lm, struct store_check *c,
                       store_check_done_fn *done);

/* The refund op: a "refund" call to every group that admitted; nobody
 * waits for its reply. */
void store_redis_refund(struct limiter *lm, struct store_check *c);

#endif /* PX_PROXY_LIMITER_STORE_REDIS_CHECK_H */
