/* What the modules below client.c may ask of a client. client.c installs
 * one table in every client it accepts (c->ops): priv.c (the private
 * upstream) and session.c (CLIENT KILL) reach the connection code through
 * it, so they sit under client.c instead of calling back up into it, as
 * libuv's handles and twemproxy's conn callbacks do. */
#ifndef PX_PROXY_CLIENT_OPS_H
#define PX_PROXY_CLIENT_OPS_H

#include <stddef.h>

struct client;

struct client_ops {
    /* Relays bytes no request asked for (pub/sub messages) in order. */
    void (*push)(struct client *c, const char *p, size_t n);
    /* Sees a reply frame of the private upstream (subscription counts). */
    void (*frame)(struct client *c, const char *p, size_t n);
    /* The state that lived on the private upstream is gone: forget it. */
    void (*state_gone)(struct client *c);
    /* Closes the client after the replies it is owed, as a dropped Redis
     * connection would. */
    void (*close_after_owed)(struct client *c);
    /* Closes the client now (idempotent); owed requests become orphans. */
    void (*close)(struct client *c);
    /* Reads and parses nothing more; replies already owed still go out. */
    void (*stop_reading)(struct client *c);
};

#endif /* PX_PROXY_CLIENT_OPS_H */
