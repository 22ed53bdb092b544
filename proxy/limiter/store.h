/* The limiter's store: where the state of every limit lives, behind ONE
 * interface with two implementations side by side.
 *
 *   limiter.c (the commands) --> st->ops->op(st, ...) --+--> store_local.c
 *        ^                                              |    (in the process,
 *        |                                              |     completes at
 *        |                                              |     once)
 *        +---- completion callback (store_done_fn, -----+--> store_redis.c
 *              store_check_done_fn)                          (scripts on the
 *                                                             nodes, later)
 *
 * A store is one struct store: what every implementation needs (the
 * cluster, the configuration, the fail_open count) and, behind `impl`,
 * the implementation's own state, made by its init op and freed by its
 * free op. This header knows no implementation: limiter_init picks one
 * (store_local_ops or store_redis_ops) once, from whether a Redis is
 * configured, and nothing else asks which store runs. A store never
 * writes a reply: it hands what it found (struct store_reply, or the
 * decisions inside a struct store_check) to the completion callback the
 * commands gave it, and calls it only while the client still waits (a
 * store that makes a request wait counts it in req->owed and frees the
 * orphans through req_owed_back). See docs/ARCHITECTURE.md for the layers. */
#ifndef PX_PROXY_LIMITER_STORE_H
#define PX_PROXY_LIMITER_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "algorithms/gcra.h"
#include "algorithms/rl.h"
#include "conf/limits.h"
#include "parser/buf.h"
#include "proxy/core/hmap.h"

struct cluster;
struct conf;
struct core;
struct metrics_rule;
struct req;
struct store_ops;

/* Room for a refund token of limiter.lua (a window start, log entries). */
#define STORE_UNDO_MAX 64

/* Room for the key of one limit: prefix, path, tag braces, "#i:algorithm". */
#define STORE_KEY_MAX (LIMITS_MAX_PREFIX_BYTES + 2 * LIMITS_MAX_PATH_BYTES + 64)

/* What a throttle or override call came to. */
struct store_reply {
    enum store_reply_kind {
        STORE_REPLY_INTS,  /* v: redis-cell's five integers */
        STORE_REPLY_ERROR, /* text: the proxy's error (req_reply_error) */
        STORE_REPLY_FRAME, /* text, len: a node's reply, relayed as it is */
        STORE_REPLY_INT,   /* n: an integer */
        STORE_REPLY_BULK,  /* text, len: a bulk string; NULL text: nil */
        STORE_REPLY_OK,    /* +OK */
    } kind;
    int64_t v[5];           /* STORE_REPLY_INTS */
    long long n;            /* STORE_REPLY_INT */
    const char *text;       /* borrowed for the call */
    size_t len;             /* bytes of text */
    unsigned fail_open : 1; /* STORE_REPLY_INTS: admitted undecided, the
                               store down (store_down_policy: fail_open) */
};

/* A store: the context of every op. Embedded in struct limiter. */
struct store {
    const struct store_ops *ops;  /* the implementation, fixed at init */
    struct core *core;            /* borrowed: its connections' setup hook */
    struct cluster *cl;           /* borrowed: where the Redis store lives */
    const struct conf *conf;      /* borrowed */
    uint64_t fail_open;           /* calls admitted with the store down */
    unsigned queued;              /* calls queued since the last flush */
    unsigned held;                /* calls the last flush left queued (a
                                     part-filled batch waiting its turn) */
    unsigned early;               /* queued calls that make a flush due
                                     before the loop turn ends; 0: never */
    void *impl;                   /* owned by ops: the implementation's state
                                     (init op makes it, free op frees it) */
    size_t pending_bytes;         /* charged by the tree calls running now
                                     (store_check_charge), all clients */
    uint64_t pending_refused;     /* calls refused: past the bound */
    struct hmap pending_by_payer; /* client (its address, never looked
                                   into) -> its calls running now, as a
                                   uintptr_t */
};

/* Completion of a throttle or override call of `req` (whose client still
 * waits): writes the reply. */
typedef void store_done_fn(struct store *st, struct req *req,
                           const struct store_reply *r);

/* What a LIMITER call does with its limits. */
enum store_op {
    STORE_CHECK,   /* decide and consume (all or nothing) */
    STORE_PEEK,    /* decide as CHECK (its cost), write nothing */
    STORE_RESET,   /* forget the keys */
    STORE_ADJUST,  /* LIMITER ADJUST: charge or give back `delta`, never
                      refused; decided and replied as a PEEK of cost 1
                      after it (limiter_adjust.h) */
    STORE_RELEASE, /* LIMITER RELEASE: free the slot of c->id in every
                      concurrency limit (the only limits of the call) */
};

/* One limit of a tree call. */
struct store_limit {
    enum limits_algo algo;     /* which model */
    struct limits_limit lim;   /* parameters, overrides applied */
    struct gcra_params p;      /* gcra: the parameters with the cost */
    char *key;                 /* owned: the limit's key */
    size_t klen;               /* bytes of key */
    unsigned group;            /* tag group: one script call */
    bool own_key;              /* gcra below a second "*": its state is a
                                  key of its own, not a record of the
                                  identity's state string (the level's
                                  own_keys) */
    unsigned level;            /* index of its level in the check's levels */
    struct metrics_rule *rule; /* borrowed: its level's counters, or NULL */
    bool shadow;               /* its level is shadow: it never refuses the
                                  check, and takes its cost only when its
                                  level and every real limit admit */
    bool shadow_limited;       /* the decision: its level is shadow and
                                  refused (some limit of it would have):
                                  none of that level's limits took a cost.
                                  Set by the store with c->res */
    bool fail_open;            /* its node could not answer and the
                                  store_down_policy is fail_open: c->res
                                  admits it undecided, nothing taken. Set
                                  by the store with c->res */
    char undo[STORE_UNDO_MAX]; /* what a refund takes back, NUL-ended;
                                  a RELEASE's concurrency limit: "1" when
                                  the token held a slot there */
};

struct store_check;

/* Completion of a tree call (its client still waits): takes `c`. */
typedef void store_check_done_fn(struct store_check *c);

/* One LIMITER CHECK/PEEK/RESET: built by the commands (the limits of the
 * path's levels), run by the store (for the Redis store, through the nodes
 * of its groups: one group per hash tag, one slot, one script call), and
 * ended by the commands' completion. Owned by whoever runs it; freed by
 * store_check_free. */
struct store_check {
    struct store *st;                /* borrowed: the store it runs in */
    void *owner;                     /* borrowed: the commands' context
                                        (struct limiter_tree) */
    struct req *root;                /* borrowed: the client's request */
    enum store_op op;                /* what the call does */
    unsigned tries;                  /* whole calls so far, 1.. */
    void (*resume)(struct req *req); /* where root goes on if a store
                                        must hold it (ops->ready) */
    unsigned n;                      /* limits */
    unsigned ngroups;                /* script calls */
    unsigned pending;                /* calls still owed */
    struct limits_levels *lv;        /* owned: the path's levels */
    struct store_limit *lim;         /* n limits, in c's allocation */
    struct rl_decision *res;         /* n decisions, in c's allocation */
    struct rl_decision *peek;        /* n states without this request (same) */
    unsigned char *admitted;         /* ngroups "check went through" (same) */
    unsigned char stale;       /* a group saw overrides we did not assume */
    long long deleted;         /* RESET: keys removed */
    int64_t cost;              /* COST n (default 1; PEEK's too; 1 for
                                  ADJUST, whose reply is such a peek) */
    int64_t delta;             /* ADJUST: units charged (> 0) or given
                                  back (< 0) at every level */
    char *id;                  /* owned: ID <token> of CHECK|PEEK, the
                                  token of RELEASE; NULL: none */
    size_t id_len;             /* bytes of id */
    int64_t wait_ns;           /* CHECK ... WAIT: the longest delay accepted */
    unsigned reply_form;       /* CHECK|PEEK ... MS / HEADERS: the reply's
                                  form (LIMITER_REPLY_*), the commands' */
    struct buf err;            /* owned: the first error reply, a frame */
    const char *err_text;      /* the store's error text (req_reply_error),
                                  when err is empty */
    store_check_done_fn *done; /* the completion */
    void *hold;                /* owned: what the commands keep while the
                                  call runs (a WAIT slot), or NULL; the
                                  completion may take it */
    void (*hold_free)(void *hold); /* ends hold when `c` is freed */
    size_t alloc;                  /* bytes of c's own allocation */
    size_t charged;                /* bytes in st->pending_bytes for c
                                      (0: not charged) */
    uintptr_t payer;               /* the client charged (its address) */
};

/* What a LIMITER OVERRIDE call does. */
enum store_override_op {
    STORE_OVERRIDE_SET = 1,
    STORE_OVERRIDE_DEL,
    STORE_OVERRIDE_GET,
};

/* Counters of a store, for INFO. */
struct store_stats {
    uint64_t refusal_hits;             /* calls refused from the cache */
    uint64_t refusal_keys;             /* keys cached now */
    uint64_t refusal_invalidations;    /* entries Redis said were written */
    uint64_t embedded_keys;            /* embedded store: keys held now */
    uint64_t embedded_evicted_expired; /* evicted at the cap: expired */
    uint64_t embedded_bytes;           /* embedded store: bytes held now
                                          (store_map_entry_bytes) */
    uint64_t embedded_full_refused;    /* calls refused (or failed open):
                                          no room, every entry live */
    uint64_t override_bytes;           /* embedded run-time overrides */
    uint64_t override_refused;         /* OVERRIDE SETs beyond the bound */
    uint64_t refusal_bytes;            /* refusal cache: bytes held now */
    uint64_t refusal_skipped;          /* refusals not cached: one entry
                                          alone is past the bound */
    uint64_t pending_bytes;            /* limiter calls pending, all
                                          clients (store_check bytes) */
    uint64_t pending_refused;          /* calls refused: past the bound */
};

/* THE store interface. Every call that completes `req` does it through
 * `done`, at once (in-process) or later (Redis). */
struct store_ops {
    /* Makes st->impl (the cluster and the configuration are set). */
    void (*init)(struct store *st);

    /* Frees st->impl. */
    void (*free)(struct store *st);

    /* 1 when the store takes calls now; else holds `req` until it can,
     * then calls `resume` (the limiter's entry for its command), and
     * returns 0. */
    int (*ready)(struct store *st, struct req *req,
                 void (*resume)(struct req *req));

    /* One CL.THROTTLE of `req`: GCRA with `p` on `key` in database `db`
     * (the client's SELECT; only a Redis store in single mode sees one
     * other than 0). */
    void (*throttle)(struct store *st, struct req *req,
                     const struct gcra_params *p, const char *key, size_t klen,
                     unsigned db, store_done_fn *done);

    /* Runs `c` (takes it): every limit decided into c->res and c->peek
     * (CHECK, PEEK), or their keys removed into c->deleted (RESET); an
     * error in c->err or c->err_text; c->stale when run-time overrides
     * changed under the call. Then done(c). */
    void (*check)(struct store *st, struct store_check *c,
                  store_check_done_fn *done);

    /* Gives back what a CHECK took where it was not taken everywhere (a
     * group admitted while another refused or failed); for an ADJUST that
     * failed in a group, the opposite delta to the groups that applied it
     * (c->admitted). NULL: a refused check writes nothing, so there is
     * none (and an ADJUST is one call, all or nothing). */
    void (*refund)(struct store *st, struct store_check *c);

    /* The run-time override text of `path` this proxy knows of, NUL-ended,
     * or NULL. */
    const char *(*override_known)(struct store *st, const char *path,
                                  size_t len);

    /* LIMITER OVERRIDE SET|DEL|GET of `lev` (the level at `path`); SET
     * with `text`. */
    void (*override)(struct store *st, struct req *req,
                     enum store_override_op op, const struct limits_level *lev,
                     const char *path, size_t plen, const char *text,
                     size_t tlen, store_done_fn *done);

    /* Sends what was queued: every call when `all`, else the full
     * batches and those part-filled ones whose connection may take one
     * now (upstream_limiter_turn); the rest stays queued for a later
     * flush. NULL: nothing is queued. */
    void (*flush)(struct store *st, bool all);

    /* True when some state is cached that a client's write makes stale
     * (the refusal cache). NULL: nothing is. */
    bool (*caches)(struct store *st);

    /* Forgets what is cached of `key` (NULL: of every key): a client's
     * command that may write it is on its way to Redis, and its next
     * limiter call must see that write, which Redis's invalidation would
     * tell only later. NULL: nothing is cached. */
    void (*forget)(struct store *st, const char *key, size_t klen);

    /* Node `name` ("host:port") no longer holds the keys (Sentinel named
     * a new master): forget what is cached of it. NULL: nothing is. */
    void (*node_gone)(struct store *st, const char *name);

    /* Periodic work. NULL: none. */
    void (*cron)(struct store *st);

    /* Shutdown: fails the calls not yet sent. NULL: none are kept. */
    void (*stop)(struct store *st);

    /* Fills `out` (zeroed by the caller). NULL: nothing to count. */
    void (*stats)(struct store *st, struct store_stats *out);
};

/* Sets up `st` as the store `ops` (store_local_ops or store_redis_ops),
 * storing in `cl`'s nodes when it is the Redis store (which sets `core`'s
 * connection setup hook: call it before any connection is made). */
void store_init(struct store *st, const struct store_ops *ops,
                struct core *core, struct cluster *cl, const struct conf *conf);

/* Frees what the implementation holds (a zeroed `st`: nothing). */
void store_free(struct store *st);

/* A zeroed call with room for `cap` limits (lim, res, peek) and `ngroups`
 * groups (admitted), all in one allocation. */
struct store_check *store_check_new(unsigned cap, unsigned ngroups);

/* Frees `c`, its limits and its decisions. */
void store_check_free(struct store_check *c);

/* What a tree call is charged while it runs: its allocation, its levels,
 * its keys twice (held, and written in the script call) and each limit's
 * share of the call's words and reply (STORE_CALL_BYTES_PER_LIMIT). */
size_t store_check_bytes(const struct store_check *c);

/* Bytes a limit adds to a script call besides its key: its parameters in
 * the arguments and its decision in the reply. */
#define STORE_CALL_BYTES_PER_LIMIT 256

/* Whether a call of `bytes` may start with `pending` bytes running in all
 * (bound `max`; 0: none) when its client has `mine` calls running: while
 * the total stays within max, or, for a client with none running, within
 * max and a quarter more (the reserve that keeps a client making one call
 * at a time served while others fill the bound). Pure. */
int store_pending_admits(size_t pending, size_t bytes, size_t max,
                         uintptr_t mine);

/* Charges `c` (built, its keys set) to st->pending_bytes for `client`
 * (compared by address only) while it runs: 0, or -1 (counted in
 * st->pending_refused, nothing charged) when store_pending_admits says no under
 * limiter_pending_max_bytes. store_check_free gives it back. */
int store_check_charge(struct store *st, struct store_check *c,
                       const void *client);

/* Sets lim[i].shadow_limited of every limit of `c` from c->res: a shadow
 * level refused when any of its limits did. Levels never span groups, so
 * a group's limits are right once that group's decisions are in. */
void store_shadow_mark(struct store_check *c);

/* The most a limit admits at once (CL.THROTTLE's second integer): what a
 * reply that admits undecided reports as the limit. */
int64_t store_limit_max(const struct limits_limit *l);

/* Limit i of `c` admits undecided, nothing taken (its store could not
 * decide and store_down_policy is fail_open): [0, max, 0, -1, 0] in res
 * and peek, and its fail_open flag. */
void store_fail_open_limit(struct store_check *c, unsigned i);

/* The parameters that decide writes: with WAIT, a request due within the
 * wait is reserved, so the tolerance grows by it (not for a request that
 * can never pass: INC > DVT stays refused). */
void store_write_params(const struct gcra_params *p, int64_t wait_ns,
                        struct gcra_params *out);

#endif /* PX_PROXY_LIMITER_STORE_H */
