/* A row of the command table (command.h): how cellgate serves a command,
 * with the flags that say what it does to the connection's state. Apart
 * from the table and its handlers so that the modules below them (the
 * session state, the private connection, locating and merging) read a
 * request's row without depending on the handlers. */
#ifndef PX_PROXY_CMD_DEF_H
#define PX_PROXY_CMD_DEF_H

#include "proxy/merge_build.h"

struct req;
struct resp_cmd;

/* How the proxy serves a command: one look at the table answers "where
 * does X go", and router_dispatch switches on it. A command that is not
 * in the table is CMD_FORWARD (so newer Redis and module commands work
 * without a table edit). */
enum cmd_how {
    CMD_FORWARD, /* to the node of its keys (any master when keyless), on
                    the client's shared connection, byte for byte (its
                    private one while its state there decides) */
    CMD_LOCAL,   /* answered by cellgate: `proc`, which only answers (or
                    sends on the client's private connection, priv.h) */
    CMD_LIMITER, /* the limiter layer answers it: `proc` */
    CMD_PRIVATE, /* on the client's private connection; the flags say for
                    how long (the call, a state, for good) */
    CMD_SPLIT,   /* cluster mode: split by slot, the parts' replies merged
                    by `merge` (one slot: forwarded as it is) */
    CMD_FANOUT,  /* cluster mode: to every master, merged by `merge` (INFO
                    in single mode too, for the proxy's section) */
    CMD_KILL,    /* SCRIPT KILL, FUNCTION KILL: at once, on a connection
                    lent for the call (every master in cluster mode, merged
                    by `merge`): the shared ones are stuck behind the
                    busy script */
    CMD_TUNNEL,  /* SYNC/PSYNC: the private connection becomes a byte
                    tunnel for good */
    CMD_REFUSE,  /* refused: it would break a shared connection and has no
                    use through a proxy */
};

/* clang-format off */
#define CMD_F_NOAUTH   (1u << 1)  /* allowed before AUTH */
#define CMD_F_MULTI    (1u << 2)  /* starts a transaction: private conn */
#define CMD_F_TXEND    (1u << 3)  /* EXEC/DISCARD: ends MULTI and WATCH */
#define CMD_F_WATCH    (1u << 4)  /* WATCH: private conn while watching */
#define CMD_F_UNWATCH  (1u << 5)  /* UNWATCH */
#define CMD_F_PUBSUB   (1u << 6)  /* subscribe family: private conn */
#define CMD_F_UNSUB    (1u << 7)  /* unsubscribe family */
#define CMD_F_BLOCKING (1u << 8)  /* may block or hold the node: private
                                     conn for the call */
#define CMD_F_XBLOCK   (1u << 9)  /* blocks only with a BLOCK option */
#define CMD_F_STICKY   (1u << 10) /* binds the connection for good */
#define CMD_F_MONITOR  (1u << 12) /* MONITOR: private, until RESET/QUIT */
#define CMD_F_SUBCMDS  (1u << 13) /* has "name|sub" rows (cmd_lookup_cmd) */
#define CMD_F_FLUSH    (1u << 14) /* FLUSHALL/FLUSHDB: every key goes */
#define CMD_F_PUBLISH  (1u << 15) /* PUBLISH: cluster mode, the reply also
                                     counts the channel's subscribers
                                     cellgate holds on other nodes */
/* clang-format on */

/* What a `pick` may know besides the command's arguments. */
struct cmd_ctx {
    int has_upstream; /* a Redis behind (not embedded mode) */
    int has_priv;     /* the client holds a private upstream */
    int subscribed;   /* it has subscriptions (sess_subscribed) */
    int tracking;     /* CLIENT TRACKING is on */
    int listed;       /* the nodes' COMMAND table knows the
                         command (req->facts: route_classify) */
};

typedef void cmd_proc_fn(struct req *req);

/* The way of a command whose way depends on its arguments or on the
 * client (Redis's getkeys_proc idea): pure, and unit-tested. May add
 * CMD_F_* to *flags (CMD_F_STICKY: the private connection is kept). */
typedef enum cmd_how cmd_pick_fn(const struct resp_cmd *cmd,
                                 const struct cmd_ctx *ctx, unsigned *flags);

struct cmd_def {
    const char *name;      /* lower case; "name|sub" for a subcommand row */
    int arity;             /* Redis convention: -N means at least N */
    enum cmd_how how;      /* how it is served (above); with `pick`, the
                              class the reply order and latency count by
                              (router_to_redis), `pick` giving the way */
    unsigned flags;        /* CMD_F_* */
    cmd_proc_fn *proc;     /* CMD_LOCAL and CMD_LIMITER: the handler */
    cmd_pick_fn *pick;     /* argument-dependent way, or NULL: `how` */
    enum merge_kind merge; /* CMD_SPLIT, CMD_FANOUT, CMD_KILL: how the
                              parts' replies combine */
    int key_step;          /* CMD_SPLIT: arguments per key (MSET's key
                              value pairs: 2); 0 means 1 */
};

#endif /* PX_PROXY_CMD_DEF_H */
