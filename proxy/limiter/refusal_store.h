/* The Redis store's use of the refusal cache (refusal.h): which calls it
 * may answer, deciding them from the cached state, and what each answer
 * of a node teaches it. The cache remembers the state a refusal read
 * (nothing was written); an admission wrote its keys, so they are
 * forgotten. */
#ifndef PX_PROXY_LIMITER_REFUSAL_STORE_H
#define PX_PROXY_LIMITER_REFUSAL_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "algorithms/gcra.h"
#include "algorithms/sliding_window.h"
#include "parser/resp_value.h"
#include "proxy/limiter/lua_wire.h"
#include "proxy/limiter/refusal.h"
#include "proxy/limiter/store.h"

/* The refusal cache with what deciding from it needs. */
struct refusal_store {
    struct refusal cache;                /* the refusals answered here
                                            (CL.THROTTLE, LIMITER) */
    struct sliding_window_slot *sw_next; /* owned: the sliding window
                                            model's output, for decisions */
    size_t sw_cap;                       /* slots sw_next holds */
};

/* Frees what rfs holds besides its cache (refusal_free frees that). */
void refusal_store_free(struct refusal_store *rfs);

/* A CL.THROTTLE with `p` on `key` (db 0) at local time `now_local`: 1
 * when the cached state refuses it with the same reply at every instant
 * the node's clock may be at (*res its decision: Redis's), else 0. */
int refusal_store_throttle(struct refusal_store *rfs,
                           const struct gcra_params *p, const char *key,
                           size_t klen, uint64_t now_local,
                           struct gcra_result *res);

/* What a decided CL.THROTTLE on `key` in `db` teaches the cache: the
 * script's reply `sr` to a call sent at local time `sent_ns`. */
void refusal_store_throttled(struct refusal_store *rfs, unsigned db,
                             const char *key, size_t klen,
                             const struct gcra_script_reply *sr,
                             uint64_t sent_ns);

/* True when group g of `c` may be answered by the cache: a check or peek
 * without WAIT whose limits all have cacheable algorithms, assuming no
 * run-time override (`known`: the override cache). */
int refusal_store_group_cacheable(const struct store_check *c, unsigned g,
                                  lua_wire_known_fn *known, void *arg);

/* Decides `c` from the cache at local time `now_local` when every key of
 * it and every override hash (named with `prefix`) are cached: 1 when
 * that refuses it with the same decisions at every instant the nodes'
 * clocks may be at (c->res and c->peek filled as the nodes' replies would
 * fill them), else 0 (Redis decides). */
int refusal_store_refused(struct refusal_store *rfs, struct store_check *c,
                          const char *prefix, uint64_t now_local,
                          lua_wire_known_fn *known, void *arg);

/* This proxy writes the keys of group g of `c`: the cache forgets them
 * now, not when Redis's invalidation comes. */
void refusal_store_forget_group(struct refusal_store *rfs,
                                const struct store_check *c, unsigned g);

/* What the decided group `q` (its call q->c, not NULL) teaches the cache:
 * its answer `v` to a call sent at local time `sent_ns`; `cacheable` as
 * refusal_store_group_cacheable said when it was queued. */
void refusal_store_group_learn(struct refusal_store *rfs,
                               const struct lua_wire_group *q, int cacheable,
                               const struct resp_value *v, uint64_t sent_ns);

#endif /* PX_PROXY_LIMITER_REFUSAL_STORE_H */
