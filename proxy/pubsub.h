/* Cluster mode: where cellgate's subscribers are, so PUBLISH counts them.
 *
 * In a Redis Cluster a message reaches every node's subscribers, but
 * PUBLISH counts only those of the node that got it. cellgate sends a
 * channel's publishers and subscribers to the channel's node, yet a client
 * that subscribes to several channels (or to patterns) holds them all on
 * its one private connection. This registry knows, for each channel and
 * pattern cellgate's clients subscribed to, on which node and how many, so
 * PUBLISH can add the subscribers held elsewhere: its count is what one
 * Redis would answer for cellgate's subscribers. */
#ifndef PX_PROXY_PUBSUB_H
#define PX_PROXY_PUBSUB_H

#include <stddef.h>

struct client;
struct req;

/* `c` subscribed (add = 1) or unsubscribed (0) to a channel or a pattern
 * `name` on its private connection to the node named `node`. */
void pubsub_note(struct client *c, const char *node, int pattern, int add,
                 const char *name, size_t len);

/* Every subscription of `c` ended (its private connection went away or
 * was reset). */
void pubsub_client_gone(struct client *c);

/* Subscriptions of cellgate's clients to channel `ch`, or to a pattern
 * matching it, held on nodes other than `node`. */
long long pubsub_held_elsewhere(const char *node, const char *ch, size_t len);

/* PUBLISH's reply filter (req->filter), cluster mode: the node's count
 * plus req->filter_arg, the subscribers cellgate holds on other nodes
 * (pubsub_held_elsewhere). */
void pubsub_publish_reply(struct req *req, const char *frame, size_t len);

/* Frees the registry (shutdown). */
void pubsub_free(void);

#endif /* PX_PROXY_PUBSUB_H */
