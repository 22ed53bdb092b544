/* Write queue: batching of replies and requests into as few syscalls as
 * possible (Redis's handleClientsWithPendingWrites, docs/ARCHITECTURE.md).
 *
 *   appenders --> out --(uv_try_write)--> kernel
 *                  |
 *                  +--(rest, swapped)--> inflight --(uv_write)--> kernel
 *
 * `inflight` is never touched while `writing` is set (docs/ARCHITECTURE.md). */
#include "proxy/core/wq.h"

#include "proxy/core/util.h"

/* A buffer that grew beyond this is released once empty, so one large reply
 * does not pin memory for the connection's lifetime. */
#define WQ_SHRINK_BYTES (1024 * 1024)

/* Largest piece handed to libuv at once, and how many pieces one write may
 * have: 16 GiB per write, far above any output limit. */
#define WQ_CHUNK    ((size_t)1 << 30)
#define WQ_MAX_BUFS 16

static void wq_release_if_large(struct buf *b)
{
    if (b->len == 0 && b->cap > WQ_SHRINK_BYTES) {
        buf_free(b);
    }
}

void wq_init(struct wq *wq, uv_stream_t *stream, wq_error_fn *on_error)
{
    wq->stream = stream;
    wq->on_error = on_error;
    buf_init(&wq->out);
    buf_init(&wq->inflight);
    wq->writing = 0;
}

void wq_free(struct wq *wq)
{
    buf_free(&wq->out);
    buf_free(&wq->inflight);
}

static void wq_on_write(uv_write_t *wreq, int status)
{
    struct wq *wq = container_of(wreq, struct wq, wreq);
    int rc;

    wq->writing = 0;
    buf_clear(&wq->inflight);
    wq_release_if_large(&wq->inflight);
    if (status < 0) {
        /* UV_ECANCELED: the stream is closing; the owner knows. */
        if (status != UV_ECANCELED) {
            wq->on_error(wq, status);
        }
        return;
    }
    rc = wq_flush(wq);
    if (rc < 0) {
        wq->on_error(wq, rc);
    }
}

/* Splits `b` into uv_buf_t pieces of at most WQ_CHUNK bytes (uv_buf_t holds
 * an unsigned int length). Returns the number of pieces used. */
static unsigned wq_bufs(const struct buf *b, uv_buf_t *ub, unsigned max)
{
    size_t off = 0;
    unsigned n = 0;

    while (off < b->len && n < max) {
        size_t len = b->len - off;
        if (len > WQ_CHUNK) {
            len = WQ_CHUNK;
        }
        ub[n++] = uv_buf_init(b->data + off, (unsigned)len);
        off += len;
    }
    return n;
}

int wq_flush(struct wq *wq)
{
    uv_buf_t ub[WQ_MAX_BUFS];
    unsigned nb;
    int n, rc;

    if (wq->writing || wq->out.len == 0) {
        return 0;
    }
    nb = wq_bufs(&wq->out, ub, 1);
    n = uv_try_write(wq->stream, ub, nb);
    if (n >= 0 && (size_t)n == wq->out.len) {
        buf_clear(&wq->out);
        wq_release_if_large(&wq->out);
        return 0;
    }
    if (n < 0 && n != UV_EAGAIN) {
        return n;
    }
    if (n > 0) {
        buf_consume(&wq->out, (size_t)n);
    }
    buf_swap(&wq->out, &wq->inflight);
    nb = wq_bufs(&wq->inflight, ub, WQ_MAX_BUFS);
    PX_ASSERT(nb < WQ_MAX_BUFS || wq->inflight.len <= WQ_CHUNK * nb);
    rc = uv_write(&wq->wreq, wq->stream, ub, nb, wq_on_write);
    if (rc < 0) {
        /* The callback will never run: take the bytes back. */
        buf_swap(&wq->out, &wq->inflight);
        return rc;
    }
    wq->writing = 1;
    return 0;
}
