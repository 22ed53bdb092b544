/* The Prometheus endpoint (metrics_listen): a small HTTP/1.x responder on
 * the proxy's own loop. GET /metrics answers the text exposition format;
 * anything else gets a short error status. One request per connection,
 * closed after the response.
 *
 * Bounded so a scraper port open to a network cannot hurt the proxy: a
 * request head of at most METRICS_HTTP_MAX_HEAD bytes (431 beyond), at
 * most METRICS_HTTP_MAX_CONNS connections served at once (the next
 * METRICS_HTTP_MAX_REFUSING get a 503 at once, more are closed at
 * accept), METRICS_HTTP_TIMEOUT_MS to send the request (a slow sender is
 * closed; the others are served meanwhile), and a body rendered in
 * slices of METRICS_HTTP_SLICE_BYTES, the next only once the last is in
 * the kernel: a scraper that does not read holds one slice, and a large
 * limits tree costs the RESP clients one slice per loop turn. */
#ifndef PX_PROXY_METRICS_HTTP_H
#define PX_PROXY_METRICS_HTTP_H

#include <stdint.h>
#include <uv.h>

#include "proxy/core/queue.h"

struct conf_addr;

#define METRICS_HTTP_MAX_HEAD   4096
#define METRICS_HTTP_MAX_CONNS  16
#define METRICS_HTTP_TIMEOUT_MS 5000
/* A 200's body: rendered this many bytes (and the rest of a rule) at a
 * time; its deadline runs again from each slice written, up to
 * METRICS_HTTP_MAX_SEND_MS from the head. */
#define METRICS_HTTP_SLICE_BYTES  (16 * 1024)
#define METRICS_HTTP_MAX_SEND_MS  60000
#define METRICS_HTTP_MAX_REFUSING 16

struct metrics_http {
    uv_loop_t *loop;        /* borrowed */
    uv_tcp_t listener;      /* embedded */
    unsigned listening : 1; /* listener initialised, not closed */
    struct queue conns;     /* every struct metrics_conn */
    unsigned nconns;        /* served connections of conns */
    unsigned nrefusing;     /* ... and those getting a 503 */
    uint64_t refused;       /* connections refused at the cap */
};

/* Listens on `addr` (port 0: does nothing). PX_OK or PX_ERR (logged). */
int metrics_http_start(struct metrics_http *h, uv_loop_t *loop,
                       const struct conf_addr *addr);

/* Closes the listener and every connection (freed by their close
 * callbacks as the loop runs). */
void metrics_http_stop(struct metrics_http *h);

#endif /* PX_PROXY_METRICS_HTTP_H */
