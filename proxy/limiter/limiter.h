/* The limiter layer: CL.THROTTLE (exactly as redis-cell) and LIMITER (the
 * limits tree), answered by the proxy itself.
 *
 * It sits on the core (requests, the cluster's send API) and never calls
 * the client or the router: the top layer hands it a request and the
 * caller's rights, and the request's own completion callback takes the
 * reply back. Its state is one struct limiter, embedded in the server and
 * given everything it needs when it is created; the store (in-process, or
 * the Redis nodes through scripts) is chosen once, at limiter_init, and
 * embedded as a struct store (store.h), its own context. */
#ifndef PX_PROXY_LIMITER_LIMITER_H
#define PX_PROXY_LIMITER_LIMITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proxy/core/queue.h"
#include "proxy/limiter/limiter_lease.h"
#include "proxy/limiter/limiter_reload.h"
#include "proxy/limiter/limiter_tree.h"
#include "proxy/limiter/limiter_wait.h"
#include "proxy/limiter/store.h"

struct cluster;
struct conf;
struct core;
struct limits_tree;
struct req;

struct limiter {
    struct core *core;              /* borrowed: the loop (WAIT timers) */
    const struct conf *conf;        /* borrowed */
    struct limits_tree *limits;     /* owned: limits.yaml, or NULL */
    struct limiter_waits waits;     /* replies held by CHECK ... WAIT, and
                                       their caps */
    struct store store;             /* THE store, chosen at limiter_init: in
                                       the process or on the Redis nodes */
    struct metrics_rule **rules;    /* owned array, borrowed entries: the
                                       counters of each rule of `limits`
                                       (limits_rule_pattern's index) */
    struct limiter_tree tree;       /* CHECK, PEEK, RESET (limiter_tree.h) */
    struct limiter_reloads reloads; /* RELOAD and SIGHUP, off the loop
                                       (limiter_reload.h) */
    struct limiter_leases leases;   /* leases of hot identities
                                       (limiter_lease.h) */
};

/* Sets up `lm` on `core`, storing in `cl`'s nodes, or in the process when
 * `embedded`. */
void limiter_init(struct limiter *lm, struct core *core, struct cluster *cl,
                  const struct conf *conf, int embedded);

/* CL.THROTTLE <key> <max_burst> <count> <period> [<quantity>]; a key
 * under the key prefix only for an admin client. The key is db `db`'s
 * (the client's SELECT), as with redis-cell; LIMITER's keys, the raw form
 * "LIMITER <key> ..." included, are always db 0's. */
void limiter_throttle(struct limiter *lm, struct req *req, int admin,
                      unsigned db, void (*resume)(struct req *req));

/* The error of a client that is not admin naming a key under the key
 * prefix (%s): limiter keys belong to the proxy, whether an ordinary
 * command or CL.THROTTLE names them (a CL.THROTTLE of another identity's
 * key would push its TAT ahead). */
#define LIMITER_ERR_PREFIX                                                     \
    "NOPERM keys under '%s' belong to the rate limiter; AUTH admin to "        \
    "touch them"

/* LIMITER <key> <max_burst> <count> <period> [<quantity>], and the
 * subcommands of the limits tree. `admin`: the caller may use the admin
 * subcommands (RESET, OVERRIDE, RELOAD). For both: when the store cannot
 * take calls yet (a cluster before its slot map) `req` is held and goes
 * on at `resume`, the caller's entry for the command, which calls here
 * again; nothing before the limiter runs twice. */
void limiter_command(struct limiter *lm, struct req *req, int admin,
                     void (*resume)(struct req *req));

/* Loads the limits tree from `path` (NULL: none) now, keeping the old
 * tree when the file is bad (at start; reloads go through
 * limiter_reload_start on lm->reloads). PX_OK, or PX_ERR with every error
 * in `err` as "file:line:column: message". */
int limiter_load(struct limiter *lm, const char *path, char *err,
                 size_t errlen);

/* Sends the limiter calls queued so far, batched per node and connection
 * into few script calls (called by the flush pass, before the upstreams
 * are written). A part-filled batch may wait for a reply on its
 * connection (upstream_limiter_turn) and go with the calls of later
 * turns. */
void limiter_flush(struct limiter *lm);

/* Sends every queued limiter call now, part-filled batches too: a
 * client's next command must not reach Redis before the calls it sent
 * earlier. */
void limiter_send_all(struct limiter *lm);

/* True when calls were queued since the last limiter_flush (the flush
 * pass goes round again for them). */
bool limiter_queued(const struct limiter *lm);

/* True when the limiter caches state that a client's write to a key
 * makes stale (refusals learned from Redis): see limiter_forget. */
bool limiter_caches(struct limiter *lm);

/* A client's command that may write `key` (NULL: every key) is on its way
 * to Redis: what the limiter cached of it is forgotten now, so the
 * client's next limiter call sees the write (Redis's own invalidation
 * comes later, on another connection). */
void limiter_forget(struct limiter *lm, const char *key, size_t klen);

/* True when enough calls wait that limiter_flush should not wait for the
 * end of the loop turn (server_flush_early). */
int limiter_flush_due(const struct limiter *lm);

/* Periodic work: expires a little of the in-process store. */
void limiter_cron(struct limiter *lm);

/* Sentinel named a new master in place of `old` ("host:port"): what the
 * limiter knew of the old one goes (the refusal cache's entries and
 * tracker), and every held WAIT reply fails with an error, since its
 * reservation was made there and may not have reached the new master. The
 * library is loaded on the new master by its connections' setup. */
void limiter_master_changed(struct limiter *lm, const char *old);

/* Shutdown, first step: gives every lease back and sends the give-backs.
 * True when some are on their way: the caller waits (the loop running)
 * while limiter_stop_waits, then calls limiter_stop. */
bool limiter_stop_begin(struct limiter *lm, uint64_t now_ms);

/* Whether the give-backs of limiter_stop_begin are still unanswered, for
 * at most LIMITER_LEASE_STOP_MS after it. */
bool limiter_stop_waits(const struct limiter *lm, uint64_t now_ms);

/* Shutdown: fails the calls not yet sent, ends every reply held by
 * LIMITER CHECK ... WAIT, and ends or cancels a reload
 * (limiter_reload_stop). */
void limiter_stop(struct limiter *lm);

/* Frees the limits tree and the store. */
void limiter_free(struct limiter *lm);

/* Calls admitted with the store down (store_down_policy: fail_open). */
uint64_t limiter_fail_open(const struct limiter *lm);

/* LIMITER CHECKs where some shadow level would have refused (each
 * admitted as its real levels decided). */
uint64_t limiter_shadow_limited(const struct limiter *lm);

/* INFO limiter_lease_hits, limiter_lease_takes,
 * limiter_lease_returned_units and limiter_lease_waits, in that order. */
void limiter_lease_stats(const struct limiter *lm, uint64_t out[4]);

/* LIMITER ADJUSTs handed to the store (INFO limiter_adjusts). */
uint64_t limiter_adjusts(const struct limiter *lm);

/* The store's counters (zero where the store keeps none). */
void limiter_stats(struct limiter *lm, struct store_stats *out);

/* The counters of LIMITER CHECK ... WAIT. */
struct limiter_wait_counts {
    uint64_t held;             /* waits in progress (deciding or on a
                                  timer) */
    uint64_t refused_identity; /* refused: limiter_wait_max_per_identity */
    uint64_t refused_total;    /* refused: limiter_wait_max_total */
};

void limiter_wait_counts(const struct limiter *lm,
                         struct limiter_wait_counts *out);

#endif /* PX_PROXY_LIMITER_LIMITER_H */
