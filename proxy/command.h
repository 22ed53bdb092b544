/* The command table: only what the proxy must know about a command to route
 * it (a row: cmd_def.h). Commands not in the table are forwarded untouched
 * (module commands, newer Redis commands), so the table lists proxy-local
 * commands and commands that need a connection of their own. */
#ifndef PX_PROXY_COMMAND_H
#define PX_PROXY_COMMAND_H

#include <stddef.h>

#include "proxy/cmd_def.h"

struct req;
struct resp_cmd;

/* The entry for a command name (any case), or NULL when not in the table. */
const struct cmd_def *cmd_lookup(const char *name, size_t len);

/* True when argc satisfies the entry's arity. */
int cmd_arity_ok(const struct cmd_def *def, int argc);

/* The row that serves `cmd`, whose command's own row is `top` (NULL
 * when not in the table): its subcommand's row when there is one
 * ("script|load"), else `top`. */
const struct cmd_def *cmd_sub(const struct cmd_def *top,
                              const struct resp_cmd *cmd);

/* Picks: the argument-dependent ways (see cmd_pick_fn), for the tests. */
cmd_pick_fn cmd_pick_ping;
cmd_pick_fn cmd_pick_script;
cmd_pick_fn cmd_pick_unsub;

/* The whole table (sorted by name), for the invariant test. */
const struct cmd_def *cmd_table(size_t *n);

#endif /* PX_PROXY_COMMAND_H */
