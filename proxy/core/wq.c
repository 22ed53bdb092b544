/* Write queue: batching of replies and requests into as few syscalls as
 * possible (Redis's handleClientsWithPendingWrites; docs/ARCHITECTURE.md
 * "How a reply finds its client, in order").
 *
 *   appenders --> out --(uv_try_write)--> kernel
 *                  |
 *                  +--(rest, swapped)--> inflight --(uv_write)--> kernel
 *
 * `inflight` is never touched while `writing` is set (docs/ARCHITECTURE.md
 * "Buffers and lifetimes").
 *
 * TLS (wq->tls set): `out` is sealed into `enc` (tls_seal), and `enc` takes
 * the place of `out` above. At most WQ_SEAL_BYTES of records wait in
 * `enc`: a 70 MB reply is sealed piece by piece as the kernel takes it,
 * not copied whole. Nothing is sealed before the handshake completes, and
 * the handshake's records go to `enc` directly, so no byte of `out` ever
 * leaves in plaintext. A plaintext connection pays one NULL check. */
#include "proxy/core/wq.h"

#include "proxy/core/tls.h"
#include "proxy/core/util.h"

/* A buffer that grew beyond this is released once empty, so one large reply
 * does not pin memory for the connection's lifetime. */
#define WQ_SHRINK_BYTES (1024 * 1024)

/* Largest piece handed to libuv at once, and how many pieces one write may
 * have: 16 GiB per write, far above any output limit. */
#define WQ_CHUNK    ((size_t)1 << 30)
#define WQ_MAX_BUFS 16

/* TLS records sealed ahead of the kernel, at most (see the top). */
#define WQ_SEAL_BYTES (256 * 1024)

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
    buf_init(&wq->enc);
    wq->tls = NULL;
    wq->sealed = 0;
    wq->writing = 0;
}

void wq_free(struct wq *wq)
{
    buf_free(&wq->out);
    buf_free(&wq->inflight);
    buf_free(&wq->enc);
}

void wq_discard(struct wq *wq)
{
    buf_clear(&wq->out);
    buf_clear(&wq->enc);
    wq->sealed = 0;
}

/* Seals what `out` holds into `enc`, up to WQ_SEAL_BYTES waiting there,
 * once the handshake is over. 0, or -1 when OpenSSL failed. */
static int wq_seal(struct wq *wq)
{
    char why[TLS_WHY_SIZE];

    if (!tls_conn_is_open(wq->tls)) {
        return 0;
    }
    while (wq->sealed < wq->out.len && wq->enc.len < WQ_SEAL_BYTES) {
        size_t n = wq->out.len - wq->sealed;
        if (n > WQ_SEAL_BYTES) {
            n = WQ_SEAL_BYTES;
        }
        if (tls_seal(wq->tls, wq->out.data + wq->sealed, n, why, sizeof(why)) !=
            TLS_OK) {
            return -1;
        }
        wq->sealed += n;
    }
    /* What is sealed leaves `out`; a large `out` is moved down only once
     * half of it is sealed, so sealing stays linear in its size. */
    if (wq->sealed == wq->out.len) {
        buf_clear(&wq->out);
        wq_release_if_large(&wq->out);
        wq->sealed = 0;
    } else if (wq->sealed >= wq->out.len / 2) {
        buf_consume(&wq->out, wq->sealed);
        wq->sealed = 0;
    }
    return 0;
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
    struct buf *src = &wq->out;
    unsigned nb;
    int n, rc;

    for (;;) {
        if (wq->tls != NULL) {
            if (wq_seal(wq) != 0) {
                return UV_EPROTO;
            }
            src = &wq->enc;
        }
        if (wq->writing || src->len == 0) {
            return 0;
        }
        nb = wq_bufs(src, ub, 1);
        n = uv_try_write(wq->stream, ub, nb);
        if (n >= 0 && (size_t)n == src->len) {
            buf_clear(src);
            wq_release_if_large(src);
            if (wq->tls != NULL && wq->out.len > wq->sealed) {
                continue; /* more to seal than one piece */
            }
            return 0;
        }
        break;
    }
    if (n < 0 && n != UV_EAGAIN) {
        return n;
    }
    if (n > 0) {
        buf_consume(src, (size_t)n);
    }
    buf_swap(src, &wq->inflight);
    nb = wq_bufs(&wq->inflight, ub, WQ_MAX_BUFS);
    PX_ASSERT(nb < WQ_MAX_BUFS || wq->inflight.len <= WQ_CHUNK * nb);
    rc = uv_write(&wq->wreq, wq->stream, ub, nb, wq_on_write);
    if (rc < 0) {
        /* The callback will never run: take the bytes back. */
        buf_swap(src, &wq->inflight);
        return rc;
    }
    wq->writing = 1;
    return 0;
}
