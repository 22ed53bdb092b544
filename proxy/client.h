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

struct hmap;
struct node;
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
                                      nothing after it is parsed */
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
    long db;                       /* selected database */
    int proto;                     /* RESP_PROTO2 or RESP_PROTO3 (HELLO) */
    unsigned subs;                 /* channels + patterns subscribed */
    struct hmap *subs_map;         /* owned, cluster mode: the channels and
                                      patterns subscribed (pubsub.c) */
    char *subs_node;               /* owned: the node they live on */
    unsigned ssubs;                /* shard channels subscribed */
    int multi_count;               /* commands queued since MULTI */
    uint64_t ctime_ms;             /* loop time of accept */
    uint64_t last_ms;              /* loop time of the last command */
    char last_cmd[48];             /* the last command, "client|list" style */
    unsigned authed : 1;           /* passed AUTH (or none required) */
    unsigned admin : 1;            /* authenticated as admin */
    unsigned closing : 1;          /* client_close() ran */
    unsigned input_done : 1;       /* QUIT or protocol error: parse no more */
    unsigned quitting : 1;         /* close once the output is written */
    unsigned paused : 1;           /* reading stopped (pipeline limit) */
    unsigned multi : 1;            /* inside MULTI */
    unsigned multi_deferred : 1;   /* cluster: MULTI answered, not yet sent:
                                      the first command picks the node */
    unsigned tx_failed : 1; /* a deferred transaction had a refused command */
    unsigned watching : 1;  /* WATCH active */
    unsigned sticky : 1;    /* private upstream kept for good (MONITOR,
                               SCRIPT DEBUG, a connection command cellgate
                               does not know) */
    unsigned tracking : 1;  /* CLIENT TRACKING on: private upstream */
    unsigned no_touch : 1;  /* CLIENT NO-TOUCH on: private upstream */
    unsigned no_evict : 1;  /* CLIENT NO-EVICT on (shown only) */
    unsigned readonly : 1;  /* READONLY (shown only: replicas are not
                               read from) */
    unsigned reply_off : 1; /* CLIENT REPLY OFF: replies are dropped */
    unsigned skip_next : 1; /* CLIENT REPLY SKIP: the next command's
                               reply is dropped */
    unsigned monitor : 1;   /* MONITOR: the private upstream streams */
    unsigned rid_wait : 1;  /* CLIENT TRACKING ... REDIRECT waits for the
                               target's Redis id: parse nothing more */
    unsigned redir_target : 1; /* another client's invalidations come to
                                  its private upstream: kept while it
                                  lives */
    unsigned tunnel : 1;       /* SYNC/PSYNC: its private upstream relays the
                                  replication stream; everything it sends
                                  goes there */
    unsigned proto_wait : 1;   /* the protocol changed while replies were
                                  owed: parse nothing more until they are
                                  out (the next commands use other
                                  connections) */
    unsigned push_wait : 1;    /* RESP3: a pub/sub command was sent whose
                                  confirmation push has not arrived yet */
    unsigned handshaking : 1;  /* TLS: the handshake runs; nothing is
                                  parsed nor written but its records */
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

/* Bytes the proxy holds for `c`: written but not taken by the kernel,
 * and kept in c->reqs (what client_max_output_bytes bounds). */
size_t client_output_bytes(const struct client *c);

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

/* The private upstream `up` of `c` (its priv, or an aux one) failed or was
 * released. */
void client_priv_gone(struct client *c, struct upstream *up, int failed);

/* A private upstream of `c` to `node` (from the node's idle pool, or
 * new), telling `c` what happens on it. The caller keeps it (c->priv, or
 * an aux one). NULL when the node's clients hold private_max_per_node
 * already (counted in INFO): the caller answers with
 * client_priv_refuse. */
struct upstream *client_priv_take(struct client *c, struct node *node);

/* Answers `req` with the error of a refused private upstream. */
void client_priv_refuse(struct req *req);

/* Cluster mode, a tracking client: its private upstream on `node` that
 * tracks like the first one (opened and told CLIENT TRACKING on first), or
 * NULL when `node` is at private_max_per_node. */
struct upstream *client_aux_for(struct client *c, struct node *node);

/* Where a tracking client's command for `node` must go so that the keys
 * it reads are tracked: its private upstream there, an aux one, or NULL
 * (not tracking, tracking that cannot span nodes: REDIRECT, or no aux
 * upstream to be had: private_max_per_node). */
struct upstream *client_tracking_upstream(struct client *c, struct node *node);

/* Gives back every aux upstream of `c` (tracking ended or the client
 * left). */
void client_aux_release(struct client *c);

/* True while `c` holds server-side state that lives on its private
 * upstream (transaction, WATCH, subscriptions, SELECT n, tracking, ...). */
int client_has_state(const struct client *c);

/* Gives the private upstream of `c` back (to the node's idle pool when it
 * can be reset, else closed). */
void client_priv_release(struct client *c);

/* Forgets the state that lived on the private upstream (transaction,
 * WATCH, subscriptions, db, tracking, MONITOR...). */
void client_clear_state_flags(struct client *c);

/* The client with id `id`, or NULL. */
struct client *client_by_id(uint64_t id);

/* Called after each reply on the private upstream: releases it once no
 * connection state is left. */
void client_priv_maybe_release(struct client *c);

#endif /* PX_PROXY_CLIENT_H */
