/* Locating a client's command: the node that serves it, from the routing
 * decision (core/route.h) over the proxy's cluster view, with the key
 * guard that keeps the limiter's keys from ordinary clients. */
#ifndef PX_PROXY_LOCATE_H
#define PX_PROXY_LOCATE_H

struct node;
struct req;

/* Classifies `req` against the node's key table as it is now (once after
 * its lookup, again when it goes on after waiting for the table): the
 * facts every question below reads. */
void locate_classify(struct req *req);

/* The node that must serve `req`, from the routing decision. Completes
 * `req` with an error and returns NULL when there is none (no upstream,
 * keys in several slots, an uncovered slot); a command that splits by
 * slot is taken by merge_split (NULL too). */
struct node *locate_node(struct req *req);

/* The key guard alone, for a command bound for a connection already
 * chosen (the client's private one): 1 when allowed, else 0 after
 * replying with the limiter's -NOPERM (which may free `req`). */
int locate_key_allowed(struct req *req);

/* Answers `req` with the limiter's -NOPERM for its key prefix. */
void locate_reply_noperm(struct req *req);

#endif /* PX_PROXY_LOCATE_H */
