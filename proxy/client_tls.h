/* Clients of tls_listen: the handshake, its timeout, and decryption of
 * what they send (the engine is proxy/core/tls.c). A failed or stalled
 * handshake closes that connection alone, with one log line (at most one
 * per second however many fail); a handshake in progress holds a client
 * slot (max_clients) like any connection. */
#ifndef PX_PROXY_CLIENT_TLS_H
#define PX_PROXY_CLIENT_TLS_H

#include <stddef.h>
#include <stdint.h>

struct client;

/* `c` came in on tls_listen: its handshake starts (it waits for the
 * ClientHello), timed by tls_handshake_timeout_ms. */
void client_tls_accept(struct client *c);

/* Decrypts `n` bytes `c` sent into its request reader. 0 when requests
 * may be parsed, -1 when not (the handshake still runs, or it failed and
 * `c` is closed). */
int client_tls_read(struct client *c, const char *p, size_t n);

/* `c` is closing: it leaves the handshake queue and the TLS count. */
void client_tls_gone(struct client *c);

/* Closes the clients whose handshake has run longer than
 * tls_handshake_timeout_ms (the cron). */
void client_tls_cron(uint64_t now_ms);

#endif /* PX_PROXY_CLIENT_TLS_H */
