/* One client connection: read -> parse -> dispatch, and replies back in
 * request order, in the protocol the client chose with HELLO (RESP2 until
 * it says HELLO 3).
 *
 * The session belongs to cellgate: name, lib-name/lib-ver, protocol, reply
 * mode, db 0 and flags live here, so commands that only set or read them
 * never reach Redis and never bind a connection. Only real server-side
 * state (a transaction, WATCH, subscriptions, a blocking call, MONITOR,
 * CLIENT TRACKING, SELECT n) holds a private upstream, and only while it
 * lasts. */
#ifndef PX_PROXY_CLIENT_H
#define PX_PROXY_CLIENT_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "proxy/core/queue.h"
#include "proxy/core/wq.h"
#include "proxy/sess.h"

struct hmap;
struct node;
struct client_ops;
struct req;
struct resp_cmd;
struct resp_reader;
struct tls_conn;
struct upstream;

struct client {
    uint64_t id;                   /* unique, from 1 */
    uint64_t lane;                 /* picks its shared connection of each
                                      node (lane % upstream_pool): its id at
                                      first, moved only while it owes
                                      nothing, so its commands keep their
                                      order */
    uv_tcp_t tcp;                  /* embedded socket */
    struct resp_reader *rd;        /* owned: request parser */
    struct queue reqs;             /* struct req, arrival order */
    unsigned nreqs;                /* length of reqs */
    unsigned lim_owed;             /* its limiter requests (CL.THROTTLE,
                                      LIMITER) not answered yet: calls the
                                      limiter may still hold back for a
                                      batch */
    unsigned fwd_owed;             /* its requests sent to Redis as they are,
                                      not answered yet */
    struct req *order_held;        /* borrowed (it is in reqs): the next
                                      request, parsed, not dispatched until
                                      the requests of another kind before it
                                      are answered (router_order_ready);
                                      it goes on at its req->resume, past
                                      the router's checks; nothing after
                                      it is parsed */
    struct wq wq;                  /* reply bytes */
    struct tls_conn *tls;          /* owned: a client of tls_listen's TLS
                                      (client_tls.c), else NULL */
    struct queue hs_link;          /* link in server.tls_handshakes while
                                      its handshake runs */
    size_t held;                   /* bytes kept in the replies of c->reqs
                                      (completed replies waiting for an
                                      earlier one, relayed pushes): counted
                                      against the output limit */
    uint64_t out_total;            /* bytes ever appended to wq.out */
    uint64_t head_end;             /* out_total at the end of the reply in
                                      transit, the one reply not counted
                                      against the output limit */
    struct queue node;             /* link in server.clients */
    struct queue dirty_node;       /* link in server.dirty_clients */
    struct upstream *priv;         /* owned: private upstream, or NULL */
    struct queue aux;              /* owned: cluster mode, a tracking client's
                                      private upstreams on the other nodes
                                      (struct upstream, aux_link) */
    struct resp_cmd *tracking_cmd; /* owned: the CLIENT TRACKING on that
                                      each aux upstream replays, or NULL */
    char *name;                    /* owned: CLIENT SETNAME, or NULL */
    char *lib_name;                /* owned: CLIENT SETINFO LIB-NAME, or NULL */
    char *lib_ver;                 /* owned: CLIENT SETINFO LIB-VER, or NULL */
    int proto;                     /* RESP_PROTO2 or RESP_PROTO3 (HELLO) */
    struct sess sess;              /* its Redis-side state (sess.h) */
    struct hmap *subs_map;         /* owned, cluster mode: the channels and
                                      patterns subscribed (pubsub.c) */
    char *subs_node;               /* owned: the node they live on */
    uint64_t ctime_ms;             /* loop time of accept */
    uint64_t last_ms;              /* loop time of the last command */
    char last_cmd[48];             /* the last command, "client|list" style */
    unsigned authed : 1;           /* passed AUTH (or none required) */
    unsigned admin : 1;            /* authenticated as admin */
    unsigned closing : 1;          /* client_close() ran */
    unsigned input_done : 1;       /* QUIT or protocol error: parse no more */
    unsigned quitting : 1;         /* close once the output is written */
    unsigned paused : 1;           /* reading stopped (pipeline limit) */
    unsigned no_evict : 1;         /* CLIENT NO-EVICT on (shown only) */
    unsigned readonly : 1;         /* READONLY (shown only: replicas are not
                                      read from) */
    unsigned reply_off : 1;        /* CLIENT REPLY OFF: replies are dropped */
    unsigned skip_next : 1;        /* CLIENT REPLY SKIP: the next command's
                                      reply is dropped */
    unsigned rid_wait : 1;         /* CLIENT TRACKING ... REDIRECT waits for the
                                      target's Redis id: parse nothing more */
    unsigned proto_wait : 1;       /* the protocol changed while replies were
                                      owed: parse nothing more until they are
                                      out (the next commands use other
                                      connections) */
    unsigned handshaking : 1;      /* TLS: the handshake runs; nothing is
                                      parsed nor written but its records */
    /* Borrowed (static): how the modules below client.c (priv.c,
     * session.c) act on this client (client_ops.h); set by client_accept. */
    const struct client_ops *ops;
};

/* Accepts a connection from the listener. */
void client_accept(uv_stream_t *listener);

/* Closes the client (idempotent). Owed requests become orphans. */
void client_close(struct client *c);

/* Stops reading and parsing: nothing the client sends after this point is
 * executed (QUIT, protocol errors). Replies already owed still go out. */
void client_stop_reading(struct client *c);

/* A new request of `c` owning `cmd` (may be NULL: a reply made here),
 * appended to its FIFO before it is dispatched, so it can never be
 * overtaken. Its completion callback writes the reply out in order. */
struct req *client_req_new(struct client *c, struct resp_cmd *cmd);

/* Relays bytes that no request asked for (pub/sub messages) in order. */
void client_push(struct client *c, const char *p, size_t n);

/* Moves finished replies to the socket; resumes reading when possible.
 * Called by the server's flush pass. */
void client_flush(struct client *c);

/* Looks at a reply frame from the private upstream and tracks the
 * subscription counts carried by (un)subscribe confirmations. */
void client_note_priv_frame(struct client *c, const char *p, size_t n);

/* Switches the protocol of `c` (HELLO, RESET). Its private upstream, if
 * any, follows; commands parsed after this one wait until the replies owed
 * before it are out, so no command overtakes an earlier one on another
 * connection. */
void client_set_proto(struct client *c, int proto);

/* Forgets the state that lived on the private upstream (transaction,
 * WATCH, subscriptions, db, tracking, MONITOR...). */
void client_clear_state_flags(struct client *c);

#endif /* PX_PROXY_CLIENT_H */
