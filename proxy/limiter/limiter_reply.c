/* The replies of the limiter commands (see limiter_reply.h). */
#include "proxy/limiter/limiter_reply.h"

#include "parser/resp_enc.h"
#include "proxy/core/req.h"

void limiter_reply_ints(struct req *req, const int64_t v[5])
{
    long long ll[5];
    char out[RESP_PUT_INTS_SIZE(5)];
    int k;

    for (k = 0; k < 5; k++) {
        ll[k] = (long long)v[k];
    }
    /* On the stack: the client copies it straight to its output. */
    req_reply(req, out, resp_put_ints(out, ll, 5));
}
