/* The limiter commands: CL.THROTTLE (exactly as redis-cell) and LIMITER
 * (the raw form, and the subcommands of the limits tree: CHECK, PEEK,
 * ADJUST, RESET, OVERRIDE, RULES, RELOAD).
 *
 *   client req "CL.THROTTLE k B C P [Q]"  (holds the client's place)
 *        | parse (gcra_parse_throttle: redis-cell's texts)
 *        v
 *   st->ops->throttle ------> store_local.c: decided at once
 *        |              \---> store_redis.c: batched into gcra.lua calls
 *        v                    by the flush pass, decided on the node
 *   limiter_store_done --> five integers (or the error)
 *
 *   client req "LIMITER CHECK <path> [COST n] [WAIT ms] [MS] [HEADERS]"
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
 * The limits tree's CHECK, PEEK and RESET (the second diagram) are
 * limiter_tree.c's, with their own context (struct limiter_tree); this
 * file dispatches, and parses and replies CL.THROTTLE and the rest;
 * where the state lives is the store's business (store.h). limiter_init is the
 * one place that names the implementations (store_local_ops, store_redis_ops)
 * and picks one; the stores and the WAIT timers (limiter_wait.c) get their own
 * context, never struct limiter, so every import here points one way:
 *
 *   limiter --> limiter_tree, limiter_wait, limiter_reload, limiter_reply,
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
#include "proxy/limiter/limiter_reply.h"
#include "proxy/limiter/limiter_wait.h"
#include "proxy/limiter/store.h"
#include "proxy/limiter/store_local.h"
#include "proxy/limiter/store_redis.h"

/* Arguments of CL.THROTTLE, with its name: name key B C P [Q]. */
#define LIMITER_MAX_ARGS 6

/* Most words of an override: FACTOR f, or every parameter with a value. */
#define LIMITER_OVERRIDE_MAX_WORDS 16

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
    lv = limiter_tree_resolve(&lm->tree, req, path, plen);
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

/* A lease's give-back: the proxy's own LIMITER ADJUST through the tree. */
static void limiter_lease_adjust(void *tree, struct req *req,
                                 void (*resume)(struct req *req))
{
    limiter_tree(tree, req, STORE_ADJUST, resume);
}

/* ---------------- The public interface (limiter.h) ---------------- */

void limiter_init(struct limiter *lm, struct core *core, struct cluster *cl,
                  const struct conf *conf, int embedded)
{
    memset(lm, 0, sizeof(*lm));
    lm->core = core;
    lm->conf = conf;
    limiter_waits_init(&lm->waits, conf->limiter_wait_max_per_identity,
                       conf->limiter_wait_max_total);
    /* The one choice of the store: nothing else asks which one runs. */
    store_init(&lm->store, embedded ? &store_local_ops : &store_redis_ops, core,
               cl, conf);
    limiter_reloads_init(&lm->reloads, core, conf, &lm->limits, &lm->rules);
    limiter_tree_init(&lm->tree, core, conf, &lm->store, &lm->waits,
                      &lm->limits, &lm->rules);
    /* The embedded store is in the process: nothing for a lease to save. */
    limiter_leases_init(&lm->leases, conf->lease.ms);
    if (!embedded) {
        lm->leases.on = true;
        lm->leases.core = core;
        lm->leases.conf = conf;
        lm->leases.limits = &lm->limits;
        lm->leases.adjust = limiter_lease_adjust;
        lm->leases.adjust_ctx = &lm->tree;
        lm->tree.leases = &lm->leases;
    }
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
        limiter_tree(&lm->tree, req, STORE_CHECK, resume);
    } else if (resp_cmd_arg_is(req->cmd, 1, "peek")) {
        limiter_tree(&lm->tree, req, STORE_PEEK, resume);
    } else if (resp_cmd_arg_is(req->cmd, 1, "adjust")) {
        limiter_tree(&lm->tree, req, STORE_ADJUST, resume);
    } else if (resp_cmd_arg_is(req->cmd, 1, "reset")) {
        if (limiter_admin_ok(lm, req, admin, "RESET")) {
            limiter_lease_drop_arg(&lm->leases, req, 2, false);
            limiter_tree(&lm->tree, req, STORE_RESET, resume);
        }
    } else if (resp_cmd_arg_is(req->cmd, 1, "release")) {
        limiter_tree(&lm->tree, req, STORE_RELEASE, resume);
    } else if (resp_cmd_arg_is(req->cmd, 1, "rules")) {
        limiter_rules(lm, req, admin);
    } else if (resp_cmd_arg_is(req->cmd, 1, "override")) {
        if (limiter_admin_ok(lm, req, admin, "OVERRIDE")) {
            limiter_lease_drop_arg(&lm->leases, req, 3, true);
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
    limiter_leases_drain(&lm->leases); /* checks a settled take held */
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
    return lm->store.queued > 0 || !queue_empty(&lm->leases.ready);
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
    limiter_leases_cron(&lm->leases, 0);
    limiter_leases_drain(&lm->leases);
    if (lm->store.ops->cron != NULL) {
        lm->store.ops->cron(&lm->store);
    }
}

bool limiter_stop_begin(struct limiter *lm, uint64_t now_ms)
{
    limiter_leases_give_back_all(&lm->leases);
    limiter_send_all(lm);
    return limiter_leases_stop_from(&lm->leases, now_ms);
}

bool limiter_stop_waits(const struct limiter *lm, uint64_t now_ms)
{
    return limiter_leases_stop_waits(&lm->leases, now_ms);
}

void limiter_stop(struct limiter *lm)
{
    /* Shutdown: what the leases hold goes back before the store fails
     * what it has not sent (limiter_stop_begin gave them back already
     * when its caller waited for the answers: then none is left). */
    limiter_leases_give_back_all(&lm->leases);
    if (lm->store.ops->flush != NULL) {
        lm->store.ops->flush(&lm->store, true);
    }
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
    limiter_tree_free(&lm->tree);
    limiter_leases_free(&lm->leases);
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
    return lm->tree.shadow_limited;
}

void limiter_lease_stats(const struct limiter *lm, uint64_t out[4])
{
    out[0] = lm->leases.hits;
    out[1] = lm->leases.takes;
    out[2] = lm->leases.returned_units;
    out[3] = lm->leases.waits;
}

uint64_t limiter_adjusts(const struct limiter *lm)
{
    return lm->tree.adjusts;
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
