/* Sending a client's command on its private connection (priv.h), taking
 * it first when the client has none. Handlers that must send on it call
 * these: a call downward, never back into the router. */
#ifndef PX_PROXY_PRIV_SEND_H
#define PX_PROXY_PRIV_SEND_H

struct node;
struct req;

/* Sends `req` to its client's private upstream, taking one (of the node of
 * its keys) if needed. In cluster mode MULTI is answered here and sent
 * with the transaction's first command, to that command's node. May
 * complete `req` (a refusal, a deferred transaction's reply). */
void priv_send(struct req *req);

/* The same, taking the private upstream on `node` when the client has
 * none. */
void priv_send_to(struct req *req, struct node *node);

/* The key guard for a command bound for the client's private connection
 * (locate_node applies it on the way to shared ones). 1 when allowed; else
 * replies, and a transaction open upstream fails at EXEC (priv_tx_refused). */
int priv_send_allowed(struct req *req);

#endif /* PX_PROXY_PRIV_SEND_H */
