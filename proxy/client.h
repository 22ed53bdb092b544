/* One client connection: read -> parse -> dispatch, and replies back in
 * request order, in the protocol the client chose with HELLO (RESP2 until
 * it says HELLO 3). */
#ifndef PX_PROXY_CLIENT_H
#define PX_PROXY_CLIENT_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "proxy/queue.h"
#include "proxy/wq.h"

struct req;
struct resp_reader;
struct upstream;

struct client {
    uint64_t id;                 /* unique, from 1 */
    uv_tcp_t tcp;                /* embedded socket */
    struct resp_reader *rd;      /* owned: request parser */
    struct queue reqs;           /* struct req, arrival order */
    unsigned nreqs;              /* length of reqs */
    struct wq wq;                /* reply bytes */
    struct queue node;           /* link in server.clients */
    struct queue dirty_node;     /* link in server.dirty_clients */
    struct upstream *priv;       /* owned: private upstream, or NULL */
    char *name;                  /* owned: CLIENT SETNAME, or NULL */
    long db;                     /* selected database */
    int proto;                   /* RESP_PROTO2 or RESP_PROTO3 (HELLO) */
    unsigned subs;               /* channels + patterns subscribed */
    unsigned ssubs;              /* shard channels subscribed */
    unsigned authed : 1;         /* passed AUTH (or none required) */
    unsigned admin : 1;          /* authenticated as admin */
    unsigned closing : 1;        /* client_close() ran */
    unsigned input_done : 1;     /* QUIT or protocol error: parse no more */
    unsigned quitting : 1;       /* close once the output is written */
    unsigned paused : 1;         /* reading stopped (pipeline limit) */
    unsigned multi : 1;          /* inside MULTI */
    unsigned multi_deferred : 1; /* cluster: MULTI answered, not yet sent:
                                    the first command picks the node */
    unsigned tx_failed : 1;  /* a deferred transaction had a refused command */
    unsigned watching : 1;   /* WATCH active */
    unsigned sticky : 1;     /* private upstream kept for good */
    unsigned proto_wait : 1; /* the protocol changed while replies were
                                owed: parse nothing more until they are
                                out (the next commands use other
                                connections) */
    unsigned push_wait : 1;  /* RESP3: a pub/sub command was sent whose
                                confirmation push has not arrived yet */
};

/* Accepts a connection from the listener. */
void client_accept(uv_stream_t *listener);

/* Closes the client (idempotent). Owed requests become orphans. */
void client_close(struct client *c);

/* Stops reading and parsing: nothing the client sends after this point is
 * executed (QUIT, protocol errors). Replies already owed still go out. */
void client_stop_reading(struct client *c);

/* Called by req_reply: `req` of `c` has its reply in req->reply (done). */
void client_req_done(struct client *c, struct req *req);

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

/* The private upstream of `c` failed or was released. */
void client_priv_gone(struct client *c, int failed);

/* Called after each reply on the private upstream: releases it once no
 * connection state is left. */
void client_priv_maybe_release(struct client *c);

#endif /* PX_PROXY_CLIENT_H */
