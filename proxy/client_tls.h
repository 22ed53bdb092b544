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

/* What client_tls_read asks of its caller, who owns the connection:
 * this module only decrypts and logs, and calls nothing back up. */
enum client_tls_rc {
    CLIENT_TLS_PARSE,  /* plaintext is in the request reader: parse it */
    CLIENT_TLS_OPENED, /* the handshake just completed: parse, and write
                          what waited for it (a refusal at max_clients) */
    CLIENT_TLS_WAIT,   /* the handshake still runs: nothing to parse */
    CLIENT_TLS_CLOSE,  /* it failed (logged) or the peer sent close_notify:
                          close `c` */
};

/* Decrypts `n` bytes `c` sent into its request reader. Whatever the
 * result, bytes in c->wq.enc (the handshake's answer, an alert) are to be
 * written unless `c` is to be closed. */
enum client_tls_rc client_tls_read(struct client *c, const char *p, size_t n);

/* `c` is closing: it leaves the handshake queue and the TLS count. */
void client_tls_gone(struct client *c);

/* The oldest client whose handshake has run longer than
 * tls_handshake_timeout_ms at `now_ms`, its failure logged, for the
 * caller (the cron) to close; NULL when there is none. Closing it takes
 * it off the handshake queue, so the cron calls this until NULL. */
struct client *client_tls_expired(uint64_t now_ms);

#endif /* PX_PROXY_CLIENT_TLS_H */
