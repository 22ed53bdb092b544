/* limits.c: limits.yaml, from YAML text to an immutable tree, and the walk
 * of a LIMITER path through it.
 *
 * Loading runs in three steps, so that a hostile file is refused before it
 * costs anything:
 *
 *   text --prescan (events)--> syntax, aliases, YAML node count and depth
 *        --yaml_parser_load--> document --walk--> new tree --> *out
 *                                           |
 *                                           `--> ld->diag ("file:l:c: ...")
 *
 * The prescan counts libyaml events, so libyaml never builds a document of
 * more than LIMITS_MAX_YAML_NODES nodes, and refuses aliases: without them
 * the tree is no bigger than the text (no "billion laughs", no cycles). The
 * walk then builds nodes depth first, reports an error and goes on, so one
 * run lists every error; overrides are checked last, against the finished
 * tree. The tree is returned only when the file had no error at all, so a
 * bad reload leaves the caller's old tree in place.
 *
 * Each algorithm is a table of parameters (name, kind, offset in struct
 * limits_limit, range, how a factor scales it): parsing, rendering and
 * scaling all read the same table.
 *
 * Resolution splits the path on ':' and walks the children (sorted arrays,
 * binary search; an exact segment before "*"), allocating nothing: every
 * string it makes lives in the caller's struct limits_levels. Leaf layer:
 * no logging, no globals; allocation failure returns LIMITS_ENOMEM. */
#include "conf/limits.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <yaml.h>

#include "conf/conf_yaml.h"
#include "conf/sha256.h"

#define LIMITS_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* conf_yaml's codes are returned as ours. */
_Static_assert(CONF_YAML_OK == LIMITS_OK && CONF_YAML_ERR == LIMITS_ERR &&
                   CONF_YAML_ENOMEM == LIMITS_ENOMEM,
               "conf_yaml codes differ from limits codes");
/* Room for "where" texts: a pattern, or "override " and a path. */
#define LIMITS_WHERE_SIZE (LIMITS_MAX_PATH_BYTES + 16)
/* LIMITER RULES output is cut past this many bytes. */
#define LIMITS_MAX_DESCRIBE_BYTES ((size_t)1024 * 1024)
/* One rendered limit or line of LIMITER RULES fits in these. */
#define LIMITS_FORMAT_SIZE 256
#define LIMITS_LINE_SIZE                                                       \
    (LIMITS_MAX_PATH_BYTES + 64 + LIMITS_MAX_LIMITS * LIMITS_FORMAT_SIZE)

#define LIMITS_MICRO     UINT64_C(1000000) /* rates and factors, in 1e-6 */
#define LIMITS_NS_PER_MS INT64_C(1000000)

/* ---------------- Types ---------------- */

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

/* ---------------- Parameters of the algorithms ---------------- */

/* How a parameter is written and checked. */
enum limits_kind {
    LIMITS_K_COUNT,     /* integer >= 1 */
    LIMITS_K_COUNT0,    /* integer >= 0 */
    LIMITS_K_DURATION,  /* duration >= 1 ms */
    LIMITS_K_DURATION0, /* duration >= 0 */
    LIMITS_K_MS,        /* integer milliseconds >= 1 */
    LIMITS_K_RATE,      /* number > 0 or inf, in millionths */
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
};

struct limits_algo_def {
    const char *name;                  /* YAML name */
    const struct limits_param *params; /* in documented order */
    size_t nparams;                    /* entries of params */
};

#define LIMITS_OFF(field) offsetof(struct limits_limit, u.field)

#define LIMITS_PARAM(key, k, s, field, hi)                                     \
    {                                                                          \
        .name = (key), .kind = (k), .scaling = (s),                            \
        .offset = LIMITS_OFF(field), .max = (hi),                              \
    }

#define LIMITS_OPTIONAL(key, k, s, field, hi, def)                             \
    {                                                                          \
        .name = (key), .kind = (k), .scaling = (s),                            \
        .offset = LIMITS_OFF(field), .max = (hi), .optional = true,            \
        .dflt = (def),                                                         \
    }

static const struct limits_param limits_gcra_params[] = {
    LIMITS_PARAM("max_burst", LIMITS_K_COUNT0, LIMITS_S_DIVIDE, gcra.max_burst,
                 LIMITS_MAX_COUNT),
    LIMITS_PARAM("count", LIMITS_K_COUNT, LIMITS_S_KEEP, gcra.count,
                 LIMITS_MAX_COUNT),
    LIMITS_PARAM("period", LIMITS_K_DURATION, LIMITS_S_MULTIPLY, gcra.period_ms,
                 LIMITS_MAX_DURATION_MS),
};

static const struct limits_param limits_token_bucket_params[] = {
    LIMITS_PARAM("capacity", LIMITS_K_COUNT, LIMITS_S_DIVIDE,
                 token_bucket.capacity, LIMITS_MAX_COUNT),
    LIMITS_PARAM("refill_per_sec", LIMITS_K_RATE, LIMITS_S_DIVIDE,
                 token_bucket.refill_per_sec_micro, LIMITS_MAX_RATE_MICRO),
};

static const struct limits_param limits_leaky_bucket_params[] = {
    LIMITS_PARAM("size", LIMITS_K_COUNT, LIMITS_S_DIVIDE, leaky_bucket.size,
                 LIMITS_MAX_COUNT),
    LIMITS_PARAM("drip_ms", LIMITS_K_MS, LIMITS_S_MULTIPLY,
                 leaky_bucket.drip_ms, LIMITS_MAX_DURATION_MS),
    LIMITS_OPTIONAL("drip_size", LIMITS_K_COUNT, LIMITS_S_KEEP,
                    leaky_bucket.drip_size, LIMITS_MAX_COUNT, 1),
};

static const struct limits_param limits_fixed_window_params[] = {
    LIMITS_PARAM("max", LIMITS_K_COUNT, LIMITS_S_DIVIDE, fixed_window.max,
                 LIMITS_MAX_COUNT),
    LIMITS_PARAM("window", LIMITS_K_DURATION, LIMITS_S_KEEP,
                 fixed_window.window_ms, LIMITS_MAX_DURATION_MS),
};

static const struct limits_param limits_sliding_window_params[] = {
    LIMITS_PARAM("max", LIMITS_K_COUNT, LIMITS_S_DIVIDE, sliding_window.max,
                 LIMITS_MAX_COUNT),
    LIMITS_PARAM("window", LIMITS_K_DURATION, LIMITS_S_KEEP,
                 sliding_window.window_ms, LIMITS_MAX_DURATION_MS),
    LIMITS_PARAM("resolution", LIMITS_K_DURATION, LIMITS_S_KEEP,
                 sliding_window.resolution_ms, LIMITS_MAX_DURATION_MS),
};

static const struct limits_param limits_sliding_log_params[] = {
    LIMITS_PARAM("max", LIMITS_K_COUNT, LIMITS_S_DIVIDE, sliding_log.max,
                 LIMITS_MAX_LOG_ENTRIES),
    LIMITS_PARAM("window", LIMITS_K_DURATION, LIMITS_S_KEEP,
                 sliding_log.window_ms, LIMITS_MAX_DURATION_MS),
    LIMITS_OPTIONAL("min_interval", LIMITS_K_DURATION0, LIMITS_S_MULTIPLY,
                    sliding_log.min_interval_ms, LIMITS_MAX_DURATION_MS, 0),
};

static const struct limits_param limits_sliding_counter_params[] = {
    LIMITS_PARAM("max", LIMITS_K_COUNT, LIMITS_S_DIVIDE, sliding_counter.max,
                 LIMITS_MAX_COUNT),
    LIMITS_PARAM("window", LIMITS_K_DURATION, LIMITS_S_KEEP,
                 sliding_counter.window_ms, LIMITS_MAX_DURATION_MS),
};

#define LIMITS_ALGO(key, table)                                                \
    {                                                                          \
        .name = (key), .params = (table), .nparams = LIMITS_ARRAY_SIZE(table), \
    }

/* Indexed by enum limits_algo. */
static const struct limits_algo_def limits_algos[] = {
    LIMITS_ALGO("gcra", limits_gcra_params),
    LIMITS_ALGO("token_bucket", limits_token_bucket_params),
    LIMITS_ALGO("leaky_bucket", limits_leaky_bucket_params),
    LIMITS_ALGO("fixed_window", limits_fixed_window_params),
    LIMITS_ALGO("sliding_window", limits_sliding_window_params),
    LIMITS_ALGO("sliding_log", limits_sliding_log_params),
    LIMITS_ALGO("sliding_counter", limits_sliding_counter_params),
};

#define LIMITS_ALGO_NAMES                                                      \
    "gcra, token_bucket, leaky_bucket, fixed_window, sliding_window, "         \
    "sliding_log or sliding_counter"

/* Spellings of an unlimited rate (YAML's own is .inf). */
static const char *const limits_inf_names[] = { "inf", ".inf", "+inf", "+.inf",
                                                "infinity" };

static int64_t *limits_field(struct limits_limit *l,
                             const struct limits_param *p)
{
    return (int64_t *)(void *)((char *)l + p->offset);
}

static int64_t limits_get(const struct limits_limit *l,
                          const struct limits_param *p)
{
    const int64_t *v = (const void *)((const char *)l + p->offset);

    return *v;
}

/* Stands for an enum value out of range (a caller's bug): no parameters. */
static const struct limits_algo_def limits_unknown_algo = { .name = "?" };

/* The definition of `algo`; never NULL. */
static const struct limits_algo_def *limits_def(enum limits_algo algo)
{
    return (size_t)algo < LIMITS_ARRAY_SIZE(limits_algos)
               ? &limits_algos[algo]
               : &limits_unknown_algo;
}

static const struct limits_param *
limits_param_find(const struct limits_algo_def *def, const char *name,
                  size_t len)
{
    size_t i;

    for (i = 0; i < def->nparams; i++) {
        if (strlen(def->params[i].name) == len &&
            memcmp(def->params[i].name, name, len) == 0) {
            return &def->params[i];
        }
    }
    return NULL;
}

/* Rules that span parameters. NULL when `l` is valid, else a static reason
 * (the message names the algorithm before it). */
static const char *limits_check(const struct limits_limit *l)
{
    const struct limits_gcra *g = &l->u.gcra;
    const struct limits_sliding_window *sw = &l->u.sliding_window;
    int64_t ei_ns;

    switch (l->algo) {
    case LIMITS_GCRA:
        /* Emission interval, as CL.THROTTLE computes it (docs/ARCHITECTURE.md).
         */
        ei_ns = g->period_ms * LIMITS_NS_PER_MS / g->count;
        if (ei_ns < 1) {
            return "period / count is under 1 ns (zero rates are not "
                   "supported)";
        }
        if (g->max_burst + 1 > INT64_MAX / ei_ns) {
            return "(max_burst + 1) * period / count is longer than 292 "
                   "years";
        }
        return NULL;
    case LIMITS_SLIDING_WINDOW:
        if (sw->resolution_ms > sw->window_ms) {
            return "resolution is longer than window";
        }
        if (sw->window_ms % sw->resolution_ms != 0) {
            return "resolution does not divide window";
        }
        if (sw->window_ms / sw->resolution_ms > LIMITS_MAX_SLOTS) {
            return "window / resolution is more than 3600 slots";
        }
        return NULL;
    case LIMITS_TOKEN_BUCKET:
    case LIMITS_LEAKY_BUCKET:
    case LIMITS_FIXED_WINDOW:
    case LIMITS_SLIDING_LOG:
    case LIMITS_SLIDING_COUNTER:
        return NULL;
    }
    return "unknown algorithm";
}

/* ---------------- Numbers ---------------- */

/* A duration unit and its length in milliseconds. */
struct limits_unit {
    const char *suffix; /* after the number */
    uint64_t ms;        /* milliseconds per unit */
};

static const struct limits_unit limits_units[] = {
    { .suffix = "", .ms = 1000 },     { .suffix = "ms", .ms = 1 },
    { .suffix = "s", .ms = 1000 },    { .suffix = "m", .ms = 60000 },
    { .suffix = "h", .ms = 3600000 }, { .suffix = "d", .ms = 86400000 },
};

/* Parses a duration (seconds, or a number with a unit) into ms. */
static enum conf_yaml_num limits_parse_duration(const char *s, uint64_t *out)
{
    size_t n = strspn(s, "0123456789.");
    enum conf_yaml_num st;
    uint64_t milli, prod;
    size_t i;

    for (i = 0; i < LIMITS_ARRAY_SIZE(limits_units); i++) {
        if (strcmp(s + n, limits_units[i].suffix) == 0) {
            break;
        }
    }
    if (i == LIMITS_ARRAY_SIZE(limits_units)) {
        return CONF_YAML_NUM_EINVAL;
    }
    /* The number in thousandths, so that 1.5 s and 0.5 m are exact. */
    st = conf_yaml_parse_decimal(s, n, 3, &milli);
    if (st != CONF_YAML_NUM_OK) {
        return st;
    }
    if (milli > UINT64_MAX / limits_units[i].ms) {
        return CONF_YAML_NUM_ERANGE;
    }
    prod = milli * limits_units[i].ms;
    if (prod % 1000 != 0) {
        return CONF_YAML_NUM_EPREC;
    }
    *out = prod / 1000;
    return CONF_YAML_NUM_OK;
}

static bool limits_is_inf(const char *s)
{
    size_t i;

    for (i = 0; i < LIMITS_ARRAY_SIZE(limits_inf_names); i++) {
        if (strcasecmp(s, limits_inf_names[i]) == 0) {
            return true;
        }
    }
    return false;
}

/* Parses the value of a parameter of kind `p->kind` within its range. */
static enum conf_yaml_num limits_parse_param(const struct limits_param *p,
                                             const char *s, int64_t *out)
{
    enum conf_yaml_num st;
    uint64_t v = 0;

    switch (p->kind) {
    case LIMITS_K_COUNT:
    case LIMITS_K_COUNT0:
    case LIMITS_K_MS:
        st = strchr(s, '.') != NULL
                 ? CONF_YAML_NUM_EINVAL
                 : conf_yaml_parse_decimal(s, strlen(s), 0, &v);
        break;
    case LIMITS_K_DURATION:
    case LIMITS_K_DURATION0:
        st = limits_parse_duration(s, &v);
        break;
    case LIMITS_K_RATE:
        if (limits_is_inf(s)) {
            *out = LIMITS_RATE_INF;
            return CONF_YAML_NUM_OK;
        }
        st = conf_yaml_parse_decimal(s, strlen(s), 6, &v);
        break;
    default:
        return CONF_YAML_NUM_EINVAL;
    }
    if (st != CONF_YAML_NUM_OK) {
        return st;
    }
    if (v == 0 && p->kind != LIMITS_K_COUNT0 && p->kind != LIMITS_K_DURATION0) {
        return CONF_YAML_NUM_EINVAL;
    }
    if (v > (uint64_t)p->max) {
        return CONF_YAML_NUM_ERANGE;
    }
    *out = (int64_t)v;
    return CONF_YAML_NUM_OK;
}

static const char *limits_kind_want(enum limits_kind kind)
{
    switch (kind) {
    case LIMITS_K_COUNT:
        return "a positive integer";
    case LIMITS_K_COUNT0:
        return "a non-negative integer";
    case LIMITS_K_DURATION:
        return "a positive duration such as 60, 1.5, 500ms or 2m";
    case LIMITS_K_DURATION0:
        return "a duration such as 0, 1.5, 500ms or 2m";
    case LIMITS_K_MS:
        return "a positive integer (milliseconds)";
    case LIMITS_K_RATE:
        return "a positive number or inf";
    }
    return "a value";
}

/* `a * b / d` without overflow for our ranges (d * b <= 1e18), saturated
 * at UINT64_MAX, rounded up when `up`. */
static uint64_t limits_muldiv(uint64_t a, uint64_t b, uint64_t d, bool up)
{
    uint64_t q = a / d, r = a % d, hi, lo, res;

    if (q != 0 && b > UINT64_MAX / q) {
        return UINT64_MAX;
    }
    hi = q * b;
    if (r != 0 && b > UINT64_MAX / r) {
        return UINT64_MAX;
    }
    lo = r * b;
    res = hi + lo / d;
    if (res < hi) {
        return UINT64_MAX;
    }
    if (up && lo % d != 0 && res < UINT64_MAX) {
        res++;
    }
    return res;
}

static int64_t limits_clamp(uint64_t v, int64_t lo, int64_t hi)
{
    if (v > (uint64_t)hi) {
        return hi;
    }
    return (int64_t)v < lo ? lo : (int64_t)v;
}

/* Applies a factor (in millionths) to one parameter of `l`. */
static void limits_scale_param(struct limits_limit *l,
                               const struct limits_param *p, uint64_t factor)
{
    int64_t *v = limits_field(l, p);
    int64_t least =
        p->kind == LIMITS_K_COUNT0 || p->kind == LIMITS_K_DURATION0 ? 0 : 1;

    if (p->scaling == LIMITS_S_KEEP || *v == LIMITS_RATE_INF) {
        return;
    }
    if (p->scaling == LIMITS_S_DIVIDE) {
        *v = limits_clamp(
            limits_muldiv((uint64_t)*v, LIMITS_MICRO, factor, false), least,
            p->max);
    } else {
        *v = limits_clamp(
            limits_muldiv((uint64_t)*v, factor, LIMITS_MICRO, true), least,
            p->max);
    }
}

/* ---------------- Rendering ---------------- */

/* Writes `micro` millionths as a decimal without trailing zeros. */
static int limits_fmt_micro(char *out, size_t len, uint64_t micro)
{
    char frac[8];
    int n;

    if (micro % LIMITS_MICRO == 0) {
        return snprintf(out, len, "%llu",
                        (unsigned long long)(micro / LIMITS_MICRO));
    }
    snprintf(frac, sizeof(frac), "%06llu",
             (unsigned long long)(micro % LIMITS_MICRO));
    for (n = 5; n > 0 && frac[n] == '0'; n--) {
        frac[n] = '\0';
    }
    return snprintf(out, len, "%llu.%s",
                    (unsigned long long)(micro / LIMITS_MICRO), frac);
}

/* Writes one parameter value as the file would say it ("60s", "0.5"). */
static void limits_fmt_value(char *out, size_t len, enum limits_kind kind,
                             int64_t v)
{
    char num[32];

    switch (kind) {
    case LIMITS_K_DURATION:
    case LIMITS_K_DURATION0:
        /* Milliseconds as seconds: thousandths scaled to millionths. */
        limits_fmt_micro(num, sizeof(num), (uint64_t)v * 1000);
        snprintf(out, len, "%ss", num);
        return;
    case LIMITS_K_RATE:
        if (v == LIMITS_RATE_INF) {
            snprintf(out, len, "inf");
        } else {
            limits_fmt_micro(out, len, (uint64_t)v);
        }
        return;
    case LIMITS_K_COUNT:
    case LIMITS_K_COUNT0:
    case LIMITS_K_MS:
        break;
    }
    snprintf(out, len, "%lld", (long long)v);
}

/* A string being filled, snprintf style: `len` counts every byte asked
 * for, even those past `size`, and p stays NUL-terminated. */
struct limits_str {
    char *p;     /* borrowed: the caller's buffer */
    size_t size; /* bytes of p */
    size_t len;  /* bytes written, or that would have been */
};

CONF_YAML_PRINTF(2, 3)
static void limits_str_add(struct limits_str *s, const char *fmt, ...)
{
    size_t room = s->len < s->size ? s->size - s->len : 0;
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(room > 0 ? s->p + s->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0) {
        s->len += (size_t)n;
    }
}

/* ---------------- Segments and paths ---------------- */

static int limits_seg_cmp(const char *a, size_t alen, const char *b,
                          size_t blen)
{
    int c = memcmp(a, b, alen < blen ? alen : blen);

    if (c != 0) {
        return c;
    }
    return alen < blen ? -1 : alen > blen;
}

static int limits_node_cmp(const void *a, const void *b)
{
    const struct limits_node *x = *(const struct limits_node *const *)a;
    const struct limits_node *y = *(const struct limits_node *const *)b;

    return limits_seg_cmp(x->seg, x->seglen, y->seg, y->seglen);
}

static int limits_override_cmp(const void *a, const void *b)
{
    const struct limits_override *x = a, *y = b;

    return limits_seg_cmp(x->path, x->len, y->path, y->len);
}

/* The child of `n` named exactly `seg`, by binary search; NULL if none. */
static const struct limits_node *limits_child_exact(const struct limits_node *n,
                                                    const char *seg, size_t len)
{
    size_t lo = 0, hi = n->nchild;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const struct limits_node *c = n->child[mid];
        int cmp = limits_seg_cmp(seg, len, c->seg, c->seglen);

        if (cmp == 0) {
            return c;
        }
        if (cmp < 0) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    return NULL;
}

/* The child matching `seg`: an exact one wins over "*". */
static const struct limits_node *limits_child(const struct limits_node *n,
                                              const char *seg, size_t len)
{
    const struct limits_node *c = limits_child_exact(n, seg, len);

    return c != NULL ? c : limits_child_exact(n, "*", 1);
}

/* Why a segment of the file is no valid segment, or NULL. */
static const char *limits_segment_problem(const char *s, size_t len)
{
    size_t i;

    if (len == 0) {
        return "is empty";
    }
    for (i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];

        if (ch == ':') {
            return "contains ':', the path separator";
        }
        if (ch == '{' || ch == '}') {
            return "contains '{' or '}', which would move the Redis hash tag";
        }
        if (ch < 0x20 || ch == 0x7f) {
            return "contains a control character";
        }
    }
    if (memchr(s, '*', len) != NULL && len != 1) {
        return "mixes '*' with text: a wildcard is the whole segment \"*\"";
    }
    return NULL;
}

/* Splits `path` on ':' into at most LIMITS_MAX_DEPTH segments (start
 * offsets and lengths). NULL, or why the path is refused. */
static const char *limits_split_path(const char *path, size_t len,
                                     size_t *start, size_t *seglen,
                                     unsigned *nseg)
{
    size_t i, from = 0;

    *nseg = 0;
    if (path == NULL || len == 0) {
        return "empty limiter path";
    }
    if (len > LIMITS_MAX_PATH_BYTES) {
        return "limiter path longer than 1024 bytes";
    }
    if (memchr(path, '{', len) != NULL || memchr(path, '}', len) != NULL) {
        return "limiter path may not contain '{' or '}'";
    }
    for (i = 0; i <= len; i++) {
        if (i < len && path[i] != ':') {
            continue;
        }
        if (i == from) {
            return "limiter path has an empty segment";
        }
        if (*nseg == LIMITS_MAX_DEPTH) {
            return "limiter path has more than 32 segments";
        }
        start[*nseg] = from;
        seglen[*nseg] = i - from;
        (*nseg)++;
        from = i + 1;
    }
    return NULL;
}

/* Walks a concrete path of `nseg` segments through the tree. Returns the
 * node of the last segment, or NULL when the walk stops before it. */
static const struct limits_node *
limits_walk_path(const struct limits_tree *t, const char *path,
                 const size_t *start, const size_t *seglen, unsigned nseg)
{
    const struct limits_node *n = &t->root;
    unsigned i;

    for (i = 0; i < nseg && n != NULL; i++) {
        n = limits_child(n, path + start[i], seglen[i]);
    }
    return n;
}

static const struct limits_override *
limits_override_find(const struct limits_tree *t, const char *path, size_t len)
{
    size_t lo = 0, hi = t->nov;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int cmp = limits_seg_cmp(path, len, t->ov[mid].path, t->ov[mid].len);

        if (cmp == 0) {
            return &t->ov[mid];
        }
        if (cmp < 0) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    return NULL;
}

/* ---------------- Freeing ---------------- */

static void limits_node_free(struct limits_node *n)
{
    size_t i;

    for (i = 0; i < n->nchild; i++) {
        limits_node_free(n->child[i]);
        free(n->child[i]);
    }
    free(n->child);
    free(n->limits);
    free(n->seg);
    free(n->pattern);
}

/* ---------------- YAML helpers ---------------- */

/* A scalar key of a mapping, or NULL after reporting a collection key. */
static const yaml_node_t *limits_key(struct limits_loader *ld,
                                     const yaml_node_pair_t *pair,
                                     const char *where)
{
    yaml_node_t *key = yaml_document_get_node(ld->doc, pair->key);

    if (key->type != YAML_SCALAR_NODE) {
        conf_yaml_error(&ld->diag, &key->start_mark,
                        "%s: expected a scalar key, got %s", where,
                        conf_yaml_node_kind(key));
        return NULL;
    }
    return key;
}

static bool limits_key_is(const yaml_node_t *key, const char *name)
{
    return key->data.scalar.length == strlen(name) &&
           memcmp(key->data.scalar.value, name, key->data.scalar.length) == 0;
}

/* Key text of a pair, for sorting a mapping's keys. */
struct limits_keyref {
    const char *s; /* borrowed from the document */
    size_t len;    /* bytes of s */
    size_t index;  /* of the pair in its mapping */
};

static int limits_keyref_cmp(const void *a, const void *b)
{
    const struct limits_keyref *x = a, *y = b;
    int c = limits_seg_cmp(x->s, x->len, y->s, y->len);

    if (c != 0) {
        return c;
    }
    return x->index < y->index ? -1 : x->index > y->index;
}

/* Reports every later duplicate of a scalar key of `map`, and marks it in
 * `dup` (one flag per pair) so the walk skips it. O(n log n), for mappings
 * of any size. LIMITS_OK or LIMITS_ENOMEM. */
static int limits_find_dups(struct limits_loader *ld, const yaml_node_t *map,
                            const char *where, bool *dup)
{
    const yaml_node_pair_t *pairs = map->data.mapping.pairs.start;
    size_t n = (size_t)(map->data.mapping.pairs.top - pairs), m = 0, i, first;
    struct limits_keyref *refs;
    char shown[CONF_YAML_SHOW_SIZE];

    refs = calloc(n > 0 ? n : 1, sizeof(*refs));
    if (refs == NULL) {
        return LIMITS_ENOMEM;
    }
    for (i = 0; i < n; i++) {
        const yaml_node_t *key = yaml_document_get_node(ld->doc, pairs[i].key);

        if (key->type == YAML_SCALAR_NODE) {
            refs[m].s = (const char *)key->data.scalar.value;
            refs[m].len = key->data.scalar.length;
            refs[m++].index = i;
        }
    }
    qsort(refs, m, sizeof(*refs), limits_keyref_cmp);
    for (i = 1, first = 0; i < m; i++) {
        const yaml_node_t *key, *first_key;

        if (limits_seg_cmp(refs[first].s, refs[first].len, refs[i].s,
                           refs[i].len) != 0) {
            first = i; /* a new key: its first occurrence sorts first */
            continue;
        }
        dup[refs[i].index] = true;
        key = yaml_document_get_node(ld->doc, pairs[refs[i].index].key);
        first_key =
            yaml_document_get_node(ld->doc, pairs[refs[first].index].key);
        conf_yaml_show(shown, refs[i].s, refs[i].len);
        conf_yaml_error(&ld->diag, &key->start_mark,
                        "%s: duplicate key '%s' (first at line %zu)", where,
                        shown, first_key->start_mark.line + 1);
    }
    free(refs);
    return LIMITS_OK;
}

/* ---------------- Limits ---------------- */

/* Reads one parameter value into `l`. LIMITS_OK or LIMITS_ERR. */
static int limits_read_param(struct limits_loader *ld, const char *where,
                             const struct limits_param *p,
                             const yaml_node_t *node, struct limits_limit *l)
{
    const char *want = limits_kind_want(p->kind);
    const char *s = conf_yaml_scalar(&ld->diag, node, where, p->name, want);
    char shown[CONF_YAML_SHOW_SIZE], max[32];

    if (s == NULL) {
        return LIMITS_ERR;
    }
    conf_yaml_show(shown, s, strlen(s));
    switch (limits_parse_param(p, s, limits_field(l, p))) {
    case CONF_YAML_NUM_OK:
        return LIMITS_OK;
    case CONF_YAML_NUM_EINVAL:
        conf_yaml_error(&ld->diag, &node->start_mark,
                        "%s: %s: expected %s, got \"%s\"", where, p->name, want,
                        shown);
        break;
    case CONF_YAML_NUM_ERANGE:
        if (p->kind == LIMITS_K_DURATION || p->kind == LIMITS_K_DURATION0) {
            snprintf(max, sizeof(max), "3650d"); /* LIMITS_MAX_DURATION_MS */
        } else {
            limits_fmt_value(max, sizeof(max), p->kind, p->max);
        }
        conf_yaml_error(&ld->diag, &node->start_mark,
                        "%s: %s: \"%s\" is too large (max %s)", where, p->name,
                        shown, max);
        break;
    case CONF_YAML_NUM_EPREC:
        conf_yaml_error(&ld->diag, &node->start_mark,
                        "%s: %s: \"%s\" is finer than %s", where, p->name,
                        shown, p->kind == LIMITS_K_RATE ? "0.000001" : "1 ms");
        break;
    }
    return LIMITS_ERR;
}

/* Reports a limit that breaks a rule spanning its parameters. */
static int limits_check_report(struct limits_loader *ld, const char *where,
                               const yaml_node_t *node,
                               const struct limits_limit *l)
{
    const char *why = limits_check(l);

    if (why == NULL) {
        return LIMITS_OK;
    }
    conf_yaml_error(&ld->diag, &node->start_mark, "%s: %s: %s", where,
                    limits_algo_name(l->algo), why);
    return LIMITS_ERR;
}

/* [max_burst, count, period]: redis-cell's GCRA shorthand. */
static int limits_read_shorthand(struct limits_loader *ld, const char *where,
                                 const yaml_node_t *seq, struct limits_limit *l)
{
    const yaml_node_item_t *it = seq->data.sequence.items.start;
    size_t n = (size_t)(seq->data.sequence.items.top - it), i;
    int rc = LIMITS_OK;

    if (n != LIMITS_ARRAY_SIZE(limits_gcra_params)) {
        conf_yaml_error(&ld->diag, &seq->start_mark,
                        "%s: limits: the shorthand is [max_burst, count, "
                        "period], got %zu values",
                        where, n);
        return LIMITS_ERR;
    }
    memset(l, 0, sizeof(*l));
    l->algo = LIMITS_GCRA;
    for (i = 0; i < n; i++) {
        const yaml_node_t *v = yaml_document_get_node(ld->doc, it[i]);

        if (limits_read_param(ld, where, &limits_gcra_params[i], v, l) !=
            LIMITS_OK) {
            rc = LIMITS_ERR;
        }
    }
    return rc == LIMITS_OK ? limits_check_report(ld, where, seq, l) : rc;
}

/* The algorithm a limit mapping names (gcra when it names none), or NULL
 * after reporting. */
static const struct limits_algo_def *limits_read_algo(struct limits_loader *ld,
                                                      const char *where,
                                                      const yaml_node_t *map)
{
    const yaml_node_pair_t *pair;
    char shown[CONF_YAML_SHOW_SIZE];
    const char *s;
    size_t i;

    for (pair = map->data.mapping.pairs.start;
         pair < map->data.mapping.pairs.top; pair++) {
        const yaml_node_t *key = yaml_document_get_node(ld->doc, pair->key);
        const yaml_node_t *v = yaml_document_get_node(ld->doc, pair->value);

        if (key->type != YAML_SCALAR_NODE || !limits_key_is(key, "algorithm")) {
            continue;
        }
        s = conf_yaml_scalar(&ld->diag, v, where, "algorithm",
                             "an algorithm name");
        if (s == NULL) {
            return NULL;
        }
        for (i = 0; i < LIMITS_ARRAY_SIZE(limits_algos); i++) {
            if (strcmp(s, limits_algos[i].name) == 0) {
                return &limits_algos[i];
            }
        }
        conf_yaml_show(shown, s, strlen(s));
        conf_yaml_error(&ld->diag, &v->start_mark,
                        "%s: algorithm: unknown algorithm \"%s\" (expected "
                        "%s)",
                        where, shown, LIMITS_ALGO_NAMES);
        return NULL;
    }
    return &limits_algos[LIMITS_GCRA];
}

/* Writes "a, b, c" (the parameter names of `def`) into `out`. */
static void limits_param_names(const struct limits_algo_def *def, char *out,
                               size_t len)
{
    size_t i, used = 0;

    out[0] = '\0';
    for (i = 0; i < def->nparams && used < len; i++) {
        int n = snprintf(out + used, len - used, "%s%s", i > 0 ? ", " : "",
                         def->params[i].name);

        used += n > 0 ? (size_t)n : 0;
    }
}

/* One limit mapping: algorithm: and its parameters. */
static int limits_read_limit_map(struct limits_loader *ld, const char *where,
                                 const yaml_node_t *map, struct limits_limit *l)
{
    const struct limits_algo_def *def = limits_read_algo(ld, where, map);
    const yaml_node_t *seen[8] = { NULL };
    const yaml_node_pair_t *pair;
    char shown[CONF_YAML_SHOW_SIZE], names[128];
    int rc = LIMITS_OK;
    size_t i;

    if (def == NULL) {
        return LIMITS_ERR;
    }
    memset(l, 0, sizeof(*l));
    l->algo = (enum limits_algo)(def - limits_algos);
    limits_param_names(def, names, sizeof(names));
    for (pair = map->data.mapping.pairs.start;
         pair < map->data.mapping.pairs.top && !ld->diag.stop; pair++) {
        const yaml_node_t *key = limits_key(ld, pair, where);
        const yaml_node_t *v = yaml_document_get_node(ld->doc, pair->value);
        const struct limits_param *p;

        if (key == NULL) {
            rc = LIMITS_ERR;
            continue;
        }
        if (limits_key_is(key, "algorithm")) {
            p = NULL;
            i = def->nparams; /* its own slot in seen[] */
        } else {
            p = limits_param_find(def, (const char *)key->data.scalar.value,
                                  key->data.scalar.length);
            if (p == NULL) {
                conf_yaml_show(shown, (const char *)key->data.scalar.value,
                               key->data.scalar.length);
                conf_yaml_error(&ld->diag, &key->start_mark,
                                "%s: %s: unknown parameter '%s' (expected %s)",
                                where, def->name, shown, names);
                rc = LIMITS_ERR;
                continue;
            }
            i = (size_t)(p - def->params);
        }
        if (seen[i] != NULL) {
            conf_yaml_error(&ld->diag, &key->start_mark,
                            "%s: duplicate key '%s' (first at line %zu)", where,
                            p != NULL ? p->name : "algorithm",
                            seen[i]->start_mark.line + 1);
            rc = LIMITS_ERR;
            continue;
        }
        seen[i] = key;
        if (p != NULL && limits_read_param(ld, where, p, v, l) != LIMITS_OK) {
            rc = LIMITS_ERR;
        }
    }
    for (i = 0; i < def->nparams; i++) {
        if (seen[i] != NULL) {
            continue;
        }
        if (def->params[i].optional) {
            *limits_field(l, &def->params[i]) = def->params[i].dflt;
            continue;
        }
        conf_yaml_error(&ld->diag, &map->start_mark,
                        "%s: %s: missing parameter '%s'", where, def->name,
                        def->params[i].name);
        rc = LIMITS_ERR;
    }
    return rc == LIMITS_OK ? limits_check_report(ld, where, map, l) : rc;
}

/* The value of limits: into a new array. LIMITS_OK, LIMITS_ERR after
 * reporting (nothing allocated), or LIMITS_ENOMEM. */
static int limits_read_limits(struct limits_loader *ld, const char *where,
                              const yaml_node_t *node,
                              struct limits_limit **out, size_t *nout)
{
    const yaml_node_item_t *it;
    struct limits_limit *ls;
    bool shorthand;
    size_t n, i;
    int rc = LIMITS_OK;

    if (node->type != YAML_SEQUENCE_NODE) {
        conf_yaml_error(&ld->diag, &node->start_mark,
                        "%s: limits: expected [max_burst, count, period] or a "
                        "list of limit mappings, got %s",
                        where, conf_yaml_node_kind(node));
        return LIMITS_ERR;
    }
    it = node->data.sequence.items.start;
    n = (size_t)(node->data.sequence.items.top - it);
    if (n == 0) {
        conf_yaml_error(&ld->diag, &node->start_mark,
                        "%s: limits: expected at least one limit", where);
        return LIMITS_ERR;
    }
    shorthand =
        yaml_document_get_node(ld->doc, it[0])->type == YAML_SCALAR_NODE;
    if (shorthand) {
        n = 1; /* [max_burst, count, period]: one GCRA limit */
    } else if (n > LIMITS_MAX_LIMITS) {
        conf_yaml_error(&ld->diag, &node->start_mark,
                        "%s: limits: at most %d limits per node, got %zu",
                        where, LIMITS_MAX_LIMITS, n);
        return LIMITS_ERR;
    }
    ls = calloc(n, sizeof(*ls));
    if (ls == NULL) {
        return LIMITS_ENOMEM;
    }
    if (shorthand) {
        rc = limits_read_shorthand(ld, where, node, &ls[0]);
    }
    for (i = 0; !shorthand && i < n && !ld->diag.stop; i++) {
        const yaml_node_t *item = yaml_document_get_node(ld->doc, it[i]);

        if (item->type != YAML_MAPPING_NODE) {
            conf_yaml_error(&ld->diag, &item->start_mark,
                            "%s: limits: expected a mapping naming an "
                            "algorithm, got %s",
                            where, conf_yaml_node_kind(item));
            rc = LIMITS_ERR;
        } else if (limits_read_limit_map(ld, where, item, &ls[i]) !=
                   LIMITS_OK) {
            rc = LIMITS_ERR;
        }
    }
    if (rc != LIMITS_OK || ld->diag.stop) {
        free(ls);
        return LIMITS_ERR;
    }
    *out = ls;
    *nout = n;
    return LIMITS_OK;
}

/* ---------------- The tree ---------------- */

static int limits_walk_children(struct limits_loader *ld,
                                struct limits_node *parent,
                                const yaml_node_t *map, bool top);

/* The pattern of the node being walked, or "top level" above the first. */
static const char *limits_where(const struct limits_loader *ld)
{
    return ld->patlen > 0 ? ld->pattern : "top level";
}

/* Numbers node `n` (its limits just read, its pattern `pattern`) as the
 * tree's next rule. LIMITS_OK or LIMITS_ENOMEM. */
static int limits_rule_add(struct limits_tree *t, struct limits_node *n,
                           const char *pattern)
{
    if (t->nrules == t->rules_cap) {
        size_t cap = t->rules_cap > 0 ? 2 * t->rules_cap : 16;
        const struct limits_node **r = realloc(t->rules, cap * sizeof(*r));
        if (r == NULL) {
            return LIMITS_ENOMEM;
        }
        t->rules = r;
        t->rules_cap = cap;
    }
    n->pattern = strdup(pattern);
    if (n->pattern == NULL) {
        return LIMITS_ENOMEM;
    }
    n->rule = t->nrules;
    t->rules[t->nrules++] = n;
    return LIMITS_OK;
}

/* shadow: true or false (YAML's other spellings of a boolean too, in any
 * case: yes/no, on/off). Anything else is an error: a typo must not turn a
 * limit that should refuse into one that never does, or the reverse. */
static void limits_read_shadow(struct limits_loader *ld, struct limits_node *n,
                               const yaml_node_t *v)
{
    static const char *const yes[] = { "true", "yes", "on" };
    static const char *const no[] = { "false", "no", "off" };
    const char *s =
        conf_yaml_scalar(&ld->diag, v, ld->pattern, "shadow", "true or false");
    char shown[CONF_YAML_SHOW_SIZE];
    size_t i;

    if (s == NULL) {
        return;
    }
    for (i = 0; i < LIMITS_ARRAY_SIZE(yes); i++) {
        if (strcasecmp(s, yes[i]) == 0 || strcasecmp(s, no[i]) == 0) {
            n->shadow = strcasecmp(s, yes[i]) == 0;
            return;
        }
    }
    conf_yaml_show(shown, s, strlen(s));
    conf_yaml_error(&ld->diag, &v->start_mark,
                    "%s: shadow: expected true or false, got \"%s\"",
                    ld->pattern, shown);
}

/* The body of one node: limits:, children: and shadow:. */
static int limits_walk_node(struct limits_loader *ld, struct limits_node *n,
                            const yaml_node_t *value)
{
    static const char *const names[3] = { "limits", "children", "shadow" };
    const yaml_node_t *seen[3] = { NULL, NULL, NULL };
    const yaml_node_pair_t *pair;
    char shown[CONF_YAML_SHOW_SIZE];
    int rc;

    if (conf_yaml_is_null(value)) {
        return LIMITS_OK;
    }
    if (value->type != YAML_MAPPING_NODE) {
        conf_yaml_error(
            &ld->diag, &value->start_mark,
            "%s: expected a mapping with limits and/or children, got "
            "%s",
            ld->pattern, conf_yaml_node_kind(value));
        return LIMITS_OK;
    }
    for (pair = value->data.mapping.pairs.start;
         pair < value->data.mapping.pairs.top && !ld->diag.stop; pair++) {
        const yaml_node_t *key = limits_key(ld, pair, ld->pattern);
        const yaml_node_t *v = yaml_document_get_node(ld->doc, pair->value);
        size_t i;

        if (key == NULL) {
            continue;
        }
        for (i = 0; i < 3 && !limits_key_is(key, names[i]); i++) {
        }
        if (i == 3) {
            conf_yaml_show(shown, (const char *)key->data.scalar.value,
                           key->data.scalar.length);
            conf_yaml_error(
                &ld->diag, &key->start_mark,
                "%s: unknown key '%s' (expected limits, children or shadow)",
                ld->pattern, shown);
            continue;
        }
        if (seen[i] != NULL) {
            conf_yaml_error(&ld->diag, &key->start_mark,
                            "%s: duplicate key '%s' (first at line %zu)",
                            ld->pattern, names[i],
                            seen[i]->start_mark.line + 1);
            continue;
        }
        seen[i] = key;
        if (i == 2) {
            limits_read_shadow(ld, n, v);
            continue;
        }
        if (i == 0) {
            rc =
                limits_read_limits(ld, ld->pattern, v, &n->limits, &n->nlimits);
            n->bad = rc == LIMITS_ERR;
            if (rc == LIMITS_OK) {
                rc = limits_rule_add(ld->tree, n, ld->pattern);
            }
        } else {
            rc = limits_walk_children(ld, n, v, false);
        }
        if (rc == LIMITS_ENOMEM) {
            return rc;
        }
    }
    if (n->shadow && seen[0] == NULL) {
        conf_yaml_error(&ld->diag, &seen[2]->start_mark,
                        "%s: shadow: true on a node without limits (it "
                        "applies to the node's own limits, not to its "
                        "children)",
                        ld->pattern);
    }
    return LIMITS_OK;
}

/* Checks the key of a child: a valid segment, not too deep or long. */
static bool limits_segment_ok(struct limits_loader *ld,
                              const struct limits_node *parent,
                              const yaml_node_t *key)
{
    const char *s = (const char *)key->data.scalar.value;
    size_t len = key->data.scalar.length;
    const char *why = limits_segment_problem(s, len);
    char shown[CONF_YAML_SHOW_SIZE];

    conf_yaml_show(shown, s, len);
    if (why != NULL) {
        conf_yaml_error(&ld->diag, &key->start_mark, "%s: segment \"%s\" %s",
                        limits_where(ld), shown, why);
        return false;
    }
    if (ld->patlen + (parent->parent != NULL) + len > LIMITS_MAX_PATH_BYTES) {
        conf_yaml_error(&ld->diag, &key->start_mark,
                        "%s: segment \"%s\" makes a pattern longer than %d "
                        "bytes, which no path can match",
                        limits_where(ld), shown, LIMITS_MAX_PATH_BYTES);
        return false;
    }
    return true;
}

/* Creates a child of `parent` named by `key` (appended to its array). */
static struct limits_node *limits_node_add(struct limits_node *parent,
                                           const yaml_node_t *key)
{
    struct limits_node *c = calloc(1, sizeof(*c));

    if (c == NULL) {
        return NULL;
    }
    c->seglen = key->data.scalar.length;
    c->seg = malloc(c->seglen + 1);
    if (c->seg == NULL) {
        free(c);
        return NULL;
    }
    memcpy(c->seg, key->data.scalar.value, c->seglen);
    c->seg[c->seglen] = '\0';
    c->wildcard = c->seglen == 1 && c->seg[0] == '*';
    c->parent = parent;
    parent->child[parent->nchild++] = c;
    return c;
}

/* Adds one child and walks its body, with the pattern extended. */
static int limits_walk_child(struct limits_loader *ld,
                             struct limits_node *parent, unsigned depth,
                             const yaml_node_t *key, const yaml_node_t *value)
{
    size_t saved = ld->patlen;
    struct limits_node *c;
    int rc;

    if (!limits_segment_ok(ld, parent, key)) {
        return LIMITS_OK;
    }
    if (depth > LIMITS_MAX_DEPTH) {
        conf_yaml_error(&ld->diag, &key->start_mark,
                        "%s: more than %d levels deep (a path has at most %d "
                        "segments)",
                        limits_where(ld), LIMITS_MAX_DEPTH, LIMITS_MAX_DEPTH);
        return LIMITS_OK;
    }
    c = limits_node_add(parent, key);
    if (c == NULL) {
        return LIMITS_ENOMEM;
    }
    if (ld->patlen > 0) {
        ld->pattern[ld->patlen++] = ':';
    }
    memcpy(ld->pattern + ld->patlen, c->seg, c->seglen);
    ld->patlen += c->seglen;
    ld->pattern[ld->patlen] = '\0';
    rc = limits_walk_node(ld, c, value);
    ld->patlen = saved;
    ld->pattern[saved] = '\0';
    return rc;
}

/* Depth of `n` below the root. */
static unsigned limits_depth(const struct limits_node *n)
{
    unsigned d = 0;

    for (; n->parent != NULL; n = n->parent) {
        d++;
    }
    return d;
}

/* A mapping of segment -> node under `parent`. At the top level, the key
 * overrides is skipped (walked later). */
static int limits_walk_children(struct limits_loader *ld,
                                struct limits_node *parent,
                                const yaml_node_t *map, bool top)
{
    const yaml_node_pair_t *pairs = map->data.mapping.pairs.start;
    size_t n = (size_t)(map->data.mapping.pairs.top - pairs), i;
    unsigned depth = limits_depth(parent) + 1;
    bool *dup = NULL;
    int rc = LIMITS_OK;

    if (conf_yaml_is_null(map)) {
        return LIMITS_OK;
    }
    if (map->type != YAML_MAPPING_NODE) {
        conf_yaml_error(
            &ld->diag, &map->start_mark,
            "%s: children: expected a mapping of path segments, got "
            "%s",
            limits_where(ld), conf_yaml_node_kind(map));
        return LIMITS_OK;
    }
    if (n > LIMITS_MAX_NODES - ld->nnodes) {
        conf_yaml_error(&ld->diag, &map->start_mark, "more than %d nodes",
                        LIMITS_MAX_NODES);
        ld->diag.stop = true;
        return LIMITS_OK;
    }
    dup = calloc(n > 0 ? n : 1, sizeof(*dup));
    parent->child = calloc(n > 0 ? n : 1, sizeof(*parent->child));
    if (dup == NULL || parent->child == NULL ||
        limits_find_dups(ld, map, limits_where(ld), dup) != LIMITS_OK) {
        rc = LIMITS_ENOMEM;
        goto done;
    }
    ld->nnodes += n;
    for (i = 0; i < n && !ld->diag.stop && rc == LIMITS_OK; i++) {
        const yaml_node_t *key = limits_key(ld, &pairs[i], limits_where(ld));

        if (key == NULL || dup[i] || (top && limits_key_is(key, "overrides"))) {
            continue;
        }
        rc = limits_walk_child(ld, parent, depth, key,
                               yaml_document_get_node(ld->doc, pairs[i].value));
    }
    qsort(parent->child, parent->nchild, sizeof(*parent->child),
          limits_node_cmp);

done:
    free(dup);
    return rc;
}

/* ---------------- Overrides ---------------- */

/* What an override may name, and what it did. */
struct limits_ov_state {
    const char *where;              /* "override <path>" */
    const struct limits_node *n;    /* the node it overrides */
    struct limits_override *ov;     /* being filled */
    const yaml_node_t *kind_key;    /* key that chose ov->kind */
    struct limits_limit work;       /* LIMITS_OV_PARAMS: the edited limit */
    const yaml_node_t *seen[3 + 8]; /* factor, limits, unlimited, params */
};

static const char *limits_ov_kind_name(enum limits_ov_kind kind)
{
    switch (kind) {
    case LIMITS_OV_FACTOR:
        return "factor";
    case LIMITS_OV_LIMITS:
        return "limits";
    case LIMITS_OV_UNLIMITED:
        return "unlimited";
    case LIMITS_OV_PARAMS:
        return "parameters";
    case LIMITS_OV_NONE:
        break;
    }
    return "nothing";
}

/* factor: F, applied to every limit of the node. */
static int limits_ov_factor(struct limits_loader *ld,
                            struct limits_ov_state *st, const yaml_node_t *v)
{
    const char *s = conf_yaml_scalar(&ld->diag, v, st->where, "factor",
                                     "a positive number");
    char shown[CONF_YAML_SHOW_SIZE];
    const char *why = NULL;
    enum conf_yaml_num num;
    size_t i;

    if (s == NULL) {
        return LIMITS_ERR;
    }
    conf_yaml_show(shown, s, strlen(s));
    num = conf_yaml_parse_decimal(s, strlen(s), 6, &st->ov->factor_micro);
    if (num == CONF_YAML_NUM_OK && st->ov->factor_micro == 0) {
        num = CONF_YAML_NUM_EINVAL;
    }
    if (num == CONF_YAML_NUM_OK &&
        st->ov->factor_micro > LIMITS_MAX_FACTOR_MICRO) {
        num = CONF_YAML_NUM_ERANGE;
    }
    if (num != CONF_YAML_NUM_OK) {
        conf_yaml_error(
            &ld->diag, &v->start_mark,
            num == CONF_YAML_NUM_ERANGE
                ? "%s: factor: \"%s\" is too large (max 1000000)"
            : num == CONF_YAML_NUM_EPREC
                ? "%s: factor: \"%s\" is finer than 0.000001"
                : "%s: factor: expected a positive number, got \"%s\"",
            st->where, shown);
        return LIMITS_ERR;
    }
    st->ov->limits = calloc(st->n->nlimits, sizeof(*st->ov->limits));
    if (st->ov->limits == NULL) {
        return LIMITS_ENOMEM;
    }
    st->ov->nlimits = st->n->nlimits;
    for (i = 0; i < st->n->nlimits && why == NULL; i++) {
        if (limits_scale(&st->n->limits[i], st->ov->factor_micro,
                         &st->ov->limits[i], &why) != LIMITS_OK) {
            conf_yaml_error(&ld->diag, &v->start_mark,
                            "%s: factor: %s makes %s invalid: %s", st->where,
                            shown, limits_algo_name(st->n->limits[i].algo),
                            why);
        }
    }
    return why == NULL ? LIMITS_OK : LIMITS_ERR;
}

/* unlimited: true. */
static int limits_ov_unlimited(struct limits_loader *ld,
                               struct limits_ov_state *st, const yaml_node_t *v)
{
    const char *s =
        conf_yaml_scalar(&ld->diag, v, st->where, "unlimited", "true");
    char shown[CONF_YAML_SHOW_SIZE];

    if (s == NULL) {
        return LIMITS_ERR;
    }
    if (strcasecmp(s, "true") != 0) {
        conf_yaml_show(shown, s, strlen(s));
        conf_yaml_error(&ld->diag, &v->start_mark,
                        "%s: unlimited: expected true, got \"%s\" (remove the "
                        "override instead)",
                        st->where, shown);
        return LIMITS_ERR;
    }
    return LIMITS_OK;
}

/* Classifies one key of an override mapping: the kind it selects, and its
 * slot in st->seen (or -1 after reporting an unknown key). */
static int limits_ov_classify(struct limits_loader *ld,
                              struct limits_ov_state *st,
                              const yaml_node_t *key, enum limits_ov_kind *kind,
                              const struct limits_param **param)
{
    static const enum limits_ov_kind fixed[] = { LIMITS_OV_FACTOR,
                                                 LIMITS_OV_LIMITS,
                                                 LIMITS_OV_UNLIMITED };
    const char *s = (const char *)key->data.scalar.value;
    size_t len = key->data.scalar.length, i;
    const struct limits_algo_def *def = limits_def(st->n->limits[0].algo);
    char shown[CONF_YAML_SHOW_SIZE], names[128];

    *param = NULL;
    for (i = 0; i < LIMITS_ARRAY_SIZE(fixed); i++) {
        if (limits_key_is(key, limits_ov_kind_name(fixed[i]))) {
            *kind = fixed[i];
            return (int)i;
        }
    }
    *kind = LIMITS_OV_PARAMS;
    *param = limits_param_find(def, s, len);
    if (*param != NULL && st->n->nlimits == 1) {
        return (int)(LIMITS_ARRAY_SIZE(fixed) + (size_t)(*param - def->params));
    }
    conf_yaml_show(shown, s, len);
    for (i = 0; i < st->n->nlimits; i++) {
        if (limits_param_find(limits_def(st->n->limits[i].algo), s, len)) {
            conf_yaml_error(&ld->diag, &key->start_mark,
                            "%s: '%s': parameters need a node with exactly one "
                            "limit, this one has %zu (use limits:)",
                            st->where, shown, st->n->nlimits);
            return -1;
        }
    }
    if (st->n->nlimits > 1) {
        conf_yaml_error(&ld->diag, &key->start_mark,
                        "%s: unknown key '%s' (expected factor, limits or "
                        "unlimited)",
                        st->where, shown);
        return -1;
    }
    limits_param_names(def, names, sizeof(names));
    conf_yaml_error(&ld->diag, &key->start_mark,
                    "%s: unknown key '%s' (expected factor, limits, unlimited "
                    "or a parameter of %s: %s)",
                    st->where, shown, def->name, names);
    return -1;
}

/* One key: value of an override mapping. */
static int limits_ov_pair(struct limits_loader *ld, struct limits_ov_state *st,
                          const yaml_node_pair_t *pair)
{
    const yaml_node_t *key = limits_key(ld, pair, st->where);
    const yaml_node_t *v = yaml_document_get_node(ld->doc, pair->value);
    const struct limits_param *p;
    enum limits_ov_kind kind;
    int slot;

    if (key == NULL) {
        return LIMITS_ERR;
    }
    slot = limits_ov_classify(ld, st, key, &kind, &p);
    if (slot < 0) {
        return LIMITS_ERR;
    }
    if (st->seen[slot] != NULL) {
        conf_yaml_error(&ld->diag, &key->start_mark,
                        "%s: duplicate key '%s' (first at line %zu)", st->where,
                        (const char *)key->data.scalar.value,
                        st->seen[slot]->start_mark.line + 1);
        return LIMITS_ERR;
    }
    st->seen[slot] = key;
    if (st->ov->kind != LIMITS_OV_NONE && st->ov->kind != kind) {
        conf_yaml_error(&ld->diag, &key->start_mark,
                        "%s: '%s' cannot be combined with '%s'", st->where,
                        (const char *)key->data.scalar.value,
                        (const char *)st->kind_key->data.scalar.value);
        return LIMITS_ERR;
    }
    st->ov->kind = kind;
    st->kind_key = key;
    switch (kind) {
    case LIMITS_OV_FACTOR:
        return limits_ov_factor(ld, st, v);
    case LIMITS_OV_LIMITS:
        return limits_read_limits(ld, st->where, v, &st->ov->limits,
                                  &st->ov->nlimits);
    case LIMITS_OV_UNLIMITED:
        return limits_ov_unlimited(ld, st, v);
    case LIMITS_OV_PARAMS:
        return limits_read_param(ld, st->where, p, v, &st->work);
    case LIMITS_OV_NONE:
        break;
    }
    return LIMITS_ERR;
}

/* The value of one override: a mapping, or inf. */
static int limits_ov_value(struct limits_loader *ld, struct limits_ov_state *st,
                           const yaml_node_t *v)
{
    const yaml_node_pair_t *pair;
    int rc = LIMITS_OK;

    if (v->type == YAML_SCALAR_NODE &&
        limits_is_inf((const char *)v->data.scalar.value)) {
        st->ov->kind = LIMITS_OV_UNLIMITED;
        return LIMITS_OK;
    }
    if (v->type != YAML_MAPPING_NODE ||
        v->data.mapping.pairs.start == v->data.mapping.pairs.top) {
        conf_yaml_error(&ld->diag, &v->start_mark,
                        "%s: expected a mapping with factor, limits, unlimited "
                        "or parameters, or inf, got %s",
                        st->where,
                        v->type == YAML_MAPPING_NODE ? "an empty mapping"
                                                     : conf_yaml_node_kind(v));
        return LIMITS_ERR;
    }
    st->work = st->n->limits[0];
    for (pair = v->data.mapping.pairs.start;
         pair < v->data.mapping.pairs.top && !ld->diag.stop; pair++) {
        int prc = limits_ov_pair(ld, st, pair);

        if (prc == LIMITS_ENOMEM) {
            return prc;
        }
        rc |= prc;
    }
    if (rc != LIMITS_OK || st->ov->kind != LIMITS_OV_PARAMS) {
        return rc != LIMITS_OK ? LIMITS_ERR : LIMITS_OK;
    }
    if (limits_check_report(ld, st->where, v, &st->work) != LIMITS_OK) {
        return LIMITS_ERR;
    }
    st->ov->limits = malloc(sizeof(*st->ov->limits));
    if (st->ov->limits == NULL) {
        return LIMITS_ENOMEM;
    }
    st->ov->limits[0] = st->work;
    st->ov->nlimits = 1;
    return LIMITS_OK;
}

/* Checks the path of an override and finds its node. NULL after
 * reporting, or when the node's own limits were refused (reported
 * already). */
static const struct limits_node *limits_ov_node(struct limits_loader *ld,
                                                const yaml_node_t *key)
{
    const char *s = (const char *)key->data.scalar.value;
    size_t len = key->data.scalar.length, i;
    size_t start[LIMITS_MAX_DEPTH], seglen[LIMITS_MAX_DEPTH];
    const struct limits_node *n = NULL;
    char shown[CONF_YAML_SHOW_SIZE];
    const char *why;
    unsigned nseg;

    why = limits_split_path(s, len, start, seglen, &nseg);
    for (i = 0; why == NULL && i < len; i++) {
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) {
            why = "path contains a control character";
        }
    }
    for (i = 0; why == NULL && i < nseg; i++) {
        if (seglen[i] == 1 && s[start[i]] == '*') {
            why = "an override names a concrete path, without '*' "
                  "segments";
        }
    }
    if (why == NULL) {
        n = limits_walk_path(ld->tree, s, start, seglen, nseg);
        if (n != NULL && n->bad) {
            return NULL;
        }
        if (n == NULL || n->nlimits == 0) {
            why = "matches no node with limits";
        }
    }
    if (why != NULL) {
        conf_yaml_show(shown, s, len);
        conf_yaml_error(&ld->diag, &key->start_mark, "overrides: \"%s\": %s",
                        shown, why);
        return NULL;
    }
    return n;
}

/* One entry of overrides:, appended to the tree when valid. */
static int limits_ov_entry(struct limits_loader *ld,
                           const yaml_node_pair_t *pair)
{
    struct limits_override *ov = &ld->tree->ov[ld->tree->nov];
    const yaml_node_t *key = limits_key(ld, pair, "overrides");
    struct limits_ov_state st = { 0 };
    char where[LIMITS_WHERE_SIZE];
    int rc;

    if (key == NULL) {
        return LIMITS_OK;
    }
    st.n = limits_ov_node(ld, key);
    if (st.n == NULL) {
        return LIMITS_OK;
    }
    memset(ov, 0, sizeof(*ov));
    snprintf(where, sizeof(where), "override %s",
             (const char *)key->data.scalar.value);
    st.where = where;
    st.ov = ov;
    rc = limits_ov_value(ld, &st, yaml_document_get_node(ld->doc, pair->value));
    if (rc != LIMITS_OK) {
        free(ov->limits);
        return rc == LIMITS_ENOMEM ? rc : LIMITS_OK;
    }
    ov->len = key->data.scalar.length;
    ov->path = malloc(ov->len + 1);
    if (ov->path == NULL) {
        free(ov->limits);
        return LIMITS_ENOMEM;
    }
    memcpy(ov->path, key->data.scalar.value, ov->len + 1);
    ld->tree->nov++;
    return LIMITS_OK;
}

/* overrides: a mapping of concrete path -> override. */
static int limits_walk_overrides(struct limits_loader *ld,
                                 const yaml_node_t *map)
{
    const yaml_node_pair_t *pairs = map->data.mapping.pairs.start;
    size_t n = (size_t)(map->data.mapping.pairs.top - pairs), i;
    bool *dup;
    int rc = LIMITS_OK;

    if (conf_yaml_is_null(map)) {
        return LIMITS_OK;
    }
    if (map->type != YAML_MAPPING_NODE) {
        conf_yaml_error(&ld->diag, &map->start_mark,
                        "overrides: expected a mapping of paths, got %s",
                        conf_yaml_node_kind(map));
        return LIMITS_OK;
    }
    if (n > LIMITS_MAX_OVERRIDES) {
        conf_yaml_error(&ld->diag, &map->start_mark,
                        "overrides: more than %d entries",
                        LIMITS_MAX_OVERRIDES);
        return LIMITS_OK;
    }
    dup = calloc(n > 0 ? n : 1, sizeof(*dup));
    ld->tree->ov = calloc(n > 0 ? n : 1, sizeof(*ld->tree->ov));
    if (dup == NULL || ld->tree->ov == NULL ||
        limits_find_dups(ld, map, "overrides", dup) != LIMITS_OK) {
        free(dup);
        return LIMITS_ENOMEM;
    }
    for (i = 0; i < n && !ld->diag.stop && rc == LIMITS_OK; i++) {
        if (!dup[i]) {
            rc = limits_ov_entry(ld, &pairs[i]);
        }
    }
    free(dup);
    qsort(ld->tree->ov, ld->tree->nov, sizeof(*ld->tree->ov),
          limits_override_cmp);
    return rc;
}

/* The top-level mapping: segments, then overrides. */
static int limits_walk_root(struct limits_loader *ld, const yaml_node_t *root)
{
    static const yaml_mark_t start = { 0 };
    const yaml_node_pair_t *pair;
    const yaml_node_t *ov = NULL;
    int rc;

    if (root == NULL || conf_yaml_is_null(root)) {
        conf_yaml_error(&ld->diag, root != NULL ? &root->start_mark : &start,
                        "empty file: expected a mapping of path segments");
        return LIMITS_OK;
    }
    if (root->type != YAML_MAPPING_NODE) {
        conf_yaml_error(
            &ld->diag, &root->start_mark,
            "top level: expected a mapping of path segments, got %s",
            conf_yaml_node_kind(root));
        return LIMITS_OK;
    }
    rc = limits_walk_children(ld, &ld->tree->root, root, true);
    if (rc != LIMITS_OK || ld->diag.stop) {
        return rc;
    }
    for (pair = root->data.mapping.pairs.start;
         pair < root->data.mapping.pairs.top; pair++) {
        const yaml_node_t *key = yaml_document_get_node(ld->doc, pair->key);

        if (key->type == YAML_SCALAR_NODE && limits_key_is(key, "overrides")) {
            ov = yaml_document_get_node(ld->doc, pair->value);
            break; /* a second one was reported as a duplicate */
        }
    }
    return ov != NULL ? limits_walk_overrides(ld, ov) : LIMITS_OK;
}

/* ---------------- Loading ---------------- */

/* Refuses, from libyaml's events and before any document is built: syntax
 * errors, aliases, a second document, more than LIMITS_MAX_YAML_NODES nodes
 * and nesting deeper than LIMITS_MAX_YAML_DEPTH. */
static int limits_prescan(struct limits_loader *ld)
{
    yaml_parser_t parser;
    yaml_event_t ev;
    size_t nodes = 0, depth = 0, docs = 0;
    bool done = false;
    int rc = LIMITS_OK;

    if (!yaml_parser_initialize(&parser)) {
        conf_yaml_error(&ld->diag, NULL, "out of memory");
        return LIMITS_ENOMEM;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)ld->text,
                                 ld->textlen);
    while (!done && !ld->diag.stop) {
        if (!yaml_parser_parse(&parser, &ev)) {
            rc = conf_yaml_syntax_error(&ld->diag, &parser, ld->text,
                                        ld->textlen);
            break;
        }
        switch (ev.type) {
        case YAML_STREAM_END_EVENT:
            done = true;
            break;
        case YAML_DOCUMENT_START_EVENT:
            if (++docs > 1) {
                conf_yaml_error(&ld->diag, &ev.start_mark,
                                "only one YAML document is allowed");
                done = true;
            }
            break;
        case YAML_ALIAS_EVENT:
            conf_yaml_error(&ld->diag, &ev.start_mark,
                            "YAML aliases are not supported (*%s): write the "
                            "tree out in full",
                            (const char *)ev.data.alias.anchor);
            break;
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT:
            if (++depth > LIMITS_MAX_YAML_DEPTH) {
                conf_yaml_error(&ld->diag, &ev.start_mark,
                                "YAML nesting deeper than %d levels",
                                LIMITS_MAX_YAML_DEPTH);
                done = true;
            }
            nodes++;
            break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT:
            depth--;
            break;
        case YAML_SCALAR_EVENT:
            nodes++;
            break;
        default:
            break;
        }
        if (nodes > LIMITS_MAX_YAML_NODES && !done) {
            conf_yaml_error(&ld->diag, &ev.start_mark,
                            "more than %d YAML nodes", LIMITS_MAX_YAML_NODES);
            done = true;
        }
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&parser);
    return rc;
}

/* Builds the document (already known to be sane) and walks it into
 * ld->tree. LIMITS_OK (errors counted in ld) or LIMITS_ENOMEM. */
static int limits_build(struct limits_loader *ld)
{
    yaml_parser_t parser;
    yaml_document_t doc;
    int rc;

    if (!yaml_parser_initialize(&parser)) {
        conf_yaml_error(&ld->diag, NULL, "out of memory");
        return LIMITS_ENOMEM;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)ld->text,
                                 ld->textlen);
    if (!yaml_parser_load(&parser, &doc)) {
        rc = conf_yaml_syntax_error(&ld->diag, &parser, ld->text, ld->textlen);
        yaml_parser_delete(&parser);
        return rc == LIMITS_ENOMEM ? rc : LIMITS_OK;
    }
    ld->doc = &doc;
    rc = limits_walk_root(ld, yaml_document_get_root_node(&doc));
    if (rc == LIMITS_ENOMEM) {
        conf_yaml_error(&ld->diag, NULL, "out of memory");
    }
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    return rc;
}

static int limits_load_buffer(struct limits_loader *ld, const char *text,
                              size_t len, struct limits_tree **out)
{
    int rc;

    ld->text = text;
    ld->textlen = len;
    if (len > LIMITS_MAX_FILE_BYTES) {
        conf_yaml_error(&ld->diag, NULL, "file larger than %d bytes",
                        LIMITS_MAX_FILE_BYTES);
        return LIMITS_ERR;
    }
    rc = limits_prescan(ld);
    if (rc != LIMITS_OK || ld->diag.nerrors > 0) {
        return rc == LIMITS_ENOMEM ? rc : LIMITS_ERR;
    }
    ld->tree = calloc(1, sizeof(*ld->tree));
    if (ld->tree == NULL) {
        conf_yaml_error(&ld->diag, NULL, "out of memory");
        return LIMITS_ENOMEM;
    }
    sha256_hex(text, len, ld->tree->sha256);
    rc = limits_build(ld);
    if (rc != LIMITS_OK || ld->diag.nerrors > 0) {
        limits_free(ld->tree);
        ld->tree = NULL;
        return rc == LIMITS_ENOMEM ? rc : LIMITS_ERR;
    }
    *out = ld->tree;
    return LIMITS_OK;
}

static void limits_loader_init(struct limits_loader *ld, const char *name,
                               char *err, size_t errlen)
{
    memset(ld, 0, sizeof(*ld));
    conf_yaml_diag_init(&ld->diag, name, err, errlen, LIMITS_MAX_ERRORS);
}

/* ---------------- Public API: loading ---------------- */

int limits_load_file(const char *path, struct limits_tree **out, char *err,
                     size_t errlen)
{
    struct limits_loader ld;
    char *text = NULL;
    size_t len = 0;
    int rc;

    limits_loader_init(&ld, path, err, errlen);
    rc =
        conf_yaml_read_file(&ld.diag, path, LIMITS_MAX_FILE_BYTES, &text, &len);
    if (rc != LIMITS_OK) {
        return rc;
    }
    rc = limits_load_buffer(&ld, text, len, out);
    free(text);
    return rc;
}

int limits_load_string(const char *name, const char *text,
                       struct limits_tree **out, char *err, size_t errlen)
{
    struct limits_loader ld;

    limits_loader_init(&ld, name, err, errlen);
    if (text == NULL) {
        text = "";
    }
    return limits_load_buffer(&ld, text, strlen(text), out);
}

void limits_free(struct limits_tree *t)
{
    size_t i;

    if (t == NULL) {
        return;
    }
    limits_node_free(&t->root);
    free(t->rules);
    for (i = 0; i < t->nov; i++) {
        free(t->ov[i].path);
        free(t->ov[i].limits);
    }
    free(t->ov);
    free(t);
}

size_t limits_rule_count(const struct limits_tree *t)
{
    return t != NULL ? t->nrules : 0;
}

size_t limits_override_count(const struct limits_tree *t)
{
    return t != NULL ? t->nov : 0;
}

const char *limits_rule_pattern(const struct limits_tree *t, size_t i)
{
    return t != NULL && i < t->nrules ? t->rules[i]->pattern : NULL;
}

const char *limits_sha256(const struct limits_tree *t)
{
    return t != NULL ? t->sha256 : NULL;
}

/* ---------------- Public API: limits ---------------- */

size_t limits_params(const struct limits_limit *l,
                     int64_t out[LIMITS_MAX_PARAMS])
{
    const struct limits_algo_def *def = limits_def(l->algo);
    size_t i;

    for (i = 0; i < def->nparams && i < LIMITS_MAX_PARAMS; i++) {
        out[i] = limits_get(l, &def->params[i]);
    }
    return i;
}

const char *limits_algo_name(enum limits_algo algo)
{
    return limits_def(algo)->name;
}

int limits_format(const struct limits_limit *l, char *out, size_t outlen)
{
    const struct limits_algo_def *def = limits_def(l->algo);
    struct limits_str str = { .p = out, .size = outlen };
    char value[48];
    size_t i;

    limits_str_add(&str, "%s(", def->name);
    for (i = 0; i < def->nparams; i++) {
        limits_fmt_value(value, sizeof(value), def->params[i].kind,
                         limits_get(l, &def->params[i]));
        limits_str_add(&str, "%s%s=%s", i > 0 ? "," : "", def->params[i].name,
                       value);
    }
    limits_str_add(&str, ")");
    return (int)str.len;
}

int limits_scale(const struct limits_limit *in, uint64_t factor_micro,
                 struct limits_limit *out, const char **err)
{
    const struct limits_algo_def *def = limits_def(in->algo);
    struct limits_limit l = *in;
    const char *why;
    size_t i;

    if (def == &limits_unknown_algo) {
        why = "unknown algorithm";
    } else if (factor_micro == 0 || factor_micro > LIMITS_MAX_FACTOR_MICRO) {
        why = "factor out of range (0.000001 to 1000000)";
    } else {
        for (i = 0; i < def->nparams; i++) {
            limits_scale_param(&l, &def->params[i], factor_micro);
        }
        why = limits_check(&l);
    }
    if (why != NULL) {
        if (err != NULL) {
            *err = why;
        }
        return LIMITS_ERR;
    }
    *out = l;
    return LIMITS_OK;
}

/* ---------------- Public API: run-time overrides ---------------- */

/* A word of a run-time override equals `name`, ignoring case. */
static bool limits_word_is(const char *w, size_t len, const char *name)
{
    return strlen(name) == len && strncasecmp(w, name, len) == 0;
}

int limits_runtime_parse(const struct limits_limit *base, size_t nbase,
                         int argc, const char *const *argv, const size_t *lens,
                         struct limits_runtime *out, char *err, size_t errlen)
{
    char word[64];
    const char *why;
    uint64_t factor = 0;
    size_t i;
    int k;

    memset(out, 0, sizeof(*out));
    if (argc < 1) {
        snprintf(err, errlen,
                 "an override needs FACTOR f, UNLIMITED or "
                 "parameters with values");
        return LIMITS_ERR;
    }
    if (argc == 1 && (limits_word_is(argv[0], lens[0], "unlimited") ||
                      limits_word_is(argv[0], lens[0], "inf"))) {
        out->unlimited = true;
        return LIMITS_OK;
    }
    if (limits_word_is(argv[0], lens[0], "factor")) {
        if (argc != 2 || lens[1] >= sizeof(word)) {
            snprintf(err, errlen, "FACTOR takes one number");
            return LIMITS_ERR;
        }
        memcpy(word, argv[1], lens[1]);
        word[lens[1]] = '\0';
        if (conf_yaml_parse_decimal(word, lens[1], 6, &factor) !=
                CONF_YAML_NUM_OK ||
            factor == 0 || factor > LIMITS_MAX_FACTOR_MICRO) {
            snprintf(err, errlen,
                     "factor must be a number from 0.000001 to 1000000");
            return LIMITS_ERR;
        }
        for (i = 0; i < nbase; i++) {
            if (limits_scale(&base[i], factor, &out->limits[i], &why) !=
                LIMITS_OK) {
                snprintf(err, errlen, "factor %s makes %s invalid: %s", word,
                         limits_algo_name(base[i].algo), why);
                return LIMITS_ERR;
            }
        }
        out->nlimits = nbase;
        return LIMITS_OK;
    }
    if (nbase != 1) {
        snprintf(err, errlen,
                 "parameters need a node with exactly one limit, this one "
                 "has %zu (use FACTOR or UNLIMITED)",
                 nbase);
        return LIMITS_ERR;
    }
    if (argc % 2 != 0) {
        snprintf(err, errlen, "parameters come in pairs: <name> <value>");
        return LIMITS_ERR;
    }
    out->limits[0] = base[0];
    out->nlimits = 1;
    for (k = 0; k < argc; k += 2) {
        const struct limits_algo_def *def = limits_def(base[0].algo);
        const struct limits_param *p = NULL;
        int64_t v;
        char names[128];

        for (i = 0; i < def->nparams && p == NULL; i++) {
            if (limits_word_is(argv[k], lens[k], def->params[i].name)) {
                p = &def->params[i];
            }
        }
        if (p == NULL) {
            limits_param_names(def, names, sizeof(names));
            snprintf(
                err, errlen, "unknown parameter '%.*s' of %s (expected %s)",
                (int)(lens[k] > 32 ? 32 : lens[k]), argv[k], def->name, names);
            return LIMITS_ERR;
        }
        if (lens[k + 1] >= sizeof(word)) {
            snprintf(err, errlen, "%s: value too long", p->name);
            return LIMITS_ERR;
        }
        memcpy(word, argv[k + 1], lens[k + 1]);
        word[lens[k + 1]] = '\0';
        if (limits_parse_param(p, word, &v) != CONF_YAML_NUM_OK) {
            snprintf(err, errlen, "%s: expected %s, got \"%s\"", p->name,
                     limits_kind_want(p->kind), word);
            return LIMITS_ERR;
        }
        *limits_field(&out->limits[0], p) = v;
    }
    why = limits_check(&out->limits[0]);
    if (why != NULL) {
        snprintf(err, errlen, "%s: %s", limits_algo_name(out->limits[0].algo),
                 why);
        return LIMITS_ERR;
    }
    return LIMITS_OK;
}

int limits_runtime_parse_text(const struct limits_limit *base, size_t nbase,
                              const char *text, size_t len,
                              struct limits_runtime *out, char *err,
                              size_t errlen)
{
    const char *argv[2 * 8 + 2];
    size_t lens[2 * 8 + 2], i = 0;
    int argc = 0;

    while (i < len) {
        size_t j = i;
        while (j < len && text[j] != ' ') {
            j++;
        }
        if (j > i) {
            if (argc == (int)(sizeof(argv) / sizeof(argv[0]))) {
                snprintf(err, errlen, "too many words in the override");
                return LIMITS_ERR;
            }
            argv[argc] = text + i;
            lens[argc++] = j - i;
        }
        i = j + 1;
    }
    return limits_runtime_parse(base, nbase, argc, argv, lens, out, err,
                                errlen);
}

/* ---------------- Public API: resolution ---------------- */

/* Why a key prefix is refused, or NULL. */
static const char *limits_prefix_problem(const char *prefix, size_t len)
{
    if (len > LIMITS_MAX_PREFIX_BYTES) {
        return "key prefix longer than 128 bytes";
    }
    if (memchr(prefix, '{', len) != NULL || memchr(prefix, '}', len) != NULL) {
        return "key prefix may not contain '{' or '}'";
    }
    return NULL;
}

/* Fills the key base of `lv` at `*used` in out->text:
 * "<prefix>{<tag>}<rest>", the tag being path[0..tag_end) and the rest
 * path[tag_end..path_len). */
static void limits_level_key(struct limits_levels *out, struct limits_level *lv,
                             const char *prefix, size_t prefix_len,
                             size_t tag_end, size_t *used)
{
    char *k = out->text + *used;
    size_t n = 0;

    memcpy(k, prefix, prefix_len);
    n += prefix_len;
    k[n++] = '{';
    memcpy(k + n, out->text, tag_end);
    n += tag_end;
    k[n++] = '}';
    memcpy(k + n, out->text + tag_end, lv->path_len - tag_end);
    n += lv->path_len - tag_end;
    k[n] = '\0';
    lv->key = k;
    lv->key_len = n;
    lv->tag = k + prefix_len + 1;
    lv->tag_len = tag_end;
    *used += n + 1;
}

/* Sets the limits of `lv` from its node or from an override of its path. */
static void limits_level_limits(const struct limits_tree *t,
                                const struct limits_node *n,
                                struct limits_level *lv)
{
    const struct limits_override *ov =
        limits_override_find(t, lv->path, lv->path_len);

    lv->limits = n->limits;
    lv->nlimits = n->nlimits;
    lv->base = n->limits;
    lv->nbase = n->nlimits;
    lv->overridden = ov != NULL;
    lv->shadow = n->shadow;
    lv->unlimited = ov != NULL && ov->kind == LIMITS_OV_UNLIMITED;
    if (ov != NULL) {
        lv->limits = ov->limits;
        lv->nlimits = ov->nlimits;
    }
}

int limits_resolve(const struct limits_tree *t, const char *path,
                   size_t path_len, const char *prefix, size_t prefix_len,
                   struct limits_levels *out, const char **err)
{
    size_t start[LIMITS_MAX_DEPTH], seglen[LIMITS_MAX_DEPTH];
    size_t used, tag_end = 0; /* 0: no "*" matched yet */
    const struct limits_node *n = t != NULL ? &t->root : NULL;
    unsigned i, nseg, id_group = 0;
    bool have_id_group = false;
    const char *why;

    out->n = 0;
    out->ngroups = 0;
    out->nsegments = 0;
    out->matched = 0;
    out->text_len = 0;
    out->text = (char *)&out->level[LIMITS_MAX_DEPTH];
    if (prefix == NULL) {
        prefix = LIMITS_DEFAULT_PREFIX;
        prefix_len = strlen(prefix);
    }
    why = limits_prefix_problem(prefix, prefix_len);
    if (why == NULL) {
        why = limits_split_path(path, path_len, start, seglen, &nseg);
    }
    if (why != NULL) {
        if (err != NULL) {
            *err = why;
        }
        return LIMITS_ERR;
    }
    memcpy(out->text, path, path_len);
    out->text[path_len] = '\0';
    used = path_len + 1;
    out->nsegments = nseg;
    for (i = 0; i < nseg && n != NULL; i++) {
        struct limits_level *lv;

        n = limits_child(n, path + start[i], seglen[i]);
        if (n == NULL) {
            break;
        }
        out->matched = i + 1;
        if (n->wildcard && tag_end == 0) {
            tag_end = start[i] + seglen[i];
        }
        if (n->nlimits == 0) {
            continue;
        }
        lv = &out->level[out->n++];
        memset(lv, 0, sizeof(*lv));
        lv->depth = i + 1;
        lv->rule = n->rule;
        lv->wildcard = n->wildcard;
        lv->path = out->text;
        lv->path_len = start[i] + seglen[i];
        limits_level_limits(t, n, lv);
        /* Above the first "*": a tag of its own. Below: the identity's. */
        limits_level_key(out, lv, prefix, prefix_len,
                         tag_end > 0 ? tag_end : lv->path_len, &used);
        if (tag_end == 0) {
            lv->group = out->ngroups++;
        } else {
            if (!have_id_group) {
                id_group = out->ngroups++;
                have_id_group = true;
            }
            lv->group = id_group;
        }
    }
    out->text_len = used;
    return LIMITS_OK;
}

struct limits_levels *limits_levels_copy(const struct limits_levels *src)
{
    size_t head =
        offsetof(struct limits_levels, level) + src->n * sizeof(src->level[0]);
    struct limits_levels *c = malloc(head + src->text_len);
    size_t i;

    if (c == NULL) {
        return NULL;
    }
    /* The levels in use, then their text right after them: small enough
     * for the allocator's per-thread cache, which a request's copy of
     * every level's room was not. */
    memcpy(c, src, head);
    c->text = (char *)c + head;
    memcpy(c->text, src->text, src->text_len);
    for (i = 0; i < c->n; i++) {
        struct limits_level *lv = &c->level[i];

        lv->path = c->text + (lv->path - src->text);
        lv->key = c->text + (lv->key - src->text);
        lv->tag = c->text + (lv->tag - src->text);
    }
    return c;
}

int limits_limit_key(const struct limits_level *lv, size_t i, char *out,
                     size_t outlen)
{
    char suffix[48], digits[24];
    const char *algo;
    size_t n = 0, d = sizeof(digits), alen, k;

    if (lv->limits == NULL || i >= lv->nlimits) {
        return -1;
    }
    /* "#<i>:<algorithm>", made for every check: by hand, not snprintf. */
    algo = limits_algo_name(lv->limits[i].algo);
    alen = strlen(algo);
    do {
        digits[--d] = (char)('0' + i % 10);
        i /= 10;
    } while (i != 0);
    suffix[n++] = '#';
    memcpy(suffix + n, digits + d, sizeof(digits) - d);
    n += sizeof(digits) - d;
    suffix[n++] = ':';
    memcpy(suffix + n, algo, alen + 1);
    n += alen;
    /* Copied by length: a path may hold any byte but braces, even NUL. */
    if (outlen > 0) {
        size_t room = outlen - 1, t; /* bytes before the NUL */

        k = lv->key_len < room ? lv->key_len : room;
        memcpy(out, lv->key, k);
        t = n < room - k ? n : room - k;
        memcpy(out + k, suffix, t);
        out[k + t] = '\0';
    }
    return (int)(lv->key_len + n);
}

/* ---------------- Public API: LIMITER RULES ---------------- */

/* A growing output string, cut at LIMITS_MAX_DESCRIBE_BYTES. */
struct limits_out {
    char *data;     /* owned; NUL-terminated */
    size_t len;     /* bytes, NUL excluded */
    size_t cap;     /* bytes allocated */
    bool truncated; /* the cut happened: append nothing more */
};

/* Appends one rendered line and its newline (or, past the cap, the
 * truncation mark). LIMITS_OK or LIMITS_ENOMEM. */
static int limits_out_line(struct limits_out *o, const struct limits_str *str)
{
    static const char cut[] = "(truncated)";
    const char *line = str->p;
    size_t n = str->len < str->size ? str->len : str->size - 1;
    size_t need;
    char *nd;

    if (o->truncated) {
        return LIMITS_OK;
    }
    if (o->len + n + 1 > LIMITS_MAX_DESCRIBE_BYTES) {
        o->truncated = true;
        line = cut;
        n = sizeof(cut) - 1;
    }
    need = o->len + n + 2;
    if (need > o->cap) {
        size_t cap = o->cap < 4096 ? 4096 : o->cap;

        while (cap < need) {
            cap *= 2;
        }
        nd = realloc(o->data, cap);
        if (nd == NULL) {
            return LIMITS_ENOMEM;
        }
        o->data = nd;
        o->cap = cap;
    }
    memcpy(o->data + o->len, line, n);
    o->len += n;
    o->data[o->len++] = '\n';
    o->data[o->len] = '\0';
    return LIMITS_OK;
}

/* Renders `n` limits, space-separated. */
static void limits_fmt_list(struct limits_str *str,
                            const struct limits_limit *ls, size_t n)
{
    char one[LIMITS_FORMAT_SIZE];
    size_t i;

    for (i = 0; i < n; i++) {
        limits_format(&ls[i], one, sizeof(one));
        limits_str_add(str, "%s%s", i > 0 ? " " : "", one);
    }
}

/* One line per node with limits under `n`, depth first; `pat` holds the
 * pattern of `n` (patlen bytes). */
static int limits_describe_node(const struct limits_node *n, char *pat,
                                size_t patlen, bool all_shadow, char *line,
                                struct limits_out *o)
{
    struct limits_str str = { .p = line, .size = LIMITS_LINE_SIZE };
    size_t i;
    int rc = LIMITS_OK;

    if (n->nlimits > 0) {
        limits_str_add(&str, "%s  ", pat);
        limits_fmt_list(&str, n->limits, n->nlimits);
        if (n->shadow || all_shadow) {
            limits_str_add(&str, "  shadow");
        }
        rc = limits_out_line(o, &str);
    }
    for (i = 0; i < n->nchild && rc == LIMITS_OK && !o->truncated; i++) {
        const struct limits_node *c = n->child[i];
        size_t len = patlen;

        if (patlen > 0) {
            pat[len++] = ':';
        }
        memcpy(pat + len, c->seg, c->seglen);
        pat[len + c->seglen] = '\0';
        rc = limits_describe_node(c, pat, len + c->seglen, all_shadow, line, o);
        pat[patlen] = '\0';
    }
    return rc;
}

/* One line for one override. */
static int limits_describe_override(const struct limits_override *ov,
                                    char *line, struct limits_out *o)
{
    struct limits_str str = { .p = line, .size = LIMITS_LINE_SIZE };
    char factor[32];

    limits_str_add(&str, "override %s  ", ov->path);
    if (ov->kind == LIMITS_OV_UNLIMITED) {
        limits_str_add(&str, "unlimited");
        return limits_out_line(o, &str);
    }
    if (ov->kind == LIMITS_OV_FACTOR) {
        limits_fmt_micro(factor, sizeof(factor), ov->factor_micro);
        limits_str_add(&str, "factor=%s ", factor);
    }
    limits_fmt_list(&str, ov->limits, ov->nlimits);
    return limits_out_line(o, &str);
}

int limits_describe(const struct limits_tree *t, bool all_shadow,
                    bool overrides, char **out, size_t *outlen)
{
    struct limits_out o = { 0 };
    char pat[LIMITS_MAX_PATH_BYTES + 1] = "";
    char *line = malloc(LIMITS_LINE_SIZE);
    size_t i;
    int rc = LIMITS_ENOMEM;

    if (line == NULL) {
        return LIMITS_ENOMEM;
    }
    /* An empty description is "" (allocated, so the caller always frees). */
    o.data = malloc(1);
    if (o.data == NULL) {
        goto fail;
    }
    o.data[0] = '\0';
    o.cap = 1;
    rc = t != NULL
             ? limits_describe_node(&t->root, pat, 0, all_shadow, line, &o)
             : LIMITS_OK;
    for (i = 0; overrides && t != NULL && i < t->nov && rc == LIMITS_OK; i++) {
        rc = limits_describe_override(&t->ov[i], line, &o);
    }
    if (rc != LIMITS_OK) {
        goto fail;
    }
    free(line);
    *out = o.data;
    *outlen = o.len;
    return LIMITS_OK;

fail:
    free(line);
    free(o.data);
    return LIMITS_ENOMEM;
}
