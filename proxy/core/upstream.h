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

#include "proxy/core/upstream_conn.h"

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
 * `resume` (also when the connection dies first: it finds no id and says
 * so). */
void upstream_wait_rid(struct upstream *up, struct req *req,
                       req_resume_fn *resume);

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
