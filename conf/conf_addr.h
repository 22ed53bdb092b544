/* Addresses as proxy.yaml and the command line write them: "host:port",
 * "[v6]:port", and comma-separated lists of those (cluster seeds,
 * sentinels). Leaf layer: pure parsing. */
#ifndef PX_CONF_CONF_ADDR_H
#define PX_CONF_CONF_ADDR_H

#include <stddef.h>

#define CONF_ADDR_OK  0
#define CONF_ADDR_ERR -1

#define CONF_MAX_ADDRS 16 /* items of one address list */

/* One "host:port". host is a literal IPv4/IPv6 address or a name. */
struct conf_addr {
    char host[256];
    int port; /* 0 when unset */
};

enum conf_addrs_status {
    CONF_ADDRS_OK = 0,
    CONF_ADDRS_EBAD = -1,     /* an item is not host:port (see *bad) */
    CONF_ADDRS_EEMPTY = -2,   /* no item at all */
    CONF_ADDRS_ETOOMANY = -3, /* more than CONF_MAX_ADDRS items */
};

/* Parses "host:port" or "[v6]:port". CONF_ADDR_OK or CONF_ADDR_ERR. */
int conf_parse_addr(const char *s, struct conf_addr *out);

/* Splits "a:1, b:2" into `out` (room for CONF_MAX_ADDRS). On
 * CONF_ADDRS_EBAD, `*bad` and `*badlen` point at the rejected item inside
 * `list`. `out` may be partly written on error. */
enum conf_addrs_status conf_addr_split(const char *list, struct conf_addr *out,
                                       int *n, const char **bad,
                                       size_t *badlen);

#endif /* PX_CONF_CONF_ADDR_H */
