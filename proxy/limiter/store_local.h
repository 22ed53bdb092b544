/* The embedded limiter store: used when no Redis is configured. It keeps
 * each key's state in a hash map in the proxy and runs the same C models as
 * the scripts run in Redis, so replies are the same. State expires as it
 * would in Redis, checked on access and swept a little on every cron. The
 * run-time overrides (LIMITER OVERRIDE) live here too, by path.
 *
 * store_local_ops is this store behind the limiter's store interface
 * (store.h): every call completes at once; its struct store_local is the
 * struct store's `impl`, made by the init op. limiter_init names this
 * table; nothing else outside this module calls it. */
#ifndef PX_PROXY_LIMITER_STORE_LOCAL_H
#define PX_PROXY_LIMITER_STORE_LOCAL_H

#include <stddef.h>
#include <stdint.h>

#include "conf/limits.h"
#include "proxy/core/hmap.h"
#include "proxy/limiter/store_map.h"
#include "proxy/limiter/store_trim.h"

struct gcra_params;
struct gcra_result;
struct rl_decision;
struct store_ops;

/* The in-process store behind the store interface (store.h). */
extern const struct store_ops store_local_ops;

/* The store's state: a struct store's `impl` (store.h). */
struct store_local {
    struct store_map map;      /* key -> owned struct store_entry, bounded */
    struct hmap overrides;     /* path -> owned NUL-ended override text */
    size_t override_bytes;     /* charged for overrides now
                                  (store_local_override_bytes each) */
    size_t override_max;       /* most override_bytes; 0: no bound */
    uint64_t full_refused;     /* writes of new state refused: no room left
                                  (every entry live) */
    uint64_t override_refused; /* OVERRIDE SETs beyond override_max */
    uint64_t override_freed;   /* override bytes freed, ever */
    struct store_trim trim;    /* when freed memory went back last */
};

/* Returned by store_local_check and store_local_gcra when the writes do
 * not fit: the text is STORE_LOCAL_FULL_TEXT. */
#define STORE_LOCAL_EFULL -100
#define STORE_LOCAL_FULL_TEXT                                                  \
    "ERR embedded limiter store full (every entry is live): raise "            \
    "embedded_max_keys or embedded_max_bytes"

/* One limit of a LIMITER check in the embedded store. */
struct store_local_limit {
    enum limits_algo algo;             /* which model */
    const struct limits_limit *lim;    /* parameters (not gcra) */
    const struct gcra_params *p;       /* gcra: decides the reply */
    const struct gcra_params *p_write; /* gcra: decides the write (WAIT) */
    int64_t wait_ns; /* token_bucket, leaky_bucket: a WAIT's reservation
                        (0: none; a shadow level reserves nothing) */
    const char *key; /* the limit's key */
    size_t klen;     /* bytes of key */
    unsigned level;  /* its level, < 64 */
    bool shadow;     /* its level is shadow */
    const char *id;  /* concurrency: the token (ID), or NULL (a PEEK
                        without one) */
    size_t id_len;   /* bytes of id */
};

/* An empty store of at most max_keys keys and max_bytes bytes
 * (embedded_max_keys, embedded_max_bytes), holding at most override_max
 * bytes of run-time overrides (limiter_override_max_bytes); 0: no bound. */
void store_local_init(struct store_local *st, size_t max_keys, size_t max_bytes,
                      size_t override_max);

/* Frees every entry. */
void store_local_free(struct store_local *st);

/* One CL.THROTTLE on `key` at the wall clock. Returns a GCRA_* code, or
 * STORE_LOCAL_EFULL when its write finds no room; on an error `*err` is
 * the reply text. */
int store_local_gcra(struct store_local *st, const char *key, size_t len,
                     const struct gcra_params *p, struct gcra_result *out,
                     const char **err);

/* Decides every limit l[i] with `cost` at one instant into out[i], and
 * into peek[i] what a refused check reports for it (for a limit that
 * admitted, its state without this request); when `commit` and every
 * real (not shadow) limit admits, writes them all but the limits of a
 * shadow level that refused, else writes none; plus what an algorithm
 * writes for a refused attempt (sliding_log), shadow or not. A limit that
 * admitted but writes nothing reports its state without this request. A key
 * that holds another algorithm's state is WRONGTYPE. Writes that do not
 * fit (store_map_room: new keys with every entry live) are none of them
 * made and the check returns STORE_LOCAL_EFULL. 0, or -1 or
 * STORE_LOCAL_EFULL with `*err` the reply text. */
int store_local_check(struct store_local *st, unsigned n,
                      const struct store_local_limit *l, int64_t cost,
                      int commit, struct rl_decision *out,
                      struct rl_decision *peek, const char **err);

/* LIMITER ADJUST of every limit l[i] by delta (either sign; l[i].p, a gcra
 * limit's, of quantity 1) at one instant: each model's <name>_adjust,
 * never refused, every change computed before any is written (an error,
 * WRONGTYPE or a state no model accepts, writes nothing; so do writes
 * that do not fit: STORE_LOCAL_EFULL), then out[i] and peek[i] as
 * store_local_check gives them for a peek of cost 1 after it. 0, or -1 or
 * STORE_LOCAL_EFULL with `*err` the reply text. */
int store_local_adjust(struct store_local *st, unsigned n,
                       const struct store_local_limit *l, int64_t delta,
                       struct rl_decision *out, struct rl_decision *peek,
                       const char **err);

/* The run-time override of `path`, NUL-ended, or NULL. */
const char *store_local_override_get(struct store_local *st, const char *path,
                                     size_t len);

/* What one override is charged: its path and text, the NUL, and the
 * index's entry (5 words). */
size_t store_local_override_bytes(size_t plen, size_t tlen);

/* Sets (text != NULL) or removes the run-time override of `path`.
 * Returns 1 when an override was there before, else 0; -1 (nothing
 * changed) when the new text would take override_bytes past
 * override_max. */
int store_local_override_set(struct store_local *st, const char *path,
                             size_t len, const char *text, size_t tlen);

/* LIMITER RELEASE of concurrency limit l (its key and parameters) for
 * token id: 1 when the token held a live slot there (freed now), 0 when
 * not, -1 with `*err` (WRONGTYPE, a malformed state). */
int store_local_release(struct store_local *st,
                        const struct store_local_limit *l, const char **err);

/* Forgets key. Returns 1 when it was there (and not expired), else 0. */
int store_local_del(struct store_local *st, const char *key, size_t len);

/* Drops expired entries, a bounded number (called from the cron). */
void store_local_cron(struct store_local *st);

/* Wall-clock nanoseconds since the Unix epoch. */
int64_t store_local_now_ns(void);

#endif /* PX_PROXY_LIMITER_STORE_LOCAL_H */
