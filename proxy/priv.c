/* The client's private connection (see priv.h).
 *
 * Design note: a client holds a private upstream only while it has
 * Redis-side state (sess.h) or runs a call that would hold a shared
 * connection. Taking, refusing and giving it back live here; sending on
 * it (priv_send.c) sits above, since it locates the node and may split a
 * command, whose parts (merge.c) take a tracking client's aux upstreams
 * from here. What the state is and when it ends is decided by sess.c;
 * this file does the I/O those decisions ask for (the GET that makes EXEC
 * abort, the aux upstreams of a tracking client). */
#include "proxy/priv.h"

#include <string.h>

#include "conf/conf.h"
#include "parser/resp.h"
#include "proxy/client.h"
#include "proxy/client_ops.h"
#include "proxy/core/cluster.h"
#include "proxy/core/log.h"
#include "proxy/core/req.h"
#include "proxy/core/upstream.h"
#include "proxy/core/util.h"
#include "proxy/hidden.h"
#include "proxy/pubsub.h"
#include "proxy/server.h"

void priv_gone(struct client *c, struct upstream *up, int failed)
{
    int had_state;

    if (up != c->priv) {
        /* An aux upstream: the invalidations of its node are lost, so the
         * client's cache cannot be trusted any more; close it after the
         * replies owed, as a dropped Redis connection would. */
        queue_remove(&up->aux_link);
        if (failed && !c->closing) {
            c->ops->close_after_owed(c);
        }
        return;
    }
    c->priv = NULL;
    priv_aux_release(c); /* tracking ends with the first connection */
    had_state = sess_has_state(&c->sess) && !c->sess.push_wait;
    c->ops->state_gone(c);
    if (failed && had_state && !c->closing) {
        /* Its Redis-side state (subscriptions, db, transaction) is gone:
         * close after the replies already owed, as Redis would have. */
        c->ops->close_after_owed(c);
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
    hidden_push(c, p, n); /* invalidations without the limiter's keys */
}

static void priv_up_frame(struct upstream *up, const char *p, size_t n)
{
    if (up->owner != NULL) {
        up->owner->ops->frame(up->owner, p, n);
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

void priv_swallowed(struct client *c, const char *word)
{
    const char *argv[1] = { word };

    upstream_send(c->priv, req_own_argv(1, argv, NULL, NULL));
}

void priv_tx_refused(struct client *c)
{
    if (sess_tx_refused(&c->sess, c->priv != NULL) == SESS_REFUSAL_POISON) {
        /* Queued, refused by Redis (GET without a key), its error
         * dropped: the node's EXEC answers EXECABORT. */
        priv_swallowed(c, "GET");
    }
}
