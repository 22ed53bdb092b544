/* Client ids across the proxy: CLIENT TRACKING, UNBLOCK, GETREDIR,
 * TRACKINGINFO and CACHING (see tracking.h).
 *
 *   client id (cellgate's)  <-->  Redis id of its private connection
 *        |                           (learned by CLIENT ID when the
 *        |                            connection opened: upstream.rid)
 *        +-- CLIENT UNBLOCK 12      -> rewritten to Redis's id, sent to
 *        |                             the node of the blocked client
 *        +-- TRACKING on REDIRECT 12 -> waits for the target's Redis id
 *        |                             (upstream_wait_rid), then sent
 *        +-- GETREDIR / TRACKINGINFO -> Redis's id in the reply turned
 *                                       back into cellgate's (req->filter)
 *
 * Tracking keeps a private connection (Redis's tracking table names it),
 * and in cluster mode one per node the client reads from
 * (priv_tracking_upstream), so invalidations come from every node. */
#include "proxy/tracking.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "parser/buf.h"
#include "parser/resp.h"
#include "parser/resp_enc.h"
#include "proxy/client.h"
#include "proxy/core/cluster.h"
#include "proxy/core/req.h"
#include "proxy/core/upstream.h"
#include "proxy/core/util.h"
#include "proxy/priv.h"
#include "proxy/priv_send.h"
#include "proxy/server.h"
#include "proxy/session.h"

/* The private upstream of the client with cellgate id `id` and a known
 * Redis id, or NULL. */
static struct upstream *tracking_priv_of(long long id)
{
    struct client *t = id > 0 ? session_client_by_id((uint64_t)id) : NULL;

    if (t == NULL || t->priv == NULL || t->priv->rid == 0) {
        return NULL;
    }
    return t->priv;
}

/* Replaces argument i of the request with `text` (a new command). */
static void tracking_rewrite_arg(struct req *req, int i, const char *text)
{
    struct resp_cmd *cmd = resp_cmd_with_arg(req->cmd, i, text, strlen(text));

    if (cmd == NULL) {
        px_oom((size_t)req->cmd->argc);
    }
    resp_cmd_free(req->cmd);
    req->cmd = cmd;
}

/* CLIENT UNBLOCK <id> [TIMEOUT|ERROR]: `id` is a cellgate client; the
 * call it is blocked in runs on its private connection, whose Redis id
 * the node knows. */
void tracking_client_unblock(struct req *req)
{
    struct upstream *up;
    struct node *n;
    long long id;
    char rid[24];

    if (session_arg_ll(req, 2, &id) != 0) {
        req_reply_error(req, "value is not an integer or out of range");
        return;
    }
    if (req->cmd->argc == 4 && !resp_cmd_arg_is(req->cmd, 3, "timeout") &&
        !resp_cmd_arg_is(req->cmd, 3, "error")) {
        req_reply_error(req, "ERR CLIENT UNBLOCK reason should be TIMEOUT or "
                             "ERROR");
        return;
    }
    up = tracking_priv_of(id);
    n = up != NULL ? cluster_node_by_name(&server.cluster, up->name) : NULL;
    if (n == NULL || queue_empty(&up->inflight)) {
        PX_CHECK_OOM(resp_enc_int(&req->reply, 0));
        req_reply_built(req);
        return;
    }
    snprintf(rid, sizeof(rid), "%llu", (unsigned long long)up->rid);
    tracking_rewrite_arg(req, 2, rid);
    upstream_send(cluster_upstream_proto(n, req->lane, req->proto), req);
}

/* Sends a CLIENT TRACKING on whose REDIRECT argument (at `at`, 0 when
 * none) names a target that now has a known Redis id. */
static void tracking_tracking_send(struct req *req, int at)
{
    struct client *c = req->client;
    struct upstream *target = NULL;

    if (at > 0) {
        size_t len;
        long long id;
        char rid[24];
        const char *p = resp_cmd_arg(req->cmd, at, &len);

        if (resp_parse_ll(p, len, &id) != 0 ||
            (target = tracking_priv_of(id)) == NULL) {
            req_reply_error(req, "The client ID you want redirect to does "
                                 "not exist");
            return;
        }
        snprintf(rid, sizeof(rid), "%llu", (unsigned long long)target->rid);
        tracking_rewrite_arg(req, at, rid);
        /* Redis must see this connection go when its client goes (the
         * tracking client then gets tracking-redir-broken): never pooled. */
        target->tracked = 1;
        server.redir_ids[server.next_redir % SERVER_REDIR_IDS] =
            (struct server_redir_id){ .rid = target->rid,
                                      .client_id = (uint64_t)id };
        server.next_redir++;
    }
    c->sess.tracking = 1;
    if (cluster_sharded(&server.cluster) && target == NULL) {
        /* Keys of other nodes are read over private connections there
         * that track the same way (see priv_aux_for). */
        resp_cmd_free(c->tracking_cmd);
        c->tracking_cmd = resp_cmd_with_arg(req->cmd, -1, NULL, 0);
        if (c->tracking_cmd == NULL) {
            px_oom((size_t)req->cmd->argc);
        }
    }
    if (c->priv == NULL && target != NULL) {
        /* Invalidations go to the redirect target's node. */
        struct node *n = cluster_node_by_name(&server.cluster, target->name);
        if (n != NULL) {
            priv_send_to(req, n);
            return;
        }
    }
    priv_send(req);
}

/* The target's private connection learned its Redis id: the tracking
 * client's request goes on, and the client reads again. */
static void tracking_tracking_resume(struct req *req)
{
    struct client *c = req->client; /* still there: orphans are freed by
                                       the core */

    c->rid_wait = 0;
    tracking_tracking_send(req, (int)req->part);
    server_mark_client(c);
}

/* CLIENT TRACKING ON|OFF [REDIRECT id] ...: tracking lives on a private
 * connection; REDIRECT names a cellgate client, whose private connection
 * (subscribed to __redis__:invalidate, or reading pushes in RESP3) has its
 * own Redis id. A target without one gets a private connection now, and
 * the tracking client waits (reading nothing more) until its id is known,
 * so its later commands cannot overtake this one. */
void tracking_client_tracking(struct req *req)
{
    struct client *c = req->client, *t;
    int on, i, at = 0;
    long long id;

    if (session_on_off(req, &on) != 0) {
        return;
    }
    if (!on) {
        priv_aux_release(c);
        if (c->priv == NULL) {
            session_ok(req); /* not tracking: nothing to turn off */
            return;
        }
        c->sess.tracking = 0;
        priv_send(req);
        return;
    }
    for (i = 3; i + 1 < req->cmd->argc && at == 0; i++) {
        if (resp_cmd_arg_is(req->cmd, i, "redirect")) {
            at = i + 1;
        }
    }
    if (at == 0) {
        tracking_tracking_send(req, 0);
        return;
    }
    if (session_arg_ll(req, at, &id) != 0) {
        req_reply_error(req, "value is not an integer or out of range");
        return;
    }
    t = id > 0 ? session_client_by_id((uint64_t)id) : NULL;
    if (t == NULL) {
        req_reply_error(req, "The client ID you want redirect to does not "
                             "exist");
        return;
    }
    if (t->priv != NULL && t->priv->rid != 0) {
        tracking_tracking_send(req, at);
        return;
    }
    if (t->priv == NULL) {
        struct node *n = c->priv != NULL ? cluster_node_by_name(&server.cluster,
                                                                c->priv->name)
                                         : cluster_any_node(&server.cluster);
        if (n == NULL) {
            req_reply_error(req, "CLUSTERDOWN Hash slot not served");
            return;
        }
        t->priv = priv_take(t, n);
        if (t->priv == NULL) {
            priv_refuse(req);
            return;
        }
        t->sess.redir_target = 1;
    }
    req->part = (unsigned)at;
    c->rid_wait = 1;
    upstream_wait_rid(t->priv, req, tracking_tracking_resume);
}

/* The cellgate id of the client whose private connection Redis knows as
 * `rid`, or `rid` itself when it is not one of them (0, -1). */
static long long tracking_id_of_rid(long long rid)
{
    struct queue *q;
    unsigned i;

    if (rid <= 0) {
        return rid;
    }
    for (q = queue_head(&server.clients); q != &server.clients; q = q->next) {
        const struct client *c = container_of(q, struct client, node);
        if (c->priv != NULL && (long long)c->priv->rid == rid) {
            return (long long)c->id;
        }
    }
    /* A redirect target that left: Redis still names it. */
    for (i = 0; i < SERVER_REDIR_IDS; i++) {
        if ((long long)server.redir_ids[i].rid == rid) {
            return (long long)server.redir_ids[i].client_id;
        }
    }
    return rid;
}

/* Appends frame[0..len) with the integer that starts at `at` (just after
 * its ':') replaced by the cellgate id it names. */
static void tracking_put_redir(struct req *req, const char *frame, size_t len,
                               size_t at)
{
    size_t end = at;
    long long v;

    while (end < len && frame[end] != '\r') {
        end++;
    }
    if (end == len || resp_parse_ll(frame + at, end - at, &v) != 0) {
        PX_CHECK_OOM(buf_append(&req->reply, frame, len));
        return;
    }
    PX_CHECK_OOM(buf_append(&req->reply, frame, at - 1));
    PX_CHECK_OOM(resp_enc_int(&req->reply, tracking_id_of_rid(v)));
    PX_CHECK_OOM(buf_append(&req->reply, frame + end + 2, len - end - 2));
}

/* CLIENT GETREDIR: ":<redis id>". */
static void tracking_filter_getredir(struct req *req, const char *frame,
                                     size_t len)
{
    tracking_put_redir(req, frame, len, frame[0] == ':' ? 1 : len);
}

/* CLIENT TRACKINGINFO: the integer after the "redirect" field. The reply
 * is Redis's own fixed map (flags, redirect, prefixes), so the field is
 * found by its bytes. */
static void tracking_filter_trackinginfo(struct req *req, const char *frame,
                                         size_t len)
{
    static const char field[] = "$8\r\nredirect\r\n:";
    size_t k, flen = sizeof(field) - 1;

    for (k = 0; k + flen <= len; k++) {
        if (memcmp(frame + k, field, flen) == 0) {
            tracking_put_redir(req, frame, len, k + flen);
            return;
        }
    }
    PX_CHECK_OOM(buf_append(&req->reply, frame, len));
}

/* Subcommands that only read tracking state: a client that does not track
 * gets Redis's answer for that case here. */
void tracking_client_getredir(struct req *req)
{
    if (req->client->sess.tracking) {
        req->filter = tracking_filter_getredir;
        priv_send(req);
        return;
    }
    PX_CHECK_OOM(resp_enc_int(&req->reply, -1));
    req_reply_built(req);
}

void tracking_client_trackinginfo(struct req *req)
{
    struct buf *b = &req->reply;

    if (req->client->sess.tracking) {
        req->filter = tracking_filter_trackinginfo;
        priv_send(req);
        return;
    }
    PX_CHECK_OOM(resp_enc_map_header(b, 3, req->proto));
    PX_CHECK_OOM(resp_enc_bulk(b, "flags", 5));
    PX_CHECK_OOM(resp_enc_set_header(b, 1, req->proto));
    PX_CHECK_OOM(resp_enc_bulk(b, "off", 3));
    PX_CHECK_OOM(resp_enc_bulk(b, "redirect", 8));
    PX_CHECK_OOM(resp_enc_int(b, -1));
    PX_CHECK_OOM(resp_enc_bulk(b, "prefixes", 8));
    PX_CHECK_OOM(resp_enc_array_header(b, 0));
    req_reply_built(req);
}

/* CLIENT CACHING acts on the tracking connection (only a tracking client
 * gets here: Redis refuses it, with no effect, on any connection). */
void tracking_client_caching(struct req *req)
{
    priv_send(req); /* untracked: forwarded (session_client_pick) */
}
