/* The replies of the limiter commands that carry the five integers of
 * redis-cell (CL.THROTTLE, LIMITER CHECK and PEEK). */
#ifndef PX_PROXY_LIMITER_LIMITER_REPLY_H
#define PX_PROXY_LIMITER_LIMITER_REPLY_H

#include <stdint.h>

struct req;

/* Replies the five integers `v` to `req` (copied at once). */
void limiter_reply_ints(struct req *req, const int64_t v[5]);

#endif /* PX_PROXY_LIMITER_LIMITER_REPLY_H */
