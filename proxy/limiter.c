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

/* A script call on behalf of one client request. Owned by the part that
 * carries it; freed with its reply. */
struct limiter_call {
    struct req *root;      /* borrowed: the client's request */
    struct gcra_params p;  /* parsed arguments */
    unsigned noscript : 1; /* already retried with EVAL */
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

static void limiter_send(struct limiter_call *call, const char *key,
                         size_t klen);

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

/* Completes the client's request from the script's reply. */
static void limiter_finish(struct limiter_call *call, const char *frame,
                           size_t len)
{
    struct req *root = call->root;
    struct gcra_script_reply sr;
    struct gcra_result res;
    struct resp_value v;
    const char *err = NULL;
    size_t used;

    if (frame[0] == '-') {
        if (limiter_store_down(frame, len) &&
            server.conf->store_down == CONF_FAIL_OPEN) {
            int64_t admit[5] = { 0, call->p.limit, 0, -1, 0 };
            server.stats.fail_open++;
            limiter_reply_ints(root, admit);
            return;
        }
        req_reply(root, frame, len);
        return;
    }
    if (resp_value_parse(frame, len, &v, &used) != RESP_OK) {
        req_reply_error(root, "%s", GCRA_ERR_SCRIPT);
        return;
    }
    if (v.type != '*' || v.n != GCRA_SCRIPT_NREPLY || v.elem[0].type != ':' ||
        v.elem[1].type != ':' || v.elem[2].type != ':') {
        resp_value_free(&v);
        req_reply_error(root, "%s", GCRA_ERR_SCRIPT);
        return;
    }
    sr.limited = v.elem[0].integer;
    sr.now_s = v.elem[1].integer;
    sr.now_us = v.elem[2].integer;
    sr.tat = v.elem[3].null ? NULL : v.elem[3].str;
    sr.tat_len = v.elem[3].null ? 0 : v.elem[3].len;
    if (gcra_decide_from_script(&call->p, &sr, &res, &err) != GCRA_OK) {
        resp_value_free(&v);
        log_warn("limiter: %s", err);
        req_reply_error(root, "%s", err);
        return;
    }
    resp_value_free(&v);
    limiter_reply_result(root, &res);
}

static void limiter_on_reply(struct req *part, const char *frame, size_t len)
{
    struct limiter_call *call = part->ctx;
    struct req *root = call->root;

    if (len > 10 && memcmp(frame, "-NOSCRIPT ", 10) == 0 && !call->noscript &&
        root->client != NULL) {
        /* The node's script cache is empty (restart, promotion, SCRIPT
         * FLUSH): send the body once; EVAL also caches it. */
        size_t klen;
        const char *key = resp_cmd_arg(part->cmd, 3, &klen);
        call->noscript = 1;
        part->ctx = NULL;
        limiter_send(call, key, klen);
        return;
    }
    part->ctx = NULL;
    root->children--;
    if (root->client == NULL) {
        req_free(root); /* the client left while the node worked */
    } else {
        limiter_finish(call, frame, len);
    }
    px_free(call);
}

/* Sends the script call for `call` (EVALSHA, or EVAL after a NOSCRIPT) to
 * the node of `key`. */
static void limiter_send(struct limiter_call *call, const char *key,
                         size_t klen)
{
    const struct scripts_lua *s = scripts_gcra();
    struct gcra_script_args a;
    const char *argv[8];
    size_t lens[8];
    struct resp_cmd *cmd;
    struct req *part;
    struct node *n;
    int k;

    gcra_script_args(&call->p, &a);
    argv[0] = call->noscript ? "EVAL" : "EVALSHA";
    lens[0] = strlen(argv[0]);
    argv[1] = call->noscript ? s->body : s->sha1;
    lens[1] = call->noscript ? s->len : SCRIPTS_SHA1_LEN;
    argv[2] = "1";
    lens[2] = 1;
    argv[3] = key;
    lens[3] = klen;
    for (k = 0; k < GCRA_SCRIPT_NARGS; k++) {
        argv[4 + k] = a.v[k];
        lens[4 + k] = a.len[k];
    }
    cmd = resp_cmd_new(8, argv, lens);
    if (cmd == NULL) {
        px_oom(0);
    }
    part = req_new(NULL, cmd);
    part->on_reply = limiter_on_reply;
    part->ctx = call;
    part->cid = call->root->cid;
    n = cluster_node_for_slot(slot_for_key(key, klen));
    if (n == NULL) {
        req_reply_error(part, "CLUSTERDOWN Hash slot not served");
        return;
    }
    upstream_send(cluster_upstream(n, part->cid), part);
}

/* ---------------- Commands ---------------- */

/* CL.THROTTLE and the raw LIMITER form: parse, then the local store or a
 * script call on the key's node. */
static void limiter_gcra(struct req *req)
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
    call = px_calloc(1, sizeof(*call));
    call->root = req;
    call->p = p;
    req->children++;
    limiter_send(call, argv[1], lens[1]);
}

void limiter_throttle(struct req *req)
{
    limiter_gcra(req);
}

void limiter_command(struct req *req)
{
    size_t len;
    const char *sub;

    if (req->cmd->argc < 2) {
        req_reply_error(req, "wrong number of arguments for 'limiter' "
                             "command");
        return;
    }
    sub = resp_cmd_arg(req->cmd, 1, &len);
    if ((len == 5 && strncasecmp_ascii(sub, "check", 5) == 0) ||
        (len == 4 && strncasecmp_ascii(sub, "peek", 4) == 0) ||
        (len == 5 && strncasecmp_ascii(sub, "reset", 5) == 0) ||
        (len == 5 && strncasecmp_ascii(sub, "rules", 5) == 0) ||
        (len == 6 && strncasecmp_ascii(sub, "reload", 6) == 0) ||
        (len == 8 && strncasecmp_ascii(sub, "override", 8) == 0)) {
        req_reply_error(req,
                        "LIMITER %.*s needs the limits tree, which this "
                        "build does not load yet",
                        (int)len, sub);
        return;
    }
    limiter_gcra(req);
}
