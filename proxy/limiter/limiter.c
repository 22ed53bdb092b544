/* The limiter commands: CL.THROTTLE (exactly as redis-cell) and LIMITER
 * (the raw form, and the subcommands of the limits tree: CHECK, PEEK,
 * RESET, OVERRIDE, RULES, RELOAD).
 *
 *   client req "CL.THROTTLE k B C P [Q]"  (holds the client's place)
 *        | parse (gcra_parse_throttle: redis-cell's texts)
 *        v
 *   st->ops->throttle ------> store_local.c: decided at once
 *        |              \---> store_redis.c: batched into gcra.lua calls
 *        v                    by the flush pass, decided on the node
 *   limiter_store_done --> five integers (or the error)
 *
 *   client req "LIMITER CHECK <path> [COST n] [WAIT ms]"
 *        | resolve the path in the limits tree (its levels), apply the
 *        | overrides (the file's, then the run-time ones the store knows)
 *        v
 *   struct store_check (every limit of every level)
 *        | st->ops->check: every limit decided, all consumed or none
 *        v
 *   limiter_check_done --> limiter_aggregate_check (the most restrictive
 *        |                 limit decides) --> the reply, at once or when
 *        |                 its WAIT reservation is due (limiter_wait.c)
 *        +-- overrides changed under the call: start over (3 tries)
 *
 * A shadow level (limits.yaml `shadow: true`, or every level with
 * proxy.yaml `limiter_shadow`) is decided and keeps its state like the
 * others, but the reply and the refund leave it out: the check answers as
 * its real levels alone would, and a shadow level that refused took
 * nothing (the store's job: store_limit.shadow_limited) and is counted.
 *
 * This file parses, resolves and replies; where the state lives is the
 * store's business (store.h). limiter_init is the one place that names
 * the implementations (store_local_ops, store_redis_ops) and picks one;
 * the stores and the WAIT timers (limiter_wait.c) get their own context,
 * never struct limiter, so every import here points one way:
 *
 *   limiter --> limiter_aggregate, limiter_wait, limiter_reload,
 *           |   store_local, store_redis
 *           \-> store <-- store_local, store_redis, limiter_aggregate */
#include "proxy/limiter/limiter.h"

#include <stdlib.h>
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
#include "proxy/limiter/limiter_aggregate.h"
#include "proxy/limiter/limiter_reload.h"
#include "proxy/limiter/limiter_wait.h"
#include "proxy/limiter/store.h"
#include "proxy/limiter/store_local.h"
#include "proxy/limiter/store_redis.h"

/* Arguments of CL.THROTTLE, with its name: name key B C P [Q]. */
#define LIMITER_MAX_ARGS 6

/* Calls of one check when run-time overrides keep changing under it. */
#define LIMITER_MAX_TRIES 3

/* Largest COST: the scripts carry numbers as Lua doubles, exact up to
 * 2^53 - 1; a larger cost would be decided on another value in Redis than
 * in the proxy's refusal cache or embedded store. Refused with the same
 * error everywhere, whatever the algorithm or the cache holds. */
#define LIMITER_MAX_COST ((INT64_C(1) << 53) - 1)

/* Most words of an override: FACTOR f, or every parameter with a value. */
#define LIMITER_OVERRIDE_MAX_WORDS 16

/* The reply of a check no limit applies to (an exempt identity, or every
 * level lifted by an override): admitted, limit 0, which redis-cell never
 * reports. */
static const int64_t limiter_unlimited[5] = { 0, 0, 0, -1, 0 };

static void limiter_reply_ints(struct req *req, const int64_t v[5])
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

/* The completion of the store's throttle and override calls: the reply. */
static void limiter_store_done(struct store *st, struct req *req,
                               const struct store_reply *r)
{
    PX_UNUSED(st);
    switch (r->kind) {
    case STORE_REPLY_INTS:
        limiter_reply_ints(req, r->v);
        return;
    case STORE_REPLY_ERROR:
        req_reply_error(req, "%s", r->text);
        return;
    case STORE_REPLY_FRAME:
        req_reply(req, r->text, r->len);
        return;
    case STORE_REPLY_INT:
        PX_CHECK_OOM(resp_enc_int(&req->reply, r->n));
        break;
    case STORE_REPLY_BULK:
        if (r->text == NULL) {
            PX_CHECK_OOM(resp_enc_nil(&req->reply));
        } else {
            PX_CHECK_OOM(resp_enc_bulk(&req->reply, r->text, r->len));
        }
        break;
    case STORE_REPLY_OK:
        PX_CHECK_OOM(resp_enc_simple(&req->reply, "OK"));
        break;
    }
    req_reply_built(req);
}

/* ---------------- Metrics ---------------- */

/* The counters, or NULL (a limiter without a core, in unit tests). */
static struct metrics *limiter_metrics(const struct limiter *lm)
{
    return lm->core != NULL ? lm->core->metrics : NULL;
}

/* CL.THROTTLE's completion: counts the decision under the one rule of
 * CL.THROTTLE, then replies. */
static void limiter_throttle_done(struct store *st, struct req *req,
                                  const struct store_reply *r)
{
    struct limiter *lm = container_of(st, struct limiter, store);
    struct metrics *m = limiter_metrics(lm);

    if (m != NULL) {
        struct metrics_rule *rule = m->throttle;
        if (r->kind != STORE_REPLY_INTS) {
            metrics_rule_count(rule, METRICS_ERRORS);
        } else if (r->fail_open) {
            metrics_rule_count(rule, METRICS_FAIL_OPEN);
        } else if (r->v[0] != 0) {
            metrics_rule_count(rule, METRICS_LIMITED);
        } else {
            metrics_rule_count(rule, METRICS_ALLOWED);
            if (metrics_near_limit(m, r->v[1], r->v[2])) {
                metrics_rule_count(rule, METRICS_NEAR_LIMIT);
            }
        }
    }
    limiter_store_done(st, req, r);
}

/* The most levels a check counts: one per depth of the tree. */
#define LIMITER_MAX_LEVELS LIMITS_MAX_DEPTH

/* Counts a CHECK that ended in an error: once per level with limits. */
static void limiter_count_error(const struct store_check *c)
{
    unsigned i;
    int seen[LIMITER_MAX_LEVELS] = { 0 };

    for (i = 0; i < c->n; i++) {
        unsigned l = c->lim[i].level;
        if (l < LIMITER_MAX_LEVELS && !seen[l]) {
            seen[l] = 1;
            metrics_rule_count(c->lim[i].rule, METRICS_ERRORS);
        }
    }
}

/* What a decided CHECK's levels said, read before the decisions are
 * rewritten into the reply. */
struct limiter_tally {
    struct metrics_rule *rule[LIMITER_MAX_LEVELS]; /* each level's */
    unsigned char seen[LIMITER_MAX_LEVELS];        /* the level has limits */
    unsigned char limited[LIMITER_MAX_LEVELS];     /* one of them refused */
    unsigned char shadow[LIMITER_MAX_LEVELS];      /* a shadow level */
    unsigned char near[LIMITER_MAX_LEVELS];        /* ... or is near its
                                                      limit */
    unsigned char fail_open[LIMITER_MAX_LEVELS];   /* its node was down:
                                                      admitted undecided */
};

static void limiter_tally(const struct metrics *m, const struct store_check *c,
                          struct limiter_tally *t)
{
    unsigned i;

    memset(t, 0, sizeof(*t));
    for (i = 0; i < c->n; i++) {
        const struct rl_decision *d = &c->res[i];
        unsigned l = c->lim[i].level;
        if (l >= LIMITER_MAX_LEVELS) {
            continue;
        }
        t->seen[l] = 1;
        t->rule[l] = c->lim[i].rule;
        t->shadow[l] |= c->lim[i].shadow;
        t->fail_open[l] |= c->lim[i].fail_open;
        t->limited[l] |=
            c->lim[i].shadow ? c->lim[i].shadow_limited : d->limited != 0;
        t->near[l] |=
            d->limited || metrics_near_limit(m, d->limit, d->remaining);
    }
}

/* Counts a decided CHECK: each level is a rule and counts once. A shadow
 * level that would have refused counts shadow_limited, whatever the check
 * answered (it took nothing). Otherwise, in a check that was admitted
 * (`admitted`: its reply says not limited, a WAIT reservation included),
 * every level counts allowed, and near_limit too when one of its limits
 * was refused (reserved) or has at least the near ratio used; but a level
 * whose node was down and failed open counts fail_open instead. In a
 * refused check, a level that refused counts limited, and a level that
 * would have admitted counts nothing: nothing was taken from it, and it
 * did not refuse. */
static void limiter_count_check(const struct limiter_tally *t, int admitted)
{
    unsigned i;

    for (i = 0; i < LIMITER_MAX_LEVELS; i++) {
        if (!t->seen[i]) {
            continue;
        }
        if (t->shadow[i] && t->limited[i]) {
            metrics_rule_count(t->rule[i], METRICS_SHADOW_LIMITED);
        } else if (admitted && t->fail_open[i]) {
            metrics_rule_count(t->rule[i], METRICS_FAIL_OPEN);
        } else if (admitted) {
            metrics_rule_count(t->rule[i], METRICS_ALLOWED);
            if (t->near[i]) {
                metrics_rule_count(t->rule[i], METRICS_NEAR_LIMIT);
            }
        } else if (t->limited[i]) {
            metrics_rule_count(t->rule[i], METRICS_LIMITED);
        }
    }
}

/* ---------------- CL.THROTTLE ---------------- */

/* CL.THROTTLE and the raw LIMITER form: parse, then the store. A key
 * under the prefix is the limiter's own state, which only an admin
 * client may name. */
static void limiter_throttle_req(struct limiter *lm, struct req *req, int admin,
                                 unsigned db, void (*resume)(struct req *req))
{
    const char *prefix = lm->conf->key_prefix;
    size_t plen = strlen(prefix);
    const char *argv[LIMITER_MAX_ARGS];
    size_t lens[LIMITER_MAX_ARGS];
    char errbuf[GCRA_ERRBUF_LEN];
    struct gcra_params p;
    int argc = req->cmd->argc, k;

    if (argc > LIMITER_MAX_ARGS) {
        req_reply_error(req, "%s", GCRA_ERR_USAGE);
        return;
    }
    for (k = 0; k < argc; k++) {
        argv[k] = resp_cmd_arg(req->cmd, k, &lens[k]);
    }
    if (gcra_parse_throttle(&p, argc, argv, lens, errbuf, sizeof(errbuf)) !=
        GCRA_OK) {
        req_reply_error(req, "%s", errbuf);
        return;
    }
    if (!admin && plen > 0 && lens[1] >= plen &&
        memcmp(argv[1], prefix, plen) == 0) {
        req_reply_error(req, LIMITER_ERR_PREFIX, prefix);
        return;
    }
    if (!lm->store.ops->ready(&lm->store, req, resume)) {
        return;
    }
    lm->store.ops->throttle(&lm->store, req, &p, argv[1], lens[1], db,
                            limiter_throttle_done);
}

/* ---------------- The limits tree: CHECK, PEEK, RESET ---------------- */

/* Adds limit `l` (number k of its level) to c. NULL, or an error text. */
static const char *limiter_add(struct store_check *c,
                               const struct limits_level *lev, size_t k,
                               const struct limits_limit *l)
{
    const struct limiter *lm = container_of(c->st, struct limiter, store);
    size_t nrules = limits_rule_count(lm->limits);
    struct store_limit *x = &c->lim[c->n];
    char key[STORE_KEY_MAX];
    const char *err = NULL;
    int kl;

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
     * one on a path checked with WAIT. */
    if (l->algo != LIMITS_GCRA && c->wait_ns > 0 && !x->shadow) {
        return "the WAIT option needs gcra limits: the other algorithms "
               "cannot reserve a later slot";
    }
    kl = limits_limit_key(lev, k, key, sizeof(key));
    PX_ASSERT(kl > 0 && (size_t)kl < sizeof(key));
    x->key = px_strndup(key, (size_t)kl);
    x->klen = (size_t)kl;
    x->group = lev->group;
    x->level = (unsigned)(lev - c->lv->level);
    x->rule =
        lm->rules != NULL && lev->rule < nrules ? lm->rules[lev->rule] : NULL;
    c->n++;
    return NULL;
}

/* Fills c->lim from the levels, with every override applied: a run-time
 * one (as the store knows it) replaces the file's. NULL, or an error
 * text. */
static const char *limiter_build(struct store_check *c)
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
            const char *err = limiter_add(c, lev, k, &limits[k]);
            if (err != NULL) {
                return err;
            }
        }
    }
    return NULL;
}

static void limiter_tree_start(struct limiter *lm, struct req *req,
                               enum store_op op, unsigned tries,
                               void (*resume)(struct req *req));

/* The store decided every limit of `c` (its client still waits): refund
 * what was taken where another group refused (or where the overrides
 * turned out stale), then reply or start over. Takes `c`. */
static void limiter_check_done(struct store_check *c)
{
    struct limiter *lm = container_of(c->st, struct limiter, store);
    struct metrics *m = limiter_metrics(lm);
    struct req *root = c->root;
    struct limiter_wait *slot;
    struct limiter_tally tally;
    int64_t v[5], delay;

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
        if (c->op == STORE_CHECK && lm->store.ops->refund != NULL) {
            /* A group that failed may not have decided: give back what
             * the others took, so a failure never consumes. */
            lm->store.ops->refund(&lm->store, c);
        }
        if (c->err_text != NULL && c->err.len == 0) {
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
            limiter_tree_start(lm, root, op, tries + 1, resume);
            return;
        }
        if (c->err.len == 0) {
            PX_CHECK_OOM(buf_append_str(&c->err,
                                        "-ERR limiter overrides kept changing "
                                        "during the check, try again\r\n"));
        }
        if (c->op == STORE_CHECK) {
            limiter_count_error(c);
        }
        req_reply(root, c->err.data, c->err.len);
        store_check_free(c);
        return;
    }
    if (c->n == 0) {
        /* Every level is lifted by an override. */
        store_check_free(c);
        limiter_reply_ints(root, limiter_unlimited);
        return;
    }
    if (c->op == STORE_CHECK && lm->store.ops->refund != NULL &&
        limiter_aggregate_refunds(c->res, c->lim, c->n, c->wait_ns)) {
        lm->store.ops->refund(&lm->store, c);
    }
    if (c->op == STORE_CHECK &&
        limiter_aggregate_shadow_limited(c->lim, c->n) > 0) {
        lm->shadow_limited++;
    }
    /* PEEK answers as the CHECK it shows would (its wait_ns is 0). */
    if (m != NULL) {
        limiter_tally(m, c, &tally);
    }
    delay =
        limiter_aggregate_check(c->res, c->peek, c->lim, c->n, c->wait_ns, v);
    if (m != NULL && c->op == STORE_CHECK) {
        limiter_count_check(&tally, v[0] == 0);
    }
    slot = c->hold; /* a CHECK ... WAIT's slot: the timer takes it */
    c->hold = NULL;
    store_check_free(c);
    if (delay >= 0) {
        PX_ASSERT(slot != NULL);
        limiter_wait_start(slot, lm->core, root, v, delay, limiter_reply_ints);
    } else {
        limiter_wait_cancel(slot);
        limiter_reply_ints(root, v);
    }
}

static void limiter_hold_free(void *hold)
{
    limiter_wait_cancel(hold);
}

/* A WAIT slot for the identity of c's path (the hash tag of its deepest
 * level: user:alex for user:alex:trade), kept in c->hold until the store
 * has decided. Taken before the store is asked anything, so a check over
 * a cap writes nothing. 0, or -1 after replying the cap's error. */
static int limiter_hold_wait(struct limiter *lm, struct req *req,
                             struct store_check *c)
{
    const struct limits_level *lev = &c->lv->level[c->lv->n - 1];
    struct limiter_wait *w;
    int tl = lev->tag_len > 128 ? 128 : (int)lev->tag_len;

    switch (limiter_wait_reserve(&lm->waits, lev->tag, lev->tag_len, &w)) {
    case LIMITER_WAIT_OK:
        c->hold = w;
        c->hold_free = limiter_hold_free;
        return 0;
    case LIMITER_WAIT_FULL_IDENTITY:
        req_reply_error(req,
                        "too many LIMITER WAIT replies held for '%.*s' "
                        "(limiter_wait_max_per_identity is %zu)",
                        tl, lev->tag, lm->waits.max_per_identity);
        return -1;
    case LIMITER_WAIT_FULL_TOTAL:
        break;
    }
    req_reply_error(req,
                    "too many LIMITER WAIT replies held "
                    "(limiter_wait_max_total is %zu)",
                    lm->waits.max_total);
    return -1;
}

/* Parses [COST n] [WAIT ms] after the path (WAIT only when `wait_ms` is
 * not NULL: a CHECK), WAIT capped to `wait_max_ms`. 0, or -1 after
 * replying an error. */
static int limiter_parse_opts(struct req *req, unsigned wait_max_ms,
                              int64_t *cost, int64_t *wait_ms)
{
    int i;
    size_t len;
    const char *p;

    for (i = 3; i < req->cmd->argc; i++) {
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
static struct limits_levels *limiter_resolve(struct limiter *lm,
                                             struct req *req, const char *path,
                                             size_t plen)
{
    const struct conf *conf = lm->conf;
    const char *err = NULL;
    struct limits_levels *lv;

    if (limits_resolve(lm->limits, path, plen, conf->key_prefix,
                       strlen(conf->key_prefix), lm->resolving,
                       &err) != LIMITS_OK) {
        req_reply_error(req, "%s", err);
        return NULL;
    }
    lv = limits_levels_copy(lm->resolving);
    if (lv == NULL) {
        px_oom(sizeof(*lv) + lm->resolving->n * sizeof(lv->level[0]) +
               lm->resolving->text_len);
    }
    return lv;
}

/* LIMITER CHECK <path> [COST n] [WAIT ms], PEEK <path> [COST n] (CHECK's
 * decision and reply, nothing written) or RESET <path>; `tries` counts
 * the calls when run-time overrides changed under the previous ones. */
static void limiter_tree_start(struct limiter *lm, struct req *req,
                               enum store_op op, unsigned tries,
                               void (*resume)(struct req *req))
{
    struct limits_levels *lv;
    struct store_check *c;
    const char *err, *path;
    size_t plen;
    int64_t cost = 1, wait_ms = 0;
    unsigned cap = 0;
    size_t l;

    if (req->cmd->argc < 3) {
        req_reply_error(req, "wrong number of arguments for 'limiter' "
                             "command");
        return;
    }
    /* PEEK takes CHECK's cost (it answers what that CHECK would), but
     * not WAIT: it reserves nothing. */
    if (op != STORE_RESET &&
        limiter_parse_opts(req, lm->conf->limiter_wait_max_ms, &cost,
                           op == STORE_CHECK ? &wait_ms : NULL) != 0) {
        return;
    }
    if (op == STORE_RESET && req->cmd->argc != 3) {
        req_reply_error(req, "syntax error");
        return;
    }
    path = resp_cmd_arg(req->cmd, 2, &plen);
    lv = limiter_resolve(lm, req, path, plen);
    if (lv == NULL) {
        return;
    }
    if (lv->n == 0) {
        int known = lv->matched > 0;
        px_free(lv);
        if (!known) {
            /* Not even the first segment is in the tree: most likely a
             * typo, which silently admitting would hide. */
            req_reply_error(req, "no limits for path '%.*s'",
                            (int)(plen > 128 ? 128 : plen), path);
        } else if (op == STORE_RESET) {
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
    /* Room for every limit any override could give the levels: a
     * run-time override has the node's own count, or none. */
    for (l = 0; l < lv->n; l++) {
        cap += lv->level[l].nlimits > lv->level[l].nbase
                   ? (unsigned)lv->level[l].nlimits
                   : (unsigned)lv->level[l].nbase;
    }
    c = store_check_new(cap, (unsigned)lv->ngroups);
    c->st = &lm->store;
    c->root = req;
    c->op = op;
    c->tries = tries;
    c->resume = resume;
    c->lv = lv;
    c->cost = cost;
    c->wait_ns = wait_ms * RL_NS_PER_MS;
    err = limiter_build(c);
    if (err != NULL) {
        store_check_free(c);
        req_reply_error(req, "%s", err);
        return;
    }
    if (!lm->store.ops->ready(&lm->store, req, resume)) {
        store_check_free(c);
        return;
    }
    if (op == STORE_RESET && c->n == 0) {
        store_check_free(c);
        PX_CHECK_OOM(resp_enc_int(&req->reply, 0));
        req_reply_built(req);
        return;
    }
    if (store_check_charge(&lm->store, c, req->client) != 0) {
        store_check_free(c);
        req_reply_error(req, "limiter calls pending past "
                             "limiter_pending_max_bytes: retry later");
        return;
    }
    if (op == STORE_CHECK && c->wait_ns > 0 &&
        limiter_hold_wait(lm, req, c) != 0) {
        store_check_free(c);
        return;
    }
    lm->store.ops->check(&lm->store, c, limiter_check_done);
}

/* ---------------- LIMITER OVERRIDE SET|DEL|GET ---------------- */

/* Joins the override words of SET (argv[4..]) into `out` after checking
 * them against the level. 0, or -1 after replying an error. */
static int limiter_override_text(struct req *req,
                                 const struct limits_level *lev, char *out,
                                 size_t outlen, size_t *olen)
{
    const char *words[LIMITER_OVERRIDE_MAX_WORDS];
    size_t lens[LIMITER_OVERRIDE_MAX_WORDS], used = 0;
    struct limits_runtime rt;
    char why[256];
    int i, nw = req->cmd->argc - 4;

    if (nw < 1 || nw > LIMITER_OVERRIDE_MAX_WORDS) {
        req_reply_error(req, "syntax error: LIMITER OVERRIDE SET <path> "
                             "FACTOR f | UNLIMITED | <param> <value> ...");
        return -1;
    }
    for (i = 0; i < nw; i++) {
        words[i] = resp_cmd_arg(req->cmd, 4 + i, &lens[i]);
        if (lens[i] == 0 || memchr(words[i], ' ', lens[i]) != NULL ||
            used + lens[i] + 1 > outlen) {
            req_reply_error(req,
                            "override words must be non-empty, without "
                            "spaces, %d bytes in all at most",
                            LIMITS_RUNTIME_MAX_BYTES - 1);
            return -1;
        }
        if (i > 0) {
            out[used++] = ' ';
        }
        memcpy(out + used, words[i], lens[i]);
        used += lens[i];
    }
    out[used] = '\0';
    if (limits_runtime_parse(lev->base, lev->nbase, nw, words, lens, &rt, why,
                             sizeof(why)) != LIMITS_OK) {
        req_reply_error(req, "%s", why);
        return -1;
    }
    *olen = used;
    return 0;
}

/* LIMITER OVERRIDE SET <path> <words...> | DEL <path> | GET <path>: a
 * run-time override of one node with limits, kept by the store (for the
 * Redis store, in the override hash of the path's identity, where every
 * proxy's checks verify it). */
static void limiter_override(struct limiter *lm, struct req *req,
                             void (*resume)(struct req *req))
{
    enum store_override_op what = 0;
    char text[LIMITS_RUNTIME_MAX_BYTES];
    const struct limits_level *lev;
    struct limits_levels *lv;
    const char *path;
    size_t plen, tlen = 0;

    if (req->cmd->argc >= 3 && resp_cmd_arg_is(req->cmd, 2, "set")) {
        what = STORE_OVERRIDE_SET;
    } else if (req->cmd->argc >= 3 && resp_cmd_arg_is(req->cmd, 2, "del")) {
        what = STORE_OVERRIDE_DEL;
    } else if (req->cmd->argc >= 3 && resp_cmd_arg_is(req->cmd, 2, "get")) {
        what = STORE_OVERRIDE_GET;
    }
    if (what == 0 || req->cmd->argc < 4 ||
        (what != STORE_OVERRIDE_SET && req->cmd->argc != 4)) {
        req_reply_error(req, "syntax error: LIMITER OVERRIDE SET|DEL|GET "
                             "<path> ...");
        return;
    }
    path = resp_cmd_arg(req->cmd, 3, &plen);
    lv = limiter_resolve(lm, req, path, plen);
    if (lv == NULL) {
        return;
    }
    lev = lv->n > 0 ? &lv->level[lv->n - 1] : NULL;
    if (lev == NULL || lev->path_len != plen || lv->matched != lv->nsegments) {
        px_free(lv);
        req_reply_error(req,
                        "no limits at path '%.*s' (an override names a "
                        "node with limits)",
                        (int)(plen > 128 ? 128 : plen), path);
        return;
    }
    if (what == STORE_OVERRIDE_SET &&
        limiter_override_text(req, lev, text, sizeof(text), &tlen) != 0) {
        px_free(lv);
        return;
    }
    if (lm->store.ops->ready(&lm->store, req, resume)) {
        lm->store.ops->override(&lm->store, req, what, lev, path, plen, text,
                                tlen, limiter_store_done);
    }
    px_free(lv);
}

/* ---------------- RULES, RELOAD ---------------- */

/* LIMITER RULES: the tree, and the file's overrides for an admin only
 * (they name identities). One bulk string per line, in an array (RESP2
 * and RESP3 alike), so that redis-cli shows one numbered line per node
 * rather than one quoted string full of \n. */
static void limiter_rules(struct limiter *lm, struct req *req, int admin)
{
    char *text = NULL;
    size_t len = 0;

    if (lm->limits == NULL) {
        req_reply_error(req, "no limits file loaded (limits_file or "
                             "--limits)");
        return;
    }
    if (limits_describe(lm->limits, lm->conf->limiter_shadow, admin != 0, &text,
                        &len) != LIMITS_OK) {
        px_oom(0);
    }
    PX_CHECK_OOM(resp_enc_lines(&req->reply, text, len));
    free(text);
    req_reply_built(req);
}

/* Answered when the reload ends (limiter_reload.c). */
static void limiter_reload(struct limiter *lm, struct req *req)
{
    if (lm->conf->limits_file == NULL) {
        req_reply_error(req, "no limits file configured (limits_file or "
                             "--limits)");
        return;
    }
    limiter_reload_start(&lm->reloads, req);
}

/* The limiter's administration (OVERRIDE, RESET, RELOAD) needs `AUTH
 * admin <password>`, always: a client that could run them could lift its
 * own limits or lock another identity out. With no admin_password nobody
 * can, over the network. 1 when allowed; else replies and returns 0. */
static int limiter_admin_ok(struct limiter *lm, struct req *req, int admin,
                            const char *sub)
{
    if (admin) {
        return 1;
    }
    if (lm->conf->admin_password == NULL) {
        req_reply_error(req,
                        "NOPERM LIMITER %s needs AUTH admin, and no "
                        "admin_password is set: set admin_password in "
                        "proxy.yaml to administer the limiter over the "
                        "network (SIGHUP reloads the limits file)",
                        sub);
    } else {
        req_reply_error(req, "NOPERM LIMITER %s needs AUTH admin", sub);
    }
    return 0;
}

/* ---------------- The public interface (limiter.h) ---------------- */

void limiter_init(struct limiter *lm, struct core *core, struct cluster *cl,
                  const struct conf *conf, int embedded)
{
    memset(lm, 0, sizeof(*lm));
    lm->core = core;
    lm->conf = conf;
    lm->resolving = px_malloc(LIMITS_LEVELS_BYTES);
    limiter_waits_init(&lm->waits, conf->limiter_wait_max_per_identity,
                       conf->limiter_wait_max_total);
    /* The one choice of the store: nothing else asks which one runs. */
    store_init(&lm->store, embedded ? &store_local_ops : &store_redis_ops, core,
               cl, conf);
    limiter_reloads_init(&lm->reloads, core, conf, &lm->limits, &lm->rules);
}

int limiter_load(struct limiter *lm, const char *path, char *err, size_t errlen)
{
    return limiter_reload_load(&lm->reloads, path, err, errlen);
}

void limiter_throttle(struct limiter *lm, struct req *req, int admin,
                      unsigned db, void (*resume)(struct req *req))
{
    limiter_throttle_req(lm, req, admin, db, resume);
}

void limiter_command(struct limiter *lm, struct req *req, int admin,
                     void (*resume)(struct req *req))
{
    if (req->cmd->argc < 2) {
        req_reply_error(req, "wrong number of arguments for 'limiter' "
                             "command");
        return;
    }
    if (resp_cmd_arg_is(req->cmd, 1, "check")) {
        limiter_tree_start(lm, req, STORE_CHECK, 1, resume);
    } else if (resp_cmd_arg_is(req->cmd, 1, "peek")) {
        limiter_tree_start(lm, req, STORE_PEEK, 1, resume);
    } else if (resp_cmd_arg_is(req->cmd, 1, "reset")) {
        if (limiter_admin_ok(lm, req, admin, "RESET")) {
            limiter_tree_start(lm, req, STORE_RESET, 1, resume);
        }
    } else if (resp_cmd_arg_is(req->cmd, 1, "rules")) {
        limiter_rules(lm, req, admin);
    } else if (resp_cmd_arg_is(req->cmd, 1, "override")) {
        if (limiter_admin_ok(lm, req, admin, "OVERRIDE")) {
            limiter_override(lm, req, resume);
        }
    } else if (resp_cmd_arg_is(req->cmd, 1, "reload")) {
        if (limiter_admin_ok(lm, req, admin, "RELOAD")) {
            limiter_reload(lm, req);
        }
    } else {
        limiter_throttle_req(lm, req, admin, 0, resume); /* the limiter's db */
    }
}

void limiter_flush(struct limiter *lm)
{
    if (lm->store.ops->flush != NULL) {
        lm->store.ops->flush(&lm->store, false);
    }
}

void limiter_send_all(struct limiter *lm)
{
    if (lm->store.ops->flush != NULL) {
        lm->store.ops->flush(&lm->store, true);
    }
}

bool limiter_queued(const struct limiter *lm)
{
    return lm->store.queued > 0;
}

bool limiter_caches(struct limiter *lm)
{
    return lm->store.ops->caches != NULL && lm->store.ops->caches(&lm->store);
}

void limiter_forget(struct limiter *lm, const char *key, size_t klen)
{
    if (lm->store.ops->forget != NULL) {
        lm->store.ops->forget(&lm->store, key, klen);
    }
}

int limiter_flush_due(const struct limiter *lm)
{
    return lm->store.early > 0 &&
           lm->store.queued + lm->store.held >= lm->store.early;
}

void limiter_cron(struct limiter *lm)
{
    if (lm->store.ops->cron != NULL) {
        lm->store.ops->cron(&lm->store);
    }
}

void limiter_stop(struct limiter *lm)
{
    if (lm->store.ops->stop != NULL) {
        lm->store.ops->stop(&lm->store);
    }
    limiter_wait_stop_all(&lm->waits);
    limiter_reload_stop(&lm->reloads);
}

void limiter_free(struct limiter *lm)
{
    limits_free(lm->limits);
    lm->limits = NULL;
    px_free(lm->resolving);
    lm->resolving = NULL;
    px_free(lm->rules);
    lm->rules = NULL;
    /* The store first: a call it still holds gives its WAIT slot back. */
    store_free(&lm->store);
    limiter_waits_free(&lm->waits);
}

void limiter_master_changed(struct limiter *lm, const char *old)
{
    if (old[0] == '\0') {
        return; /* the first master: nothing was known before */
    }
    if (lm->store.ops->node_gone != NULL) {
        lm->store.ops->node_gone(&lm->store, old);
    }
    limiter_wait_fail_all(&lm->waits,
                          "ERR the master changed while the WAIT was held "
                          "(its reservation may be lost): retry");
}

uint64_t limiter_fail_open(const struct limiter *lm)
{
    return lm->store.fail_open;
}

uint64_t limiter_shadow_limited(const struct limiter *lm)
{
    return lm->shadow_limited;
}

void limiter_wait_counts(const struct limiter *lm,
                         struct limiter_wait_counts *out)
{
    out->held = lm->waits.held;
    out->refused_identity = lm->waits.refused_identity;
    out->refused_total = lm->waits.refused_total;
}

void limiter_stats(struct limiter *lm, struct store_stats *out)
{
    memset(out, 0, sizeof(*out));
    if (lm->store.ops != NULL && lm->store.ops->stats != NULL) {
        lm->store.ops->stats(&lm->store, out);
    }
    out->pending_bytes = lm->store.pending_bytes;
    out->pending_refused = lm->store.pending_refused;
}
