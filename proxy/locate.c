/* Where a client's command goes: the node of its keys (see locate.h).
 *
 * Design note: the decision itself is pure and unit-tested (core/route.c);
 * this file feeds it the proxy's facts and turns its verdict into a node or
 * the error Redis would give. It sits below the router and the private
 * connection (priv.c), which both ask it, so neither calls the other. */
#include "proxy/locate.h"

#include "conf/conf.h"
#include "parser/resp.h"
#include "parser/slot.h"
#include "proxy/client.h"
#include "proxy/cmd_def.h"
#include "proxy/core/cluster.h"
#include "proxy/core/req.h"
#include "proxy/core/route.h"
#include "proxy/core/util.h"
#include "proxy/limiter/limiter.h"
#include "proxy/merge.h"
#include "proxy/server.h"

/* Shows at most this much of a client's command name in an error. */
#define LOCATE_NAME_SHOWN 128

/* What the routing decision needs to know about the proxy and `req`'s
 * client. */
static void locate_route_in(const struct req *req, struct route_in *in)
{
    in->cluster = cluster_mode(&server.cluster) == CLUSTER_MODE_CLUSTER;
    in->has_upstream = server.cluster.single != NULL || in->cluster;
    in->key_prefix = server.conf->key_prefix;
    in->admin = req->client->admin;
}

/* Limiter keys belong to the proxy: a client that is not admin may not
 * touch keys under the key prefix with ordinary commands (a stray DEL or
 * SET would reset or forge limits). */
void locate_reply_noperm(struct req *req)
{
    req_reply_error(req, LIMITER_ERR_PREFIX, server.conf->key_prefix);
}

/* Keys of several slots: split the command by slot when it is one that
 * splits, else Redis's own error. May complete `req`. */
static void locate_cross_slot(struct req *req, const int *keys, int nkeys)
{
    const struct cmd_def *def = req->def;
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
    if (req->client->sess.multi || def == NULL || def->how != CMD_SPLIT ||
        !merge_split(req, def->merge, def->key_step, keys, slots, nkeys)) {
        req_reply_error(req, "CROSSSLOT Keys in request don't hash to the same "
                             "slot");
    }
    px_free(slots);
}

void locate_classify(struct req *req)
{
    if (cluster_mode(&server.cluster) == CLUSTER_MODE_CLUSTER) {
        route_classify(cluster_keyspec(&server.cluster), req->cmd, &req->facts);
    } else {
        /* One node holds every key (the mode never changes). */
        route_classify_unslotted(cluster_keyspec(&server.cluster), req->cmd,
                                 &req->facts);
    }
}

/* Reads the request's facts (req->facts, classified by the router once
 * its command was looked up): the key table is not asked again. */
struct node *locate_node(struct req *req)
{
    struct route_in in;
    struct route r;
    struct node *n = NULL;
    size_t len;
    const char *p;

    locate_route_in(req, &in);
    switch (route_decide(&in, req->cmd, &req->facts, &r)) {
    case ROUTE_NO_UPSTREAM:
        req_reply_error(req, "no upstream configured");
        break;
    case ROUTE_SINGLE:
        n = server.cluster.single;
        break;
    case ROUTE_NOPERM:
        locate_reply_noperm(req);
        break;
    case ROUTE_UNLOCATABLE:
        p = resp_cmd_arg(req->cmd, 0, &len);
        req_reply_error(
            req,
            "cellgate cannot locate the keys of command "
            "'%.*s' in cluster mode",
            (int)(len > LOCATE_NAME_SHOWN ? LOCATE_NAME_SHOWN : len), p);
        break;
    case ROUTE_CROSSSLOT:
        locate_cross_slot(req, route_facts_keys(&req->facts), r.nkeys);
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
    return n;
}

int locate_key_allowed(struct req *req)
{
    struct route_in in;
    struct route r;
    int ok;

    locate_route_in(req, &in);
    ok = route_decide(&in, req->cmd, &req->facts, &r) != ROUTE_NOPERM;
    if (!ok) {
        locate_reply_noperm(req);
    }
    return ok;
}
