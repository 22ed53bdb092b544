/* One TCP connection to one Redis node.
 *
 * Shared upstreams carry many clients' requests (pipelined, one write per
 * loop turn) and reconnect with backoff forever. A private upstream belongs to
 * one client (transactions, pub/sub, blocking calls, SELECT n) while that
 * state lasts; then it goes back to its node's idle pool, reset with RESET
 * (see cluster_private_put), or is closed. A private upstream never
 * reconnects: it dies with its first error.
 *
 * Every connection speaks one protocol (`proto`): RESP3 ones say HELLO 3
 * right after AUTH, so replies reach RESP3 clients byte for byte as Redis
 * wrote them. On a RESP3 connection a push frame (`>`) answers no request:
 * it goes to the owning client (pub/sub messages, tracking invalidations),
 * and is dropped on a shared connection, where nobody asked for one. */
#ifndef PX_PROXY_UPSTREAM_H
#define PX_PROXY_UPSTREAM_H

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
    struct queue tunnel_wait;   /* struct req (unode): a SYNC waiting for
                                   the replies owed before it */
    struct queue rid_wait;      /* struct req (unode) waiting for rid */
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

/* A shared upstream of `node` at host:port (named "host:port" in logs and
 * errors) speaking `proto` (RESP_PROTO2 or RESP_PROTO3), with `flags`
 * (UPSTREAM_*), telling `ops`, connecting at once. A host name is
 * resolved at each attempt, off the loop; requests queue meanwhile as
 * while connecting, and a name that does not resolve fails the attempt
 * like a node that is down (backoff, then again). */
struct upstream *upstream_new(struct core *core, const char *host, int port,
                              struct node *node, int proto, unsigned flags,
                              const struct upstream_ops *ops);

/* A private upstream to the node at host:port, speaking `proto`, with
 * `flags`, telling `ops`, connecting at once. Its opener sets `owner`. */
struct upstream *upstream_new_private(struct core *core, const char *host,
                                      int port, int proto, unsigned flags,
                                      const struct upstream_ops *ops);

/* Queues one of the proxy's own requests on `up` behind what is queued:
 * called from the core's on_setup, it goes ahead of every other request of
 * the new connection. `fn` gets its reply (with `ctx` as the request's),
 * which no client sees. */
void upstream_queue_first(struct upstream *up, int argc,
                          const char *const *argv, const size_t *lens,
                          req_reply_fn *fn, void *ctx);

/* Queues `up` for the next flush pass. */
void upstream_mark(struct upstream *up);

/* Queues RESET on an idle private upstream (and AUTH again when
 * configured: RESET logs the connection out), so the next client finds it
 * as new. Frames that arrive before +RESET (messages of a subscription
 * the reset ends) are dropped. */
void upstream_reset(struct upstream *up);

/* Queues `req` (its command's wire bytes) on `up`. If `up` cannot take
 * requests now, completes `req` with an error at once (may free it). */
void upstream_send(struct upstream *up, struct req *req);

/* Queues `req` on `up` when Redis answers it with RESP3 pushes only
 * (SUBSCRIBE and the rest of the family on a RESP3 connection): its bytes are
 * written, but it waits for no reply of its own, and completes at once with
 * an empty reply; the pushes reach the client as they arrive. May free
 * `req`. */
void upstream_send_pushed(struct upstream *up, struct req *req);

/* Queues SYNC/PSYNC `req` on a private upstream: once every reply owed
 * before it has arrived, the connection becomes a tunnel (the replication
 * stream goes to the owner byte for byte) and `req` completes with no
 * reply of its own. On a tunnel already, `req` (REPLCONF ACK...) is
 * written and completes at once. May free `req`. */
void upstream_send_tunnel(struct upstream *up, struct req *req);

/* Holds `req` until the private upstream knows its Redis id, then calls
 * req->resume(req) (or fails `req` when the connection dies first). */
void upstream_wait_rid(struct upstream *up, struct req *req);

/* Switches a private upstream to `proto` (the client said HELLO): queues a
 * HELLO whose reply is dropped, ahead of the client's next commands. */
void upstream_switch_proto(struct upstream *up, int proto);

/* Nagle's rule for the limiter's part-filled batches (its full ones go
 * at once): 1 when `up` owes the limiter nothing, or has delivered a reply
 * to it since the limiter last took its turn there; else 0, and the batch
 * waits for that reply, gathering the calls that arrive meanwhile. An
 * idle connection never delays a call; a busy one sends one part-filled
 * batch per reply, as Redis takes them, instead of many small ones. */
int upstream_limiter_turn(const struct upstream *up);

/* The limiter sent part-filled batches on `up` (its turn): the next wait
 * for a reply delivered after now. */
void upstream_limiter_took(struct upstream *up);

/* True when connected. */
int upstream_is_ready(const struct upstream *up);

/* True when a request sent now would be written (connected or connecting),
 * false while it waits to reconnect and refuses requests. */
int upstream_is_usable(const struct upstream *up);

/* Fails every owed request with `why` and closes for good. */
void upstream_destroy(struct upstream *up, const char *why);

/* Writes the queued bytes (called by the server's flush pass). */
void upstream_flush(struct upstream *up);

/* Writes every upstream queued in core->dirty_upstreams, emptying it. */
void upstream_flush_dirty(struct core *core);

/* True when `up` owes replies and has been silent for a while since the
 * oldest was sent: something long runs ahead of them (a slow script). */
int upstream_is_stalled(const struct upstream *up, uint64_t now_ms);

/* Fails the connection when its oldest owed reply is late: no byte arrived
 * for `timeout_ms` since that request was sent or since the previous bytes,
 * whichever is later. A long pipeline whose replies keep streaming is not
 * late. Shared upstreams only; called from the cron. */
void upstream_check_timeout(struct upstream *up, uint64_t now_ms,
                            unsigned timeout_ms);

#endif /* PX_PROXY_UPSTREAM_H */
