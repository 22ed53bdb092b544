/* What both stores share (see store.h): the one choice of the store, the
 * lifetime of a tree call, and the write parameters of WAIT.
 *
 * The choice is made once, by limiter_init, from whether a Redis is
 * configured: the commands then call lm->store and never ask again. */
#include "proxy/limiter/store.h"

#include "proxy/core/util.h"
#include "proxy/limiter/store_local.h"
#include "proxy/limiter/store_redis.h"

const struct store_ops *store_choose(int embedded)
{
    return embedded ? &store_local_ops : &store_redis_ops;
}

void store_check_free(struct store_check *c)
{
    unsigned i;

    for (i = 0; i < c->n; i++) {
        px_free(c->lim[i].key);
    }
    px_free(c->lv);
    px_free(c->lim);
    px_free(c->res);
    px_free(c->peek);
    px_free(c->admitted);
    px_free(c->noscript);
    buf_free(&c->err);
    px_free(c);
}

void store_write_params(const struct gcra_params *p, int64_t wait_ns,
                        struct gcra_params *out)
{
    *out = *p;
    if (wait_ns > 0 && p->inc_ns <= p->dvt_ns &&
        __builtin_add_overflow(p->dvt_ns, wait_ns, &out->dvt_ns)) {
        out->dvt_ns = INT64_MAX;
    }
}
