/* Upstream connections to Redis.
 *
 *   clients' reqs --upstream_send--> wq.out (raw request bytes)
 *                                    inflight: [r1] [r2] [r3] ...  FIFO
 *   socket --read--> in --framer--> frame 1 -> r1, frame 2 -> r2, ...
 *
 * Redis answers a connection's requests in order, so the i-th reply frame
 * belongs to the i-th owed request. Frames on a private upstream with no
 * request owed are pushes (pub/sub messages) and go to the owning client.
 *
 * States: CONNECTING -> READY -> (error) CLOSING -> IDLE -(backoff)->
 * CONNECTING. While IDLE or CLOSING a request fails at once with
 * "-ERR upstream <addr> unavailable: <reason>"; when a connection is lost
 * every owed request fails with "connection lost" (nothing is re-sent, so
 * nothing runs twice). A private upstream never reconnects: it dies with its
 * first error and its client is told. */
#include "proxy/upstream.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "conf/conf.h"
#include "parser/resp.h"
#include "proxy/client.h"
#include "proxy/cluster.h"
#include "proxy/log.h"
#include "proxy/req.h"
#include "proxy/server.h"
#include "proxy/util.h"

/* Reconnect backoff: doubles from MIN to MAX, reset on success. Short enough
 * that a restarted Redis is back in service within a second. */
#define UPSTREAM_BACKOFF_MIN_MS 50
#define UPSTREAM_BACKOFF_MAX_MS 1000

/* Bytes reserved in `in` for each read. */
#define UPSTREAM_READ_BYTES (64 * 1024)

static void upstream_connect(struct upstream *up);
static void upstream_fail(struct upstream *up, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---------------- Lifetime ---------------- */

static void upstream_maybe_free(struct upstream *up)
{
    if (up->state != UP_DEAD || up->pending_closes > 0) {
        return;
    }
    queue_remove(&up->link);
    queue_remove(&up->dirty_node);
    resp_framer_free(up->fr);
    buf_free(&up->in);
    wq_free(&up->wq);
    px_free(up);
}

static void upstream_on_timer_close(uv_handle_t *h)
{
    struct upstream *up = container_of(h, struct upstream, timer);

    up->pending_closes--;
    upstream_maybe_free(up);
}

static void upstream_on_reconnect_timer(uv_timer_t *t)
{
    struct upstream *up = container_of(t, struct upstream, timer);

    if (up->state == UP_IDLE) {
        upstream_connect(up);
    }
}

static void upstream_on_tcp_close(uv_handle_t *h)
{
    struct upstream *up = container_of(h, struct upstream, tcp);

    up->tcp_open = 0;
    up->pending_closes--;
    if (up->state == UP_DEAD) {
        upstream_maybe_free(up);
        return;
    }
    /* A shared upstream: try again after the backoff. */
    up->state = UP_IDLE;
    uv_timer_start(&up->timer, upstream_on_reconnect_timer, up->backoff_ms, 0);
    up->backoff_ms *= 2;
    if (up->backoff_ms > UPSTREAM_BACKOFF_MAX_MS) {
        up->backoff_ms = UPSTREAM_BACKOFF_MAX_MS;
    }
}

static void upstream_close_tcp(struct upstream *up)
{
    if (up->tcp_open && !uv_is_closing((uv_handle_t *)&up->tcp)) {
        uv_read_stop((uv_stream_t *)&up->tcp);
        up->pending_closes++;
        uv_close((uv_handle_t *)&up->tcp, upstream_on_tcp_close);
    }
}

/* Fails every owed request with "upstream <addr> <why>". */
static void upstream_fail_inflight(struct upstream *up, const char *why)
{
    while (!queue_empty(&up->inflight)) {
        struct req *req =
            container_of(queue_head(&up->inflight), struct req, unode);
        queue_remove(&req->unode);
        req_reply_error(req, "upstream %s %s", up->name, why);
    }
}

void upstream_destroy(struct upstream *up, const char *why)
{
    struct client *owner = up->owner;

    if (up->state == UP_DEAD) {
        return;
    }
    up->state = UP_DEAD;
    up->owner = NULL;
    if (owner != NULL) {
        client_priv_gone(owner, why != NULL);
    }
    upstream_fail_inflight(up, why != NULL ? why : "connection closed");
    queue_remove(&up->dirty_node);
    upstream_close_tcp(up);
    uv_timer_stop(&up->timer);
    up->pending_closes++;
    uv_close((uv_handle_t *)&up->timer, upstream_on_timer_close);
}

/* A transient failure: owed requests fail, a shared upstream reconnects, a
 * private one dies. */
static void upstream_fail(struct upstream *up, const char *fmt, ...)
{
    char why[160];
    va_list ap;

    if (up->state == UP_DEAD || up->state == UP_CLOSING ||
        up->state == UP_IDLE) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    if (up->owner != NULL) {
        log_debug("upstream %s (private): %s", up->name, why);
        upstream_destroy(up, why);
        return;
    }
    log_warn("upstream %s: %s (retry in %u ms)", up->name, why, up->backoff_ms);
    snprintf(up->last_err, sizeof(up->last_err), "%s", why);
    up->state = UP_CLOSING;
    uv_timer_stop(&up->timer);
    queue_remove(&up->dirty_node);
    upstream_fail_inflight(up, why);
    buf_clear(&up->in);
    buf_clear(&up->wq.out);
    upstream_close_tcp(up);
}

/* ---------------- Reading replies ---------------- */

static void upstream_on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b)
{
    struct upstream *up = container_of(h, struct upstream, tcp);

    PX_UNUSED(hint);
    PX_CHECK_OOM(buf_reserve(&up->in, UPSTREAM_READ_BYTES));
    *b = uv_buf_init(buf_tail(&up->in), (unsigned)buf_avail(&up->in));
}

/* Hands one complete reply frame to its request. Returns 0, or -1 when the
 * upstream stopped being usable while delivering. */
static int upstream_deliver(struct upstream *up, const char *frame, size_t len)
{
    struct client *owner = up->owner;
    struct req *req;

    if (owner != NULL) {
        client_note_priv_frame(owner, frame, len);
    }
    if (queue_empty(&up->inflight)) {
        if (owner == NULL) {
            upstream_fail(up, "sent a reply nobody asked for");
            return -1;
        }
        client_push(owner, frame, len);
        return up->state == UP_READY ? 0 : -1;
    }
    req = container_of(queue_head(&up->inflight), struct req, unode);
    queue_remove(&req->unode);
    if (frame[0] == '-' && owner == NULL && cluster_redirect(req, frame, len)) {
        /* Re-sent to the node the cluster named. */
        return up->state == UP_READY ? 0 : -1;
    }
    if (frame[0] == '-' && owner != NULL &&
        cluster_private_redirect(req, owner, frame, len)) {
        return up->state == UP_READY ? 0 : -1;
    }
    if (req->swallow && frame[0] == '-') {
        log_error("upstream %s: AUTH failed: %.*s", up->name,
                  (int)(len > 200 ? 200 : len - 2), frame);
    }
    req_reply(req, frame, len);
    return up->state == UP_READY ? 0 : -1;
}

static void upstream_on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
    struct upstream *up = container_of(s, struct upstream, tcp);
    size_t off = 0, len;
    int rc;

    PX_UNUSED(b);
    if (nread < 0) {
        if (nread == UV_EOF) {
            upstream_fail(up, "connection lost");
        } else {
            upstream_fail(up, "connection lost: %s", uv_strerror((int)nread));
        }
        return;
    }
    if (nread == 0 || up->state != UP_READY) {
        return;
    }
    up->last_read_ms = server_now_ms();
    buf_commit(&up->in, (size_t)nread);
    if (resp_framer_feed(up->fr, buf_tail(&up->in) - nread, (size_t)nread) !=
        RESP_OK) {
        px_oom((size_t)nread);
    }
    while ((rc = resp_framer_next(up->fr, &len)) == RESP_OK) {
        if (upstream_deliver(up, up->in.data + off, len) != 0) {
            return;
        }
        off += len;
    }
    if (rc != RESP_AGAIN) {
        upstream_fail(up, "protocol error in reply");
        return;
    }
    buf_consume(&up->in, off);
    if (up->owner != NULL) {
        client_priv_maybe_release(up->owner);
    }
}

/* ---------------- Connecting ---------------- */

static void upstream_on_connect_timeout(uv_timer_t *t)
{
    struct upstream *up = container_of(t, struct upstream, timer);

    if (up->state == UP_CONNECTING) {
        upstream_fail(up, "unavailable: connect timed out");
    }
}

static void upstream_on_connect(uv_connect_t *creq, int status)
{
    struct upstream *up = container_of(creq, struct upstream, connect_req);
    int rc;

    if (status == UV_ECANCELED || up->state != UP_CONNECTING) {
        return;
    }
    uv_timer_stop(&up->timer);
    if (status < 0) {
        upstream_fail(up, "unavailable: %s", uv_strerror(status));
        return;
    }
    rc = uv_read_start((uv_stream_t *)&up->tcp, upstream_on_alloc,
                       upstream_on_read);
    if (rc < 0) {
        upstream_fail(up, "unavailable: %s", uv_strerror(rc));
        return;
    }
    up->state = UP_READY;
    up->backoff_ms = UPSTREAM_BACKOFF_MIN_MS;
    if (up->owner == NULL) {
        log_info("upstream %s: connected", up->name);
    }
    server_mark_upstream(up);
}

/* Queues AUTH as the first request of a new connection; its reply is
 * swallowed. */
static void upstream_queue_auth(struct upstream *up)
{
    const struct conf *conf = server.conf;
    const char *argv[3];
    size_t lens[3];
    int argc = 0;
    struct resp_cmd *cmd;
    struct req *req;

    if (conf->upstream_password == NULL) {
        return;
    }
    argv[argc] = "AUTH";
    lens[argc++] = 4;
    if (conf->upstream_user != NULL) {
        argv[argc] = conf->upstream_user;
        lens[argc] = strlen(conf->upstream_user);
        argc++;
    }
    argv[argc] = conf->upstream_password;
    lens[argc] = strlen(conf->upstream_password);
    argc++;
    cmd = resp_cmd_new(argc, argv, lens);
    if (cmd == NULL) {
        px_oom(0);
    }
    req = req_new(NULL, cmd);
    req->swallow = 1;
    PX_CHECK_OOM(buf_append(&up->wq.out, cmd->raw, cmd->raw_len));
    queue_insert_tail(&up->inflight, &req->unode);
}

static void upstream_connect(struct upstream *up)
{
    int rc;

    resp_framer_free(up->fr);
    up->fr = resp_framer_new();
    if (up->fr == NULL) {
        px_oom(0);
    }
    buf_clear(&up->in);
    buf_clear(&up->wq.out);
    up->state = UP_CONNECTING;
    uv_tcp_init(server.loop, &up->tcp);
    up->tcp_open = 1;
    uv_tcp_nodelay(&up->tcp, 1);
    upstream_queue_auth(up);
    rc = uv_tcp_connect(&up->connect_req, &up->tcp,
                        (const struct sockaddr *)&up->sa, upstream_on_connect);
    if (rc < 0) {
        upstream_fail(up, "unavailable: %s", uv_strerror(rc));
        return;
    }
    uv_timer_start(&up->timer, upstream_on_connect_timeout,
                   server.conf->connect_timeout_ms, 0);
}

static void upstream_on_wq_event(struct wq *wq, int status)
{
    struct upstream *up = container_of(wq, struct upstream, wq);

    if (status < 0) {
        upstream_fail(up, "connection lost: %s", uv_strerror(status));
    }
}

static struct upstream *upstream_alloc(void)
{
    struct upstream *up = px_calloc(1, sizeof(*up));

    queue_init(&up->inflight);
    queue_init(&up->link);
    queue_init(&up->dirty_node);
    buf_init(&up->in);
    wq_init(&up->wq, (uv_stream_t *)&up->tcp, upstream_on_wq_event);
    uv_timer_init(server.loop, &up->timer);
    up->backoff_ms = UPSTREAM_BACKOFF_MIN_MS;
    up->state = UP_IDLE;
    queue_insert_tail(&server.upstreams, &up->link);
    return up;
}

struct upstream *upstream_new(const struct sockaddr_storage *sa,
                              const char *name, struct node *node)
{
    struct upstream *up = upstream_alloc();

    memcpy(&up->sa, sa, sizeof(up->sa));
    snprintf(up->name, sizeof(up->name), "%s", name);
    up->node = node;
    upstream_connect(up);
    return up;
}

int upstream_is_ready(const struct upstream *up)
{
    return up->state == UP_READY;
}

int upstream_is_usable(const struct upstream *up)
{
    return up->state == UP_READY || up->state == UP_CONNECTING;
}

struct upstream *upstream_new_private(const struct upstream *like,
                                      struct client *c)
{
    struct upstream *up = upstream_alloc();

    memcpy(&up->sa, &like->sa, sizeof(up->sa));
    memcpy(up->name, like->name, sizeof(up->name));
    up->owner = c;
    upstream_connect(up);
    return up;
}

/* ---------------- Sending ---------------- */

void upstream_send(struct upstream *up, struct req *req)
{
    if (up->state != UP_READY && up->state != UP_CONNECTING) {
        /* last_err may already say "unavailable: <why>" (a failed
         * connect): say the word once. */
        const char *why = up->last_err[0] ? up->last_err : "not connected";
        if (strncmp(why, "unavailable: ", 13) == 0) {
            why += 13;
        }
        req_reply_error(req, "upstream %s unavailable: %s", up->name, why);
        return;
    }
    PX_CHECK_OOM(buf_append(&up->wq.out, req->cmd->raw, req->cmd->raw_len));
    req->sent_ms = server_now_ms();
    queue_insert_tail(&up->inflight, &req->unode);
    if (up->state == UP_READY) {
        server_mark_upstream(up);
    }
}

void upstream_flush(struct upstream *up)
{
    int rc;

    if (up->state != UP_READY) {
        return;
    }
    rc = wq_flush(&up->wq);
    if (rc < 0) {
        upstream_fail(up, "connection lost: %s", uv_strerror(rc));
    }
}

void upstream_check_timeout(struct upstream *up, uint64_t now_ms,
                            unsigned timeout_ms)
{
    struct req *req;
    uint64_t start;

    if (up->owner != NULL || up->state != UP_READY || timeout_ms == 0 ||
        queue_empty(&up->inflight)) {
        return;
    }
    req = container_of(queue_head(&up->inflight), struct req, unode);
    start = req->sent_ms > up->last_read_ms ? req->sent_ms : up->last_read_ms;
    if (now_ms - start > timeout_ms) {
        upstream_fail(up, "command timed out after %u ms", timeout_ms);
    }
}
