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
#include "proxy/limiter.h"

#include <string.h>

#include "algorithms/gcra.h"
#include "algorithms/scripts.h"
#include "conf/conf.h"
#include "conf/limits.h"
#include "parser/resp.h"
#include "parser/resp_enc.h"
#include "parser/resp_value.h"
#include "parser/slot.h"
#include "proxy/client.h"
#include "proxy/cluster.h"
#include "proxy/log.h"
#include "proxy/req.h"
#include "proxy/server.h"
#include "proxy/store_local.h"
#include "proxy/upstream.h"
#include "proxy/util.h"

/* Arguments of CL.THROTTLE, with its name: name key B C P [Q]. */
#define LIMITER_MAX_ARGS 6

/* Room for the key of one limit: prefix, path, tag braces, "#i:algorithm". */
#define LIMITER_KEY_MAX                                                        \
    (LIMITS_MAX_PREFIX_BYTES + 2 * LIMITS_MAX_PATH_BYTES + 64)

/* Most limits one path can reach: every level, each with every limit. */
#define LIMITER_MAX_LIMITS (LIMITS_MAX_DEPTH * LIMITS_MAX_LIMITS)

/* Most CL.THROTTLE calls sent in one script call: enough to take the
 * per-call cost of EVALSHA off Redis under load, small enough that one
 * call never holds a node for long. */
#define LIMITER_BATCH_MAX 64

/* One CL.THROTTLE waiting for its script call. Queued in
 * server.limiter_pending until the flush pass, then owned by the batch
 * that carries it. */
struct limiter_call {
    struct req *root;     /* borrowed: the client's request */
    struct gcra_params p; /* parsed arguments */
    char *key;            /* owned copy of the key */
    size_t klen;          /* bytes in key */
    struct queue link;    /* link in server.limiter_pending */
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

    root->children--;
    if (root->client == NULL) {
        req_free(root); /* the client left while the node worked */
    } else if (limiter_store_down(frame, len) &&
               server.conf->store_down == CONF_FAIL_OPEN) {
        int64_t admit[5] = { 0, call->p.limit, 0, -1, 0 };
        server.stats.fail_open++;
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

    root->children--;
    if (root->client == NULL) {
        req_free(root);
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
    struct req *part;
    struct node *n;
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
    if (cmd == NULL) {
        px_oom(a);
    }
    part = req_new(NULL, cmd);
    part->on_reply = limiter_on_batch;
    part->ctx = b;
    part->cid = c0->root->cid;
    n = cluster_node_for_slot(slot_for_key(c0->key, c0->klen));
    if (n == NULL) {
        req_reply_error(part, "CLUSTERDOWN Hash slot not served");
        return;
    }
    upstream_send(cluster_upstream(n, part->cid), part);
}

void limiter_flush(void)
{
    struct limiter_batch *open[LIMITER_BATCH_MAX];
    unsigned slot[LIMITER_BATCH_MAX];
    unsigned nopen = 0, i;

    /* Calls that arrived this loop turn, grouped by node (single mode) or
     * slot (cluster mode: a script's keys must share a slot), in arrival
     * order within each group, so calls on one key keep their order. */
    while (!queue_empty(&server.limiter_pending)) {
        struct limiter_call *call = container_of(
            queue_head(&server.limiter_pending), struct limiter_call, link);
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

void limiter_drop_pending(void)
{
    static const char down[] = "-ERR proxy shutting down\r\n";

    while (!queue_empty(&server.limiter_pending)) {
        struct limiter_call *call = container_of(
            queue_head(&server.limiter_pending), struct limiter_call, link);
        queue_remove(&call->link);
        limiter_call_error(call, down, sizeof(down) - 1);
    }
}

/* ---------------- Commands ---------------- */

/* CL.THROTTLE and the raw LIMITER form: parse, then the local store or a
 * script call on the key's node. */
void limiter_throttle(struct req *req)
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
    if (!server.cluster.enabled && server.cluster.single == NULL) {
        struct gcra_result res;
        const char *err = NULL;
        if (store_local_gcra(&server.store, argv[1], lens[1], &p, &res, &err) !=
            GCRA_OK) {
            req_reply_error(req, "%s", err);
            return;
        }
        limiter_reply_result(req, &res);
        return;
    }
    if (!cluster_ready()) {
        cluster_hold(req);
        return;
    }
    /* Sent by the flush pass, with the other calls of this loop turn. */
    call = px_calloc(1, sizeof(*call));
    call->root = req;
    call->p = p;
    call->key = px_strndup(argv[1], lens[1]);
    call->klen = lens[1];
    req->children++;
    queue_insert_tail(&server.limiter_pending, &call->link);
}

/* ---------------- The limits tree: CHECK, PEEK, RESET ---------------- */

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
    unsigned n;               /* limits */
    unsigned ngroups;         /* script calls */
    unsigned pending;         /* calls still owed */
    struct gcra_params *p;    /* owned: n parameter sets */
    char **keys;              /* owned: n keys */
    size_t *klen;             /* owned: n key lengths */
    unsigned *group;          /* owned: n group numbers */
    struct gcra_result *res;  /* owned: n decisions */
    struct gcra_result *peek; /* owned: n states without this request */
    unsigned char *admitted;  /* owned: ngroups "check went through" */
    unsigned char *noscript;  /* owned: ngroups "retried with EVAL" */
    long long deleted;        /* RESET: keys removed */
    int64_t wait_ns;          /* CHECK ... WAIT: the longest delay accepted */
    struct buf err;           /* owned: the first error reply */
};

static void limiter_multi_free(struct limiter_multi *m)
{
    unsigned i;

    for (i = 0; i < m->n; i++) {
        px_free(m->keys[i]);
    }
    px_free(m->p);
    px_free(m->keys);
    px_free(m->klen);
    px_free(m->group);
    px_free(m->res);
    px_free(m->peek);
    px_free(m->admitted);
    px_free(m->noscript);
    buf_free(&m->err);
    px_free(m);
}

static void limiter_aggregate(const struct gcra_result *res, unsigned n,
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
    struct queue link; /* link in server.limiter_waits */
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
    root->children--;
    if (root->client == NULL) {
        req_free(root);
    } else if (on_time) {
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
    root->children++;
    queue_insert_tail(&server.limiter_waits, &w->link);
    uv_timer_init(server.loop, &w->timer);
    uv_timer_start(&w->timer, limiter_on_wait, ms, 0);
}

void limiter_stop_waits(void)
{
    while (!queue_empty(&server.limiter_waits)) {
        limiter_wait_end(container_of(queue_head(&server.limiter_waits),
                                      struct limiter_wait, link),
                         0);
    }
}

/* With WAIT: when every refusing limit is due within the wait, the
 * request was reserved; returns the delay (>= 0), else -1. */
static int64_t limiter_wait_delay(const struct gcra_result *res, unsigned n,
                                  int64_t wait_ns)
{
    int64_t delay = 0;
    unsigned i;

    for (i = 0; i < n; i++) {
        const struct rl_decision *d = &res[i].d;
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

/* Replies a tree check: at once, or when its reservation is due. A refused
 * check consumed nothing, so the levels that would have admitted report
 * their state without it (`peek`); a reserved one reports the state it
 * left: nothing remaining, reset after the reservation. */
static void limiter_reply_check(struct req *root, struct gcra_result *res,
                                const struct gcra_result *peek,
                                const struct gcra_params *p, unsigned n,
                                int64_t wait_ns)
{
    struct rl_decision agg;
    int64_t v[5], delay;
    unsigned i;
    int limited = 0;

    for (i = 0; i < n; i++) {
        limited |= res[i].d.limited;
    }
    delay = limited && wait_ns > 0 ? limiter_wait_delay(res, n, wait_ns) : -1;
    if (delay >= 0) {
        limiter_aggregate(res, n, &agg);
        for (i = 0; i < n; i++) {
            int64_t reset = res[i].d.reset_after_ns;
            if (res[i].d.limited &&
                !__builtin_add_overflow(reset, p[i].inc_ns, &reset) &&
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
            if (!res[i].d.limited) {
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
static void limiter_aggregate(const struct gcra_result *res, unsigned n,
                              struct rl_decision *out)
{
    unsigned i, best = 0;
    int never = 0;

    *out = res[0].d;
    out->limited = 0;
    out->retry_after_ns = -RL_NS_PER_SEC;
    for (i = 0; i < n; i++) {
        const struct rl_decision *d = &res[i].d;
        if (d->remaining < res[best].d.remaining ||
            (d->remaining == res[best].d.remaining &&
             d->reset_after_ns > res[best].d.reset_after_ns)) {
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
    out->limit = res[best].d.limit;
    out->remaining = res[best].d.remaining;
}

static void limiter_multi_send(struct limiter_multi *m, unsigned g,
                               const char *mode);

/* Every group answered: refund what was taken where another group refused,
 * then reply. Frees `m` unless refunds still owe it nothing (they carry no
 * context). */
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
    if (m->err.len > 0 || m->n == 0) {
        if (m->op == LIMITER_CHECK) {
            /* A group that failed may not have decided: give back what
             * the others took, so a failure never consumes. */
            for (g = 0; g < m->ngroups; g++) {
                if (m->admitted[g]) {
                    limiter_multi_send(m, g, "refund");
                }
            }
        }
        req_reply(root, m->err.data, m->err.len);
        limiter_multi_free(m);
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
        limiter_reply_check(root, m->res, m->peek, m->p, m->n, m->wait_ns);
        limiter_multi_free(m);
        return;
    }
    rl_reply_ints(&agg, v);
    limiter_multi_free(m);
    limiter_reply_ints(root, v);
}

/* One group's script reply: each of its limits' decision. */
static void limiter_multi_group_reply(struct limiter_multi *m, unsigned g,
                                      const char *frame, size_t len)
{
    struct gcra_script_reply sr;
    struct resp_value v;
    const char *err = NULL;
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
    if (v.type != '*' || v.n < 3 || v.elem[0].type != ':' ||
        v.elem[1].type != ':' || v.elem[2].type != ':') {
        resp_value_free(&v);
        if (m->err.len == 0) {
            PX_CHECK_OOM(buf_append_str(&m->err, "-" GCRA_ERR_SCRIPT "\r\n"));
        }
        return;
    }
    sr.limited = v.elem[0].integer;
    sr.now_s = v.elem[1].integer;
    sr.now_us = v.elem[2].integer;
    m->admitted[g] = m->op == LIMITER_CHECK && sr.limited == 0;
    for (i = 0; i < m->n; i++) {
        const struct resp_value *t;
        if (m->group[i] != g) {
            continue;
        }
        if (3 + k >= v.n) {
            break;
        }
        t = &v.elem[3 + k++];
        sr.tat = t->null ? NULL : t->str;
        sr.tat_len = t->null ? 0 : t->len;
        struct gcra_params pp;
        gcra_params_peek(&m->p[i], &pp);
        if ((gcra_decide_stored(&m->p[i], &sr, &m->res[i], &err) != GCRA_OK ||
             gcra_decide_stored(&pp, &sr, &m->peek[i], &err) != GCRA_OK) &&
            m->err.len == 0) {
            PX_CHECK_OOM(buf_append(&m->err, "-", 1));
            PX_CHECK_OOM(buf_append_str(&m->err, err));
            PX_CHECK_OOM(buf_append(&m->err, "\r\n", 2));
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
    m->root->children--;
    if (m->root->client == NULL) {
        req_free(m->root);
        limiter_multi_free(m);
        return;
    }
    limiter_multi_done(m);
}

/* Sends group g's call: the gcra script over the group's keys in `mode`, or
 * DEL of them (RESET). A refund carries no context: its reply is dropped. */
static void limiter_multi_send(struct limiter_multi *m, unsigned g,
                               const char *mode)
{
    const struct scripts_lua *s = scripts_gcra();
    int refund = strcmp(mode, "refund") == 0;
    unsigned i, nk = 0, a = 0, cap = 4 + 5 * m->n;
    const char **argv = px_calloc(cap, sizeof(*argv));
    size_t *lens = px_calloc(cap, sizeof(*lens));
    struct gcra_script_args *sa = px_calloc(m->n, sizeof(*sa));
    char nkeys[16];
    struct resp_cmd *cmd;
    struct req *part;
    struct node *n = NULL;
    unsigned first = 0;

    for (i = 0; i < m->n; i++) {
        if (m->group[i] == g) {
            if (nk++ == 0) {
                first = i;
            }
        }
    }
    if (m->op == LIMITER_RESET) {
        argv[a] = "DEL";
        lens[a++] = 3;
    } else {
        argv[a] = m->noscript[g] ? "EVAL" : "EVALSHA";
        lens[a] = strlen(argv[a]);
        a++;
        argv[a] = m->noscript[g] ? s->body : s->sha1;
        lens[a++] = m->noscript[g] ? s->len : SCRIPTS_SHA1_LEN;
        snprintf(nkeys, sizeof(nkeys), "%u", nk);
        argv[a] = nkeys;
        lens[a] = strlen(nkeys);
        a++;
    }
    for (i = 0; i < m->n; i++) {
        if (m->group[i] == g) {
            argv[a] = m->keys[i];
            lens[a++] = m->klen[i];
        }
    }
    if (m->op != LIMITER_RESET) {
        for (i = 0; i < m->n; i++) {
            int k;
            if (m->group[i] != g) {
                continue;
            }
            struct gcra_params wp;
            limiter_write_params(&m->p[i], m->wait_ns, &wp);
            gcra_script_args(&wp, &sa[i]);
            for (k = 0; k < GCRA_SCRIPT_NARGS; k++) {
                argv[a] = sa[i].v[k];
                lens[a++] = sa[i].len[k];
            }
        }
        argv[a] = mode;
        lens[a] = strlen(mode);
        a++;
    }
    cmd = resp_cmd_new((int)a, argv, lens);
    px_free(argv);
    px_free(lens);
    px_free(sa);
    if (cmd == NULL) {
        px_oom(0);
    }
    part = req_new(NULL, cmd);
    part->on_reply = limiter_multi_on_reply;
    part->ctx = refund ? NULL : m;
    part->part = g;
    part->cid = m->root->cid;
    n = cluster_node_for_slot(slot_for_key(m->keys[first], m->klen[first]));
    if (n == NULL) {
        req_reply_error(part, "CLUSTERDOWN Hash slot not served");
        return;
    }
    upstream_send(cluster_upstream(n, part->cid), part);
}

/* The embedded store: every limit decided at one instant, all written only
 * when all admit (CHECK), none written otherwise. */
static void limiter_multi_local(struct limiter_multi *m)
{
    struct rl_decision agg;
    struct gcra_params *wp;
    const char *err = NULL;
    int64_t v[5];
    unsigned i;
    int rc;

    if (m->op == LIMITER_RESET) {
        for (i = 0; i < m->n; i++) {
            m->deleted +=
                store_local_del(&server.store, m->keys[i], m->klen[i]);
        }
        PX_CHECK_OOM(resp_enc_int(&m->root->reply, m->deleted));
        req_reply_built(m->root);
        return;
    }
    wp = px_calloc(m->n, sizeof(*wp));
    for (i = 0; i < m->n; i++) {
        limiter_write_params(&m->p[i], m->wait_ns, &wp[i]);
    }
    rc = store_local_gcra_all(&server.store, m->n, (const char *const *)m->keys,
                              m->klen, m->p, wp, m->op == LIMITER_CHECK, m->res,
                              m->peek, &err);
    px_free(wp);
    if (rc != GCRA_OK) {
        req_reply_error(m->root, "%s", err);
        return;
    }
    if (m->op == LIMITER_CHECK) {
        limiter_reply_check(m->root, m->res, m->peek, m->p, m->n, m->wait_ns);
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

/* LIMITER CHECK|PEEK|RESET <path> [COST n]. */
static void limiter_tree_op(struct req *req, enum limiter_op op)
{
    const struct conf *conf = server.conf;
    struct limits_levels *lv;
    struct limiter_multi *m;
    const char *err = NULL, *path;
    size_t plen, l, k;
    int64_t cost = 1, wait_ms = 0;
    unsigned g;

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
    /* About 40 KB (room for the longest paths): not for the stack. */
    lv = px_malloc(sizeof(*lv));
    if (limits_resolve(server.limits, path, plen, conf->key_prefix,
                       strlen(conf->key_prefix), lv, &err) != LIMITS_OK) {
        px_free(lv);
        req_reply_error(req, "%s", err);
        return;
    }
    if (lv->n == 0 && lv->matched > 0) {
        /* The tree knows the path, but no level on it has limits (an
         * exempt identity): not limited, shown by limit 0, which
         * redis-cell never reports. */
        static const int64_t unlimited[5] = { 0, 0, 0, -1, 0 };
        px_free(lv);
        if (op == LIMITER_RESET) {
            PX_CHECK_OOM(resp_enc_int(&req->reply, 0));
            req_reply_built(req);
        } else {
            limiter_reply_ints(req, unlimited);
        }
        return;
    }
    if (lv->n == 0) {
        /* Not even the first segment is in the tree: most likely a
         * typo, which silently admitting would hide. */
        px_free(lv);
        req_reply_error(req, "no limits for path '%.*s'",
                        (int)(plen > 128 ? 128 : plen), path);
        return;
    }
    m = px_calloc(1, sizeof(*m));
    m->root = req;
    m->op = op;
    m->wait_ns = op == LIMITER_CHECK ? wait_ms * RL_NS_PER_MS : 0;
    buf_init(&m->err);
    m->p = px_calloc(LIMITER_MAX_LIMITS, sizeof(*m->p));
    m->keys = px_calloc(LIMITER_MAX_LIMITS, sizeof(*m->keys));
    m->klen = px_calloc(LIMITER_MAX_LIMITS, sizeof(*m->klen));
    m->group = px_calloc(LIMITER_MAX_LIMITS, sizeof(*m->group));
    m->res = px_calloc(LIMITER_MAX_LIMITS, sizeof(*m->res));
    m->peek = px_calloc(LIMITER_MAX_LIMITS, sizeof(*m->peek));
    for (l = 0; l < lv->n; l++) {
        const struct limits_level *lev = &lv->level[l];
        if (lev->unlimited) {
            continue; /* an override lifts this level */
        }
        for (k = 0; k < lev->nlimits; k++) {
            const struct limits_limit *lim = &lev->limits[k];
            char key[LIMITER_KEY_MAX];
            int kl;
            if (lim->algo != LIMITS_GCRA) {
                px_free(lv);
                limiter_multi_free(m);
                req_reply_error(req,
                                "algorithm '%s' is not available in this "
                                "build",
                                limits_algo_name(lim->algo));
                return;
            }
            if (gcra_params_init_ns(&m->p[m->n], lim->u.gcra.max_burst,
                                    lim->u.gcra.count,
                                    lim->u.gcra.period_ms * RL_NS_PER_MS, cost,
                                    &err) != GCRA_OK) {
                px_free(lv);
                limiter_multi_free(m);
                req_reply_error(req, "%s", err);
                return;
            }
            kl = limits_limit_key(lev, k, key, sizeof(key));
            PX_ASSERT(kl > 0 && (size_t)kl < sizeof(key));
            m->keys[m->n] = px_strndup(key, (size_t)kl);
            m->klen[m->n] = (size_t)kl;
            m->group[m->n] = lev->group;
            m->n++;
        }
    }
    m->ngroups = lv->ngroups;
    px_free(lv);
    m->admitted = px_calloc(m->ngroups, 1);
    m->noscript = px_calloc(m->ngroups, 1);
    if (m->n == 0) {
        /* Every level is lifted by an override: admitted, unlimited. */
        static const int64_t v[5] = { 0, 0, 0, -1, 0 };
        limiter_multi_free(m);
        if (op == LIMITER_RESET) {
            PX_CHECK_OOM(resp_enc_int(&req->reply, 0));
            req_reply_built(req);
        } else {
            limiter_reply_ints(req, v);
        }
        return;
    }
    if (!server.cluster.enabled && server.cluster.single == NULL) {
        limiter_multi_local(m);
        limiter_multi_free(m);
        return;
    }
    if (!cluster_ready()) {
        limiter_multi_free(m);
        cluster_hold(req);
        return;
    }
    m->pending = m->ngroups;
    req->children++;
    for (g = 0; g < m->ngroups; g++) {
        limiter_multi_send(m, g, op == LIMITER_PEEK ? "peek" : "check");
    }
}

/* ---------------- The limits tree: RULES, RELOAD ---------------- */

int limiter_load(const char *path, char *err, size_t errlen)
{
    struct limits_tree *t = NULL;

    if (path == NULL) {
        return PX_OK;
    }
    if (limits_load_file(path, &t, err, errlen) != LIMITS_OK) {
        return PX_ERR;
    }
    limits_free(server.limits);
    server.limits = t;
    return PX_OK;
}

void limiter_shutdown(void)
{
    limits_free(server.limits);
    server.limits = NULL;
}

static void limiter_rules(struct req *req)
{
    char *text = NULL;
    size_t len = 0;

    if (server.limits == NULL) {
        req_reply_error(req, "no limits file loaded (limits_file or "
                             "--limits)");
        return;
    }
    if (limits_describe(server.limits, &text, &len) != LIMITS_OK) {
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
    if (limiter_load(server.conf->limits_file, err, sizeof(err)) != PX_OK) {
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
static int limiter_admin_ok(struct req *req)
{
    if (server.conf->admin_password == NULL || req->client->admin) {
        return 1;
    }
    req_reply_error(req, "NOPERM this LIMITER subcommand needs AUTH admin");
    return 0;
}

void limiter_command(struct req *req)
{
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
        if (limiter_admin_ok(req)) {
            limiter_tree_op(req, LIMITER_RESET);
        }
    } else if (resp_cmd_arg_is(req->cmd, 1, "rules")) {
        limiter_rules(req);
    } else if (resp_cmd_arg_is(req->cmd, 1, "reload")) {
        if (limiter_admin_ok(req)) {
            limiter_reload(req);
        }
    } else {
        limiter_throttle(req);
    }
}
