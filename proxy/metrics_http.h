/* The Prometheus endpoint (metrics_listen): a small HTTP/1.x responder on
 * the proxy's own loop. GET /metrics answers the text exposition format;
 * anything else gets a short error status. One request per connection,
 * closed after the response.
 *
 * Bounded so a scraper port open to a network cannot hurt the proxy: a
 * request head of at most METRICS_HTTP_MAX_HEAD bytes (431 beyond), at
 * most METRICS_HTTP_MAX_CONNS connections at once (more are closed at
 * accept), and METRICS_HTTP_TIMEOUT_MS for a connection's whole life (a
 * slow sender is closed; the others are served meanwhile). */
#ifndef PX_PROXY_METRICS_HTTP_H
#define PX_PROXY_METRICS_HTTP_H

#include <stdint.h>
#include <uv.h>

#include "proxy/core/queue.h"

struct buf;
struct conf_addr;

#define METRICS_HTTP_MAX_HEAD   4096
#define METRICS_HTTP_MAX_CONNS  16
#define METRICS_HTTP_TIMEOUT_MS 5000

/* Writes the body of a 200 response to `out`. */
typedef void metrics_http_render_fn(struct buf *out);

struct metrics_http {
    uv_loop_t *loop;                /* borrowed */
    uv_tcp_t listener;              /* embedded */
    unsigned listening : 1;         /* listener initialised, not closed */
    struct queue conns;             /* every struct metrics_conn */
    unsigned nconns;                /* length of conns */
    uint64_t refused;               /* connections closed at the cap */
    metrics_http_render_fn *render; /* the body of GET /metrics */
};

/* Listens on `addr` (port 0: does nothing). PX_OK or PX_ERR (logged). */
int metrics_http_start(struct metrics_http *h, uv_loop_t *loop,
                       const struct conf_addr *addr,
                       metrics_http_render_fn *render);

/* Closes the listener and every connection (freed by their close
 * callbacks as the loop runs). */
void metrics_http_stop(struct metrics_http *h);

#endif /* PX_PROXY_METRICS_HTTP_H */
