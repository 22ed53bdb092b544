/* The client's private connection (see priv.h).
 *
 * Design note: a client holds a private upstream only while it has
 * Redis-side state (sess.h) or runs a call that would hold a shared
 * connection. Taking, refusing, giving back and sending on it live here,
 * below the router and the command handlers, so a handler that must send on
 * it calls down into this file and never back into the router. What the
 * state is and when it ends is decided by sess.c; this file does the I/O
 * those decisions ask for (the deferred MULTI, the GET that makes EXEC
 * abort, the aux upstreams of a tracking client). */
#include "proxy/priv.h"

#include <string.h>

#include "conf/conf.h"
#include "parser/resp.h"
#include "parser/resp_enc.h"
#include "proxy/client.h"
#include "proxy/cmd_def.h"
#include "proxy/core/cluster.h"
#include "proxy/core/log.h"
#include "proxy/core/req.h"
#include "proxy/core/upstream.h"
#include "proxy/core/util.h"
#include "proxy/locate.h"
#include "proxy/pubsub.h"
#include "proxy/server.h"

void priv_gone(struct client *c, struct upstream *up, int failed)
{
    struct req *req;
    int had_state;

    if (up != c->priv) {
        /* An aux upstream: the invalidations of its node are lost, so the
         * client's cache cannot be trusted any more; close it after the
         * replies owed, as a dropped Redis connection would. */
        queue_remove(&up->aux_link);
        if (failed && !c->closing) {
            req = client_req_new(c, NULL);
            req->close_after = 1;
            req_reply_built(req);
        }
        return;
    }
    c->priv = NULL;
    priv_aux_release(c); /* tracking ends with the first connection */
    had_state = sess_has_state(&c->sess) && !c->sess.push_wait;
    client_clear_state_flags(c);
    if (failed && had_state && !c->closing) {
        /* Its Redis-side state (subscriptions, db, transaction) is gone:
         * close after the replies already owed, as Redis would have. */
        req = client_req_new(c, NULL);
        req->close_after = 1;
        req_reply_built(req);
    }
}

/* ---------------- Its private upstreams ----------------
 * What a private upstream tells its client (installed when the client
 * takes it, replaced by the pool's when it is given back). */

static void priv_up_push(struct upstream *up, const char *p, size_t n)
{
    struct client *c = up->owner;

    if (c == NULL) {
        return;
    }
    if (p[0] == '-') {
        /* A pub/sub command's own error (RESP3: it waited for pushes
         * that will not come). */
        c->sess.push_wait = 0;
    }
    client_push(c, p, n);
}

static void priv_up_frame(struct upstream *up, const char *p, size_t n)
{
    if (up->owner != NULL) {
        client_note_priv_frame(up->owner, p, n);
    }
}

static int priv_up_error(struct upstream *up, struct req *req,
                         const char *frame, size_t len)
{
    return up->owner != NULL &&
           cluster_private_redirect(&server.cluster, req, up->owner->sess.multi,
                                    frame, len);
}

static void priv_up_idle(struct upstream *up)
{
    if (up->owner != NULL) {
        priv_maybe_release(up->owner);
    }
}

static void priv_up_gone(struct upstream *up, int failed)
{
    cluster_private_unhold(up);
    if (up->owner != NULL) {
        priv_gone(up->owner, up, failed);
    }
}

static const struct upstream_ops priv_ops = {
    .push = priv_up_push,
    .frame = priv_up_frame,
    .error = priv_up_error,
    .idle = priv_up_idle,
    .gone = priv_up_gone,
};

struct upstream *priv_take(struct client *c, struct node *node)
{
    struct upstream *up =
        cluster_private_hold(&server.cluster, node, c->proto, &priv_ops);

    if (up == NULL) {
        server.stats.private_refused++;
        log_debug("client %llu: node %s: private_max_per_node (%u) reached",
                  (unsigned long long)c->id, node->name,
                  server.conf->private_max_per_node);
        return NULL;
    }
    up->owner = c;
    return up;
}

void priv_refuse(struct req *req)
{
    req_reply_error(req,
                    "max private upstream connections reached "
                    "(private_max_per_node %u)",
                    server.conf->private_max_per_node);
}

void priv_release(struct client *c)
{
    struct upstream *up = c->priv;

    c->priv = NULL;
    pubsub_client_gone(c); /* the reset ends its subscriptions */
    /* A connection in the Lua debugger cannot be reset; the rest can. */
    cluster_private_put(&server.cluster, up,
                        c->sess.sticky && !c->sess.monitor);
}

void priv_maybe_release(struct client *c)
{
    struct upstream *up = c->priv;

    if (up == NULL || !queue_empty(&up->inflight) || sess_has_state(&c->sess)) {
        return;
    }
    priv_release(c);
}

void priv_aux_release(struct client *c)
{
    while (!queue_empty(&c->aux)) {
        struct upstream *up =
            container_of(queue_head(&c->aux), struct upstream, aux_link);
        queue_remove(&up->aux_link);
        cluster_private_put(&server.cluster, up, 0); /* unowned from here */
    }
    resp_cmd_free(c->tracking_cmd);
    c->tracking_cmd = NULL;
}

struct upstream *priv_tracking_upstream(struct client *c, struct node *node)
{
    if (c->priv == NULL || !c->sess.tracking) {
        return NULL;
    }
    if (strcmp(c->priv->name, node->name) == 0) {
        return c->priv;
    }
    return c->tracking_cmd != NULL ? priv_aux_for(c, node) : NULL;
}

struct upstream *priv_aux_for(struct client *c, struct node *node)
{
    struct queue *q;
    struct upstream *up;
    struct resp_cmd *cmd;

    for (q = queue_head(&c->aux); q != &c->aux; q = q->next) {
        up = container_of(q, struct upstream, aux_link);
        if (strcmp(up->name, node->name) == 0) {
            return up;
        }
    }
    up = priv_take(c, node);
    if (up == NULL) {
        return NULL;
    }
    up->tracked = 1;
    queue_insert_tail(&c->aux, &up->aux_link);
    /* The same CLIENT TRACKING on, ahead of the client's command; its
     * reply is the proxy's. */
    cmd = resp_cmd_with_arg(c->tracking_cmd, -1, NULL, 0);
    upstream_send(up, req_own(cmd, NULL, NULL));
    return up;
}

/* ---------------- Sending on it ---------------- */

/* Cluster mode: a transaction goes to the node of its first command's keys,
 * which MULTI itself does not have, so MULTI is answered here and sent
 * later, just before that first command. Returns 1 when it took `req`. */
static int priv_defer_multi(struct req *req)
{
    static const char reply_ok[] = "+OK\r\n";
    static const char reply_empty[] = "*0\r\n";
    struct client *c = req->client;
    unsigned flags = req->def != NULL ? req->def->flags : 0;

    if (!server.cluster.enabled || c->priv != NULL) {
        return 0;
    }
    if ((flags & CMD_F_MULTI) && c->sess.multi_deferred) {
        req_reply_error(req, "ERR MULTI calls can not be nested");
        return 1;
    }
    if (flags & CMD_F_MULTI) {
        c->sess.multi_deferred = 1;
        req_reply(req, reply_ok, sizeof(reply_ok) - 1);
        return 1;
    }
    if (c->sess.multi_deferred && (flags & CMD_F_TXEND)) {
        /* Nothing reached a node: EXEC runs an empty transaction, or
         * aborts when a command was refused here, as Redis would. */
        switch (sess_tx_end_deferred(&c->sess,
                                     strcmp(req->def->name, "discard") == 0)) {
        case SESS_TXEND_OK:
            req_reply(req, reply_ok, sizeof(reply_ok) - 1);
            break;
        case SESS_TXEND_ABORT:
            req_reply_error(req, "EXECABORT Transaction discarded because "
                                 "of previous errors.");
            break;
        case SESS_TXEND_EMPTY:
            req_reply(req, reply_empty, sizeof(reply_empty) - 1);
            break;
        }
        return 1;
    }
    return 0;
}

/* Sends a one-word command of the proxy's own on the client's private
 * connection; its reply is dropped. */
static void priv_send_swallowed(struct client *c, const char *word)
{
    const char *argv[1] = { word };

    upstream_send(c->priv, req_own_argv(1, argv, NULL, NULL));
}

int priv_allowed(struct req *req)
{
    if (locate_key_allowed(req)) {
        return 1;
    }
    priv_tx_refused(req->client);
    return 0;
}

/* A request held in priv_send_to until the cluster was ready goes on
 * there, classified again now that the node's key table is known. */
static void priv_send_resume(struct req *req)
{
    locate_classify(req);
    priv_send_to(req, NULL);
}

void priv_send_to(struct req *req, struct node *n)
{
    struct client *c = req->client;

    if (priv_defer_multi(req)) {
        return;
    }
    if (c->priv == NULL) {
        if (n == NULL && !cluster_ready(&server.cluster)) {
            cluster_hold(&server.cluster, req, priv_send_resume);
            return;
        }
        if (n == NULL) {
            n = locate_node(req);
        }
        if (n == NULL) {
            /* Refused here (CROSSSLOT, slot not served): Redis would
             * flag the transaction, so EXEC must abort. */
            sess_tx_refused(&c->sess, 0);
            return;
        }
        c->priv = priv_take(c, n);
        if (c->priv == NULL) {
            if (sess_tx_refused(&c->sess, 0) == SESS_REFUSAL_NONE) {
                /* What this command began never reached Redis (in a
                 * deferred transaction: refused while queuing, EXEC
                 * aborts). */
                client_clear_state_flags(c);
                priv_aux_release(c);
            }
            priv_refuse(req);
            return;
        }
        if (c->sess.multi_deferred) {
            /* Its +OK was already given to the client: the reply to the
             * MULTI sent now is dropped. */
            priv_send_swallowed(c, "MULTI");
            if (sess_multi_sent(&c->sess)) {
                /* A command was refused before MULTI reached the node:
                 * the transaction must fail at EXEC there too. */
                priv_send_swallowed(c, "GET");
            }
        }
    } else if (!priv_allowed(req)) {
        return;
    }
    if (c->sess.tunnel) {
        upstream_send_tunnel(c->priv, req);
        return;
    }
    if (c->sess.tracking) {
        c->priv->tracked = 1;
    }
    if (c->priv->proto == RESP_PROTO3 && !c->sess.multi && req->def != NULL &&
        (req->def->flags & (CMD_F_PUBSUB | CMD_F_UNSUB))) {
        /* Answered by pushes only, which are relayed as they come; the
         * connection stays until the first of them tells the count. */
        c->sess.push_wait = 1;
        upstream_send_pushed(c->priv, req);
        return;
    }
    upstream_send(c->priv, req);
}

void priv_send(struct req *req)
{
    priv_send_to(req, NULL);
}

void priv_tx_refused(struct client *c)
{
    if (sess_tx_refused(&c->sess, c->priv != NULL) == SESS_REFUSAL_POISON) {
        /* Queued, refused by Redis (GET without a key), its error
         * dropped: the node's EXEC answers EXECABORT. */
        priv_send_swallowed(c, "GET");
    }
}
