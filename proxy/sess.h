/* A client's Redis-side state: what Redis itself remembers about the
 * client's connection (a transaction, WATCH, subscriptions, a selected db,
 * MONITOR, CLIENT TRACKING, ...), which is why such a client holds a
 * private upstream. The state and every transition of it live here, as
 * pure functions of their arguments (no server, no I/O), so each is
 * unit-tested (tests/unit/test_sess.c); the router, the client and the
 * handlers call them and do the sending.
 *
 * What cellgate keeps for the client on its own (name, lib-name, reply
 * mode, auth) is not here: it never needs a connection. */
#ifndef PX_PROXY_SESS_H
#define PX_PROXY_SESS_H

struct sess {
    long db;                     /* selected database */
    unsigned subs;               /* channels + patterns subscribed */
    unsigned ssubs;              /* shard channels subscribed */
    int multi_count;             /* commands queued since MULTI */
    unsigned multi : 1;          /* inside MULTI */
    unsigned multi_deferred : 1; /* cluster: MULTI answered, not yet sent:
                                    the first command picks the node */
    unsigned tx_failed : 1;      /* a deferred transaction had a refused
                                    command: its EXEC aborts */
    unsigned watching : 1;       /* WATCH active */
    unsigned sticky : 1;         /* private upstream kept for good (MONITOR,
                                    SCRIPT DEBUG, a connection command
                                    cellgate does not know) */
    unsigned tracking : 1;       /* CLIENT TRACKING on: private upstream */
    unsigned no_touch : 1;       /* CLIENT NO-TOUCH on: private upstream */
    unsigned monitor : 1;        /* MONITOR: the private upstream streams */
    unsigned redir_target : 1;   /* another client's invalidations come to
                                    its private upstream: kept while it
                                    lives */
    unsigned tunnel : 1;         /* SYNC/PSYNC: its private upstream relays
                                    the replication stream; everything it
                                    sends goes there */
    unsigned push_wait : 1;      /* RESP3: a pub/sub command was sent whose
                                    confirmation push has not arrived yet */
};

/* True inside a transaction (open upstream or deferred). */
int sess_in_multi(const struct sess *s);

/* True with a subscription (channels, patterns or shard channels). */
int sess_subscribed(const struct sess *s);

/* True when Redis queues (or refuses) a command of flags `cmd_flags`
 * (CMD_F_*) in the transaction's connection: everything inside MULTI but
 * the commands allowed before AUTH (AUTH, HELLO, QUIT, RESET). */
int sess_queues(const struct sess *s, unsigned cmd_flags);

/* A command queued inside MULTI (sess_queues): EXEC/DISCARD end the
 * transaction and WATCH, anything else counts as queued. */
void sess_on_queued(struct sess *s, unsigned cmd_flags);

/* A command of flags `cmd_flags` outside MULTI, bound for Redis: MULTI
 * opens a transaction, EXEC/DISCARD end it, WATCH/UNWATCH, a sticky
 * command or MONITOR set what they set. */
void sess_on_command(struct sess *s, unsigned cmd_flags);

/* SYNC/PSYNC, or anything after it: the private upstream is a byte tunnel
 * for good. */
void sess_on_tunnel(struct sess *s);

/* What the caller must do after refusing a command (the key guard, the
 * command policy, no node or no private upstream to be had). */
enum sess_refusal {
    SESS_REFUSAL_NONE,   /* no transaction: the refusal is the reply */
    SESS_REFUSAL_MARKED, /* the deferred transaction is marked: its EXEC
                            answers EXECABORT here */
    SESS_REFUSAL_POISON, /* the transaction is open on the node: queue a
                            command Redis refuses (its error dropped), so
                            the node's EXEC answers EXECABORT */
};

/* A command was refused inside the client's transaction (`tx_upstream`:
 * MULTI already reached the node). The one place that decides that EXEC
 * must abort, as Redis does for a command refused while queuing. */
enum sess_refusal sess_tx_refused(struct sess *s, int tx_upstream);

/* The deferred MULTI is being sent to the node, ahead of the
 * transaction's first command. 1 when a command was refused before it:
 * the caller poisons the transaction there too (SESS_REFUSAL_POISON). */
int sess_multi_sent(struct sess *s);

/* How a deferred transaction's EXEC or DISCARD is answered when nothing
 * reached a node. */
enum sess_txend {
    SESS_TXEND_OK,    /* DISCARD: +OK */
    SESS_TXEND_EMPTY, /* EXEC of an empty transaction: *0 */
    SESS_TXEND_ABORT, /* EXEC after a refused command: -EXECABORT */
};

/* Ends the deferred transaction (`discard`: DISCARD, else EXEC). */
enum sess_txend sess_tx_end_deferred(struct sess *s, int discard);

/* True when every command of the client must go to its private upstream:
 * its state there decides (a transaction, WATCH, RESP2 subscribed mode, a
 * selected db, MONITOR, the Lua debugger), or single mode (`cluster` 0),
 * where the private upstream is on the one node and keeps the client's
 * order. A RESP3 subscriber with nothing else (`priv_proto` is the
 * private upstream's protocol, `priv_idle` 1 when it owes no reply) uses
 * the shared path too. `proto` is the client's protocol. */
int sess_needs_private(const struct sess *s, int cluster, int proto,
                       int priv_proto, int priv_idle);

/* True while the client holds state that lives on its private upstream. */
int sess_has_state(const struct sess *s);

/* Forgets everything (the private upstream is gone or was reset). */
void sess_reset(struct sess *s);

#endif /* PX_PROXY_SESS_H */
