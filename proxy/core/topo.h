/* The topology's decisions about names: which endpoint a node of
 * CLUSTER SLOTS is reached at, and where a redirection points. Pure.
 *
 * One server is one node, however it is named: a node is keyed by the
 * endpoint the cluster announces for it (its address, or with Redis 7's
 * `cluster-preferred-endpoint-type hostname` its host name), the same text
 * CLUSTER SLOTS, -MOVED and -ASK give. The configured seeds are not nodes:
 * they are only where cellgate asks for the map when it knows no node that
 * answers (at start, or once every known node is gone), so a seed named
 * "redis-0:6379" never doubles the node the map calls "10.0.0.5:6379". */
#ifndef PX_PROXY_CORE_TOPO_H
#define PX_PROXY_CORE_TOPO_H

#include <stddef.h>

struct resp_value;

/* What topo_endpoint found. */
enum topo_endpoint {
    TOPO_ENDPOINT_OK = 0,      /* host and port set */
    TOPO_ENDPOINT_BAD = -1,    /* not a node entry: the reply is malformed */
    TOPO_ENDPOINT_UNKNOWN = 1, /* "?" with no address in the metadata: the
                                  node's slots stay uncovered until a later
                                  map names it */
};

/* The endpoint of one node entry of CLUSTER SLOTS ([endpoint, port, id,
 * metadata]; RESP2: the metadata is a flat array of name, value). The
 * endpoint is taken as the cluster announces it; "?" (Redis 7: preferred
 * endpoint type hostname, and the node announces none) falls back to the
 * "ip" of the metadata; NULL or "" (the unknown-endpoint type: reach it
 * where you asked) gives `asked`, the host of the node that sent the map.
 * `*host` points into the entry (or is `asked`), `*hlen` bytes. */
enum topo_endpoint topo_endpoint(const struct resp_value *node,
                                 const char *asked, const char **host,
                                 size_t *hlen, int *port);

/* Parses a redirection "MOVED 3999 127.0.0.1:6381" or "ASK ..." (the
 * error's text after '-', `n` bytes without CRLF): its slot, and host
 * (not NUL-ended, `hlen` bytes; a host name, an address, "?" or empty)
 * and port of the node. 0, or -1 when it is not one. */
int topo_parse_redirect(const char *p, size_t n, unsigned *slot,
                        const char **host, size_t *hlen, int *port);

/* Where a parsed redirection goes: an empty host means the endpoint the
 * redirecting connection uses (`conn_host`), "?" a node whose endpoint is
 * unknown (-1: refresh the map). 0 with `*host`/`*hlen` updated. */
int topo_redirect_host(const char **host, size_t *hlen, const char *conn_host);

#endif /* PX_PROXY_CORE_TOPO_H */
