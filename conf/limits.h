// The comment below is laid out by hand (a drawing, tables): no reflow.
// clang-format off
/* limits.yaml: the limits tree of LIMITER CHECK, loaded, validated and walked.
 *
 * The file (conf/limits.example.yaml shows every feature):
 *
 *   user:                    # top level: a mapping of path segments
 *     children:
 *       "*":                 # any one segment: user:<name>
 *         limits: [15, 30, 60]
 *         children:
 *           trade:           # user:<name>:trade; counts against user:<name>
 *             limits: [5, 10, 15]
 *   overrides:               # reserved top-level key: per-identity overrides
 *     user:alex: { factor: 2 }
 *
 * A node is a mapping with optional `limits:`, `children:` (segment ->
 * node; null is an empty node) and `shadow:` (true or false, default false:
 * a node with limits whose level decides and keeps its state but never
 * refuses; see limits_level.shadow). A segment is a literal or exactly "*"
 * (quote it: a bare * starts a YAML alias). `limits:` is either redis-cell's
 * GCRA shorthand [max_burst, count, period] or a list of mappings, each naming
 * an `algorithm:` (default gcra) and its parameters. Units:
 *
 *   counts    integers, 0 < n <= 2^53 - 1 (a Lua double holds them exactly);
 *             max_burst may be 0.
 *   durations (period, window, resolution, min_interval) seconds, with up
 *             to 3 decimals ("60", "1.5"), or a number with a unit: ms, s,
 *             m, h, d ("500ms", "2m", "1.5h"). Stored as integer
 *             milliseconds, 1 ms to 3650 days (min_interval may be 0).
 *   drip_ms   integer milliseconds (Sharkey's unit).
 *   rates     refill_per_sec: a positive number with up to 6 decimals, at
 *             most 1e9, or inf (no limit). Stored as millionths of a token
 *             per second.
 *
 *   algorithm        parameters (optional ones with their default)
 *   gcra             max_burst, count, period
 *   token_bucket     capacity, refill_per_sec
 *   leaky_bucket     size, drip_ms, drip_size = 1
 *   fixed_window     max, window (a duration, or day, week or month: a
 *                    calendar window), tz = +00:00 (a calendar window's
 *                    fixed UTC offset, -14:00 to +14:00)
 *   sliding_window   max, window, resolution (divides window; at most 3600
 *                    slots per window)
 *   sliding_log      max (at most 100000 entries), window, min_interval = 0
 *   sliding_counter  max, window
 *   concurrency      max (at most 100000 holders), lease = 60s (1 ms to
 *                    1 day): in-flight slots, LIMITER CHECK ... ID <token>
 *                    takes one until LIMITER RELEASE or the lease's end
 *
 * A node holds at most LIMITS_MAX_LIMITS limits; a request must pass all of
 * them (the caller's job). gcra also needs period / count >= 1 ns and a
 * burst window (max_burst + 1) * period / count under 292 years.
 *
 * Overrides map a concrete path (no "*" segment) that resolves to a node
 * with limits to exactly one of:
 *   factor: F         every limit of the node "divided by F" (Sharkey's
 *                     factor; F > 1 is stricter, 0.000001 <= F <= 1000000):
 *                     amounts (max_burst, capacity, size, max) are divided,
 *                     rounded down (at least 1, max_burst at least 0);
 *                     spacings (gcra period, drip_ms, min_interval) are
 *                     multiplied, rounded up; refill_per_sec is divided;
 *                     windows and count stay;
 *   parameters        the NERD way, e.g. `capacity: 50` or `max_burst: 30`:
 *                     replace those parameters of the node's limit (the
 *                     node must have exactly one limit);
 *   limits: ...       a replacement list, with the syntax of a node;
 *   unlimited: true   (or the whole value `inf`): the level admits anything.
 *
 * Paths are split on ':'. At each depth an exact child wins over "*" (so an
 * empty literal node exempts one identity from a wildcard's limits). The
 * walk stops at the first segment no node matches; the levels found so far
 * still apply (user:alex:other counts against user:alex).
 *
 * Keys. All keys of one identity share one Redis hash tag, so one script
 * call checks them atomically: the tag is the path up to and including the
 * first segment matched by a "*" node. With prefix "cellgate:", the path
 * user:alex:trade gives the key bases
 *   level user:alex        cellgate:{user:alex}
 *   level user:alex:trade  cellgate:{user:alex}:trade
 * A level above the first wildcard (a limit on `user`, shared by every
 * identity) has its own tag, its own path: cellgate:{user}. A path that
 * matches no "*" node tags each level with its own path: levels api and
 * api:search get cellgate:{api} and cellgate:{api:search}, because level api
 * is shared by every path below it. Limit i of a level is the key
 * "<base>#<i>:<algorithm>", e.g. cellgate:{user:alex}:trade#0:gcra: the
 * index keeps several limits of a node apart, the algorithm name keeps one
 * algorithm from reading another's state after the file changes. An
 * algorithm that needs more keys appends its own suffix to that key.
 *
 * Braces: Redis hashes the first "{...}" of a key, so a client-chosen
 * segment holding '{' or '}' could move the tag. Paths and prefixes with '{'
 * or '}' are refused (not escaped: escaping would make keys differ from the
 * paths users see). The prefix holds no brace and no segment does, so the
 * tag is always exactly the braces this module writes.
 *
 * Leaf layer: libc and libyaml only, no logging, no globals. Errors are
 * written to a caller buffer as "file:line:column: text", one per line,
 * every error of the file (up to LIMITS_MAX_ERRORS). */
// clang-format on
#ifndef PX_CONF_LIMITS_H
#define PX_CONF_LIMITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LIMITS_OK     0
#define LIMITS_ERR    -1
#define LIMITS_ENOMEM -2

#define LIMITS_DEFAULT_PREFIX "cellgate:" /* proxy.yaml key_prefix default */

/* Caps: a hostile file or path cannot make us allocate without bound. */
#define LIMITS_LEASE_MAX        (INT64_C(1) << 31) /* lease: N, at most */
#define LIMITS_MAX_DEPTH        32      /* segments of a path, tree levels */
#define LIMITS_MAX_PATH_BYTES   1024    /* bytes of a path */
#define LIMITS_MAX_PREFIX_BYTES 128     /* bytes of the key prefix */
#define LIMITS_MAX_LIMITS       8       /* limits of one node */
#define LIMITS_MAX_NODES        100000  /* nodes of the tree */
#define LIMITS_MAX_OVERRIDES    100000  /* entries of overrides: */
#define LIMITS_MAX_ERRORS       100     /* errors listed before giving up */
#define LIMITS_MAX_FILE_BYTES   4194304 /* 4 MiB: ~100k overrides */
#define LIMITS_MAX_YAML_NODES   500000  /* YAML nodes libyaml may build */
#define LIMITS_MAX_YAML_DEPTH   128     /* YAML nesting (2 per tree level) */

/* Largest count: integers up to 2^53 - 1 survive the trip through Lua. */
#define LIMITS_MAX_COUNT INT64_C(9007199254740991)
/* Longest duration, 3650 days, in ms (its ns still fit an int64). */
#define LIMITS_MAX_DURATION_MS INT64_C(315360000000)
/* Largest refill_per_sec, 1e9 tokens per second, in millionths. */
#define LIMITS_MAX_RATE_MICRO INT64_C(1000000000000000)
/* refill_per_sec: inf. */
#define LIMITS_RATE_INF INT64_MAX
/* sliding_window: most time slots per window. */
#define LIMITS_MAX_SLOTS 3600
/* sliding_log: most entries of one log (a sorted set in Redis). */
#define LIMITS_MAX_LOG_ENTRIES 100000
/* concurrency: most holders of one key (a sorted set in Redis), and the
 * longest lease (1 day) and its default (60 s), in ms. */
#define LIMITS_MAX_HOLDERS      100000
#define LIMITS_MAX_LEASE_MS     INT64_C(86400000)
#define LIMITS_DEFAULT_LEASE_MS INT64_C(60000)
/* factor, in millionths: 0.000001 to 1000000. */
#define LIMITS_MAX_FACTOR_MICRO UINT64_C(1000000000000)

enum limits_algo {
    LIMITS_GCRA = 0,
    LIMITS_TOKEN_BUCKET = 1,
    LIMITS_LEAKY_BUCKET = 2,
    LIMITS_FIXED_WINDOW = 3,
    LIMITS_SLIDING_WINDOW = 4,
    LIMITS_SLIDING_LOG = 5,
    LIMITS_SLIDING_COUNTER = 6,
    LIMITS_CONCURRENCY = 7,
};

/* redis-cell's GCRA: max_burst + 1 requests at once, count per period. */
struct limits_gcra {
    int64_t max_burst; /* >= 0 */
    int64_t count;     /* >= 1 */
    int64_t period_ms; /* >= 1 */
};

/* NERD's token bucket, refilled lazily. */
struct limits_token_bucket {
    int64_t capacity;             /* tokens, >= 1 */
    int64_t refill_per_sec_micro; /* tokens/s * 1e6, or LIMITS_RATE_INF */
    int64_t warmup_ms;            /* Guava's warm-up; 0: none */
    int64_t cold_factor;          /* 2 .. 1000 with warmup; 0: default 3 */
};

/* Sharkey's leaky bucket: drip_size tokens leak every drip_ms. */
struct limits_leaky_bucket {
    int64_t size;      /* >= 1 */
    int64_t drip_ms;   /* >= 1 */
    int64_t drip_size; /* >= 1, default 1 */
};

/* fixed_window's calendar windows, stored in window_ms (negative, so no
 * duration is one). */
#define LIMITS_WINDOW_DAY   INT64_C(-1) /* the date at the offset */
#define LIMITS_WINDOW_WEEK  INT64_C(-2) /* Monday to Sunday */
#define LIMITS_WINDOW_MONTH INT64_C(-3) /* the calendar month */
/* The widest UTC offset of a calendar window, in minutes (14:00). */
#define LIMITS_MAX_TZ_MIN 840

/* At most `max` per aligned window: a duration from the epoch, or a day,
 * week or month of the calendar at a fixed UTC offset. */
struct limits_fixed_window {
    int64_t max;       /* >= 1 */
    int64_t window_ms; /* >= 1, or a LIMITS_WINDOW_* calendar window */
    int64_t tz_min;    /* minutes east of UTC, -840 .. 840; 0 unless the
                          window is a calendar one */
};

/* At most `max` per window, counted in slots of resolution_ms. */
struct limits_sliding_window {
    int64_t max;           /* >= 1 */
    int64_t window_ms;     /* >= 1, a multiple of resolution_ms */
    int64_t resolution_ms; /* >= 1, window_ms / resolution_ms <= 3600 */
};

/* At most `max` timestamps in the last window, min_interval apart. */
struct limits_sliding_log {
    int64_t max;             /* 1 .. LIMITS_MAX_LOG_ENTRIES */
    int64_t window_ms;       /* >= 1 */
    int64_t min_interval_ms; /* >= 0, default 0 */
};

/* Current window plus the weighted previous one. */
struct limits_sliding_counter {
    int64_t max;       /* >= 1 */
    int64_t window_ms; /* >= 1 */
};

/* At most `max` holders at once, each until released or its lease ends. */
struct limits_concurrency {
    int64_t max;      /* 1 .. LIMITS_MAX_HOLDERS */
    int64_t lease_ms; /* 1 .. LIMITS_MAX_LEASE_MS, default 60 s */
};

/* One limit of a node: an algorithm and its parameters. */
struct limits_limit {
    enum limits_algo algo; /* selects the member of u */
    union {
        struct limits_gcra gcra;
        struct limits_token_bucket token_bucket;
        struct limits_leaky_bucket leaky_bucket;
        struct limits_fixed_window fixed_window;
        struct limits_sliding_window sliding_window;
        struct limits_sliding_log sliding_log;
        struct limits_sliding_counter sliding_counter;
        struct limits_concurrency concurrency;
    } u;
};

/* A loaded tree with its overrides. Opaque; immutable once loaded. */
struct limits_tree;

/* One level of a resolved path: a node with limits on the way. */
struct limits_level {
    const struct limits_limit *limits; /* borrowed from the tree; NULL when
                                          unlimited */
    size_t nlimits;                    /* entries of limits; 0 when unlimited */
    const struct limits_limit *base;   /* the node's own limits, before any
                                          override of the file (what a
                                          run-time override applies to) */
    size_t nbase;                      /* entries of base, >= 1 */
    bool unlimited;   /* an override lifts every limit: admit */
    bool overridden;  /* limits come from an override of this path */
    bool wildcard;    /* this level's own segment matched a "*" node */
    bool own_keys;    /* a segment below the identity's matched a "*" too
                         (tenant:<t>:user:<u>): its gcra states keep keys
                         of their own, never records of the identity's
                         state string, which would hold every
                         sub-identity's */
    bool shadow;      /* shadow: true on the node: the level decides and
                         keeps state, but never refuses (the caller's job) */
    int64_t lease;    /* lease: N of the node, 0: none (used when this
                         level is the path's deepest) */
    unsigned depth;   /* segments of this level's path, 1.. */
    size_t rule;      /* the node's rule: limits_rule_pattern's index */
    const char *path; /* borrowed from levels->text: the concrete prefix */
    size_t path_len;  /* bytes of path (not NUL-terminated) */
    const char *key;  /* borrowed from levels->text: key base, NUL-ended */
    size_t key_len;   /* bytes of key */
    const char *tag;  /* inside key: the text between the braces */
    size_t tag_len;   /* bytes of tag */
    unsigned group;   /* levels with the same tag share a group, 0.. */
};

/* Bytes of levels->text: the path, then every key base. */
#define LIMITS_LEVELS_TEXT_BYTES                                               \
    (LIMITS_MAX_PATH_BYTES + 1 +                                               \
     LIMITS_MAX_DEPTH * (LIMITS_MAX_PREFIX_BYTES + LIMITS_MAX_PATH_BYTES + 3))

/* The levels of one path, top first. Valid until the tree is freed.
 * limits_resolve fills one of LIMITS_LEVELS_BYTES (about 41 KB, for the
 * longest paths: allocate it once, not on a small stack); what a path
 * uses is kept by limits_levels_copy in a few hundred bytes. */
struct limits_levels {
    size_t n;           /* levels with limits; 0 when the path matches none */
    unsigned ngroups;   /* tag groups: 1 = one slot, one script call */
    unsigned nsegments; /* segments of the path */
    unsigned matched;   /* leading segments matched by a node */
    size_t text_len;    /* bytes of text in use */
    char *text; /* in the same allocation, after the levels' room: the path
                   and every key base (LIMITS_LEVELS_TEXT_BYTES for
                   limits_resolve, text_len in a copy) */
    struct limits_level level[]; /* n entries; room for LIMITS_MAX_DEPTH
                                    in what limits_resolve fills */
};

/* Bytes of a struct limits_levels that limits_resolve may fill. */
#define LIMITS_LEVELS_BYTES                                                    \
    (sizeof(struct limits_levels) +                                            \
     LIMITS_MAX_DEPTH * sizeof(struct limits_level) +                          \
     LIMITS_LEVELS_TEXT_BYTES)

/* Loads a limits file into a new tree. On LIMITS_OK `*out` is the tree
 * (owned by the caller, free with limits_free). On error `*out` is left
 * untouched (the caller's old tree stays) and `err` holds every error, one
 * per line: LIMITS_ERR, or LIMITS_ENOMEM. `err` may be NULL. */
int limits_load_file(const char *path, struct limits_tree **out, char *err,
                     size_t errlen);

/* The same from a NUL-terminated string, named `name` in messages. */
int limits_load_string(const char *name, const char *text,
                       struct limits_tree **out, char *err, size_t errlen);

/* Frees a tree. Accepts NULL. */
void limits_free(struct limits_tree *t);

/* Nodes with limits, and overrides, of a tree (0 for NULL). */
size_t limits_rule_count(const struct limits_tree *t);
size_t limits_override_count(const struct limits_tree *t);

/* The pattern of rule `i` (0 .. limits_rule_count - 1, in file order), the
 * tree path of a node with limits with its "*" segments as written
 * ("user:*:trade"), NUL-ended and valid until the tree is freed; NULL when
 * `i` is out of range. A level's rule is limits_level.rule. */
const char *limits_rule_pattern(const struct limits_tree *t, size_t i);

/* The SHA-256 of the file's bytes as loaded, lowercase hex as sha256sum
 * prints it (NULL for a NULL tree). */
const char *limits_sha256(const struct limits_tree *t);

/* Walks `path` (not NUL-terminated) through the tree and fills `out` with
 * every level that has limits, top first, each with its key base built on
 * `prefix` (NULL: LIMITS_DEFAULT_PREFIX). A NULL tree matches nothing.
 * Returns LIMITS_OK (out->n == 0 when no level has limits) or LIMITS_ERR
 * with `*err` set to a static lowercase sentence fit for "-ERR <text>":
 *   "empty limiter path"
 *   "limiter path longer than 1024 bytes"
 *   "limiter path has more than 32 segments"
 *   "limiter path has an empty segment"
 *   "limiter path may not contain '{' or '}'"
 *   "key prefix longer than 128 bytes"
 *   "key prefix may not contain '{' or '}'"
 * Allocates nothing. */
int limits_resolve(const struct limits_tree *t, const char *path,
                   size_t path_len, const char *prefix, size_t prefix_len,
                   struct limits_levels *out, const char **err);

/* A copy of `src` (filled by limits_resolve) in one allocation of the size
 * its path needs, its levels pointing into its own text: what a request
 * keeps while it is decided. Free it with free(). NULL when out of
 * memory. */
struct limits_levels *limits_levels_copy(const struct limits_levels *src);

/* Writes the key of limit `i` of `lv`, "<key>#<i>:<algorithm>", NUL-ended.
 * Returns its length (as snprintf: truncated when >= outlen), or -1 when
 * `i` is out of range. */
int limits_limit_key(const struct limits_level *lv, size_t i, char *out,
                     size_t outlen);

/* Most parameters of one algorithm. */
#define LIMITS_MAX_PARAMS 4

/* The parameters of `l` in their documented order (the table above), in
 * stored units (counts, ms, millionths per second, LIMITS_RATE_INF,
 * minutes), into out[0..n). Returns n: fixed_window's tz is left out when
 * it is +00:00. */
size_t limits_params(const struct limits_limit *l,
                     int64_t out[LIMITS_MAX_PARAMS]);

/* The YAML name of an algorithm ("gcra", ...), or "?" for a bad value. */
const char *limits_algo_name(enum limits_algo algo);

/* Writes `l` for humans, e.g. "gcra(max_burst=15,count=30,period=60s)".
 * Returns the length as snprintf does. */
int limits_format(const struct limits_limit *l, char *out, size_t outlen);

/* Scales `in` by a factor given in millionths (see "factor" above) into
 * `out`. Returns LIMITS_OK, or LIMITS_ERR with `*err` a static reason when
 * the factor is out of range or the result is no valid limit. For
 * overrides kept outside the file (a Redis hash). */
int limits_scale(const struct limits_limit *in, uint64_t factor_micro,
                 struct limits_limit *out, const char **err);

/* ---------------- Run-time overrides ---------------- */

/* A run-time override (LIMITER OVERRIDE SET, kept in a Redis hash), read
 * from its words against the node's own limits (limits_level.base):
 *
 *   factor F               every limit divided by F, as `factor:` in the
 *                          file (limits_scale)
 *   unlimited | inf        the level admits anything
 *   <param> <value> ...    the NERD way: replace parameters of the node's
 *                          one limit (capacity 50 refill_per_sec 10), with
 *                          the file's syntax for each value
 *
 * Words are matched without regard to case; a run-time override replaces
 * an override of the same path in the file. */
struct limits_runtime {
    bool unlimited;                                /* admit anything */
    size_t nlimits;                                /* else: limits[0..n) */
    struct limits_limit limits[LIMITS_MAX_LIMITS]; /* the new limits */
};

/* Longest stored text of a run-time override. */
#define LIMITS_RUNTIME_MAX_BYTES 512

/* Parses argc words (argv[i], lens[i] bytes) against base[0..nbase) into
 * *out. LIMITS_OK, or LIMITS_ERR with a sentence fit for "-ERR <text>" in
 * err (errlen bytes). Allocates nothing. */
int limits_runtime_parse(const struct limits_limit *base, size_t nbase,
                         int argc, const char *const *argv, const size_t *lens,
                         struct limits_runtime *out, char *err, size_t errlen);

/* The same from the stored text: the words joined by single spaces. */
int limits_runtime_parse_text(const struct limits_limit *base, size_t nbase,
                              const char *text, size_t len,
                              struct limits_runtime *out, char *err,
                              size_t errlen);

/* Renders the tree for LIMITER RULES: one line per node with limits,
 * "<pattern>  <limit> <limit>...", with "  shadow" after the limits of a
 * shadow node (every node when `all_shadow`), depth first, children in
 * byte order, then, when `overrides`, one line per override of the file,
 * "override <path>  <what>" (they name identities: shown to admins only).
 * `*out` is malloc'd and NUL-terminated (the caller frees it); `*outlen`
 * excludes the NUL. Output past 1 MiB is cut with a last line "(truncated)".
 * LIMITS_OK or LIMITS_ENOMEM. */
int limits_describe(const struct limits_tree *t, bool all_shadow,
                    bool overrides, char **out, size_t *outlen);

#endif /* PX_CONF_LIMITS_H */
