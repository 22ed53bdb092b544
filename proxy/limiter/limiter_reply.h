/* The replies of the limiter commands that carry the five integers of
 * redis-cell (CL.THROTTLE, LIMITER CHECK and PEEK), and the forms LIMITER
 * CHECK|PEEK ... MS and HEADERS give them:
 *
 *   MS       retry_after and reset_after in milliseconds (rl_ms)
 *   HEADERS  the five integers, then header name/value pairs as bulk
 *            strings (RateLimit-Policy, RateLimit, and Retry-After when
 *            limited: ratelimit_headers.h), one flat array in RESP2 and
 *            RESP3 alike, so one client code reads both */
#ifndef PX_PROXY_LIMITER_LIMITER_REPLY_H
#define PX_PROXY_LIMITER_LIMITER_REPLY_H

#include <stdint.h>

struct buf;
struct req;
struct rl_decision;
struct store_check;

/* The form of a LIMITER CHECK|PEEK reply (bits). */
#define LIMITER_REPLY_MS      1u /* the two durations in milliseconds */
#define LIMITER_REPLY_HEADERS 2u /* the RateLimit header pairs follow */

/* Replies the five integers `v` to `req` (copied at once). */
void limiter_reply_ints(struct req *req, const int64_t v[5]);

/* Appends to `out` the reply, in form `form`, of the decided check `c`
 * whose reply decision is `agg` (durations in ns) and whose binding limit
 * is c->lim[bind] (limiter_aggregate_check_ns; c->n when none binds: no
 * RateLimit pair). Shadow levels are in no header: they never bind, and a
 * client is not held to them. No header at all when every level is
 * shadow. */
void limiter_reply_check(struct buf *out, const struct store_check *c,
                         const struct rl_decision *agg, unsigned bind,
                         unsigned form);

#endif /* PX_PROXY_LIMITER_LIMITER_REPLY_H */
