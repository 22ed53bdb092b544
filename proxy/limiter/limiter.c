/* The limiter commands: CL.THROTTLE (exactly as redis-cell) and the raw form
 * of LIMITER.
 *
 *   client req "CL.THROTTLE k B C P [Q]"       (holds the client's place)
 *        | parse (gcra_parse_throttle: redis-cell's texts)
 *        +-- embedded --> store_local_gcra --> five integers
 *        +-- Redis ----> part "EVALSHA <gcra sha> 1 k inc_s inc_ns dvt_s
 *                        dvt_ns" on the shared connection of k's node
 *                          | -NOSCRIPT: once more as EVAL <body> (which
 *                          |            also loads it), never shown
 *                          | -MOVED/-ASK: followed like any command
 *                          v
 *                        [limited, now_s, now_us, stored TAT]
 *                          --> gcra_decide_from_script --> five integers
 *
 * The script decides and writes atomically on the node that owns the key,
 * with the node's clock; the proxy recomputes the reply from what the script
 * read, so the reply's rounding lives in one place (algorithms/). When the
 * node cannot answer, `store_down_policy` decides: fail_closed passes the
 * error on, fail_open admits and counts it. */
#include "proxy/limiter/limiter.h"

#include <string.h>

#include "algorithms/gcra.h"
#include "algorithms/scripts.h"
#include "conf/conf.h"
#include "conf/limits.h"
#include "parser/resp.h"
#include "parser/resp_enc.h"
#include "parser/resp_value.h"
#include "parser/slot.h"
#include "proxy/core/cluster.h"
#include "proxy/core/log.h"
#include "proxy/core/req.h"
#include "proxy/server.h"
#include "proxy/limiter/store_local.h"
#include "proxy/core/upstream.h"
#include "proxy/core/util.h"

/* Arguments of CL.THROTTLE, with its name: name key B C P [Q]. */
#define LIMITER_MAX_ARGS 6

/* Room for the key of one limit: prefix, path, tag braces, "#i:algorithm". */
#define LIMITER_KEY_MAX                                                        \
    (LIMITS_MAX_PREFIX_BYTES + 2 * LIMITS_MAX_PATH_BYTES + 64)

/* Most CL.THROTTLE calls sent in one script call: enough to take the
 * per-call cost of EVALSHA off Redis under load, small enough that one
 * call never holds a node for long. */
#define LIMITER_BATCH_MAX 64

/* One CL.THROTTLE waiting for its script call. Queued in
 * server.limiter.pending until the flush pass, then owned by the batch
 * that carries it. */
struct limiter_call {
    struct req *root;     /* borrowed: the client's request */
    struct gcra_params p; /* parsed arguments */
    char *key;            /* owned copy of the key */
    size_t klen;          /* bytes in key */
    struct queue link;    /* link in server.limiter.pending */
};

/* The calls of one script call (all for one node; in cluster mode all of
 * one slot, so a MOVED moves them all). Owned by the part carrying it. */
struct limiter_batch {
    unsigned n;            /* calls */
    unsigned noscript : 1; /* already retried with EVAL */
    struct limiter_call *call[LIMITER_BATCH_MAX]; /* owned */
};

static void limiter_reply_ints(struct req *req, const int64_t v[5])
{
    int k;

    PX_CHECK_OOM(resp_enc_array_header(&req->reply, 5));
    for (k = 0; k < 5; k++) {
        PX_CHECK_OOM(resp_enc_int(&req->reply, (long long)v[k]));
    }
    req_reply_built(req);
}

static void limiter_reply_result(struct req *req, const struct gcra_result *r)
{
    int64_t v[5];

    rl_reply_ints(&r->d, v);
    limiter_reply_ints(req, v);
}

/* ---------------- Script calls ---------------- */

/* True for errors that mean "the store did not answer", as opposed to an
 * answer that is an error (WRONGTYPE, a range error). */
static int limiter_store_down(const char *frame, size_t len)
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

static void limiter_call_free(struct limiter_call *call)
{
    px_free(call->key);
    px_free(call);
}

/* Ends a call: its client's request gets `frame` turned into a reply (an
 * error frame as it is, or fail_open), or is freed when it is an orphan. */
static void limiter_call_error(struct limiter_call *call, const char *frame,
                               size_t len)
{
    struct req *root = call->root;

    if (!req_owed_back(root)) {
        /* the client left while the node worked */
    } else if (limiter_store_down(frame, len) &&
               server.conf->store_down == CONF_FAIL_OPEN) {
        int64_t admit[5] = { 0, call->p.limit, 0, -1, 0 };
        server.limiter.fail_open++;
        limiter_reply_ints(root, admit);
    } else {
        req_reply(root, frame, len);
    }
    limiter_call_free(call);
}

/* Ends call i of a batch from the script's "each" reply `v`. */
static void limiter_call_done(struct limiter_call *call,
                              const struct resp_value *v, unsigned i,
                              unsigned n)
{
    static const char wrongtype[] =
        "WRONGTYPE Operation against a key holding the wrong kind of value";
    struct req *root = call->root;
    const struct resp_value *raw = &v->elem[3 + i];
    const struct resp_value *flag = &v->elem[3 + n + i];
    struct gcra_script_reply sr;
    struct gcra_result res;
    const char *err = NULL;

    if (!req_owed_back(root)) {
        /* the client left while the node worked */
    } else if (flag->integer == -1) {
        req_reply_error(root, "%s", wrongtype);
    } else if (flag->integer == -2) {
        req_reply_error(root, "%s", GCRA_ERR_TAT_RANGE);
    } else {
        sr.limited = flag->integer;
        sr.now_s = v->elem[1].integer;
        sr.now_us = v->elem[2].integer;
        sr.tat = raw->null ? NULL : raw->str;
        sr.tat_len = raw->null ? 0 : raw->len;
        if (gcra_decide_from_script(&call->p, &sr, &res, &err) != GCRA_OK) {
            log_warn("limiter: %s", err);
            req_reply_error(root, "%s", err);
        } else {
            limiter_reply_result(root, &res);
        }
    }
    limiter_call_free(call);
}

/* Sends `cmd` (owned from here; NULL means it could not be built) as a
 * proxy-made part to the node that owns `key`: its reply goes to fn with
 * ctx and the part number, or it fails at once when no node serves the
 * slot. */
static void limiter_part_send(struct resp_cmd *cmd, req_reply_fn *fn, void *ctx,
                              unsigned partno, uint64_t cid, const char *key,
                              size_t klen)
{
    struct req *part = req_own(cmd, fn, ctx);

    part->part = partno;
    part->cid = cid;
    cluster_send_key(&server.cluster, key, klen, part);
}

static void limiter_batch_send(struct limiter_batch *b);

static void limiter_on_batch(struct req *part, const char *frame, size_t len)
{
    struct limiter_batch *b = part->ctx;
    struct resp_value v;
    size_t used;
    unsigned i, k;

    part->ctx = NULL;
    if (len > 10 && memcmp(frame, "-NOSCRIPT ", 10) == 0 && !b->noscript) {
        /* The node's script cache is empty (restart, promotion, SCRIPT
         * FLUSH): send the body once; EVAL also caches it. */
        b->noscript = 1;
        limiter_batch_send(b);
        return;
    }
    if (frame[0] == '-') {
        for (i = 0; i < b->n; i++) {
            limiter_call_error(b->call[i], frame, len);
        }
        px_free(b);
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
        for (i = 0; i < b->n; i++) {
            static const char bad[] = "-" GCRA_ERR_SCRIPT "\r\n";
            limiter_call_error(b->call[i], bad, sizeof(bad) - 1);
        }
        px_free(b);
        return;
    }
    for (k = 0; k < b->n; k++) {
        if (v.elem[3 + b->n + k].type != ':') {
            break;
        }
    }
    for (i = 0; i < b->n; i++) {
        if (k < b->n) {
            static const char bad[] = "-" GCRA_ERR_SCRIPT "\r\n";
            limiter_call_error(b->call[i], bad, sizeof(bad) - 1);
        } else {
            limiter_call_done(b->call[i], &v, i, b->n);
        }
    }
    resp_value_free(&v);
    px_free(b);
}

/* Sends a batch as one script call ("each" mode) to the node of its first
 * key (EVALSHA, or EVAL after a NOSCRIPT). Takes `b`. */
static void limiter_batch_send(struct limiter_batch *b)
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
    limiter_part_send(cmd, limiter_on_batch, b, 0, c0->root->cid, c0->key,
                      c0->klen);
}

void limiter_flush(struct limiter *lm)
{
    PX_UNUSED(lm);
    struct limiter_batch *open[LIMITER_BATCH_MAX];
    unsigned slot[LIMITER_BATCH_MAX];
    unsigned nopen = 0, i;

    /* Calls that arrived this loop turn, grouped by node (single mode) or
     * slot (cluster mode: a script's keys must share a slot), in arrival
     * order within each group, so calls on one key keep their order. */
    while (!queue_empty(&server.limiter.pending)) {
        struct limiter_call *call = container_of(
            queue_head(&server.limiter.pending), struct limiter_call, link);
        unsigned sl =
            server.cluster.enabled ? slot_for_key(call->key, call->klen) : 0;
        struct limiter_batch *b = NULL;

        queue_remove(&call->link);
        for (i = 0; i < nopen; i++) {
            if (slot[i] == sl) {
                b = open[i];
                break;
            }
        }
        if (b == NULL) {
            if (nopen == LIMITER_BATCH_MAX) {
                /* Too many slots at once: send the oldest group. */
                limiter_batch_send(open[0]);
                memmove(open, open + 1, (nopen - 1) * sizeof(*open));
                memmove(slot, slot + 1, (nopen - 1) * sizeof(*slot));
                nopen--;
            }
            b = px_calloc(1, sizeof(*b));
            open[nopen] = b;
            slot[nopen++] = sl;
            i = nopen - 1;
        }
        b->call[b->n++] = call;
        if (b->n == LIMITER_BATCH_MAX) {
            limiter_batch_send(b);
            open[i] = open[nopen - 1];
            slot[i] = slot[nopen - 1];
            nopen--;
        }
    }
    for (i = 0; i < nopen; i++) {
        limiter_batch_send(open[i]);
    }
}

static void limiter_drop_pending(void)
{
    static const char down[] = "-ERR proxy shutting down\r\n";

    while (!queue_empty(&server.limiter.pending)) {
        struct limiter_call *call = container_of(
            queue_head(&server.limiter.pending), struct limiter_call, link);
        queue_remove(&call->link);
        limiter_call_error(call, down, sizeof(down) - 1);
    }
}

/* ---------------- Commands ---------------- */

/* CL.THROTTLE and the raw LIMITER form: parse, then the local store or a
 * script call on the key's node. */
static void limiter_throttle_req(struct req *req)
{
    const char *argv[LIMITER_MAX_ARGS];
    size_t lens[LIMITER_MAX_ARGS];
    char errbuf[GCRA_ERRBUF_LEN];
    struct gcra_params p;
    struct limiter_call *call;
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
    if (server.limiter.embedded) {
        struct gcra_result res;
        const char *err = NULL;
        if (store_local_gcra(&server.limiter.local, argv[1], lens[1], &p, &res, &err) !=
            GCRA_OK) {
            req_reply_error(req, "%s", err);
            return;
        }
        limiter_reply_result(req, &res);
        return;
    }
    if (!cluster_ready(&server.cluster)) {
        cluster_hold(&server.cluster, req);
        return;
    }
    /* Sent by the flush pass, with the other calls of this loop turn. */
    call = px_calloc(1, sizeof(*call));
    call->root = req;
    call->p = p;
    call->key = px_strndup(argv[1], lens[1]);
    call->klen = lens[1];
    req->owed++;
    queue_insert_tail(&server.limiter.pending, &call->link);
}

/* ---------------- The limits tree: CHECK, PEEK, RESET ---------------- */

/* Room for a refund token of limiter.lua (a window start, log entries). */
#define LIMITER_UNDO_MAX 64

/* Calls of one check when run-time overrides keep changing under it. */
#define LIMITER_MAX_TRIES 3

/* Decimal room for one script argument. */
#define LIMITER_ARG_MAX 24

/* Cached run-time overrides past this many are forgotten at once: the
 * scripts verify every assumption, so the cache only saves retries. */
#define LIMITER_OVERRIDE_CACHE_MAX 100000

/* One limit of a tree call. */
struct limiter_lim {
    enum limits_algo algo;       /* which model */
    struct limits_limit lim;     /* parameters, overrides applied */
    struct gcra_params p;        /* gcra: the parameters with the cost */
    char *key;                   /* owned: the limit's key */
    size_t klen;                 /* bytes of key */
    unsigned group;              /* tag group: one script call */
    char undo[LIMITER_UNDO_MAX]; /* what a refund takes back, NUL-ended */
};

/* One LIMITER CHECK/PEEK/RESET on its way through the nodes of its groups
 * (one group per hash tag: one slot, one script call). Owned by the
 * client's request through the parts working for it; freed by the last. */
struct limiter_multi {
    struct req *root; /* borrowed: the client's request */
    enum limiter_op {
        LIMITER_CHECK,
        LIMITER_PEEK,
        LIMITER_RESET,
    } op;                     /* what the call does */
    unsigned tries;           /* whole calls so far, 1.. */
    unsigned n;               /* limits */
    unsigned ngroups;         /* script calls */
    unsigned pending;         /* calls still owed */
    struct limits_levels *lv; /* owned: the path's levels */
    struct limiter_lim *lim;  /* owned: n limits */
    struct rl_decision *res;  /* owned: n decisions */
    struct rl_decision *peek; /* owned: n states without this request */
    unsigned char *admitted;  /* owned: ngroups "check went through" */
    unsigned char *noscript;  /* owned: ngroups "retried with EVAL" */
    unsigned char stale;      /* a group saw overrides we did not assume */
    long long deleted;        /* RESET: keys removed */
    int64_t cost;             /* COST n (0 for PEEK) */
    int64_t wait_ns;          /* CHECK ... WAIT: the longest delay accepted */
    struct buf err;           /* owned: the first error reply */
};

static void limiter_multi_free(struct limiter_multi *m)
{
    unsigned i;

    for (i = 0; i < m->n; i++) {
        px_free(m->lim[i].key);
    }
    px_free(m->lv);
    px_free(m->lim);
    px_free(m->res);
    px_free(m->peek);
    px_free(m->admitted);
    px_free(m->noscript);
    buf_free(&m->err);
    px_free(m);
}

/* The reply of a check no limit applies to (an exempt identity, or every
 * level lifted by an override): admitted, limit 0, which redis-cell never
 * reports. */
static const int64_t limiter_unlimited[5] = { 0, 0, 0, -1, 0 };

/* Keys of group g. */
static unsigned limiter_group_keys(const struct limiter_multi *m, unsigned g)
{
    unsigned i, nk = 0;

    for (i = 0; i < m->n; i++) {
        nk += m->lim[i].group == g;
    }
    return nk;
}

/* Keeps the first error of a call, as a RESP error line. */
static void limiter_multi_error(struct limiter_multi *m, const char *text)
{
    if (m->err.len == 0) {
        PX_CHECK_OOM(buf_append(&m->err, "-", 1));
        PX_CHECK_OOM(buf_append_str(&m->err, text));
        PX_CHECK_OOM(buf_append(&m->err, "\r\n", 2));
    }
}

static void limiter_aggregate(const struct rl_decision *res, unsigned n,
                              struct rl_decision *out);

/* The parameters that decide writes: with WAIT, a request due within the
 * wait is reserved, so the tolerance grows by it (not for a request that
 * can never pass: INC > DVT stays refused). */
static void limiter_write_params(const struct gcra_params *p, int64_t wait_ns,
                                 struct gcra_params *out)
{
    *out = *p;
    if (wait_ns > 0 && p->inc_ns <= p->dvt_ns &&
        __builtin_add_overflow(p->dvt_ns, wait_ns, &out->dvt_ns)) {
        out->dvt_ns = INT64_MAX;
    }
}

/* A reply held until its reservation is due (LIMITER CHECK ... WAIT). It
 * counts as a child of its request, so a client that leaves meanwhile
 * turns the request into an orphan, freed when the timer fires. */
struct limiter_wait {
    uv_timer_t timer;  /* embedded; container_of in the callback */
    struct req *root;  /* borrowed: the client's request */
    int64_t v[5];      /* the reply */
    struct queue link; /* link in server.limiter.waits */
};

static void limiter_on_wait_close(uv_handle_t *h)
{
    px_free(container_of(h, struct limiter_wait, timer));
}

/* Ends a wait: replies (on_time) or just lets the request go. */
static void limiter_wait_end(struct limiter_wait *w, int on_time)
{
    struct req *root = w->root;

    queue_remove(&w->link);
    uv_timer_stop(&w->timer);
    uv_close((uv_handle_t *)&w->timer, limiter_on_wait_close);
    if (req_owed_back(root) && on_time) {
        limiter_reply_ints(root, w->v);
    }
}

static void limiter_on_wait(uv_timer_t *t)
{
    limiter_wait_end(container_of(t, struct limiter_wait, timer), 1);
}

/* Replies v to root after delay_ns (the reservation's due time). */
static void limiter_reply_later(struct req *root, const int64_t v[5],
                                int64_t delay_ns)
{
    struct limiter_wait *w = px_calloc(1, sizeof(*w));
    uint64_t ms = (uint64_t)((delay_ns + RL_NS_PER_MS - 1) / RL_NS_PER_MS);

    memcpy(w->v, v, sizeof(w->v));
    w->root = root;
    root->owed++;
    queue_insert_tail(&server.limiter.waits, &w->link);
    uv_timer_init(server.core.loop, &w->timer);
    uv_timer_start(&w->timer, limiter_on_wait, ms, 0);
}

static void limiter_stop_waits(void)
{
    while (!queue_empty(&server.limiter.waits)) {
        limiter_wait_end(container_of(queue_head(&server.limiter.waits),
                                      struct limiter_wait, link),
                         0);
    }
}

/* With WAIT: when every refusing limit is due within the wait, the
 * request was reserved; returns the delay (>= 0), else -1. */
static int64_t limiter_wait_delay(const struct rl_decision *res, unsigned n,
                                  int64_t wait_ns)
{
    int64_t delay = 0;
    unsigned i;

    for (i = 0; i < n; i++) {
        const struct rl_decision *d = &res[i];
        if (!d->limited) {
            continue;
        }
        if (d->retry_after_ns < 0 || d->retry_after_ns > wait_ns) {
            return -1;
        }
        if (d->retry_after_ns > delay) {
            delay = d->retry_after_ns;
        }
    }
    return delay;
}

/* Replies a tree check: at once, or when its reservation is due (WAIT,
 * gcra limits only). A refused check consumed nothing, so the limits that
 * would have admitted report their state without it (`peek`); a reserved
 * one reports the state it left: nothing remaining, reset after the
 * reservation. */
static void limiter_reply_check(struct req *root, struct rl_decision *res,
                                const struct rl_decision *peek,
                                const struct limiter_lim *lim, unsigned n,
                                int64_t wait_ns)
{
    struct rl_decision agg;
    int64_t v[5], delay;
    unsigned i;
    int limited = 0;

    for (i = 0; i < n; i++) {
        limited |= res[i].limited;
    }
    delay = limited && wait_ns > 0 ? limiter_wait_delay(res, n, wait_ns) : -1;
    if (delay >= 0) {
        limiter_aggregate(res, n, &agg);
        for (i = 0; i < n; i++) {
            int64_t reset = res[i].reset_after_ns;
            if (res[i].limited &&
                !__builtin_add_overflow(reset, lim[i].p.inc_ns, &reset) &&
                reset > agg.reset_after_ns) {
                agg.reset_after_ns = reset;
            }
        }
        agg.limited = 0;
        agg.remaining = 0;
        agg.retry_after_ns = -RL_NS_PER_SEC;
        rl_reply_ints(&agg, v);
        limiter_reply_later(root, v, delay);
        return;
    }
    if (limited) {
        for (i = 0; i < n; i++) {
            if (!res[i].limited) {
                res[i] = peek[i];
            }
        }
    }
    limiter_aggregate(res, n, &agg);
    rl_reply_ints(&agg, v);
    limiter_reply_ints(root, v);
}

/* The reply of a tree check: limited if any limit is; limit and remaining
 * from the most restrictive limit (the least remaining); retry_after the
 * largest among refusing limits; reset_after the largest of all. */
static void limiter_aggregate(const struct rl_decision *res, unsigned n,
                              struct rl_decision *out)
{
    unsigned i, best = 0;
    int never = 0;

    *out = res[0];
    out->limited = 0;
    out->retry_after_ns = -RL_NS_PER_SEC;
    for (i = 0; i < n; i++) {
        const struct rl_decision *d = &res[i];
        if (d->remaining < res[best].remaining ||
            (d->remaining == res[best].remaining &&
             d->reset_after_ns > res[best].reset_after_ns)) {
            best = i;
        }
        if (d->limited) {
            /* A limit the request can never pass (retry -1) outweighs
             * any wait: waiting would not help. */
            if (!out->limited ||
                (never == 0 && (d->retry_after_ns < 0 ||
                                d->retry_after_ns > out->retry_after_ns))) {
                out->retry_after_ns = d->retry_after_ns;
            }
            never |= d->retry_after_ns < 0;
            out->limited = 1;
        }
        if (d->reset_after_ns > out->reset_after_ns) {
            out->reset_after_ns = d->reset_after_ns;
        }
    }
    out->limit = res[best].limit;
    out->remaining = res[best].remaining;
}

/* ---- Building the limits: the tree, its overrides, run-time overrides */

/* The run-time override text of `path` this proxy knows of, or NULL: the
 * embedded store's, or the cache of what the scripts reported. */
static const char *limiter_override_known(const char *path, size_t len)
{
    if (server.limiter.embedded) {
        return store_local_override_get(&server.limiter.local, path, len);
    }
    return hmap_get(&server.limiter.overrides, path, len);
}

/* Records what a script found for `path` ("" or NULL: nothing). */
static void limiter_override_learn(const char *path, size_t len,
                                   const char *text, size_t tlen)
{
    if (text == NULL || tlen == 0) {
        px_free(hmap_del(&server.limiter.overrides, path, len));
        return;
    }
    if (hmap_get(&server.limiter.overrides, path, len) == NULL &&
        server.limiter.overrides.count >= LIMITER_OVERRIDE_CACHE_MAX) {
        hmap_free(&server.limiter.overrides, px_free);
        hmap_init(&server.limiter.overrides);
    }
    px_free(
        hmap_put(&server.limiter.overrides, path, len, px_strndup(text, tlen)));
}

/* Adds limit `l` (number k of its level) to m. NULL, or an error text. */
static const char *limiter_add(struct limiter_multi *m,
                               const struct limits_level *lev, size_t k,
                               const struct limits_limit *l)
{
    struct limiter_lim *x = &m->lim[m->n];
    char key[LIMITER_KEY_MAX];
    const char *err = NULL;
    int kl;

    memset(x, 0, sizeof(*x));
    x->algo = l->algo;
    x->lim = *l;
    if (l->algo == LIMITS_GCRA &&
        gcra_params_init_ns(&x->p, l->u.gcra.max_burst, l->u.gcra.count,
                            l->u.gcra.period_ms * RL_NS_PER_MS, m->cost,
                            &err) != GCRA_OK) {
        return err;
    }
    if (l->algo != LIMITS_GCRA && m->wait_ns > 0) {
        return "the WAIT option needs gcra limits: the other algorithms "
               "cannot reserve a later slot";
    }
    kl = limits_limit_key(lev, k, key, sizeof(key));
    PX_ASSERT(kl > 0 && (size_t)kl < sizeof(key));
    x->key = px_strndup(key, (size_t)kl);
    x->klen = (size_t)kl;
    x->group = lev->group;
    m->n++;
    return NULL;
}

/* Fills m->lim from the levels, with every override applied: a run-time
 * one replaces the file's. NULL, or an error text. */
static const char *limiter_build(struct limiter_multi *m)
{
    size_t l, k;

    for (l = 0; l < m->lv->n; l++) {
        const struct limits_level *lev = &m->lv->level[l];
        const struct limits_limit *limits = lev->limits;
        size_t nlimits = lev->unlimited ? 0 : lev->nlimits;
        const char *text = limiter_override_known(lev->path, lev->path_len);
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
            const char *err = limiter_add(m, lev, k, &limits[k]);
            if (err != NULL) {
                return err;
            }
        }
    }
    return NULL;
}

/* ---- Redis: one limiter.lua call per group */

static void limiter_multi_send(struct limiter_multi *m, unsigned g,
                               const char *mode);
static void limiter_tree_start(struct req *req, enum limiter_op op,
                               unsigned tries);

/* Every group answered: refund what was taken where another group refused
 * (or where the overrides turned out stale), then reply or start over. */
static void limiter_multi_done(struct limiter_multi *m)
{
    struct req *root = m->root;
    struct rl_decision agg;
    int64_t v[5];
    unsigned g;

    if (m->op == LIMITER_RESET) {
        if (m->err.len > 0) {
            req_reply(root, m->err.data, m->err.len);
        } else {
            PX_CHECK_OOM(resp_enc_int(&root->reply, m->deleted));
            req_reply_built(root);
        }
        limiter_multi_free(m);
        return;
    }
    if (m->err.len > 0 || m->stale) {
        if (m->op == LIMITER_CHECK) {
            /* A group that failed may not have decided: give back what
             * the others took, so a failure never consumes. */
            for (g = 0; g < m->ngroups; g++) {
                if (m->admitted[g]) {
                    limiter_multi_send(m, g, "refund");
                }
            }
        }
        if (m->err.len == 0 && m->tries < LIMITER_MAX_TRIES) {
            enum limiter_op op = m->op;
            unsigned tries = m->tries;
            limiter_multi_free(m);
            limiter_tree_start(root, op, tries + 1);
            return;
        }
        if (m->err.len == 0) {
            limiter_multi_error(m, "ERR limiter overrides kept changing "
                                   "during the check, try again");
        }
        req_reply(root, m->err.data, m->err.len);
        limiter_multi_free(m);
        return;
    }
    if (m->n == 0) {
        /* Every level is lifted by an override. */
        limiter_multi_free(m);
        limiter_reply_ints(root, limiter_unlimited);
        return;
    }
    limiter_aggregate(m->res, m->n, &agg);
    if (m->op == LIMITER_CHECK && agg.limited &&
        (m->wait_ns == 0 || limiter_wait_delay(m->res, m->n, m->wait_ns) < 0)) {
        for (g = 0; g < m->ngroups; g++) {
            if (m->admitted[g]) {
                limiter_multi_send(m, g, "refund");
            }
        }
    }
    if (m->op == LIMITER_CHECK) {
        limiter_reply_check(root, m->res, m->peek, m->lim, m->n, m->wait_ns);
        limiter_multi_free(m);
        return;
    }
    rl_reply_ints(&agg, v);
    limiter_multi_free(m);
    limiter_reply_ints(root, v);
}

/* A reply element as an int64: an integer, or a decimal bulk string (the
 * script sends durations past 2^53 us as text). 0, or -1. */
static int limiter_elem_int(const struct resp_value *e, int64_t *out)
{
    if (e->type == ':') {
        *out = e->integer;
        return 0;
    }
    if (e->type == '$' && !e->null) {
        return gcra_parse_int64(e->str, e->len, out) == GCRA_OK ? 0 : -1;
    }
    return -1;
}

/* Microseconds of the script as nanoseconds, saturating. */
static int64_t limiter_us_to_ns(int64_t us)
{
    if (us > INT64_MAX / 1000) {
        return INT64_MAX;
    }
    return us < INT64_MIN / 1000 ? INT64_MIN : us * 1000;
}

/* One limit's entry of a check/peek reply into m->res[i] and m->peek[i].
 * 0, or -1 when malformed (m->err is set). */
static int limiter_entry(struct limiter_multi *m, unsigned i,
                         const struct resp_value *e,
                         const struct gcra_script_reply *sr, int admitted)
{
    struct limiter_lim *x = &m->lim[i];
    const char *err = NULL;
    int64_t f[5];
    unsigned j;

    if (e->type != '*' || e->null) {
        limiter_multi_error(m, GCRA_ERR_SCRIPT);
        return -1;
    }
    if (x->algo == LIMITS_GCRA) {
        struct gcra_script_reply r = *sr;
        struct gcra_result res, pk;
        struct gcra_params pp;
        if (e->n != 1) {
            limiter_multi_error(m, GCRA_ERR_SCRIPT);
            return -1;
        }
        r.tat = e->elem[0].null ? NULL : e->elem[0].str;
        r.tat_len = e->elem[0].null ? 0 : e->elem[0].len;
        gcra_params_peek(&x->p, &pp);
        if (gcra_decide_stored(&x->p, &r, &res, &err) != GCRA_OK ||
            gcra_decide_stored(&pp, &r, &pk, &err) != GCRA_OK) {
            limiter_multi_error(m, err);
            return -1;
        }
        m->res[i] = res.d;
        m->peek[i] = pk.d;
        return 0;
    }
    if (e->n != 6 || e->elem[5].type != '$' || e->elem[5].null ||
        e->elem[5].len >= LIMITER_UNDO_MAX) {
        limiter_multi_error(m, GCRA_ERR_SCRIPT);
        return -1;
    }
    for (j = 0; j < 5; j++) {
        if (limiter_elem_int(&e->elem[j], &f[j]) != 0) {
            limiter_multi_error(m, GCRA_ERR_SCRIPT);
            return -1;
        }
    }
    m->res[i].limited = f[0] != 0;
    m->res[i].limit = f[1];
    m->res[i].remaining = f[2];
    m->res[i].retry_after_ns = limiter_us_to_ns(f[3]);
    m->res[i].reset_after_ns = limiter_us_to_ns(f[4]);
    memcpy(x->undo, e->elem[5].str, e->elem[5].len);
    x->undo[e->elem[5].len] = '\0';
    m->peek[i] = m->res[i];
    if (admitted && m->cost > 0) {
        /* Taken here, refunded if another slot refuses: the state without
         * this request has its cost back. */
        m->peek[i].remaining = m->res[i].remaining > m->res[i].limit - m->cost
                                   ? m->res[i].limit
                                   : m->res[i].remaining + m->cost;
    }
    return 0;
}

/* Group g's "override" reply: the values of its levels' paths, in the
 * order they were sent. */
static void limiter_group_overrides(struct limiter_multi *m, unsigned g,
                                    const struct resp_value *v)
{
    size_t l, j = 1;

    for (l = 0; l < m->lv->n && j < v->n; l++) {
        const struct limits_level *lev = &m->lv->level[l];
        const struct resp_value *e = &v->elem[j];
        if (lev->group != g) {
            continue;
        }
        j++;
        limiter_override_learn(lev->path, lev->path_len,
                               e->type == '$' && !e->null ? e->str : NULL,
                               e->type == '$' && !e->null ? e->len : 0);
    }
    m->stale = 1;
}

/* One group's script reply: each of its limits' decision. */
static void limiter_multi_group_reply(struct limiter_multi *m, unsigned g,
                                      const char *frame, size_t len)
{
    struct gcra_script_reply sr;
    struct resp_value v;
    size_t used;
    unsigned i, k = 0;

    if (frame[0] == '-') {
        if (m->err.len == 0) {
            PX_CHECK_OOM(buf_append(&m->err, frame, len));
        }
        return;
    }
    if (m->op == LIMITER_RESET) {
        if (frame[0] == ':') {
            m->deleted += strtoll(frame + 1, NULL, 10);
        }
        return;
    }
    if (resp_value_parse(frame, len, &v, &used) != RESP_OK) {
        v.type = '?';
        v.n = 0;
        v.elem = NULL;
    }
    if (v.type == '*' && v.n >= 1 && v.elem[0].type == '$' &&
        resp_value_is(&v.elem[0], "override")) {
        limiter_group_overrides(m, g, &v);
        resp_value_free(&v);
        return;
    }
    if (v.type != '*' || v.n < 3 || v.elem[0].type != ':' ||
        v.elem[1].type != ':' || v.elem[2].type != ':') {
        resp_value_free(&v);
        limiter_multi_error(m, GCRA_ERR_SCRIPT);
        return;
    }
    sr.limited = v.elem[0].integer;
    sr.now_s = v.elem[1].integer;
    sr.now_us = v.elem[2].integer;
    m->admitted[g] = m->op == LIMITER_CHECK && sr.limited == 0;
    for (i = 0; i < m->n; i++) {
        if (m->lim[i].group != g) {
            continue;
        }
        if (3 + k >= v.n) {
            limiter_multi_error(m, GCRA_ERR_SCRIPT);
            break;
        }
        if (limiter_entry(m, i, &v.elem[3 + k++], &sr, m->admitted[g]) != 0) {
            break;
        }
    }
    resp_value_free(&v);
}

static void limiter_multi_on_reply(struct req *part, const char *frame,
                                   size_t len)
{
    struct limiter_multi *m = part->ctx;
    unsigned g = part->part;

    if (m == NULL) {
        return; /* a refund: nobody waits for it */
    }
    if (len > 10 && memcmp(frame, "-NOSCRIPT ", 10) == 0 && !m->noscript[g]) {
        m->noscript[g] = 1;
        part->ctx = NULL;
        limiter_multi_send(m, g, m->op == LIMITER_PEEK ? "peek" : "check");
        return;
    }
    limiter_multi_group_reply(m, g, frame, len);
    if (--m->pending > 0) {
        return;
    }
    if (!req_owed_back(m->root)) {
        limiter_multi_free(m);
        return;
    }
    limiter_multi_done(m);
}

/* The four parameters of limit x as limiter.lua takes them: gcra's split
 * INC and DVT, else the documented parameters in stored units ("" when
 * unused; an infinite rate as "inf"). */
static void limiter_lua_params(const struct limiter_multi *m,
                               const struct limiter_lim *x,
                               char out[4][LIMITER_ARG_MAX])
{
    int64_t v[LIMITS_MAX_PARAMS];
    size_t nv, k;

    memset(out, 0, 4 * LIMITER_ARG_MAX);
    if (x->algo == LIMITS_GCRA) {
        struct gcra_params wp;
        struct gcra_script_args sa;
        limiter_write_params(&x->p, m->wait_ns, &wp);
        gcra_script_args(&wp, &sa);
        for (k = 0; k < 4; k++) {
            memcpy(out[k], sa.v[k], sa.len[k]);
        }
        return;
    }
    nv = limits_params(&x->lim, v);
    for (k = 0; k < nv && k < 4; k++) {
        if (v[k] == LIMITS_RATE_INF) {
            memcpy(out[k], "inf", 4);
        } else {
            snprintf(out[k], LIMITER_ARG_MAX, "%lld", (long long)v[k]);
        }
    }
}

/* The override hash of a level's identity: "<prefix>{tag}#overrides". */
static int limiter_override_key(const struct limits_level *lev, char *out,
                                size_t outlen)
{
    return snprintf(out, outlen, "%s{%.*s}#overrides", server.conf->key_prefix,
                    (int)lev->tag_len, lev->tag);
}

/* The first level of group g (every group has one). */
static const struct limits_level *
limiter_group_level(const struct limiter_multi *m, unsigned g)
{
    size_t l;

    for (l = 0; l < m->lv->n; l++) {
        if (m->lv->level[l].group == g) {
            return &m->lv->level[l];
        }
    }
    PX_ASSERT(0);
    return NULL;
}

/* Sends group g's call: limiter.lua over the group's keys in `mode`, or
 * DEL of them (RESET). A refund carries no context: its reply is dropped.
 * Every call names the override hash of the group's tag last, which also
 * routes a group whose levels an override lifted entirely. */
static void limiter_multi_send(struct limiter_multi *m, unsigned g,
                               const char *mode)
{
    const struct scripts_lua *s = scripts_limiter();
    int refund = strcmp(mode, "refund") == 0;
    unsigned i, nk = 0, a = 0, cap = 8 + 7 * m->n + 2 * m->lv->n;
    const char **argv = px_calloc(cap, sizeof(*argv));
    size_t *lens = px_calloc(cap, sizeof(*lens));
    char(*args)[4][LIMITER_ARG_MAX] =
        px_calloc(m->n > 0 ? m->n : 1, sizeof(*args));
    char nkeys[16], cost[24], npaths[16], ovkey[LIMITER_KEY_MAX];
    unsigned npath = 0;
    struct resp_cmd *cmd;
    int ovlen;
    size_t l;

    ovlen =
        limiter_override_key(limiter_group_level(m, g), ovkey, sizeof(ovkey));
    PX_ASSERT(ovlen > 0 && (size_t)ovlen < sizeof(ovkey));
    nk = limiter_group_keys(m, g);
    if (m->op == LIMITER_RESET) {
        argv[a++] = "DEL";
    } else {
        argv[a++] = m->noscript[g] ? "EVAL" : "EVALSHA";
        argv[a] = m->noscript[g] ? s->body : s->sha1;
        lens[a++] = m->noscript[g] ? s->len : SCRIPTS_SHA1_LEN;
        snprintf(nkeys, sizeof(nkeys), "%u", nk + 1);
        argv[a++] = nkeys;
    }
    for (i = 0; i < m->n; i++) {
        if (m->lim[i].group == g) {
            argv[a] = m->lim[i].key;
            lens[a++] = m->lim[i].klen;
        }
    }
    if (m->op != LIMITER_RESET) {
        argv[a] = ovkey;
        lens[a++] = (size_t)ovlen;
        argv[a++] = mode;
        argv[a++] = "";
        snprintf(cost, sizeof(cost), "%lld", (long long)m->cost);
        argv[a++] = cost;
        for (i = 0; i < m->n; i++) {
            int k;
            if (m->lim[i].group != g) {
                continue;
            }
            limiter_lua_params(m, &m->lim[i], args[i]);
            argv[a++] = limits_algo_name(m->lim[i].algo);
            for (k = 0; k < 4; k++) {
                argv[a++] = args[i][k];
            }
            argv[a++] = refund ? m->lim[i].undo : "";
        }
        /* Refunds undo what was written; only checks verify overrides. */
        for (l = 0; l < m->lv->n && !refund; l++) {
            npath += m->lv->level[l].group == g;
        }
        snprintf(npaths, sizeof(npaths), "%u", npath);
        argv[a++] = npaths;
        for (l = 0; l < m->lv->n && !refund; l++) {
            const struct limits_level *lev = &m->lv->level[l];
            const char *known;
            if (lev->group != g) {
                continue;
            }
            known = limiter_override_known(lev->path, lev->path_len);
            argv[a] = lev->path;
            lens[a++] = lev->path_len;
            argv[a++] = known != NULL ? known : "";
        }
    }
    PX_ASSERT(a <= cap);
    for (i = 0; i < a; i++) {
        if (lens[i] == 0 && argv[i][0] != '\0') {
            lens[i] = strlen(argv[i]);
        }
    }
    cmd = resp_cmd_new((int)a, argv, lens);
    px_free(argv);
    px_free(lens);
    px_free(args);
    limiter_part_send(cmd, limiter_multi_on_reply, refund ? NULL : m, g,
                      m->root->cid, ovkey, (size_t)ovlen);
}

/* The embedded store: every limit decided at one instant, all written only
 * when all admit (CHECK), none written otherwise. */
static void limiter_multi_local(struct limiter_multi *m)
{
    struct store_local_limit *sl;
    struct gcra_params *wp;
    struct rl_decision agg;
    const char *err = NULL;
    int64_t v[5];
    unsigned i;
    int rc;

    if (m->op == LIMITER_RESET) {
        for (i = 0; i < m->n; i++) {
            m->deleted +=
                store_local_del(&server.limiter.local, m->lim[i].key, m->lim[i].klen);
        }
        PX_CHECK_OOM(resp_enc_int(&m->root->reply, m->deleted));
        req_reply_built(m->root);
        return;
    }
    if (m->n == 0) {
        limiter_reply_ints(m->root, limiter_unlimited);
        return;
    }
    sl = px_calloc(m->n, sizeof(*sl));
    wp = px_calloc(m->n, sizeof(*wp));
    for (i = 0; i < m->n; i++) {
        limiter_write_params(&m->lim[i].p, m->wait_ns, &wp[i]);
        sl[i].algo = m->lim[i].algo;
        sl[i].lim = &m->lim[i].lim;
        sl[i].p = &m->lim[i].p;
        sl[i].p_write = &wp[i];
        sl[i].key = m->lim[i].key;
        sl[i].klen = m->lim[i].klen;
    }
    rc = store_local_check(&server.limiter.local, m->n, sl, m->cost,
                           m->op == LIMITER_CHECK, m->res, m->peek, &err);
    px_free(sl);
    px_free(wp);
    if (rc != 0) {
        req_reply_error(m->root, "%s", err);
        return;
    }
    if (m->op == LIMITER_CHECK) {
        limiter_reply_check(m->root, m->res, m->peek, m->lim, m->n, m->wait_ns);
        return;
    }
    limiter_aggregate(m->res, m->n, &agg);
    rl_reply_ints(&agg, v);
    limiter_reply_ints(m->root, v);
}

/* Longest WAIT accepted: an hour; a longer reservation is a queue, not a
 * rate limit. */
#define LIMITER_MAX_WAIT_MS INT64_C(3600000)

/* Parses [COST n] [WAIT ms] after the path. 0, or -1 after replying an
 * error. */
static int limiter_parse_opts(struct req *req, int64_t *cost, int64_t *wait_ms)
{
    int i;
    size_t len;
    const char *p;

    for (i = 3; i < req->cmd->argc; i++) {
        if (resp_cmd_arg_is(req->cmd, i, "cost") && i + 1 < req->cmd->argc) {
            p = resp_cmd_arg(req->cmd, ++i, &len);
            if (gcra_parse_int64(p, len, cost) != GCRA_OK || *cost < 0) {
                req_reply_error(req, "value is not an integer or out of "
                                     "range");
                return -1;
            }
            continue;
        }
        if (resp_cmd_arg_is(req->cmd, i, "wait") && i + 1 < req->cmd->argc) {
            p = resp_cmd_arg(req->cmd, ++i, &len);
            if (gcra_parse_int64(p, len, wait_ms) != GCRA_OK || *wait_ms < 0 ||
                *wait_ms > LIMITER_MAX_WAIT_MS) {
                req_reply_error(req, "value is not an integer or out of "
                                     "range");
                return -1;
            }
            continue;
        }
        req_reply_error(req, "syntax error");
        return -1;
    }
    return 0;
}

/* Resolves `path` into a new limits_levels. NULL after replying an error
 * (also for a path no node of the tree knows). */
static struct limits_levels *limiter_resolve(struct req *req, const char *path,
                                             size_t plen)
{
    const struct conf *conf = server.conf;
    const char *err = NULL;
    /* About 40 KB (room for the longest paths): not for the stack. */
    struct limits_levels *lv = px_malloc(sizeof(*lv));

    if (limits_resolve(server.limiter.limits, path, plen, conf->key_prefix,
                       strlen(conf->key_prefix), lv, &err) != LIMITS_OK) {
        px_free(lv);
        req_reply_error(req, "%s", err);
        return NULL;
    }
    return lv;
}

/* LIMITER CHECK|PEEK|RESET <path> [COST n] [WAIT ms]; `tries` counts the
 * calls when run-time overrides changed under the previous ones. */
static void limiter_tree_start(struct req *req, enum limiter_op op,
                               unsigned tries)
{
    struct limits_levels *lv;
    struct limiter_multi *m;
    const char *err, *path;
    size_t plen;
    int64_t cost = 1, wait_ms = 0;
    unsigned g, cap = 0;
    size_t l;

    if (req->cmd->argc < 3) {
        req_reply_error(req, "wrong number of arguments for 'limiter' "
                             "command");
        return;
    }
    if (op != LIMITER_RESET && limiter_parse_opts(req, &cost, &wait_ms) != 0) {
        return;
    }
    if (op == LIMITER_RESET && req->cmd->argc != 3) {
        req_reply_error(req, "syntax error");
        return;
    }
    if (op == LIMITER_PEEK) {
        cost = 0;
    }
    path = resp_cmd_arg(req->cmd, 2, &plen);
    lv = limiter_resolve(req, path, plen);
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
        } else if (op == LIMITER_RESET) {
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
    m = px_calloc(1, sizeof(*m));
    m->root = req;
    m->op = op;
    m->tries = tries;
    m->lv = lv;
    m->cost = cost;
    m->wait_ns = op == LIMITER_CHECK ? wait_ms * RL_NS_PER_MS : 0;
    buf_init(&m->err);
    /* Room for every limit any override could give the levels: a
     * run-time override has the node's own count, or none. */
    for (l = 0; l < lv->n; l++) {
        cap += lv->level[l].nlimits > lv->level[l].nbase
                   ? (unsigned)lv->level[l].nlimits
                   : (unsigned)lv->level[l].nbase;
    }
    m->lim = px_calloc(cap, sizeof(*m->lim));
    m->res = px_calloc(cap, sizeof(*m->res));
    m->peek = px_calloc(cap, sizeof(*m->peek));
    m->ngroups = lv->ngroups;
    m->admitted = px_calloc(m->ngroups, 1);
    m->noscript = px_calloc(m->ngroups, 1);
    err = limiter_build(m);
    if (err != NULL) {
        limiter_multi_free(m);
        req_reply_error(req, "%s", err);
        return;
    }
    if (server.limiter.embedded) {
        limiter_multi_local(m);
        limiter_multi_free(m);
        return;
    }
    if (!cluster_ready(&server.cluster)) {
        limiter_multi_free(m);
        cluster_hold(&server.cluster, req);
        return;
    }
    if (op == LIMITER_RESET && m->n == 0) {
        limiter_multi_free(m);
        PX_CHECK_OOM(resp_enc_int(&req->reply, 0));
        req_reply_built(req);
        return;
    }
    /* RESET deletes keys, so a group without any has nothing to do;
     * checks call every group, to verify its overrides. */
    for (g = 0; g < m->ngroups; g++) {
        m->pending += op != LIMITER_RESET || limiter_group_keys(m, g) > 0;
    }
    req->owed++;
    for (g = 0; g < m->ngroups; g++) {
        if (op != LIMITER_RESET || limiter_group_keys(m, g) > 0) {
            limiter_multi_send(m, g, op == LIMITER_PEEK ? "peek" : "check");
        }
    }
}

static void limiter_tree_op(struct req *req, enum limiter_op op)
{
    limiter_tree_start(req, op, 1);
}

/* ---------------- LIMITER OVERRIDE SET|DEL|GET ---------------- */

/* Most words of an override: FACTOR f, or every parameter with a value. */
#define LIMITER_OVERRIDE_MAX_WORDS 16

/* The node's reply to an OVERRIDE command, relayed (SET's integer as
 * +OK). */
static void limiter_override_on_reply(struct req *part, const char *frame,
                                      size_t len)
{
    static const char reply_ok[] = "+OK\r\n";
    struct req *root = part->ctx;

    if (!req_owed_back(root)) {
        return;
    }
    if (part->part == 1 && frame[0] == ':') {
        req_reply(root, reply_ok, sizeof(reply_ok) - 1);
        return;
    }
    req_reply(root, frame, len);
}

/* Sends argv to the node of `key` (argv[1]) for root, relaying the reply;
 * `set` turns an integer reply into +OK. */
static void limiter_override_send(struct req *root, int argc, const char **argv,
                                  size_t *lens, int set)
{
    struct resp_cmd *cmd;

    for (int i = 0; i < argc; i++) {
        if (lens[i] == 0) {
            lens[i] = strlen(argv[i]);
        }
    }
    cmd = resp_cmd_new(argc, argv, lens);
    root->owed++;
    limiter_part_send(cmd, limiter_override_on_reply, root, (unsigned)set,
                      root->cid, argv[1], lens[1]);
}

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
 * run-time override of one node with limits, kept in the override hash of
 * the path's identity, where every proxy's checks verify it. */
static void limiter_override(struct req *req)
{
    enum { OV_SET = 1, OV_DEL, OV_GET } what = 0;
    char key[LIMITER_KEY_MAX], text[LIMITS_RUNTIME_MAX_BYTES];
    const struct limits_level *lev;
    struct limits_levels *lv;
    const char *path, *argv[4];
    size_t plen, lens[4], tlen = 0;
    int kl;

    if (req->cmd->argc >= 3 && resp_cmd_arg_is(req->cmd, 2, "set")) {
        what = OV_SET;
    } else if (req->cmd->argc >= 3 && resp_cmd_arg_is(req->cmd, 2, "del")) {
        what = OV_DEL;
    } else if (req->cmd->argc >= 3 && resp_cmd_arg_is(req->cmd, 2, "get")) {
        what = OV_GET;
    }
    if (what == 0 || req->cmd->argc < 4 ||
        (what != OV_SET && req->cmd->argc != 4)) {
        req_reply_error(req, "syntax error: LIMITER OVERRIDE SET|DEL|GET "
                             "<path> ...");
        return;
    }
    path = resp_cmd_arg(req->cmd, 3, &plen);
    lv = limiter_resolve(req, path, plen);
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
    if (what == OV_SET &&
        limiter_override_text(req, lev, text, sizeof(text), &tlen) != 0) {
        px_free(lv);
        return;
    }
    kl = limiter_override_key(lev, key, sizeof(key));
    px_free(lv);
    PX_ASSERT(kl > 0 && (size_t)kl < sizeof(key));
    if (server.limiter.embedded) {
        const char *have = store_local_override_get(&server.limiter.local, path, plen);
        if (what == OV_GET && have == NULL) {
            PX_CHECK_OOM(resp_enc_nil(&req->reply));
        } else if (what == OV_GET) {
            PX_CHECK_OOM(resp_enc_bulk(&req->reply, have, strlen(have)));
        } else if (what == OV_DEL) {
            PX_CHECK_OOM(resp_enc_int(
                &req->reply,
                store_local_override_set(&server.limiter.local, path, plen, NULL, 0)));
        } else {
            store_local_override_set(&server.limiter.local, path, plen, text, tlen);
            PX_CHECK_OOM(resp_enc_simple(&req->reply, "OK"));
        }
        req_reply_built(req);
        return;
    }
    if (!cluster_ready(&server.cluster)) {
        cluster_hold(&server.cluster, req);
        return;
    }
    if (what != OV_GET) {
        /* This proxy applies it at once; the others on their next check. */
        limiter_override_learn(path, plen, what == OV_SET ? text : NULL, tlen);
    }
    argv[0] = what == OV_SET ? "HSET" : what == OV_DEL ? "HDEL" : "HGET";
    argv[1] = key;
    argv[2] = path;
    argv[3] = text;
    lens[0] = 0;
    lens[1] = (size_t)kl;
    lens[2] = plen;
    lens[3] = tlen;
    limiter_override_send(req, what == OV_SET ? 4 : 3, argv, lens,
                          what == OV_SET);
}

/* ---------------- The limits tree: RULES, RELOAD ---------------- */

int limiter_load(struct limiter *lm, const char *path, char *err,
                 size_t errlen)
{
    PX_UNUSED(lm);
    struct limits_tree *t = NULL;

    if (path == NULL) {
        return PX_OK;
    }
    if (limits_load_file(path, &t, err, errlen) != LIMITS_OK) {
        return PX_ERR;
    }
    limits_free(server.limiter.limits);
    server.limiter.limits = t;
    return PX_OK;
}

void limiter_init(struct limiter *lm, struct core *core, struct cluster *cl,
                  const struct conf *conf, int embedded)
{
    memset(lm, 0, sizeof(*lm));
    lm->core = core;
    lm->cl = cl;
    lm->conf = conf;
    lm->embedded = embedded != 0;
    hmap_init(&lm->overrides);
    store_local_init(&lm->local);
    queue_init(&lm->waits);
    queue_init(&lm->pending);
}

void limiter_throttle(struct limiter *lm, struct req *req)
{
    PX_UNUSED(lm);
    limiter_throttle_req(req);
}

void limiter_cron(struct limiter *lm)
{
    store_local_cron(&lm->local);
}

void limiter_stop(struct limiter *lm)
{
    PX_UNUSED(lm);
    limiter_drop_pending();
    limiter_stop_waits();
}

void limiter_free(struct limiter *lm)
{
    limits_free(lm->limits);
    lm->limits = NULL;
    hmap_free(&lm->overrides, px_free);
    hmap_init(&lm->overrides);
    store_local_free(&lm->local);
}

static void limiter_rules(struct req *req)
{
    char *text = NULL;
    size_t len = 0;

    if (server.limiter.limits == NULL) {
        req_reply_error(req, "no limits file loaded (limits_file or "
                             "--limits)");
        return;
    }
    if (limits_describe(server.limiter.limits, &text, &len) != LIMITS_OK) {
        px_oom(0);
    }
    PX_CHECK_OOM(resp_enc_bulk(&req->reply, text, len));
    free(text);
    req_reply_built(req);
}

static void limiter_reload(struct req *req)
{
    static const char reply_ok[] = "+OK\r\n";
    char err[1024];

    if (server.conf->limits_file == NULL) {
        req_reply_error(req, "no limits file configured (limits_file or "
                             "--limits)");
        return;
    }
    err[0] = '\0';
    if (limiter_load(&server.limiter, server.conf->limits_file, err,
                     sizeof(err)) != PX_OK) {
        size_t len = strlen(err);
        while (len > 0 && (err[len - 1] == '\n' || err[len - 1] == ' ')) {
            err[--len] = '\0';
        }
        log_warn("limits: reload refused, old rules kept: %s", err);
        req_reply_error(req, "%s", err);
        return;
    }
    log_info("limits: %s reloaded", server.conf->limits_file);
    req_reply(req, reply_ok, sizeof(reply_ok) - 1);
}

/* Admin subcommands need `AUTH admin <password>` once an admin password
 * is configured. 1 when allowed; else replies and returns 0. */
static int limiter_admin_ok(struct req *req, int admin)
{
    if (server.conf->admin_password == NULL || admin) {
        return 1;
    }
    req_reply_error(req, "NOPERM this LIMITER subcommand needs AUTH admin");
    return 0;
}

void limiter_command(struct limiter *lm, struct req *req, int admin)
{
    PX_UNUSED(lm);
    if (req->cmd->argc < 2) {
        req_reply_error(req, "wrong number of arguments for 'limiter' "
                             "command");
        return;
    }
    if (resp_cmd_arg_is(req->cmd, 1, "check")) {
        limiter_tree_op(req, LIMITER_CHECK);
    } else if (resp_cmd_arg_is(req->cmd, 1, "peek")) {
        limiter_tree_op(req, LIMITER_PEEK);
    } else if (resp_cmd_arg_is(req->cmd, 1, "reset")) {
        if (limiter_admin_ok(req, admin)) {
            limiter_tree_op(req, LIMITER_RESET);
        }
    } else if (resp_cmd_arg_is(req->cmd, 1, "rules")) {
        limiter_rules(req);
    } else if (resp_cmd_arg_is(req->cmd, 1, "override")) {
        if (limiter_admin_ok(req, admin)) {
            limiter_override(req);
        }
    } else if (resp_cmd_arg_is(req->cmd, 1, "reload")) {
        if (limiter_admin_ok(req, admin)) {
            limiter_reload(req);
        }
    } else {
        limiter_throttle_req(req);
    }
}
