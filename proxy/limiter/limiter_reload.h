/* Loading the limits file: once at start (on the loop, before anything
 * listens), and again for LIMITER RELOAD and SIGHUP, off the loop.
 *
 * A reload reads and parses the file in libuv's thread pool (the loader,
 * conf/limits.c, is a leaf library with no globals: one loader per call),
 * so a large tree or a file that blocks (a FIFO, a stalled disk) delays
 * no client. The loop then binds the new tree's rules to their counters
 * in slices of LIMITER_RELOAD_BIND_SLICE rules per loop turn, swaps the
 * tree in at once (the old rules answer until then), and frees the old
 * tree in the pool.
 *
 * One reload runs at a time. A RELOAD or SIGHUP that comes while one runs
 * does not join it (that run may have read the file before it was last
 * written): it waits for the next run, which starts when the current one
 * ends and serves every RELOAD and SIGHUP that came meanwhile. A RELOAD
 * is answered when its run ends: +OK, or the loader's errors with the old
 * rules kept, as before. A client that leaves meanwhile leaves an orphan,
 * freed when the run ends. At shutdown a run not yet started is
 * cancelled; one reading is waited for, and a FIFO it waits on is opened
 * and closed for writing every LIMITER_RELOAD_NUDGE_MS until it returns,
 * so the exit does not hang on a writer that never comes. */
#ifndef PX_PROXY_LIMITER_LIMITER_RELOAD_H
#define PX_PROXY_LIMITER_LIMITER_RELOAD_H

#include <stddef.h>
#include <uv.h>

#include "proxy/core/queue.h"

struct conf;
struct core;
struct limiter_reload_job;
struct limits_tree;
struct metrics_rule;
struct req;

/* Rules bound to their counters per loop turn. Binding a 71k-rule tree
 * whose counters are new took about 450 ms on the loop in the sanitizer
 * build (35 ms when they exist already); 1024 rules is a slice of a few
 * milliseconds there and well under one in a release build. */
#define LIMITER_RELOAD_BIND_SLICE 1024

/* Shutdown: how often a FIFO the reader waits on is opened for writing. */
#define LIMITER_RELOAD_NUDGE_MS 50

/* The reloads' context, in struct limiter: what they replace is the
 * limiter's, borrowed. */
struct limiter_reloads {
    struct core *core;                  /* borrowed: the loop, the counters */
    const struct conf *conf;            /* borrowed: limits_file */
    struct limits_tree **limits;        /* borrowed: the tree in force */
    struct metrics_rule ***rules;       /* borrowed: its rules' counters (by
                                           limits_rule_pattern's index) */
    struct limiter_reload_job *running; /* owned: the run in the pool or
                                           binding, NULL when none */
    struct queue next;        /* RELOAD requests (linked by req->unode) that
                                 wait for the run after `running` */
    uv_idle_t bind;           /* the bind's slices, one per loop turn */
    uv_timer_t nudge;         /* shutdown: unblocks a FIFO's open */
    unsigned handles : 1;     /* bind and nudge initialised, not closed */
    unsigned next_due : 1;    /* a run is due after `running` */
    unsigned next_sighup : 1; /* ... and SIGHUP asked for it */
    unsigned stopping : 1;    /* limiter_reload_stop ran */
};

/* Sets up `rs` to replace *limits and *rules (no handles without a
 * core: unit tests). */
void limiter_reloads_init(struct limiter_reloads *rs, struct core *core,
                          const struct conf *conf, struct limits_tree **limits,
                          struct metrics_rule ***rules);

/* Loads the limits tree from `path` (NULL: none) now, on the caller's
 * thread, keeping the old tree when the file is bad. PX_OK, or PX_ERR
 * with every error in `err` as "file:line:column: message". */
int limiter_reload_load(struct limiter_reloads *rs, const char *path, char *err,
                        size_t errlen);

/* Reloads the configured limits file off the loop (see above): for the
 * LIMITER RELOAD `req`, answered when it is done, or for SIGHUP when
 * `req` is NULL (logged only). Counted as a reload that worked or was
 * refused. The caller checked that a limits file is configured. */
void limiter_reload_start(struct limiter_reloads *rs, struct req *req);

/* Shutdown: ends what can end now (a run not started, a bind), answers
 * the waiting requests with an error, and closes the handles once the
 * run in the pool has returned. */
void limiter_reload_stop(struct limiter_reloads *rs);

#endif /* PX_PROXY_LIMITER_LIMITER_RELOAD_H */
