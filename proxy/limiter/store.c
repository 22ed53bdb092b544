/* What both stores share (see store.h): the lifetime of a struct store
 * around its implementation's state, the lifetime of a tree call, and the
 * write parameters of WAIT.
 *
 * The implementation is named by limiter_init, once, from whether a Redis
 * is configured; this file only runs the ops table it is given, so it
 * knows neither implementation (they depend on it, never the other way).
 * Shadow levels (limits.yaml `shadow: true`, or limiter_shadow) are marked
 * here from the decisions, the one rule both stores apply. */
#include "proxy/limiter/store.h"

#include <stddef.h>
#include <string.h>

#include "proxy/core/util.h"

void store_init(struct store *st, const struct store_ops *ops,
                struct core *core, struct cluster *cl, const struct conf *conf)
{
    memset(st, 0, sizeof(*st));
    st->ops = ops;
    st->core = core;
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

/* `n` rounded up to the strictest alignment, so an array may start there. */
static size_t store_align(size_t n)
{
    size_t a = _Alignof(max_align_t);

    return (n + a - 1) / a * a;
}

struct store_check *store_check_new(unsigned cap, unsigned ngroups)
{
    /* A check is made for every LIMITER call: one allocation, not five. */
    size_t at_lim = store_align(sizeof(struct store_check));
    size_t at_res = at_lim + store_align(cap * sizeof(struct store_limit));
    size_t at_peek = at_res + store_align(cap * sizeof(struct rl_decision));
    size_t at_adm = at_peek + store_align(cap * sizeof(struct rl_decision));
    char *mem = px_calloc(1, at_adm + (ngroups > 0 ? ngroups : 1));
    struct store_check *c = (struct store_check *)(void *)mem;

    c->lim = (struct store_limit *)(void *)(mem + at_lim);
    c->res = (struct rl_decision *)(void *)(mem + at_res);
    c->peek = (struct rl_decision *)(void *)(mem + at_peek);
    c->admitted = (unsigned char *)(mem + at_adm);
    c->ngroups = ngroups;
    buf_init(&c->err);
    return c;
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
    buf_free(&c->err);
    px_free(c);
}

_Static_assert(LIMITS_MAX_DEPTH <= 64, "a level's bit must fit a uint64_t");

void store_shadow_mark(struct store_check *c)
{
    uint64_t refused = 0; /* bit l: shadow level l refused */
    unsigned i;

    for (i = 0; i < c->n; i++) {
        if (c->lim[i].shadow && c->res[i].limited) {
            refused |= UINT64_C(1) << c->lim[i].level;
        }
    }
    for (i = 0; i < c->n; i++) {
        c->lim[i].shadow_limited =
            c->lim[i].shadow && (refused >> c->lim[i].level & 1) != 0;
    }
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
