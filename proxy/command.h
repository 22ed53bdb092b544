/* The command table: only what the proxy must know about a command to route
 * it. Commands not in the table are forwarded untouched (module commands,
 * newer Redis commands), so the table lists proxy-local commands and commands
 * that need a connection of their own. */
#ifndef PX_PROXY_COMMAND_H
#define PX_PROXY_COMMAND_H

#include <stddef.h>

#include "proxy/merge_build.h"

struct req;
struct resp_cmd;

typedef void cmd_proc_fn(struct req *req);

/* How the proxy serves a command: one look at the table answers "where
 * does X go". A command that is not in the table is CMD_FORWARD (so newer
 * Redis and module commands work without a table edit). */
enum cmd_how {
    CMD_FORWARD, /* to the node of its keys (any master when keyless), on
                    the client's shared connection, byte for byte */
    CMD_LOCAL,   /* answered (or routed) by cellgate itself: `proc` */
    CMD_LIMITER, /* the limiter layer answers it: `proc` */
    CMD_PRIVATE, /* on the client's private connection; the flags say for
                    how long (the call, a state, for good) */
    CMD_SPLIT,   /* cluster mode: split by slot, the parts' replies merged
                    by `merge` (one slot: forwarded as it is) */
    CMD_FANOUT,  /* cluster mode: to every master, merged by `merge` (INFO
                    in single mode too, for the proxy's section) */
    CMD_TUNNEL,  /* SYNC/PSYNC: the private connection becomes a byte
                    tunnel for good */
    CMD_REFUSE,  /* refused: it would break a shared connection and has no
                    use through a proxy */
};

/* Flags: what a command does to the connection's state. */
#define CMD_F_NOAUTH  (1u << 1) /* allowed before AUTH */
#define CMD_F_MULTI   (1u << 2) /* starts a transaction: private conn */
#define CMD_F_TXEND   (1u << 3) /* EXEC/DISCARD: ends MULTI and WATCH */
#define CMD_F_WATCH   (1u << 4) /* WATCH: private conn while watching */
#define CMD_F_UNWATCH (1u << 5) /* UNWATCH */
#define CMD_F_PUBSUB  (1u << 6) /* subscribe family: private conn */
#define CMD_F_UNSUB   (1u << 7) /* unsubscribe family */
#define CMD_F_BLOCKING                                                         \
    (1u << 8)                    /* may block or hold the node: private        \
                                    conn for the call */
#define CMD_F_XBLOCK  (1u << 9)  /* blocks only with a BLOCK option */
#define CMD_F_STICKY  (1u << 10) /* binds the connection for good */
#define CMD_F_MONITOR (1u << 12) /* MONITOR: private, until RESET/QUIT */
#define CMD_F_SUBCMDS (1u << 13) /* has "name|sub" entries (fan-outs) */
#define CMD_F_FLUSH   (1u << 14) /* FLUSHALL/FLUSHDB: every key goes */

struct cmd_def {
    const char *name;      /* lower case; "name|sub" for a subcommand entry */
    int arity;             /* Redis convention: -N means at least N */
    enum cmd_how how;      /* how it is served (above) */
    unsigned flags;        /* CMD_F_* */
    cmd_proc_fn *proc;     /* CMD_LOCAL and CMD_LIMITER: the handler */
    enum merge_kind merge; /* CMD_SPLIT and CMD_FANOUT: how the parts'
                              replies combine */
};

/* The entry for a command name (any case), or NULL when not in the table. */
const struct cmd_def *cmd_lookup(const char *name, size_t len);

/* True when argc satisfies the entry's arity. */
int cmd_arity_ok(const struct cmd_def *def, int argc);

/* The entry that says how `cmd` (whose own entry is `def`, NULL when not
 * in the table) is split or fanned out in cluster mode: `def` itself (MGET,
 * KEYS...) or its subcommand's ("script|load"), or NULL when it is neither
 * split nor fanned out. */
const struct cmd_def *cmd_merge_of(const struct cmd_def *def,
                                   const struct resp_cmd *cmd);

/* The whole table (sorted by name), for the invariant test. */
const struct cmd_def *cmd_table(size_t *n);

#endif /* PX_PROXY_COMMAND_H */
