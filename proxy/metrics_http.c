/* The metrics endpoint (see metrics_http.h).
 *
 *   accept (over the cap: 503 at once; over the refusals' cap too:
 *           closed at once)
 *     -> read into conn->head, parse the whole head again (http_req.c)
 *          MORE -> read on (a full buffer: 431)    BAD -> 400
 *          DONE -> route: GET /metrics 200, other paths 404, other
 *                  methods 405, HTTP/2+ 505
 *     -> write the response, then shut our side down and read (and drop)
 *        whatever the client still sends until it closes: closing with
 *        unread bytes would reset the connection and could destroy the
 *        response before the client read it
 *     -> close (two handles: tcp and timer, freed when both are closed)
 *
 * A 200's body is rendered in slices (metrics_text_prometheus_rules), one
 * write in flight at a time: the next slice is rendered when the last one
 * has gone to the kernel. A large limits tree renders tens of megabytes;
 * in slices, each loop turn spends at most one slice per scrape on it,
 * and a scraper that stops reading holds one slice of ours, however large
 * the tree. Its length is unknown when the head goes out, so the body
 * ends with the connection (no Content-Length), as HTTP/1.0 and 1.1 both
 * allow.
 *
 * The timer runs from accept and closes whatever is still open when it
 * fires, slow senders and slow readers alike; while a body is streaming
 * it runs again from each slice written, up to METRICS_HTTP_MAX_SEND_MS
 * in all. */
#include "proxy/metrics_http.h"

#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "conf/conf.h"
#include "parser/buf.h"
#include "parser/http_req.h"
#include "proxy/core/core.h"
#include "proxy/core/log.h"
#include "proxy/core/util.h"
#include "proxy/info.h"
#include "proxy/info_snapshot.h"
#include "proxy/metrics_text.h"
#include "proxy/server.h"

/* listen(2) backlog: scrapers come one at a time. */
#define METRICS_HTTP_BACKLOG 64

/* One connection. */
struct metrics_conn {
    uv_tcp_t tcp;                     /* embedded */
    uv_timer_t timer;                 /* its deadline */
    uv_write_t wr;                    /* the response's write */
    uv_shutdown_t sd;                 /* our side's FIN after it */
    struct metrics_http *h;           /* borrowed: its endpoint */
    struct queue link;                /* link in h->conns */
    char head[METRICS_HTTP_MAX_HEAD]; /* the request head so far */
    size_t used;                      /* bytes of head */
    struct buf out;                   /* owned: the response (or its
                                         slice), until its write's
                                         callback */
    struct metrics_text_cursor cur;   /* a 200's body: where it stands */
    uint64_t streaming_since;         /* loop ms the body started */
    int pending_closes;               /* handles still closing */
    unsigned answered : 1;            /* a response is on its way */
    unsigned streaming : 1;           /* ... a 200 whose body is not
                                         all rendered yet */
    unsigned refusing : 1;            /* counted in h->nrefusing */
    unsigned written : 1;             /* ... and was written */
    unsigned eof : 1;                 /* the client closed its side
                                         before the response was out */
    unsigned closing : 1;             /* metrics_conn_close ran */
};

static void metrics_conn_on_close(uv_handle_t *hd)
{
    struct metrics_conn *c = hd->type == UV_TIMER
                                 ? container_of(hd, struct metrics_conn, timer)
                                 : container_of(hd, struct metrics_conn, tcp);

    if (--c->pending_closes > 0) {
        return;
    }
    buf_free(&c->out);
    px_free(c);
}

static void metrics_conn_close(struct metrics_conn *c)
{
    if (c->closing) {
        return;
    }
    c->closing = 1;
    queue_remove(&c->link);
    if (c->refusing) {
        c->h->nrefusing--;
    } else {
        c->h->nconns--;
    }
    uv_close((uv_handle_t *)&c->timer, metrics_conn_on_close);
    uv_close((uv_handle_t *)&c->tcp, metrics_conn_on_close);
}

static void metrics_conn_on_timer(uv_timer_t *t)
{
    metrics_conn_close(container_of(t, struct metrics_conn, timer));
}

static void metrics_conn_alloc(uv_handle_t *hd, size_t hint, uv_buf_t *b)
{
    struct metrics_conn *c = container_of(hd, struct metrics_conn, tcp);

    PX_UNUSED(hint);
    if (c->answered) {
        /* Draining after the response: the bytes are dropped. */
        b->base = c->head;
        b->len = sizeof(c->head);
        return;
    }
    b->base = c->head + c->used;
    b->len = sizeof(c->head) - c->used;
}

static void metrics_conn_on_shutdown(uv_shutdown_t *sd, int status)
{
    struct metrics_conn *c = container_of(sd, struct metrics_conn, sd);

    if (status < 0 && !c->closing) {
        metrics_conn_close(c);
    }
}

static void metrics_conn_on_write(uv_write_t *wr, int status);

/* Writes c->out (the write's callback frees it). 0, or -1 after closing
 * the connection. */
static int metrics_conn_write(struct metrics_conn *c)
{
    uv_buf_t ub = uv_buf_init(c->out.data, (unsigned)c->out.len);

    if (uv_write(&c->wr, (uv_stream_t *)&c->tcp, &ub, 1,
                 metrics_conn_on_write) < 0) {
        buf_free(&c->out);
        metrics_conn_close(c);
        return -1;
    }
    return 0;
}

/* Renders the next slice of a 200's body into c->out (empty): 1 when the
 * body is complete. */
static int metrics_conn_slice(struct metrics_conn *c)
{
    int done = 0;

    /* Room for a slice and the rule that ends it, once: the connection
     * keeps this one buffer while its body streams. */
    PX_CHECK_OOM(buf_reserve(&c->out, METRICS_HTTP_SLICE_BYTES + 8192));
    /* A slice that renders nothing (the rules ended exactly at the last
     * one) goes straight on to the next stage. */
    while (c->out.len == 0 && !done) {
        struct info_snapshot snap;
        if (!metrics_text_prometheus_rules(
                &c->cur, &c->out, METRICS_HTTP_SLICE_BYTES, &server.metrics)) {
            continue;
        }
        /* The last slice: only it reads the clients and the rest. */
        info_snapshot_take(&snap);
        metrics_text_prometheus_rest(&c->out, &snap);
        info_snapshot_free(&snap);
        done = 1;
    }
    return done;
}

static void metrics_conn_on_write(uv_write_t *wr, int status)
{
    struct metrics_conn *c = container_of(wr, struct metrics_conn, wr);
    uint64_t now;

    if (c->closing || status < 0 || !c->streaming) {
        buf_free(&c->out);
    } else {
        buf_clear(&c->out); /* the next slice goes in the same memory */
    }
    if (c->closing) {
        return;
    }
    if (status == 0 && c->streaming) {
        /* The last slice reached the kernel: the next one, on a deadline
         * that runs from now (a steady reader of a large body is not
         * cut off), but never past the cap on the whole body. */
        now = uv_now(c->h->loop);
        if (now - c->streaming_since < METRICS_HTTP_MAX_SEND_MS) {
            uint64_t left =
                METRICS_HTTP_MAX_SEND_MS - (now - c->streaming_since);
            px_uv_must(uv_timer_start(&c->timer, metrics_conn_on_timer,
                                      left < METRICS_HTTP_TIMEOUT_MS
                                          ? left
                                          : METRICS_HTTP_TIMEOUT_MS,
                                      0),
                       "metrics: slice deadline");
        }
        c->streaming = !metrics_conn_slice(c);
        if (c->out.len > 0) {
            metrics_conn_write(c);
            return;
        }
    }
    c->streaming = 0;
    c->written = 1;
    if (status < 0 || c->eof ||
        uv_shutdown(&c->sd, (uv_stream_t *)&c->tcp, metrics_conn_on_shutdown) <
            0) {
        metrics_conn_close(c);
    }
}

static void metrics_conn_on_read(uv_stream_t *s, ssize_t nread,
                                 const uv_buf_t *b);

/* Sends status `status` with its reason text as the body, then closes our
 * side. */
static void metrics_conn_respond(struct metrics_conn *c, const char *status,
                                 const char *extra)
{
    size_t len = strlen(status);
    char head[256];
    int n;

    n = snprintf(head, sizeof(head),
                 "HTTP/1.1 %s\r\nContent-Type: text/plain; "
                 "charset=utf-8\r\nContent-Length: %zu\r\n"
                 "Connection: close\r\n%s\r\n",
                 status, len + 1, extra);
    PX_CHECK_OOM(buf_append(&c->out, head, (size_t)n));
    PX_CHECK_OOM(buf_append(&c->out, status, len));
    PX_CHECK_OOM(buf_append(&c->out, "\n", 1));
    c->answered = 1;
    metrics_conn_write(c);
}

/* GET /metrics: the head, then the body in slices (see above). */
static void metrics_conn_stream(struct metrics_conn *c)
{
    PX_CHECK_OOM(buf_append_str(
        &c->out, "HTTP/1.1 200 OK\r\nContent-Type: text/plain; "
                 "version=0.0.4; charset=utf-8\r\nConnection: close\r\n\r\n"));
    c->answered = 1;
    c->streaming = 1;
    c->streaming_since = uv_now(c->h->loop);
    metrics_conn_write(c);
}

/* Answers a complete head. */
static void metrics_conn_route(struct metrics_conn *c, const struct http_req *r)
{
    if (r->major != 1) {
        metrics_conn_respond(c, "505 HTTP Version Not Supported", "");
    } else if (!http_req_path_is(r->target, r->target_len, "/metrics")) {
        metrics_conn_respond(c, "404 Not Found", "");
    } else if (r->method_len != 3 || memcmp(r->method, "GET", 3) != 0) {
        metrics_conn_respond(c, "405 Method Not Allowed", "Allow: GET\r\n");
    } else {
        metrics_conn_stream(c);
    }
}

static void metrics_conn_on_read(uv_stream_t *s, ssize_t nread,
                                 const uv_buf_t *b)
{
    struct metrics_conn *c = container_of(s, struct metrics_conn, tcp);
    struct http_req r;

    PX_UNUSED(b);
    if (nread == 0) {
        return;
    }
    if (nread < 0 && c->answered && !c->written) {
        /* The client only closed its side: the response still goes out,
         * and the connection closes once it has. */
        c->eof = 1;
        uv_read_stop(s);
        return;
    }
    if (nread < 0) {
        metrics_conn_close(c); /* EOF, an error, or the drain is over */
        return;
    }
    if (c->answered) {
        return; /* dropped */
    }
    c->used += (size_t)nread;
    switch (http_req_parse(c->head, c->used, &r)) {
    case HTTP_REQ_DONE:
        metrics_conn_route(c, &r);
        return;
    case HTTP_REQ_BAD:
        metrics_conn_respond(c, "400 Bad Request", "");
        return;
    case HTTP_REQ_MORE:
        break;
    }
    if (c->used == sizeof(c->head)) {
        metrics_conn_respond(c, "431 Request Header Fields Too Large", "");
    }
}

static void metrics_http_on_refused_close(uv_handle_t *hd)
{
    px_free(hd);
}

static void metrics_http_on_connection(uv_stream_t *ls, int status)
{
    struct metrics_http *h = container_of(ls, struct metrics_http, listener);
    struct metrics_conn *c;

    if (status < 0) {
        log_warn("metrics: accept error: %s", uv_strerror(status));
        return;
    }
    if (h->nconns >= METRICS_HTTP_MAX_CONNS &&
        h->nrefusing >= METRICS_HTTP_MAX_REFUSING) {
        /* Taken off the backlog and closed: a flood of scrapers waits in
         * no queue of ours. */
        uv_tcp_t *t = px_calloc(1, sizeof(*t));
        px_uv_must(uv_tcp_init(h->loop, t), "metrics: refused connection");
        if (uv_accept(ls, (uv_stream_t *)t) == 0) {
            h->refused++;
        }
        uv_close((uv_handle_t *)t, metrics_http_on_refused_close);
        return;
    }
    c = px_calloc(1, sizeof(*c));
    c->h = h;
    buf_init(&c->out);
    px_uv_must(uv_tcp_init(h->loop, &c->tcp), "metrics: connection init");
    px_uv_must(uv_timer_init(h->loop, &c->timer), "metrics: deadline init");
    c->pending_closes = 2;
    queue_insert_tail(&h->conns, &c->link);
    c->refusing = h->nconns >= METRICS_HTTP_MAX_CONNS;
    if (c->refusing) {
        h->nrefusing++;
    } else {
        h->nconns++;
    }
    if (uv_accept(ls, (uv_stream_t *)&c->tcp) < 0 ||
        uv_read_start((uv_stream_t *)&c->tcp, metrics_conn_alloc,
                      metrics_conn_on_read) < 0) {
        metrics_conn_close(c);
        return;
    }
    px_uv_must(uv_timer_start(&c->timer, metrics_conn_on_timer,
                              METRICS_HTTP_TIMEOUT_MS, 0),
               "metrics: deadline start");
    if (c->refusing) {
        /* Over the cap: told so at once, whatever it asks, then drained
         * and closed like any answered connection. */
        h->refused++;
        metrics_conn_respond(c, "503 Service Unavailable",
                             "Retry-After: 1\r\n");
    }
}

int metrics_http_start(struct metrics_http *h, uv_loop_t *loop,
                       const struct conf_addr *addr)
{
    int rc;

    memset(h, 0, sizeof(*h));
    h->loop = loop;
    queue_init(&h->conns);
    if (addr->port == 0) {
        return PX_OK;
    }
    rc = core_listen(loop, &h->listener, addr, METRICS_HTTP_BACKLOG,
                     metrics_http_on_connection, "metrics_listen");
    h->listening = rc != CORE_LISTEN_UNRESOLVED;
    if (rc != CORE_LISTEN_OK) {
        return PX_ERR;
    }
    log_info("metrics on http://%s:%d/metrics", addr->host, addr->port);
    return PX_OK;
}

void metrics_http_stop(struct metrics_http *h)
{
    if (h->listening) {
        uv_close((uv_handle_t *)&h->listener, NULL);
        h->listening = 0;
    }
    while (!queue_empty(&h->conns)) {
        metrics_conn_close(
            container_of(queue_head(&h->conns), struct metrics_conn, link));
    }
}
