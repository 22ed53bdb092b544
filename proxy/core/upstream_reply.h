/* What a reply frame of Redis says about its connection, before it is
 * matched to a request: pure checks of the frame's bytes. */
#ifndef PX_PROXY_CORE_UPSTREAM_REPLY_H
#define PX_PROXY_CORE_UPSTREAM_REPLY_H

#include <stddef.h>

struct metrics_node;

/* True for the errors Redis sends a connection it refuses, as it accepts
 * it and before reading anything: the client limit, protected mode. */
int upstream_reply_refused(const char *frame, size_t len);

/* Counts an error reply of the node in `mn`: a redirection (MOVED, ASK),
 * or an error. */
void upstream_reply_count(struct metrics_node *mn, const char *frame,
                          size_t len);

#endif /* PX_PROXY_CORE_UPSTREAM_REPLY_H */
