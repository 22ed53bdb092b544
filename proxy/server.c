/* The server: listener, flush pass, cron, signals and shutdown.
 *
 *   loop turn:  poll -> reads (clients parse and dispatch, upstreams deliver)
 *               -> prepare: flush pass
 *                    dirty_upstreams: one write per upstream (every client's
 *                                     requests of this turn coalesced)
 *                    dirty_clients:   one write per client
 *
 * This is Redis's beforeSleep batching on libuv's prepare handle. Shutdown
 * (SIGINT/SIGTERM) closes every handle and lets the loop run dry, so a clean
 * exit frees everything (libuv's MAKE_VALGRIND_HAPPY). */
#include "proxy/server.h"

#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "conf/conf.h"
#include "proxy/client.h"
#include "proxy/client_tls.h"
#include "proxy/core/log.h"
#include "proxy/core/upstream.h"
#include "proxy/core/util.h"
#include "proxy/limiter/limiter.h"
#include "proxy/limiter/limiter_reload.h"
#include "proxy/metrics_http.h"
#include "proxy/metrics_text.h"
#include "proxy/pubsub.h"
#include "proxy/router.h"
#include "proxy/secrets.h"
#include "proxy/server_tls.h"

/* Housekeeping period: command timeouts are checked at this granularity. */
#define SERVER_CRON_MS 100

/* listen(2) backlog, as Redis's tcp-backlog default. */
#define SERVER_BACKLOG 511

/* Flush rounds per loop turn: a resumed client may dirty upstreams again. */
#define SERVER_FLUSH_ROUNDS 4

struct server server;

uint64_t server_now_ms(void)
{
    return uv_now(server.loop);
}

void server_flush_early(void)
{
    /* A loop turn that reads many clients queues many limiter calls; those
     * that fill batches go out now, so Redis decides them while the rest
     * is read, instead of Redis and cellgate taking turns. */
    if (limiter_flush_due(&server.limiter)) {
        limiter_flush(&server.limiter);
        upstream_flush_dirty(&server.core);
    }
}

void server_mark_client(struct client *c)
{
    if (!queue_linked(&c->dirty_node)) {
        queue_insert_tail(&server.dirty_clients, &c->dirty_node);
    }
}

static void server_stop_rest(void);

static void server_on_flush(uv_prepare_t *h)
{
    int round;

    PX_UNUSED(h);
    for (round = 0; round < SERVER_FLUSH_ROUNDS; round++) {
        limiter_flush(&server.limiter);
        upstream_flush_dirty(&server.core);
        while (!queue_empty(&server.dirty_clients)) {
            struct queue *n = queue_head(&server.dirty_clients);
            queue_remove(n);
            client_flush(container_of(n, struct client, dirty_node));
        }
        if (queue_empty(&server.core.dirty_upstreams) &&
            !limiter_queued(&server.limiter)) {
            break;
        }
    }
    if (server.shutting_down && !uv_is_closing((uv_handle_t *)&server.cron) &&
        !limiter_stop_waits(&server.limiter, server_now_ms())) {
        server_stop_rest(); /* the give-backs of server_stop are answered */
    }
}

static void server_on_cron(uv_timer_t *t)
{
    struct client *c;

    PX_UNUSED(t);
    sentinel_cron(&server.sentinel, server_now_ms());
    cluster_cron(&server.cluster, server_now_ms());
    limiter_cron(&server.limiter);
    while ((c = client_tls_expired(server_now_ms())) != NULL) {
        client_close(c); /* its handshake timed out; closing unlinks it */
    }
}

/* Sentinel named a new master: the limiter forgets the old one (the
 * cluster moved the connections already). */
static void server_on_master(void *arg, const char *old, const char *now)
{
    PX_UNUSED(arg);
    PX_UNUSED(now);
    limiter_master_changed(&server.limiter, old);
}

static void server_on_connection(uv_stream_t *listener, int status)
{
    if (status < 0) {
        log_warn("listener: accept error: %s", uv_strerror(status));
        return;
    }
    client_accept(listener);
}

static void server_stop(void)
{
    if (server.shutting_down) {
        return;
    }
    server.shutting_down = 1;
    server.core.shutting_down = 1;
    log_info("shutting down");
    if (server.listening) {
        uv_close((uv_handle_t *)&server.listener, NULL);
        server.listening = 0;
    }
    server_tls_stop();
    metrics_http_stop(&server.metrics_http);
    while (!queue_empty(&server.clients)) {
        client_close(
            container_of(queue_head(&server.clients), struct client, node));
    }
    if (limiter_stop_begin(&server.limiter, server_now_ms())) {
        /* Leases went back: the flush pass goes on once Redis answered
         * (or a second passed), so the give-backs are not lost with the
         * connections. */
        return;
    }
    server_stop_rest();
}

/* Shutdown, once the leases' give-backs are answered. */
static void server_stop_rest(void)
{
    limiter_stop(&server.limiter);
    sentinel_stop(&server.sentinel);
    cluster_shutdown(&server.cluster);
    while (!queue_empty(&server.core.upstreams)) {
        struct upstream *up = container_of(queue_head(&server.core.upstreams),
                                           struct upstream, link);
        queue_remove(&up->link);
        upstream_destroy(up, "proxy shutting down");
    }
    uv_close((uv_handle_t *)&server.flush, NULL);
    uv_close((uv_handle_t *)&server.cron, NULL);
    uv_close((uv_handle_t *)&server.sigint, NULL);
    uv_close((uv_handle_t *)&server.sigterm, NULL);
    uv_close((uv_handle_t *)&server.sighup, NULL);
}

/* SIGHUP: reread the password files (secrets.c) and the certificates of
 * both TLS sides (server_tls.c), and reload limits.yaml off the loop; a bad
 * file is refused and the old rules stay (as LIMITER RELOAD;
 * limiter_reload.c logs the outcome). */
static void server_on_sighup(uv_signal_t *h, int signum)
{
    int nsecrets = secrets_reload();
    int tls = server_tls_reload();

    PX_UNUSED(h);
    PX_UNUSED(signum);
    if (server.conf->limits_file == NULL) {
        if (nsecrets == 0 && !tls) {
            log_warn("SIGHUP: no limits file configured, nothing to reload");
        }
        return;
    }
    limiter_reload_start(&server.limiter.reloads, NULL);
}

static void server_on_signal(uv_signal_t *h, int signum)
{
    PX_UNUSED(h);
    log_info("received %s", signum == SIGINT ? "SIGINT" : "SIGTERM");
    server_stop();
}

static int server_listen(const struct conf *conf)
{
    int rc;

    if (conf->listen.port == 0) {
        return PX_OK; /* listen: off (tls_listen only) */
    }
    rc = core_listen(server.loop, &server.listener, &conf->listen,
                     SERVER_BACKLOG, server_on_connection, "listen");

    server.listening = rc != CORE_LISTEN_UNRESOLVED;
    return rc == CORE_LISTEN_OK ? PX_OK : PX_ERR;
}

/* Closes whatever server_init() opened and runs the loop dry, so a failed
 * start exits without leaks. */
static int server_init_failed(void)
{
    server_stop();
    uv_run(server.loop, UV_RUN_DEFAULT);
    uv_loop_close(server.loop);
    sentinel_free(&server.sentinel);
    server_tls_free();
    limiter_free(&server.limiter);
    pubsub_free();
    metrics_free(&server.metrics);
    secrets_free();
    req_pool_free(&server.req_pool);
    return PX_ERR;
}

int server_init(const struct conf *conf)
{
    server.loop = uv_default_loop();
    server.conf = conf;
    queue_init(&server.clients);
    queue_init(&server.tls_handshakes);
    queue_init(&server.dirty_clients);
    req_pool_init(&server.req_pool);
    core_init(&server.core, server.loop, conf);
    secrets_init();
    metrics_init(&server.metrics, conf->metrics_near_limit_ratio);
    server.core.metrics = &server.metrics;
    queue_init(&server.metrics_http.conns);
    /* Empty lists, so a start that fails before cluster_init can still
     * run cluster_shutdown. */
    queue_init(&server.cluster.nodes);
    queue_init(&server.cluster.waiting);
    limiter_init(&server.limiter, &server.core, &server.cluster, conf,
                 conf->nseeds == 0 && conf->upstream.port == 0 &&
                     conf->sentinel.naddrs == 0);
    hmap_init(&server.pubsub_chans);
    hmap_init(&server.pubsub_pats);
    px_uv_must(uv_prepare_init(server.loop, &server.flush), "flush init");
    px_uv_must(uv_prepare_start(&server.flush, server_on_flush), "flush start");
    px_uv_must(uv_timer_init(server.loop, &server.cron), "cron timer init");
    px_uv_must(uv_timer_start(&server.cron, server_on_cron, SERVER_CRON_MS,
                              SERVER_CRON_MS),
               "cron timer start");
    uv_unref((uv_handle_t *)&server.cron);
    px_uv_must(uv_signal_init(server.loop, &server.sigint), "SIGINT init");
    px_uv_must(uv_signal_start(&server.sigint, server_on_signal, SIGINT),
               "SIGINT handler");
    px_uv_must(uv_signal_init(server.loop, &server.sigterm), "SIGTERM init");
    px_uv_must(uv_signal_start(&server.sigterm, server_on_signal, SIGTERM),
               "SIGTERM handler");
    px_uv_must(uv_signal_init(server.loop, &server.sighup), "SIGHUP init");
    px_uv_must(uv_signal_start(&server.sighup, server_on_sighup, SIGHUP),
               "SIGHUP handler");
    {
        char err[1024];
        err[0] = '\0';
        if (limiter_load(&server.limiter, conf->limits_file, err,
                         sizeof(err)) != PX_OK) {
            log_error("limits: %s", err);
            return server_init_failed();
        }
    }
    if (server_tls_init(conf, SERVER_BACKLOG, server_on_connection) != PX_OK ||
        server_listen(conf) != PX_OK ||
        metrics_http_start(&server.metrics_http, server.loop,
                           &conf->metrics_listen) != PX_OK) {
        return server_init_failed();
    }
    if (cluster_init(&server.cluster, &server.core, conf) != PX_OK ||
        sentinel_start(&server.sentinel, &server.core, &server.cluster,
                       server_on_master, NULL) != PX_OK) {
        return server_init_failed();
    }
    if (conf->sentinel.naddrs > 0) {
        log_info("cellgate %s listening on %s:%d, sentinel mode (master "
                 "'%s', %d sentinels)",
                 PX_VERSION, conf->listen.host, conf->listen.port,
                 conf->sentinel.master, conf->sentinel.naddrs);
    } else if (conf->nseeds > 0) {
        log_info("cellgate %s listening on %s:%d, cluster mode (%d seeds)",
                 PX_VERSION, conf->listen.host, conf->listen.port,
                 conf->nseeds);
    } else if (conf->upstream.port != 0) {
        log_info("cellgate %s listening on %s:%d, upstream %s:%d", PX_VERSION,
                 conf->listen.host, conf->listen.port, conf->upstream.host,
                 conf->upstream.port);
    } else {
        log_info("cellgate %s listening on %s:%d, embedded mode (no "
                 "upstream)",
                 PX_VERSION, conf->listen.host, conf->listen.port);
    }
    return PX_OK;
}

static void server_on_walk(uv_handle_t *h, void *arg)
{
    PX_UNUSED(arg);
    log_error("handle still open at exit: %s", uv_handle_type_name(h->type));
}

int server_run(void)
{
    int rc;

    uv_run(server.loop, UV_RUN_DEFAULT);
    sentinel_free(&server.sentinel);
    server_tls_free();
    limiter_free(&server.limiter);
    pubsub_free();
    metrics_free(&server.metrics);
    secrets_free();
    req_pool_free(&server.req_pool);
    rc = uv_loop_close(server.loop);
    if (rc != 0) {
        uv_walk(server.loop, server_on_walk, NULL);
        return 1;
    }
    log_info("bye");
    return 0;
}
