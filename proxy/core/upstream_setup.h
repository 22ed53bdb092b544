/* The proxy's own requests on an upstream (upstream_setup.c), for
 * upstream.c. */
#ifndef PX_PROXY_CORE_UPSTREAM_SETUP_H
#define PX_PROXY_CORE_UPSTREAM_SETUP_H

#include <stddef.h>

struct req;
struct upstream;

/* Queues AUTH (when configured), then HELLO 3 on a RESP3 connection,
 * CLIENT ID on a private one, then what the core's on_setup adds: the
 * first requests of a new connection. */
void upstream_setup_queue(struct upstream *up);

/* Queues one of the proxy's own requests behind what is already queued;
 * its reply is swallowed unless the caller says otherwise. */
struct req *upstream_setup_own(struct upstream *up, int argc,
                               const char *const *argv, const size_t *lens);

/* Queues `HELLO <proto>`. */
void upstream_setup_hello(struct upstream *up, int proto);

/* Queues AUTH as the connection's user, when it has a password. */
void upstream_setup_auth(struct upstream *up);

/* Lets every request waiting for the Redis id go on; one whose client
 * left meanwhile (an orphan) is freed instead. */
void upstream_setup_resume_rid_waits(struct upstream *up);

#endif /* PX_PROXY_CORE_UPSTREAM_SETUP_H */
