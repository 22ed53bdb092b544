/* Routing of one request (docs/ARCHITECTURE.md).
 *
 *   lookup -> arity -> auth -> command policy -> local proc?
 *                                                    |no
 *        client has a private upstream, or the command needs one?
 *               |yes                              |no
 *        private upstream (opened on demand)   shared upstream of the client
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
 * subscribed mode (which Redis restricts). client_priv_maybe_release()
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
 * - an unsubscribe with no subscription is answered here in both protocols
 *   (Redis answers one frame per channel: on a shared connection the extra
 *   frames would be matched to other requests). */
#include "proxy/router.h"

#include <ctype.h>
#include <string.h>

#include "conf/cmdpolicy.h"
#include "conf/conf.h"
#include "parser/keyspec.h"
#include "parser/resp.h"
#include "parser/resp_enc.h"
#include "parser/slot.h"
#include "proxy/client.h"
#include "proxy/command.h"
#include "proxy/core/cluster.h"
#include "proxy/core/req.h"
#include "proxy/core/route.h"
#include "proxy/core/upstream.h"
#include "proxy/core/util.h"
#include "proxy/hidden.h"
#include "proxy/limiter/limiter.h"
#include "proxy/merge.h"
#include "proxy/pubsub.h"
#include "proxy/server.h"

/* Shows at most this much of a client's command name in an error. */
#define ROUTER_NAME_SHOWN 128

/* Flags of commands that take a private connection (so do blocking
 * calls: CMD_F_BLOCKING, and CMD_F_XBLOCK with a BLOCK option). */
#define ROUTER_F_PRIVATE                                                       \
    (CMD_F_MULTI | CMD_F_WATCH | CMD_F_PUBSUB | CMD_F_STICKY | CMD_F_MONITOR)

/* Key indexes kept on the stack; longer commands (a big MGET) allocate. */
#define ROUTER_STACK_KEYS 32

/* What the routing decision needs to know about the proxy and `req`'s
 * client. */
static void router_route_in(const struct req *req, struct route_in *in)
{
    in->cluster = server.cluster.enabled;
    in->has_upstream = server.cluster.enabled || server.cluster.single != NULL;
    in->keys = cluster_keyspec(&server.cluster);
    in->key_prefix = server.conf->key_prefix;
    in->admin = req->client->admin;
}

/* Limiter keys belong to the proxy: a client that is not admin may not
 * touch keys under the key prefix with ordinary commands (a stray DEL or
 * SET would reset or forge limits). */
static void router_reply_noperm(struct req *req)
{
    req_reply_error(req, LIMITER_ERR_PREFIX, server.conf->key_prefix);
}

/* Keys of several slots: split the command by slot when it is one that
 * splits, else Redis's own error. May complete `req`. */
static void router_cross_slot(struct req *req, const int *keys, int nkeys)
{
    unsigned *slots = px_calloc((size_t)nkeys, sizeof(*slots));
    size_t len;
    const char *p;
    int k;

    for (k = 0; k < nkeys; k++) {
        p = resp_cmd_arg(req->cmd, keys[k], &len);
        slots[k] = slot_for_key(p, len);
    }
    /* Inside a transaction the parts could not be queued atomically:
     * refuse like Redis. */
    if (req->client->multi || !merge_split(req, keys, slots, nkeys)) {
        req_reply_error(req, "CROSSSLOT Keys in request don't hash to the same "
                             "slot");
    }
    px_free(slots);
}

/* The node that must serve `req`, from the routing decision. Completes
 * `req` with an error and returns NULL when there is none (no upstream,
 * keys in several slots, an uncovered slot); a command that splits by
 * slot is taken by merge_split (NULL too). */
static struct node *router_node(struct req *req)
{
    int stack[ROUTER_STACK_KEYS], *keys = stack;
    struct route_in in;
    struct route r;
    struct node *n = NULL;
    size_t len;
    const char *p;

    if (req->cmd->argc > ROUTER_STACK_KEYS) {
        keys = px_malloc((size_t)req->cmd->argc * sizeof(*keys));
    }
    router_route_in(req, &in);
    switch (route_decide(&in, req->cmd, keys, &r)) {
    case ROUTE_NO_UPSTREAM:
        req_reply_error(req, "no upstream configured");
        break;
    case ROUTE_SINGLE:
        n = server.cluster.single;
        break;
    case ROUTE_NOPERM:
        router_reply_noperm(req);
        break;
    case ROUTE_UNLOCATABLE:
        p = resp_cmd_arg(req->cmd, 0, &len);
        req_reply_error(
            req,
            "cellgate cannot locate the keys of command "
            "'%.*s' in cluster mode",
            (int)(len > ROUTER_NAME_SHOWN ? ROUTER_NAME_SHOWN : len), p);
        break;
    case ROUTE_CROSSSLOT:
        router_cross_slot(req, keys, r.nkeys);
        break;
    case ROUTE_ANY:
        n = cluster_any_node(&server.cluster);
        if (n == NULL) {
            req_reply_error(req, "CLUSTERDOWN Hash slot not served");
        }
        break;
    case ROUTE_SLOT:
        n = cluster_node_for_slot(&server.cluster, r.slot);
        if (n == NULL) {
            req_reply_error(req, "CLUSTERDOWN Hash slot not served");
        }
        break;
    }
    if (keys != stack) {
        px_free(keys);
    }
    return n;
}

/* Cluster mode: a transaction goes to the node of its first command's keys,
 * which MULTI itself does not have, so MULTI is answered here and sent
 * later, just before that first command. Returns 1 when it took `req`. */
static int router_defer_multi(struct req *req)
{
    static const char reply_ok[] = "+OK\r\n";
    static const char reply_empty[] = "*0\r\n";
    struct client *c = req->client;
    unsigned flags = req->def != NULL ? req->def->flags : 0;

    if (!server.cluster.enabled || c->priv != NULL) {
        return 0;
    }
    if ((flags & CMD_F_MULTI) && c->multi_deferred) {
        req_reply_error(req, "ERR MULTI calls can not be nested");
        return 1;
    }
    if (flags & CMD_F_MULTI) {
        c->multi_deferred = 1;
        req_reply(req, reply_ok, sizeof(reply_ok) - 1);
        return 1;
    }
    if (c->multi_deferred && (flags & CMD_F_TXEND)) {
        /* Nothing reached a node: EXEC runs an empty transaction, or
         * aborts when a command was refused here, as Redis would. */
        int failed = c->tx_failed;
        c->multi_deferred = 0;
        c->tx_failed = 0;
        if (strcmp(req->def->name, "discard") == 0) {
            req_reply(req, reply_ok, sizeof(reply_ok) - 1);
        } else if (failed) {
            req_reply_error(req, "EXECABORT Transaction discarded because "
                                 "of previous errors.");
        } else {
            req_reply(req, reply_empty, sizeof(reply_empty) - 1);
        }
        return 1;
    }
    return 0;
}

/* Sends a one-word command of the proxy's own on the client's private
 * connection; its reply is dropped. */
static void router_send_swallowed(struct client *c, const char *word)
{
    const char *argv[1] = { word };

    upstream_send(c->priv, req_own_argv(1, argv, NULL, NULL));
}

/* Sends the MULTI a deferred transaction owes, ahead of its first command.
 * Its +OK was already given to the client, so the reply is dropped. */
static void router_send_deferred_multi(struct client *c)
{
    router_send_swallowed(c, "MULTI");
    c->multi_deferred = 0;
}

/* The key guard for a command bound for the client's private connection
 * (router_node applies it on the way to shared ones). 1 when allowed; else
 * replies. Inside a transaction already open upstream, a refused command
 * must also make EXEC abort, as Redis does for a command it refuses while
 * queuing: so the proxy queues a command Redis itself refuses (GET without
 * a key), whose error it drops; EXEC then answers EXECABORT. */
static int router_priv_allowed(struct req *req)
{
    int stack[ROUTER_STACK_KEYS], *keys = stack, ok;
    struct client *c = req->client;
    struct route_in in;
    struct route r;

    if (req->cmd->argc > ROUTER_STACK_KEYS) {
        keys = px_malloc((size_t)req->cmd->argc * sizeof(*keys));
    }
    router_route_in(req, &in);
    ok = route_decide(&in, req->cmd, keys, &r) != ROUTE_NOPERM;
    if (keys != stack) {
        px_free(keys);
    }
    if (!ok) {
        router_reply_noperm(req);
        if (c->multi) {
            router_send_swallowed(c, "GET");
        }
    }
    return ok;
}

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
    if (c->multi && c->priv != NULL) {
        router_send_swallowed(c, "GET"); /* see router_priv_allowed */
    } else if (c->multi) {
        c->tx_failed = 1; /* the deferred MULTI's EXEC aborts */
    }
    return 0;
}

void router_send_private_to(struct req *req, struct node *n)
{
    struct client *c = req->client;

    if (router_defer_multi(req)) {
        return;
    }
    if (c->priv == NULL) {
        if (n == NULL && !cluster_ready(&server.cluster)) {
            cluster_hold(&server.cluster, req);
            return;
        }
        if (n == NULL) {
            n = router_node(req);
        }
        if (n == NULL) {
            /* Refused here (CROSSSLOT, slot not served): Redis would
             * flag the transaction, so EXEC must abort. */
            c->tx_failed = c->multi_deferred;
            return;
        }
        c->priv = client_priv_take(c, n);
        if (c->priv == NULL) {
            if (c->multi_deferred) {
                /* Refused while queuing: EXEC must abort. */
                c->tx_failed = 1;
            } else {
                /* What this command began never reached Redis. */
                client_clear_state_flags(c);
                client_aux_release(c);
            }
            client_priv_refuse(req);
            return;
        }
        if (c->multi_deferred) {
            router_send_deferred_multi(c);
            if (c->tx_failed) {
                /* A command was refused before MULTI reached the node:
                 * the transaction must fail at EXEC there too. */
                router_send_swallowed(c, "GET");
                c->tx_failed = 0;
            }
        }
    } else if (!router_priv_allowed(req)) {
        return;
    }
    if (c->tunnel) {
        upstream_send_tunnel(c->priv, req);
        return;
    }
    if (c->tracking) {
        c->priv->tracked = 1;
    }
    if (c->priv->proto == RESP_PROTO3 && !c->multi && req->def != NULL &&
        (req->def->flags & (CMD_F_PUBSUB | CMD_F_UNSUB))) {
        /* Answered by pushes only, which are relayed as they come; the
         * connection stays until the first of them tells the count. */
        c->push_wait = 1;
        upstream_send_pushed(c->priv, req);
        return;
    }
    upstream_send(c->priv, req);
}

void router_send_private(struct req *req)
{
    router_send_private_to(req, NULL);
}

/* True when every command of `c` must go to its private upstream: its
 * state there decides (a transaction, WATCH, RESP2 subscribed mode, a
 * selected db, MONITOR, the Lua debugger), or single mode, where the
 * private upstream is on the one node and keeps the client's order. The
 * other case, a RESP3 subscriber that owes nothing there, uses the shared
 * path too. */
static int router_priv_required(const struct client *c)
{
    int resp3_subscriber_only = c->priv->proto == RESP_PROTO3 &&
                                (c->subs > 0 || c->ssubs > 0 || c->push_wait) &&
                                !c->multi && !c->multi_deferred &&
                                !c->watching && c->db == 0 && !c->sticky &&
                                !c->monitor && !c->tracking && !c->no_touch &&
                                queue_empty(&c->priv->inflight);

    if (resp3_subscriber_only) {
        return 0;
    }
    if (!server.cluster.enabled) {
        return 1;
    }
    return c->multi || c->multi_deferred || c->watching || c->db != 0 ||
           c->sticky || c->monitor ||
           ((c->subs > 0 || c->ssubs > 0) && c->proto == RESP_PROTO2);
}

void router_forward(struct req *req)
{
    struct client *c = req->client;
    struct upstream *up;
    struct node *n;

    if (c->priv != NULL && router_priv_required(c)) {
        if (router_priv_allowed(req)) {
            upstream_send(c->priv, req);
        }
        return;
    }
    if (!cluster_ready(&server.cluster)) {
        /* Sentinel mode before a master is known: INFO answers with the
         * proxy's own sections (sentinel_known:0); the rest waits. */
        if (!server.cluster.sentinel || !merge_fanout(req)) {
            cluster_hold(&server.cluster, req);
        }
        return;
    }
    if (merge_fanout(req)) {
        return;
    }
    n = router_node(req);
    if (n == NULL) {
        return;
    }
    if (c->priv != NULL && strcmp(c->priv->name, n->name) == 0) {
        /* The private connection's node serves it there, in order with
         * what the client sent before (a blocking call, tracked reads). */
        upstream_send(c->priv, req);
        return;
    }
    if (c->tracking) {
        /* Reads of a tracking client must be tracked on every node. */
        struct upstream *t = client_tracking_upstream(c, n);
        if (t != NULL) {
            upstream_send(t, req);
            return;
        }
        if (c->priv != NULL && c->tracking_cmd != NULL) {
            /* No connection of its own to be had there: an untracked
             * read would leave its cache stale. */
            client_priv_refuse(req);
            return;
        }
    }
    if (server.cluster.enabled && req->cmd->argc == 3 &&
        resp_cmd_arg_is(req->cmd, 0, "publish")) {
        size_t len;
        const char *ch = resp_cmd_arg(req->cmd, 1, &len);
        req->add_int = pubsub_held_elsewhere(n->name, ch, len);
    }
    /* A client always uses the same shared connection per node, so its
     * commands reach Redis in the order it sent them. */
    up = cluster_upstream_proto(n, req->cid, req->proto);
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
            req->cid = c->lane;
            up = cluster_upstream_proto(n, req->cid, req->proto);
        }
    }
    upstream_send(up, req);
}

void router_send_kill(struct req *req)
{
    if (!cluster_has_upstream(&server.cluster)) {
        req_reply_error(req, "no upstream configured");
        return;
    }
    if (!cluster_ready(&server.cluster)) {
        cluster_hold(&server.cluster, req);
        return;
    }
    if (merge_fanout(req)) {
        return; /* cluster mode: every master */
    }
    cluster_send_oneshot(&server.cluster, server.cluster.single, req);
}

/* UNSUBSCRIBE, PUNSUBSCRIBE, SUNSUBSCRIBE from a client with no private
 * connection, hence no subscription: Redis's answer, one confirmation per
 * channel named (or one with a null channel), each with a count of 0. */
static void router_unsubscribe_none(struct req *req)
{
    struct buf *b = &req->reply;
    size_t nlen, klen, len;
    const char *name = resp_cmd_arg(req->cmd, 0, &nlen);
    char kind[16];
    int i, n = req->cmd->argc > 1 ? req->cmd->argc - 1 : 1;

    for (klen = 0; klen < nlen && klen < sizeof(kind); klen++) {
        kind[klen] = (char)tolower((unsigned char)name[klen]);
    }
    for (i = 0; i < n; i++) {
        if (req->proto == RESP_PROTO3) {
            PX_CHECK_OOM(buf_append(b, ">3\r\n", 4));
        } else {
            PX_CHECK_OOM(resp_enc_array_header(b, 3));
        }
        PX_CHECK_OOM(resp_enc_bulk(b, kind, klen));
        if (req->cmd->argc > 1) {
            const char *ch = resp_cmd_arg(req->cmd, i + 1, &len);
            PX_CHECK_OOM(resp_enc_bulk(b, ch, len));
        } else {
            PX_CHECK_OOM(resp_enc_null(b, req->proto));
        }
        PX_CHECK_OOM(resp_enc_int(b, 0));
    }
    req_reply_built(req);
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
    const struct keyspec *ks = cluster_keyspec(&server.cluster);
    unsigned f;

    if (ks == NULL || keyspec_flags(ks, req->cmd, &f) != KEYSPEC_OK) {
        return 0;
    }
    if (f & KEYSPEC_F_BLOCKING) {
        return CMD_F_BLOCKING;
    }
    if (f & KEYSPEC_F_CONNECTION) {
        return CMD_F_STICKY;
    }
    if ((f & KEYSPEC_F_PUBSUB) && !resp_cmd_arg_is(req->cmd, 0, "publish") &&
        !resp_cmd_arg_is(req->cmd, 0, "spublish") &&
        !resp_cmd_arg_is(req->cmd, 0, "pubsub")) {
        return CMD_F_STICKY;
    }
    return 0;
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
    const struct keyspec *ks = cluster_keyspec(&server.cluster);
    int stack[ROUTER_STACK_KEYS], *keys = stack, nkeys = 0, k, rc;
    unsigned f;
    size_t len;
    const char *p;

    if (!limiter_caches(&server.limiter)) {
        return;
    }
    if (ks == NULL || (req->def != NULL && (req->def->flags & CMD_F_FLUSH))) {
        limiter_forget(&server.limiter, NULL, 0);
        return;
    }
    if (keyspec_flags(ks, req->cmd, &f) == KEYSPEC_OK &&
        (f & KEYSPEC_F_READONLY)) {
        return;
    }
    if (req->cmd->argc > ROUTER_STACK_KEYS) {
        keys = px_malloc((size_t)req->cmd->argc * sizeof(*keys));
    }
    rc = keyspec_find(ks, req->cmd, keys, &nkeys);
    for (k = 0; rc == KEYSPEC_OK && k < nkeys; k++) {
        p = resp_cmd_arg(req->cmd, keys[k], &len);
        limiter_forget(&server.limiter, p, len);
    }
    if (keys != stack) {
        px_free(keys);
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
        req->cid = c->lane;
    }
    if (c->lim_owed > 0) {
        limiter_send_all(&server.limiter);
    }
    router_forget_cached(req);
}

/* Sets what `req`'s reply is timed as, which also counts it as owed in
 * its client's lim_owed (a decision) or fwd_owed (a command sent to Redis)
 * until client_on_reply. A request held until the cluster is ready is
 * dispatched again: it is counted once. */
static void router_set_lat(struct req *req, enum req_lat lat)
{
    struct client *c = req->client;

    if (req->lat == lat) {
        return;
    }
    if (req->lat == REQ_LAT_DECISION) {
        c->lim_owed--;
    } else if (req->lat == REQ_LAT_FORWARD) {
        c->fwd_owed--;
    }
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
    if ((c->multi && !(flags & CMD_F_NOAUTH)) || c->tunnel) {
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
           (apart || c->multi || c->tunnel ||
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
        req->cid = c->lane;
    }
    req->def->proc(req);
}

void router_dispatch(struct req *req)
{
    struct client *c = req->client;
    const struct cmd_def *def;
    size_t nlen;
    const char *name = resp_cmd_arg(req->cmd, 0, &nlen);
    enum cmd_how how;
    unsigned flags;
    int to_redis;

    def = cmd_lookup(name, nlen);
    req->def = def;
    if (def != NULL && !cmd_arity_ok(def, req->cmd->argc)) {
        req_reply_error(req, "wrong number of arguments for '%s' command",
                        def->name);
        return;
    }
    if (!c->authed && (def == NULL || !(def->flags & CMD_F_NOAUTH))) {
        req_reply_error(req, "NOAUTH Authentication required.");
        return;
    }
    if (!router_policy_allows(req)) {
        return;
    }
    how = def != NULL ? def->how : CMD_FORWARD;
    flags = def != NULL ? def->flags : router_node_flags(req);
    if (flags & (CMD_F_PUBSUB | CMD_F_UNSUB)) {
        /* Subscription confirmations reach the client even with CLIENT
         * REPLY OFF, as in Redis (they are pushes, not replies). */
        req->silent = 0;
    }
    to_redis = router_to_redis(c, how, flags);
    if (router_order_waits(c, to_redis, flags,
                           how == CMD_LIMITER && !to_redis)) {
        /* Dispatched again once the calls it must follow are answered
         * (client_process). */
        c->order_held = req;
        return;
    }
    if (to_redis) {
        router_set_lat(req, REQ_LAT_FORWARD);
        router_before_redis(req);
    }
    if (c->multi && !(flags & CMD_F_NOAUTH)) {
        /* Inside MULTI Redis queues (or refuses) every command, PING and
         * ECHO included: the transaction's connection decides. */
        if (flags & CMD_F_TXEND) {
            c->multi = 0;
            c->watching = 0;
        } else {
            c->multi_count++;
        }
        router_send_private(req);
        return;
    }
    if (c->tunnel || how == CMD_TUNNEL) {
        /* A replica's link (redis-cli --replica, the test suite's
         * replication-stream helper): a byte tunnel of its own. */
        c->tunnel = 1;
        c->sticky = 1;
        router_send_private(req);
        return;
    }
    if (how == CMD_REFUSE) {
        req_reply_error(req,
                        "'%s' is not available through cellgate: it would "
                        "take over a connection other clients share",
                        def->name);
        return;
    }
    if (how == CMD_LIMITER) {
        router_limiter(req);
        return;
    }
    if (how == CMD_LOCAL) {
        def->proc(req);
        return;
    }
    if (flags & CMD_F_MULTI) {
        c->multi = 1;
        c->multi_count = 0;
    } else if (flags & CMD_F_TXEND) {
        c->multi = 0;
        c->watching = 0;
    } else if (flags & CMD_F_WATCH) {
        c->watching = 1;
    } else if (flags & CMD_F_UNWATCH) {
        c->watching = 0;
    } else if (flags & CMD_F_STICKY) {
        c->sticky = 1;
    } else if (flags & CMD_F_MONITOR) {
        c->monitor = 1;
    }
    req->blocking = (flags & CMD_F_BLOCKING) ||
                    ((flags & CMD_F_XBLOCK) && router_xread_blocks(req));
    if ((flags & ROUTER_F_PRIVATE) || req->blocking) {
        router_send_private(req);
        return;
    }
    if (flags & CMD_F_UNSUB) {
        if (c->priv == NULL) {
            router_unsubscribe_none(req);
        } else {
            router_send_private(req);
        }
        return;
    }
    router_forward(req);
}
