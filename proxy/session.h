/* Session commands: what only sets or reads a client's own connection
 * state (CLIENT and its subcommands, SELECT, READONLY, READWRITE, ASKING).
 * cellgate answers them itself, in Redis 7.2's words, so a client
 * library's handshake (CLIENT SETINFO, CLIENT SETNAME, ...) never binds a
 * connection; the few that change what Redis does for the connection
 * (CLIENT TRACKING, CLIENT NO-TOUCH on, SELECT n) go to a private one. */
#ifndef PX_PROXY_SESSION_H
#define PX_PROXY_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "proxy/cmd_def.h"

struct client;
struct req;

/* True when p[0..len) may be a client name or library attribute:
 * printable ASCII without blanks (Redis's rule), so CLIENT LIST stays
 * splittable on spaces. */
int session_attr_ok(const char *p, size_t len);

/* CLIENT <subcommand> ...: the subcommands cellgate answers. */
void session_client(struct req *req);

/* CLIENT's way (cmd_pick_fn): answered here, forwarded (HELP, a
 * subcommand the node does not know, CACHING without tracking), or on a
 * private connection for good (a subcommand of a newer Redis). */
cmd_pick_fn session_client_pick;

/* SELECT <db>: 0 is answered here, n > 0 needs a private connection. */
void session_select(struct req *req);

/* READONLY and READWRITE: remembered for CLIENT LIST. */
void session_readonly(struct req *req);

/* ASKING: cellgate follows -ASK itself; on a shared connection the flag
 * would land on another client's command. */
void session_asking(struct req *req);

/* Helpers of the CLIENT family (session.c, tracking.c). */

/* Completes `req` with +OK. */
void session_ok(struct req *req);

/* Argument i as a strict decimal (Redis's string2ll). 0 or -1. */
int session_arg_ll(const struct req *req, int i, long long *out);

/* Parses argument 2 as ON or OFF into *on. 0, or -1 after replying. */
int session_on_off(struct req *req, int *on);

/* The open client with id `id` (CLIENT ID's number), or NULL. */
struct client *session_client_by_id(uint64_t id);

#endif /* PX_PROXY_SESSION_H */
