/* Handlers of the limiter commands (CL.THROTTLE, LIMITER). See limiter.c
 * for the flow of one call. */
#ifndef PX_PROXY_LIMITER_H
#define PX_PROXY_LIMITER_H

#include <stddef.h>

struct req;

/* CL.THROTTLE <key> <max_burst> <count> <period> [<quantity>]. */
void limiter_throttle(struct req *req);

/* LIMITER <key> <max_burst> <count> <period> [<quantity>], and the
 * subcommands of the limits tree. */
void limiter_command(struct req *req);

/* Loads the limits tree from `path` (NULL: none) into the server, keeping
 * the old tree when the file is bad. PX_OK, or PX_ERR with every error in
 * `err` as "file:line:column: message". */
int limiter_load(const char *path, char *err, size_t errlen);

/* Sends the CL.THROTTLE calls that arrived this loop turn, batched per
 * node and slot into few script calls (called by the flush pass, before
 * the upstreams are written). */
void limiter_flush(void);

/* Fails the calls not yet sent (shutdown). */
void limiter_drop_pending(void);

/* Ends every reply held by LIMITER CHECK ... WAIT (shutdown). */
void limiter_stop_waits(void);

/* Frees the limits tree. */
void limiter_shutdown(void);

#endif /* PX_PROXY_LIMITER_H */
