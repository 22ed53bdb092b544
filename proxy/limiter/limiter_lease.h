/* Leases for hot admitted identities (limits.yaml `lease: N` on a node):
 * a LIMITER CHECK of such a path takes N units at Redis at once, on every
 * level of the path, and the proxy admits the next checks of that path
 * from what it holds, without a Redis call, until the units are spent or
 * limiter_lease_ms passed; what is left is then given back (an ADJUST of
 * the path by minus the units left). Redis is charged before anything is
 * admitted, so a lease can never admit more than the limits allow; what
 * it trades is that the units a proxy holds are not available to the
 * others until it gives them back. The embedded store never leases.
 *
 * The pure decisions (limiter_lease_use, limiter_lease_reply, the
 * expiry) are unit tested; the rest is the glue limiter_tree.c calls. */
#ifndef PX_PROXY_LIMITER_LIMITER_LEASE_H
#define PX_PROXY_LIMITER_LIMITER_LEASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "algorithms/rl.h"
#include "proxy/core/hmap.h"
#include "proxy/core/queue.h"

struct conf;
struct core;
struct limits_levels;
struct limits_tree;
struct req;
struct store_check;

/* Runs `req`, the proxy's own LIMITER ADJUST, as a client's (the tree's
 * entry, limiter_tree with STORE_ADJUST, given by limiter.c so that this
 * file needs nothing of the tree's). */
typedef void limiter_lease_adjust_fn(void *ctx, struct req *req,
                                     void (*resume)(struct req *req));

/* Leases held at once, at most: a new one past it is a plain check. */
#define LIMITER_LEASE_MAX_HELD 10000

/* Checks queued behind one take in flight, at most, and the units they
 * may ask for together, in leases of N: a queued check waits for at most
 * that many takes in a row (those after the first are taken by checks of
 * the queue as the units run out). Past either, a check is plain. */
#define LIMITER_LEASE_QUEUE_MAX   1024
#define LIMITER_LEASE_QUEUE_TAKES 4

/* How long a take in flight is waited for, at least, before its entry
 * is dropped (its client left and the store freed the call). */
#define LIMITER_LEASE_FLIGHT_MS 30000

/* The state of one path's lease. */
enum limiter_lease_state {
    LIMITER_LEASE_IN_FLIGHT, /* its CHECK of COST N is on its way */
    LIMITER_LEASE_LIVE,      /* taken: units left to admit from */
    LIMITER_LEASE_OFF,       /* the take was refused: plain checks until
                                it expires (near the limit a lease would
                                only cost a second call) */
};

/* One path's lease, owned by struct limiter_leases' map. */
struct limiter_lease {
    enum limiter_lease_state state;
    int64_t n;                 /* lease: N of the node when taken */
    int64_t units;             /* LIVE: units left to admit from */
    struct rl_decision taken;  /* LIVE: the take's reply (after its N) */
    uint64_t since_ms;         /* loop time it was sent (IN_FLIGHT) or
                                  taken or refused */
    struct req *taker;         /* IN_FLIGHT: the request taking it,
                                  borrowed (its `cancel` is the lease's
                                  while it is sent), or NULL once the take
                                  failed or its client left */
    int64_t taker_cost;        /* IN_FLIGHT: that request's own COST */
    struct queue waiting;      /* IN_FLIGHT: checks of the path queued
                                  behind the take (client requests, borrowed,
                                  linked by unode), in arrival order */
    unsigned nwait;            /* length of waiting */
    int64_t wait_units;        /* the COSTs of waiting, summed */
    struct limiter_leases *ls; /* borrowed: its owner */
    size_t plen;               /* bytes of path */
    char path[];               /* the deepest level's path, the map key */
};

/* Every lease of a proxy, in struct limiter. */
struct limiter_leases {
    struct hmap map;         /* owned: path -> struct limiter_lease *,
                                each owned */
    bool on;                 /* false: no leases (the embedded store) */
    struct core *core;       /* borrowed: the loop's clock */
    const struct conf *conf; /* borrowed: limiter_shadow */
    struct limits_tree *const *limits; /* borrowed: the tree in force */
    limiter_lease_adjust_fn *adjust;   /* where give-backs go */
    void *adjust_ctx;                  /* borrowed: adjust's context */
    const void *tree;                  /* the limits tree the leases were taken
                                          under (compared only): a RELOAD gives
                                          them all back */
    unsigned ms;                       /* limiter_lease_ms */
    size_t max;                        /* leases held at once, at most */
    size_t cursor;                     /* the expiry sweep's place */
    struct queue ready;                /* checks that waited on a take now
                                          settled, to run again in order
                                          (limiter_leases_drain; borrowed,
                                          linked by unode) */
    const struct req *taking;          /* the check limiter_lease_before
                                          made a take of, until it is sent
                                          (compared only) */
    int64_t taking_cost;               /* that check's own COST */
    uint64_t hits;                     /* checks admitted from a lease */
    uint64_t takes;                    /* leases taken (admitted at Redis) */
    uint64_t returned_units;           /* units given back */
    uint64_t waits;                    /* checks parked behind a take in
                                          flight (a check parked twice
                                          counts twice) */
    unsigned giving;                   /* give-backs sent, not answered */
    uint64_t stop_by;                  /* a shutdown waits for them until
                                          then (loop ms), or 0 */
};

/* What a check does about leases (limiter_lease_use). */
enum limiter_lease_use {
    LIMITER_LEASE_PLAIN, /* a normal check of its own cost */
    LIMITER_LEASE_LOCAL, /* admitted from the live lease */
    LIMITER_LEASE_TAKE,  /* a check of COST N that takes a lease */
    LIMITER_LEASE_QUEUE, /* waits for the take in flight, then again */
};

/* Pure: what a check of `cost` does with lease `l` (NULL: none) of a
 * node with `lease: n` (0: none), at `now_ms` with leases living `ms`.
 * `eligible`: a plain CHECK (no WAIT, HEADERS, shadow level) on a store
 * that leases. A lease that is spent or expired is given back first by
 * the caller (limiter_lease_expired) and counts as none. A take in flight
 * (someone else's) queues the check while fewer than
 * LIMITER_LEASE_QUEUE_MAX wait on it and their costs with this one's stay
 * within LIMITER_LEASE_QUEUE_TAKES leases of n; a take that failed (no
 * taker any more) queues nothing. */
enum limiter_lease_use limiter_lease_use(const struct limiter_lease *l,
                                         int64_t n, int64_t cost,
                                         bool eligible);

/* Pure: whether `l` is over at `now_ms`: `ms` after it was taken or
 * refused; a take in flight after LIMITER_LEASE_FLIGHT_MS at least. */
bool limiter_lease_expired(const struct limiter_lease *l, uint64_t now_ms,
                           unsigned ms);

/* Pure: the decision a check admitted from `l` replies (l->units already
 * net of its cost), `elapsed_ns` after the take: admitted, the take's
 * limit, remaining = the take's remaining + the units still held, no
 * retry, and the take's reset_after less the time passed (not below 0). */
void limiter_lease_reply(const struct limiter_lease *l, int64_t elapsed_ns,
                         struct rl_decision *out);

void limiter_leases_init(struct limiter_leases *ls, unsigned ms);

/* Gives back every lease held (best effort: the ADJUSTs are sent; only a
 * shutdown waits for their answers, limiter_leases_stop_waits) and
 * forgets them: RELOAD, shutdown. */
void limiter_leases_give_back_all(struct limiter_leases *ls);

/* How long a shutdown waits, at most, for the answers of the give-backs
 * it sent (limiter_leases_stop_waits). */
#define LIMITER_LEASE_STOP_MS 1000

/* Shutdown sent the give-backs at `now_ms`: true when some are still
 * unanswered (the proxy waits before it closes its connections). */
bool limiter_leases_stop_from(struct limiter_leases *ls, uint64_t now_ms);

/* Whether give-backs are unanswered and LIMITER_LEASE_STOP_MS has not
 * passed since limiter_leases_stop_from. */
bool limiter_leases_stop_waits(const struct limiter_leases *ls,
                               uint64_t now_ms);

/* Forgets every lease (nothing sent) and frees the map. */
void limiter_leases_free(struct limiter_leases *ls);

/* Gives back what expired by `now_ms` (the limiter's cron). */
void limiter_leases_cron(struct limiter_leases *ls, uint64_t now_ms);

/* The limiter_tree.c hook before a CHECK of `req` on levels `lv` is built:
 * 1 after replying from a lease or queueing `req` behind the take in
 * flight (it runs again through `resume` once the take settled: the
 * caller frees lv and is done), else 0 with *cost set to what the call
 * charges (N when it takes a lease). */
int limiter_lease_before(struct limiter_leases *ls, struct req *req,
                         const struct limits_levels *lv, int64_t *cost,
                         int64_t wait_ns, unsigned form,
                         void (*resume)(struct req *req));

/* The hook just before `c` goes to the store: when it is the take
 * limiter_lease_before decided, the lease is in flight from now on (a
 * check that failed before it was sent never leaves one behind). */
void limiter_lease_sending(struct limiter_leases *ls, struct store_check *c);

/* The hook when the store failed `c` for good (an error replied): when
 * c was a take, the path stays without a lease (plain checks) for
 * LIMITER_LEASE_FLIGHT_MS and the checks queued behind it go on as
 * plain ones. */
void limiter_lease_failed(struct limiter_leases *ls, struct store_check *c);

/* Runs again, in order, the checks whose take settled (the loop's flush
 * pass: never from inside a decision, so nothing here is re-entered). */
void limiter_leases_drain(struct limiter_leases *ls);

/* The hook when the store decided `c` into `agg`: when c took a lease,
 * records it and raises agg's remaining by the units it keeps (0); 1 when
 * the take was refused, and the caller sends the plain check instead. */
int limiter_lease_after(struct limiter_leases *ls, struct store_check *c,
                        struct rl_decision *agg);

/* Ends the lease of `path` if one is held: given back (`give_back`: a
 * LIMITER OVERRIDE of the path) or just forgotten (LIMITER RESET, which
 * deletes what it charged). */
void limiter_lease_drop(struct limiter_leases *ls, const char *path,
                        size_t plen, bool give_back);

/* limiter_lease_drop of the path in argument `arg` of `req`'s command,
 * when it has one. */
void limiter_lease_drop_arg(struct limiter_leases *ls, struct req *req, int arg,
                            bool give_back);

#endif /* PX_PROXY_LIMITER_LIMITER_LEASE_H */
