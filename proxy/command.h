/* The command table: only what the proxy must know about a command to route
 * it. Commands not in the table are forwarded untouched (module commands,
 * newer Redis commands), so the table lists proxy-local commands and commands
 * that need a connection of their own. */
#ifndef PX_PROXY_COMMAND_H
#define PX_PROXY_COMMAND_H

#include <stddef.h>

struct req;

typedef void cmd_proc_fn(struct req *req);

/* Flags. */
#define CMD_F_LOCAL   (1u << 0) /* answered (or routed) by proc */
#define CMD_F_NOAUTH  (1u << 1) /* allowed before AUTH */
#define CMD_F_MULTI   (1u << 2) /* starts a transaction: private conn */
#define CMD_F_TXEND   (1u << 3) /* EXEC/DISCARD: ends MULTI and WATCH */
#define CMD_F_WATCH   (1u << 4) /* WATCH: private conn while watching */
#define CMD_F_UNWATCH (1u << 5) /* UNWATCH */
#define CMD_F_PUBSUB  (1u << 6) /* subscribe family: private conn */
#define CMD_F_UNSUB   (1u << 7) /* unsubscribe family */
#define CMD_F_BLOCKING                                                         \
    (1u << 8)                   /* may block or hold the node: private         \
                                   conn for the call */
#define CMD_F_XBLOCK (1u << 9)  /* blocks only with a BLOCK option */
#define CMD_F_STICKY (1u << 10) /* binds the connection for good */
#define CMD_F_REFUSE                                                           \
    (1u << 11)                   /* would break a shared connection and        \
                                    has no use through a proxy */
#define CMD_F_MONITOR (1u << 12) /* MONITOR: private, until RESET/QUIT */
#define CMD_F_TUNNEL                                                           \
    (1u << 13) /* SYNC/PSYNC: the private connection                           \
                  becomes a byte tunnel for good */

struct cmd_def {
    const char *name;  /* lower case */
    int arity;         /* Redis convention: -N means at least N */
    unsigned flags;    /* CMD_F_* */
    cmd_proc_fn *proc; /* handler of CMD_F_LOCAL commands */
};

/* The entry for a command name (any case), or NULL when not in the table. */
const struct cmd_def *cmd_lookup(const char *name, size_t len);

/* True when argc satisfies the entry's arity. */
int cmd_arity_ok(const struct cmd_def *def, int argc);

/* The whole table (sorted by name), for the invariant test. */
const struct cmd_def *cmd_table(size_t *n);

#endif /* PX_PROXY_COMMAND_H */
