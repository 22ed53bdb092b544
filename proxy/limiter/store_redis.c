/* The Redis limiter store (see store_redis.h): CL.THROTTLE calls batched
 * into gcra.lua, LIMITER calls as one limiter.lua call per tag group, the
 * override cache.
 *
 *   CL.THROTTLE k B C P [Q]  (parsed by limiter.c; the client's request
 *        |                    holds its place, req->owed counts the call)
 *        | queued in lm->pending until the flush pass (limiter_flush)
 *        v
 *   part "EVALSHA <gcra sha> n k1..kn <inc_s inc_ns dvt_s dvt_ns>... each"
 *        on the shared connection of the keys' node (one slot in cluster
 *        mode, at most STORE_REDIS_BATCH_MAX calls)
 *          | -NOSCRIPT: once more as EVAL <body> (which also loads it),
 *          |            never shown
 *          | -MOVED/-ASK: followed like any command
 *          v
 *   [limited, now_s, now_us, stored TAT...]
 *          --> gcra_decide_from_script --> five integers --> done()
 *
 * The script decides and writes atomically on the node that owns the key,
 * with the node's clock; the proxy recomputes the reply from what the script
 * read, so the reply's rounding lives in one place (algorithms/). When the
 * node cannot answer, `store_down_policy` decides: fail_closed passes the
 * error on, fail_open admits and counts it (lm->fail_open).
 *
 * A LIMITER check sends one limiter.lua call per tag group, each naming the
 * run-time overrides this proxy assumed (the cache lm->overrides); a script
 * that finds others reports them and the check is started over. Where one
 * group admitted and another refused or failed, the admitted groups are
 * refunded ("refund" mode, with each limit's undo token). */
#include "proxy/limiter/store_redis.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/gcra.h"
#include "algorithms/scripts.h"
#include "conf/conf.h"
#include "conf/limits.h"
#include "parser/resp.h"
#include "parser/resp_value.h"
#include "parser/slot.h"
#include "proxy/core/cluster.h"
#include "proxy/core/log.h"
#include "proxy/core/req.h"
#include "proxy/core/util.h"
#include "proxy/limiter/limiter.h"
#include "proxy/limiter/store.h"
#include "proxy/limiter/store_redis_check.h"

/* Most CL.THROTTLE calls sent in one script call: enough to take the
 * per-call cost of EVALSHA off Redis under load, small enough that one
 * call never holds a node for long. */
#define STORE_REDIS_BATCH_MAX 64

/* Cached run-time overrides past this many are forgotten at once: the
 * scripts verify every assumption, so the cache only saves retries. */
#define STORE_REDIS_OVERRIDE_CACHE_MAX 100000

/* One CL.THROTTLE waiting for its script call. Queued in lm->pending until
 * the flush pass, then owned by the batch that carries it. */
struct limiter_call {
    struct req *root;     /* borrowed: the client's request */
    struct gcra_params p; /* parsed arguments */
    char *key;            /* owned copy of the key */
    size_t klen;          /* bytes in key */
    store_done_fn *done;  /* the completion */
    struct queue link;    /* link in lm->pending */
};

/* The calls of one script call (all for one node; in cluster mode all of
 * one slot, so a MOVED moves them all). Owned by the part carrying it. */
struct limiter_batch {
    struct limiter *lm;    /* borrowed: the limiter it runs in */
    unsigned n;            /* calls */
    unsigned noscript : 1; /* already retried with EVAL */
    struct limiter_call *call[STORE_REDIS_BATCH_MAX]; /* owned */
};

void store_redis_part_send(struct limiter *lm, struct resp_cmd *cmd,
                           req_reply_fn *fn, void *ctx, unsigned partno,
                           uint64_t cid, const char *key, size_t klen)
{
    struct req *part = req_own(cmd, fn, ctx);

    part->part = partno;
    part->cid = cid;
    cluster_send_key(lm->cl, key, klen, part);
}

static int store_redis_ready(struct limiter *lm, struct req *req)
{
    if (!cluster_ready(lm->cl)) {
        cluster_hold(lm->cl, req);
        return 0;
    }
    return 1;
}

/* ---------------- CL.THROTTLE: batched gcra.lua calls ---------------- */

/* True for errors that mean "the store did not answer", as opposed to an
 * answer that is an error (WRONGTYPE, a range error). */
static int store_redis_down(const char *frame, size_t len)
{
    static const char *const down[] = {
        "-ERR upstream ", "-CLUSTERDOWN ", "-TRYAGAIN ",
        "-LOADING ",      "-MASTERDOWN ",
    };
    size_t k, n;

    for (k = 0; k < ARRAY_SIZE(down); k++) {
        n = strlen(down[k]);
        if (len >= n && memcmp(frame, down[k], n) == 0) {
            return 1;
        }
    }
    return 0;
}

static void store_redis_call_free(struct limiter_call *call)
{
    px_free(call->key);
    px_free(call);
}

/* Ends a call: its client's request gets `frame` turned into a reply (an
 * error frame as it is, or fail_open), or is freed when it is an orphan. */
static void store_redis_call_error(struct limiter *lm,
                                   struct limiter_call *call, const char *frame,
                                   size_t len)
{
    struct req *root = call->root;
    struct store_reply r = { .kind = STORE_REPLY_FRAME };

    if (!req_owed_back(root)) {
        /* the client left while the node worked */
    } else if (store_redis_down(frame, len) &&
               lm->conf->store_down == CONF_FAIL_OPEN) {
        r.kind = STORE_REPLY_INTS;
        r.v[0] = 0;
        r.v[1] = call->p.limit;
        r.v[2] = 0;
        r.v[3] = -1;
        r.v[4] = 0;
        lm->fail_open++;
        call->done(lm, root, &r);
    } else {
        r.text = frame;
        r.len = len;
        call->done(lm, root, &r);
    }
    store_redis_call_free(call);
}

/* Ends call i of a batch from the script's "each" reply `v`. */
static void store_redis_call_done(struct limiter *lm, struct limiter_call *call,
                                  const struct resp_value *v, unsigned i,
                                  unsigned n)
{
    static const char wrongtype[] =
        "WRONGTYPE Operation against a key holding the wrong kind of value";
    struct req *root = call->root;
    const struct resp_value *raw = &v->elem[3 + i];
    const struct resp_value *flag = &v->elem[3 + n + i];
    struct store_reply r = { .kind = STORE_REPLY_ERROR };
    struct gcra_script_reply sr;
    struct gcra_result res;
    const char *err = NULL;

    if (!req_owed_back(root)) {
        /* the client left while the node worked */
        store_redis_call_free(call);
        return;
    }
    if (flag->integer == -1) {
        r.text = wrongtype;
    } else if (flag->integer == -2) {
        r.text = GCRA_ERR_TAT_RANGE;
    } else {
        sr.limited = flag->integer;
        sr.now_s = v->elem[1].integer;
        sr.now_us = v->elem[2].integer;
        sr.tat = raw->null ? NULL : raw->str;
        sr.tat_len = raw->null ? 0 : raw->len;
        if (gcra_decide_from_script(&call->p, &sr, &res, &err) != GCRA_OK) {
            log_warn("limiter: %s", err);
            r.text = err;
        } else {
            r.kind = STORE_REPLY_INTS;
            rl_reply_ints(&res.d, r.v);
        }
    }
    call->done(lm, root, &r);
    store_redis_call_free(call);
}

static void store_redis_batch_send(struct limiter_batch *b);

/* Every call of `b` ends with the same error frame; frees `b`. */
static void store_redis_batch_error(struct limiter_batch *b, const char *frame,
                                    size_t len)
{
    unsigned i;

    for (i = 0; i < b->n; i++) {
        store_redis_call_error(b->lm, b->call[i], frame, len);
    }
    px_free(b);
}

static void store_redis_on_batch(struct req *part, const char *frame,
                                 size_t len)
{
    static const char bad[] = "-" GCRA_ERR_SCRIPT "\r\n";
    struct limiter_batch *b = part->ctx;
    struct resp_value v;
    size_t used;
    unsigned i, k;

    part->ctx = NULL;
    if (len > 10 && memcmp(frame, "-NOSCRIPT ", 10) == 0 && !b->noscript) {
        /* The node's script cache is empty (restart, promotion, SCRIPT
         * FLUSH): send the body once; EVAL also caches it. */
        b->noscript = 1;
        store_redis_batch_send(b);
        return;
    }
    if (frame[0] == '-') {
        store_redis_batch_error(b, frame, len);
        return;
    }
    if (resp_value_parse(frame, len, &v, &used) != RESP_OK) {
        v.type = '?';
        v.n = 0;
        v.elem = NULL;
    }
    if (v.type != '*' || v.n != 3 + 2 * (size_t)b->n || v.elem[1].type != ':' ||
        v.elem[2].type != ':') {
        v.n = v.type == '*' ? v.n : 0;
        resp_value_free(&v);
        store_redis_batch_error(b, bad, sizeof(bad) - 1);
        return;
    }
    for (k = 0; k < b->n; k++) {
        if (v.elem[3 + b->n + k].type != ':') {
            break;
        }
    }
    for (i = 0; i < b->n; i++) {
        if (k < b->n) {
            store_redis_call_error(b->lm, b->call[i], bad, sizeof(bad) - 1);
        } else {
            store_redis_call_done(b->lm, b->call[i], &v, i, b->n);
        }
    }
    resp_value_free(&v);
    px_free(b);
}

/* Sends a batch as one script call ("each" mode) to the node of its first
 * key (EVALSHA, or EVAL after a NOSCRIPT). Takes `b`. */
static void store_redis_batch_send(struct limiter_batch *b)
{
    const struct scripts_lua *s = scripts_gcra();
    unsigned argc = 4 + 5 * b->n, a = 0, i;
    const char **argv = px_calloc(argc, sizeof(*argv));
    size_t *lens = px_calloc(argc, sizeof(*lens));
    struct gcra_script_args *sa = px_calloc(b->n, sizeof(*sa));
    const struct limiter_call *c0 = b->call[0];
    char nkeys[16];
    struct resp_cmd *cmd;
    int k;

    argv[a] = b->noscript ? "EVAL" : "EVALSHA";
    lens[a] = strlen(argv[a]);
    a++;
    argv[a] = b->noscript ? s->body : s->sha1;
    lens[a++] = b->noscript ? s->len : SCRIPTS_SHA1_LEN;
    snprintf(nkeys, sizeof(nkeys), "%u", b->n);
    argv[a] = nkeys;
    lens[a] = strlen(nkeys);
    a++;
    for (i = 0; i < b->n; i++) {
        argv[a] = b->call[i]->key;
        lens[a++] = b->call[i]->klen;
    }
    for (i = 0; i < b->n; i++) {
        gcra_script_args(&b->call[i]->p, &sa[i]);
        for (k = 0; k < GCRA_SCRIPT_NARGS; k++) {
            argv[a] = sa[i].v[k];
            lens[a++] = sa[i].len[k];
        }
    }
    argv[a] = "each";
    lens[a++] = 4;
    cmd = resp_cmd_new((int)a, argv, lens);
    px_free(argv);
    px_free(lens);
    px_free(sa);
    store_redis_part_send(b->lm, cmd, store_redis_on_batch, b, 0, c0->root->cid,
                          c0->key, c0->klen);
}

/* Sent by the flush pass, with the other calls of this loop turn. */
static void store_redis_throttle(struct limiter *lm, struct req *req,
                                 const struct gcra_params *p, const char *key,
                                 size_t klen, store_done_fn *done)
{
    struct limiter_call *call = px_calloc(1, sizeof(*call));

    call->root = req;
    call->p = *p;
    call->key = px_strndup(key, klen);
    call->klen = klen;
    call->done = done;
    req->owed++;
    queue_insert_tail(&lm->pending, &call->link);
}

static void store_redis_flush(struct limiter *lm)
{
    struct limiter_batch *open[STORE_REDIS_BATCH_MAX];
    unsigned slot[STORE_REDIS_BATCH_MAX];
    unsigned nopen = 0, i;

    /* Calls that arrived this loop turn, grouped by node (single mode) or
     * slot (cluster mode: a script's keys must share a slot), in arrival
     * order within each group, so calls on one key keep their order. */
    while (!queue_empty(&lm->pending)) {
        struct limiter_call *call =
            container_of(queue_head(&lm->pending), struct limiter_call, link);
        unsigned sl = lm->cl->enabled ? slot_for_key(call->key, call->klen) : 0;
        struct limiter_batch *b = NULL;

        queue_remove(&call->link);
        for (i = 0; i < nopen; i++) {
            if (slot[i] == sl) {
                b = open[i];
                break;
            }
        }
        if (b == NULL) {
            if (nopen == STORE_REDIS_BATCH_MAX) {
                /* Too many slots at once: send the oldest group. */
                store_redis_batch_send(open[0]);
                memmove(open, open + 1, (nopen - 1) * sizeof(*open));
                memmove(slot, slot + 1, (nopen - 1) * sizeof(*slot));
                nopen--;
            }
            b = px_calloc(1, sizeof(*b));
            b->lm = lm;
            open[nopen] = b;
            slot[nopen++] = sl;
            i = nopen - 1;
        }
        b->call[b->n++] = call;
        if (b->n == STORE_REDIS_BATCH_MAX) {
            store_redis_batch_send(b);
            open[i] = open[nopen - 1];
            slot[i] = slot[nopen - 1];
            nopen--;
        }
    }
    for (i = 0; i < nopen; i++) {
        store_redis_batch_send(open[i]);
    }
}

/* Shutdown: the calls not yet sent fail. */
static void store_redis_stop(struct limiter *lm)
{
    static const char down[] = "-ERR proxy shutting down\r\n";

    while (!queue_empty(&lm->pending)) {
        struct limiter_call *call =
            container_of(queue_head(&lm->pending), struct limiter_call, link);
        queue_remove(&call->link);
        store_redis_call_error(lm, call, down, sizeof(down) - 1);
    }
}

/* ---------------- The override cache ---------------- */

const char *store_redis_override_known(struct limiter *lm, const char *path,
                                       size_t len)
{
    return hmap_get(&lm->overrides, path, len);
}

void store_redis_override_learn(struct limiter *lm, const char *path,
                                size_t len, const char *text, size_t tlen)
{
    if (text == NULL || tlen == 0) {
        px_free(hmap_del(&lm->overrides, path, len));
        return;
    }
    if (hmap_get(&lm->overrides, path, len) == NULL &&
        lm->overrides.count >= STORE_REDIS_OVERRIDE_CACHE_MAX) {
        hmap_free(&lm->overrides, px_free);
        hmap_init(&lm->overrides);
    }
    px_free(hmap_put(&lm->overrides, path, len, px_strndup(text, tlen)));
}

int store_redis_override_key(const struct limiter *lm,
                             const struct limits_level *lev, char *out,
                             size_t outlen)
{
    return snprintf(out, outlen, "%s{%.*s}#overrides", lm->conf->key_prefix,
                    (int)lev->tag_len, lev->tag);
}

/* ---------------- LIMITER OVERRIDE SET|DEL|GET ---------------- */

/* One OVERRIDE command on its way to the node of the override hash. */
struct limiter_override_call {
    struct limiter *lm;  /* borrowed: the limiter it runs in */
    struct req *root;    /* borrowed: the client's request */
    store_done_fn *done; /* the completion */
};

/* The node's reply to an OVERRIDE command, relayed (SET's integer as
 * +OK). */
static void store_redis_override_on_reply(struct req *part, const char *frame,
                                          size_t len)
{
    static const char reply_ok[] = "+OK\r\n";
    struct limiter_override_call *oc = part->ctx;
    struct store_reply r = { .kind = STORE_REPLY_FRAME };

    r.text = frame;
    r.len = len;
    if (part->part == 1 && frame[0] == ':') {
        r.text = reply_ok;
        r.len = sizeof(reply_ok) - 1;
    }
    if (req_owed_back(oc->root)) {
        oc->done(oc->lm, oc->root, &r);
    }
    px_free(oc);
}

/* HSET/HDEL/HGET of `path` in the override hash of `lev`'s identity, where
 * every proxy's checks verify it. */
static void store_redis_override(struct limiter *lm, struct req *req,
                                 enum store_override_op op,
                                 const struct limits_level *lev,
                                 const char *path, size_t plen,
                                 const char *text, size_t tlen,
                                 store_done_fn *done)
{
    struct limiter_override_call *oc;
    char key[STORE_KEY_MAX];
    const char *argv[4];
    size_t lens[4];
    int argc = op == STORE_OVERRIDE_SET ? 4 : 3, kl, i;

    kl = store_redis_override_key(lm, lev, key, sizeof(key));
    PX_ASSERT(kl > 0 && (size_t)kl < sizeof(key));
    if (op != STORE_OVERRIDE_GET) {
        /* This proxy applies it at once; the others on their next check. */
        store_redis_override_learn(
            lm, path, plen, op == STORE_OVERRIDE_SET ? text : NULL, tlen);
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
    oc->lm = lm;
    oc->root = req;
    oc->done = done;
    req->owed++;
    store_redis_part_send(
        lm, resp_cmd_new(argc, argv, lens), store_redis_override_on_reply, oc,
        (unsigned)(op == STORE_OVERRIDE_SET), req->cid, key, (size_t)kl);
}

static void store_redis_nothing(struct limiter *lm)
{
    PX_UNUSED(lm);
}

const struct store_ops store_redis_ops = {
    .ready = store_redis_ready,
    .throttle = store_redis_throttle,
    .check = store_redis_check,
    .refund = store_redis_refund,
    .override_known = store_redis_override_known,
    .override = store_redis_override,
    .flush = store_redis_flush,
    .cron = store_redis_nothing,
    .stop = store_redis_stop,
};
