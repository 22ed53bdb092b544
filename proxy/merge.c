/* Split, fan-out and merge (see merge.h).
 *
 *   client->reqs: ... [root] ...      the root holds the client's place
 *                        | mg->parts[0..n)
 *          +-------------+-------------+
 *        [part 0]     [part 1]     [part 2]     one per slot (split) or per
 *        node A       node B       node A       master (fan-out), sent at once
 *
 * A part is a proxy-made request whose reply is copied into its root's
 * merge state (merge_on_part); the last one to arrive builds the root's
 * reply, which then leaves in the client's order like any other. Parts are
 * never in a client's FIFO. The root outlives its parts: a client that
 * leaves turns it into an orphan, freed when the last part answers.
 *
 * A split is not atomic across slots (Redis itself refuses such commands);
 * `split_multikey: no` turns splitting off. The first error among the parts
 * becomes the whole reply, as a single node's error would.
 *
 * Parts travel in the root's protocol (over the nodes' RESP3 pools for a
 * RESP3 client), so the elements copied into a merged reply (MGET's values
 * and nulls, KEYS's names) are already spelled for the client; what the merge
 * writes itself is spelled for it too (INFO is a verbatim string in RESP3,
 * as Redis sends it). */
#include "proxy/merge.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "conf/conf.h"
#include "parser/buf.h"
#include "parser/resp.h"
#include "parser/resp_enc.h"
#include "proxy/client.h"
#include "proxy/core/cluster.h"
#include "proxy/core/req.h"
#include "proxy/core/upstream.h"
#include "proxy/core/util.h"
#include "proxy/hidden.h"
#include "proxy/info.h"
#include "proxy/info_snapshot.h"
#include "proxy/merge_build.h"
#include "proxy/priv.h"
#include "proxy/server.h"

/* The proxy's INFO sections `mg` asked for, rendered from a snapshot of
 * now; upstream_masters is the masters the INFO went to. */
static void merge_info_proxy(const struct merge *mg, struct buf *out)
{
    struct info_snapshot snap;

    info_snapshot_take(&snap);
    snap.masters = mg->nparts;
    info_render(out, mg->info_sections, &snap);
    info_snapshot_free(&snap);
}

/* Makes `mg` the parts of `req`: every part is owed until it comes back. */
static void merge_attach(struct req *req, struct merge *mg)
{
    req->mg = mg;
    req->mg_free = merge_free;
    req->owed = mg->nparts;
}

static void merge_on_part(struct req *part, const char *frame, size_t len)
{
    struct req *root = part->ctx;
    struct merge *mg = root->mg;

    PX_CHECK_OOM(buf_append(&mg->parts[part->part], frame, len));
    if (!req_owed_back(root) || root->owed > 0) {
        return; /* more to come, or its client left meanwhile */
    }
    if (mg->info_proxy) {
        merge_info_proxy(mg, &mg->proxy_info);
    }
    merge_build(mg, &root->reply, root->proto);
    req_reply_built(root);
}

/* Sends part `i` of `root` with command `cmd` (taken) to `n` (NULL: the
 * slot is not served). May complete and free `root` when it is the last
 * part and fails at once: do not touch `root` after the last call. */
static void merge_send(struct req *root, unsigned i, struct resp_cmd *cmd,
                       struct node *n)
{
    struct req *part = req_own(cmd, merge_on_part, root);

    part->part = i;
    part->lane = root->lane;
    part->proto = root->proto;
    if (n != NULL && root->mg->oneshot) {
        cluster_send_oneshot(&server.cluster, n, part);
        return;
    }
    if (n != NULL && root->client != NULL && root->client->sess.tracking) {
        /* A tracking client's reads are tracked on each node. */
        struct upstream *t = priv_tracking_upstream(root->client, n);
        if (t != NULL) {
            upstream_send(t, part);
            return;
        }
    }
    cluster_send(&server.cluster, n, part); /* n NULL: -CLUSTERDOWN */
}

/* ---------------- Split by slot ---------------- */

/* Builds the command of one part: the name, then for each key of the part
 * the key and the key_step - 1 arguments after it (MSET's value). */
static struct resp_cmd *merge_part_cmd(const struct req *root, const int *keys,
                                       const unsigned *idx, unsigned n,
                                       int key_step)
{
    unsigned step = key_step > 1 ? (unsigned)key_step : 1u;
    unsigned argc = 1 + n * step, a = 1, k, j;
    const char **argv = px_calloc(argc, sizeof(*argv));
    size_t *lens = px_calloc(argc, sizeof(*lens));
    struct resp_cmd *cmd;

    argv[0] = resp_cmd_arg(root->cmd, 0, &lens[0]);
    for (k = 0; k < n; k++) {
        int ki = keys[idx[k]];
        for (j = 0; j < step; j++) {
            argv[a] = resp_cmd_arg(root->cmd, ki + (int)j, &lens[a]);
            a++;
        }
    }
    cmd = resp_cmd_new((int)argc, argv, lens);
    if (cmd == NULL) {
        px_oom(argc);
    }
    px_free(argv);
    px_free(lens);
    return cmd;
}

int merge_split(struct req *req, enum merge_kind kind, int key_step,
                const int *keys, const unsigned *slots, int nkeys)
{
    unsigned *slot_part, *start, *fill, *order, nparts = 0, i;
    struct resp_cmd **cmds;
    struct merge *mg;
    int k;

    if (!server.conf->split_multikey) {
        return 0;
    }
    /* Group the keys by slot, keeping their order within each group. */
    slot_part = px_calloc(CLUSTER_SLOTS, sizeof(*slot_part));
    mg = merge_new(kind, 0);
    mg->key_part = px_calloc((size_t)nkeys, sizeof(*mg->key_part));
    mg->nkeys = (unsigned)nkeys;
    for (k = 0; k < nkeys; k++) {
        if (slot_part[slots[k]] == 0) {
            slot_part[slots[k]] = ++nparts;
        }
        mg->key_part[k] = slot_part[slots[k]] - 1;
    }
    start = px_calloc(nparts + 1, sizeof(*start));
    fill = px_calloc(nparts, sizeof(*fill));
    order = px_calloc((size_t)nkeys, sizeof(*order));
    for (k = 0; k < nkeys; k++) {
        start[mg->key_part[k] + 1]++;
    }
    for (i = 0; i < nparts; i++) {
        start[i + 1] += start[i];
    }
    for (k = 0; k < nkeys; k++) {
        unsigned p = mg->key_part[k];
        order[start[p] + fill[p]++] = (unsigned)k;
    }
    cmds = px_calloc(nparts, sizeof(*cmds));
    for (i = 0; i < nparts; i++) {
        cmds[i] = merge_part_cmd(req, keys, order + start[i],
                                 start[i + 1] - start[i], key_step);
    }
    mg->parts = px_realloc(mg->parts, nparts * sizeof(*mg->parts));
    for (i = 0; i < nparts; i++) {
        buf_init(&mg->parts[i]);
    }
    mg->nparts = nparts;
    merge_attach(req, mg);
    for (i = 0; i < nparts; i++) {
        unsigned first = order[start[i]];
        merge_send(req, i, cmds[i],
                   cluster_node_for_slot(&server.cluster, slots[first]));
    }
    px_free(cmds);
    px_free(order);
    px_free(fill);
    px_free(start);
    px_free(slot_part);
    return 1;
}

/* ---------------- Fan-out to every master ---------------- */

/* A copy of `req`'s command with argument `at` replaced by `val` (at < 0:
 * unchanged). */
static struct resp_cmd *merge_copy_cmd(const struct req *req, int at,
                                       const char *val, size_t vlen)
{
    int argc = req->cmd->argc, k;
    const char **argv = px_calloc((size_t)argc, sizeof(*argv));
    size_t *lens = px_calloc((size_t)argc, sizeof(*lens));
    struct resp_cmd *cmd;

    for (k = 0; k < argc; k++) {
        argv[k] = resp_cmd_arg(req->cmd, k, &lens[k]);
    }
    if (at >= 0) {
        argv[at] = val;
        lens[at] = vlen;
    }
    cmd = resp_cmd_new(argc, argv, lens);
    if (cmd == NULL) {
        px_oom((size_t)argc);
    }
    px_free(argv);
    px_free(lens);
    return cmd;
}

/* SCAN <cursor> ...: the cursor names the master and its own cursor. */
static int merge_scan_start(struct req *req, struct node **masters,
                            unsigned nmasters)
{
    size_t len, k;
    const char *p;
    unsigned long long c = 0, node_cursor;
    unsigned idx;
    char num[32];
    int n;

    if (req->cmd->argc < 2) {
        req_reply_error(req, "wrong number of arguments for 'scan' command");
        return 1;
    }
    p = resp_cmd_arg(req->cmd, 1, &len);
    if (len == 0 || len > 20) {
        req_reply_error(req, "invalid cursor");
        return 1;
    }
    for (k = 0; k < len; k++) {
        if (p[k] < '0' || p[k] > '9' ||
            c > (UINT64_MAX - (unsigned)(p[k] - '0')) / 10) {
            req_reply_error(req, "invalid cursor");
            return 1;
        }
        c = c * 10 + (unsigned long long)(p[k] - '0');
    }
    idx = (unsigned)(c % MERGE_SCAN_NODES);
    node_cursor = c / MERGE_SCAN_NODES;
    if (idx >= nmasters) {
        req_reply_error(req, "invalid cursor");
        return 1;
    }
    n = snprintf(num, sizeof(num), "%llu", node_cursor);
    merge_attach(req, merge_new(MERGE_SCAN, 1));
    req->mg->hide_prefix = hidden_prefix_for(req);
    req->mg->scan_node = idx;
    req->mg->nmasters = nmasters;
    merge_send(req, 0, merge_copy_cmd(req, 1, num, (size_t)n), masters[idx]);
    return 1;
}

/* The proxy's own INFO sections, by name (info.h's bits). */
static const struct {
    const char *name;
    unsigned bit;
} merge_info_named[] = {
    { "proxy", INFO_PROXY },
    { "limiter", INFO_LIMITER },
    { "latency", INFO_LATENCY },
    { "nodes", INFO_NODES },
};

/* The proxy's INFO sections the arguments ask for: every one for none,
 * all, everything or default (as Redis picks its sections), else those
 * named. */
static unsigned merge_info_sections(const struct req *req)
{
    static const char *const every[] = { "all", "everything", "default" };
    const unsigned all = INFO_ALL;
    unsigned want = 0;
    size_t k;
    int i;

    if (req->cmd->argc == 1) {
        return all;
    }
    for (i = 1; i < req->cmd->argc; i++) {
        for (k = 0; k < ARRAY_SIZE(every); k++) {
            if (resp_cmd_arg_is(req->cmd, i, every[k])) {
                return all;
            }
        }
        for (k = 0; k < ARRAY_SIZE(merge_info_named); k++) {
            if (resp_cmd_arg_is(req->cmd, i, merge_info_named[k].name)) {
                want |= merge_info_named[k].bit;
            }
        }
    }
    return want;
}

/* 1 when INFO names sections and every one is the proxy's: Redis would
 * add nothing, and an operator asking while the nodes are down gets the
 * answer instead of their error. */
static int merge_info_proxy_only(const struct req *req)
{
    size_t k;
    int i;

    if (req->cmd->argc < 2) {
        return 0;
    }
    for (i = 1; i < req->cmd->argc; i++) {
        for (k = 0; k < ARRAY_SIZE(merge_info_named); k++) {
            if (resp_cmd_arg_is(req->cmd, i, merge_info_named[k].name)) {
                break;
            }
        }
        if (k == ARRAY_SIZE(merge_info_named)) {
            return 0;
        }
    }
    return 1;
}

/* INFO answered by the proxy alone (embedded mode, or only the proxy's
 * sections asked for): its sections, so the embedded store's and the
 * limiter's counters are seen too. */
static void merge_info_local(struct req *req)
{
    struct merge none;
    struct buf text;

    memset(&none, 0, sizeof(none));
    buf_init(&text);
    none.info_sections = merge_info_sections(req);
    merge_info_proxy(&none, &text);
    PX_CHECK_OOM(
        resp_enc_verbatim(&req->reply, "txt", text.data, text.len, req->proto));
    buf_free(&text);
    req_reply_built(req);
}

int merge_fanout(struct req *req, enum merge_kind merge)
{
    struct node **masters;
    unsigned n, i;
    int kind = (int)merge;

    /* In single mode only INFO gains something (the proxy's section);
     * everything else goes to the one node as it is. */
    if (kind == MERGE_INFO &&
        ((!cluster_sharded(&server.cluster) && server.cluster.single == NULL) ||
         merge_info_proxy_only(req))) {
        merge_info_local(req);
        return 1;
    }
    if (!cluster_sharded(&server.cluster) &&
        (server.cluster.single == NULL || kind != MERGE_INFO)) {
        return 0;
    }
    masters = px_calloc(server.cluster.nnodes + 1, sizeof(*masters));
    n = cluster_masters(&server.cluster, masters, server.cluster.nnodes + 1);
    if (n == 0) {
        req_reply_error(req, "CLUSTERDOWN Hash slot not served");
    } else if (kind == MERGE_SCAN) {
        merge_scan_start(req, masters, n);
    } else {
        merge_attach(req, merge_new((enum merge_kind)kind, n));
        req->mg->oneshot = kind == MERGE_ANY_OK;
        req->mg->hide_prefix = hidden_prefix_for(req);
        req->mg->info_sections =
            kind == MERGE_INFO ? merge_info_sections(req) : 0;
        req->mg->info_proxy = req->mg->info_sections != 0;
        if (kind == MERGE_INFO) {
            req->mg->names = px_calloc(n, sizeof(*req->mg->names));
            for (i = 0; i < n; i++) {
                snprintf(req->mg->names[i], sizeof(req->mg->names[i]), "%s",
                         masters[i]->name);
            }
        }
        for (i = 0; i < n; i++) {
            merge_send(req, i, merge_copy_cmd(req, -1, NULL, 0), masters[i]);
        }
    }
    px_free(masters);
    return 1;
}
