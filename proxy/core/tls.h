/* TLS over libuv, on the loop: OpenSSL never touches a socket.
 *
 * A connection's owner hands the ciphertext of each read to tls_feed(),
 * which runs the handshake and passes the plaintext on to a sink; what
 * OpenSSL writes (the handshake's records, sealed data) is appended to a
 * buffer the owner names, its write queue's (wq.c). Two contexts are
 * current: one for the connections to Redis (the client role) and one for
 * clients (the server role); SIGHUP replaces both, and a replaced one
 * lives on while connections made from it do. */
#ifndef PX_PROXY_CORE_TLS_H
#define PX_PROXY_CORE_TLS_H

#include <stddef.h>

#include "parser/buf.h"

struct conf;
struct tls_conn;
struct tls_ctx;

#define TLS_OK     0
#define TLS_ERR    -1
#define TLS_OPENED 1 /* tls_feed: the handshake completed in this call */
#define TLS_CLOSED                                                             \
    -2 /* tls_feed: the peer ended the session (close_notify),                 \
          as an end of stream */

/* Room for a connection's failure reason. */
#define TLS_WHY_SIZE 160

/* How a peer's name is checked against its certificate. */
enum tls_name_kind {
    TLS_NAME_HOST = 0, /* a DNS name: SNI, and the certificate's DNS names */
    TLS_NAME_IP = 1,   /* an IPv4/IPv6 literal: the certificate's IP SANs,
                          no SNI (RFC 6066 forbids literals there) */
};

/* The kind of `name` (pure). */
enum tls_name_kind tls_name_kind(const char *name);

/* The name to check on a connection to the node `addr` ("host:port" or
 * "[v6]:port"): `configured` (upstream_tls_server_name) when not NULL,
 * else the host part of `addr`. Writes it to `out` and returns its kind
 * (pure). */
enum tls_name_kind tls_name_for(const char *addr, const char *configured,
                                char *out, size_t outlen);

/* 1 when this build has TLS (CMake's PX_TLS), else 0. */
int tls_available(void);

/* The context of the connections to Redis, from conf->tls (upstream_tls_*):
 * its trust store, the client certificate of mutual TLS, the protocols and
 * ciphers, verification on or off. NULL with the reason (OpenSSL's) in
 * `err` when a file cannot be used. */
struct tls_ctx *tls_ctx_upstream(const struct conf *c, char *err,
                                 size_t errlen);

/* The context of client connections, from conf->tls (tls_*). NULL with the
 * reason in `err`. */
struct tls_ctx *tls_ctx_clients(const struct conf *c, char *err, size_t errlen);

/* Drops the caller's reference: the context lives on while connections
 * made from it do. Accepts NULL. */
void tls_ctx_free(struct tls_ctx *ctx);

/* A connection in the client role to the node `addr` ("host:port"), whose
 * certificate must name `server_name` (NULL: the host of `addr`, see
 * tls_name_for): its first handshake records are in `out` (borrowed: the
 * owner's write queue's ciphertext, which must outlive the connection) on
 * return. */
struct tls_conn *tls_conn_client(struct tls_ctx *ctx, const char *addr,
                                 const char *server_name, struct buf *out);

/* A connection in the server role, waiting for the ClientHello. */
struct tls_conn *tls_conn_server(struct tls_ctx *ctx, struct buf *out);

/* A read buffer for the ciphertext of `t`: its context's, shared by the
 * context's connections (one read at a time on the loop), alive while `t`
 * is, whichever context is current. Its size in *len. */
char *tls_conn_slab(struct tls_conn *t, size_t *len);

/* Frees `t` (no record is sent). Accepts NULL. */
void tls_conn_free(struct tls_conn *t);

/* 1 once the handshake completed. */
int tls_conn_is_open(const struct tls_conn *t);

/* Receives plaintext. */
typedef void tls_sink_fn(void *arg, const char *p, size_t n);

/* Feeds `n` bytes of ciphertext (borrowed for the call: every byte is
 * consumed before it returns): runs the handshake while it lasts, then
 * hands each piece of plaintext to `sink`. Records OpenSSL writes
 * meanwhile go to the connection's `out`. Returns TLS_OK, TLS_OPENED (the
 * handshake completed in this call), TLS_CLOSED (after the plaintext before
 * it), or TLS_ERR with the reason (OpenSSL's, with the certificate check's
 * when that failed) in `why`. */
int tls_feed(struct tls_conn *t, const char *p, size_t n, tls_sink_fn *sink,
             void *arg, char *why, size_t whylen);

/* tls_feed whose plaintext is appended to `in` (an upstream's reply
 * buffer). */
int tls_feed_buf(struct tls_conn *t, const char *p, size_t n, struct buf *in,
                 char *why, size_t whylen);

/* Seals `n` bytes of plaintext into records appended to `out` (after the
 * handshake only). TLS_OK or TLS_ERR with the reason in `why`. */
int tls_seal(struct tls_conn *t, const char *p, size_t n, char *why,
             size_t whylen);

/* The protocol version in use ("TLSv1.3"), for logs. */
const char *tls_conn_version(const struct tls_conn *t);

#endif /* PX_PROXY_CORE_TLS_H */
