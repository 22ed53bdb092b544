/* Sending a client's command on its private connection (see priv_send.h).
 *
 * Design note: sending may have to find the node first (locate_node, on
 * the way to taking the connection), which may split the command by slot
 * (merge.c), whose parts take a tracking client's aux upstreams (priv.c).
 * So sending sits above both, and taking (priv.c) below them: no circle.
 * Handlers that must send on the private connection call down into this
 * file and never back into the router. */
#include "proxy/priv_send.h"

#include <string.h>

#include "parser/resp.h"
#include "parser/resp_enc.h"
#include "proxy/client.h"
#include "proxy/client_ops.h"
#include "proxy/cmd_def.h"
#include "proxy/core/cluster.h"
#include "proxy/core/req.h"
#include "proxy/core/upstream.h"
#include "proxy/locate.h"
#include "proxy/priv.h"
#include "proxy/server.h"

/* Cluster mode: a transaction goes to the node of its first command's keys,
 * which MULTI itself does not have, so MULTI is answered here and sent
 * later, just before that first command. Returns 1 when it took `req`. */
static int priv_send_defer_multi(struct req *req)
{
    static const char reply_ok[] = "+OK\r\n";
    static const char reply_empty[] = "*0\r\n";
    struct client *c = req->client;
    unsigned flags = req->def != NULL ? req->def->flags : 0;

    if (!cluster_sharded(&server.cluster) || c->priv != NULL) {
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

int priv_send_allowed(struct req *req)
{
    struct client *c = req->client; /* the refusal below may free `req` */

    if (locate_key_allowed(req)) {
        return 1;
    }
    priv_tx_refused(c);
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

    if (priv_send_defer_multi(req)) {
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
                c->ops->state_gone(c);
                priv_aux_release(c);
            }
            priv_refuse(req);
            return;
        }
        if (c->sess.multi_deferred) {
            /* Its +OK was already given to the client: the reply to the
             * MULTI sent now is dropped. */
            priv_swallowed(c, "MULTI");
            if (sess_multi_sent(&c->sess)) {
                /* A command was refused before MULTI reached the node:
                 * the transaction must fail at EXEC there too. */
                priv_swallowed(c, "GET");
            }
        }
    } else if (!priv_send_allowed(req)) {
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
