/* The Redis limiter store (see store_redis.h): CL.THROTTLE calls and the
 * tag groups of LIMITER calls, queued for batched script calls; the
 * override cache; the store's ops. Its state (the queue, the caches) is a
 * struct store_redis, the struct store's `impl`, made by the init op; it
 * sees the limiter only through store.h.
 *
 *   CL.THROTTLE k B C P [Q]     LIMITER CHECK|PEEK path (limiter.c: the
 *        |                       levels' limits, grouped by hash tag;
 *        |                       refunds of groups that admitted)
 *        | refused by the refusal cache (refusal_store.c)? --> the reply,
 *        |                                                     no Redis
 *        v
 *   a store_redis_call, or a store_redis_group with its words made
 *   (lua_wire.c), queued; store_redis_batch.c gathers them into script
 *   calls per kind, node and lane, sends them and hands each answer back
 *        |
 *        v
 *   a call's [TAT, flag] --> gcra_decide_from_script --> five integers
 *          --> done()
 *   a group's [limited, now_s, now_us, entry...] | ["override", value...]
 *          | -error --> c->res[i], c->peek[i] / the override cache,
 *          c->stale / c->err; after the check's last group, c->done(c)
 *
 * The scripts decide and write atomically on the node that owns the keys,
 * with the node's clock; the proxy recomputes the reply from what the
 * script read, so the reply's rounding lives in one place (algorithms/).
 * When the node cannot answer, `store_down_policy` decides: fail_closed
 * passes the error on, fail_open admits and counts it (st->fail_open).
 *
 * A group names the run-time overrides this proxy assumed (the cache
 * `overrides`); a script that finds others reports them and the check is
 * started over. A group that admitted is marked (c->admitted) so the
 * commands can have it refunded ("refund" mode, each limit's undo token)
 * when another group refused or failed: a check consumes everywhere or
 * nowhere. A limit of a shadow level that refused took nothing, so its
 * group's refund leaves it out. RESET is a call in mode "reset" per
 * group, queued as a check's. */
#include "proxy/limiter/store_redis.h"

#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "algorithms/gcra.h"
#include "conf/conf.h"
#include "conf/limits.h"
#include "parser/resp.h"
#include "parser/resp_value.h"
#include "parser/slot.h"
#include "proxy/core/cluster.h"
#include "proxy/core/hmap.h"
#include "proxy/core/log.h"
#include "proxy/core/req.h"
#include "proxy/core/upstream.h"
#include "proxy/core/util.h"
#include "proxy/limiter/aclcheck.h"
#include "proxy/limiter/lua_wire.h"
#include "proxy/limiter/refusal.h"
#include "proxy/limiter/refusal_store.h"
#include "proxy/limiter/store.h"
#include "proxy/limiter/store_redis_batch.h"

/* Cached run-time overrides past this many are forgotten at once: the
 * scripts verify every assumption, so the cache only saves retries. */
#define STORE_REDIS_OVERRIDE_CACHE_MAX 100000

/* The Redis store's state: a struct store's `impl`. */
struct store_redis {
    struct hmap overrides; /* path -> owned text, the run-time overrides
                              the scripts reported (a cache they verify on
                              every call) */
    struct store_redis_batcher batcher; /* the calls on their way */
    struct hmap checked;           /* node name -> itself: masters whose Redis
                                      users were checked (aclcheck) */
    struct refusal_store rf;       /* refusals answered here (CL.THROTTLE,
                                      LIMITER) */
    struct lua_wire_params params; /* the last limit's script words */
};

static int store_redis_ready(struct store *st, struct req *req,
                             void (*resume)(struct req *req))
{
    if (!cluster_ready(st->cl)) {
        cluster_hold(st->cl, req, resume);
        return 0;
    }
    return 1;
}

/* The periodic pass: each master's Redis users are checked once
 * (aclcheck). */
static void store_redis_cron(struct store *st)
{
    struct store_redis *rs = st->impl;
    struct node *m[64];
    unsigned n, i;

    refusal_cron(&rs->rf.cache);
    if (rs->batcher.no_functions || !cluster_ready(st->cl)) {
        return;
    }
    n = cluster_masters(st->cl, m, ARRAY_SIZE(m));
    for (i = 0; i < n; i++) {
        size_t len = strlen(m[i]->name);
        if (!upstream_is_ready(cluster_limiter_upstream(m[i], 0))) {
            continue; /* checked once it is up: a down node cannot say */
        }
        if (hmap_get(&rs->checked, m[i]->name, len) == NULL) {
            hmap_put(&rs->checked, m[i]->name, len, &rs->checked);
            aclcheck_node(st->cl, st->conf, m[i]);
        }
    }
}

/* ---------------- CL.THROTTLE: batched gcra.lua calls ---------------- */

static void store_redis_call_free(struct store_redis_call *call)
{
    px_free(call);
}

/* Ends a call: its client's request gets `frame` turned into a reply (an
 * error frame as it is, or fail_open), or is freed when it is an orphan. */
static void store_redis_call_error(struct store *st,
                                   struct store_redis_call *call,
                                   const char *frame, size_t len)
{
    struct req *root = call->root;
    struct store_reply r = { .kind = STORE_REPLY_FRAME };

    if (!req_owed_back(root)) {
        /* the client left while the node worked */
    } else if (store_redis_down(frame, len) &&
               st->conf->store_down == CONF_FAIL_OPEN) {
        r.kind = STORE_REPLY_INTS;
        r.v[0] = 0;
        r.v[1] = call->p.limit;
        r.v[2] = 0;
        r.v[3] = -1;
        r.v[4] = 0;
        r.fail_open = 1;
        st->fail_open++;
        call->done(st, root, &r);
    } else {
        r.text = frame;
        r.len = len;
        call->done(st, root, &r);
    }
    store_redis_call_free(call);
}

/* Ends call i of n of a batch from the script's "runs" reply `v`; the
 * batch was sent at `sent_ns`. */
static void store_redis_call_done(struct store *st,
                                  struct store_redis_call *call,
                                  const struct resp_value *v, unsigned i,
                                  unsigned n, uint64_t sent_ns)
{
    struct req *root = call->root;
    struct store_reply r = { .kind = STORE_REPLY_ERROR };
    struct gcra_script_reply sr;
    struct gcra_result res;
    const char *err = NULL;

    if (!req_owed_back(root)) {
        /* the client left while the node worked */
        store_redis_call_free(call);
        return;
    }
    if (lua_wire_runs_item(v, n, i, &sr, &err) != 0) {
        r.text = err;
    } else {
        if (gcra_decide_from_script(&call->p, &sr, &res, &err) != GCRA_OK) {
            log_warn("limiter: %s", err);
            r.text = err;
        } else {
            r.kind = STORE_REPLY_INTS;
            rl_reply_ints(&res.d, r.v);
            struct store_redis *rs = st->impl;
            refusal_store_throttled(&rs->rf, call->it.db, call->key, call->klen,
                                    &sr, sent_ns);
        }
    }
    call->done(st, root, &r);
    store_redis_call_free(call);
}

/* Queued for the flush pass (store_redis_batch_flush), with the other calls of
 * this loop turn. */
static void store_redis_throttle(struct store *st, struct req *req,
                                 const struct gcra_params *p, const char *key,
                                 size_t klen, unsigned db, store_done_fn *done)
{
    struct store_redis *rs = st->impl;
    struct store_redis_call *call;
    struct store_reply r = { .kind = STORE_REPLY_INTS };
    struct gcra_result res;

    if (db == 0 &&
        refusal_store_throttle(&rs->rf, p, key, klen, uv_hrtime(), &res)) {
        /* Refused by the state Redis holds, at a time Redis has not
         * reached yet: Redis would refuse it too. */
        rs->rf.cache.hits++;
        rl_reply_ints(&res.d, r.v);
        done(st, req, &r);
        return;
    }
    call = px_calloc(1, sizeof(*call) + klen + 1);
    call->it.kind = STORE_REDIS_THROTTLE;
    call->it.slot = cluster_sharded(st->cl) ? slot_for_key(key, klen) : 0;
    call->it.lane = req->lane;
    call->it.db = db;
    call->root = req;
    call->p = *p;
    memcpy(call->key, key, klen);
    call->klen = klen;
    call->done = done;
    req->owed++;
    store_redis_batch_queue(&rs->batcher, &call->it);
    st->queued++;
}

/* ---------------- The override cache ---------------- */

/* The run-time override of `path` the scripts last reported, NUL-ended,
 * or NULL. */
static const char *store_redis_override_known(struct store *st,
                                              const char *path, size_t len)
{
    struct store_redis *rs = st->impl;

    return hmap_get(&rs->overrides, path, len);
}

/* Records what a script found for `path` ("" or NULL: nothing). */
static void store_redis_override_learn(struct store *st, const char *path,
                                       size_t len, const char *text,
                                       size_t tlen)
{
    struct store_redis *rs = st->impl;

    if (text == NULL || tlen == 0) {
        px_free(hmap_del(&rs->overrides, path, len));
        return;
    }
    if (hmap_get(&rs->overrides, path, len) == NULL &&
        rs->overrides.count >= STORE_REDIS_OVERRIDE_CACHE_MAX) {
        hmap_free(&rs->overrides, px_free);
        hmap_init(&rs->overrides);
    }
    px_free(hmap_put(&rs->overrides, path, len, px_strndup(text, tlen)));
}

/* ---------------- LIMITER CHECK|PEEK|RESET: limiter.lua ---------------- */

/* Keys of group g. */
static unsigned store_redis_group_keys(const struct store_check *c, unsigned g)
{
    unsigned i, nk = 0;

    for (i = 0; i < c->n; i++) {
        nk += c->lim[i].group == g;
    }
    return nk;
}

/* Group g's "override" reply: the values of its levels' paths, in the
 * order they were sent. */
static void store_redis_group_overrides(struct store_check *c, unsigned g,
                                        const struct resp_value *v)
{
    size_t l, j = 1;

    for (l = 0; l < c->lv->n && j < v->n; l++) {
        const struct limits_level *lev = &c->lv->level[l];
        const struct resp_value *e = &v->elem[j];
        if (lev->group != g) {
            continue;
        }
        j++;
        store_redis_override_learn(c->st, lev->path, lev->path_len,
                                   e->type == '$' && !e->null ? e->str : NULL,
                                   e->type == '$' && !e->null ? e->len : 0);
    }
    c->stale = 1;
}

/* Group g of a CHECK or PEEK could not be asked (its node is down or did
 * not answer in time, `frame`): with store_down_policy fail_open, each of
 * its limits admits undecided, as CL.THROTTLE does ([0, limit, 0, -1, 0]),
 * and nothing is taken there, so nothing is refunded. The other groups'
 * decisions stand: a live node's refusal still refuses the check. 1 when
 * it failed open. */
static int store_redis_group_fail_open(struct store_check *c, unsigned g,
                                       const char *frame, size_t len)
{
    unsigned i;

    if (c->st->conf->store_down != CONF_FAIL_OPEN ||
        (c->op != STORE_CHECK && c->op != STORE_PEEK) ||
        !store_redis_down(frame, len)) {
        return 0;
    }
    for (i = 0; i < c->n; i++) {
        struct store_limit *x = &c->lim[i];
        if (x->group != g) {
            continue;
        }
        store_fail_open_limit(c, i);
    }
    c->admitted[g] = 0;
    c->st->fail_open++;
    return 1;
}

/* One group's answer `v` (its element of a batch's reply, or an error
 * for it): each of its limits' decision. */
static void store_redis_group_reply(struct store_check *c, unsigned g,
                                    const struct resp_value *v)
{
    switch (lua_wire_group_decode(c, g, v)) {
    case LUA_WIRE_ERROR:
        if (store_redis_group_fail_open(c, g, v->raw, v->raw_len)) {
            return;
        }
        if (c->err.len == 0) {
            PX_CHECK_OOM(buf_append(&c->err, v->raw, v->raw_len));
        }
        return;
    case LUA_WIRE_OVERRIDE:
        store_redis_group_overrides(c, g, v);
        return;
    default:
        return; /* decided, or c->err says why not */
    }
}

static void store_redis_group_free(struct store_redis_group *q)
{
    lua_wire_group_free(&q->w);
    px_free(q);
}

/* The override cache as lua_wire and the refusal cache ask it (`arg`: the
 * store). */
static const char *store_redis_known(void *arg, const char *path, size_t len)
{
    return store_redis_override_known(arg, path, len);
}

/* The override hash of group g of `c` into `out`; its length. */
static size_t store_redis_group_ovkey(const struct store_check *c, unsigned g,
                                      char out[STORE_KEY_MAX])
{
    int ovlen =
        lua_wire_override_key(c->st->conf->key_prefix,
                              lua_wire_group_level(c, g), out, STORE_KEY_MAX);

    PX_ASSERT(ovlen > 0 && ovlen < STORE_KEY_MAX);
    return (size_t)ovlen;
}

/* Queues group g of `c` for the flush pass in `mode` (a refund is
 * nobody's to wait for), its words made now (lua_wire_group_encode): its
 * keys, the override hash of its tag last (which also routes a group
 * whose levels an override lifted entirely), then its arguments. */
static void store_redis_group_queue(struct store_check *c, unsigned g,
                                    enum lua_wire_mode mode)
{
    struct store_redis *rs = c->st->impl;
    struct store_redis_group *q = px_calloc(1, sizeof(*q));
    char ovkey[STORE_KEY_MAX];
    size_t ovlen = store_redis_group_ovkey(c, g, ovkey);

    q->it.kind = STORE_REDIS_GROUP;
    q->it.lane = c->root->lane;
    q->it.slot = cluster_sharded(c->st->cl) ? slot_for_key(ovkey, ovlen) : 0;
    lua_wire_group_encode(&q->w, c, g, mode, ovkey, ovlen, store_redis_known,
                          c->st, &rs->params);
    q->cacheable =
        mode != LUA_WIRE_REFUND && mode != LUA_WIRE_UNADJUST &&
        refusal_store_group_cacheable(c, g, store_redis_known, c->st);
    store_redis_batch_queue(&rs->batcher, &q->it);
    c->st->queued++;
}

/* One more part of `c` answered; after the last, its completion (or the
 * orphan is freed). */
static void store_redis_check_part_done(struct store_check *c)
{
    if (--c->pending > 0) {
        return;
    }
    if (!req_owed_back(c->root)) {
        store_check_free(c);
        return;
    }
    c->done(c);
}

/* A queued group's answer `e` (its element of the batch's reply, sent at
 * local time `sent_ns`, or an error for it); frees `q`. */
static void store_redis_group_done(struct store_redis_group *q,
                                   const struct resp_value *e, uint64_t sent_ns)
{
    struct store_check *c = q->w.c;

    if (c != NULL) {
        struct store_redis *rs = c->st->impl;
        store_redis_group_reply(c, q->w.g, e);
        if (q->w.reset) {
            /* Again before the client hears of it: a refusal read before
             * the deletion may have been learnt meanwhile, and Redis's
             * invalidation of it may still be on its way. */
            refusal_store_forget_group(&rs->rf, c, q->w.g);
        } else if (c->err.len == 0 && !c->stale) {
            refusal_store_group_learn(&rs->rf, &q->w, q->cacheable, e, sent_ns);
        }
        store_redis_check_part_done(c);
    }
    store_redis_group_free(q);
}

/* RESET of group g: mode "reset" of its limits, which deletes their
 * records in the identity's state string and their keys (the sorted
 * sets', and the previous release's keys) in one script call, so no
 * check on another connection writes in between; it answers how many
 * went. A check the client pipelines after the RESET must not be refused
 * from the states it deletes: forgotten now, and again at its answer. */
static void store_redis_reset_queue(struct store_check *c, unsigned g)
{
    struct store_redis *rs = c->st->impl;

    refusal_store_forget_group(&rs->rf, c, g);
    store_redis_group_queue(c, g, LUA_WIRE_RESET);
}

/* ADJUST's call to group g. One that gives back makes refused keys
 * admissible: a check this client pipelines after it must not be refused
 * from the cache (the reply forgets them again, refusal_store_group_learn:
 * one learnt meanwhile from an older read). A charge leaves every cached
 * refusal right. */
static void store_redis_adjust_queue(struct store_check *c, unsigned g)
{
    struct store_redis *rs = c->st->impl;

    if (c->delta < 0) {
        refusal_store_forget_group(&rs->rf, c, g);
    }
    store_redis_group_queue(c, g, LUA_WIRE_ADJUST);
}

/* The check op: counts the call in c->root->owed, frees the orphan
 * itself. */
static void store_redis_check(struct store *st, struct store_check *c,
                              store_check_done_fn *done)
{
    struct store_redis *rs = st->impl;
    unsigned g;

    c->done = done;
    /* An ADJUST writes whatever its state: never answered from the
     * cache. */
    if (c->op != STORE_RESET && c->op != STORE_ADJUST &&
        refusal_count(&rs->rf.cache) > 0 &&
        refusal_store_refused(&rs->rf, c, st->conf->key_prefix, uv_hrtime(),
                              store_redis_known, st)) {
        rs->rf.cache.hits++;
        done(c);
        return;
    }
    /* RESET deletes states and RELEASE frees slots, so a group without
     * any limit has nothing to do; checks call every group, to verify its
     * overrides. */
    for (g = 0; g < c->ngroups; g++) {
        c->pending += (c->op != STORE_RELEASE && c->op != STORE_RESET) ||
                      store_redis_group_keys(c, g) > 0;
    }
    c->root->owed++;
    for (g = 0; g < c->ngroups; g++) {
        if ((c->op == STORE_RELEASE || c->op == STORE_RESET) &&
            store_redis_group_keys(c, g) == 0) {
            continue;
        }
        if (c->op == STORE_ADJUST) {
            store_redis_adjust_queue(c, g);
        } else if (c->op == STORE_RESET) {
            store_redis_reset_queue(c, g);
        } else {
            store_redis_group_queue(
                c, g, c->op == STORE_PEEK ? LUA_WIRE_PEEK : LUA_WIRE_CHECK);
        }
    }
}

/* The refund op: a "refund" call to every group that admitted; nobody
 * waits for its reply. Its keys are written again, so the refusal cache
 * forgets them. */
static void store_redis_refund(struct store *st, struct store_check *c)
{
    struct store_redis *rs = st->impl;
    unsigned g;

    for (g = 0; g < c->ngroups; g++) {
        unsigned i, takers = 0;
        if (c->op == STORE_ADJUST) {
            /* Best effort: the groups that applied the delta take it
             * back (a group that failed wrote nothing). */
            if (c->admitted[g]) {
                if (c->delta > 0) {
                    refusal_store_forget_group(&rs->rf, c, g);
                }
                store_redis_group_queue(c, g, LUA_WIRE_UNADJUST);
            }
            continue;
        }
        for (i = 0; i < c->n; i++) {
            takers += lua_wire_group_sends(c, i, g, 1);
        }
        if (c->admitted[g] && takers > 0) {
            refusal_store_forget_group(&rs->rf, c, g);
            store_redis_group_queue(c, g, LUA_WIRE_REFUND);
        }
    }
}

/* ---------------- LIMITER OVERRIDE SET|DEL|GET ---------------- */

/* One OVERRIDE command on its way to the node of the override hash. */
struct store_redis_override {
    struct store *st;    /* borrowed: the store it runs in */
    struct req *root;    /* borrowed: the client's request */
    store_done_fn *done; /* the completion */
};

/* The node's reply to an OVERRIDE command, relayed (SET's integer as
 * +OK). */
static void store_redis_override_on_reply(struct req *part, const char *frame,
                                          size_t len)
{
    static const char reply_ok[] = "+OK\r\n";
    struct store_redis_override *oc = part->ctx;
    struct store_reply r = { .kind = STORE_REPLY_FRAME };

    r.text = frame;
    r.len = len;
    if (part->part == 1 && frame[0] == ':') {
        r.text = reply_ok;
        r.len = sizeof(reply_ok) - 1;
    }
    if (req_owed_back(oc->root)) {
        oc->done(oc->st, oc->root, &r);
    }
    px_free(oc);
}

/* HSET/HDEL/HGET of `path` in the override hash of `lev`'s identity, where
 * every proxy's checks verify it. */
static void store_redis_override(struct store *st, struct req *req,
                                 enum store_override_op op,
                                 const struct limits_level *lev,
                                 const char *path, size_t plen,
                                 const char *text, size_t tlen,
                                 store_done_fn *done)
{
    struct store_redis_override *oc;
    char key[STORE_KEY_MAX];
    const char *argv[4];
    size_t lens[4];
    int argc = op == STORE_OVERRIDE_SET ? 4 : 3, kl, i;

    kl = lua_wire_override_key(st->conf->key_prefix, lev, key, sizeof(key));
    PX_ASSERT(kl > 0 && (size_t)kl < sizeof(key));
    if (op != STORE_OVERRIDE_GET) {
        /* This proxy applies it at once; the others on their next check. */
        store_redis_override_learn(
            st, path, plen, op == STORE_OVERRIDE_SET ? text : NULL, tlen);
    }
    argv[0] = op == STORE_OVERRIDE_SET   ? "HSET"
              : op == STORE_OVERRIDE_DEL ? "HDEL"
                                         : "HGET";
    argv[1] = key;
    argv[2] = path;
    argv[3] = text;
    lens[0] = 0;
    lens[1] = (size_t)kl;
    lens[2] = plen;
    lens[3] = tlen;
    for (i = 0; i < argc; i++) {
        if (lens[i] == 0) {
            lens[i] = strlen(argv[i]);
        }
    }
    oc = px_calloc(1, sizeof(*oc));
    oc->st = st;
    oc->root = req;
    oc->done = done;
    req->owed++;
    store_redis_part_send(
        st, resp_cmd_new(argc, argv, lens), store_redis_override_on_reply, oc,
        (unsigned)(op == STORE_OVERRIDE_SET), req->lane, key, (size_t)kl);
}

/* ---------------- The store interface (store.h) ---------------- */

/* Where store_redis_batch.c hands the answers. */
static const struct store_redis_answers store_redis_answers = {
    .call_done = store_redis_call_done,
    .call_error = store_redis_call_error,
    .group_done = store_redis_group_done,
};

static void store_redis_flush(struct store *st, bool all)
{
    struct store_redis *rs = st->impl;

    store_redis_batch_flush(&rs->batcher, all);
}

/* Shutdown: the calls not yet sent fail. */
static void store_redis_stop(struct store *st)
{
    struct store_redis *rs = st->impl;

    store_redis_batch_stop(&rs->batcher);
}

static void store_redis_init(struct store *st)
{
    struct store_redis *rs = px_calloc(1, sizeof(*rs));

    hmap_init(&rs->overrides);
    hmap_init(&rs->checked);
    refusal_init(&rs->rf.cache, st->cl, st->conf->refusal_cache_size,
                 st->conf->refusal_cache_max_bytes);
    /* A full batch (the calls of clients that owe nothing else share one
     * connection per node): sent at once, it keeps Redis busy while
     * cellgate reads on. */
    st->early = STORE_REDIS_BATCH_MAX;
    st->impl = rs;
    store_redis_batch_init(&rs->batcher, st, &store_redis_answers);
}

/* After stop: nothing is pending any more. */
static void store_redis_free(struct store *st)
{
    struct store_redis *rs = st->impl;

    if (rs != NULL) {
        store_redis_batch_free(&rs->batcher);
        hmap_free(&rs->overrides, px_free);
        hmap_free(&rs->checked, NULL);
        refusal_free(&rs->rf.cache);
        refusal_store_free(&rs->rf);
        px_free(rs);
        st->impl = NULL;
    }
}

static bool store_redis_caches(struct store *st)
{
    struct store_redis *rs = st->impl;

    return refusal_count(&rs->rf.cache) > 0;
}

static void store_redis_forget(struct store *st, const char *key, size_t klen)
{
    struct store_redis *rs = st->impl;

    if (key == NULL) {
        refusal_forget_all(&rs->rf.cache);
    } else {
        refusal_forget(&rs->rf.cache, key, klen);
    }
}

static void store_redis_node_gone(struct store *st, const char *name)
{
    struct store_redis *rs = st->impl;

    refusal_node_gone(&rs->rf.cache, name);
    /* Its users are checked again where they now are (aclcheck). */
    hmap_del(&rs->checked, name, strlen(name));
}

static void store_redis_stats(struct store *st, struct store_stats *out)
{
    struct store_redis *rs = st->impl;

    out->refusal_hits = rs->rf.cache.hits;
    out->refusal_keys = refusal_count(&rs->rf.cache);
    out->refusal_bytes = rs->rf.cache.bytes;
    out->refusal_skipped = rs->rf.cache.skipped;
    out->refusal_invalidations = rs->rf.cache.invalidations;
}

const struct store_ops store_redis_ops = {
    .init = store_redis_init,
    .free = store_redis_free,
    .ready = store_redis_ready,
    .throttle = store_redis_throttle,
    .check = store_redis_check,
    .refund = store_redis_refund,
    .override_known = store_redis_override_known,
    .override = store_redis_override,
    .flush = store_redis_flush,
    .caches = store_redis_caches,
    .forget = store_redis_forget,
    .node_gone = store_redis_node_gone,
    .cron = store_redis_cron,
    .stop = store_redis_stop,
    .stats = store_redis_stats,
};
