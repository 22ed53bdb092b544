/* The bytes cellgate holds for a client, read from its fields alone. A
 * header of its own, under client.h, so that those who report the count
 * (INFO's snapshot, CLIENT LIST) read a client's fields without calling
 * into the connection code of client.c, which calls them in turn. */
#ifndef PX_PROXY_CLIENT_OUTPUT_H
#define PX_PROXY_CLIENT_OUTPUT_H

#include <stddef.h>

#include "proxy/client.h"
#include "proxy/core/wq.h"

/* Bytes the proxy holds for `c`: written but not taken by the kernel,
 * and kept in c->reqs (what client_max_output_bytes bounds). */
static inline size_t client_output_bytes(const struct client *c)
{
    return wq_pending(&c->wq) + c->held;
}

#endif /* PX_PROXY_CLIENT_OUTPUT_H */
