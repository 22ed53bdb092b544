/* Name resolution off the loop (see resolve.h).
 *
 *   resolve_start --literal--> addr[0] at once, returns 1
 *                 --name-----> uv_getaddrinfo (thread pool) -> 0
 *   resolve_on_gai <- addrinfo list: up to RESOLVE_MAX_ADDRS kept, in the
 *                     order getaddrinfo ranked them -> done(r, status)
 */
#include "proxy/core/resolve.h"

#include <netdb.h>
#include <stdio.h>
#include <string.h>

int resolve_literal(struct resolve *r, const char *host, int port)
{
    struct sockaddr_storage *sa = &r->addr[0];

    memset(sa, 0, sizeof(*sa));
    if (uv_ip4_addr(host, port, (struct sockaddr_in *)(void *)sa) == 0 ||
        uv_ip6_addr(host, port, (struct sockaddr_in6 *)(void *)sa) == 0) {
        r->naddr = 1;
        return 1;
    }
    return 0;
}

static void resolve_on_gai(uv_getaddrinfo_t *req, int status,
                           struct addrinfo *res)
{
    struct resolve *r = req->data;
    const struct addrinfo *ai;

    r->busy = 0;
    r->naddr = 0;
    for (ai = res; status == 0 && ai != NULL && r->naddr < RESOLVE_MAX_ADDRS;
         ai = ai->ai_next) {
        if ((ai->ai_family == AF_INET || ai->ai_family == AF_INET6) &&
            ai->ai_addrlen <= sizeof(r->addr[0])) {
            memset(&r->addr[r->naddr], 0, sizeof(r->addr[0]));
            memcpy(&r->addr[r->naddr++], ai->ai_addr, ai->ai_addrlen);
        }
    }
    uv_freeaddrinfo(res);
    if (status == 0 && r->naddr == 0) {
        status = UV_EAI_NODATA;
    }
    r->done(r, status);
}

int resolve_start(struct resolve *r, uv_loop_t *loop, const char *host,
                  int port, resolve_done_fn *done)
{
    struct addrinfo hints;
    char portstr[16];
    int rc;

    if (resolve_literal(r, host, port)) {
        return 1;
    }
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    snprintf(portstr, sizeof(portstr), "%d", port);
    r->done = done;
    r->req.data = r;
    rc = uv_getaddrinfo(loop, &r->req, resolve_on_gai, host, portstr, &hints);
    if (rc == 0) {
        r->busy = 1;
    }
    return rc;
}

void resolve_cancel(struct resolve *r)
{
    if (r->busy) {
        uv_cancel((uv_req_t *)&r->req);
    }
}
