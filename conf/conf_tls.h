/* proxy.yaml's TLS keys: to Redis (upstream_tls_*) and from clients
 * (tls_listen, tls_*), spelled and defaulted as redis.conf's tls-* keys.
 * Leaf layer: the values only; proxy/core/tls.c builds the contexts. */
#ifndef PX_CONF_CONF_TLS_H
#define PX_CONF_CONF_TLS_H

#include <stddef.h>

#include "conf/conf_addr.h"

/* Protocol versions, one bit each (tls_protocols). */
#define CONF_TLS_V1   1u
#define CONF_TLS_V1_1 2u
#define CONF_TLS_V1_2 4u
#define CONF_TLS_V1_3 8u
/* redis.conf's default: "TLSv1.2 TLSv1.3". */
#define CONF_TLS_PROTOCOLS_DEFAULT (CONF_TLS_V1_2 | CONF_TLS_V1_3)

/* tls_auth_clients, as Redis means it. */
enum conf_tls_auth {
    CONF_TLS_AUTH_NO = 0,       /* no client certificate asked */
    CONF_TLS_AUTH_YES = 1,      /* required and verified (default) */
    CONF_TLS_AUTH_OPTIONAL = 2, /* verified when the client sends one */
};

/* One side's certificate, trust store and protocol settings. */
struct conf_tls_side {
    char *ca_cert_file; /* owned; NULL: see each side */
    char *ca_cert_dir;  /* owned; NULL: see each side */
    char *cert_file;    /* owned; NULL = none */
    char *key_file;     /* owned; NULL = none */
    char *ciphers;      /* owned; TLSv1.2 and below, NULL = OpenSSL's */
    char *ciphersuites; /* owned; TLSv1.3, NULL = OpenSSL's */
    unsigned protocols; /* CONF_TLS_V* bits, default "TLSv1.2 TLSv1.3" */
};

struct conf_tls {
    /* To Redis (every connection cellgate opens). */
    int upstream;            /* upstream_tls: default no */
    struct conf_tls_side up; /* upstream_tls_*; no CA: the system's
                                trust store; cert+key: mutual TLS */
    char *up_server_name;    /* owned: SNI and the name checked; NULL =
                                each node's host name (or address) */
    int up_verify;           /* upstream_tls_verify: default yes */
    /* From clients. */
    struct conf_addr listen;         /* tls_listen: port 0 = off (default) */
    struct conf_tls_side srv;        /* tls_*: cert+key needed with
                                        tls_listen; CA: clients' certificates */
    enum conf_tls_auth auth_clients; /* tls_auth_clients: default yes */
    unsigned handshake_timeout_ms;   /* tls_handshake_timeout_ms: 5000 */
};

struct conf;

/* "TLSv1.2 TLSv1.3" (any case, blank-separated, redis.conf's spelling)
 * -> CONF_TLS_V* bits in *mask. 0, or -1 for an unknown or empty list. */
int conf_tls_protocols_parse(const char *s, unsigned *mask);

/* The rules that span keys, checked once the file and the flags are
 * applied (the flags may turn listeners on or off): both listeners off,
 * tls_listen without its certificate, half of a mutual TLS pair, client
 * authentication without a CA, TLS in a build without it. 0, or -1 with
 * the reason in `err`. */
int conf_tls_check(const struct conf *c, char *err, size_t errlen);

#endif /* PX_CONF_CONF_TLS_H */
