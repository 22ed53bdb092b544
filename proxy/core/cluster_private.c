/* Private connections: the ones a client holds while its state lasts (a
 * transaction, subscriptions, a blocking call, SELECT n), taken from and
 * given back to their node's idle pool (reset with RESET), counted against
 * private_max_per_node while held; and the ones lent for the requests in
 * flight only (SCRIPT KILL). The rest of the topology is cluster.c. */
#include <stdio.h>

#include "conf/conf.h"
#include "proxy/core/cluster.h"
#include "proxy/core/core.h"
#include "proxy/core/req.h"
#include "proxy/core/upstream.h"
#include "proxy/core/util.h"

static void cluster_on_pooled_gone(struct upstream *up, int failed);
static void cluster_on_oneshot_idle(struct upstream *up);

/* Idle private connections in a node's pool. */
static const struct upstream_ops cluster_pooled_ops = {
    .gone = cluster_on_pooled_gone,
};

/* Private connections lent for the requests in flight (SCRIPT KILL). */
static const struct upstream_ops cluster_oneshot_ops = {
    .idle = cluster_on_oneshot_idle,
};

static void cluster_on_pooled_gone(struct upstream *up, int failed)
{
    PX_UNUSED(failed);
    if (up->home != NULL) {
        /* A pooled idle connection that failed (Redis's idle timeout). */
        queue_remove(&up->idle_link);
        up->home->nidle--;
        up->home = NULL;
    }
}

static void cluster_on_oneshot_idle(struct upstream *up)
{
    if (up->oneshot && queue_empty(&up->inflight)) {
        up->oneshot = 0;
        cluster_private_put(up->ctx, up, 0);
    }
}

struct upstream *cluster_private_take(struct cluster *cl, struct node *node,
                                      int proto, const struct upstream_ops *ops)
{
    struct upstream *up;

    while (!queue_empty(&node->idle)) {
        up = container_of(queue_head(&node->idle), struct upstream, idle_link);
        queue_remove(&up->idle_link);
        node->nidle--;
        up->home = NULL;
        if (!upstream_is_usable(up)) {
            upstream_destroy(up, NULL);
            continue;
        }
        up->ops = ops;
        upstream_switch_proto(up, proto);
        return up;
    }
    up = upstream_new_private(cl->core, node->host, node->port, proto, 0, ops);
    up->ctx = cl;
    return up;
}

struct upstream *cluster_limiter_private(struct cluster *cl, struct node *node,
                                         int proto,
                                         const struct upstream_ops *ops)
{
    struct upstream *up;

    if (cl->core->conf->limiter_password == NULL) {
        return cluster_private_take(cl, node, proto, ops);
    }
    up = upstream_new_private(cl->core, node->host, node->port, proto,
                              UPSTREAM_LIMITER, ops);
    up->ctx = cl;
    return up;
}

struct upstream *cluster_private_hold(struct cluster *cl, struct node *node,
                                      int proto, const struct upstream_ops *ops)
{
    struct upstream *up;

    if (node->nheld >= cl->core->conf->private_max_per_node) {
        return NULL;
    }
    up = cluster_private_take(cl, node, proto, ops);
    up->held_on = node;
    queue_insert_tail(&node->held, &up->held_link);
    node->nheld++;
    return up;
}

void cluster_private_unhold(struct upstream *up)
{
    if (up->held_on == NULL) {
        return;
    }
    queue_remove(&up->held_link);
    up->held_on->nheld--;
    up->held_on = NULL;
}

unsigned cluster_private_held(const struct cluster *cl)
{
    const struct queue *q;
    unsigned total = 0;

    for (q = queue_head(&cl->nodes); q != &cl->nodes; q = q->next) {
        total += container_of(q, struct node, link)->nheld;
    }
    return total;
}

void cluster_private_put(struct cluster *cl, struct upstream *up, int close)
{
    struct node *n = cluster_node_by_name(cl, up->name);

    cluster_private_unhold(up);
    up->owner = NULL;
    up->oneshot = 0;
    up->ops = &cluster_pooled_ops;
    if (close || up->tracked || up->limiter || n == NULL ||
        !queue_empty(&up->inflight) || !upstream_is_usable(up) ||
        n->nidle >= cl->core->conf->private_pool || cl->core->shutting_down) {
        upstream_destroy(up, NULL);
        return;
    }
    upstream_reset(up);
    up->home = n;
    queue_insert_tail(&n->idle, &up->idle_link);
    n->nidle++;
}

void cluster_send_oneshot(struct cluster *cl, struct node *node,
                          struct req *req)
{
    struct upstream *up =
        cluster_private_take(cl, node, req->proto, &cluster_oneshot_ops);

    up->oneshot = 1;
    upstream_send(up, req);
}
