/* The proxy's own requests on an upstream connection: what a new
 * connection sends before any client's request (AUTH as the connection's
 * user, HELLO 3 on a RESP3 one, CLIENT ID on a private one, then what the
 * core's on_setup adds, such as the limiter's FUNCTION LOAD), RESET when a
 * private connection goes back to its pool, HELLO when a client switches
 * protocol (upstream.c sends those two), and the Redis id. Their replies are
 * swallowed unless the request asks for them. Connections themselves are
 * upstream.c. */
#include "proxy/core/upstream_setup.h"

#include <string.h>

#include "conf/conf.h"
#include "parser/resp.h"
#include "parser/resp_enc.h"
#include "proxy/core/core.h"
#include "proxy/core/req.h"
#include "proxy/core/upstream_conn.h"
#include "proxy/core/util.h"

/* Lets every request waiting for the Redis id go on; one whose client left
 * meanwhile (an orphan) is freed instead. */
void upstream_setup_resume_rid_waits(struct upstream *up)
{
    while (!queue_empty(&up->rid_wait)) {
        struct req *w =
            container_of(queue_head(&up->rid_wait), struct req, unode);
        if (w->on_reply == NULL) {
            req_free(w); /* unlinks it */
        } else {
            req_resume(w);
        }
    }
}

/* Queues one of the proxy's own requests behind what is already queued
 * (first of all on a new connection); its reply is swallowed. */
struct req *upstream_setup_own(struct upstream *up, int argc,
                               const char *const *argv, const size_t *lens)
{
    struct req *req = req_own(resp_cmd_new(argc, argv, lens), NULL, NULL);

    /* Its silence is timed from now (upstream_check_timeout): not from
     * the last read of an earlier connection, nor from 0. */
    req->sent_ms = core_now_ms(up->core);
    PX_CHECK_OOM(buf_append(&up->wq.out, req->cmd->raw, req->cmd->raw_len));
    queue_insert_tail(&up->inflight, &req->unode);
    return req;
}

/* The reply to CLIENT ID on a private upstream. */
static void upstream_on_client_id(struct req *req, const char *frame,
                                  size_t len)
{
    struct upstream *up = req->ctx;
    unsigned long long id = 0;
    size_t k;

    for (k = 1; frame[0] == ':' && k < len && frame[k] >= '0' &&
                frame[k] <= '9' && id < 1000000000000000000ULL;
         k++) {
        id = id * 10 + (unsigned long long)(frame[k] - '0');
    }
    up->rid = id;
    upstream_setup_resume_rid_waits(up);
}

/* Queues CLIENT ID; its reply sets up->rid. */
static void upstream_setup_client_id(struct upstream *up)
{
    const char *argv[2] = { "CLIENT", "ID" };
    size_t lens[2] = { 6, 2 };
    struct req *req = upstream_setup_own(up, 2, argv, lens);

    req->swallow = 0;
    req->on_reply = upstream_on_client_id;
    req->ctx = up;
}

/* Queues `HELLO <proto>`. */
void upstream_setup_hello(struct upstream *up, int proto)
{
    const char *argv[2] = { "HELLO", proto == RESP_PROTO3 ? "3" : "2" };
    size_t lens[2] = { 5, 1 };

    upstream_setup_own(up, 2, argv, lens);
}

/* Queues AUTH when a password is configured for the connection's user:
 * the limiter's user on a limiter connection, the sentinels' on a sentinel
 * connection, else the client traffic's. */
void upstream_setup_auth(struct upstream *up)
{
    const struct conf *conf = up->core->conf;
    const char *user = up->sentinel  ? conf->sentinel.user
                       : up->limiter ? conf->limiter_user
                                     : conf->upstream_user;
    const char *pass =
        core_secret(up->core, up->sentinel  ? CONF_SECRET_SENTINEL
                              : up->limiter ? CONF_SECRET_LIMITER
                                            : CONF_SECRET_UPSTREAM);
    const char *argv[3];
    size_t lens[3];
    int argc = 0;

    if (pass != NULL) {
        argv[argc] = "AUTH";
        lens[argc++] = 4;
        if (user != NULL) {
            argv[argc] = user;
            lens[argc] = strlen(user);
            argc++;
        }
        argv[argc] = pass;
        lens[argc] = strlen(pass);
        argc++;
        upstream_setup_own(up, argc, argv, lens);
    }
}

/* Queues AUTH (when configured), then HELLO 3 on a RESP3 connection, as the
 * first requests of a new connection, then what the core's on_setup adds. */
void upstream_setup_queue(struct upstream *up)
{
    upstream_setup_auth(up);
    if (up->sentinel) {
        return; /* a sentinel: no protocol, id nor library to set up */
    }
    if (up->proto == RESP_PROTO3) {
        upstream_setup_hello(up, RESP_PROTO3);
    }
    if (up->priv) {
        upstream_setup_client_id(up);
    }
    if (up->core->on_setup != NULL) {
        up->core->on_setup(up, up->core->setup_arg);
    }
}
