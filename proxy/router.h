/* Routing: validate -> classify -> dispatch, in a fixed order (STYLE.md 2.4
 * step 4): lookup, arity, auth, connection class, then local handler,
 * private upstream or shared upstream. */
#ifndef PX_PROXY_ROUTER_H
#define PX_PROXY_ROUTER_H

struct req;

/* Dispatches a request already linked in its client's FIFO. May complete and
 * free `req`: do not touch it after this call. */
void router_dispatch(struct req *req);

/* Sends `req` to its client's private upstream, opening one if needed. */
void router_send_private(struct req *req);

/* Sends `req` upstream: the private connection if the client has one, else
 * the client's shared connection. */
void router_forward(struct req *req);

#endif /* PX_PROXY_ROUTER_H */
