/* The replies of the limiter commands (see limiter_reply.h). */
#include "proxy/limiter/limiter_reply.h"

#include <string.h>

#include "algorithms/rl.h"
#include "parser/buf.h"
#include "parser/resp_enc.h"
#include "proxy/core/metrics.h"
#include "proxy/core/req.h"
#include "proxy/core/util.h"
#include "proxy/limiter/ratelimit_headers.h"
#include "proxy/limiter/store.h"

/* The names of the header pairs, in the order they go out. */
#define LIMITER_REPLY_POLICY      "RateLimit-Policy"
#define LIMITER_REPLY_RATELIMIT   "RateLimit"
#define LIMITER_REPLY_RETRY_AFTER "Retry-After"

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

/* The five integers `v` as an array of five. */
static void limiter_reply_check_ints(struct buf *out, const int64_t v[5])
{
    int k;

    PX_CHECK_OOM(resp_enc_array_header(out, 5));
    for (k = 0; k < 5; k++) {
        PX_CHECK_OOM(resp_enc_int(out, (long long)v[k]));
    }
}

/* Fills items (room for c->n) from c's real limits; the binding limit's
 * item index in *ibind (n when none). Returns the items filled. */
static unsigned limiter_reply_items(const struct store_check *c, unsigned bind,
                                    struct ratelimit_headers_item *items,
                                    unsigned *ibind)
{
    unsigned i, j, n = 0;

    *ibind = c->n;
    for (i = 0; i < c->n; i++) {
        const struct store_limit *x = &c->lim[i];
        struct ratelimit_headers_item *it = &items[n];
        unsigned same = 0, nth = 0;
        if (x->shadow) {
            continue;
        }
        /* The limits of a level are added together (limiter_tree_add). */
        for (j = 0; j < c->n; j++) {
            if (c->lim[j].level == x->level) {
                same++;
                nth += j <= i;
            }
        }
        ratelimit_headers_item_of(it, &x->lim);
        it->name = x->rule != NULL ? x->rule->path : "";
        it->name_len = strlen(it->name);
        it->nth = same > 1 ? nth : 0;
        if (i == bind) {
            *ibind = n;
        }
        n++;
    }
    return n;
}

void limiter_reply_check(struct buf *out, const struct store_check *c,
                         const struct rl_decision *agg, unsigned bind,
                         unsigned form)
{
    struct ratelimit_headers_item *items;
    struct buf val[3];
    const char *names[3] = { LIMITER_REPLY_POLICY, LIMITER_REPLY_RATELIMIT,
                             LIMITER_REPLY_RETRY_AFTER };
    unsigned nitems = 0, ibind = c->n, k, npairs = 0;
    int64_t v[5];

    if (form & LIMITER_REPLY_MS) {
        rl_reply_ints_ms(agg, v);
    } else {
        rl_reply_ints(agg, v);
    }
    if (!(form & LIMITER_REPLY_HEADERS)) {
        limiter_reply_check_ints(out, v);
        return;
    }
    for (k = 0; k < 3; k++) {
        buf_init(&val[k]);
    }
    items = px_malloc((c->n > 0 ? c->n : 1) * sizeof(*items));
    nitems = limiter_reply_items(c, bind, items, &ibind);
    if (nitems > 0) {
        PX_CHECK_OOM(ratelimit_headers_policy(&val[0], items, nitems));
        npairs = 1;
        if (ibind < nitems) {
            PX_CHECK_OOM(ratelimit_headers_ratelimit(
                &val[1], &items[ibind], c->res[bind].remaining,
                c->res[bind].reset_after_ns));
            npairs = 2;
            /* Only a refusal a retry can pass says when to retry. */
            if (agg->limited && agg->retry_after_ns >= 0) {
                PX_CHECK_OOM(ratelimit_headers_retry_after(
                    &val[2], agg->retry_after_ns));
                npairs = 3;
            }
        }
    }
    px_free(items);
    PX_CHECK_OOM(resp_enc_array_header(out, 5 + 2 * (long long)npairs));
    for (k = 0; k < 5; k++) {
        PX_CHECK_OOM(resp_enc_int(out, (long long)v[k]));
    }
    for (k = 0; k < npairs; k++) {
        PX_CHECK_OOM(resp_enc_bulk(out, names[k], strlen(names[k])));
        PX_CHECK_OOM(resp_enc_bulk(out, val[k].data, val[k].len));
    }
    for (k = 0; k < 3; k++) {
        buf_free(&val[k]);
    }
}
