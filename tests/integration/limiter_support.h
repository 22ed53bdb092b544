/* Helpers of the limiter integration tests (test_limiter.c,
 * test_limiter_tree.c, test_limiter_wait.c): which mode the running test
 * set up, a direct connection to the node that stores a key, the five
 * integers of a CL.THROTTLE / LIMITER reply, and the stored state of a
 * key checked straight on its node.
 *
 * The mode follows from what the test's .init started: a cluster
 * (px_cluster_init), else a redis (px_env()->redis), else nothing, when the
 * proxy keeps its limiter state in its own embedded store. Every checker
 * asserts (criterion), so a mismatch fails the test where it is found. */
#ifndef PX_TESTS_INTEGRATION_LIMITER_SUPPORT_H
#define PX_TESTS_INTEGRATION_LIMITER_SUPPORT_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

/* Where the proxy under test keeps limiter state. */
enum px_mode {
    PX_MODE_EMBEDDED, /* no Redis: the proxy's own store */
    PX_MODE_SINGLE,   /* px_env()->redis */
    PX_MODE_CLUSTER,  /* px_cluster() */
};

/* The mode of the running test. */
enum px_mode px_mode_now(void);

/* A direct connection to the node that stores `key` (`klen` bytes), or NULL
 * in embedded mode. The caller frees it with redisFree. */
redisContext *px_direct_for(const char *key, size_t klen);

/* The five integers of a limiter reply. */
struct px_five {
    long long limited;   /* 0 or 1 */
    long long limit;     /* max_burst + 1 */
    long long remaining; /* requests left */
    long long retry;     /* seconds, -1 when allowed */
    long long reset;     /* seconds until every key is back to full */
};

/* Asserts r is an array of five integers, frees it, returns them. `what`
 * names the call in failure messages. */
struct px_five px_take_five(redisReply *r, const char *what);

/* Asserts the reply is exactly [limited, limit, remaining, retry, reset],
 * then frees it. */
void px_check_five(redisReply *r, const char *what, long long limited,
                   long long limit, long long remaining, long long retry,
                   long long reset);

/* The TAT stored at `key` on `d`: asserts it is what redis-cell writes, a
 * plain decimal count of nanoseconds since the epoch (19 digits nowadays,
 * no sign, no leading zero). */
int64_t px_get_tat(redisContext *d, const char *key, size_t klen);

/* Asserts that `key` does not exist on its node (checks nothing in
 * embedded mode). */
void px_check_absent(const char *key, size_t klen, const char *what);

/* A client's pipeline that mixes CL.THROTTLE with ordinary commands on
 * the same keys (all under the hash tag {tag}), `rounds` times in one
 * pipeline: every command must see each one the client sent before it,
 * as on one Redis (a GET the TAT of the CL.THROTTLE before it, a
 * CL.THROTTLE the DEL or the SET before it). Meanwhile `o`, another
 * client, pipelines CL.THROTTLE calls of keys of its own, checked too. */
void px_check_client_order(redisContext *c, redisContext *o, const char *tag,
                           int rounds);

/* Bound of the search for an identity off a master (px_ident_off). */
#define PX_IDENT_TRIES 1000

/* A tree node "<name>:" whose "*" children have one limit of the given
 * flow-style mapping: one identity per child, as every algorithm test
 * uses. */
#define PX_LIMITS_STAR(name, limit)                                            \
    name ":\n  children:\n    \"*\":\n      limits:\n        - " limit "\n"

/* One node per algorithm other than gcra, each with 3 allowed in a long
 * window: tb, lb, fw, sw, sl, sc. */
#define PX_ALGOS_YAML                                                          \
    PX_LIMITS_STAR("tb", "{algorithm: token_bucket, capacity: 3, "             \
                         "refill_per_sec: 0.001}")                             \
    PX_LIMITS_STAR("lb", "{algorithm: leaky_bucket, size: 3, "                 \
                         "drip_ms: 1000000}")                                  \
    PX_LIMITS_STAR("fw", "{algorithm: fixed_window, max: 3, window: 1d}")      \
    PX_LIMITS_STAR("sw", "{algorithm: sliding_window, max: 3, window: 1h, "    \
                         "resolution: 1m}")                                    \
    PX_LIMITS_STAR("sl", "{algorithm: sliding_log, max: 3, window: 1h}")       \
    PX_LIMITS_STAR("sc", "{algorithm: sliding_counter, max: 3, window: 1d}")

/* Starts the test's proxy with `yaml` as its limits file: embedded (named
 * by the --limits flag), in front of a new single Redis, or of a new
 * 3-master cluster (px_cluster_init), named in proxy.yaml; `more`: other
 * proxy.yaml lines (NULL: none, at most 190 bytes). */
void px_limits_start(enum px_mode mode, const char *yaml, const char *more);

/* The proxy.yaml lines it used ("limits_file: ...\n" and `more`), for a
 * second proxy. */
const char *px_limits_conf(void);

/* The argv naming that file ("--limits", path, NULL). */
const char *const *px_limits_args(void);

/* Writes to out "<base><n>" for the first n such that "<prefix><base><n>"
 * lands on another master than `avoid` (`base` itself outside cluster mode
 * or when avoid is NULL). */
void px_ident_off(const char *prefix, const char *base, const char *avoid,
                  char *out, size_t outlen);

/* Waits (polls of 1 ms, 2000 at most) until the refusal cache of the
 * proxy `c` is connected to counts an invalidation more than `before`
 * (its INFO limiter_refusal_cache_invalidations); fails naming `what`
 * when none comes. */
void px_wait_refusal_invalidation(redisContext *c, long long before,
                                  const char *what);

#endif /* PX_TESTS_INTEGRATION_LIMITER_SUPPORT_H */
