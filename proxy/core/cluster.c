/* Topology: nodes, the slot map, redirections and refresh.
 *
 *   cluster.nodes: [node A] [node B] [node C] ...   each with npool shared
 *                     ^        ^                    upstreams (and npool
 *                     |        |                    RESP3 ones, opened for
 *                     |        |                    the first RESP3 client;
 *                     |        |                    and npool limiter ones,
 *                     |        |                    as limiter_user, or
 *                     |        |                    else one, opened for
 *                     |        |                    the first limiter call)
 *   cluster.slot[0..16383] --+--------+  (borrowed: the master of a slot)
 *
 *   refresh:  req "CLUSTER SLOTS" --(a READY node's upstream, else a
 *             seed's one-shot private connection)--> reply
 *             --> cluster_on_slots: new map, new nodes connect, nodes no
 *                 longer listed close (their owed requests fail)
 *   MOVED:    slot -> named node at once, re-send, refresh soon
 *   ASK:      "ASKING" (swallowed) + the command, back to back on the named
 *             node's connection; the map does not change
 *
 * The map is refreshed at start, periodically, after a MOVED, and after a
 * connection to a node is lost (a failover is likely under way). Until the
 * first map and the command table (`COMMAND`, for key positions) are known,
 * requests wait in `waiting` and fail after the command timeout. A slot
 * whose master is unknown or down fails fast: the node's upstream refuses
 * while it reconnects, so nothing piles up behind a dead master.
 *
 * Nodes are named as the cluster announces them (topo.h): the seeds are
 * not nodes, only where the map is asked for while no node answers, so
 * one server is one node, however the configuration names it. Names are
 * resolved by each connection at each attempt (resolve.c), never here. */
#include "proxy/core/cluster.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "conf/conf.h"
#include "parser/keyspec.h"
#include "parser/resp.h"
#include "parser/resp_enc.h"
#include "parser/resp_value.h"
#include "parser/slot.h"
#include "proxy/core/core.h"
#include "proxy/core/log.h"
#include "proxy/core/req.h"
#include "proxy/core/topo.h"
#include "proxy/core/upstream.h"
#include "proxy/core/util.h"

/* Periodic refresh of a healthy map: failovers and resharding done by an
 * operator show up within this time even without a MOVED. */
#define CLUSTER_REFRESH_MS 2000

/* Soonest refresh after a trigger (MOVED, lost connection): bounds the
 * CLUSTER SLOTS traffic of a redirection storm. */
#define CLUSTER_REFRESH_MIN_MS 100

/* Redirections followed for one request before the error is passed on:
 * a map in flux settles in one or two; more means a loop. */
#define CLUSTER_MAX_REDIRECTS 5

static void cluster_on_down(struct upstream *up);
static int cluster_on_error(struct upstream *up, struct req *req,
                            const char *frame, size_t len);

/* Shared connections: redirections followed, a lost one refreshes the
 * map. */
static const struct upstream_ops cluster_shared_ops = {
    .error = cluster_on_error,
    .down = cluster_on_down,
};

/* A seed's connection, asked for the map: closed once it answered. */
static void cluster_on_seed_idle(struct upstream *up)
{
    if (queue_empty(&up->inflight)) {
        upstream_destroy(up, NULL);
    }
}

static const struct upstream_ops cluster_seed_ops = {
    .idle = cluster_on_seed_idle,
};

/* A shared upstream of `n` in `proto`, with `flags` (UPSTREAM_*). */
static struct upstream *cluster_shared_new(struct cluster *cl, struct node *n,
                                           int proto, unsigned flags)
{
    struct upstream *up = upstream_new(cl->core, n->host, n->port, n, proto,
                                       flags, &cluster_shared_ops);

    up->ctx = cl;
    up->dlog = &n->outage_dlog; /* one outage log for the node's connections */
    return up;
}

/* ---------------- Nodes ---------------- */

static struct node *cluster_find(struct cluster *cl, const char *host,
                                 size_t hlen, int port)
{
    struct queue *q;

    for (q = queue_head(&cl->nodes); q != &cl->nodes; q = q->next) {
        struct node *n = container_of(q, struct node, link);
        if (n->port == port && strlen(n->host) == hlen &&
            memcmp(n->host, host, hlen) == 0) {
            return n;
        }
    }
    return NULL;
}

/* The node host:port, created (and connecting: its connections resolve a
 * name themselves) when new. NULL for a host or port out of bounds. */
static struct node *cluster_node_get(struct cluster *cl, const char *host,
                                     size_t hlen, int port)
{
    struct node *n = cluster_find(cl, host, hlen, port);
    unsigned i;

    if (n != NULL) {
        return n;
    }
    if (hlen == 0 || hlen >= sizeof(n->host) || port <= 0 || port > 65535) {
        return NULL;
    }
    n = px_calloc(1, sizeof(*n));
    memcpy(n->host, host, hlen);
    n->host[hlen] = '\0';
    n->port = port;
    snprintf(n->name, sizeof(n->name), "%s:%d", n->host, port);
    queue_init(&n->idle);
    queue_init(&n->held);
    n->cl = cl;
    n->npool = cl->core->conf->upstream_pool;
    n->pool = px_calloc(n->npool, sizeof(*n->pool));
    for (i = 0; i < n->npool; i++) {
        n->pool[i] = cluster_shared_new(cl, n, RESP_PROTO2, 0);
    }
    if (cl->core->conf->limiter_password != NULL) {
        /* The limiter logs in as its own user, which alone may touch
         * limiter keys: its calls never share a client's connection. */
        n->lpool = px_calloc(n->npool, sizeof(*n->lpool));
        for (i = 0; i < n->npool; i++) {
            n->lpool[i] =
                cluster_shared_new(cl, n, RESP_PROTO2, UPSTREAM_LIMITER);
        }
    }
    queue_insert_tail(&cl->nodes, &n->link);
    cl->nnodes++;
    if (cl->mode == CLUSTER_MODE_CLUSTER) {
        log_info("node %s: added", n->name);
    }
    return n;
}

/* Closes a node's connections (owed requests fail) and frees it. */
static void cluster_node_drop(struct cluster *cl, struct node *n,
                              const char *why)
{
    unsigned i;

    for (i = 0; i < CLUSTER_SLOTS; i++) {
        if (cl->slot[i] == n) {
            cl->slot[i] = NULL;
        }
    }
    while (!queue_empty(&n->idle)) {
        struct upstream *up =
            container_of(queue_head(&n->idle), struct upstream, idle_link);
        upstream_destroy(up, why); /* unlinks it, counts it out */
    }
    while (!queue_empty(&n->held)) {
        /* Their clients keep them until their state ends; nobody counts
         * them any more. */
        cluster_private_unhold(
            container_of(queue_head(&n->held), struct upstream, held_link));
    }
    for (i = 0; i < n->npool; i++) {
        n->pool[i]->node = NULL;
        upstream_destroy(n->pool[i], why);
        if (n->pool3 != NULL) {
            n->pool3[i]->node = NULL;
            upstream_destroy(n->pool3[i], why);
        }
        if (n->lpool != NULL) {
            n->lpool[i]->node = NULL;
            upstream_destroy(n->lpool[i], why);
        }
    }
    if (n->lim != NULL) {
        n->lim->node = NULL;
        upstream_destroy(n->lim, why);
    }
    queue_remove(&n->link);
    cl->nnodes--;
    px_free(n->pool);
    px_free(n->pool3);
    px_free(n->lpool);
    px_free(n);
}

struct upstream *cluster_upstream(struct node *node, uint64_t lane)
{
    if (lane == CLUSTER_LIMITER_LANE && node->lpool == NULL) {
        if (node->lim == NULL) {
            node->lim = cluster_shared_new(node->cl, node, RESP_PROTO2, 0);
        }
        return node->lim;
    }
    return node->pool[lane % node->npool];
}

struct upstream *cluster_upstream_proto(struct node *node, uint64_t lane,
                                        int proto)
{
    unsigned i;

    if (proto != RESP_PROTO3) {
        return cluster_upstream(node, lane);
    }
    if (node->pool3 == NULL) {
        log_info("node %s: opening RESP3 connections", node->name);
        node->pool3 = px_calloc(node->npool, sizeof(*node->pool3));
        for (i = 0; i < node->npool; i++) {
            node->pool3[i] = cluster_shared_new(node->cl, node, RESP_PROTO3, 0);
        }
    }
    return node->pool3[lane % node->npool];
}

struct upstream *cluster_limiter_upstream(struct node *node, uint64_t lane)
{
    return node->lpool != NULL ? node->lpool[lane % node->npool]
                               : cluster_upstream(node, lane);
}

/* The shared connection `req` goes on at `node`. */
static struct upstream *cluster_upstream_req(struct node *node,
                                             const struct req *req)
{
    return req->limiter ? cluster_limiter_upstream(node, req->lane)
                        : cluster_upstream_proto(node, req->lane, req->proto);
}

struct node *cluster_node_by_name(struct cluster *cl, const char *name)
{
    struct queue *q;

    for (q = queue_head(&cl->nodes); q != &cl->nodes; q = q->next) {
        struct node *n = container_of(q, struct node, link);
        if (strcmp(n->name, name) == 0) {
            return n;
        }
    }
    return NULL;
}

void cluster_send(struct cluster *cl, struct node *n, struct req *req)
{
    PX_UNUSED(cl);
    if (n == NULL) {
        req_reply_error(req, "CLUSTERDOWN Hash slot not served");
        return;
    }
    upstream_send(cluster_upstream_req(n, req), req);
}

void cluster_send_key(struct cluster *cl, const char *key, size_t klen,
                      struct req *req)
{
    cluster_send(cl, cluster_node_for_slot(cl, slot_for_key(key, klen)), req);
}

int cluster_upstream_unstalled(const struct node *node, int proto)
{
    struct upstream **pool = proto == RESP_PROTO3 ? node->pool3 : node->pool;
    uint64_t now = core_now_ms(node->cl->core);
    int moving = -1;
    unsigned i;

    for (i = 0; pool != NULL && i < node->npool; i++) {
        if (!upstream_is_ready(pool[i])) {
            continue;
        }
        if (queue_empty(&pool[i]->inflight)) {
            return (int)i; /* idle: best */
        }
        if (moving < 0 && !upstream_is_stalled(pool[i], now)) {
            moving = (int)i;
        }
    }
    return moving;
}

struct node *cluster_node_for_slot(struct cluster *cl, unsigned slot)
{
    if (cl->mode != CLUSTER_MODE_CLUSTER) {
        return cl->single;
    }
    return slot < CLUSTER_SLOTS ? cl->slot[slot] : NULL;
}

struct node *cluster_any_node(struct cluster *cl)
{
    unsigned i, start;

    if (cl->mode != CLUSTER_MODE_CLUSTER) {
        return cl->single;
    }
    /* Rotate over the slots so keyless commands spread over masters. */
    start = (cl->next_ask++ * 5471u) % CLUSTER_SLOTS;
    for (i = 0; i < CLUSTER_SLOTS; i++) {
        struct node *n = cl->slot[(start + i) % CLUSTER_SLOTS];
        if (n != NULL) {
            return n;
        }
    }
    return NULL;
}

/* An upstream of some node that is connected, for control requests. */
static struct upstream *cluster_pick_control(struct cluster *cl)
{
    struct upstream *fallback = NULL;
    struct queue *q;
    unsigned k = 0, skip;

    if (cl->nnodes == 0) {
        return NULL;
    }
    /* Start at a different node each time, so one sick node that still
     * accepts connections cannot keep the map stale. */
    skip = cl->next_ask++ % cl->nnodes;
    for (q = queue_head(&cl->nodes); q != &cl->nodes; q = q->next, k++) {
        struct node *n = container_of(q, struct node, link);
        if (k < skip) {
            continue;
        }
        if (upstream_is_ready(n->pool[0])) {
            return n->pool[0];
        }
        if (fallback == NULL && upstream_is_usable(n->pool[0])) {
            fallback = n->pool[0];
        }
    }
    for (q = queue_head(&cl->nodes); q != &cl->nodes; q = q->next) {
        struct node *n = container_of(q, struct node, link);
        if (upstream_is_ready(n->pool[0])) {
            return n->pool[0];
        }
        if (fallback == NULL && upstream_is_usable(n->pool[0])) {
            fallback = n->pool[0];
        }
    }
    return fallback;
}

/* ---------------- Held requests ---------------- */

int cluster_ready(struct cluster *cl)
{
    switch (cl->mode) {
    case CLUSTER_MODE_CLUSTER:
        return cl->has_map && cl->keys != NULL;
    case CLUSTER_MODE_SENTINEL:
        return cl->single != NULL;
    default:
        return 1;
    }
}

const struct keyspec *cluster_keyspec(struct cluster *cl)
{
    return cl->keys;
}

void cluster_hold(struct cluster *cl, struct req *req, req_resume_fn *resume)
{
    req->sent_ms = core_now_ms(cl->core);
    req_park(&cl->waiting, req, resume, NULL);
}

/* Lets every held request go on where it stopped (the map arrived), or
 * fails them. */
static void cluster_release(struct cluster *cl, const char *fail_why)
{
    struct queue held;

    queue_init(&held);
    /* Move the list first: a request that goes on may be held again. */
    while (!queue_empty(&cl->waiting)) {
        struct queue *q = queue_head(&cl->waiting);
        queue_remove(q);
        queue_insert_tail(&held, q);
    }
    while (!queue_empty(&held)) {
        struct req *req = container_of(queue_head(&held), struct req, unode);
        queue_remove(&req->unode);
        if (req->on_reply == NULL) {
            req_free(req); /* its client left while it waited */
        } else if (fail_why != NULL) {
            req_reply_error(req, "%s", fail_why);
        } else {
            req_resume(req); /* where its owner held it */
        }
    }
}

static void cluster_expire_held(struct cluster *cl, uint64_t now_ms)
{
    const struct conf *conf = cl->core->conf;
    unsigned timeout = cl->mode == CLUSTER_MODE_CLUSTER
                           ? conf->command_timeout_ms
                           : conf->connect_timeout_ms;
    char why[256];

    if (queue_empty(&cl->waiting) || timeout == 0) {
        return;
    }
    {
        struct req *req =
            container_of(queue_head(&cl->waiting), struct req, unode);
        if (now_ms - req->sent_ms <= timeout) {
            return;
        }
    }
    if (cl->mode !=
        CLUSTER_MODE_CLUSTER) { /* sentinel mode: no master named yet */
        snprintf(why, sizeof(why), "upstream master '%s' unavailable: %s",
                 conf->sentinel.master,
                 cl->last_err[0] ? cl->last_err : "no sentinel answered yet");
    } else {
        snprintf(why, sizeof(why),
                 "CLUSTERDOWN no slot map from the cluster yet (%s)",
                 cl->last_err[0] ? cl->last_err : "no node answered");
    }
    /* Fail the whole batch: they all waited for the same thing. */
    cluster_release(cl, why);
}

/* ---------------- Slot map ---------------- */

static void cluster_refresh_soon(struct cluster *cl)
{
    uint64_t due = cl->last_refresh_ms + CLUSTER_REFRESH_MIN_MS;

    if (due < cl->refresh_after_ms) {
        cl->refresh_after_ms = due;
    }
}

/* Applies one CLUSTER SLOTS range entry. 0, or -1 when malformed. */
static int cluster_apply_range(struct cluster *cl, const struct resp_value *r,
                               const char *asked, struct node **map)
{
    struct node *n;
    const char *host;
    size_t hlen;
    long long lo, hi, k;
    int port;

    if (r->type != '*' || r->n < 3 || r->elem[0].type != ':' ||
        r->elem[1].type != ':') {
        return -1;
    }
    lo = r->elem[0].integer;
    hi = r->elem[1].integer;
    if (lo < 0 || hi >= CLUSTER_SLOTS || lo > hi) {
        return -1;
    }
    switch (topo_endpoint(&r->elem[2], asked, &host, &hlen, &port)) {
    case TOPO_ENDPOINT_BAD:
        return -1;
    case TOPO_ENDPOINT_UNKNOWN:
        cluster_refresh_soon(cl); /* a later map may name it */
        return 0;
    default:
        break;
    }
    n = cluster_node_get(cl, host, hlen, port);
    if (n == NULL) {
        return 0; /* a name too long: its slots stay uncovered */
    }
    n->gen = cl->gen + 1;
    for (k = lo; k <= hi; k++) {
        map[k] = n;
    }
    return 0;
}

static void cluster_on_slots(struct req *req, const char *frame, size_t len)
{
    struct cluster *cl = req->ctx;
    struct node **map;
    struct resp_value v;
    struct queue *q;
    size_t used, k;
    int bad = 0;

    cl->refreshing = 0;
    if (resp_value_parse(frame, len, &v, &used) != RESP_OK) {
        snprintf(cl->last_err, sizeof(cl->last_err), "bad CLUSTER SLOTS");
        cluster_refresh_soon(cl);
        return;
    }
    if (v.type != '*' || v.n == 0) {
        snprintf(cl->last_err, sizeof(cl->last_err), "CLUSTER SLOTS: %.*s",
                 (int)(v.len > 120 ? 120 : v.len), v.str ? v.str : "empty");
        downlog_tell(&cl->refresh_dlog,
                     downlog_fail(&cl->refresh_dlog, core_now_ms(cl->core)),
                     core_now_ms(cl->core), "cluster", "refresh", cl->last_err);
        resp_value_free(&v);
        cluster_refresh_soon(cl);
        return;
    }
    map = px_calloc(CLUSTER_SLOTS, sizeof(*map));
    for (k = 0; k < v.n && !bad; k++) {
        bad = cluster_apply_range(cl, &v.elem[k], cl->asked_host, map) != 0;
    }
    resp_value_free(&v);
    if (bad) {
        px_free(map);
        snprintf(cl->last_err, sizeof(cl->last_err),
                 "malformed CLUSTER SLOTS reply");
        cluster_refresh_soon(cl);
        return;
    }
    memcpy(cl->slot, map, sizeof(cl->slot));
    px_free(map);
    cl->gen++;
    cl->last_err[0] = '\0';
    if (cl->refresh_dlog.down) {
        downlog_tell(&cl->refresh_dlog, downlog_ok(&cl->refresh_dlog),
                     core_now_ms(cl->core), "cluster", "refresh", NULL);
    }
    /* Nodes the map no longer names (a master that became a replica or
     * left) go (single mode's node is a seed, and has no map). */
    for (q = queue_head(&cl->nodes); q != &cl->nodes;) {
        struct node *n = container_of(q, struct node, link);
        q = q->next;
        if (n->gen != cl->gen && !n->seed) {
            log_info("node %s: no longer serves slots, closing", n->name);
            cluster_node_drop(cl, n, "connection closed: node left the map");
        }
    }
    if (!cl->has_map) {
        log_info("cluster: slot map loaded (%u nodes)", cl->nnodes);
    }
    cl->has_map = 1;
    if (cluster_ready(cl)) {
        cluster_release(cl, NULL);
    }
}

static void cluster_on_command(struct req *req, const char *frame, size_t len)
{
    struct cluster *cl = req->ctx;

    cl->fetching_keys = 0;
    if (cl->keys != NULL) {
        return;
    }
    cl->keys = keyspec_new(frame, len);
    if (cl->keys == NULL) {
        /* An error's text, without its '-' and CRLF. */
        int err = len >= 3 && frame[0] == '-';
        snprintf(cl->last_err, sizeof(cl->last_err),
                 "COMMAND reply unusable: %.*s",
                 (int)(len - 3 * err > 135 ? 135 : len - 3 * err), frame + err);
        cluster_refresh_soon(cl);
        return;
    }
    log_info("upstream: %zu command key specs loaded", keyspec_count(cl->keys));
    if (cluster_ready(cl)) {
        cluster_release(cl, NULL);
    }
}

/* Sends a proxy-made command on `up`; its reply goes to `fn`. */
static void cluster_ask(struct cluster *cl, struct upstream *up, const char *a1,
                        const char *a2, req_reply_fn *fn)
{
    const char *argv[2] = { a1, a2 };

    snprintf(cl->asked_host, sizeof(cl->asked_host), "%s", up->host);
    upstream_send(up, req_own_argv(a2 != NULL ? 2 : 1, argv, fn, cl));
}

static void cluster_refresh(struct cluster *cl, uint64_t now_ms)
{
    struct upstream *up;

    if (cl->mode != CLUSTER_MODE_CLUSTER || cl->refreshing ||
        cl->core->shutting_down) {
        return;
    }
    up = cluster_pick_control(cl);
    if (up == NULL && now_ms < cl->seed_due_ms) {
        return; /* every seed was asked this round */
    }
    cl->last_refresh_ms = now_ms;
    cl->refresh_after_ms = now_ms + CLUSTER_REFRESH_MS;
    if (up == NULL) {
        /* No known node answers (the start, or every one is gone): ask a
         * seed, in turn, on a connection of its own; a round over them at
         * the pace of the refreshes after a failure, then one a period, so
         * seeds that are all down are not hammered. */
        int nseeds = cl->core->conf->nseeds;
        const struct conf_addr *seed =
            &cl->core->conf->seeds[cl->next_seed++ % (unsigned)nseeds];
        if (cl->next_seed % (unsigned)nseeds == 0) {
            cl->seed_due_ms = now_ms + CLUSTER_REFRESH_MS;
        }
        up = upstream_new_private(cl->core, seed->host, seed->port, RESP_PROTO2,
                                  0, &cluster_seed_ops);
        up->ctx = cl;
    }
    cl->refreshing = 1;
    cluster_ask(cl, up, "CLUSTER", "SLOTS", cluster_on_slots);
    if (cl->keys == NULL && !cl->fetching_keys) {
        cl->fetching_keys = 1;
        cluster_ask(cl, up, "COMMAND", NULL, cluster_on_command);
    }
}

/* A shared connection was lost: a failover may be under way. */
static void cluster_on_down(struct upstream *up)
{
    struct cluster *cl = up->ctx;

    if (cl->mode == CLUSTER_MODE_CLUSTER) {
        cluster_refresh_soon(cl);
    }
}

void cluster_cron(struct cluster *cl, uint64_t now_ms)
{
    struct queue *q;
    unsigned i, silent_ms;

    if (cl->mode == CLUSTER_MODE_CLUSTER && now_ms >= cl->refresh_after_ms) {
        cluster_refresh(cl, now_ms);
    }
    if (cl->mode != CLUSTER_MODE_CLUSTER && cl->single != NULL &&
        cl->keys == NULL && !cl->fetching_keys &&
        upstream_is_ready(cl->single->pool[0])) {
        cl->fetching_keys = 1;
        cluster_ask(cl, cl->single->pool[0], "COMMAND", NULL,
                    cluster_on_command);
    }
    cluster_expire_held(cl, now_ms);
    /* A shared connection is failed only when the node stays silent past
     * the time Redis itself would take to call the server busy: one
     * client's slow command (a long script, DEBUG SLEEP, CLIENT PAUSE)
     * costs the others latency, not errors. */
    silent_ms = cl->core->conf->command_timeout_ms;
    if (silent_ms > 0) {
        unsigned busy = cl->core->conf->busy_reply_threshold_ms;
        silent_ms = silent_ms > UINT_MAX - busy ? UINT_MAX : silent_ms + busy;
    }
    for (q = queue_head(&cl->nodes); q != &cl->nodes; q = q->next) {
        struct node *n = container_of(q, struct node, link);
        for (i = 0; i < n->npool; i++) {
            upstream_check_timeout(n->pool[i], now_ms, silent_ms);
            if (n->pool3 != NULL) {
                upstream_check_timeout(n->pool3[i], now_ms, silent_ms);
            }
            if (n->lpool != NULL) {
                upstream_check_timeout(n->lpool[i], now_ms, silent_ms);
            }
        }
        if (n->lim != NULL) {
            upstream_check_timeout(n->lim, now_ms, silent_ms);
        }
    }
}

/* ---------------- Redirections ---------------- */

/* The error op of shared connections: follows -MOVED and -ASK. */
static int cluster_on_error(struct upstream *up, struct req *req,
                            const char *frame, size_t len)
{
    struct cluster *cl = up->ctx;
    struct node *n;
    const char *host;
    size_t hlen;
    unsigned slot;
    int port, ask;

    if (cl->mode != CLUSTER_MODE_CLUSTER || len < 8 || req->cmd == NULL ||
        req->swallow) {
        return 0;
    }
    if (memcmp(frame, "-MOVED ", 7) == 0) {
        ask = 0;
    } else if (memcmp(frame, "-ASK ", 5) == 0) {
        ask = 1;
    } else {
        return 0;
    }
    if (req->redirects >= CLUSTER_MAX_REDIRECTS) {
        log_warn("cluster: %.*s after %u redirections, giving up",
                 (int)(len - 2), frame + 1, req->redirects);
        return 0;
    }
    if (topo_parse_redirect(frame + 1, len - 3, &slot, &host, &hlen, &port) !=
        0) {
        return 0;
    }
    if (topo_redirect_host(&host, &hlen, up->host) != 0) {
        /* "?": the node's endpoint is unknown here; the map may say. */
        cluster_refresh_soon(cl);
        req_reply_error(req, "TRYAGAIN the slot moved to a node whose "
                             "address is unknown yet; retry");
        return 1;
    }
    n = cluster_node_get(cl, host, hlen, port);
    if (n == NULL) {
        return 0;
    }
    req->redirects++;
    if (!ask) {
        cl->slot[slot] = n;
        cluster_refresh_soon(cl);
    } else {
        const char *argv[1] = { "ASKING" };
        upstream_send(cluster_upstream_req(n, req),
                      req_own_argv(1, argv, NULL, NULL));
    }
    upstream_send(cluster_upstream_req(n, req), req);
    return 1;
}

int cluster_private_redirect(struct cluster *cl, struct req *req, int in_multi,
                             const char *frame, size_t len)
{
    if (cl->mode != CLUSTER_MODE_CLUSTER || len < 8 ||
        (memcmp(frame, "-MOVED ", 7) != 0 && memcmp(frame, "-ASK ", 5) != 0)) {
        return 0;
    }
    cluster_refresh_soon(cl);
    if (in_multi) {
        req_reply_error(req, "CROSSSLOT Keys in request don't hash to the "
                             "same slot");
    } else {
        req_reply_error(req, "TRYAGAIN the slot moved while this connection "
                             "was bound to its node; retry");
    }
    return 1;
}

/* ---------------- Lifetime ---------------- */

int cluster_init(struct cluster *cl, struct core *core, const struct conf *conf)
{
    memset(cl, 0, sizeof(*cl));
    cl->core = core;
    queue_init(&cl->nodes);
    queue_init(&cl->waiting);

    if (conf->sentinel.naddrs > 0) {
        cl->mode = CLUSTER_MODE_SENTINEL;
        /* The node comes with the master's address. */
        return PX_OK;
    }
    if (conf->nseeds == 0) {
        if (conf->upstream.port == 0) {
            return PX_OK; /* embedded mode */
        }
        /* A name that does not resolve yet is retried like a node that
         * is down: cellgate starts, and says so once. */
        cl->mode = CLUSTER_MODE_SINGLE;
        cl->single =
            cluster_node_get(cl, conf->upstream.host,
                             strlen(conf->upstream.host), conf->upstream.port);
        if (cl->single == NULL) {
            log_error("upstream %s:%d: bad address", conf->upstream.host,
                      conf->upstream.port);
            return PX_ERR;
        }
        cl->single->seed = 1;
        /* Key positions, for the limiter-key guard; routing does not
         * wait for them in single mode. */
        cl->fetching_keys = 1;
        cluster_ask(cl, cl->single->pool[0], "COMMAND", NULL,
                    cluster_on_command);
        return PX_OK;
    }
    /* The seeds are asked for the map (cluster_refresh), and the map
     * makes the nodes. */
    cl->mode = CLUSTER_MODE_CLUSTER;
    cl->refresh_after_ms = 0;
    cluster_refresh(cl, core_now_ms(core));
    return PX_OK;
}

void cluster_shutdown(struct cluster *cl)
{
    cluster_release(cl, "CLUSTERDOWN proxy shutting down");
    while (!queue_empty(&cl->nodes)) {
        cluster_node_drop(
            cl, container_of(queue_head(&cl->nodes), struct node, link),
            "proxy shutting down");
    }
    cl->single = NULL;
    keyspec_free(cl->keys);
    cl->keys = NULL;
}

int cluster_single_move(struct cluster *cl, const char *host, int port,
                        const char *why)
{
    struct node *old = cl->single, *n;

    if (old != NULL && old->port == port && strcmp(old->host, host) == 0) {
        return 0;
    }
    n = cluster_node_get(cl, host, strlen(host), port);
    if (n == NULL) {
        return -1;
    }
    n->seed = 1;
    cl->single = n;
    if (old != NULL) {
        /* A client's state there (a transaction, subscriptions, a
         * blocking call) cannot follow: its connection closes. */
        while (!queue_empty(&old->held)) {
            struct upstream *up = container_of(queue_head(&old->held),
                                               struct upstream, held_link);
            cluster_private_unhold(up);
            upstream_destroy(up, why);
        }
        cluster_node_drop(cl, old, why);
    }
    cluster_release(cl, NULL);
    return 1;
}

static int cluster_cmp_name(const void *a, const void *b)
{
    const struct node *const *x = a, *const *y = b;
    return strcmp((*x)->name, (*y)->name);
}

unsigned cluster_masters(struct cluster *cl, struct node **out, unsigned max)
{
    struct node *last = NULL;
    unsigned n = 0, i, k;

    if (cl->mode != CLUSTER_MODE_CLUSTER) {
        if (cl->single != NULL && max > 0) {
            out[0] = cl->single;
        }
        return cl->single != NULL ? 1 : 0;
    }
    for (i = 0; i < CLUSTER_SLOTS; i++) {
        struct node *m = cl->slot[i];
        if (m == NULL || m == last) {
            continue;
        }
        last = m;
        for (k = 0; k < n && k < max && out[k] != m; k++) {
        }
        if (k == n) {
            if (n < max) {
                out[n] = m;
            }
            n++;
        }
    }
    qsort(out, n < max ? n : max, sizeof(*out), cluster_cmp_name);
    return n;
}
