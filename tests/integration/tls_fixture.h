/* TLS test fixture: certificates, TLS redis-servers, and a TLS client in
 * C (hiredis 0.14 has no TLS), for the tests of upstream_tls and
 * tls_listen.
 *
 * The certificates are made with the openssl CLI into the test's temp
 * directory, once per test process (criterion runs each test in its own),
 * with P-256 keys, which take milliseconds. OpenSSL 3.0's `x509` has no
 * -not_before, so the expired certificate is signed by `openssl ca`
 * with -startdate/-enddate in the past. */
#ifndef PX_TESTS_INTEGRATION_TLS_FIXTURE_H
#define PX_TESTS_INTEGRATION_TLS_FIXTURE_H

#include <stdarg.h>
#include <stddef.h>

#include <hiredis/hiredis.h>

#include "tests/integration/fixture.h"

/* Paths of the generated files (in the test's temp directory). */
struct px_tls_certs {
    char ca[PX_PATH_MAX];           /* the CA cellgate and the tests trust */
    char other_ca[PX_PATH_MAX];     /* a second CA nobody trusts */
    char server_key[PX_PATH_MAX];   /* the key of every server certificate */
    char server[PX_PATH_MAX];       /* CA: DNS:localhost, IP:127.0.0.1,
                                       serial 1001 */
    char rotated[PX_PATH_MAX];      /* the same names, serial 2002 */
    char wrong_name[PX_PATH_MAX];   /* CA: DNS:wrong.example only */
    char expired[PX_PATH_MAX];      /* CA: the right names, expired 2020 */
    char other[PX_PATH_MAX];        /* other CA: the right names */
    char client_key[PX_PATH_MAX];   /* the key of both client certificates */
    char client[PX_PATH_MAX];       /* CA: CN=px-client */
    char client_other[PX_PATH_MAX]; /* other CA: CN=px-client */
};

/* The certificates, made on the first call of the test process. */
const struct px_tls_certs *px_tls_certs(void);

/* A redis-server with a plaintext port (r->port, for the tests' own
 * inspection) and a TLS port (returned) serving `cert` (key: the server
 * key), with --tls-auth-clients `auth` ("no" or "yes", CA: px_tls_certs's
 * ca). */
int px_tls_redis_start(struct px_child *r, const char *cert, const char *auth);

/* A TLS client connection (blocking, with a read timeout). */
struct px_tls;

/* Connects to 127.0.0.1:`port` and completes a handshake verifying the
 * server with `ca` (NULL: no verification) and the name `host` (NULL:
 * none), presenting `cert` (+ the client key) when not NULL. NULL on
 * failure, with OpenSSL's reason in `err`. */
struct px_tls *px_tls_open(int port, const char *ca, const char *host,
                           const char *cert, char *err, size_t errlen);

/* Completes a handshake with 127.0.0.1:`port` (no verification), sends
 * nothing, and reads what arrives until a newline or the end (at most
 * outlen - 1 bytes, NUL-terminated, in `out`): what cellgate says first.
 * Asserts the handshake worked. */
void px_tls_first_line(int port, char *out, size_t outlen);

/* px_tls_open that asserts it worked (CA: px_tls_certs's, no client
 * certificate). */
struct px_tls *px_tls_connect(int port);

/* Closes and frees. Accepts NULL. */
void px_tls_close(struct px_tls *t);

/* Sends a command (redisCommand's format) without reading. */
void px_tls_append(struct px_tls *t, const char *fmt, ...);

/* Reads the next reply; asserts one arrived (free it, or hand it to a
 * px_check_*). */
redisReply *px_tls_next(struct px_tls *t);

/* px_tls_append then px_tls_next. */
redisReply *px_tls_cmd(struct px_tls *t, const char *fmt, ...);

/* One command on a new TLS connection to 127.0.0.1:`port` (the server
 * verified with px_tls_certs's CA, no name checked): its reply, or NULL
 * when nothing listens, the handshake fails or no reply comes within 1 s.
 * Asserts nothing: for polls (Redis nodes and sentinels speaking TLS
 * only). */
redisReply *px_tls_try_vcmd(int port, const char *fmt, va_list ap);

/* The serial number of the certificate the server presented, as decimal
 * text in `out`. */
void px_tls_peer_serial(struct px_tls *t, char *out, size_t outlen);

/* 1 when `needle` occurs in the file at `path` (a log). */
int px_file_has(const char *path, const char *needle);

/* Polls `path` until it holds `needle`, 20 ms apart, for up to `ms`;
 * asserts it did. */
void px_file_wait(const char *path, const char *needle, int ms);

/* Counts the lines of the file at `path` holding `needle`. */
int px_file_count(const char *path, const char *needle);

#endif /* PX_TESTS_INTEGRATION_TLS_FIXTURE_H */
