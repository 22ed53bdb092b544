/* server_tls.c: TLS contexts, the TLS listener and their reload.
 *
 * The contexts are made once at start: upstream_tls's is handed to the
 * core (core.tls), which opens every connection to Redis with it (shared,
 * RESP3, private, the limiter's, the tracker's, SYNC tunnels all go
 * through upstream.c), and tls_listen's to client_tls.c. On SIGHUP the
 * client side's context is made again in libuv's thread pool (reading
 * files must not stall the loop), then swapped in on the loop: a
 * connection holds a reference to the context it was made with
 * (proxy/core/tls.c), so the old one lives until its last connection
 * closes. One reload runs at a time; a SIGHUP during one runs another
 * after it, so the files it reads are at least as new as the signal. */
#include "proxy/server_tls.h"

#include <stdio.h>

#include "conf/conf.h"
#include "proxy/core/log.h"
#include "proxy/core/tls.h"
#include "proxy/core/util.h"
#include "proxy/server.h"

/* One reload of the client side's context. */
struct server_tls_job {
    uv_work_t work;      /* embedded libuv request */
    struct tls_ctx *ctx; /* owned until swapped in: the new context */
    char err[512];       /* why it could not be made */
};

static void server_tls_reload_start(void);

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
        server.core.tls = conf->tls.upstream ? server.tls_upstream : NULL;
        server.core.sentinel_tls =
            conf_sentinel_tls(conf) ? server.tls_upstream : NULL;
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
    server.core.tls = NULL;
}

/* In the thread pool: reads the files. */
static void server_tls_reload_work(uv_work_t *w)
{
    struct server_tls_job *job = container_of(w, struct server_tls_job, work);

    job->ctx = tls_ctx_clients(server.conf, job->err, sizeof(job->err));
}

/* On the loop: swaps the new context in, or keeps the old one. */
static void server_tls_reload_done(uv_work_t *w, int status)
{
    struct server_tls_job *job = container_of(w, struct server_tls_job, work);

    server.tls_reloading = 0;
    if (status != 0 || server.shutting_down) {
        tls_ctx_free(job->ctx);
    } else if (job->ctx == NULL) {
        log_error("SIGHUP: TLS certificates not reloaded, the old ones stay: "
                  "%s",
                  job->err);
    } else {
        tls_ctx_free(server.tls_clients);
        server.tls_clients = job->ctx;
        log_info("SIGHUP: TLS certificates reloaded (tls_cert_file %s)",
                 server.conf->tls.srv.cert_file);
    }
    px_free(job);
    if (server.tls_reload_again && !server.shutting_down) {
        server.tls_reload_again = 0;
        server_tls_reload_start();
    }
}

static void server_tls_reload_start(void)
{
    struct server_tls_job *job = px_calloc(1, sizeof(*job));

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
    if (server.tls_clients == NULL || server.shutting_down) {
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

    if (conf->tls.upstream) {
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
