/* Routing of one request (docs/ARCHITECTURE.md).
 *
 *   lookup -> arity -> auth -> command policy -> switch (the row's how,
 *   or its pick's):
 *     LOCAL / LIMITER -> the handler answers
 *     PRIVATE         -> private upstream (opened on demand, priv.c)
 *     FORWARD / SPLIT / FANOUT -> router_forward: the private upstream
 *                        while the client's state there decides, else the
 *                        node of its keys (split or fanned out in cluster
 *                        mode) on the client's shared upstream
 *     KILL            -> a connection lent for the call
 *
 * The shared-connection invariant: a command goes on a shared upstream only
 * if Redis answers it with exactly one reply and it leaves the connection as
 * it found it, since the next bytes on that connection are another client's.
 * The command table names what breaks it (REPLCONF is refused; SYNC and
 * PSYNC turn a private upstream into a byte tunnel; MONITOR, the subscribe
 * family, MULTI, WATCH, SCRIPT DEBUG get a private upstream), and what the
 * node's COMMAND reply says covers the rest: a "blocking" command gets a
 * private upstream for the call, a @connection command cellgate does not answer
 * itself gets one for good.
 *
 * Connection state (MULTI, WATCH, subscriptions, SELECT n, MONITOR, CLIENT
 * TRACKING...) lives on a private upstream, taken from the node's idle pool.
 * In single mode every command of that client goes there while any state is
 * left, so the client's commands keep their order. In cluster mode a command
 * for another node's keys is served over that node's shared connection,
 * except inside MULTI and WATCH (whose connection decides) and in RESP2
 * subscribed mode (which Redis restricts). priv_maybe_release()
 * returns the client to the shared path.
 *
 * In cluster mode PUBLISH and SUBSCRIBE go to the node that owns the
 * channel's slot: one publisher's messages keep their order, and PUBLISH
 * counts the subscribers cellgate holds for that channel.
 *
 * The protocol is the client's: a RESP3 client (HELLO 3) is served by the
 * nodes' RESP3 pools and its private upstream speaks RESP3 too, so replies
 * are forwarded byte for byte. RESP3 differences the router knows about:
 * - (un)subscribe commands are answered by pushes only, never by a reply
 *   (upstream_send_pushed);
 * - a RESP3 client that is only subscribed may run ordinary commands (Redis
 *   allows it): in cluster mode those whose keys live on another node than
 *   its subscriptions take the shared path instead of failing there;
 * - an unsubscribe with no subscription is answered by cellgate in both
 *   protocols, cmd_pick_unsub (Redis answers one frame per channel: on a
 *   shared connection the extra frames would be matched to other
 *   requests). */
#include "proxy/router.h"

#include <string.h>

#include "conf/cmdpolicy.h"
#include "conf/conf.h"
#include "parser/resp.h"
#include "parser/resp_enc.h"
#include "proxy/client.h"
#include "proxy/command.h"
#include "proxy/core/cluster.h"
#include "proxy/core/req.h"
#include "proxy/core/upstream.h"
#include "proxy/core/util.h"
#include "proxy/hidden.h"
#include "proxy/limiter/limiter.h"
#include "proxy/locate.h"
#include "proxy/merge.h"
#include "proxy/priv.h"
#include "proxy/priv_send.h"
#include "proxy/pubsub.h"
#include "proxy/server.h"

/* Shows at most this much of a client's command name in an error. */
#define ROUTER_NAME_SHOWN 128

/* Flags of commands that take a private connection (so do blocking
 * calls: CMD_F_BLOCKING, and CMD_F_XBLOCK with a BLOCK option). */
#define ROUTER_F_PRIVATE                                                       \
    (CMD_F_MULTI | CMD_F_WATCH | CMD_F_PUBSUB | CMD_F_STICKY | CMD_F_MONITOR)

/* The command policy (conf/cmdpolicy.h): an ordinary client may not run a
 * command that acts on the server, on other connections or on the whole
 * keyspace, since the connections it would run on are shared and the node
 * is every client's. Checked before anything else looks at the command,
 * so neither a transaction, nor a private connection, nor a command
 * cellgate answers itself gets around it; nor around hidden_admit, which
 * keeps the limiter's key names from the client. 1 when allowed; else replies,
 * and an open transaction fails at EXEC, as in Redis when a command is
 * refused while queuing. */
static int router_policy_allows(struct req *req)
{
    struct client *c = req->client;
    size_t nlen, alen = 0;
    const char *name = resp_cmd_arg(req->cmd, 0, &nlen), *arg = NULL;

    if (c->admin) {
        return 1;
    }
    if (req->cmd->argc > 1) {
        arg = resp_cmd_arg(req->cmd, 1, &alen);
    }
    if (!cmdpolicy_allows(&server.conf->commands, name, nlen, arg, alen)) {
        req_reply_error(req, "NOPERM this command is disabled in cellgate");
    } else if (hidden_admit(req)) {
        return 1; /* the limiter's key names filtered where they could show */
    }
    priv_tx_refused(c);
    return 0;
}

/* True when every command of `c` must go to its private upstream
 * (sess_needs_private). */
static int router_priv_required(const struct client *c)
{
    return sess_needs_private(
        &c->sess, cluster_mode(&server.cluster) == CLUSTER_MODE_CLUSTER,
        c->proto, c->priv->proto, queue_empty(&c->priv->inflight));
}

/* A CMD_FANOUT row's command, fanned out (merge_fanout). 0 when it is not
 * one, or goes to the one node as it is. */
static int router_fanout(struct req *req)
{
    return req->def != NULL && req->def->how == CMD_FANOUT &&
           merge_fanout(req, req->def->merge);
}

static void router_forward_resume(struct req *req);

void router_forward(struct req *req)
{
    struct client *c = req->client;
    struct upstream *up;
    struct node *n;

    if (c->priv != NULL && router_priv_required(c)) {
        if (priv_send_allowed(req)) {
            upstream_send(c->priv, req);
        }
        return;
    }
    if (!cluster_ready(&server.cluster)) {
        /* Sentinel mode before a master is known: INFO answers with the
         * proxy's own sections (sentinel_known:0); the rest waits. */
        if (cluster_mode(&server.cluster) != CLUSTER_MODE_SENTINEL ||
            !router_fanout(req)) {
            cluster_hold(&server.cluster, req, router_forward_resume);
        }
        return;
    }
    if (router_fanout(req)) {
        return;
    }
    n = locate_node(req);
    if (n == NULL) {
        return;
    }
    if (c->priv != NULL && strcmp(c->priv->name, n->name) == 0) {
        /* The private connection's node serves it there, in order with
         * what the client sent before (a blocking call, tracked reads). */
        upstream_send(c->priv, req);
        return;
    }
    if (c->sess.tracking) {
        /* Reads of a tracking client must be tracked on every node. */
        struct upstream *t = priv_tracking_upstream(c, n);
        if (t != NULL) {
            upstream_send(t, req);
            return;
        }
        if (c->priv != NULL && c->tracking_cmd != NULL) {
            /* No connection of its own to be had there: an untracked
             * read would leave its cache stale. */
            priv_refuse(req);
            return;
        }
    }
    if (cluster_mode(&server.cluster) == CLUSTER_MODE_CLUSTER &&
        req->def != NULL && (req->def->flags & CMD_F_PUBLISH)) {
        size_t len;
        const char *ch = resp_cmd_arg(req->cmd, 1, &len);
        req->filter_arg = pubsub_held_elsewhere(n->name, ch, len);
        if (req->filter_arg != 0) {
            req->filter = pubsub_publish_reply;
        }
    }
    /* A client always uses the same shared connection per node, so its
     * commands reach Redis in the order it sent them. */
    up = cluster_upstream_proto(n, req->lane, req->proto);
    if (c->nreqs == 1 && !queue_empty(&up->inflight)) {
        /* The client owes nothing else (this request is its only one in
         * its FIFO), so no order binds it to that connection: it moves
         * its lane to an idle one, or at least one that is not stalled
         * behind another client's long command, and its next commands
         * follow. It then gets what Redis would tell it (the answer, or
         * -BUSY past Redis's busy-reply-threshold) instead of waiting
         * behind someone else's script. */
        int alt = cluster_upstream_unstalled(n, req->proto);
        if (alt >= 0) {
            c->lane = (uint64_t)alt;
            req->lane = c->lane;
            up = cluster_upstream_proto(n, req->lane, req->proto);
        }
    }
    upstream_send(up, req);
}

/* SCRIPT KILL, FUNCTION KILL (CMD_KILL): on a connection lent for the
 * call, to the node (every master in cluster mode, +OK when one killed
 * something). */
static void router_kill(struct req *req)
{
    if (!cluster_has_upstream(&server.cluster)) {
        req_reply_error(req, "no upstream configured");
        return;
    }
    if (!cluster_ready(&server.cluster)) {
        cluster_hold(&server.cluster, req, router_kill); /* goes on here */
        return;
    }
    if (merge_fanout(req, req->def->merge)) {
        return; /* cluster mode: every master */
    }
    cluster_send_oneshot(&server.cluster, server.cluster.single, req);
}

/* XREAD/XREADGROUP block only when a BLOCK option precedes STREAMS. */
static int router_xread_blocks(const struct req *req)
{
    int i;

    for (i = 1; i < req->cmd->argc; i++) {
        if (resp_cmd_arg_is(req->cmd, i, "block")) {
            return 1;
        }
        if (resp_cmd_arg_is(req->cmd, i, "streams")) {
            return 0;
        }
    }
    return 0;
}

/* How a command the table does not list is handled, from what the node's
 * COMMAND reply says about it: a blocking command gets a private
 * connection for the call, a @connection command one for good (it may
 * change the connection's state), a subscription command of a newer Redis
 * one for as long as it subscribes. Everything else is forwarded. */
static unsigned router_node_flags(const struct req *req)
{
    const struct route_facts *f = &req->facts;

    if (!f->known || !f->listed) {
        return 0;
    }
    if (f->blocking) {
        return CMD_F_BLOCKING;
    }
    if (f->connection) {
        return CMD_F_STICKY;
    }
    if (f->pubsub) {
        /* PUBLISH, SPUBLISH and PUBSUB have rows: this is a subscription
         * command of a newer Redis. */
        return CMD_F_STICKY;
    }
    return 0;
}

/* A request held in router_forward until the cluster was ready goes on
 * there. It was classified before the node's key table was known, so it
 * is classified again now; a command the table does not list may then
 * turn out to need a connection of its own (a module's blocking command),
 * where it goes as router_dispatch would have sent it. */
static void router_forward_resume(struct req *req)
{
    unsigned flags;

    if (req->client->lim_owed > 0) {
        /* Its client's limiter calls held with it went on just before it
         * (the held requests go on in order) into the limiter's batch;
         * router_before_redis sent that batch before the request was
         * held, not now: send it first, so a GET after CL.THROTTLE sent
         * while the map was unknown still sees the TAT. */
        limiter_send_all(&server.limiter);
    }
    locate_classify(req);
    if (req->def == NULL && (flags = router_node_flags(req)) != 0) {
        req->blocking = (flags & CMD_F_BLOCKING) != 0;
        sess_on_command(&req->client->sess, flags);
        priv_send(req);
        return;
    }
    router_forward(req);
}

/* Read-your-writes for what the limiter caches (refusals learned from
 * Redis): `req` may write keys whose cached refusals would then be
 * stale, and Redis's invalidation of them comes on another connection,
 * maybe after the client's next CL.THROTTLE. So they are forgotten as the
 * command leaves: every key of a command that is not read-only, and
 * everything for FLUSHALL/FLUSHDB (or before COMMAND told where keys
 * are). Keys cellgate cannot locate (a bad numkeys, which Redis refuses;
 * a module's movable keys) forget nothing: dropping the whole cache for
 * them would let any client empty it, at a cost that grows with the
 * cache, with every such command; such a write reaches the cache through
 * Redis's invalidation, as another client's does. */
static void router_forget_cached(struct req *req)
{
    const struct route_facts *f = &req->facts;
    const int *keys = route_facts_keys(f);
    size_t len;
    const char *p;
    int k;

    if (!limiter_caches(&server.limiter)) {
        return;
    }
    if (!f->known || (req->def != NULL && (req->def->flags & CMD_F_FLUSH))) {
        limiter_forget(&server.limiter, NULL, 0);
        return;
    }
    if (f->listed && f->readonly) {
        return;
    }
    for (k = 0; k < f->nkeys; k++) {
        p = resp_cmd_arg(req->cmd, keys[k], &len);
        limiter_forget(&server.limiter, p, len);
    }
}

/* A client's command is about to go to Redis, on a connection of its own
 * or a shared one: a client that owes nothing leaves the limiter's lane
 * for its own; the limiter calls it sent before must be there first (a
 * part-filled batch the limiter holds goes now; on the client's lane the
 * connection keeps the order); and what the limiter cached of the keys it
 * may write is forgotten. */
static void router_before_redis(struct req *req)
{
    struct client *c = req->client;

    if (c->nreqs == 1 && c->lane == CLUSTER_LIMITER_LANE) {
        /* The client owes nothing else: it leaves the limiter's
         * connection (where its last limiter call took it) for its own
         * lane, so no reply of its waits in front of limiter calls. */
        c->lane = c->id;
        req->lane = c->lane;
    }
    if (c->lim_owed > 0) {
        limiter_send_all(&server.limiter);
    }
    router_forget_cached(req);
}

/* Sets what `req`'s reply is timed as, which also counts it as owed in
 * its client's lim_owed (a decision) or fwd_owed (a command sent to Redis)
 * until client_on_reply. Once per request: a parked request goes on where
 * it stopped, past this. */
static void router_set_lat(struct req *req, enum req_lat lat)
{
    struct client *c = req->client;

    req->lat = lat;
    if (lat == REQ_LAT_DECISION) {
        c->lim_owed++;
    } else if (lat == REQ_LAT_FORWARD) {
        c->fwd_owed++;
    }
}

/* True when a request of `c` classified `how` with `flags` goes to Redis
 * as the client sent it (through a shared or a private connection), as
 * opposed to being answered by cellgate (its own commands, the limiter's,
 * every command in embedded mode). Inside MULTI Redis queues (or refuses)
 * every command, PING and ECHO included. */
static int router_to_redis(const struct client *c, enum cmd_how how,
                           unsigned flags)
{
    if (!cluster_has_upstream(&server.cluster)) {
        return 0;
    }
    if (sess_queues(&c->sess, flags) || c->sess.tunnel) {
        return 1;
    }
    return how != CMD_LOCAL && how != CMD_LIMITER && how != CMD_REFUSE;
}

/* True when the next request of `c` (`to_redis` with `flags`, or a
 * `limiter_call`) must wait for the client's earlier requests of the other
 * kind to be answered, because they went on another connection, which
 * keeps no order with its own: a CL.THROTTLE must see the SET its client
 * sent before it, a GET that client's CL.THROTTLE. A client's limiter
 * calls share its lane (router_limiter), whose connection keeps the order
 * of its shared commands (router_before_redis sends the calls the limiter
 * holds back first); but a private connection is another one, when the
 * limiter logs in as its own user (limiter_password) its calls go on its
 * own connections, and a RESP3 client's commands go on the node's RESP3
 * connections while the limiter's calls are RESP2 ones. Only a client
 * that mixes the two in flight waits, one round trip per switch. */
static int router_order_waits(const struct client *c, int to_redis,
                              unsigned flags, int limiter_call)
{
    int apart = server.conf->limiter_password != NULL || c->priv != NULL ||
                c->proto == RESP_PROTO3;

    if (limiter_call) {
        return c->fwd_owed > 0 && apart;
    }
    return to_redis && c->lim_owed > 0 &&
           (apart || c->sess.multi || c->sess.tunnel ||
            (flags & (ROUTER_F_PRIVATE | CMD_F_BLOCKING | CMD_F_XBLOCK)));
}

int router_order_ready(const struct client *c)
{
    const struct req *req = c->order_held;
    const struct cmd_def *def = req->def;
    enum cmd_how how = def != NULL ? def->how : CMD_FORWARD;
    unsigned flags = def != NULL ? def->flags : router_node_flags(req);
    int to_redis = router_to_redis(c, how, flags);

    return !router_order_waits(c, to_redis, flags,
                               how == CMD_LIMITER && !to_redis);
}

/* A limiter command (CL.THROTTLE, LIMITER): timed as a decision and
 * counted in c->lim_owed until answered. A client that owes nothing else
 * moves to the limiter's lane, where the calls of every such client share
 * one connection per node and so few script calls; a client with
 * commands owed stays on its lane, behind them. */
static void router_limiter(struct req *req)
{
    struct client *c = req->client;

    router_set_lat(req, REQ_LAT_DECISION);
    if (c->nreqs == 1) {
        c->lane = CLUSTER_LIMITER_LANE;
        req->lane = c->lane;
    }
    req->def->proc(req);
}

/* The way `req` is served, for router_dispatch's switch: its row's `how`,
 * or what its row's `pick` says for these arguments (which may add
 * CMD_F_STICKY to *flags). A blocking call, and a command the table does
 * not list whose flags (from the node's COMMAND reply) take a private
 * connection, go there. Sets req->blocking. */
static enum cmd_how router_way(struct req *req, const struct cmd_def *def,
                               unsigned *flags)
{
    struct client *c = req->client;
    enum cmd_how way = def != NULL ? def->how : CMD_FORWARD;

    if (def != NULL && def->pick != NULL) {
        struct cmd_ctx ctx = {
            .has_upstream = cluster_has_upstream(&server.cluster),
            .has_priv = c->priv != NULL,
            .subscribed = sess_subscribed(&c->sess),
            .tracking = c->sess.tracking,
            .listed = req->facts.listed,
        };
        way = def->pick(req->cmd, &ctx, flags);
    }
    req->blocking = (*flags & CMD_F_BLOCKING) ||
                    ((*flags & CMD_F_XBLOCK) && router_xread_blocks(req));
    if (way == CMD_FORWARD && ((*flags & ROUTER_F_PRIVATE) || req->blocking)) {
        way = CMD_PRIVATE;
    }
    return way;
}

static enum cmd_how router_class(const struct req *req, unsigned *flags);
static void router_order_resume(struct req *req);
static void router_serve(struct req *req, enum cmd_how how, unsigned flags,
                         int to_redis);

void router_dispatch(struct req *req)
{
    struct client *c = req->client;
    const struct cmd_def *top;
    size_t nlen;
    const char *name = resp_cmd_arg(req->cmd, 0, &nlen);
    enum cmd_how how;
    unsigned flags;
    int to_redis;

    top = cmd_lookup(name, nlen);
    req->def = top;
    if (top != NULL && !cmd_arity_ok(top, req->cmd->argc)) {
        req_reply_error(req, "wrong number of arguments for '%s' command",
                        top->name);
        return;
    }
    if (!c->authed && (top == NULL || !(top->flags & CMD_F_NOAUTH))) {
        req_reply_error(req, "NOAUTH Authentication required.");
        return;
    }
    if (!router_policy_allows(req)) {
        return;
    }
    /* What the node's key table says of it, once: everything below reads
     * req->facts. Before the table is known (a request about to be held
     * until the cluster is ready) it is classified again when it resumes.
     * The limiter's commands and refusals go to Redis only inside a
     * transaction or a tunnel, so elsewhere CL.THROTTLE and LIMITER pay no
     * key-table lookup. */
    if (top == NULL || (top->how != CMD_LIMITER && top->how != CMD_REFUSE) ||
        sess_in_multi(&c->sess) || c->sess.tunnel) {
        locate_classify(req);
    }
    how = router_class(req, &flags);
    if (flags & (CMD_F_PUBSUB | CMD_F_UNSUB)) {
        /* Subscription confirmations reach the client even with CLIENT
         * REPLY OFF, as in Redis (they are pushes, not replies). */
        req->silent = 0;
    }
    to_redis = router_to_redis(c, how, flags);
    if (router_order_waits(c, to_redis, flags,
                           how == CMD_LIMITER && !to_redis)) {
        /* Goes on at router_serve once the calls it must follow are
         * answered (client_process calls its resume). */
        c->order_held = req;
        req->resume = router_order_resume;
        return;
    }
    router_serve(req, how, flags, to_redis);
}

/* The class of `req`, whose row (or NULL) is req->def: what the reply
 * order and the latency count by is its own row's (its subcommand's row,
 * if any, says the way later); *flags gets the row's flags, or what the
 * node's key table says of a command it does not list. */
static enum cmd_how router_class(const struct req *req, unsigned *flags)
{
    const struct cmd_def *top = req->def;

    *flags = top != NULL ? top->flags : router_node_flags(req);
    return top != NULL ? top->how : CMD_FORWARD;
}

/* A request held for its client's order (c->order_held) goes on past the
 * checks it passed: it is not looked up, authorized or counted again. */
static void router_order_resume(struct req *req)
{
    unsigned flags;
    enum cmd_how how = router_class(req, &flags);

    router_serve(req, how, flags, router_to_redis(req->client, how, flags));
}

/* Serves `req`, of class `how` with `flags`, once every check passed and
 * its order allows: counted, then to Redis (its transaction, a tunnel,
 * a private or a shared connection) or to the handler of its row. */
static void router_serve(struct req *req, enum cmd_how how, unsigned flags,
                         int to_redis)
{
    struct client *c = req->client;
    const struct cmd_def *top = req->def, *def;
    enum cmd_how way;

    if (to_redis) {
        router_set_lat(req, REQ_LAT_FORWARD);
        router_before_redis(req);
    }
    if (sess_queues(&c->sess, flags)) {
        /* Inside MULTI Redis queues (or refuses) every command, PING and
         * ECHO included: the transaction's connection decides. */
        sess_on_queued(&c->sess, flags);
        priv_send(req);
        return;
    }
    if (c->sess.tunnel || how == CMD_TUNNEL) {
        /* A replica's link (redis-cli --replica, the test suite's
         * replication-stream helper): a byte tunnel of its own. */
        sess_on_tunnel(&c->sess);
        priv_send(req);
        return;
    }
    def = cmd_sub(top, req->cmd);
    req->def = def;
    if (def != top && !cmd_arity_ok(def, req->cmd->argc)) {
        req_reply_error(req, "wrong number of arguments for '%s' command",
                        def->name);
        return;
    }
    way = router_way(req, def, &flags);
    switch (way) {
    case CMD_REFUSE:
        req_reply_error(req,
                        "'%s' is not available through cellgate: it would "
                        "take over a connection other clients share",
                        def->name);
        return;
    case CMD_LIMITER:
        router_limiter(req);
        return;
    case CMD_LOCAL:
        def->proc(req); /* answers; may send on the private connection */
        return;
    default:
        break;
    }
    sess_on_command(&c->sess, flags);
    switch (way) {
    case CMD_PRIVATE:
    case CMD_TUNNEL:
        priv_send(req);
        break;
    case CMD_KILL:
        router_kill(req);
        break;
    case CMD_FORWARD:
    case CMD_SPLIT:  /* split by locate_node when its keys span slots */
    case CMD_FANOUT: /* fanned out by router_forward */
    default:
        router_forward(req);
        break;
    }
}
