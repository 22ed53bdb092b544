/* client_tls.c: the TLS side of a client connection.
 *
 *   socket --ciphertext--> client_tls_read --tls_feed--> plaintext
 *          --> resp_reader (c->rd), as a plaintext client's bytes
 *   c->wq.out --sealed by wq.c--> c->wq.enc --> socket
 *
 * Until the handshake completes, nothing is parsed and nothing of
 * c->wq.out is sent (a refusal at max_clients waits there for it, and is
 * then sent sealed). Clients whose handshake runs are queued in accept
 * order (server.tls_handshakes): with one timeout for all, the oldest is
 * at the head, so the cron looks at the head only. */
#include "proxy/client_tls.h"

#include <stdio.h>

#include "conf/conf.h"
#include "parser/resp.h"
#include "proxy/client.h"
#include "proxy/client_addr.h"
#include "proxy/core/log.h"
#include "proxy/core/tls.h"
#include "proxy/core/util.h"
#include "proxy/server.h"

/* Log lines about failed handshakes: one per this period at most, the
 * next one counting those it did not show (a flood of bad peers must not
 * flood the log). */
#define CLIENT_TLS_LOG_MS 1000

void client_tls_accept(struct client *c)
{
    c->tls = tls_conn_server(server.tls_clients, &c->wq.enc);
    c->wq.tls = c->tls;
    c->handshaking = 1;
    queue_insert_tail(&server.tls_handshakes, &c->hs_link);
}

/* One log line for a failed handshake, rate limited; the caller closes
 * `c`. */
static void client_tls_fail(struct client *c, const char *why)
{
    struct server_stats *st = &server.stats;
    uint64_t now = core_now_ms(&server.core);
    char addr[CLIENT_ADDR_MAX];

    st->tls_failures += c->handshaking;
    st->tls_unlogged++;
    if (st->tls_log_ms == 0 || now - st->tls_log_ms >= CLIENT_TLS_LOG_MS) {
        char more[80] = "";
        if (st->tls_unlogged > 1) {
            snprintf(more, sizeof(more),
                     " (and %llu more TLS failures since the last such line)",
                     (unsigned long long)st->tls_unlogged - 1);
        }
        client_addr(c, 0, addr, sizeof(addr));
        log_warn("client %llu from %s: %s%s", (unsigned long long)c->id, addr,
                 why, more);
        st->tls_log_ms = now;
        st->tls_unlogged = 0;
    }
}

/* Plaintext to the request reader; dropped once nothing more is read
 * (QUIT, a protocol error, a refusal at max_clients). */
static void client_tls_sink(void *arg, const char *p, size_t n)
{
    struct client *c = arg;

    if (c->input_done || c->quitting) {
        return;
    }
    if (resp_reader_feed(c->rd, p, n) != RESP_OK) {
        px_oom(n);
    }
}

enum client_tls_rc client_tls_read(struct client *c, const char *p, size_t n)
{
    char why[TLS_WHY_SIZE];
    int rc = tls_feed(c->tls, p, n, client_tls_sink, c, why, sizeof(why));

    if (rc == TLS_ERR) {
        client_tls_fail(c, why);
        return CLIENT_TLS_CLOSE;
    }
    if (rc == TLS_CLOSED) { /* close_notify: as an end of stream */
        return CLIENT_TLS_CLOSE;
    }
    if (rc == TLS_OPENED) {
        c->handshaking = 0;
        queue_remove(&c->hs_link);
        server.ntls_clients++;
        log_debug("client %llu: TLS handshake done (%s)",
                  (unsigned long long)c->id, tls_conn_version(c->tls));
        return CLIENT_TLS_OPENED;
    }
    return c->handshaking ? CLIENT_TLS_WAIT : CLIENT_TLS_PARSE;
}

void client_tls_gone(struct client *c)
{
    if (c->tls == NULL) {
        return;
    }
    if (c->handshaking) {
        queue_remove(&c->hs_link);
    } else {
        server.ntls_clients--;
    }
}

struct client *client_tls_expired(uint64_t now_ms)
{
    unsigned timeout = server.conf->tls.handshake_timeout_ms;
    struct client *c;
    char why[64];

    if (queue_empty(&server.tls_handshakes)) {
        return NULL;
    }
    c = container_of(queue_head(&server.tls_handshakes), struct client,
                     hs_link);
    if (now_ms - c->ctime_ms < timeout) {
        return NULL;
    }
    snprintf(why, sizeof(why), "TLS handshake timed out after %u ms", timeout);
    client_tls_fail(c, why);
    return c;
}
