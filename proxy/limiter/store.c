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

#include "conf/conf.h"
#include "proxy/core/util.h"

void store_init(struct store *st, const struct store_ops *ops,
                struct core *core, struct cluster *cl, const struct conf *conf)
{
    memset(st, 0, sizeof(*st));
    st->ops = ops;
    st->core = core;
    st->cl = cl;
    st->conf = conf;
    hmap_init(&st->pending_by_payer);
    ops->init(st);
}

void store_free(struct store *st)
{
    if (st->ops != NULL) {
        st->ops->free(st);
    }
    st->impl = NULL;
    hmap_free(&st->pending_by_payer, NULL);
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
    c->alloc = at_adm + (ngroups > 0 ? ngroups : 1);
    buf_init(&c->err);
    return c;
}

size_t store_check_bytes(const struct store_check *c)
{
    size_t b = c->alloc;
    unsigned i;

    if (c->lv != NULL) {
        b += offsetof(struct limits_levels, level) +
             c->lv->n * sizeof(c->lv->level[0]) + c->lv->text_len;
    }
    for (i = 0; i < c->n; i++) {
        b += 2 * (c->lim[i].klen + 1) + STORE_CALL_BYTES_PER_LIMIT;
    }
    return b;
}

int store_pending_admits(size_t pending, size_t bytes, size_t max,
                         uintptr_t mine)
{
    size_t bound = max;

    if (max == 0) {
        return 1;
    }
    if (mine == 0) {
        bound = max + max / 4;
    }
    return bytes <= bound && pending <= bound - bytes;
}

int store_check_charge(struct store *st, struct store_check *c,
                       const void *client)
{
    uintptr_t payer = (uintptr_t)client;
    size_t b = store_check_bytes(c);
    uintptr_t mine = (uintptr_t)hmap_get(&st->pending_by_payer,
                                         (const char *)&payer, sizeof(payer));

    if (!store_pending_admits(st->pending_bytes, b,
                              st->conf->limiter_pending_max_bytes, mine)) {
        st->pending_refused++;
        return -1;
    }
    hmap_put(&st->pending_by_payer, (const char *)&payer, sizeof(payer),
             (void *)(mine + 1));
    st->pending_bytes += b;
    c->charged = b;
    c->payer = payer;
    return 0;
}

/* Gives back what store_check_charge charged for `c`. */
static void store_check_uncharge(struct store_check *c)
{
    struct store *st = c->st;
    uintptr_t mine;

    if (c->charged == 0) {
        return;
    }
    st->pending_bytes -= c->charged;
    c->charged = 0;
    mine = (uintptr_t)hmap_get(&st->pending_by_payer, (const char *)&c->payer,
                               sizeof(c->payer));
    if (mine <= 1) {
        hmap_del(&st->pending_by_payer, (const char *)&c->payer,
                 sizeof(c->payer));
    } else {
        hmap_put(&st->pending_by_payer, (const char *)&c->payer,
                 sizeof(c->payer), (void *)(mine - 1));
    }
}

void store_check_free(struct store_check *c)
{
    unsigned i;

    store_check_uncharge(c);
    if (c->hold != NULL) {
        c->hold_free(c->hold); /* an orphan's call, or not taken */
    }
    for (i = 0; i < c->n; i++) {
        px_free(c->lim[i].key);
    }
    px_free(c->lv);
    px_free(c->id);
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

int64_t store_limit_max(const struct limits_limit *l)
{
    switch (l->algo) {
    case LIMITS_GCRA:
        return l->u.gcra.max_burst + 1;
    case LIMITS_TOKEN_BUCKET:
        return l->u.token_bucket.capacity;
    case LIMITS_LEAKY_BUCKET:
        return l->u.leaky_bucket.size;
    case LIMITS_FIXED_WINDOW:
        return l->u.fixed_window.max;
    case LIMITS_SLIDING_WINDOW:
        return l->u.sliding_window.max;
    case LIMITS_SLIDING_LOG:
        return l->u.sliding_log.max;
    case LIMITS_SLIDING_COUNTER:
        return l->u.sliding_counter.max;
    case LIMITS_CONCURRENCY:
        return l->u.concurrency.max;
    }
    return 0;
}

void store_fail_open_limit(struct store_check *c, unsigned i)
{
    struct store_limit *x = &c->lim[i];

    x->fail_open = true;
    c->res[i].limited = 0;
    c->res[i].limit = store_limit_max(&x->lim);
    c->res[i].remaining = 0;
    c->res[i].retry_after_ns = -RL_NS_PER_SEC;
    c->res[i].reset_after_ns = 0;
    c->peek[i] = c->res[i];
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
