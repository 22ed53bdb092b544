/* The limiter's key names kept from clients that are not admin, applied to
 * their requests: KEYS, SCAN and CLUSTER GETKEYSINSLOT filtered, RANDOMKEY
 * drawn again, the same inside MULTI and CLIENT TRACKING BCAST refused.
 * The decisions are hidden_filter.h's. */
#ifndef PX_PROXY_HIDDEN_H
#define PX_PROXY_HIDDEN_H

struct req;

/* Called for every request of an ordinary client (not admin) that the
 * command policy allows, before anything else serves it: 1 when `req` goes on
 * (a reply filter or a retry hook set where it needs one), 0 after replying
 * with a refusal. */
int hidden_admit(struct req *req);

/* The prefix a merged KEYS or SCAN reply of `req` must leave out: the
 * limiter's, for an ordinary client's; NULL for anything else. */
const char *hidden_prefix_for(const struct req *req);

#endif /* PX_PROXY_HIDDEN_H */
