/* The limiter's key names kept from clients that are not admin, applied to
 * their requests: KEYS, SCAN and CLUSTER GETKEYSINSLOT filtered, RANDOMKEY
 * drawn again, the same inside MULTI refused; and to what Redis sends them
 * unasked: invalidations (CLIENT TRACKING, BCAST above all) lose the
 * limiter's keys. The decisions are hidden_filter.h's. */
#ifndef PX_PROXY_HIDDEN_H
#define PX_PROXY_HIDDEN_H

#include <stddef.h>

struct client;
struct req;

/* Called for every request of an ordinary client (not admin) that the
 * command policy allows, before anything else serves it: 1 when `req` goes on
 * (a reply filter or a retry hook set where it needs one), 0 after replying
 * with a refusal. */
int hidden_admit(struct req *req);

/* Relays to `c` the push or message p[0..n) of one of its private
 * connections (its own tracking's, or a tracker's that redirects to it),
 * an invalidation without the limiter's keys, or nothing when they were
 * all it named; an admin's as it is. */
void hidden_push(struct client *c, const char *p, size_t n);

/* The prefix a merged KEYS or SCAN reply of `req` must leave out: the
 * limiter's, for an ordinary client's; NULL for anything else. */
const char *hidden_prefix_for(const struct req *req);

#endif /* PX_PROXY_HIDDEN_H */
