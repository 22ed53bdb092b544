/* What the core layer needs from the process, handed to it once.
 *
 * The core (requests, upstream connections, the topology) calls nothing
 * above it and reads no global: the top layer embeds one struct core in the
 * server, fills it at start and gives its address to the cluster, which
 * gives it to every upstream it opens. The flush pass of the top layer
 * writes the upstreams queued in `dirty_upstreams`. */
#ifndef PX_PROXY_CORE_CORE_H
#define PX_PROXY_CORE_CORE_H

#include <stdint.h>
#include <uv.h>

#include "conf/conf_secret.h"
#include "proxy/core/queue.h"

struct conf;
struct conf_addr;
struct metrics;
struct tls_ctx;

struct upstream;

/* Called as a connection to Redis starts, after the proxy's own setup
 * requests are queued: a layer above may queue its own ahead of every
 * client request (upstream_queue_first). */
typedef void core_setup_fn(struct upstream *up, void *arg);

struct core {
    uv_loop_t *loop;              /* borrowed: the loop everything runs on */
    const struct conf *conf;      /* borrowed: timeouts, credentials, pools */
    struct queue upstreams;       /* every struct upstream (link) */
    struct queue dirty_upstreams; /* upstreams with bytes to write */
    struct metrics *metrics;      /* borrowed: the counters (NULL: none) */
    core_setup_fn *on_setup;      /* NULL: nothing more on a new connection */
    void *setup_arg;              /* borrowed: on_setup's argument */
    struct tls_ctx *tls;          /* borrowed: upstream_tls's context, or
                                     NULL: connections to Redis are
                                     plaintext */
    struct tls_ctx *sentinel_tls; /* borrowed: the sentinels' (the same
                                     settings, sentinel_tls), or NULL */
    unsigned shutting_down : 1;   /* no new connections, nothing pooled */
    /* Borrowed: the passwords in use, read at each login (SIGHUP replaces
     * them). */
    const struct conf_secret_values *secrets;
};

/* Sets up an empty core on `loop` with `conf`. */
void core_init(struct core *k, uv_loop_t *loop, const struct conf *conf);

/* core_listen's results. */
#define CORE_LISTEN_OK         0
#define CORE_LISTEN_UNRESOLVED -1 /* `tcp` untouched */
#define CORE_LISTEN_FAILED     -2 /* `tcp` initialised: the caller closes it */

/* Opens TCP listener `tcp` on `loop` at `a` (a literal address, or a name
 * resolved now: this runs at start), calling `cb` for each connection.
 * Errors are logged under `what` ("listen", "metrics_listen"). Returns a
 * CORE_LISTEN_* code. */
int core_listen(uv_loop_t *loop, uv_tcp_t *tcp, const struct conf_addr *a,
                int backlog, uv_connection_cb cb, const char *what);

/* The password in use for `id` (NULL: none). Read when it is sent, never
 * kept: a connection opened after a SIGHUP logs in with the new one. */
static inline const char *core_secret(const struct core *k,
                                      enum conf_secret_id id)
{
    return k->secrets->value[id];
}

/* Loop time in milliseconds. */
static inline uint64_t core_now_ms(const struct core *k)
{
    return uv_now(k->loop);
}

#endif /* PX_PROXY_CORE_CORE_H */
