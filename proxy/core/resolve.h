/* Name resolution for the connections to Redis, off the loop.
 *
 * A node may be named by a host name (a managed service's, Redis 7's
 * cluster-announce-hostname) whose address can change under the same
 * name, so every connection attempt resolves it again. The lookup runs on
 * libuv's thread pool (uv_getaddrinfo): the loop never waits for DNS. A
 * literal IPv4 or IPv6 address is converted on the spot, with no thread
 * and no callback. */
#ifndef PX_PROXY_CORE_RESOLVE_H
#define PX_PROXY_CORE_RESOLVE_H

#include <sys/socket.h>
#include <uv.h>

/* Addresses kept of one lookup: an attempt that fails on one tries the
 * next at the following attempt (a name with an IPv6 and an IPv4 address
 * whose server listens on one of them). */
#define RESOLVE_MAX_ADDRS 4

struct resolve;

/* A lookup ended: `status` 0 (r->addr holds r->naddr addresses) or a
 * negative libuv error (UV_ECANCELED after resolve_cancel). */
typedef void resolve_done_fn(struct resolve *r, int status);

/* One name's lookup. Embedded in its user (an upstream), which finds
 * itself from `r` with container_of. */
struct resolve {
    uv_getaddrinfo_t req;                            /* embedded request */
    resolve_done_fn *done;                           /* borrowed callback */
    struct sockaddr_storage addr[RESOLVE_MAX_ADDRS]; /* found, in order */
    unsigned naddr;                                  /* entries of addr */
    unsigned busy : 1; /* a lookup is in flight: its callback is owed */
};

/* Fills r->addr[0] when `host` is a literal IPv4 or IPv6 address and
 * returns 1; 0 when it is a name to look up. Pure. */
int resolve_literal(struct resolve *r, const char *host, int port);

/* Resolves host:port. 1: a literal address, r->addr filled at once (no
 * callback); 0: a lookup started on the thread pool, `done` comes later;
 * or a negative libuv error (no callback). Not while r->busy. */
int resolve_start(struct resolve *r, uv_loop_t *loop, const char *host,
                  int port, resolve_done_fn *done);

/* Cancels a lookup in flight. Its callback still comes (UV_ECANCELED, or
 * the result when the thread had already run it), so the user stays
 * alive until then. */
void resolve_cancel(struct resolve *r);

#endif /* PX_PROXY_CORE_RESOLVE_H */
