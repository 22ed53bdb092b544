/* Parsing -MOVED and -ASK (cluster_redirect.h). */
#include "proxy/core/cluster_redirect.h"

#include <string.h>

/* CLUSTER_SLOTS, without the topology's header. */
#define CLUSTER_REDIRECT_SLOTS 16384

/* Parses "MOVED 3999 127.0.0.1:6381" (after the '-'). 0 or -1. */
int cluster_parse_redirect(const char *p, size_t n, unsigned *slot,
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
    for (; p < end && *p >= '0' && *p <= '9'; p++) {
        v = v * 10 + (unsigned long)(*p - '0');
        if (v >= CLUSTER_REDIRECT_SLOTS) {
            return -1;
        }
    }
    if (p >= end || *p != ' ') {
        return -1;
    }
    p++;
    /* The port follows the last ':' (IPv6 addresses hold colons). */
    colon = NULL;
    for (sp = p; sp < end && *sp != '\r'; sp++) {
        if (*sp == ':') {
            colon = sp;
        }
    }
    if (colon == NULL || colon == p) {
        return -1;
    }
    for (sp = colon + 1; sp < end && *sp >= '0' && *sp <= '9'; sp++) {
        pv = pv * 10 + (*sp - '0');
        if (pv > 65535) {
            return -1;
        }
    }
    *slot = (unsigned)v;
    *host = p;
    *hlen = (size_t)(colon - p);
    *port = (int)pv;
    return 0;
}
