/* TLS at the server level: the two contexts (to Redis, from clients), the
 * tls_listen listener, the reload of both sides' certificates on SIGHUP,
 * and --check-config's test of both contexts. */
#ifndef PX_PROXY_SERVER_TLS_H
#define PX_PROXY_SERVER_TLS_H

#include <stddef.h>
#include <uv.h>

struct conf;

/* Builds the contexts conf asks for (upstream_tls: the core's, before any
 * connection to Redis opens) and listens on tls_listen, calling `cb` for
 * each connection. PX_OK or PX_ERR (logged, with OpenSSL's reason). */
int server_tls_init(const struct conf *conf, int backlog, uv_connection_cb cb);

/* Closes the tls_listen listener (shutdown). */
void server_tls_stop(void);

/* Drops the contexts, once the loop has run dry. */
void server_tls_free(void);

/* SIGHUP: rebuilds both contexts (tls_listen's, upstream_tls's) from
 * their files in the thread pool; new handshakes use them, established
 * connections keep theirs; a side whose files fail keeps its old context
 * and logs why. 1 when TLS is on (something to reload), else 0. */
int server_tls_reload(void);

/* --check-config: builds the contexts conf asks for and frees them. 0, or
 * -1 with the reason (OpenSSL's) in `err`. */
int server_tls_check(const struct conf *conf, char *err, size_t errlen);

#endif /* PX_PROXY_SERVER_TLS_H */
