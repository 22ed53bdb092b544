/* Names in the topology: CLUSTER SLOTS endpoints and redirections
 * (topo.h). Pure: they read their arguments and nothing else. */
#include "proxy/core/topo.h"

#include <string.h>

#include "parser/resp_value.h"

/* Slots of a cluster (CLUSTER_SLOTS in cluster.h, which this leaf does not
 * include). */
#define TOPO_SLOTS 16384

/* The value of `name` in a node's metadata (a flat list of name, value, or
 * a RESP3 map, which parses alike), or NULL. */
static const struct resp_value *topo_meta(const struct resp_value *meta,
                                          const char *name)
{
    size_t i;

    if (meta->type != '*' && meta->type != '%') {
        return NULL;
    }
    for (i = 0; i + 1 < meta->n; i += 2) {
        const struct resp_value *v = &meta->elem[i + 1];
        if (resp_value_is(&meta->elem[i], name) && v->str != NULL &&
            v->len > 0) {
            return v;
        }
    }
    return NULL;
}

enum topo_endpoint topo_endpoint(const struct resp_value *node,
                                 const char *asked, const char **host,
                                 size_t *hlen, int *port)
{
    const struct resp_value *ep, *ip;

    if (node->type != '*' || node->n < 2 || node->elem[1].type != ':' ||
        node->elem[1].integer <= 0 || node->elem[1].integer > 65535) {
        return TOPO_ENDPOINT_BAD;
    }
    *port = (int)node->elem[1].integer;
    ep = &node->elem[0];
    if (ep->null || ep->str == NULL || ep->len == 0) {
        *host = asked;
        *hlen = strlen(asked);
        return *hlen > 0 ? TOPO_ENDPOINT_OK : TOPO_ENDPOINT_UNKNOWN;
    }
    if (ep->len == 1 && ep->str[0] == '?') {
        ip = node->n >= 4 ? topo_meta(&node->elem[3], "ip") : NULL;
        if (ip == NULL) {
            return TOPO_ENDPOINT_UNKNOWN;
        }
        ep = ip;
    }
    *host = ep->str;
    *hlen = ep->len;
    return TOPO_ENDPOINT_OK;
}

int topo_parse_redirect(const char *p, size_t n, unsigned *slot,
                        const char **host, size_t *hlen, int *port)
{
    const char *sp, *colon, *end = p + n;
    unsigned long v = 0;
    long pv = 0;

    sp = memchr(p, ' ', n);
    if (sp == NULL) {
        return -1;
    }
    p = sp + 1;
    for (sp = p; p < end && *p >= '0' && *p <= '9'; p++) {
        v = v * 10 + (unsigned long)(*p - '0');
        if (v >= TOPO_SLOTS) {
            return -1;
        }
    }
    if (p == sp || p >= end || *p != ' ') {
        return -1;
    }
    p++;
    /* The port follows the last ':' (IPv6 addresses hold colons); the
     * host before it may be empty (Redis 7's unknown endpoint). */
    colon = NULL;
    for (sp = p; sp < end && *sp != '\r'; sp++) {
        if (*sp == ':') {
            colon = sp;
        }
    }
    if (colon == NULL || colon + 1 >= end) {
        return -1;
    }
    for (sp = colon + 1; sp < end && *sp >= '0' && *sp <= '9'; sp++) {
        pv = pv * 10 + (*sp - '0');
        if (pv > 65535) {
            return -1;
        }
    }
    if (sp != end || pv == 0) {
        return -1;
    }
    *slot = (unsigned)v;
    *host = p;
    *hlen = (size_t)(colon - p);
    *port = (int)pv;
    return 0;
}

int topo_redirect_host(const char **host, size_t *hlen, const char *conn_host)
{
    if (*hlen == 1 && (*host)[0] == '?') {
        return -1;
    }
    if (*hlen == 0) {
        *host = conn_host;
        *hlen = strlen(conn_host);
    }
    return *hlen > 0 ? 0 : -1;
}
