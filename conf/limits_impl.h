/* limits_impl.h: what the files of the limits module share. Private:
 * only conf/limits*.c include it; callers see conf/limits.h alone.
 *
 * One module, one job per file (in the order a limits file travels):
 *
 *   limits.c           loading: text --prescan--> document --walk--> tree;
 *                      freeing; a tree's counts, rules and hash
 *   limits_walk.c      the document's top level, nodes and children:
 *                      segments, shadow:, limits: of each node
 *   limits_parse.c     YAML helpers (keys, duplicates) and one limits:
 *                      value read into struct limits_limit
 *   limits_override.c  overrides: of the file, checked against the built
 *                      tree; run-time overrides (LIMITER OVERRIDE words)
 *   limits_algo.c      one row per algorithm (name, parameters, checks),
 *                      which parsing, rendering, scaling and checking all
 *                      read; the syntax of numbers
 *   limits_resolve.c   the hot path: a LIMITER path through the tree into
 *                      levels, key bases and limit keys; segment matching
 *   limits_describe.c  the text of LIMITER RULES
 *
 * Leaf layer: libc and libyaml only, no logging, no globals (the tables
 * are constant). */
#ifndef PX_CONF_LIMITS_IMPL_H
#define PX_CONF_LIMITS_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <yaml.h>

#include "conf/conf_yaml.h"
#include "conf/limits.h"
#include "conf/sha256.h"

#define LIMITS_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* conf_yaml's codes are returned as ours. */
_Static_assert(CONF_YAML_OK == LIMITS_OK && CONF_YAML_ERR == LIMITS_ERR &&
                   CONF_YAML_ENOMEM == LIMITS_ENOMEM,
               "conf_yaml codes differ from limits codes");

/* ---------------- The tree ---------------- */

/* One node of the tree: a segment, its limits and its children. */
struct limits_node {
    char *seg;                   /* owned, NUL-terminated; "" for the root */
    size_t seglen;               /* bytes of seg */
    bool wildcard;               /* seg is "*" */
    bool bad;                    /* its limits: were refused (load only) */
    struct limits_node *parent;  /* borrowed; NULL for the root */
    struct limits_node **child;  /* owned array of owned nodes, by segment */
    size_t nchild;               /* entries of child */
    struct limits_limit *limits; /* owned; NULL when none */
    size_t nlimits;              /* entries of limits */
    bool shadow;                 /* shadow: true: its limits never refuse */
    int64_t lease;               /* lease: N (units a proxy may take at once
                                    when this node is a path's deepest
                                    level), 0: none */
    char *pattern;               /* owned, with limits: "user:*:trade" */
    size_t rule;                 /* with limits: its index in tree->rules */
};

/* What an override does, for LIMITER RULES. */
enum limits_ov_kind {
    LIMITS_OV_NONE = 0,
    LIMITS_OV_FACTOR,
    LIMITS_OV_PARAMS,
    LIMITS_OV_LIMITS,
    LIMITS_OV_UNLIMITED,
};

/* One entry of overrides:, with its limits already computed. */
struct limits_override {
    char *path;                  /* owned, NUL-terminated concrete path */
    size_t len;                  /* bytes of path */
    enum limits_ov_kind kind;    /* how it was written */
    uint64_t factor_micro;       /* LIMITS_OV_FACTOR: the factor * 1e6 */
    struct limits_limit *limits; /* owned; NULL when unlimited */
    size_t nlimits;              /* entries of limits */
};

/* A loaded tree: built by one load, immutable once returned. */
struct limits_tree {
    struct limits_node root;          /* segment "", never has limits */
    struct limits_override *ov;       /* owned, sorted by path */
    size_t nov;                       /* entries of ov */
    size_t nrules;                    /* nodes with limits */
    const struct limits_node **rules; /* owned array of nrules borrowed
                                         nodes, in file order */
    size_t rules_cap;                 /* entries allocated in rules */
    char sha256[SHA256_HEX_LEN];      /* of the text loaded */
};

/* ---------------- Algorithms (limits_algo.c) ---------------- */

/* How a parameter is written and checked. */
enum limits_kind {
    LIMITS_K_COUNT,     /* integer >= 1 */
    LIMITS_K_COUNT0,    /* integer >= 0 */
    LIMITS_K_DURATION,  /* duration >= 1 ms */
    LIMITS_K_DURATION0, /* duration >= 0 */
    LIMITS_K_MS,        /* integer milliseconds >= 1 */
    LIMITS_K_RATE,      /* number > 0 or inf, in millionths */
    LIMITS_K_WINDOW,    /* a duration, or day, week or month (stored as
                           LIMITS_WINDOW_*) */
    LIMITS_K_TZ,        /* a UTC offset [+-]HH:MM, in minutes */
};

/* What a factor does to a parameter. */
enum limits_scaling {
    LIMITS_S_KEEP,     /* unchanged (count, windows) */
    LIMITS_S_DIVIDE,   /* divided, rounded down (amounts, rates) */
    LIMITS_S_MULTIPLY, /* multiplied, rounded up (spacings) */
};

struct limits_param {
    const char *name;            /* YAML key */
    enum limits_kind kind;       /* syntax and least value */
    enum limits_scaling scaling; /* effect of a factor */
    size_t offset;               /* of the int64_t in struct limits_limit */
    int64_t max;                 /* greatest value */
    bool optional;               /* may be left out, then dflt */
    int64_t dflt;                /* value when left out */
    bool terse;                  /* rendered, and sent as a trailing word,
                                    only when not dflt (a feature that is
                                    off), so older rules read as they did */
};

struct limits_algo_def {
    enum limits_algo algo;             /* its index in the table */
    const char *name;                  /* YAML name */
    const struct limits_param *params; /* in documented order */
    size_t nparams;                    /* entries of params */
    /* Rules across its parameters, after each is in range: NULL when `l`
     * is valid, else a static reason. NULL when there are none. */
    const char *(*check)(const struct limits_limit *l);
};

/* The algorithm names of the table, in its order, for messages. */
#define LIMITS_ALGO_NAMES                                                      \
    "gcra, token_bucket, leaky_bucket, fixed_window, sliding_window, "         \
    "sliding_log, sliding_counter or concurrency"

/* The definition of `algo`; never NULL (an out-of-range value gets one
 * named "?" without parameters). */
const struct limits_algo_def *limits_def(enum limits_algo algo);

/* The definition named `name` (NUL-terminated), or NULL. */
const struct limits_algo_def *limits_algo_find(const char *name);

/* The parameter of `def` named `name` (len bytes), or NULL. */
const struct limits_param *limits_param_find(const struct limits_algo_def *def,
                                             const char *name, size_t len);

/* The int64_t of `l` that `p` describes. */
int64_t *limits_field(struct limits_limit *l, const struct limits_param *p);

/* Rules that span parameters. NULL when `l` is valid, else a static reason
 * (the message names the algorithm before it). */
const char *limits_check(const struct limits_limit *l);

/* A spelling of an unlimited rate ("inf", ".inf", ...; any case). */
bool limits_is_inf(const char *s);

/* Parses the value of a parameter of kind `p->kind` within its range. */
enum conf_yaml_num limits_parse_param(const struct limits_param *p,
                                      const char *s, int64_t *out);

/* What a value of `kind` should look like, for messages. */
const char *limits_kind_want(enum limits_kind kind);

/* Writes "a, b, c" (the parameter names of `def`) into `out`. */
void limits_param_names(const struct limits_algo_def *def, char *out,
                        size_t len);

/* ---------------- Rendering (limits_algo.c) ---------------- */

/* Writes `micro` millionths as a decimal without trailing zeros. */
int limits_fmt_micro(char *out, size_t len, uint64_t micro);

/* Writes one parameter value as the file would say it ("60s", "0.5"). */
void limits_fmt_value(char *out, size_t len, enum limits_kind kind, int64_t v);

/* A string being filled, snprintf style: `len` counts every byte asked
 * for, even those past `size`, and p stays NUL-terminated. */
struct limits_str {
    char *p;     /* borrowed: the caller's buffer */
    size_t size; /* bytes of p */
    size_t len;  /* bytes written, or that would have been */
};

CONF_YAML_PRINTF(2, 3)
void limits_str_add(struct limits_str *s, const char *fmt, ...);

/* ---------------- Paths (limits_resolve.c) ---------------- */

/* Byte order of two segments or paths, shorter first on a tie. */
int limits_seg_cmp(const char *a, size_t alen, const char *b, size_t blen);

/* Splits `path` on ':' into at most LIMITS_MAX_DEPTH segments (start
 * offsets and lengths). NULL, or why the path is refused. */
const char *limits_split_path(const char *path, size_t len, size_t *start,
                              size_t *seglen, unsigned *nseg);

/* Walks a concrete path of `nseg` segments through the tree. Returns the
 * node of the last segment, or NULL when the walk stops before it. */
const struct limits_node *limits_walk_path(const struct limits_tree *t,
                                           const char *path,
                                           const size_t *start,
                                           const size_t *seglen, unsigned nseg);

/* ---------------- Loading ---------------- */

/* Shared by limits.c, limits_walk.c, limits_parse.c and limits_override.c;
 * each function names the file that defines it when it is not
 * limits_parse.c. */

/* State of one load: where errors go and what is being built. */
struct limits_loader {
    struct conf_yaml_diag diag; /* where errors go; diag.stop: a cap was
                                   hit, walk no further */
    const char *text;           /* borrowed: the whole input */
    size_t textlen;             /* bytes of text */
    yaml_document_t *doc;       /* borrowed: the document being walked */
    struct limits_tree *tree;   /* the tree being built */
    size_t nnodes;              /* nodes created so far */
    char pattern[LIMITS_MAX_PATH_BYTES + 1]; /* pattern of the current node */
    size_t patlen;                           /* bytes of pattern */
};

/* A scalar key of a mapping, or NULL after reporting a collection key. */
const yaml_node_t *limits_key(struct limits_loader *ld,
                              const yaml_node_pair_t *pair, const char *where);

/* The scalar `key` is exactly `name`. */
bool limits_key_is(const yaml_node_t *key, const char *name);

/* Reports every later duplicate of a scalar key of `map`, and marks it in
 * `dup` (one flag per pair) so the walk skips it. LIMITS_OK or
 * LIMITS_ENOMEM. */
int limits_find_dups(struct limits_loader *ld, const yaml_node_t *map,
                     const char *where, bool *dup);

/* Reads one parameter value into `l`. LIMITS_OK or LIMITS_ERR. */
int limits_read_param(struct limits_loader *ld, const char *where,
                      const struct limits_param *p, const yaml_node_t *node,
                      struct limits_limit *l);

/* Reports a limit that breaks a rule spanning its parameters. */
int limits_check_report(struct limits_loader *ld, const char *where,
                        const yaml_node_t *node, const struct limits_limit *l);

/* The value of limits: into a new array. LIMITS_OK, LIMITS_ERR after
 * reporting (nothing allocated), or LIMITS_ENOMEM. */
int limits_read_limits(struct limits_loader *ld, const char *where,
                       const yaml_node_t *node, struct limits_limit **out,
                       size_t *nout);

/* The top-level mapping into ld->tree: segments, then overrides
 * (limits_walk.c). LIMITS_OK (errors counted in ld) or LIMITS_ENOMEM. */
int limits_walk_root(struct limits_loader *ld, const yaml_node_t *root);

/* overrides: a mapping of concrete path -> override, against the tree
 * built so far (limits_override.c). LIMITS_OK (errors counted in ld) or
 * LIMITS_ENOMEM. */
int limits_walk_overrides(struct limits_loader *ld, const yaml_node_t *map);

#endif /* PX_CONF_LIMITS_IMPL_H */
