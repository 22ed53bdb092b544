/* The embedded limiter store: used when no Redis is configured. It keeps
 * each key's state in a hash map in the proxy and runs the same C model as
 * the scripts run in Redis, so replies are the same. State expires as it
 * would in Redis, checked on access and swept a little on every cron. */
#ifndef PX_PROXY_STORE_LOCAL_H
#define PX_PROXY_STORE_LOCAL_H

#include <stddef.h>
#include <stdint.h>

#include "proxy/hmap.h"

struct gcra_params;
struct gcra_result;

/* The store, embedded in the server struct. */
struct store_local {
    struct hmap map;     /* key -> owned struct store_entry */
    size_t sweep_cursor; /* next bucket the cron sweeps */
};

void store_local_init(struct store_local *st);

/* Frees every entry. */
void store_local_free(struct store_local *st);

/* One CL.THROTTLE on `key` at the wall clock. Returns a GCRA_* code; on
 * an error `*err` is the reply text. */
int store_local_gcra(struct store_local *st, const char *key, size_t len,
                     const struct gcra_params *p, struct gcra_result *out,
                     const char **err);

/* Decides every limit i (keys[i], p[i]) at one instant into out[i]; when
 * `commit` and every one admits, writes them all, else writes none (a
 * LIMITER CHECK over several levels). `p_write` (NULL: p) are the
 * parameters that decide the writes: LIMITER CHECK ... WAIT widens the
 * tolerance so a request due within the wait is reserved. `peek` (may be
 * NULL) receives each limit's state without this request. A GCRA_* code;
 * `*err` on error. */
int store_local_gcra_all(struct store_local *st, unsigned n,
                         const char *const *keys, const size_t *lens,
                         const struct gcra_params *p,
                         const struct gcra_params *p_write, int commit,
                         struct gcra_result *out, struct gcra_result *peek,
                         const char **err);

/* Forgets key. Returns 1 when it was there (and not expired), else 0. */
int store_local_del(struct store_local *st, const char *key, size_t len);

/* Drops a few expired entries (called from the cron). */
void store_local_cron(struct store_local *st);

/* Wall-clock nanoseconds since the Unix epoch. */
int64_t store_local_now_ns(void);

#endif /* PX_PROXY_STORE_LOCAL_H */
