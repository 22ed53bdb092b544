/* LIMITER ADJUST (see limiter_adjust.h).
 *
 * Design: ADJUST is the tree's call (limiter_tree.c resolves the path and
 * builds one struct store_check, op STORE_ADJUST) with two differences
 * the stores carry out: every limit moves by c->delta, none refused, and
 * the decisions the store returns are those of a PEEK of cost 1 after the
 * change (c->cost is 1), so the reply is built, aggregated and formatted
 * exactly as a PEEK's. Each store group (one hash tag: one script call in
 * Redis, the whole path in the embedded store) validates every limit
 * before it writes anything; across groups, one that fails after another
 * applied is undone by the opposite delta (store ops->refund), best
 * effort. This file only parses; nothing here does I/O. */
#include "proxy/limiter/limiter_adjust.h"

#include "algorithms/gcra.h"
#include "parser/resp.h"
#include "proxy/core/req.h"

int limiter_adjust_parse(struct req *req, int64_t *delta)
{
    const char *p;
    size_t len;

    if (req->cmd->argc < 4) {
        req_reply_error(req, "wrong number of arguments for 'limiter|adjust' "
                             "command");
        return -1;
    }
    p = resp_cmd_arg(req->cmd, 3, &len);
    if (gcra_parse_int64(p, len, delta) != GCRA_OK ||
        *delta > LIMITER_ADJUST_MAX || *delta < -LIMITER_ADJUST_MAX) {
        req_reply_error(req, "value is not an integer or out of range");
        return -1;
    }
    return 0;
}

int limiter_adjust_applies(enum limits_algo a)
{
    (void)a; /* every algorithm of this tree is a cost */
    return 1;
}
