/* The limiter's key names kept from ordinary clients (see hidden.h).
 *
 *   router_policy_allows -> hidden_admit: refused (MULTI, TRACKING BCAST)
 *        | allowed
 *        +-- KEYS, SCAN, CLUSTER GETKEYSINSLOT: req->filter, which rewrites
 *        |   the reply of the one node that answers (single mode, a private
 *        |   connection); a fanned-out one is filtered by its merge
 *        |   (hidden_prefix_for -> merge->hide_prefix)
 *        +-- RANDOMKEY: req->retry, which has the request routed again
 *            (by client_on_reply) while it draws a limiter key, then
 *            answers null
 *
 * Both hooks see the node's reply before the client does, on every path a
 * forwarded command takes, so no other code needs to know of them. A
 * retried RANDOMKEY goes to Redis after whatever its client sent behind
 * it; its reply still leaves in the client's order. */
#include "proxy/hidden.h"

#include "conf/conf.h"
#include "parser/resp.h"
#include "parser/resp_enc.h"
#include "proxy/client.h"
#include "proxy/core/req.h"
#include "proxy/core/util.h"
#include "proxy/hidden_filter.h"
#include "proxy/server.h"

/* The longest client-given prefix an error shows. */
#define HIDDEN_SHOWN 64

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
    case HIDDEN_TRACKING:
        break;
    }
    return "this command";
}

int hidden_admit(struct req *req)
{
    const char *prefix = server.conf->key_prefix, *p;
    size_t len;
    int arg = 0;

    switch (hidden_filter_refusal(req->cmd, req->client->sess.multi, prefix,
                                  &arg)) {
    case HIDDEN_ALLOWED:
        break;
    case HIDDEN_IN_MULTI:
        req_reply_error(req,
                        "NOPERM %s is not available inside MULTI through "
                        "cellgate: its reply could name the rate limiter's "
                        "keys",
                        hidden_name(req));
        return 0;
    case HIDDEN_BCAST_ALL:
        req_reply_error(req,
                        "NOPERM CLIENT TRACKING BCAST needs a PREFIX through "
                        "cellgate: keys under '%s' belong to the rate limiter",
                        prefix);
        return 0;
    case HIDDEN_BCAST_PREFIX:
        p = resp_cmd_arg(req->cmd, arg, &len);
        req_reply_error(req,
                        "NOPERM Prefix '%.*s' overlaps with '%s': keys under "
                        "it belong to the rate limiter",
                        (int)(len > HIDDEN_SHOWN ? HIDDEN_SHOWN : len), p,
                        prefix);
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
    case HIDDEN_TRACKING:
        break;
    }
    return 1;
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
