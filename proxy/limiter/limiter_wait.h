/* LIMITER CHECK ... WAIT: replies held until their reservation is due, on
 * timers of the core's loop. It knows nothing of the limiter: the caller
 * gives the core and the queue that links its waits (for shutdown). */
#ifndef PX_PROXY_LIMITER_LIMITER_WAIT_H
#define PX_PROXY_LIMITER_LIMITER_WAIT_H

#include <stdint.h>

struct core;
struct queue;
struct req;

/* Writes the held reply `v` to `root` (whose client still waits). */
typedef void limiter_wait_fn(struct req *root, const int64_t v[5]);

/* Replies `v` to `root` through `fn` after `delay_ns` (rounded up to whole
 * milliseconds), on a timer of `core`'s loop, the wait linked in `waits`.
 * The wait counts in root->owed, so a client that leaves meanwhile turns
 * the request into an orphan, freed when the timer fires. */
void limiter_wait_start(struct core *core, struct queue *waits,
                        struct req *root, const int64_t v[5], int64_t delay_ns,
                        limiter_wait_fn *fn);

/* Shutdown: ends every wait linked in `waits` without its reply. */
void limiter_wait_stop_all(struct queue *waits);

#endif /* PX_PROXY_LIMITER_LIMITER_WAIT_H */
