/* limiter.lua calls built by hand, for the tests that drive the library
 * with batches no proxy would send (test_lua_each.c: mode "each" against
 * "shapes", malformed calls; test_lua_keys.c: override pairs by hand
 * against the `keys` form). A batch is an array of groups (struct
 * lcall_grp, written as designated initializers); the builders lay it out
 * in any of the three forms (single, "each", "shapes"), as a script
 * (EVALSHA) or a function (FCALL), the keys declared or after the
 * arguments, the override pairs by hand or as the word `keys`. Every call
 * runs at the explicit clock LCALL_NOW. The argument strings are borrowed
 * from the groups, except the counts a vector prints, which it holds. */
#ifndef PX_TESTS_LCALL_H
#define PX_TESTS_LCALL_H

#include <stddef.h>

#include <hiredis/hiredis.h>

/* 2023-11-14T22:13:20Z, in us: the clock of every call, and its seconds
 * and microseconds as TIME would give them. */
#define LCALL_NOW    "1700000000000000"
#define LCALL_NOW_S  1700000000
#define LCALL_NOW_US 0

#define LCALL_ARGV_MAX   1024 /* arguments of one call */
#define LCALL_GROUPS_MAX 24   /* groups of one batch */
#define LCALL_LIMITS_MAX 3    /* limits of one group */
#define LCALL_PATHS_MAX  3    /* override pairs of one group */

/* One limit of a group: its key, algorithm, parameters and undo token. */
struct lcall_lim {
    const char *key;
    const char *algo;
    const char *p[4];
    const char *undo;
};

/* One group, as one limiter.lua call takes it. With kf, the group goes in
 * `keys` form in the calls built with `keys` set (its m pairs, written by
 * hand, are then what the script must derive: each known ""); mword, when
 * set, stands where m does in every call, followed by the m pairs all the
 * same (the malformed calls). */
struct lcall_grp {
    const char *mode;
    const char *cost;
    int n;
    struct lcall_lim l[LCALL_LIMITS_MAX];
    const char *ovr; /* its override hash */
    int m;
    const char *path[LCALL_PATHS_MAX];  /* override fields to verify */
    const char *known[LCALL_PATHS_MAX]; /* what the caller assumes they hold */
    int kf;
    const char *mword;
};

/* An argument vector under construction. */
struct lcall_args {
    const char *v[LCALL_ARGV_MAX];
    size_t len[LCALL_ARGV_MAX];
    int n;
    char num[LCALL_GROUPS_MAX * 2 + 16][24]; /* the counts it printed */
    int nnum;
};

/* Which form a call takes: the run's (PX_LUA_FORM), or one of the two. */
enum lcall_form { LCALL_RUN, LCALL_SCRIPT, LCALL_FUNCTION };

/* Appends s (NULL: ""), or v printed. */
void lcall_arg(struct lcall_args *a, const char *s);
void lcall_int(struct lcall_args *a, long long v);

/* Empties a and starts it with EVALSHA <sha> or FCALL <function> of
 * script `name` ("limiter", "gcra") in `form`. */
void lcall_start(struct lcall_args *a, const char *name, enum lcall_form form);

/* The call of group g alone. */
void lcall_single(struct lcall_args *a, const struct lcall_grp *g,
                  enum lcall_form form, int keys);

/* The "each" call of groups g[0..ng-1], the keys declared or after the
 * arguments. */
void lcall_each(struct lcall_args *a, const struct lcall_grp *g, int ng,
                enum lcall_form form, int keys, int declared);

/* The "shapes" call of groups g[0..ng-1] (ng <= LCALL_GROUPS_MAX), in the
 * run's form: each distinct block of levels and m word once (blocks[ng]
 * holds them, alive until the call is made), then each group's shape
 * (when there are several) and pairs, the keys declared or after those.
 * Returns the number of shapes. */
int lcall_shapes(struct lcall_args *a, struct lcall_args *blocks,
                 const struct lcall_grp *g, int ng, int keys, int declared);

/* Makes a run on the node's clock: its LCALL_NOW becomes "" (the direct
 * paths decide only so: what they write expires in the node's time). */
void lcall_node_clock(struct lcall_args *a);

/* Sends a and returns its reply (asserting there is one). */
redisReply *lcall_run(redisContext *c, struct lcall_args *a);

#endif
