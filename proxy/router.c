/* Routing of one request (STYLE.md 2.4 step 4).
 *
 *   lookup -> arity -> auth -> local proc?
 *                                  |no
 *        client has a private upstream, or the command needs one?
 *               |yes                              |no
 *        private upstream (opened on demand)   shared upstream of the client
 *
 * Connection state (MULTI, WATCH, subscriptions, SELECT n, MONITOR, CLIENT
 * TRACKING...) lives on a private upstream; every command of that client goes
 * there while any state is left, so the client's commands keep their order.
 * client_priv_maybe_release() returns the client to the shared path. */
#include "proxy/router.h"

#include <ctype.h>
#include <string.h>

#include "parser/resp.h"
#include "proxy/client.h"
#include "proxy/command.h"
#include "proxy/req.h"
#include "proxy/server.h"
#include "proxy/upstream.h"
#include "proxy/util.h"

/* Shows at most this much of a client's command name in an error. */
#define ROUTER_NAME_SHOWN 128

void router_send_private(struct req *req)
{
    struct client *c = req->client;

    if (server.npool == 0) {
        req_reply_error(req, "no upstream configured");
        return;
    }
    if (c->priv == NULL) {
        c->priv = upstream_new_private(server.pool[0], c);
    }
    upstream_send(c->priv, req);
}

void router_forward(struct req *req)
{
    struct client *c = req->client;

    if (c->priv != NULL) {
        upstream_send(c->priv, req);
        return;
    }
    if (server.npool == 0) {
        req_reply_error(req, "no upstream configured");
        return;
    }
    /* A client always uses the same shared connection, so its commands
     * reach Redis in the order it sent them. */
    upstream_send(server.pool[c->id % server.npool], req);
}

/* XREAD/XREADGROUP block only when a BLOCK option precedes STREAMS. */
static int router_xread_blocks(const struct req *req)
{
    int i;

    for (i = 1; i < req->cmd->argc; i++) {
        size_t len;
        const char *p = resp_cmd_arg(req->cmd, i, &len);
        if (len == 5 && strncasecmp_ascii(p, "block", 5) == 0) {
            return 1;
        }
        if (len == 7 && strncasecmp_ascii(p, "streams", 7) == 0) {
            return 0;
        }
    }
    return 0;
}

void router_dispatch(struct req *req)
{
    struct client *c = req->client;
    const struct cmd_def *def;
    size_t nlen;
    const char *name = resp_cmd_arg(req->cmd, 0, &nlen);
    unsigned flags;

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
    flags = def != NULL ? def->flags : 0;
    if (c->multi && !(flags & CMD_F_NOAUTH)) {
        /* Inside MULTI Redis queues (or refuses) every command, PING and
         * ECHO included: the transaction's connection decides. */
        if (flags & CMD_F_TXEND) {
            c->multi = 0;
            c->watching = 0;
        }
        router_send_private(req);
        return;
    }
    if (flags & CMD_F_LOCAL) {
        def->proc(req);
        return;
    }
    if (flags & CMD_F_MULTI) {
        c->multi = 1;
    } else if (flags & CMD_F_TXEND) {
        c->multi = 0;
        c->watching = 0;
    } else if (flags & CMD_F_WATCH) {
        c->watching = 1;
    } else if (flags & CMD_F_UNWATCH) {
        c->watching = 0;
    } else if (flags & CMD_F_STICKY) {
        c->sticky = 1;
    }
    if (flags & (CMD_F_MULTI | CMD_F_WATCH | CMD_F_PUBSUB | CMD_F_BLOCKING |
                 CMD_F_STICKY) ||
        ((flags & CMD_F_XBLOCK) && router_xread_blocks(req))) {
        router_send_private(req);
        return;
    }
    router_forward(req);
}
