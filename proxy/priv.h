/* A client's private connection: the upstream that carries its Redis-side
 * state (sess.h) or a call that would hold a shared connection (a blocking
 * command, MONITOR, SCRIPT DEBUG, a replication tunnel). Taken from the
 * node's idle pool (or opened) on demand, refused past
 * private_max_per_node, given back once no state is left. In cluster mode a
 * tracking client has one more on each other node it reads from (its aux
 * upstreams), so invalidations come from every node.
 *
 * Sending on it is priv_send.h's. */
#ifndef PX_PROXY_PRIV_H
#define PX_PROXY_PRIV_H

#include <stddef.h>

struct client;
struct node;
struct req;
struct upstream;

/* It tells its client what a private upstream did through c->ops
 * (client_ops.h): this module sits below client.c. */

/* A command of `c` was refused (the command policy, the key guard) inside
 * its transaction: EXEC must abort (sess_tx_refused), on the node too
 * when MULTI reached it already. */
void priv_tx_refused(struct client *c);

/* A private upstream of `c` to `node` (from the node's idle pool, or
 * new), telling `c` what happens on it. The caller keeps it (c->priv, or
 * an aux one). NULL when the node's clients hold private_max_per_node
 * already (counted in INFO): the caller answers with priv_refuse. */
struct upstream *priv_take(struct client *c, struct node *node);

/* Sends a one-word command of the proxy's own (MULTI, GET) on the private
 * upstream of `c`; its reply is dropped. */
void priv_swallowed(struct client *c, const char *word);

/* Answers `req` with the error of a refused private upstream. */
void priv_refuse(struct req *req);

/* Gives the private upstream of `c` back (to the node's idle pool when it
 * can be reset, else closed). */
void priv_release(struct client *c);

/* Called after each reply on the private upstream: releases it once no
 * connection state is left. */
void priv_maybe_release(struct client *c);

/* The private upstream `up` of `c` (its priv, or an aux one) failed or was
 * released. */
void priv_gone(struct client *c, struct upstream *up, int failed);

/* Cluster mode, a tracking client: its private upstream on `node` that
 * tracks like the first one (opened and told CLIENT TRACKING on first), or
 * NULL when `node` is at private_max_per_node. */
struct upstream *priv_aux_for(struct client *c, struct node *node);

/* Where a tracking client's command for `node` must go so that the keys
 * it reads are tracked: its private upstream there, an aux one, or NULL
 * (not tracking, tracking that cannot span nodes: REDIRECT, or no aux
 * upstream to be had: private_max_per_node). */
struct upstream *priv_tracking_upstream(struct client *c, struct node *node);

/* Gives back every aux upstream of `c` (tracking ended or the client
 * left). */
void priv_aux_release(struct client *c);

#endif /* PX_PROXY_PRIV_H */
