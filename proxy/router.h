/* Routing: validate -> classify -> dispatch, in a fixed order
 * (docs/ARCHITECTURE.md): lookup, arity, auth, connection class, then local
 * handler, private upstream or shared upstream. */
#ifndef PX_PROXY_ROUTER_H
#define PX_PROXY_ROUTER_H

struct req;

/* Dispatches a request already linked in its client's FIFO. May complete and
 * free `req`: do not touch it after this call. */
void router_dispatch(struct req *req);

struct node;

struct client;

/* True when the request `c` holds back (c->order_held: it must follow
 * the answers to the client's earlier requests of another kind, sent on
 * other connections) may go on now (req_resume). */
int router_order_ready(const struct client *c);

/* Sends `req` upstream: the private connection if the client has one, else
 * the client's shared connection. */
void router_forward(struct req *req);

#endif /* PX_PROXY_ROUTER_H */
