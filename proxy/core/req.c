/* Request lifecycle.
 *
 *   client->reqs:  [r1 done] [r2 owed by up A] [r3 done] ...
 *                      |
 *                      +-- flushed to the client only from the head, while
 *                          the head is done: replies keep request order.
 *
 * A req is freed exactly once: by the client's flush pass after its reply is
 * written out, by client_close() if nobody owes it a reply, or here when it is
 * an orphan (its client left) or a swallowed proxy request. */
#include "proxy/core/req.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "parser/resp.h"
#include "parser/resp_enc.h"
#include "proxy/client.h"
#include "proxy/merge.h"
#include "proxy/server.h"
#include "proxy/core/util.h"

struct req *req_new(struct client *c, struct resp_cmd *cmd)
{
    struct req *req = px_calloc(1, sizeof(*req));

    queue_init(&req->cnode);
    queue_init(&req->unode);
    req->client = c;
    req->cid = c != NULL ? c->lane : 0;
    req->proto = c != NULL ? c->proto : RESP_PROTO2;
    req->cmd = cmd;
    buf_init(&req->reply);
    if (c != NULL) {
        queue_insert_tail(&c->reqs, &req->cnode);
        c->nreqs++;
    }
    return req;
}

void req_free(struct req *req)
{
    if (queue_linked(&req->cnode)) {
        PX_ASSERT(req->client != NULL);
        queue_remove(&req->cnode);
        req->client->nreqs--;
    }
    queue_remove(&req->unode);
    merge_free(req->mg);
    resp_cmd_free(req->cmd);
    buf_free(&req->reply);
    px_free(req);
}

void req_reply_built(struct req *req)
{
    if (req->on_reply != NULL) {
        req->on_reply(req, req->reply.data, req->reply.len);
        req_free(req);
        return;
    }
    if (req->client == NULL || req->swallow) {
        req_free(req);
        return;
    }
    if (req->silent) {
        /* CLIENT REPLY OFF/SKIP: the command ran, its reply is dropped;
         * pushes relayed before it stay. */
        req->reply.len = req->npush;
    }
    req->done = 1;
    client_req_done(req->client, req);
}

void req_reply(struct req *req, const char *p, size_t n)
{
    if (req->on_reply != NULL) {
        req->on_reply(req, p, n);
        req_free(req);
        return;
    }
    if (req->client == NULL || req->swallow) {
        req_free(req);
        return;
    }
    if (req->filter != NULL && !req->silent) {
        req->filter(req, p, n);
        req_reply_built(req);
        return;
    }
    if (req->add_int != 0 && n > 3 && p[0] == ':') {
        long long v;
        if (resp_parse_ll(p + 1, n - 3, &v) == 0 && !req->silent) {
            PX_CHECK_OOM(resp_enc_int(&req->reply, v + req->add_int));
            req_reply_built(req);
            return;
        }
    }
    if (!req->silent) {
        PX_CHECK_OOM(buf_append(&req->reply, p, n));
    }
    req_reply_built(req);
}

void req_reply_error(struct req *req, const char *fmt, ...)
{
    char msg[512];
    char *p;
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (n < 0) {
        msg[0] = '\0';
    }
    /* Arguments are user controlled: no CR/LF may reach the wire. */
    for (p = msg; *p != '\0'; p++) {
        if (*p == '\r' || *p == '\n') {
            *p = ' ';
        }
    }
    server.stats.errors++;
    if (req->on_reply == NULL && (req->client == NULL || req->swallow)) {
        req_free(req);
        return;
    }
    /* Redis convention: a text that starts with an upper-case word is
     * already "CODE message"; anything else is an ERR. redis-cell's texts
     * ("Cell error: ...") go out as the module sends them. */
    p = msg;
    while (isupper((unsigned char)*p)) {
        p++;
    }
    if (strncmp(msg, "Cell error: ", 12) == 0) {
        PX_CHECK_OOM(resp_enc_error(&req->reply, msg));
    } else if (p == msg || *p != ' ') {
        PX_CHECK_OOM(buf_append(&req->reply, "-ERR ", 5));
        PX_CHECK_OOM(buf_append_str(&req->reply, msg));
        PX_CHECK_OOM(buf_append(&req->reply, "\r\n", 2));
    } else {
        PX_CHECK_OOM(resp_enc_error(&req->reply, msg));
    }
    req_reply_built(req);
}
