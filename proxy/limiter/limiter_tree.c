/* The limits tree's subcommands: LIMITER CHECK, PEEK and RESET (see
 * limiter_tree.h).
 *
 * Design: a call is parsed (the path, then COST, WAIT, MS, HEADERS), its
 * path resolved into levels (limiter_tree_resolve), and every limit of
 * every level, with the overrides applied, gathered into one struct
 * store_check that the store decides at once, all consumed or none. The
 * completion (limiter_tree_done) refunds where another group refused,
 * counts the decision per rule (limiter_count.c), and replies in the form
 * asked (limiter_reply.c): at once, or when a WAIT reservation is due
 * (limiter_wait.c). The most restrictive limit decides the reply
 * (limiter_aggregate.c, pure). It has its own context, struct
 * limiter_tree, borrowed from struct limiter, so that limiter.c may call
 * it and nothing here calls back. */
#include "proxy/limiter/limiter_tree.h"

#include <string.h>

#include "algorithms/gcra.h"
#include "algorithms/rl.h"
#include "conf/conf.h"
#include "conf/limits.h"
#include "parser/resp.h"
#include "parser/resp_enc.h"
#include "proxy/core/core.h"
#include "proxy/core/log.h"
#include "proxy/core/metrics.h"
#include "proxy/core/req.h"
#include "proxy/core/util.h"
#include "proxy/limiter/limiter_adjust.h"
#include "proxy/limiter/limiter_aggregate.h"
#include "proxy/limiter/limiter_count.h"
#include "proxy/limiter/limiter_lease.h"
#include "proxy/limiter/limiter_release.h"
#include "proxy/limiter/limiter_reply.h"
#include "proxy/limiter/limiter_wait.h"
#include "proxy/limiter/store.h"

/* Calls of one check when run-time overrides keep changing under it. */
#define LIMITER_MAX_TRIES 3

/* Largest COST: the scripts carry numbers as Lua doubles, exact up to
 * 2^53 - 1; a larger cost would be decided on another value in Redis than
 * in the proxy's refusal cache or embedded store. Refused with the same
 * error everywhere, whatever the algorithm or the cache holds. */
#define LIMITER_MAX_COST ((INT64_C(1) << 53) - 1)

/* The reply of a check no limit applies to (an exempt identity, or every
 * level lifted by an override): admitted, limit 0, which redis-cell never
 * reports. */
static const int64_t limiter_unlimited[5] = { 0, 0, 0, -1, 0 };

/* The counters, or NULL (a limiter without a core, in unit tests). */
static struct metrics *limiter_tree_metrics(const struct limiter_tree *tr)
{
    return tr->core != NULL ? tr->core->metrics : NULL;
}

/* Adds limit `l` (number k of its level) to c. NULL, or an error text. */
static const char *limiter_tree_add(struct store_check *c,
                                    const struct limits_level *lev, size_t k,
                                    const struct limits_limit *l)
{
    const struct limiter_tree *tr = c->owner;
    size_t nrules = limits_rule_count(*tr->limits);
    struct store_limit *x = &c->lim[c->n];
    char key[STORE_KEY_MAX];
    const char *err = NULL;
    int kl;

    if (c->op == STORE_RELEASE && l->algo != LIMITS_CONCURRENCY) {
        return NULL; /* RELEASE frees slots: the rate limits stay */
    }
    memset(x, 0, sizeof(*x));
    x->algo = l->algo;
    x->lim = *l;
    x->shadow = lev->shadow || c->st->conf->limiter_shadow;
    if (l->algo == LIMITS_GCRA &&
        gcra_params_init_ns(&x->p, l->u.gcra.max_burst, l->u.gcra.count,
                            l->u.gcra.period_ms * RL_NS_PER_MS, c->cost,
                            &err) != GCRA_OK) {
        return err;
    }
    /* A shadow level never makes a client wait, so any algorithm may be
     * one on a path checked with WAIT. gcra and the buckets reserve
     * exactly (a later TAT, a debt); a window cannot take a later slot. */
    if (l->algo == LIMITS_CONCURRENCY && c->wait_ns > 0 && !x->shadow) {
        return "concurrency limits cannot WAIT: a slot frees when its "
               "holder releases it";
    }
    if (l->algo != LIMITS_GCRA && l->algo != LIMITS_TOKEN_BUCKET &&
        l->algo != LIMITS_LEAKY_BUCKET && c->wait_ns > 0 && !x->shadow) {
        return "the WAIT option needs gcra, token_bucket or leaky_bucket "
               "limits: the other algorithms cannot reserve a later slot";
    }
    kl = limits_limit_key(lev, k, key, sizeof(key));
    PX_ASSERT(kl > 0 && (size_t)kl < sizeof(key));
    x->key = px_strndup(key, (size_t)kl);
    x->klen = (size_t)kl;
    x->group = lev->group;
    x->own_key = l->algo == LIMITS_GCRA && lev->own_keys;
    x->level = (unsigned)(lev - c->lv->level);
    x->rule = *tr->rules != NULL && lev->rule < nrules ? (*tr->rules)[lev->rule]
                                                       : NULL;
    c->n++;
    return NULL;
}

/* Fills c->lim from the levels, with every override applied: a run-time
 * one (as the store knows it) replaces the file's. NULL, or an error
 * text. */
static const char *limiter_tree_build(struct store_check *c)
{
    struct store *st = c->st;
    size_t l, k;

    for (l = 0; l < c->lv->n; l++) {
        const struct limits_level *lev = &c->lv->level[l];
        const struct limits_limit *limits = lev->limits;
        size_t nlimits = lev->unlimited ? 0 : lev->nlimits;
        const char *text =
            st->ops->override_known(st, lev->path, lev->path_len);
        struct limits_runtime rt;
        char why[256];

        if (text != NULL) {
            if (limits_runtime_parse_text(lev->base, lev->nbase, text,
                                          strlen(text), &rt, why,
                                          sizeof(why)) == LIMITS_OK) {
                limits = rt.limits;
                nlimits = rt.unlimited ? 0 : rt.nlimits;
            } else {
                log_warn("limits: override of %.*s ignored: %s",
                         (int)lev->path_len, lev->path, why);
            }
        }
        for (k = 0; k < nlimits; k++) {
            const char *err;
            if (c->op == STORE_ADJUST &&
                !limiter_adjust_applies(limits[k].algo)) {
                continue;
            }
            err = limiter_tree_add(c, lev, k, &limits[k]);
            if (err != NULL) {
                return err;
            }
        }
    }
    return NULL;
}

static void limiter_tree_start(struct limiter_tree *tr, struct req *req,
                               enum store_op op, unsigned tries,
                               void (*resume)(struct req *req));

/* The store decided every limit of `c` (its client still waits): refund
 * what was taken where another group refused (or where the overrides
 * turned out stale), then reply or start over. Takes `c`. */
static void limiter_tree_done(struct store_check *c)
{
    struct limiter_tree *tr = c->owner;
    struct metrics *m = limiter_tree_metrics(tr);
    struct req *root = c->root;
    struct limiter_wait *slot;
    struct limiter_count_tally tally;
    struct rl_decision agg;
    struct buf frame;
    unsigned bind;
    int64_t delay;

    if (c->op == STORE_RESET) {
        if (c->err.len > 0) {
            req_reply(root, c->err.data, c->err.len);
        } else {
            PX_CHECK_OOM(resp_enc_int(&root->reply, c->deleted));
            req_reply_built(root);
        }
        store_check_free(c);
        return;
    }
    if (c->err.len > 0 || c->err_text != NULL || c->stale) {
        if ((c->op == STORE_CHECK || c->op == STORE_ADJUST) &&
            tr->store->ops->refund != NULL) {
            /* A group that failed may not have decided: give back what
             * the others took, so a failure never consumes. */
            tr->store->ops->refund(tr->store, c);
        }
        if (c->err_text != NULL && c->err.len == 0) {
            limiter_lease_failed(tr->leases, c);
            if (c->op == STORE_CHECK) {
                limiter_count_error(c);
            }
            req_reply_error(root, "%s", c->err_text);
            store_check_free(c);
            return;
        }
        if (c->err.len == 0 && c->tries < LIMITER_MAX_TRIES) {
            enum store_op op = c->op;
            unsigned tries = c->tries;
            void (*resume)(struct req * req) = c->resume;
            store_check_free(c);
            limiter_tree_start(tr, root, op, tries + 1, resume);
            return;
        }
        if (c->err.len == 0) {
            PX_CHECK_OOM(buf_append_str(&c->err,
                                        "-ERR limiter overrides kept changing "
                                        "during the check, try again\r\n"));
        }
        limiter_lease_failed(tr->leases, c);
        if (c->op == STORE_CHECK) {
            limiter_count_error(c);
        }
        req_reply(root, c->err.data, c->err.len);
        store_check_free(c);
        return;
    }
    if (c->op == STORE_RELEASE) {
        limiter_release_reply(c);
        store_check_free(c);
        return;
    }
    if (c->n == 0) {
        /* Every level is lifted by an override. */
        store_check_free(c);
        limiter_reply_ints(root, limiter_unlimited);
        return;
    }
    if (c->op == STORE_CHECK && tr->store->ops->refund != NULL &&
        limiter_aggregate_refunds(c->res, c->lim, c->n, c->wait_ns)) {
        tr->store->ops->refund(tr->store, c);
    }
    if (c->op == STORE_CHECK &&
        limiter_aggregate_shadow_limited(c->lim, c->n) > 0) {
        tr->shadow_limited++;
    }
    /* PEEK answers as the CHECK it shows would (its wait_ns is 0). */
    if (m != NULL) {
        limiter_count_tally(m, c, &tally);
    }
    delay = limiter_aggregate_check_ns(c->res, c->peek, c->lim, c->n,
                                       c->wait_ns, &agg, &bind);
    if (limiter_lease_after(tr->leases, c, &agg) != 0) {
        /* A lease Redis refused: the plain check of the client's cost. */
        void (*resume)(struct req * req) = c->resume;
        store_check_free(c);
        limiter_tree_start(tr, root, STORE_CHECK, 1, resume);
        return;
    }
    if (m != NULL && c->op == STORE_CHECK) {
        limiter_count_check(&tally, !agg.limited);
    }
    buf_init(&frame);
    limiter_reply_check(&frame, c, &agg, bind, c->reply_form);
    slot = c->hold; /* a CHECK ... WAIT's slot: the timer takes it */
    c->hold = NULL;
    store_check_free(c);
    if (delay >= 0) {
        PX_ASSERT(slot != NULL);
        limiter_wait_start(slot, tr->core, root, frame.data, frame.len, delay);
    } else {
        limiter_wait_cancel(slot);
        req_reply(root, frame.data, frame.len);
    }
    buf_free(&frame);
}

static void limiter_tree_hold_free(void *hold)
{
    limiter_wait_cancel(hold);
}

/* A WAIT slot for the identity of c's path (the hash tag of its deepest
 * level: user:alex for user:alex:trade), kept in c->hold until the store
 * has decided. Taken before the store is asked anything, so a check over
 * a cap writes nothing. 0, or -1 after replying the cap's error. */
static int limiter_tree_hold_wait(struct limiter_tree *tr, struct req *req,
                                  struct store_check *c)
{
    const struct limits_level *lev = &c->lv->level[c->lv->n - 1];
    struct limiter_wait *w;
    int tl = lev->tag_len > 128 ? 128 : (int)lev->tag_len;

    switch (limiter_wait_reserve(tr->waits, lev->tag, lev->tag_len, &w)) {
    case LIMITER_WAIT_OK:
        c->hold = w;
        c->hold_free = limiter_tree_hold_free;
        return 0;
    case LIMITER_WAIT_FULL_IDENTITY:
        req_reply_error(req,
                        "too many LIMITER WAIT replies held for '%.*s' "
                        "(limiter_wait_max_per_identity is %zu)",
                        tl, lev->tag, tr->waits->max_per_identity);
        return -1;
    case LIMITER_WAIT_FULL_TOTAL:
        break;
    }
    req_reply_error(req,
                    "too many LIMITER WAIT replies held "
                    "(limiter_wait_max_total is %zu)",
                    tr->waits->max_total);
    return -1;
}

/* The reply-form flags after the path: MS and HEADERS, in any order
 * among the other options, each at most once. */
static const struct {
    const char *word;
    unsigned flag;
} limiter_tree_forms[] = {
    { "ms", LIMITER_REPLY_MS },
    { "headers", LIMITER_REPLY_HEADERS },
};

/* Whether argument i is a reply-form flag: 1 (added to *form), 0 (not
 * one), or -1 after replying the error of a flag given twice. */
static int limiter_tree_parse_form(struct req *req, int i, unsigned *form)
{
    size_t k;

    for (k = 0; k < sizeof(limiter_tree_forms) / sizeof(limiter_tree_forms[0]);
         k++) {
        if (!resp_cmd_arg_is(req->cmd, i, limiter_tree_forms[k].word)) {
            continue;
        }
        if (*form & limiter_tree_forms[k].flag) {
            req_reply_error(req, "syntax error: %s given more than once",
                            k == 0 ? "MS" : "HEADERS");
            return -1;
        }
        *form |= limiter_tree_forms[k].flag;
        return 1;
    }
    return 0;
}

/* Parses [MS] [HEADERS] from argument `from` on (ADJUST's options). 0,
 * or -1 after replying an error. */
static int limiter_tree_parse_forms(struct req *req, int from, unsigned *form)
{
    int i, rc;

    for (i = from; i < req->cmd->argc; i++) {
        rc = limiter_tree_parse_form(req, i, form);
        if (rc == 0) {
            req_reply_error(req, "syntax error");
        }
        if (rc <= 0) {
            return -1;
        }
    }
    return 0;
}

/* Parses [COST n] [WAIT ms] [MS] [HEADERS] [ID token] after the path, in
 * any order (WAIT only when `wait_ms` is not NULL: a CHECK), WAIT capped
 * to `wait_max_ms`, the token into *id (a copy). 0, or -1 after replying
 * an error. */
static int limiter_tree_parse_opts(struct req *req, unsigned wait_max_ms,
                                   int64_t *cost, int64_t *wait_ms,
                                   unsigned *form, char **id, size_t *id_len)
{
    int i, rc;
    size_t len;
    const char *p;

    for (i = 3; i < req->cmd->argc; i++) {
        rc = limiter_tree_parse_form(req, i, form);
        if (rc < 0) {
            return -1;
        }
        if (rc > 0) {
            continue;
        }
        if (resp_cmd_arg_is(req->cmd, i, "cost") && i + 1 < req->cmd->argc) {
            p = resp_cmd_arg(req->cmd, ++i, &len);
            if (gcra_parse_int64(p, len, cost) != GCRA_OK || *cost < 0 ||
                *cost > LIMITER_MAX_COST) {
                req_reply_error(req, "value is not an integer or out of "
                                     "range");
                return -1;
            }
            continue;
        }
        if (resp_cmd_arg_is(req->cmd, i, "id") && i + 1 < req->cmd->argc) {
            if (limiter_release_token(req, ++i, id, id_len) != 0) {
                return -1;
            }
            continue;
        }
        if (wait_ms != NULL && resp_cmd_arg_is(req->cmd, i, "wait") &&
            i + 1 < req->cmd->argc) {
            p = resp_cmd_arg(req->cmd, ++i, &len);
            if (gcra_parse_int64(p, len, wait_ms) != GCRA_OK || *wait_ms < 0) {
                req_reply_error(req, "value is not an integer or out of "
                                     "range");
                return -1;
            }
            /* Capped, not refused: however long a WAIT asks for, and
             * however many are held, no level's capacity is reserved more
             * than limiter_wait_max_ms ahead; a call that would wait
             * longer is refused as one without WAIT. */
            if (*wait_ms > (int64_t)wait_max_ms) {
                *wait_ms = (int64_t)wait_max_ms;
            }
            continue;
        }
        req_reply_error(req, "syntax error");
        return -1;
    }
    return 0;
}

/* Resolves `path` into a new limits_levels of the size it needs (a
 * request keeps it while it is decided, and a client may have
 * max_pipeline of them in flight: room for the longest path in each
 * would be 41 KB a request, where one level needs about 180 bytes).
 * NULL after replying an error. */
struct limits_levels *limiter_tree_resolve(struct limiter_tree *tr,
                                           struct req *req, const char *path,
                                           size_t plen)
{
    const struct conf *conf = tr->conf;
    const char *err = NULL;
    struct limits_levels *lv;

    if (limits_resolve(*tr->limits, path, plen, conf->key_prefix,
                       strlen(conf->key_prefix), tr->resolving,
                       &err) != LIMITS_OK) {
        req_reply_error(req, "%s", err);
        return NULL;
    }
    lv = limits_levels_copy(tr->resolving);
    if (lv == NULL) {
        px_oom(sizeof(*lv) + tr->resolving->n * sizeof(lv->level[0]) +
               tr->resolving->text_len);
    }
    return lv;
}

/* LIMITER CHECK <path> [COST n] [WAIT ms], PEEK <path> [COST n] (CHECK's
 * decision and reply, nothing written) or RESET <path>; `tries` counts
 * the calls when run-time overrides changed under the previous ones. */
static void limiter_tree_start(struct limiter_tree *tr, struct req *req,
                               enum store_op op, unsigned tries,
                               void (*resume)(struct req *req))
{
    struct limits_levels *lv;
    struct store_check *c;
    const char *err, *path;
    size_t plen;
    int64_t cost = 1, wait_ms = 0, delta = 0;
    unsigned cap = 0, form = 0;
    char *id = NULL, idbuf[512];
    size_t l, id_len = 0;

    if (req->cmd->argc < 3) {
        req_reply_error(req, "wrong number of arguments for 'limiter' "
                             "command");
        return;
    }
    /* PEEK takes CHECK's cost (it answers what that CHECK would), but
     * not WAIT: it reserves nothing. */
    if (op == STORE_ADJUST) {
        if (limiter_adjust_parse(req, &delta) != 0 ||
            limiter_tree_parse_forms(req, 4, &form) != 0) {
            return;
        }
    } else if ((op == STORE_CHECK || op == STORE_PEEK) &&
               limiter_tree_parse_opts(req, tr->conf->limiter_wait_max_ms,
                                       &cost,
                                       op == STORE_CHECK ? &wait_ms : NULL,
                                       &form, &id, &id_len) != 0) {
        px_free(id);
        return;
    }
    if (op == STORE_RELEASE && req->cmd->argc != 4) {
        req_reply_error(req, "wrong number of arguments for "
                             "'limiter|release' command");
        return;
    }
    if (op == STORE_RELEASE &&
        limiter_release_token(req, 3, &id, &id_len) != 0) {
        return;
    }
    if (op == STORE_RESET && req->cmd->argc != 3) {
        req_reply_error(req, "syntax error");
        return;
    }
    path = resp_cmd_arg(req->cmd, 2, &plen);
    lv = limiter_tree_resolve(tr, req, path, plen);
    if (lv == NULL) {
        px_free(id);
        return;
    }
    if (lv->n == 0) {
        int known = lv->matched > 0;
        px_free(lv);
        px_free(id);
        if (!known) {
            /* Not even the first segment is in the tree: most likely a
             * typo, which silently admitting would hide. */
            req_reply_error(req, "no limits for path '%.*s'",
                            (int)(plen > 128 ? 128 : plen), path);
        } else if (op == STORE_RESET || op == STORE_RELEASE) {
            PX_CHECK_OOM(resp_enc_int(&req->reply, 0));
            req_reply_built(req);
        } else {
            /* The tree knows the path, but no level on it has limits (an
             * exempt identity): not limited, shown by limit 0, which
             * redis-cell never reports. */
            limiter_reply_ints(req, limiter_unlimited);
        }
        return;
    }
    if (op == STORE_CHECK &&
        limiter_lease_before(tr->leases, req, lv, &cost, wait_ms * RL_NS_PER_MS,
                             form, resume) != 0) {
        px_free(lv);
        px_free(id);
        return;
    }
    /* Room for every limit any override could give the levels: a
     * run-time override has the node's own count, or none. */
    for (l = 0; l < lv->n; l++) {
        cap += lv->level[l].nlimits > lv->level[l].nbase
                   ? (unsigned)lv->level[l].nlimits
                   : (unsigned)lv->level[l].nbase;
    }
    c = store_check_new(cap, (unsigned)lv->ngroups);
    c->st = tr->store;
    c->owner = tr;
    c->root = req;
    c->op = op;
    c->tries = tries;
    c->resume = resume;
    c->lv = lv;
    c->cost = cost;
    c->delta = delta;
    c->wait_ns = wait_ms * RL_NS_PER_MS;
    c->reply_form = form;
    c->id = id;
    c->id_len = id_len;
    err = limiter_tree_build(c);
    if (err == NULL) {
        err = limiter_release_check(c, *tr->limits, path, plen, idbuf,
                                    sizeof(idbuf));
    }
    if (err != NULL) {
        store_check_free(c);
        req_reply_error(req, "%s", err);
        return;
    }
    if (!tr->store->ops->ready(tr->store, req, resume)) {
        store_check_free(c);
        return;
    }
    if ((op == STORE_RESET || op == STORE_RELEASE) && c->n == 0) {
        store_check_free(c);
        PX_CHECK_OOM(resp_enc_int(&req->reply, 0));
        req_reply_built(req);
        return;
    }
    if (store_check_charge(tr->store, c, req->client) != 0) {
        store_check_free(c);
        req_reply_error(req, "limiter calls pending past "
                             "limiter_pending_max_bytes: retry later");
        return;
    }
    if (op == STORE_CHECK && c->wait_ns > 0 &&
        limiter_tree_hold_wait(tr, req, c) != 0) {
        store_check_free(c);
        return;
    }
    /* Counted once a call, not once a try. */
    tr->adjusts += op == STORE_ADJUST && tries == 1;
    limiter_lease_sending(tr->leases, c);
    tr->store->ops->check(tr->store, c, limiter_tree_done);
}

void limiter_tree(struct limiter_tree *tr, struct req *req, enum store_op op,
                  void (*resume)(struct req *req))
{
    limiter_tree_start(tr, req, op, 1, resume);
}

void limiter_tree_init(struct limiter_tree *tr, struct core *core,
                       const struct conf *conf, struct store *st,
                       struct limiter_waits *waits,
                       struct limits_tree *const *limits,
                       struct metrics_rule **const *rules)
{
    memset(tr, 0, sizeof(*tr));
    tr->core = core;
    tr->conf = conf;
    tr->store = st;
    tr->waits = waits;
    tr->limits = limits;
    tr->rules = rules;
    tr->resolving = px_malloc(LIMITS_LEVELS_BYTES);
}

void limiter_tree_free(struct limiter_tree *tr)
{
    px_free(tr->resolving);
    tr->resolving = NULL;
}
