/* conf_addr.c: "host:port" and comma-separated lists of them, as proxy.yaml
 * and the command line write addresses. Leaf layer: no allocation, no I/O. */
#include "conf/conf_addr.h"

#include <stdbool.h>
#include <string.h>

/* Longest "[host]:port" text: brackets, 255-byte host, colon, 5 digits. */
#define CONF_ADDR_TEXT_MAX (sizeof(((struct conf_addr *)0)->host) + 8)

/* Accepts a port of 1 to 5 digits in 1..65535; -1 otherwise. */
static int conf_parse_port(const char *s)
{
    int port = 0;
    size_t i;

    for (i = 0; s[i] != '\0'; i++) {
        if (i == 5 || s[i] < '0' || s[i] > '9') {
            return -1;
        }
        port = port * 10 + (s[i] - '0');
    }
    return i > 0 && port >= 1 && port <= 65535 ? port : -1;
}

int conf_parse_addr(const char *s, struct conf_addr *out)
{
    const char *host, *colon, *close;
    size_t hostlen, i;
    bool bracketed;
    int port;

    if (s == NULL || out == NULL) {
        return CONF_ADDR_ERR;
    }
    bracketed = s[0] == '[';
    if (bracketed) {
        close = strchr(s, ']');
        if (close == NULL || close[1] != ':') {
            return CONF_ADDR_ERR;
        }
        host = s + 1;
        colon = close + 1;
    } else {
        colon = strchr(s, ':');
        if (colon == NULL) {
            return CONF_ADDR_ERR;
        }
        host = s;
    }
    hostlen = (size_t)(colon - host) - (bracketed ? 1 : 0);
    if (hostlen == 0 || hostlen >= sizeof(out->host)) {
        return CONF_ADDR_ERR;
    }
    for (i = 0; i < hostlen; i++) {
        unsigned char ch = (unsigned char)host[i];

        if (ch <= ' ' || ch == 0x7f || ch == '[' || ch == ']' || ch == ',') {
            return CONF_ADDR_ERR;
        }
    }
    port = conf_parse_port(colon + 1);
    if (port < 0) {
        return CONF_ADDR_ERR;
    }
    memcpy(out->host, host, hostlen);
    out->host[hostlen] = '\0';
    out->port = port;
    return CONF_ADDR_OK;
}

static bool conf_is_blank(char ch)
{
    return ch == ' ' || ch == '\t';
}

enum conf_addrs_status conf_addr_split(const char *list, struct conf_addr *out,
                                       int *n, const char **bad, size_t *badlen)
{
    char item[CONF_ADDR_TEXT_MAX];
    const char *p = list, *end;
    size_t len;

    *n = 0;
    while (conf_is_blank(*p)) {
        p++;
    }
    if (*p == '\0') {
        return CONF_ADDRS_EEMPTY;
    }
    for (;;) {
        while (conf_is_blank(*p)) {
            p++;
        }
        end = strchr(p, ',');
        len = end != NULL ? (size_t)(end - p) : strlen(p);
        while (len > 0 && conf_is_blank(p[len - 1])) {
            len--;
        }
        if (*n == CONF_MAX_ADDRS) {
            return CONF_ADDRS_ETOOMANY;
        }
        if (len < sizeof(item)) { /* longer is no valid address */
            memcpy(item, p, len);
            item[len] = '\0';
        }
        if (len >= sizeof(item) ||
            conf_parse_addr(item, &out[*n]) != CONF_ADDR_OK) {
            *bad = p;
            *badlen = len;
            return CONF_ADDRS_EBAD;
        }
        (*n)++;
        if (end == NULL) {
            return CONF_ADDRS_OK;
        }
        p = end + 1;
    }
}
