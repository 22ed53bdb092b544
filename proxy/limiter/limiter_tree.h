/* The limits tree's subcommands of LIMITER: CHECK <path> [COST n]
 * [WAIT ms], PEEK <path> [COST n] and RESET <path>, decided over every
 * limit of every level of the path by the limiter's store. The other
 * subcommands (OVERRIDE, RULES, RELOAD), CL.THROTTLE and the dispatch
 * stay in limiter.c. */
#ifndef PX_PROXY_LIMITER_LIMITER_TREE_H
#define PX_PROXY_LIMITER_LIMITER_TREE_H

#include <stddef.h>
#include <stdint.h>

#include "proxy/limiter/store.h"

struct conf;
struct core;
struct limiter_leases;
struct limiter_waits;
struct limits_levels;
struct limits_tree;
struct metrics_rule;
struct req;

/* The context of the tree's subcommands, embedded in struct limiter and
 * given what it borrows from it when created. */
struct limiter_tree {
    struct core *core;                  /* borrowed: counters, WAIT timers */
    const struct conf *conf;            /* borrowed */
    struct store *store;                /* borrowed: the limiter's store */
    struct limiter_waits *waits;        /* borrowed: WAIT slots and caps */
    struct limits_tree *const *limits;  /* borrowed: where the limiter keeps
                                           its tree (a reload replaces it) */
    struct metrics_rule **const *rules; /* borrowed: same, each rule's
                                           counters */
    struct limits_levels *resolving;    /* owned: LIMITS_LEVELS_BYTES, where
                                           each path is resolved before a
                                           request keeps its copy */
    uint64_t shadow_limited;            /* CHECKs a shadow level would have
                                           refused */
    uint64_t adjusts;                   /* ADJUSTs handed to the store */
    struct limiter_leases *leases;      /* borrowed: leases of hot
                                           identities, or NULL (none) */
};

void limiter_tree_init(struct limiter_tree *tr, struct core *core,
                       const struct conf *conf, struct store *st,
                       struct limiter_waits *waits,
                       struct limits_tree *const *limits,
                       struct metrics_rule **const *rules);

/* Frees what `tr` owns. */
void limiter_tree_free(struct limiter_tree *tr);

/* LIMITER CHECK|PEEK|RESET|ADJUST (`op`) on `req`, whose arguments are the
 * whole command (LIMITER <sub> <path> ...); replies through `req`. When
 * the store cannot take calls yet, `req` is held and goes on at
 * `resume` (limiter_command). */
void limiter_tree(struct limiter_tree *tr, struct req *req, enum store_op op,
                  void (*resume)(struct req *req));

/* Resolves `path` into a new limits_levels of the size it needs (the
 * caller frees it with px_free). NULL after replying an error to `req`. */
struct limits_levels *limiter_tree_resolve(struct limiter_tree *tr,
                                           struct req *req, const char *path,
                                           size_t plen);

#endif /* PX_PROXY_LIMITER_LIMITER_TREE_H */
