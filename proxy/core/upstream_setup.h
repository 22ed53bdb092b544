/* The proxy's own requests on an upstream (upstream_setup.c), for
 * upstream.c: its public part is declared in upstream.h. */
#ifndef PX_PROXY_CORE_UPSTREAM_SETUP_H
#define PX_PROXY_CORE_UPSTREAM_SETUP_H

struct upstream;

/* Queues AUTH (when configured), then HELLO 3 on a RESP3 connection,
 * CLIENT ID on a private one, then what the core's on_setup adds: the
 * first requests of a new connection. */
void upstream_queue_setup(struct upstream *up);

/* Lets every request waiting for the Redis id go on; one whose client
 * left meanwhile (an orphan) is freed instead. */
void upstream_resume_rid_waits(struct upstream *up);

#endif /* PX_PROXY_CORE_UPSTREAM_SETUP_H */
