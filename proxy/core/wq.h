/* Write queue of one connection: `out` fills while `inflight` is owned by
 * libuv. wq_flush() first tries a direct write (uv_try_write); only what the
 * kernel refuses moves to `inflight` for one uv_write at a time. On a TLS
 * connection `out` is sealed into `enc` first, and `enc` is what is
 * written; until the handshake completes nothing of `out` is sealed, so
 * only the handshake's own records leave. */
#ifndef PX_PROXY_WQ_H
#define PX_PROXY_WQ_H

#include <uv.h>

#include "parser/buf.h"

struct tls_conn;
struct wq;

/* Called when a write fails; the owner closes its connection. */
typedef void wq_error_fn(struct wq *wq, int status);

struct wq {
    uv_write_t wreq;       /* embedded; one write in flight at most */
    uv_stream_t *stream;   /* borrowed: the owner's socket */
    wq_error_fn *on_error; /* owner's handler */
    struct buf out;        /* owned: bytes waiting to be written */
    struct buf inflight;   /* owned, lent to libuv while writing */
    struct tls_conn *tls;  /* borrowed from the owner: seals `out` into
                              `enc`; NULL on a plaintext connection */
    struct buf enc;        /* owned: TLS records waiting to be written
                              (the handshake's, and `out` sealed) */
    size_t sealed;         /* bytes at the head of `out` already sealed
                              into `enc` */
    unsigned writing : 1;  /* a uv_write is in flight */
};

void wq_init(struct wq *wq, uv_stream_t *stream, wq_error_fn *on_error);

/* Frees both buffers. Only after the stream is closed (no write in flight). */
void wq_free(struct wq *wq);

/* Writes what `out` holds (sealed first on a TLS connection). Returns 0,
 * or a libuv error (the owner should close; on_error is not called for a
 * synchronous failure; UV_EPROTO: sealing failed). */
int wq_flush(struct wq *wq);

/* Drops every byte not yet handed to libuv (`out` and `enc`), as a
 * connection that failed does before it reconnects. */
void wq_discard(struct wq *wq);

/* Bytes not yet handed to the kernel (TLS records counted as written,
 * with their overhead of a few bytes per 16 KB). */
static inline size_t wq_pending(const struct wq *wq)
{
    return wq->out.len - wq->sealed + wq->enc.len + wq->inflight.len;
}

#endif /* PX_PROXY_WQ_H */
