/* A client connection's addresses as text, as Redis prints them. Read from
 * the socket alone, in a module of its own below client.c, so that those
 * who print them (CLIENT LIST and KILL, the log lines of a refusal or a
 * failed TLS handshake) need nothing of the connection code. */
#ifndef PX_PROXY_CLIENT_ADDR_H
#define PX_PROXY_CLIENT_ADDR_H

#include <stddef.h>

struct client;

/* Room for client_addr's text ("[ipv6]:port" at most). */
#define CLIENT_ADDR_MAX 64

/* Writes the client's peer (local 0) or local address as "ip:port". */
void client_addr(const struct client *c, int local, char *out, size_t outlen);

#endif /* PX_PROXY_CLIENT_ADDR_H */
