/* What both stores share (see store.h): the lifetime of a struct store
 * around its implementation's state, the lifetime of a tree call, and the
 * write parameters of WAIT.
 *
 * The implementation is named by limiter_init, once, from whether a Redis
 * is configured; this file only runs the ops table it is given, so it
 * knows neither implementation (they depend on it, never the other way). */
#include "proxy/limiter/store.h"

#include <string.h>

#include "proxy/core/util.h"

void store_init(struct store *st, const struct store_ops *ops,
                struct cluster *cl, const struct conf *conf)
{
    memset(st, 0, sizeof(*st));
    st->ops = ops;
    st->cl = cl;
    st->conf = conf;
    ops->init(st);
}

void store_free(struct store *st)
{
    if (st->ops != NULL) {
        st->ops->free(st);
    }
    st->impl = NULL;
}

void store_check_free(struct store_check *c)
{
    unsigned i;

    if (c->hold != NULL) {
        c->hold_free(c->hold); /* an orphan's call, or not taken */
    }
    for (i = 0; i < c->n; i++) {
        px_free(c->lim[i].key);
    }
    px_free(c->lv);
    px_free(c->lim);
    px_free(c->res);
    px_free(c->peek);
    px_free(c->admitted);
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
