/* The per-rule counting of the limits tree's CHECKs (LIMITER CHECK): each
 * level of a path is a rule, counted once per check by what it said
 * (allowed, limited, near_limit, shadow_limited, fail_open, errors).
 * CL.THROTTLE's one rule is counted by limiter.c itself. */
#ifndef PX_PROXY_LIMITER_LIMITER_COUNT_H
#define PX_PROXY_LIMITER_LIMITER_COUNT_H

#include "conf/limits.h"

struct metrics;
struct metrics_rule;
struct store_check;

/* The most levels a check counts: one per depth of the tree. */
#define LIMITER_MAX_LEVELS LIMITS_MAX_DEPTH

/* What a decided CHECK's levels said, read before the decisions are
 * rewritten into the reply. */
struct limiter_count_tally {
    struct metrics_rule *rule[LIMITER_MAX_LEVELS]; /* each level's */
    unsigned char seen[LIMITER_MAX_LEVELS];        /* the level has limits */
    unsigned char limited[LIMITER_MAX_LEVELS];     /* one of them refused */
    unsigned char shadow[LIMITER_MAX_LEVELS];      /* a shadow level */
    unsigned char near[LIMITER_MAX_LEVELS];        /* ... or is near its
                                                      limit */
    unsigned char fail_open[LIMITER_MAX_LEVELS];   /* its node was down:
                                                      admitted undecided */
};

/* Counts a CHECK that ended in an error: once per level with limits. */
void limiter_count_error(const struct store_check *c);

/* Reads `c`'s decisions into `t` (`m`: the counters, for their near
 * ratio), before they are rewritten into the reply. */
void limiter_count_tally(const struct metrics *m, const struct store_check *c,
                         struct limiter_count_tally *t);

/* Counts a decided CHECK: each level is a rule and counts once. A shadow
 * level that would have refused counts shadow_limited, whatever the check
 * answered (it took nothing). Otherwise, in a check that was admitted
 * (`admitted`: its reply says not limited, a WAIT reservation included),
 * every level counts allowed, and near_limit too when one of its limits
 * was refused (reserved) or has at least the near ratio used; but a level
 * whose node was down and failed open counts fail_open instead. In a
 * refused check, a level that refused counts limited, and a level that
 * would have admitted counts nothing: nothing was taken from it, and it
 * did not refuse. */
void limiter_count_check(const struct limiter_count_tally *t, int admitted);

#endif /* PX_PROXY_LIMITER_LIMITER_COUNT_H */
