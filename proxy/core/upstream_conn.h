/* The upstream connection's state (struct upstream), apart from its
 * functions (upstream.h), so the files that make up the upstream module
 * (upstream.c, upstream_setup.c) share it without importing each other.
 * What the fields mean is upstream.h's design note. */
#ifndef PX_PROXY_CORE_UPSTREAM_CONN_H
#define PX_PROXY_CORE_UPSTREAM_CONN_H

#include <stdint.h>
#include <uv.h>

#include "parser/buf.h"
#include "proxy/core/downlog.h"
#include "proxy/core/queue.h"
#include "proxy/core/req.h"
#include "proxy/core/resolve.h"
#include "proxy/core/wq.h"

struct client;
struct core;
struct node;
struct req;
struct resp_framer;
struct upstream;

/* What an upstream tells the one who opened it, installed with it (the
 * cluster for shared and pooled connections, the client for its private
 * ones). Any entry may be NULL. */
struct metrics_node;

struct upstream_ops {
    /* Bytes that answer no request: a RESP3 push, a message of a
     * subscription, the replication stream of a tunnel. NULL: a push is
     * dropped, and any other frame nobody asked for fails the
     * connection. */
    void (*push)(struct upstream *up, const char *p, size_t n);
    /* Every reply frame, before it is matched to its request. */
    void (*frame)(struct upstream *up, const char *p, size_t n);
    /* An error reply to `req`, before it is delivered. Returns 1 when it
     * took `req` (a redirection followed, or an error of its own made). */
    int (*error)(struct upstream *up, struct req *req, const char *frame,
                 size_t len);
    /* A read pass delivered its replies (a good time to give the
     * connection back). */
    void (*idle)(struct upstream *up);
    /* A shared connection was lost; it reconnects after a backoff. */
    void (*down)(struct upstream *up);
    /* The connection is closed for good (`failed`: by an error). */
    void (*gone)(struct upstream *up, int failed);
};

enum upstream_state {
    UP_IDLE,       /* not connected; waiting for the backoff timer */
    UP_CONNECTING, /* resolving, then connecting: requests queue */
    UP_READY,      /* connected */
    UP_CLOSING,    /* socket closing; fails requests fast */
    UP_DEAD,       /* closing for good: freed by the last close callback */
};

struct upstream {
    uv_tcp_t tcp;               /* embedded socket */
    uv_timer_t timer;           /* connect timeout, then reconnect backoff */
    uv_connect_t connect_req;   /* embedded connect request */
    struct sockaddr_storage sa; /* address of the last attempt */
    struct resolve res;         /* embedded: the host's lookup, again at
                                   each connection attempt */
    unsigned addr_next;         /* index in res.addr of the next attempt's
                                   address (moves on when one fails) */
    unsigned addr_left;         /* addresses of this lookup not yet tried
                                   in this attempt */
    char host[256];             /* the node's host as configured or as the
                                   cluster announces it (a name or an
                                   address): what is resolved, and the
                                   name a TLS certificate is checked for */
    int port;                   /* TCP port */
    char name[300];             /* "host:port", for logs and errors */
    struct downlog *dlog;       /* borrowed: its node's outage log (shared
                                   by the node's connections), else
                                   &own_dlog */
    struct downlog own_dlog;    /* the outage log of a lone connection */
    enum upstream_state state;  /* see above */
    struct queue inflight;      /* struct req owed a reply, FIFO */
    struct buf in;              /* owned: bytes read, not yet consumed */
    struct resp_framer *fr;     /* owned: reply framing over `in` */
    struct tls_conn *tls;       /* owned: the connection's TLS (upstream_tls)
                                   from the TCP connect on, NULL otherwise;
                                   UP_CONNECTING lasts until its handshake
                                   completes */
    struct wq wq;               /* request bytes to write */
    struct queue link;          /* link in server.upstreams */
    struct queue dirty_node;    /* link in server.dirty_upstreams */
    struct core *core;          /* borrowed: loop, configuration, lists */
    const struct upstream_ops *ops; /* borrowed: its opener's callbacks */
    void *ctx;                      /* borrowed: the ops' context (the
                                       cluster) */
    struct client *owner;           /* borrowed, opaque here: the client of a
                                       private upstream, NULL while pooled or
                                       lent */
    struct node *node;          /* borrowed: the node of a shared upstream */
    struct node *home;          /* borrowed: the node whose idle pool holds
                                   this private upstream, or NULL */
    struct queue idle_link;     /* link in home->idle while pooled */
    struct node *held_on;       /* borrowed: the node whose `held` list
                                   counts this private upstream while a
                                   client holds it, or NULL */
    struct queue held_link;     /* link in held_on->held */
    struct queue aux_link;      /* link in owner->aux (cluster tracking) */
    struct queue tunnel_wait;   /* struct req (unode): a SYNC parked
                                   (req_park) until the replies owed
                                   before it are in */
    struct queue rid_wait;      /* struct req (unode) parked until rid is
                                   known */
    uint64_t rid;               /* Redis's CLIENT ID of a private upstream,
                                   0 until known */
    unsigned backoff_ms;        /* reconnect delay before jitter: doubles
                                   while attempts fail, reset once one
                                   served */
    unsigned retry_ms;          /* the delay of the pending reconnect */
    uint64_t ready_ms;          /* loop time the connection was made */
    uint64_t rng;               /* xorshift state of the jitter */
    struct metrics_node *mnode; /* borrowed from core->metrics: its node's
                                   counters, or NULL */
    char last_err[160];         /* why the last attempt failed */
    unsigned limiter_owed;      /* requests of the limiter (req->limiter)
                                   in `inflight` */
    uint64_t limiter_answers;   /* replies delivered to such requests */
    uint64_t limiter_turned;    /* limiter_answers when the limiter last
                                   took its turn (upstream_limiter_took) */
    uint64_t last_read_ms;      /* loop time bytes last arrived */
    int pending_closes;         /* handles still closing (free at 0) */
    int proto;                  /* RESP_PROTO2 or RESP_PROTO3 */
    unsigned tcp_open : 1;      /* tcp handle initialised, not closed */
    unsigned next_addr : 1;     /* its socket closes to try the lookup's
                                   next address in the same attempt */
    unsigned priv : 1;          /* private: never shared, never reconnects */
    unsigned served : 1;        /* this connection got a reply that was not
                                   an error: the node takes clients */
    unsigned tracked : 1;       /* private, had CLIENT TRACKING on: Redis's
                                   tracking table still names it for the
                                   keys it read, so it is never reused */
    unsigned tunnel : 1;        /* private, after SYNC/PSYNC: every byte
                                   read goes to the owner as it is */
    unsigned oneshot : 1;       /* private, lent for the requests in flight
                                   (SCRIPT KILL): pooled when they are done */
    unsigned limiter : 1;       /* logs in as limiter_user: carries the
                                   limiter's calls only, never a client's */
    unsigned sentinel : 1;      /* private, to a Redis Sentinel: logs in as
                                   sentinel_user, no other setup */
};

/* Flags of a new upstream. */
#define UPSTREAM_LIMITER  1u /* a limiter connection (see `limiter`) */
#define UPSTREAM_SENTINEL 2u /* a Sentinel connection (see `sentinel`) */

#endif /* PX_PROXY_CORE_UPSTREAM_CONN_H */
