/* The Redis limiter store: the state of every limit on the Redis nodes,
 * decided and written by the scripts of algorithms/ (gcra.lua for
 * CL.THROTTLE, limiter.lua for the limits tree), the run-time overrides in
 * one hash per identity. Used when a Redis is configured; behind the
 * limiter's store interface (store.h), so nothing outside this module
 * knows about scripts, batches, NOSCRIPT or refunds. */
#ifndef PX_PROXY_LIMITER_STORE_REDIS_H
#define PX_PROXY_LIMITER_STORE_REDIS_H

#include <stddef.h>
#include <stdint.h>

#include "proxy/core/req.h"

struct limiter;
struct limits_level;
struct resp_cmd;
struct store_ops;

/* The Redis store behind the store interface (store.h). */
extern const struct store_ops store_redis_ops;

/* ---- Shared by the Redis store's files (store_redis*.c) only ---- */

/* Sends `cmd` (taken; NULL: out of memory) as a proxy-made part to the
 * node that owns `key`: its reply goes to `fn` with `ctx` and part number
 * `partno`, on lane `cid`; it fails at once when no node serves the slot. */
void store_redis_part_send(struct limiter *lm, struct resp_cmd *cmd,
                           req_reply_fn *fn, void *ctx, unsigned partno,
                           uint64_t cid, const char *key, size_t klen);

/* The run-time override of `path` the scripts last reported, NUL-ended,
 * or NULL. */
const char *store_redis_override_known(struct limiter *lm, const char *path,
                                       size_t len);

/* Records what a script found for `path` ("" or NULL: nothing). */
void store_redis_override_learn(struct limiter *lm, const char *path,
                                size_t len, const char *text, size_t tlen);

/* Writes the override hash of `lev`'s identity, "<prefix>{tag}#overrides";
 * returns its length (snprintf's). */
int store_redis_override_key(const struct limiter *lm,
                             const struct limits_level *lev, char *out,
                             size_t outlen);

#endif /* PX_PROXY_LIMITER_STORE_REDIS_H */
