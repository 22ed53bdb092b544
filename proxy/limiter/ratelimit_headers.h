/* The IETF RateLimit header fields of LIMITER CHECK|PEEK ... HEADERS, as
 * draft-ietf-httpapi-ratelimit-headers-11 defines them (Structured Field
 * values, RFC 9651):
 *
 *   RateLimit-Policy: "org:*";q=100;w=60, "org:*:user:*";q=10;w=1
 *   RateLimit: "org:*:user:*";r=0;t=1
 *   Retry-After: 1
 *
 * One policy item per limit of a real (not shadow) level, named by its
 * rule (an sf-string: the pattern in double quotes, `"` and `\` escaped
 * with `\`, a byte outside printable ASCII written `?`; a level with more
 * than one limit names them "<rule>#1", "<rule>#2", ...), with its quota
 * q and window w in seconds. Pure: text from numbers, no loop, no I/O. */
#ifndef PX_PROXY_LIMITER_RATELIMIT_HEADERS_H
#define PX_PROXY_LIMITER_RATELIMIT_HEADERS_H

#include <stddef.h>
#include <stdint.h>

#include "parser/buf.h"

struct limits_limit;

/* The largest sf-integer (15 digits): larger numbers are written as it. */
#define RATELIMIT_HEADERS_MAX_INT INT64_C(999999999999999)

/* One item of RateLimit-Policy: a limit of a real level. */
struct ratelimit_headers_item {
    const char *name; /* borrowed: the level's rule pattern */
    size_t name_len;  /* bytes of name */
    unsigned nth;     /* 0: its level's only limit; else its number, 1.. */
    int64_t quota;    /* q: what the identity may do at once */
    int64_t window_s; /* w: seconds until a spent quota is whole again, or
                         -1 (never spent: an infinite refill; no w) */
};

/* Fills `it`'s quota and window from limit `l` (name and nth are the
 * caller's): q is the limit redis-cell's reply reports (gcra max_burst +
 * 1, a bucket's capacity or size, a window's max) and w the time a spent
 * quota takes to come back whole (gcra (max_burst + 1) * period / count,
 * a token bucket capacity / refill_per_sec, a leaky bucket size / drip_size
 * * drip, a window its window), rounded up to whole seconds, at least 1. */
void ratelimit_headers_item_of(struct ratelimit_headers_item *it,
                               const struct limits_limit *l);

/* Whole seconds of a duration rounded up (a client never retries early);
 * 0 for a negative one. */
int64_t ratelimit_headers_seconds(int64_t ns);

/* Appends the value of RateLimit-Policy for the n >= 1 items. 0, or -1
 * when out of memory. */
int ratelimit_headers_policy(struct buf *out,
                             const struct ratelimit_headers_item *items,
                             unsigned n);

/* Appends the value of RateLimit for the binding item `bind`: what remains
 * of it (r, at least 0) and the seconds until it is whole (t, from
 * reset_ns, rounded up). 0, or -1 when out of memory. */
int ratelimit_headers_ratelimit(struct buf *out,
                                const struct ratelimit_headers_item *bind,
                                int64_t remaining, int64_t reset_ns);

/* Appends the value of Retry-After (delay-seconds, rounded up) for a
 * retry_after of `ns` >= 0. 0, or -1 when out of memory. */
int ratelimit_headers_retry_after(struct buf *out, int64_t ns);

#endif /* PX_PROXY_LIMITER_RATELIMIT_HEADERS_H */
