/* server_tls.c: TLS contexts, the TLS listener and their reload.
 *
 * The contexts are made once at start: upstream_tls's is handed to the
 * core (core.tls, and core.sentinel_tls with sentinel_tls: the same
 * upstream_tls_* settings), which opens every connection to Redis with it
 * (shared, RESP3, private, the limiter's, the tracker's, SYNC tunnels, the
 * sentinels' all go through upstream.c), and tls_listen's to
 * client_tls.c. On SIGHUP both are made again from their files in libuv's
 * thread pool (reading files must not stall the loop), then swapped in on
 * the loop, each on its own: a side whose files fail keeps its old
 * context, the other still takes its new one. A connection holds a
 * reference to the context it was made with (proxy/core/tls.c), so an old
 * context lives until its last connection closes: clients keep theirs
 * until they leave, connections to Redis until they reconnect. One reload
 * runs at a time; a SIGHUP during one runs another after it, so the files
 * it reads are at least as new as the signal. */
#include "proxy/server_tls.h"

#include <stdio.h>

#include "conf/conf.h"
#include "proxy/core/log.h"
#include "proxy/core/tls.h"
#include "proxy/core/util.h"
#include "proxy/server.h"

/* One reload of both sides' contexts. */
struct server_tls_job {
    uv_work_t work;           /* embedded libuv request */
    struct tls_ctx *clients;  /* owned until swapped in: tls_listen's new
                                 context, NULL when it failed or is off */
    struct tls_ctx *upstream; /* owned until swapped in: upstream_tls's */
    unsigned do_clients : 1;  /* tls_listen is on: reload it */
    unsigned do_upstream : 1; /* a context to Redis exists: reload it */
    char clients_err[512];    /* why `clients` could not be made */
    char upstream_err[512];   /* why `upstream` could not be made */
};

static void server_tls_reload_start(void);

/* The core borrows server.tls_upstream for the sides conf turns on. */
static void server_tls_hand_to_core(const struct conf *conf)
{
    server.core.tls = conf->tls.upstream ? server.tls_upstream : NULL;
    server.core.sentinel_tls =
        conf_sentinel_tls(conf) ? server.tls_upstream : NULL;
}

int server_tls_init(const struct conf *conf, int backlog, uv_connection_cb cb)
{
    char err[512];
    int rc;

    if (conf->tls.upstream || conf_sentinel_tls(conf)) {
        server.tls_upstream = tls_ctx_upstream(conf, err, sizeof(err));
        if (server.tls_upstream == NULL) {
            log_error("upstream_tls: %s", err);
            return PX_ERR;
        }
        server_tls_hand_to_core(conf);
        if (!conf->tls.up_verify) {
            log_warn("upstream_tls_verify is no: the certificates of Redis "
                     "are not checked, so anyone on the path can pose as "
                     "it");
        }
    }
    if (conf->tls.listen.port == 0) {
        return PX_OK;
    }
    server.tls_clients = tls_ctx_clients(conf, err, sizeof(err));
    if (server.tls_clients == NULL) {
        log_error("tls_listen: %s", err);
        return PX_ERR;
    }
    rc = core_listen(server.loop, &server.tls_listener, &conf->tls.listen,
                     backlog, cb, "tls_listen");
    server.tls_listening = rc != CORE_LISTEN_UNRESOLVED;
    if (rc != CORE_LISTEN_OK) {
        return PX_ERR;
    }
    log_info("TLS clients on %s:%d", conf->tls.listen.host,
             conf->tls.listen.port);
    return PX_OK;
}

void server_tls_stop(void)
{
    if (server.tls_listening) {
        uv_close((uv_handle_t *)&server.tls_listener, NULL);
        server.tls_listening = 0;
    }
}

void server_tls_free(void)
{
    tls_ctx_free(server.tls_clients);
    tls_ctx_free(server.tls_upstream);
    server.tls_clients = server.tls_upstream = NULL;
    server.core.tls = server.core.sentinel_tls = NULL;
}

/* In the thread pool: reads the files (conf is not written after
 * start, so reading it here races with nothing). */
static void server_tls_reload_work(uv_work_t *w)
{
    struct server_tls_job *job = container_of(w, struct server_tls_job, work);

    if (job->do_clients) {
        job->clients = tls_ctx_clients(server.conf, job->clients_err,
                                       sizeof(job->clients_err));
    }
    if (job->do_upstream) {
        job->upstream = tls_ctx_upstream(server.conf, job->upstream_err,
                                         sizeof(job->upstream_err));
    }
}

/* On the loop: swaps the client side's new context in, or keeps the old
 * one and says why. */
static void server_tls_swap_clients(struct server_tls_job *job)
{
    if (job->clients == NULL) {
        log_error("SIGHUP: TLS certificates not reloaded, the old ones stay: "
                  "%s",
                  job->clients_err);
        return;
    }
    tls_ctx_free(server.tls_clients);
    server.tls_clients = job->clients;
    job->clients = NULL;
    log_info("SIGHUP: TLS certificates reloaded (tls_cert_file %s)",
             server.conf->tls.srv.cert_file);
}

/* The same for the connections to Redis: new connections (a reconnect
 * included) use the new context, open ones keep theirs. */
static void server_tls_swap_upstream(struct server_tls_job *job)
{
    const char *cert = server.conf->tls.up.cert_file;

    if (job->upstream == NULL) {
        log_error("SIGHUP: upstream_tls certificates not reloaded, the old "
                  "ones stay: %s",
                  job->upstream_err);
        return;
    }
    tls_ctx_free(server.tls_upstream);
    server.tls_upstream = job->upstream;
    job->upstream = NULL;
    server_tls_hand_to_core(server.conf);
    log_info("SIGHUP: upstream_tls certificates reloaded "
             "(upstream_tls_cert_file %s)",
             cert != NULL ? cert : "none");
}

/* On the loop: swaps the new contexts in, or keeps the old ones. */
static void server_tls_reload_done(uv_work_t *w, int status)
{
    struct server_tls_job *job = container_of(w, struct server_tls_job, work);

    server.tls_reloading = 0;
    if (status == 0 && !server.shutting_down) {
        if (job->do_clients) {
            server_tls_swap_clients(job);
        }
        if (job->do_upstream) {
            server_tls_swap_upstream(job);
        }
    }
    tls_ctx_free(job->clients); /* not swapped in: cancelled, shutting down */
    tls_ctx_free(job->upstream);
    px_free(job);
    if (server.tls_reload_again && !server.shutting_down) {
        server.tls_reload_again = 0;
        server_tls_reload_start();
    }
}

static void server_tls_reload_start(void)
{
    struct server_tls_job *job = px_calloc(1, sizeof(*job));

    job->do_clients = server.tls_clients != NULL;
    job->do_upstream = server.tls_upstream != NULL;
    server.tls_reloading = 1;
    if (uv_queue_work(server.loop, &job->work, server_tls_reload_work,
                      server_tls_reload_done) != 0) {
        server.tls_reloading = 0;
        px_free(job);
        log_error("SIGHUP: TLS certificates not reloaded: no worker");
    }
}

int server_tls_reload(void)
{
    if ((server.tls_clients == NULL && server.tls_upstream == NULL) ||
        server.shutting_down) {
        return 0;
    }
    if (server.tls_reloading) {
        server.tls_reload_again = 1;
    } else {
        server_tls_reload_start();
    }
    return 1;
}

int server_tls_check(const struct conf *conf, char *err, size_t errlen)
{
    struct tls_ctx *ctx;
    char why[512];

    if (conf->tls.upstream || conf_sentinel_tls(conf)) {
        ctx = tls_ctx_upstream(conf, why, sizeof(why));
        if (ctx == NULL) {
            snprintf(err, errlen, "upstream_tls: %s", why);
            return -1;
        }
        tls_ctx_free(ctx);
    }
    if (conf->tls.listen.port != 0) {
        ctx = tls_ctx_clients(conf, why, sizeof(why));
        if (ctx == NULL) {
            snprintf(err, errlen, "tls_listen: %s", why);
            return -1;
        }
        tls_ctx_free(ctx);
    }
    return 0;
}
