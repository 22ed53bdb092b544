/* Upstream connections to Redis.
 *
 *   clients' reqs --upstream_send--> wq.out (raw request bytes)
 *                                    inflight: [r1] [r2] [r3] ...  FIFO
 *   socket --read--> in --framer--> frame 1 -> r1, frame 2 -> r2, ...
 *
 * Redis answers a connection's requests in order, so the i-th reply frame
 * belongs to the i-th owed request. Frames on a private upstream with no
 * request owed are pushes (pub/sub messages) and go to the owning client.
 * On a RESP3 connection a push frame (`>`) is never matched to a request,
 * wherever it falls between replies: it goes to the owning client, or is
 * dropped on a shared connection.
 *
 * A new connection first sends the proxy's own requests, whose replies are
 * dropped: AUTH (when upstream_password is set; a limiter connection logs in
 * as limiter_user instead), then HELLO 3 on a RESP3 connection. A refused HELLO
 * 3 fails the connection (a RESP3 client must never get RESP2 replies).
 *
 * States: CONNECTING -> READY -> (error) CLOSING -> IDLE -(backoff)->
 * CONNECTING. CONNECTING first resolves a host name (resolve.c, off the
 * loop; again at each attempt, as a name's address may move), then
 * connects; a name that does not resolve fails the attempt like a refused
 * connect. The lines a shared connection logs about its node's outages are
 * decided by downlog.c: the first failure, once a minute while it lasts,
 * then once when the node serves again. While IDLE or CLOSING a request
 * fails at once with
 * "-ERR upstream <addr> unavailable: <reason>"; when a connection is lost
 * every owed request fails with "connection lost" (nothing is re-sent, so
 * nothing runs twice). A private upstream never reconnects: it dies with its
 * first error and its client is told.
 *
 * With upstream_tls, CONNECTING lasts until the TLS handshake completes
 * (tls.c; the connect timeout covers it): the setup requests wait in
 * wq.out, which is sealed only then, so nothing leaves in plaintext.
 *
 * A private upstream learns its Redis client id (CLIENT ID, asked right
 * after the setup), so CLIENT UNBLOCK and CLIENT TRACKING ... REDIRECT,
 * which name clients by cellgate's ids, can be translated. */
#include "proxy/core/upstream.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "conf/conf.h"
#include "parser/resp.h"
#include "parser/resp_enc.h"
#include "proxy/core/core.h"
#include "proxy/core/log.h"
#include "proxy/core/metrics.h"
#include "proxy/core/req.h"
#include "proxy/core/tls.h"
#include "proxy/core/upstream_reply.h"
#include "proxy/core/upstream_setup.h"
#include "proxy/core/util.h"

/* Reconnect backoff: doubles from MIN to MAX while attempts fail, each
 * delay drawn between half and all of it (so proxies that lost a node
 * together do not come back in lockstep), and back to MIN once a connection
 * served: it got a reply that was not an error, or stayed up for
 * UPSTREAM_HEALTHY_MS. A node that accepts the TCP connection and then
 * refuses the client (-ERR max number of clients reached, a failed AUTH)
 * does not reset it, or cellgate would grab every slot Redis frees every
 * 50 ms. A restarted Redis is back in service within a second or two. */
#define UPSTREAM_BACKOFF_MIN_MS 50
#define UPSTREAM_BACKOFF_MAX_MS 2000
#define UPSTREAM_HEALTHY_MS     1000

/* Silence, while replies are owed, after which a connection counts as
 * stalled behind a long command: a client with nothing pending there may
 * take another one. Far above a reply's normal latency. */
#define UPSTREAM_STALL_MS 50

/* Bytes reserved in `in` for each read. */
#define UPSTREAM_READ_BYTES (64 * 1024)

/* An empty `in` that grew past this (one large reply) is released, so the
 * connection does not pin a copy of that reply's size for its lifetime. */
#define UPSTREAM_KEEP_IN_BYTES (1024 * 1024)

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
    queue_remove(&up->idle_link);
    PX_ASSERT(!queue_linked(&up->held_link)); /* its holder unheld it */
    queue_remove(&up->aux_link);
    resp_framer_free(up->fr);
    buf_free(&up->in);
    wq_free(&up->wq);
    tls_conn_free(up->tls);
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

    if (up->state == UP_IDLE && up->res.busy) {
        /* The last attempt's lookup outlived its timeout: its thread is
         * still busy, and the request cannot start another one. */
        uv_timer_start(&up->timer, upstream_on_reconnect_timer,
                       UPSTREAM_BACKOFF_MAX_MS, 0);
    } else if (up->state == UP_IDLE) {
        if (up->mnode != NULL) {
            up->mnode->reconnects++;
        }
        upstream_connect(up);
    }
}

static void upstream_connect_addr(struct upstream *up);

/* A new socket handle for the next connect (an attempt, or the lookup's
 * next address within one). */
static void upstream_tcp_new(struct upstream *up)
{
    uv_tcp_init(up->core->loop, &up->tcp);
    up->tcp_open = 1;
    uv_tcp_nodelay(&up->tcp, 1);
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
    if (up->next_addr && up->state == UP_CONNECTING) {
        /* The same attempt, on the lookup's next address: what waits in
         * the write queue (the setup, the requests) was never written. */
        up->next_addr = 0;
        upstream_tcp_new(up);
        upstream_connect_addr(up);
        return;
    }
    up->next_addr = 0;
    /* A shared upstream: try again after the backoff. */
    up->state = UP_IDLE;
    uv_timer_start(&up->timer, upstream_on_reconnect_timer, up->retry_ms, 0);
}

/* The delay before the next reconnect, from the backoff (which doubles for
 * the one after): between half and all of it. */
static unsigned upstream_next_retry(struct upstream *up)
{
    unsigned b = up->backoff_ms, half = b / 2;

    up->rng ^= up->rng << 13;
    up->rng ^= up->rng >> 7;
    up->rng ^= up->rng << 17;
    up->backoff_ms =
        b >= UPSTREAM_BACKOFF_MAX_MS / 2 ? UPSTREAM_BACKOFF_MAX_MS : b * 2;
    return b - half + (unsigned)(up->rng % (half + 1));
}

static void upstream_close_tcp(struct upstream *up)
{
    tls_conn_free(up->tls); /* a new connection, a new handshake */
    up->tls = up->wq.tls = NULL;
    if (up->tcp_open && !uv_is_closing((uv_handle_t *)&up->tcp)) {
        uv_read_stop((uv_stream_t *)&up->tcp);
        up->pending_closes++;
        uv_close((uv_handle_t *)&up->tcp, upstream_on_tcp_close);
    }
}

/* Takes `req`, the oldest owed request, off `up`'s inflight FIFO. */
static void upstream_unlink(struct upstream *up, struct req *req)
{
    queue_remove(&req->unode);
    if (req->limiter) {
        PX_ASSERT(up->limiter_owed > 0);
        up->limiter_owed--;
    }
}

/* Fails every owed request with "upstream <addr> <why>". */
static void upstream_fail_inflight(struct upstream *up, const char *why)
{
    while (!queue_empty(&up->inflight)) {
        struct req *req =
            container_of(queue_head(&up->inflight), struct req, unode);
        upstream_unlink(up, req);
        req_reply_error(req, "upstream %s %s", up->name, why);
    }
}

/* Where a SYNC parked on its private upstream (upstream_send_tunnel) goes
 * on: sent, now that the replies Redis owed before it are in. */
static void upstream_tunnel_resume(struct req *sync)
{
    upstream_send(sync->park_ctx, sync);
}

/* Lets the first SYNC parked on `up` go on once nothing is owed before it,
 * or fails every parked one with "upstream <addr> <why>" (`why` not NULL:
 * the connection is gone). One whose client left is freed. */
static void upstream_tunnel_release(struct upstream *up, const char *why)
{
    while (!queue_empty(&up->tunnel_wait) &&
           (why != NULL || queue_empty(&up->inflight))) {
        struct req *sync =
            container_of(queue_head(&up->tunnel_wait), struct req, unode);
        if (sync->on_reply == NULL) {
            req_free(sync); /* unlinks it */
        } else if (why != NULL) {
            queue_remove(&sync->unode);
            req_reply_error(sync, "upstream %s %s", up->name, why);
        } else {
            req_resume(sync); /* owed from here on: inflight */
        }
    }
}

void upstream_destroy(struct upstream *up, const char *why)
{
    if (up->state == UP_DEAD) {
        return;
    }
    up->state = UP_DEAD;
    up->dlog = &up->own_dlog; /* its node may be freed before it */
    resolve_cancel(&up->res);
    if (up->ops->gone != NULL) {
        up->ops->gone(up, why != NULL);
    }
    up->owner = NULL;
    upstream_fail_inflight(up, why != NULL ? why : "connection closed");
    upstream_setup_resume_rid_waits(up); /* they find no id and say so */
    upstream_tunnel_release(up, why != NULL ? why : "connection closed");
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
    if (up->mnode != NULL) {
        up->mnode->errors++;
    }
    if (up->priv) {
        log_debug("upstream %s (private): %s", up->name, why);
        upstream_destroy(up, why);
        return;
    }
    if (up->state == UP_READY &&
        (up->served ||
         core_now_ms(up->core) - up->ready_ms >= UPSTREAM_HEALTHY_MS)) {
        up->backoff_ms = UPSTREAM_BACKOFF_MIN_MS;
    }
    up->retry_ms = upstream_next_retry(up);
    downlog_tell(up->dlog, downlog_fail(up->dlog, core_now_ms(up->core)),
                 core_now_ms(up->core), "upstream", up->name, why);
    snprintf(up->last_err, sizeof(up->last_err), "%s", why);
    up->state = UP_CLOSING;
    uv_timer_stop(&up->timer);
    queue_remove(&up->dirty_node);
    upstream_fail_inflight(up, why);
    buf_clear(&up->in);
    wq_discard(&up->wq);
    upstream_close_tcp(up);
    /* A node that went away may have lost its slots to a replica: its
     * opener asks for the map soon rather than at the next period. */
    if (up->ops->down != NULL) {
        up->ops->down(up);
    }
}

/* ---------------- Reading replies ---------------- */

/* True when the oldest owed request is a SYNC/PSYNC sent by
 * upstream_send_tunnel: every byte from here on goes to its client. */
static int upstream_tunnel_due(struct upstream *up)
{
    struct req *req;

    if (queue_empty(&up->inflight)) {
        return 0;
    }
    req = container_of(queue_head(&up->inflight), struct req, unode);
    return req->tunnel;
}

/* Relays in[off..len) to the owner as it is, and every later byte; the
 * SYNC request (if still owed) completes with no reply of its own. */
static void upstream_tunnel_relay(struct upstream *up, size_t off)
{
    if (!up->tunnel) {
        struct req *req =
            container_of(queue_head(&up->inflight), struct req, unode);
        upstream_unlink(up, req);
        up->tunnel = 1;
        req_reply(req, "", 0);
    }
    if (up->ops->push != NULL && up->in.len > off) {
        up->ops->push(up, up->in.data + off, up->in.len - off);
    }
    buf_clear(&up->in);
}

static void upstream_on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b)
{
    struct upstream *up = container_of(h, struct upstream, tcp);

    PX_UNUSED(hint);
    if (up->tls != NULL) { /* ciphertext: tls_feed_buf decrypts into `in` */
        size_t len;
        char *slab = tls_conn_slab(up->tls, &len); /* its context's */
        *b = uv_buf_init(slab, (unsigned)len);
        return;
    }
    PX_CHECK_OOM(buf_reserve(&up->in, UPSTREAM_READ_BYTES));
    *b = uv_buf_init(buf_tail(&up->in), (unsigned)buf_avail(&up->in));
}

/* The reply to one of the proxy's own requests (AUTH, HELLO 3, ASKING,
 * a deferred MULTI), which the client never sees. An error to HELLO fails the
 * connection. Frees `req`. */
static void upstream_swallowed(struct upstream *up, struct req *req,
                               const char *frame, size_t len)
{
    int hello = resp_cmd_arg_is(req->cmd, 0, "hello");
    int shown = (int)(len > 200 ? 200 : len - 2);
    char name[16];
    size_t nlen;
    const char *p = resp_cmd_arg(req->cmd, 0, &nlen);

    snprintf(name, sizeof(name), "%.*s", (int)nlen, p);
    req_reply(req, frame, len);
    if (frame[0] != '-') {
        return;
    }
    if (strcmp(name, "AUTH") == 0) {
        /* Every request would get -NOAUTH: the connection is of no use,
         * and reconnects back off until the credentials work (the
         * failure says why, as the node's downlog decides). */
        upstream_fail(up, "unavailable: AUTH failed (%.*s)",
                      (int)(len > 100 ? 100 : len - 2), frame + 1);
        return;
    }
    if (!hello) {
        log_error("upstream %s: %s failed: %.*s", up->name, name, shown, frame);
        return;
    }
    upstream_fail(up, "unavailable: RESP3 refused (HELLO 3: %.*s)",
                  (int)(len > 100 ? 100 : len - 2), frame + 1);
}

/* A RESP3 push frame: it answers no request. */
static int upstream_on_push(struct upstream *up, const char *frame, size_t len)
{
    if (up->ops->push == NULL) {
        log_debug("upstream %s: push frame on a shared connection dropped",
                  up->name);
        return 0;
    }
    if (up->ops->frame != NULL) {
        up->ops->frame(up, frame, len);
    }
    up->ops->push(up, frame, len);
    return up->state == UP_READY ? 0 : -1;
}

/* Hands one complete reply frame (its value of type `type`) to its request.
 * Returns 0, or -1 when the upstream stopped being usable while
 * delivering. */
static int upstream_deliver(struct upstream *up, const char *frame, size_t len,
                            char type)
{
    struct req *req;

    if (type == '>' && up->proto == RESP_PROTO3) {
        return upstream_on_push(up, frame, len);
    }
    if (up->ops->frame != NULL) {
        up->ops->frame(up, frame, len);
    }
    if (!up->served && upstream_reply_refused(frame, len)) {
        /* Redis refusing the connection as it accepts it: this error
         * answers none of the requests sent, which it drops. */
        upstream_fail(up, "unavailable: %.*s", (int)(len > 100 ? 100 : len - 2),
                      frame + 1);
        return -1;
    }
    if (queue_empty(&up->inflight)) {
        if (up->ops->push == NULL && frame[0] == '-') {
            /* Redis refusing the connection before any request, in other
             * words than upstream_reply_refused knows. */
            upstream_fail(up, "unavailable: %.*s",
                          (int)(len > 100 ? 100 : len - 2), frame + 1);
            return -1;
        }
        if (up->ops->push == NULL) {
            upstream_fail(up, "sent a reply nobody asked for");
            return -1;
        }
        up->ops->push(up, frame, len);
        return up->state == UP_READY ? 0 : -1;
    }
    req = container_of(queue_head(&up->inflight), struct req, unode);
    if (req->until_reset &&
        !(len == 8 && memcmp(frame, "+RESET\r\n", 8) == 0)) {
        /* A message of the subscription (or a MONITOR line) that the
         * RESET ahead of it ends: nobody wants it any more. */
        return 0;
    }
    upstream_unlink(up, req);
    up->limiter_answers += req->limiter;
    if (frame[0] == '-' && up->mnode != NULL) {
        upstream_reply_count(up->mnode, frame, len);
    }
    if (frame[0] != '-' && !up->served) {
        up->served = 1;
        up->backoff_ms = UPSTREAM_BACKOFF_MIN_MS;
        if (!up->priv) {
            downlog_tell(up->dlog, downlog_ok(up->dlog), core_now_ms(up->core),
                         "upstream", up->name, NULL);
        }
    }
    if (frame[0] == '-' && up->ops->error != NULL &&
        up->ops->error(up, req, frame, len)) {
        /* Re-sent to the node the cluster named, or answered. */
        return up->state == UP_READY ? 0 : -1;
    }
    if (req->swallow) {
        upstream_swallowed(up, req, frame, len);
    } else {
        req_reply(req, frame, len);
    }
    return up->state == UP_READY ? 0 : -1;
}

static void upstream_ready(struct upstream *up);

/* Decrypts the `n` bytes read into `in` (*plain: how many it added), and
 * writes what the handshake answers. 0 to go on, -1 when `up` failed. */
static int upstream_tls_read(struct upstream *up, const char *p, size_t n,
                             ssize_t *plain)
{
    char why[TLS_WHY_SIZE];
    size_t before = up->in.len;
    int rc = tls_feed_buf(up->tls, p, n, &up->in, why, sizeof(why));

    if (rc == TLS_ERR || rc == TLS_CLOSED) {
        upstream_fail(up, "%s: %s",
                      up->served ? "connection lost" : "unavailable",
                      rc == TLS_ERR ? why : "TLS session closed by the peer");
        return -1;
    }
    if (rc == TLS_OPENED) {
        upstream_ready(up); /* its setup requests go in the flush pass */
    } else if (up->state != UP_READY && (rc = wq_flush(&up->wq)) < 0) {
        upstream_fail(up, "unavailable: %s", uv_strerror(rc));
        return -1;
    } else if (up->wq.enc.len > 0) {
        upstream_mark(up); /* a record OpenSSL answers after the handshake */
    }
    *plain = (ssize_t)(up->in.len - before);
    return 0;
}

static void upstream_on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
    struct upstream *up = container_of(s, struct upstream, tcp);
    size_t off = 0, len;
    char type;
    int rc;

    if (nread < 0 && up->tls != NULL && up->state == UP_CONNECTING) {
        upstream_fail(up, "unavailable: TLS handshake failed: connection "
                          "closed by the peer");
        return;
    }
    if (nread < 0) {
        if (nread == UV_EOF) {
            upstream_fail(up, "connection lost");
        } else {
            upstream_fail(up, "connection lost: %s", uv_strerror((int)nread));
        }
        return;
    }
    if (nread > 0 && up->tls != NULL &&
        upstream_tls_read(up, b->base, (size_t)nread, &nread) != 0) {
        return;
    }
    if (nread == 0 || up->state != UP_READY) {
        return;
    }
    up->last_read_ms = core_now_ms(up->core);
    if (up->tls == NULL) {
        buf_commit(&up->in, (size_t)nread);
    }
    if (up->tunnel) {
        upstream_tunnel_relay(up, 0);
        return;
    }
    if (resp_framer_feed(up->fr, buf_tail(&up->in) - nread, (size_t)nread) !=
        RESP_OK) {
        px_oom((size_t)nread);
    }
    for (;;) {
        if (upstream_tunnel_due(up)) {
            /* SYNC/PSYNC: what follows is a replication stream (an RDB
             * payload without CRLF, newlines as pings), not replies. */
            upstream_tunnel_relay(up, off);
            return;
        }
        rc = resp_framer_next_typed(up->fr, &len, &type);
        if (rc != RESP_OK) {
            break;
        }
        if (upstream_deliver(up, up->in.data + off, len, type) != 0) {
            return;
        }
        off += len;
    }
    if (rc != RESP_AGAIN) {
        upstream_fail(up, "protocol error in reply");
        return;
    }
    buf_consume(&up->in, off);
    if (up->in.len == 0 && up->in.cap > UPSTREAM_KEEP_IN_BYTES) {
        buf_free(&up->in);
    }
    upstream_tunnel_release(up, NULL);
    if (up->ops->idle != NULL) {
        up->ops->idle(up);
    }
}

/* ---------------- Connecting ---------------- */

static void upstream_on_connect_timeout(uv_timer_t *t)
{
    struct upstream *up = container_of(t, struct upstream, timer);

    if (up->state == UP_CONNECTING) {
        if (up->mnode != NULL) {
            up->mnode->timeouts++;
        }
        upstream_fail(up, "unavailable: %s timed out",
                      up->tls != NULL ? "TLS handshake" : "connect");
    }
}

static void upstream_on_connect(uv_connect_t *creq, int status)
{
    struct upstream *up = container_of(creq, struct upstream, connect_req);
    struct tls_ctx *ctx;
    int rc;

    if (status == UV_ECANCELED || up->state != UP_CONNECTING) {
        return;
    }
    uv_timer_stop(&up->timer);
    if (status < 0) {
        up->addr_next++; /* the next attempt tries the name's next address */
        if (up->addr_left > 0) {
            /* A name with several addresses (localhost: ::1 and
             * 127.0.0.1) whose server listens on one of them: try the
             * next now, within the connect timeout, as a client library
             * does, rather than failing what waits for this attempt. */
            up->addr_left--;
            up->next_addr = 1;
            upstream_close_tcp(up);
            return;
        }
        upstream_fail(up, "unavailable: %s", uv_strerror(status));
        return;
    }
    rc = uv_read_start((uv_stream_t *)&up->tcp, upstream_on_alloc,
                       upstream_on_read);
    ctx = up->sentinel ? up->core->sentinel_tls : up->core->tls;
    if (rc == 0 && ctx != NULL) {
        /* TLS: CONNECTING until the handshake completes, on the same
         * timeout; the ClientHello goes now. upstream_tls_server_name
         * names the data's nodes, not the sentinels. */
        up->tls = up->wq.tls = tls_conn_client(
            ctx, up->name,
            up->sentinel ? NULL : up->core->conf->tls.up_server_name,
            &up->wq.enc);
        uv_timer_start(&up->timer, upstream_on_connect_timeout,
                       up->core->conf->connect_timeout_ms, 0);
        rc = wq_flush(&up->wq);
    }
    if (rc < 0) {
        upstream_fail(up, "unavailable: %s", uv_strerror(rc));
    } else if (up->tls == NULL) {
        upstream_ready(up);
    }
}

static void upstream_ready(struct upstream *up)
{
    uv_timer_stop(&up->timer);
    up->state = UP_READY;
    up->ready_ms = core_now_ms(up->core);
    up->served = 0;
    log_debug("upstream %s: connected%s%s", up->name,
              up->tls != NULL ? " over " : "",
              up->tls != NULL ? tls_conn_version(up->tls) : "");
    upstream_mark(up);
}

/* Connects to the address of this attempt (the host resolved). */
static void upstream_connect_addr(struct upstream *up)
{
    int rc;

    memcpy(&up->sa, &up->res.addr[up->addr_next % up->res.naddr],
           sizeof(up->sa));
    rc = uv_tcp_connect(&up->connect_req, &up->tcp,
                        (const struct sockaddr *)&up->sa, upstream_on_connect);
    if (rc < 0) {
        upstream_fail(up, "unavailable: %s", uv_strerror(rc));
    }
}

static void upstream_on_resolved(struct resolve *r, int status)
{
    struct upstream *up = container_of(r, struct upstream, res);

    up->pending_closes--; /* the lookup held it like a closing handle */
    if (up->state == UP_DEAD) {
        upstream_maybe_free(up);
    } else if (up->state != UP_CONNECTING) {
        return; /* the attempt timed out meanwhile */
    } else if (status < 0) {
        upstream_fail(up, "unavailable: cannot resolve %s: %s", up->host,
                      uv_strerror(status));
    } else {
        up->addr_left = up->res.naddr - 1;
        upstream_connect_addr(up);
    }
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
    wq_discard(&up->wq);
    up->state = UP_CONNECTING;
    upstream_tcp_new(up);
    upstream_setup_queue(up);
    /* The connect timeout covers the lookup too. */
    uv_timer_start(&up->timer, upstream_on_connect_timeout,
                   up->core->conf->connect_timeout_ms, 0);
    up->addr_left = 0;
    rc = resolve_start(&up->res, up->core->loop, up->host, up->port,
                       upstream_on_resolved);
    if (rc == 1) {
        upstream_connect_addr(up);
    } else if (rc == 0) {
        up->pending_closes++; /* freed only after the lookup's callback */
    } else {
        upstream_fail(up, "unavailable: cannot resolve %s: %s", up->host,
                      uv_strerror(rc));
    }
}

static void upstream_on_wq_event(struct wq *wq, int status)
{
    struct upstream *up = container_of(wq, struct upstream, wq);

    if (status < 0) {
        upstream_fail(up, "connection lost: %s", uv_strerror(status));
    }
}

void upstream_mark(struct upstream *up)
{
    if (!queue_linked(&up->dirty_node)) {
        queue_insert_tail(&up->core->dirty_upstreams, &up->dirty_node);
    }
}

/* A new upstream to host:port in `proto`, not connecting yet. */
static struct upstream *upstream_alloc(struct core *core, const char *host,
                                       int port, int proto, unsigned flags,
                                       const struct upstream_ops *ops)
{
    struct upstream *up = px_calloc(1, sizeof(*up));

    up->core = core;
    up->ops = ops;
    snprintf(up->host, sizeof(up->host), "%s", host);
    up->port = port;
    snprintf(up->name, sizeof(up->name), "%s:%d", host, port);
    up->sentinel = (flags & UPSTREAM_SENTINEL) != 0;
    /* A sentinel is no node of the data: none of the nodes' counters. */
    up->mnode = core->metrics != NULL && !up->sentinel
                    ? metrics_node(core->metrics, up->name)
                    : NULL;
    up->dlog = &up->own_dlog;
    up->proto = proto;
    up->limiter = (flags & UPSTREAM_LIMITER) != 0;
    queue_init(&up->inflight);
    queue_init(&up->link);
    queue_init(&up->dirty_node);
    queue_init(&up->idle_link);
    queue_init(&up->held_link);
    queue_init(&up->aux_link);
    queue_init(&up->tunnel_wait);
    queue_init(&up->rid_wait);
    buf_init(&up->in);
    wq_init(&up->wq, (uv_stream_t *)&up->tcp, upstream_on_wq_event);
    uv_timer_init(up->core->loop, &up->timer);
    up->backoff_ms = UPSTREAM_BACKOFF_MIN_MS;
    up->rng = (uv_hrtime() ^ (uint64_t)(uintptr_t)up) | 1;
    up->state = UP_IDLE;
    queue_insert_tail(&core->upstreams, &up->link);
    return up;
}

struct upstream *upstream_new(struct core *core, const char *host, int port,
                              struct node *node, int proto, unsigned flags,
                              const struct upstream_ops *ops)
{
    struct upstream *up = upstream_alloc(core, host, port, proto, flags, ops);

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

struct upstream *upstream_new_private(struct core *core, const char *host,
                                      int port, int proto, unsigned flags,
                                      const struct upstream_ops *ops)
{
    struct upstream *up = upstream_alloc(core, host, port, proto, flags, ops);

    up->priv = 1;
    upstream_connect(up);
    return up;
}

/* ---------------- Sending ---------------- */

/* Completes `req` with "unavailable" when `up` cannot take requests now.
 * Returns 1 when it did (`req` may be freed). */
static int upstream_refuse(struct upstream *up, struct req *req)
{
    if (up->state != UP_READY && up->state != UP_CONNECTING) {
        /* last_err may already say "unavailable: <why>" (a failed
         * connect): say the word once. */
        const char *why = up->last_err[0] ? up->last_err : "not connected";
        if (strncmp(why, "unavailable: ", 13) == 0) {
            why += 13;
        }
        req_reply_error(req, "upstream %s unavailable: %s", up->name, why);
        return 1;
    }
    return 0;
}

void upstream_send(struct upstream *up, struct req *req)
{
    if (upstream_refuse(up, req)) {
        return;
    }
    PX_CHECK_OOM(buf_append(&up->wq.out, req->cmd->raw, req->cmd->raw_len));
    if (up->mnode != NULL) {
        up->mnode->requests++;
    }
    req->sent_ms = core_now_ms(up->core);
    queue_insert_tail(&up->inflight, &req->unode);
    up->limiter_owed += req->limiter;
    if (up->state == UP_READY) {
        upstream_mark(up);
    }
}

int upstream_limiter_turn(const struct upstream *up)
{
    return up->limiter_owed == 0 || up->limiter_answers != up->limiter_turned;
}

void upstream_limiter_took(struct upstream *up)
{
    up->limiter_turned = up->limiter_answers;
}

void upstream_send_pushed(struct upstream *up, struct req *req)
{
    if (upstream_refuse(up, req)) {
        return;
    }
    PX_CHECK_OOM(buf_append(&up->wq.out, req->cmd->raw, req->cmd->raw_len));
    if (up->state == UP_READY) {
        upstream_mark(up);
    }
    req_reply(req, "", 0);
}

void upstream_send_tunnel(struct upstream *up, struct req *req)
{
    if (up->tunnel) {
        /* REPLCONF ACK and the like: no reply comes back. */
        if (!upstream_refuse(up, req)) {
            PX_CHECK_OOM(
                buf_append(&up->wq.out, req->cmd->raw, req->cmd->raw_len));
            if (up->state == UP_READY) {
                upstream_mark(up);
            }
            req_reply(req, "", 0);
        }
        return;
    }
    req->tunnel = 1;
    if (!queue_empty(&up->inflight) || !queue_empty(&up->tunnel_wait)) {
        /* Redis refuses SYNC while it owes this connection replies (the
         * setup's, the client's before it): it goes once they are in.
         * Parked by unode, so a client that leaves meanwhile makes it an
         * orphan. */
        if (!upstream_refuse(up, req)) {
            req_park(&up->tunnel_wait, req, upstream_tunnel_resume, up);
        }
        return;
    }
    upstream_send(up, req);
}

void upstream_queue_first(struct upstream *up, int argc,
                          const char *const *argv, const size_t *lens,
                          req_reply_fn *fn, void *ctx)
{
    struct req *req = upstream_setup_own(up, argc, argv, lens);

    req->swallow = 0;
    req->on_reply = fn;
    req->ctx = ctx;
}

void upstream_reset(struct upstream *up)
{
    const char *argv[1] = { "RESET" };
    size_t lens[1] = { 5 };
    struct req *req;

    if (!upstream_is_usable(up)) {
        return;
    }
    req = upstream_setup_own(up, 1, argv, lens);
    req->until_reset = 1;
    upstream_setup_auth(up);
    up->proto = RESP_PROTO2; /* RESET goes back to RESP2 */
    if (up->state == UP_READY) {
        upstream_mark(up);
    }
}

void upstream_wait_rid(struct upstream *up, struct req *req,
                       req_resume_fn *resume)
{
    if (up->rid != 0 || !upstream_is_usable(up)) {
        resume(req);
        return;
    }
    req_park(&up->rid_wait, req, resume, NULL);
}

void upstream_switch_proto(struct upstream *up, int proto)
{
    if (up->proto == proto) {
        return;
    }
    up->proto = proto;
    if (upstream_is_usable(up)) {
        upstream_setup_hello(up, proto);
        if (up->state == UP_READY) {
            upstream_mark(up);
        }
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

void upstream_flush_dirty(struct core *core)
{
    while (!queue_empty(&core->dirty_upstreams)) {
        struct queue *n = queue_head(&core->dirty_upstreams);
        queue_remove(n);
        upstream_flush(container_of(n, struct upstream, dirty_node));
    }
}

/* How long `up` has been silent while owing replies: since its oldest owed
 * request was sent or its last bytes arrived, whichever is later. 0 when
 * it owes nothing. */
static uint64_t upstream_silent_ms(const struct upstream *up, uint64_t now_ms)
{
    const struct req *req;
    uint64_t start;

    if (queue_empty(&up->inflight)) {
        return 0;
    }
    req = container_of(queue_head(&up->inflight), struct req, unode);
    start = req->sent_ms > up->last_read_ms ? req->sent_ms : up->last_read_ms;
    return now_ms - start;
}

int upstream_is_stalled(const struct upstream *up, uint64_t now_ms)
{
    return !queue_empty(&up->inflight) &&
           upstream_silent_ms(up, now_ms) >= UPSTREAM_STALL_MS;
}

void upstream_check_timeout(struct upstream *up, uint64_t now_ms,
                            unsigned timeout_ms)
{
    if (up->priv || up->state != UP_READY || timeout_ms == 0 ||
        queue_empty(&up->inflight)) {
        return;
    }
    if (upstream_silent_ms(up, now_ms) > timeout_ms) {
        if (up->mnode != NULL) {
            up->mnode->timeouts++;
        }
        upstream_fail(up, "command timed out after %u ms", timeout_ms);
    }
}
