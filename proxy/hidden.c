/* The limiter's key names kept from ordinary clients (see hidden.h).
 *
 *   router_policy_allows -> hidden_admit: refused (KEYS... in MULTI)
 *        | allowed
 *        +-- KEYS, SCAN, CLUSTER GETKEYSINSLOT: req->filter, which rewrites
 *        |   the reply of the one node that answers (single mode, a private
 *        |   connection); a fanned-out one is filtered by its merge
 *        |   (hidden_prefix_for -> merge->hide_prefix)
 *        +-- RANDOMKEY: req->retry, which has the request routed again
 *        |   (by client_on_reply) while it draws a limiter key, then
 *        |   answers null
 *        +-- anything of a RESP2 client on a private connection: req->filter
 *            takes the limiter keys out of an invalidation message that
 *            arrived where its reply was due (see below)
 *   priv_up_push -> hidden_push: every push and message of a private
 *        connection; invalidations lose their limiter keys
 *
 * The hooks see the node's bytes before the client does, on every path a
 * forwarded command or a push takes, so no other code needs to know of
 * them. A retried RANDOMKEY goes to Redis after whatever its client sent
 * behind it; its reply still leaves in the client's order.
 *
 * CLIENT TRACKING on BCAST (with no PREFIX, or one overlapping key_prefix)
 * is let through: Redis then broadcasts the limiter's writes too, and
 * hidden_push drops them. A RESP2 redirect target reads them as messages
 * of __redis__:invalidate; one that arrives while the target waits for a
 * reply (a PING, a SUBSCRIBE) is taken by the core for that reply, so the
 * same filter sits on those requests. */
#include "proxy/hidden.h"

#include "conf/conf.h"
#include "parser/resp.h"
#include "parser/resp_enc.h"
#include "proxy/client.h"
#include "proxy/client_ops.h"
#include "proxy/core/req.h"
#include "proxy/core/util.h"
#include "proxy/hidden_filter.h"
#include "proxy/priv.h"
#include "proxy/server.h"

static void hidden_filter_keys(struct req *req, const char *frame, size_t len)
{
    hidden_filter_reply(hidden_filter_kind(req->cmd), frame, len,
                        server.conf->key_prefix, &req->reply);
}

static enum req_retry hidden_retry_randomkey(struct req *req, const char *frame,
                                             size_t len)
{
    if (!hidden_filter_drawn(frame, len, server.conf->key_prefix)) {
        return REQ_RETRY_PASS;
    }
    if (req->tries + 1 >= HIDDEN_RANDOMKEY_TRIES) {
        /* Limiter keys are most of the keyspace: as if it were empty. */
        req->retry = NULL;
        PX_CHECK_OOM(resp_enc_null(&req->reply, req->proto));
        req_reply_built(req);
        return REQ_RETRY_TAKEN;
    }
    req->tries++;
    return REQ_RETRY_AGAIN; /* the client's callback routes it again */
}

/* Any reply of a RESP2 client on a private connection: an invalidation
 * message in its place loses its limiter keys (the reply itself comes
 * next, as a push). */
static void hidden_filter_message(struct req *req, const char *frame,
                                  size_t len)
{
    if (hidden_filter_invalidation(frame, len, server.conf->key_prefix,
                                   &req->reply) == HIDDEN_PUSH_AS_IS) {
        PX_CHECK_OOM(buf_append(&req->reply, frame, len));
    }
}

/* The name a refusal inside MULTI shows. */
static const char *hidden_name(const struct req *req)
{
    switch (hidden_filter_kind(req->cmd)) {
    case HIDDEN_SCAN:
        return "SCAN";
    case HIDDEN_RANDOMKEY:
        return "RANDOMKEY";
    case HIDDEN_KEYS:
        return resp_cmd_arg_is(req->cmd, 0, "keys") ? "KEYS"
                                                    : "CLUSTER GETKEYSINSLOT";
    case HIDDEN_NONE:
        break;
    }
    return "this command";
}

int hidden_admit(struct req *req)
{
    struct client *c = req->client;

    if (hidden_filter_refusal(req->cmd, c->sess.multi) == HIDDEN_IN_MULTI) {
        req_reply_error(req,
                        "NOPERM %s is not available inside MULTI through "
                        "cellgate: its reply could name the rate limiter's "
                        "keys",
                        hidden_name(req));
        return 0;
    }
    switch (hidden_filter_kind(req->cmd)) {
    case HIDDEN_KEYS:
    case HIDDEN_SCAN:
        req->filter = hidden_filter_keys;
        break;
    case HIDDEN_RANDOMKEY:
        req->retry = hidden_retry_randomkey;
        break;
    case HIDDEN_NONE:
        if (c->priv != NULL && c->proto == RESP_PROTO2 && !c->admin) {
            /* Maybe subscribed (a redirect target): a filter the router
             * sets later (PUBLISH, SELECT) replaces this one, for a
             * command Redis refuses in subscribed mode anyway. */
            req->filter = hidden_filter_message;
        }
        break;
    }
    return 1;
}

void hidden_push(struct client *c, const char *p, size_t n)
{
    struct buf out;

    if (c->admin || c->sess.tunnel) {
        c->ops->push(c, p, n); /* a replication stream: not frames */
        return;
    }
    buf_init(&out);
    switch (hidden_filter_invalidation(p, n, server.conf->key_prefix, &out)) {
    case HIDDEN_PUSH_AS_IS:
        c->ops->push(c, p, n);
        break;
    case HIDDEN_PUSH_TRIMMED:
        c->ops->push(c, out.data, out.len);
        break;
    case HIDDEN_PUSH_DROPPED:
        break;
    }
    buf_free(&out);
}

const char *hidden_prefix_for(const struct req *req)
{
    enum hidden_kind kind = hidden_filter_kind(req->cmd);

    if (req->client == NULL || req->client->admin ||
        (kind != HIDDEN_KEYS && kind != HIDDEN_SCAN)) {
        return NULL;
    }
    return server.conf->key_prefix;
}
