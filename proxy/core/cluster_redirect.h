/* Redis Cluster's redirection errors, parsed: a pure function of the
 * cluster module (cluster.c follows what it finds), in a file of its own
 * so cluster.c keeps to the topology. */
#ifndef PX_PROXY_CLUSTER_REDIRECT_H
#define PX_PROXY_CLUSTER_REDIRECT_H

#include <stddef.h>

/* Parses a redirection "MOVED 3999 127.0.0.1:6381" or "ASK ..." (the
 * error's text after '-', `n` bytes without CRLF): its slot, and host
 * (not NUL-ended, `hlen` bytes) and port of the node. 0, or -1 when it is
 * not one. Pure. */
int cluster_parse_redirect(const char *p, size_t n, unsigned *slot,
                           const char **host, size_t *hlen, int *port);

#endif /* PX_PROXY_CLUSTER_REDIRECT_H */
