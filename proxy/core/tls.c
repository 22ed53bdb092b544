/* The TLS engine: OpenSSL over libuv, on the loop, no threads.
 *
 * Design. OpenSSL never owns a socket nor a buffer of ours. Each SSL object
 * has one BIO of our own method (tls_bio_*):
 *
 *   libuv read -> ciphertext (borrowed for the callback)
 *      tls_feed: t->in points at it; SSL_do_handshake / SSL_read pull from
 *      it through the BIO's read, and are called until OpenSSL wants more,
 *      so every byte is consumed before tls_feed returns: nothing is
 *      copied into a memory BIO and nothing is kept between reads
 *      -> plaintext, 16 KB (one record) at a time on the stack -> the sink
 *
 *   the owner's write queue `out` (plaintext)
 *      tls_seal: SSL_write -> the BIO's write appends the records to the
 *      queue's ciphertext buffer (`t->out`, owned by the queue, which
 *      writes and releases it like any output)
 *
 * BIO_s_mem would keep its peak capacity for the connection's life; here
 * every buffer belongs to the connection's owner and is released when
 * empty, and SSL_MODE_RELEASE_BUFFERS lets OpenSSL drop its record buffers
 * between reads, so an idle TLS client costs the SSL object (a few KB).
 *
 * A context (SSL_CTX and the BIO method) is counted: a connection holds
 * its context, so either side's context can be replaced on SIGHUP while
 * older connections go on with the old one (and read into its slab). OpenSSL's
 * error queue is per thread and shared by every connection: it is emptied
 * before each call and after each failure is read, so a reason never lands on
 * the wrong connection. */
#include "proxy/core/tls.h"

#include <arpa/inet.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "conf/conf.h"
#include "proxy/core/util.h"

enum tls_name_kind tls_name_kind(const char *name)
{
    unsigned char addr[16];

    if (inet_pton(AF_INET, name, addr) == 1 ||
        inet_pton(AF_INET6, name, addr) == 1) {
        return TLS_NAME_IP;
    }
    return TLS_NAME_HOST;
}

enum tls_name_kind tls_name_for(const char *addr, const char *configured,
                                char *out, size_t outlen)
{
    const char *start = addr, *end;
    size_t len;

    if (configured != NULL) {
        snprintf(out, outlen, "%s", configured);
        return tls_name_kind(out);
    }
    if (addr[0] == '[' && (end = strchr(addr, ']')) != NULL) {
        start = addr + 1;
    } else {
        end = strrchr(addr, ':');
        if (end == NULL) {
            end = addr + strlen(addr);
        }
    }
    len = (size_t)(end - start);
    if (len >= outlen) {
        len = outlen > 0 ? outlen - 1 : 0;
    }
    if (outlen > 0) {
        memcpy(out, start, len);
        out[len] = '\0';
    }
    return tls_name_kind(out);
}

#if defined(PX_TLS) && PX_TLS

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

/* The read slab of a context's connections (one libuv read). */
#define TLS_SLAB_BYTES (64 * 1024)

/* Plaintext handed to a sink at once: one record at most. */
#define TLS_PLAIN_BYTES (16 * 1024)

/* Largest piece given to SSL_write at once (it takes an int). */
#define TLS_SEAL_CHUNK ((size_t)1 << 30)

struct tls_ctx {
    SSL_CTX *ssl;   /* owned */
    BIO_METHOD *bm; /* owned: the BIO of every connection */
    char *slab;     /* owned: ciphertext reads, NULL until asked */
    unsigned refs;  /* the creator's, and one per connection */
};

struct tls_conn {
    SSL *ssl;            /* owned, with its BIO */
    struct tls_ctx *ctx; /* counted reference */
    struct buf *out;     /* borrowed: the owner's ciphertext to write */
    const char *in;      /* borrowed for one tls_feed: ciphertext */
    size_t in_len;       /* bytes left at `in` */
    unsigned open : 1;   /* the handshake completed */
};

int tls_available(void)
{
    return 1;
}

/* ---------------- The BIO ---------------- */

static int tls_bio_read(BIO *b, char *dst, int len)
{
    struct tls_conn *t = BIO_get_data(b);
    size_t n;

    BIO_clear_retry_flags(b);
    if (t->in_len == 0 || len <= 0) {
        BIO_set_retry_read(b);
        return -1;
    }
    n = t->in_len < (size_t)len ? t->in_len : (size_t)len;
    memcpy(dst, t->in, n);
    t->in += n;
    t->in_len -= n;
    return (int)n;
}

static int tls_bio_write(BIO *b, const char *src, int len)
{
    struct tls_conn *t = BIO_get_data(b);

    BIO_clear_retry_flags(b);
    if (len <= 0) {
        return 0;
    }
    PX_CHECK_OOM(buf_append(t->out, src, (size_t)len));
    return len;
}

static long tls_bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    PX_UNUSED(b);
    PX_UNUSED(num);
    PX_UNUSED(ptr);
    /* Writes land in `out` at once: a flush has nothing to do. */
    return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

static int tls_bio_create(BIO *b)
{
    BIO_set_init(b, 1);
    return 1;
}

/* ---------------- Errors ---------------- */

/* Writes `what` and OpenSSL's reason for the failure at hand into `err`,
 * then empties the error queue. */
static void tls_ossl_error(char *err, size_t errlen, const char *what)
{
    unsigned long e = ERR_peek_last_error();
    char text[256];

    if (e != 0) {
        ERR_error_string_n(e, text, sizeof(text));
        snprintf(err, errlen, "%s: %s", what, text);
    } else {
        snprintf(err, errlen, "%s", what);
    }
    ERR_clear_error();
}

/* The reason a connection failed: the certificate check's when that is
 * what failed, else OpenSSL's, else what the call returned. */
static void tls_conn_error(struct tls_conn *t, int rc, const char *what,
                           char *why, size_t whylen)
{
    int e = SSL_get_error(t->ssl, rc);
    unsigned long code = ERR_peek_last_error();
    long v = SSL_get_verify_result(t->ssl);
    const char *reason = code != 0 ? ERR_reason_error_string(code) : NULL;

    if (code != 0 && ERR_GET_REASON(code) == SSL_R_CERTIFICATE_VERIFY_FAILED &&
        v != X509_V_OK) {
        snprintf(why, whylen, "%s: certificate verify failed: %s", what,
                 X509_verify_cert_error_string(v));
    } else if (reason != NULL) {
        snprintf(why, whylen, "%s: %s", what, reason);
    } else if (code != 0) {
        char text[256];
        ERR_error_string_n(code, text, sizeof(text));
        snprintf(why, whylen, "%s: %s", what, text);
    } else if (e == SSL_ERROR_ZERO_RETURN) {
        snprintf(why, whylen, "%s: closed by the peer (close_notify)", what);
    } else {
        snprintf(why, whylen, "%s: unexpected end of stream", what);
    }
    ERR_clear_error();
}

/* ---------------- Contexts ---------------- */

static void tls_ctx_unref(struct tls_ctx *ctx)
{
    if (ctx == NULL || --ctx->refs > 0) {
        return;
    }
    SSL_CTX_free(ctx->ssl);
    BIO_meth_free(ctx->bm);
    px_free(ctx->slab);
    px_free(ctx);
}

void tls_ctx_free(struct tls_ctx *ctx)
{
    tls_ctx_unref(ctx);
}

char *tls_conn_slab(struct tls_conn *t, size_t *len)
{
    struct tls_ctx *ctx = t->ctx;

    if (ctx->slab == NULL) {
        ctx->slab = px_malloc(TLS_SLAB_BYTES);
    }
    *len = TLS_SLAB_BYTES;
    return ctx->slab;
}

/* The protocol bits -> the lowest and highest versions, and the versions
 * between them that are not listed turned off. */
static void tls_ctx_protocols(SSL_CTX *ssl, unsigned mask)
{
    static const struct {
        unsigned bit;
        int version;
        uint64_t no;
    } v[] = {
        { CONF_TLS_V1, TLS1_VERSION, SSL_OP_NO_TLSv1 },
        { CONF_TLS_V1_1, TLS1_1_VERSION, SSL_OP_NO_TLSv1_1 },
        { CONF_TLS_V1_2, TLS1_2_VERSION, SSL_OP_NO_TLSv1_2 },
        { CONF_TLS_V1_3, TLS1_3_VERSION, SSL_OP_NO_TLSv1_3 },
    };
    size_t i;
    int lo = 0, hi = 0;

    for (i = 0; i < ARRAY_SIZE(v); i++) {
        if (mask & v[i].bit) {
            lo = lo == 0 ? v[i].version : lo;
            hi = v[i].version;
        } else {
            SSL_CTX_set_options(ssl, v[i].no);
        }
    }
    SSL_CTX_set_min_proto_version(ssl, lo);
    SSL_CTX_set_max_proto_version(ssl, hi);
}

/* What both roles share: protocols, ciphers, certificate and key, trust
 * store. `prefix` names the keys in errors ("upstream_tls_", "tls_").
 * PX_OK, or PX_ERR with the reason in `err`. */
static int tls_ctx_setup(SSL_CTX *ssl, const struct conf_tls_side *s,
                         const char *prefix, int default_paths, char *err,
                         size_t errlen)
{
    char what[600];

    SSL_CTX_set_mode(ssl, SSL_MODE_RELEASE_BUFFERS |
                              SSL_MODE_ENABLE_PARTIAL_WRITE |
                              SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_options(ssl, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
    tls_ctx_protocols(ssl, s->protocols);
    if (s->ciphers != NULL && SSL_CTX_set_cipher_list(ssl, s->ciphers) != 1) {
        snprintf(what, sizeof(what), "%sciphers \"%s\"", prefix, s->ciphers);
        tls_ossl_error(err, errlen, what);
        return PX_ERR;
    }
    if (s->ciphersuites != NULL &&
        SSL_CTX_set_ciphersuites(ssl, s->ciphersuites) != 1) {
        snprintf(what, sizeof(what), "%sciphersuites \"%s\"", prefix,
                 s->ciphersuites);
        tls_ossl_error(err, errlen, what);
        return PX_ERR;
    }
    if (s->cert_file != NULL &&
        SSL_CTX_use_certificate_chain_file(ssl, s->cert_file) != 1) {
        snprintf(what, sizeof(what), "%scert_file %s", prefix, s->cert_file);
        tls_ossl_error(err, errlen, what);
        return PX_ERR;
    }
    if (s->key_file != NULL &&
        SSL_CTX_use_PrivateKey_file(ssl, s->key_file, SSL_FILETYPE_PEM) != 1) {
        snprintf(what, sizeof(what), "%skey_file %s", prefix, s->key_file);
        tls_ossl_error(err, errlen, what);
        return PX_ERR;
    }
    if (s->cert_file != NULL && s->key_file != NULL &&
        SSL_CTX_check_private_key(ssl) != 1) {
        snprintf(what, sizeof(what),
                 "%skey_file %s does not match %scert_file %s", prefix,
                 s->key_file, prefix, s->cert_file);
        tls_ossl_error(err, errlen, what);
        return PX_ERR;
    }
    if (s->ca_cert_file != NULL || s->ca_cert_dir != NULL) {
        if (SSL_CTX_load_verify_locations(ssl, s->ca_cert_file,
                                          s->ca_cert_dir) != 1) {
            snprintf(what, sizeof(what), "%sca_cert_%s %s", prefix,
                     s->ca_cert_file != NULL ? "file" : "dir",
                     s->ca_cert_file != NULL ? s->ca_cert_file
                                             : s->ca_cert_dir);
            tls_ossl_error(err, errlen, what);
            return PX_ERR;
        }
    } else if (default_paths && SSL_CTX_set_default_verify_paths(ssl) != 1) {
        tls_ossl_error(err, errlen, "the system trust store");
        return PX_ERR;
    }
    return PX_OK;
}

static struct tls_ctx *tls_ctx_new(SSL_CTX *ssl)
{
    struct tls_ctx *ctx = px_calloc(1, sizeof(*ctx));

    ctx->ssl = ssl;
    ctx->refs = 1;
    /* No BIO_get_new_index(): its 127 indexes would run out after as
     * many reloads, and nothing looks the type up. */
    ctx->bm = BIO_meth_new(BIO_TYPE_SOURCE_SINK, "cellgate");
    if (ctx->bm == NULL) {
        px_oom(0);
    }
    BIO_meth_set_read(ctx->bm, tls_bio_read);
    BIO_meth_set_write(ctx->bm, tls_bio_write);
    BIO_meth_set_ctrl(ctx->bm, tls_bio_ctrl);
    BIO_meth_set_create(ctx->bm, tls_bio_create);
    return ctx;
}

struct tls_ctx *tls_ctx_upstream(const struct conf *c, char *err, size_t errlen)
{
    SSL_CTX *ssl = SSL_CTX_new(TLS_client_method());

    if (ssl == NULL) {
        tls_ossl_error(err, errlen, "SSL_CTX_new");
        return NULL;
    }
    if (tls_ctx_setup(ssl, &c->tls.up, "upstream_tls_", c->tls.up_verify, err,
                      errlen) != PX_OK) {
        SSL_CTX_free(ssl);
        return NULL;
    }
    SSL_CTX_set_verify(
        ssl, c->tls.up_verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, NULL);
    return tls_ctx_new(ssl);
}

struct tls_ctx *tls_ctx_clients(const struct conf *c, char *err, size_t errlen)
{
    SSL_CTX *ssl = SSL_CTX_new(TLS_server_method());
    int mode = SSL_VERIFY_NONE;

    if (ssl == NULL) {
        tls_ossl_error(err, errlen, "SSL_CTX_new");
        return NULL;
    }
    if (tls_ctx_setup(ssl, &c->tls.srv, "tls_", 0, err, errlen) != PX_OK) {
        SSL_CTX_free(ssl);
        return NULL;
    }
    if (c->tls.auth_clients == CONF_TLS_AUTH_YES) {
        mode = SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
    } else if (c->tls.auth_clients == CONF_TLS_AUTH_OPTIONAL) {
        mode = SSL_VERIFY_PEER;
    }
    SSL_CTX_set_verify(ssl, mode, NULL);
    SSL_CTX_set_options(ssl, SSL_OP_CIPHER_SERVER_PREFERENCE);
    /* No session is kept for resumption: a client reconnecting pays a full
     * handshake, and cellgate holds no state per past client. */
    SSL_CTX_set_session_cache_mode(ssl, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_num_tickets(ssl, 0);
    return tls_ctx_new(ssl);
}

/* ---------------- Connections ---------------- */

static struct tls_conn *tls_conn_new(struct tls_ctx *ctx, struct buf *out)
{
    struct tls_conn *t = px_calloc(1, sizeof(*t));
    BIO *bio;

    t->ssl = SSL_new(ctx->ssl);
    bio = BIO_new(ctx->bm);
    if (t->ssl == NULL || bio == NULL) {
        px_oom(0);
    }
    BIO_set_data(bio, t);
    SSL_set_bio(t->ssl, bio, bio); /* one reference, taken by the SSL */
    t->ctx = ctx;
    t->out = out;
    ctx->refs++;
    return t;
}

struct tls_conn *tls_conn_client(struct tls_ctx *ctx, const char *addr,
                                 const char *server_name, struct buf *out)
{
    struct tls_conn *t = tls_conn_new(ctx, out);
    X509_VERIFY_PARAM *param = SSL_get0_param(t->ssl);
    char name[256];
    enum tls_name_kind kind =
        tls_name_for(addr, server_name, name, sizeof(name));

    ERR_clear_error();
    SSL_set_connect_state(t->ssl);
    if (name[0] != '\0') {
        if (kind == TLS_NAME_IP) {
            X509_VERIFY_PARAM_set1_ip_asc(param, name);
        } else {
            SSL_set_tlsext_host_name(t->ssl, name);
            X509_VERIFY_PARAM_set_hostflags(
                param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
            SSL_set1_host(t->ssl, name);
        }
    }
    /* The ClientHello goes to `out`; the call then wants the reply. */
    (void)SSL_do_handshake(t->ssl);
    ERR_clear_error();
    return t;
}

struct tls_conn *tls_conn_server(struct tls_ctx *ctx, struct buf *out)
{
    struct tls_conn *t = tls_conn_new(ctx, out);

    SSL_set_accept_state(t->ssl);
    return t;
}

void tls_conn_free(struct tls_conn *t)
{
    if (t == NULL) {
        return;
    }
    SSL_free(t->ssl);
    tls_ctx_unref(t->ctx);
    px_free(t);
}

int tls_conn_is_open(const struct tls_conn *t)
{
    return t->open;
}

const char *tls_conn_version(const struct tls_conn *t)
{
    return SSL_get_version(t->ssl);
}

int tls_feed(struct tls_conn *t, const char *p, size_t n, tls_sink_fn *sink,
             void *arg, char *why, size_t whylen)
{
    char plain[TLS_PLAIN_BYTES];
    int rc, e, opened = 0;

    ERR_clear_error();
    t->in = p;
    t->in_len = n;
    if (!t->open) {
        rc = SSL_do_handshake(t->ssl);
        if (rc != 1) {
            if (SSL_get_error(t->ssl, rc) == SSL_ERROR_WANT_READ) {
                PX_ASSERT(t->in_len == 0);
                t->in = NULL;
                return TLS_OK;
            }
            tls_conn_error(t, rc, "TLS handshake failed", why, whylen);
            t->in = NULL;
            t->in_len = 0;
            return TLS_ERR;
        }
        t->open = 1;
        opened = 1;
    }
    for (;;) {
        rc = SSL_read(t->ssl, plain, sizeof(plain));
        if (rc > 0) {
            sink(arg, plain, (size_t)rc);
            continue;
        }
        e = SSL_get_error(t->ssl, rc);
        if (e == SSL_ERROR_WANT_READ) {
            break;
        }
        t->in = NULL;
        t->in_len = 0;
        if (e == SSL_ERROR_ZERO_RETURN) {
            ERR_clear_error();
            return TLS_CLOSED; /* a polite goodbye, not an error to log */
        }
        tls_conn_error(t, rc, "TLS error", why, whylen);
        return TLS_ERR;
    }
    PX_ASSERT(t->in_len == 0);
    t->in = NULL;
    return opened ? TLS_OPENED : TLS_OK;
}

static void tls_sink_buf(void *arg, const char *p, size_t n)
{
    PX_CHECK_OOM(buf_append(arg, p, n));
}

int tls_feed_buf(struct tls_conn *t, const char *p, size_t n, struct buf *in,
                 char *why, size_t whylen)
{
    return tls_feed(t, p, n, tls_sink_buf, in, why, whylen);
}

int tls_seal(struct tls_conn *t, const char *p, size_t n, char *why,
             size_t whylen)
{
    PX_ASSERT(t->open);
    ERR_clear_error();
    while (n > 0) {
        int len = (int)(n > TLS_SEAL_CHUNK ? TLS_SEAL_CHUNK : n);
        int rc = SSL_write(t->ssl, p, len);
        if (rc <= 0) {
            tls_conn_error(t, rc, "TLS error", why, whylen);
            return TLS_ERR;
        }
        p += rc;
        n -= (size_t)rc;
    }
    return TLS_OK;
}

#else /* !PX_TLS: the configuration refuses every TLS key (conf_tls.c) */

int tls_available(void)
{
    return 0;
}

struct tls_ctx *tls_ctx_upstream(const struct conf *c, char *err, size_t errlen)
{
    PX_UNUSED(c);
    snprintf(err, errlen, "cellgate was built without TLS (-DPX_TLS=OFF)");
    return NULL;
}

struct tls_ctx *tls_ctx_clients(const struct conf *c, char *err, size_t errlen)
{
    return tls_ctx_upstream(c, err, errlen);
}

void tls_ctx_free(struct tls_ctx *ctx)
{
    PX_ASSERT(ctx == NULL);
}

char *tls_conn_slab(struct tls_conn *t, size_t *len)
{
    PX_UNUSED(t);
    PX_UNUSED(len);
    PX_ASSERT(0);
    return NULL;
}

struct tls_conn *tls_conn_client(struct tls_ctx *ctx, const char *addr,
                                 const char *server_name, struct buf *out)
{
    PX_UNUSED(ctx);
    PX_UNUSED(addr);
    PX_UNUSED(server_name);
    PX_UNUSED(out);
    PX_ASSERT(0);
    return NULL;
}

struct tls_conn *tls_conn_server(struct tls_ctx *ctx, struct buf *out)
{
    return tls_conn_client(ctx, "", NULL, out);
}

void tls_conn_free(struct tls_conn *t)
{
    PX_ASSERT(t == NULL);
}

int tls_conn_is_open(const struct tls_conn *t)
{
    PX_UNUSED(t);
    return 0;
}

const char *tls_conn_version(const struct tls_conn *t)
{
    PX_UNUSED(t);
    return "none";
}

int tls_feed(struct tls_conn *t, const char *p, size_t n, tls_sink_fn *sink,
             void *arg, char *why, size_t whylen)
{
    PX_UNUSED(t);
    PX_UNUSED(p);
    PX_UNUSED(n);
    PX_UNUSED(sink);
    PX_UNUSED(arg);
    snprintf(why, whylen, "no TLS in this build");
    return TLS_ERR;
}

int tls_feed_buf(struct tls_conn *t, const char *p, size_t n, struct buf *in,
                 char *why, size_t whylen)
{
    PX_UNUSED(in);
    return tls_feed(t, p, n, NULL, NULL, why, whylen);
}

int tls_seal(struct tls_conn *t, const char *p, size_t n, char *why,
             size_t whylen)
{
    return tls_feed(t, p, n, NULL, NULL, why, whylen);
}

#endif
