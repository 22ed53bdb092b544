/* tls_fixture.c: see tls_fixture.h. */
#include "tests/integration/tls_fixture.h"

#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#if defined(PX_TLS) && PX_TLS

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <hiredis/read.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

/* One shell script makes every file (one process to spawn, not a dozen):
 * a P-256 key per role, each certificate signed for its case. */
static const char tls_script[] =
    "set -e\n"
    "cd \"$1\"\n"
    "K='-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes'\n"
    "openssl req -x509 $K -keyout ca.key -out ca.crt -days 3650 "
    "-subj /CN=px-test-ca 2>/dev/null\n"
    "openssl req -x509 $K -keyout other-ca.key -out other-ca.crt -days 3650 "
    "-subj /CN=px-other-ca 2>/dev/null\n"
    "openssl req $K -keyout server.key -out server.csr -subj /CN=localhost "
    "2>/dev/null\n"
    "openssl req -new -key server.key -out wrong.csr -subj /CN=wrong.example "
    "2>/dev/null\n"
    "openssl req $K -keyout client.key -out client.csr -subj /CN=px-client "
    "2>/dev/null\n"
    "echo 'subjectAltName=DNS:localhost,IP:127.0.0.1' > san.ext\n"
    "echo 'subjectAltName=DNS:wrong.example' > wrong.ext\n"
    "sign() { openssl x509 -req -in $1 -CA $2.crt -CAkey $2.key "
    "-set_serial $3 -days 3650 -extfile $4 -out $5 2>/dev/null; }\n"
    "sign server.csr ca 1001 san.ext server.crt\n"
    "sign server.csr ca 2002 san.ext rotated.crt\n"
    "sign wrong.csr ca 1002 wrong.ext wrong.crt\n"
    "sign server.csr other-ca 4001 san.ext other.crt\n"
    "echo 'extendedKeyUsage=clientAuth' > client.ext\n"
    "sign client.csr ca 3001 client.ext client.crt\n"
    "sign client.csr other-ca 3002 client.ext client-other.crt\n"
    /* `openssl ca` takes dates in the past; it needs a database. */
    "mkdir -p cadb && : > cadb/index.txt && echo 1003 > cadb/serial\n"
    "printf '[ca]\\ndefault_ca=px\\n[px]\\ndatabase=cadb/index.txt\\n"
    "new_certs_dir=cadb\\nserial=cadb/serial\\ndefault_md=sha256\\n"
    "policy=pol\\nunique_subject=no\\n[pol]\\ncommonName=supplied\\n' "
    "> ca.cnf\n"
    "openssl ca -batch -config ca.cnf -cert ca.crt -keyfile ca.key "
    "-in server.csr -out expired.crt -startdate 20200101000000Z "
    "-enddate 20200201000000Z -extfile san.ext -notext 2>/dev/null\n";

static struct px_tls_certs tls_certs;
static int tls_made;

const struct px_tls_certs *px_tls_certs(void)
{
    struct {
        char *path;
        const char *name;
    } files[] = {
        { tls_certs.ca, "ca.crt" },
        { tls_certs.other_ca, "other-ca.crt" },
        { tls_certs.server_key, "server.key" },
        { tls_certs.server, "server.crt" },
        { tls_certs.rotated, "rotated.crt" },
        { tls_certs.wrong_name, "wrong.crt" },
        { tls_certs.expired, "expired.crt" },
        { tls_certs.other, "other.crt" },
        { tls_certs.client_key, "client.key" },
        { tls_certs.client, "client.crt" },
        { tls_certs.client_other, "client-other.crt" },
    };
    char dir[PX_PATH_MAX - 64]; /* room for "/<file>" */
    struct px_run r;
    size_t i;

    if (tls_made) {
        return &tls_certs;
    }
    px_env_prepare();
    px_path(dir, sizeof(dir), "certs");
    cr_assert_eq(mkdir(dir, 0700), 0, "mkdir %s", dir);
    {
        const char *argv[] = { "/bin/sh", "-c", tls_script, "sh", dir, NULL };
        px_run(&r, argv);
    }
    cr_assert_eq(r.status, 0, "making certificates: %s%s", r.out, r.err);
    px_run_free(&r);
    for (i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        snprintf(files[i].path, PX_PATH_MAX, "%s/%s", dir, files[i].name);
        cr_assert_eq(access(files[i].path, R_OK), 0, "%s not made",
                     files[i].path);
    }
    tls_made = 1;
    return &tls_certs;
}

/* Arguments of each TLS redis-server, kept for px_redis_restart (the
 * fixture borrows them). */
#define TLS_REDIS_MAX 4
static struct {
    struct px_child *r;
    char port[16];
    char cert[PX_PATH_MAX];
    char auth[8];
    const char *argv[16];
} tls_redis[TLS_REDIS_MAX];

int px_tls_redis_start(struct px_child *r, const char *cert, const char *auth)
{
    const struct px_tls_certs *c = px_tls_certs();
    size_t k, n = 0;

    for (k = 0; k < TLS_REDIS_MAX; k++) {
        if (tls_redis[k].r == NULL || tls_redis[k].r == r) {
            break;
        }
    }
    cr_assert(k < TLS_REDIS_MAX, "too many TLS redis-servers");
    tls_redis[k].r = r;
    snprintf(tls_redis[k].port, sizeof(tls_redis[k].port), "%d",
             px_free_port());
    snprintf(tls_redis[k].cert, sizeof(tls_redis[k].cert), "%s", cert);
    snprintf(tls_redis[k].auth, sizeof(tls_redis[k].auth), "%s", auth);
    tls_redis[k].argv[n++] = "--tls-port";
    tls_redis[k].argv[n++] = tls_redis[k].port;
    tls_redis[k].argv[n++] = "--tls-cert-file";
    tls_redis[k].argv[n++] = tls_redis[k].cert;
    tls_redis[k].argv[n++] = "--tls-key-file";
    tls_redis[k].argv[n++] = c->server_key;
    tls_redis[k].argv[n++] = "--tls-ca-cert-file";
    tls_redis[k].argv[n++] = c->ca;
    tls_redis[k].argv[n++] = "--tls-auth-clients";
    tls_redis[k].argv[n++] = tls_redis[k].auth;
    tls_redis[k].argv[n] = NULL;
    px_redis_start(r, tls_redis[k].argv);
    return atoi(tls_redis[k].port);
}

/* ---------------- The TLS client ---------------- */

struct px_tls {
    int fd;
    SSL_CTX *ctx;
    SSL *ssl;
    redisReader *rd;
};

void px_tls_close(struct px_tls *t)
{
    if (t == NULL) {
        return;
    }
    if (t->rd != NULL) {
        SSL_shutdown(t->ssl); /* close_notify, as redis-cli --tls sends */
    }
    SSL_free(t->ssl);
    SSL_CTX_free(t->ctx);
    if (t->fd >= 0) {
        close(t->fd);
    }
    redisReaderFree(t->rd);
    free(t);
}

struct px_tls *px_tls_open(int port, const char *ca, const char *host,
                           const char *cert, char *err, size_t errlen)
{
    const struct px_tls_certs *c = px_tls_certs();
    struct px_tls *t = calloc(1, sizeof(*t));
    struct timeval tv = { .tv_sec = PX_CLIENT_TIMEOUT_S, .tv_usec = 0 };
    int one = 1, rc;

    cr_assert_not_null(t);
    t->fd = px_raw_connect(port, 0);
    setsockopt(t->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(t->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    t->ctx = SSL_CTX_new(TLS_client_method());
    cr_assert_not_null(t->ctx);
    if (ca != NULL) {
        cr_assert_eq(SSL_CTX_load_verify_locations(t->ctx, ca, NULL), 1);
        SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER, NULL);
    }
    if (cert != NULL) {
        cr_assert_eq(
            SSL_CTX_use_certificate_file(t->ctx, cert, SSL_FILETYPE_PEM), 1);
        cr_assert_eq(SSL_CTX_use_PrivateKey_file(t->ctx, c->client_key,
                                                 SSL_FILETYPE_PEM),
                     1);
    }
    t->ssl = SSL_new(t->ctx);
    cr_assert_not_null(t->ssl);
    if (host != NULL) {
        SSL_set_tlsext_host_name(t->ssl, host);
        SSL_set1_host(t->ssl, host);
    }
    SSL_set_fd(t->ssl, t->fd);
    rc = SSL_connect(t->ssl);
    if (rc == 1) {
        /* TLS 1.3: a refused client certificate is told after the
         * client's Finished; a round trip shows it. */
        char b;
        SSL_write(t->ssl, "*1\r\n$4\r\nPING\r\n", 14);
        rc = SSL_peek(t->ssl, &b, 1) == 1 ? 1 : -1;
    }
    if (rc != 1) {
        unsigned long e = ERR_peek_last_error();
        snprintf(err, errlen, "%s",
                 e != 0 ? ERR_reason_error_string(e) : "handshake failed");
        ERR_clear_error();
        px_tls_close(t);
        return NULL;
    }
    t->rd = redisReaderCreate();
    cr_assert_not_null(t->rd);
    px_check_status(px_tls_next(t), "PONG");
    return t;
}

void px_tls_first_line(int port, char *out, size_t outlen)
{
    struct timeval tv = { .tv_sec = PX_CLIENT_TIMEOUT_S, .tv_usec = 0 };
    int fd = px_raw_connect(port, 0), n;
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    SSL *ssl;
    size_t got = 0;

    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    cr_assert_not_null(ctx);
    ssl = SSL_new(ctx);
    SSL_set_fd(ssl, fd);
    cr_assert_eq(SSL_connect(ssl), 1, "TLS handshake with port %d", port);
    while (got + 1 < outlen &&
           (n = SSL_read(ssl, out + got, (int)(outlen - 1 - got))) > 0) {
        got += (size_t)n;
        if (memchr(out, '\n', got) != NULL) {
            break;
        }
    }
    out[got] = '\0';
    ERR_clear_error();
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    close(fd);
}

struct px_tls *px_tls_connect(int port)
{
    char err[256];
    struct px_tls *t = px_tls_open(port, px_tls_certs()->ca, "localhost", NULL,
                                   err, sizeof(err));

    cr_assert_not_null(t, "TLS handshake with port %d: %s", port, err);
    return t;
}

static void px_tls_vappend(struct px_tls *t, const char *fmt, va_list ap)
{
    char *cmd = NULL;
    int len = redisvFormatCommand(&cmd, fmt, ap);
    int off = 0;

    cr_assert(len > 0, "bad command format");
    while (off < len) {
        int n = SSL_write(t->ssl, cmd + off, len - off);
        cr_assert(n > 0, "TLS write failed");
        off += n;
    }
    free(cmd);
}

void px_tls_append(struct px_tls *t, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    px_tls_vappend(t, fmt, ap);
    va_end(ap);
}

redisReply *px_tls_next(struct px_tls *t)
{
    void *reply = NULL;
    char buf[16384];

    for (;;) {
        cr_assert_eq(redisReaderGetReply(t->rd, &reply), REDIS_OK, "bad reply");
        if (reply != NULL) {
            return reply;
        }
        int n = SSL_read(t->ssl, buf, sizeof(buf));
        cr_assert(n > 0, "no reply over TLS (connection closed or timed out)");
        redisReaderFeed(t->rd, buf, (size_t)n);
    }
}

redisReply *px_tls_cmd(struct px_tls *t, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    px_tls_vappend(t, fmt, ap);
    va_end(ap);
    return px_tls_next(t);
}

redisReply *px_tls_try_vcmd(int port, const char *fmt, va_list ap)
{
    struct timeval tv = { .tv_sec = 1, .tv_usec = 0 };
    struct sockaddr_in sa;
    SSL_CTX *ctx = NULL;
    SSL *ssl = NULL;
    redisReader *rd = NULL;
    void *reply = NULL;
    char *cmd = NULL, buf[16384];
    int fd, len, n;

    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) {
        return NULL;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = htons((unsigned short)port);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    len = redisvFormatCommand(&cmd, fmt, ap);
    if (len <= 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        goto done;
    }
    ctx = SSL_CTX_new(TLS_client_method());
    if (ctx == NULL ||
        SSL_CTX_load_verify_locations(ctx, px_tls_certs()->ca, NULL) != 1) {
        goto done;
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    ssl = SSL_new(ctx);
    if (ssl == NULL || SSL_set_fd(ssl, fd) != 1 || SSL_connect(ssl) != 1 ||
        SSL_write(ssl, cmd, len) != len) {
        goto done;
    }
    rd = redisReaderCreate();
    while (rd != NULL && redisReaderGetReply(rd, &reply) == REDIS_OK &&
           reply == NULL) {
        n = SSL_read(ssl, buf, sizeof(buf));
        if (n <= 0) {
            break;
        }
        redisReaderFeed(rd, buf, (size_t)n);
    }
done:
    ERR_clear_error();
    if (rd != NULL) {
        redisReaderFree(rd);
    }
    if (ssl != NULL) {
        SSL_free(ssl);
    }
    SSL_CTX_free(ctx);
    free(cmd);
    close(fd);
    return reply;
}

void px_tls_peer_serial(struct px_tls *t, char *out, size_t outlen)
{
    X509 *x = SSL_get1_peer_certificate(t->ssl);
    BIGNUM *bn;
    char *dec;

    cr_assert_not_null(x, "no peer certificate");
    bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(x), NULL);
    dec = BN_bn2dec(bn);
    snprintf(out, outlen, "%s", dec);
    OPENSSL_free(dec);
    BN_free(bn);
    X509_free(x);
}

#endif /* PX_TLS */

int px_file_has(const char *path, const char *needle)
{
    char *text = px_read_file(path, NULL);
    int found = text != NULL && strstr(text, needle) != NULL;

    free(text);
    return found;
}

void px_file_wait(const char *path, const char *needle, int ms)
{
    long long deadline = px_now_ms() + ms;

    while (!px_file_has(path, needle)) {
        if (px_now_ms() >= deadline) {
            char *text = px_read_file(path, NULL);
            cr_assert_fail("\"%s\" not in %s:\n%s", needle, path,
                           text != NULL ? text : "(unreadable)");
        }
        px_sleep_ms(20);
    }
}

int px_file_count(const char *path, const char *needle)
{
    char *text = px_read_file(path, NULL);
    const char *p = text;
    int n = 0;

    while (p != NULL && (p = strstr(p, needle)) != NULL) {
        n++;
        p = strchr(p, '\n');
    }
    free(text);
    return n;
}
