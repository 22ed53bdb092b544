/* The Redis store's script calls on their way: the calls of a loop turn
 * queued, gathered per kind, node and lane into one script call each
 * (lua_wire), sent by FCALL or as a script, and each call's or group's
 * answer handed back to the store (store_redis.c) through
 * struct store_redis_answers. */
#ifndef PX_PROXY_LIMITER_STORE_REDIS_BATCH_H
#define PX_PROXY_LIMITER_STORE_REDIS_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proxy/core/queue.h"
#include "proxy/core/req.h"
#include "proxy/limiter/lua_wire.h"
#include "proxy/limiter/store.h"

/* Most calls sent in one script call: enough to take the per-call cost of
 * EVALSHA off Redis under load, small enough that one call never holds a
 * node for long. */
#define STORE_REDIS_BATCH_MAX LUA_WIRE_BATCH_MAX

/* What a queued call runs: each kind is one script's batched mode. */
enum store_redis_kind {
    STORE_REDIS_THROTTLE, /* a CL.THROTTLE: one key of gcra.lua */
    STORE_REDIS_GROUP,    /* one tag group of a LIMITER call: limiter.lua */
};

/* What every queued call starts with (the first member of struct
 * store_redis_call and struct store_redis_group). */
struct store_redis_item {
    struct queue link;   /* in `pending` until the flush pass */
    unsigned char kind;  /* enum store_redis_kind */
    unsigned char alone; /* to be sent by itself with its keys declared: a
                            batch across slots found its slot elsewhere */
    unsigned slot;       /* its keys' slot (cluster mode; else 0) */
    unsigned db;         /* a CL.THROTTLE's client's db (store_redis_db.c) */
    uint64_t lane;       /* the lane of the client it serves */
};

/* One CL.THROTTLE waiting for its script call. Queued in `pending` until
 * the flush pass, then owned by the batch that carries it. */
struct store_redis_call {
    struct store_redis_item it; /* first: the queue's view */
    struct req *root;           /* borrowed: the client's request */
    struct gcra_params p;       /* parsed arguments */
    size_t klen;                /* bytes in key */
    store_done_fn *done;        /* the completion */
    char key[];                 /* a copy of the key, NUL-ended, in the
                                   call's own allocation (one per call) */
};

/* One tag group of a LIMITER CHECK, PEEK or refund waiting for its script
 * call, its words made when it was queued. Queued in `pending`, then
 * owned by the batch that carries it. */
struct store_redis_group {
    struct store_redis_item it; /* first: the queue's view */
    struct lua_wire_group w;    /* owned: its words, its call and group */
    unsigned char cacheable;    /* a check or peek of limits the refusal
                                   cache knows only, with no run-time override
                                   assumed: its refusal can teach the
                                   refusal cache */
};

/* Where the answers go: the store's completions. Each takes its call or
 * group (frees it). */
struct store_redis_answers {
    /* Call i of n of a "runs" reply `v` (shaped: lua_wire_runs_shaped),
     * sent at local time `sent_ns`. */
    void (*call_done)(struct store *st, struct store_redis_call *call,
                      const struct resp_value *v, unsigned i, unsigned n,
                      uint64_t sent_ns);
    /* The call failed with the error `frame`. */
    void (*call_error)(struct store *st, struct store_redis_call *call,
                       const char *frame, size_t len);
    /* The group's answer `e` (lua_wire_next's, or an error; sent at
     * `sent_ns`, 0 for an error made here). */
    void (*group_done)(struct store_redis_group *q, const struct resp_value *e,
                       uint64_t sent_ns);
};

/* The queue and the way calls are sent; part of the store's state. */
struct store_redis_batcher {
    struct store *st;                         /* borrowed: its store */
    const struct store_redis_answers *answer; /* borrowed, static */
    struct queue pending;      /* script calls of this loop turn (struct
                                  store_redis_item), in arrival order */
    unsigned no_functions : 1; /* a node has no FUNCTION (Redis 6) or may
                                  not use it: scripts from now on */
};

/* Sets up `bt` for `st`, and the core's connection setup hook that loads
 * the library on every connection that may carry limiter calls. */
void store_redis_batch_init(struct store_redis_batcher *bt, struct store *st,
                            const struct store_redis_answers *answer);

/* Unhooks `bt` (stopped: nothing is pending). */
void store_redis_batch_free(struct store_redis_batcher *bt);

/* Queues `it` for the flush pass, with the other calls of this loop
 * turn. */
void store_redis_batch_queue(struct store_redis_batcher *bt,
                             struct store_redis_item *it);

/* The flush op (store.h): sends what was queued. */
void store_redis_batch_flush(struct store_redis_batcher *bt, bool all);

/* Shutdown: the calls not yet sent fail. */
void store_redis_batch_stop(struct store_redis_batcher *bt);

/* True for errors that mean "the store did not answer", as opposed to an
 * answer that is an error (WRONGTYPE, a range error). */
int store_redis_down(const char *frame, size_t len);

/* Sends `cmd` (taken; NULL: out of memory) as a proxy-made part to the
 * node that owns `key`: its reply goes to `fn` with `ctx` and part number
 * `partno`, on lane `lane`; it fails at once when no node serves the slot. */
void store_redis_part_send(struct store *st, struct resp_cmd *cmd,
                           req_reply_fn *fn, void *ctx, unsigned partno,
                           uint64_t lane, const char *key, size_t klen);

#endif /* PX_PROXY_LIMITER_STORE_REDIS_BATCH_H */
