/* conf.c: proxy.yaml, from YAML text to struct conf.
 *
 * The file is read whole into memory and handed to libyaml's document API
 * (yaml_parser_load), which builds a node tree where every node keeps the
 * position it started at. One pass walks the top-level mapping. Each key is
 * looked up in conf_commands[] (twemproxy's conf_commands pattern: key name,
 * setter, offsetof the field in struct conf), and the setter validates the
 * value node and stores it:
 *
 *   text --yaml_parser_load--> document --for each key--> conf_commands[]
 *                                                             |
 *                          field <-- setter(value node) <-----'
 *                            `---> or conf_error("file:line:col: ...")
 *
 * A rejected value is reported and the walk goes on, so one run lists every
 * error of the file (a YAML syntax error stops libyaml, so it is reported
 * alone). Rules that span keys (upstream vs cluster) are checked once the
 * walk is over. Loading only overlays the keys present; conf_init() applies
 * the named defaults below. Leaf layer: no logging, no globals, errors go to
 * the caller's buffer and allocation failures return CONF_ENOMEM. */
#include "conf/conf.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <yaml.h>

#define CONF_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#if defined(__GNUC__)
#define CONF_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define CONF_PRINTF(fmt, args)
#endif

/* ---------------- Defaults and limits ---------------- */

#define CONF_DEFAULT_LISTEN_HOST "127.0.0.1" /* loopback: safe when unset */
#define CONF_DEFAULT_LISTEN_PORT 7777
#define CONF_DEFAULT_KEY_PREFIX  "cellgate:" /* namespace of limiter keys */
#define CONF_DEFAULT_LOG_LEVEL   CONF_LOG_INFO
#define CONF_DEFAULT_STORE_DOWN  CONF_FAIL_CLOSED /* DESIGN.md: safe side */
/* DESIGN.md "When Redis is slow or down": every upstream command times out
 * after 1 s by default; connecting gets the same budget. */
#define CONF_DEFAULT_CONNECT_TIMEOUT_MS 1000
#define CONF_DEFAULT_COMMAND_TIMEOUT_MS 1000
#define CONF_DEFAULT_MAX_CLIENTS        10000 /* Redis maxclients default */
#define CONF_DEFAULT_UPSTREAM_POOL      2
#define CONF_MAX_UPSTREAM_POOL          64 /* beyond this, pipelining wins */
#define CONF_DEFAULT_MAX_PIPELINE       1024
/* Redis proto-max-bulk-len default. */
#define CONF_DEFAULT_MAX_BULK_BYTES (512ULL * 1024 * 1024)
/* Redis's historical multibulk length limit (1M elements). */
#define CONF_DEFAULT_MAX_ELEMENTS (1024ULL * 1024)
/* Redis PROTO_INLINE_MAX_SIZE. */
#define CONF_DEFAULT_MAX_INLINE_BYTES (64ULL * 1024)
/* Room for a large MGET reply, small enough that a stalled reader cannot
 * hold much memory. */
#define CONF_DEFAULT_CLIENT_MAX_OUTPUT_BYTES (64ULL * 1024 * 1024)

/* A proxy.yaml is a few hundred bytes; refuse to read anything absurd. */
#define CONF_MAX_FILE_BYTES ((size_t)1024 * 1024)
#define CONF_READ_CHUNK     4096
/* Bytes of a rejected value quoted back in an error message. */
#define CONF_SHOW_BYTES 64
/* Longest "[host]:port" text: brackets, 255-byte host, colon, 5 digits. */
#define CONF_ADDR_TEXT_MAX (sizeof(((struct conf_addr *)0)->host) + 8)

/* ---------------- The key table ---------------- */

/* State of one load: where errors go and what is being filled. */
struct conf_loader {
    const char *name;     /* borrowed: file name used in messages */
    const char *text;     /* borrowed: the whole input (reader errors) */
    size_t textlen;       /* bytes in text */
    char *err;            /* borrowed: caller's buffer, may be NULL */
    size_t errlen;        /* size of err */
    size_t used;          /* bytes written to err, NUL excluded */
    int nerrors;          /* errors reported, written or not */
    struct conf *c;       /* borrowed: the settings being overlaid */
    yaml_document_t *doc; /* borrowed: the document being walked */
};

struct conf_command;

/* Validates `node` and stores it into the field of `cmd`. Returns CONF_OK,
 * CONF_ERR after reporting the error, or CONF_ENOMEM. */
typedef int conf_set_fn(struct conf_loader *ld, const struct conf_command *cmd,
                        yaml_node_t *node);

/* One YAML key of proxy.yaml. */
struct conf_command {
    const char *name;       /* the key */
    conf_set_fn *set;       /* validates and stores the value */
    size_t offset;          /* offsetof the field in struct conf */
    unsigned long long min; /* numbers: least value; strings: 1 = non-empty */
    unsigned long long max; /* numbers: greatest value */
    const char *want;       /* what a valid value is, for error messages */
};

static conf_set_fn conf_set_addr;
static conf_set_fn conf_set_seeds;
static conf_set_fn conf_set_string;
static conf_set_fn conf_set_log_level;
static conf_set_fn conf_set_store_down;
static conf_set_fn conf_set_uint;
static conf_set_fn conf_set_ull;
static conf_set_fn conf_set_size;
static conf_set_fn conf_set_bool;

#define CONF_CMD(key, setter, field, lo, hi, what)                             \
    {                                                                          \
        .name = (key), .set = (setter),                                        \
        .offset = offsetof(struct conf, field), .min = (lo), .max = (hi),      \
        .want = (what),                                                        \
    }

#define CONF_WANT_POSITIVE "a positive integer"
#define CONF_WANT_SIZE     "a positive size such as 65536, 64kb or 512mb"
#define CONF_WANT_STRING   "a string"

static const struct conf_command conf_commands[] = {
    CONF_CMD("listen", conf_set_addr, listen, 0, 0, "host:port"),
    CONF_CMD("upstream", conf_set_addr, upstream, 0, 0, "host:port"),
    CONF_CMD("cluster", conf_set_seeds, seeds, 0, 0, "a list of host:port"),
    CONF_CMD("upstream_user", conf_set_string, upstream_user, 0, 0,
             CONF_WANT_STRING),
    CONF_CMD("upstream_password", conf_set_string, upstream_password, 0, 0,
             CONF_WANT_STRING),
    CONF_CMD("requirepass", conf_set_string, requirepass, 0, 0,
             CONF_WANT_STRING),
    CONF_CMD("admin_password", conf_set_string, admin_password, 0, 0,
             CONF_WANT_STRING),
    CONF_CMD("limits_file", conf_set_string, limits_file, 0, 0,
             CONF_WANT_STRING),
    CONF_CMD("key_prefix", conf_set_string, key_prefix, 1, 0,
             "a non-empty string"),
    CONF_CMD("log_level", conf_set_log_level, log_level, 0, 0,
             "debug, info, warn or error"),
    CONF_CMD("store_down_policy", conf_set_store_down, store_down, 0, 0,
             "fail_closed or fail_open"),
    CONF_CMD("connect_timeout_ms", conf_set_uint, connect_timeout_ms, 1,
             UINT_MAX, CONF_WANT_POSITIVE),
    CONF_CMD("command_timeout_ms", conf_set_uint, command_timeout_ms, 0,
             UINT_MAX, "a non-negative integer"),
    CONF_CMD("max_clients", conf_set_uint, max_clients, 1, UINT_MAX,
             CONF_WANT_POSITIVE),
    CONF_CMD("upstream_pool", conf_set_uint, upstream_pool, 1,
             CONF_MAX_UPSTREAM_POOL, "an integer from 1 to 64"),
    CONF_CMD("max_pipeline", conf_set_uint, max_pipeline, 1, UINT_MAX,
             CONF_WANT_POSITIVE),
    CONF_CMD("max_bulk_bytes", conf_set_size, max_bulk_bytes, 1, ULLONG_MAX,
             CONF_WANT_SIZE),
    CONF_CMD("max_elements", conf_set_ull, max_elements, 1, ULLONG_MAX,
             CONF_WANT_POSITIVE),
    CONF_CMD("max_inline_bytes", conf_set_size, max_inline_bytes, 1, ULLONG_MAX,
             CONF_WANT_SIZE),
    CONF_CMD("client_max_output_bytes", conf_set_size, client_max_output_bytes,
             1, ULLONG_MAX, CONF_WANT_SIZE),
    CONF_CMD("split_multikey", conf_set_bool, split_multikey, 0, 1,
             "yes or no"),
};

/* A name accepted for an enum setting. */
struct conf_name {
    const char *name; /* as written in YAML, any case */
    int value;        /* enum value */
};

static const struct conf_name conf_log_levels[] = {
    { .name = "debug", .value = CONF_LOG_DEBUG },
    { .name = "info", .value = CONF_LOG_INFO },
    { .name = "warn", .value = CONF_LOG_WARN },
    { .name = "error", .value = CONF_LOG_ERROR },
};

static const struct conf_name conf_store_down_policies[] = {
    { .name = "fail_closed", .value = CONF_FAIL_CLOSED },
    { .name = "fail_open", .value = CONF_FAIL_OPEN },
};

/* Size suffixes, as in redis.conf: k/m/g are powers of 1000, kb/mb/gb
 * powers of 1024, in any case. */
struct conf_unit {
    const char *suffix;      /* compared case-insensitively */
    unsigned long long mult; /* bytes per unit */
};

static const struct conf_unit conf_size_units[] = {
    { .suffix = "b", .mult = 1ULL },
    { .suffix = "k", .mult = 1000ULL },
    { .suffix = "kb", .mult = 1024ULL },
    { .suffix = "m", .mult = 1000ULL * 1000 },
    { .suffix = "mb", .mult = 1024ULL * 1024 },
    { .suffix = "g", .mult = 1000ULL * 1000 * 1000 },
    { .suffix = "gb", .mult = 1024ULL * 1024 * 1024 },
};

/* ---------------- Error reporting ---------------- */

static void conf_loader_init(struct conf_loader *ld, struct conf *c,
                             const char *name, char *err, size_t errlen)
{
    memset(ld, 0, sizeof(*ld));
    ld->name = name != NULL ? name : "(string)";
    ld->c = c;
    ld->err = errlen > 0 ? err : NULL;
    ld->errlen = ld->err != NULL ? errlen : 0;
    if (ld->err != NULL) {
        ld->err[0] = '\0';
    }
}

/* Appends to the caller's buffer, truncating (always NUL-terminated) when
 * it is full. */
CONF_PRINTF(2, 0)
static void conf_errv(struct conf_loader *ld, const char *fmt, va_list ap)
{
    size_t room;
    int n;

    if (ld->err == NULL || ld->used + 1 >= ld->errlen) {
        return;
    }
    room = ld->errlen - ld->used;
    n = vsnprintf(ld->err + ld->used, room, fmt, ap);
    if (n < 0) {
        ld->err[ld->used] = '\0';
        return;
    }
    ld->used += (size_t)n < room ? (size_t)n : room - 1;
}

CONF_PRINTF(2, 3)
static void conf_errf(struct conf_loader *ld, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    conf_errv(ld, fmt, ap);
    va_end(ap);
}

/* Reports one error as "name:line:column: message" (or "name: message"
 * when `mark` is NULL), on a line of its own. */
CONF_PRINTF(3, 4)
static void conf_error(struct conf_loader *ld, const yaml_mark_t *mark,
                       const char *fmt, ...)
{
    va_list ap;

    if (ld->nerrors++ > 0) {
        conf_errf(ld, "\n");
    }
    if (mark != NULL) {
        conf_errf(ld, "%s:%zu:%zu: ", ld->name, mark->line + 1,
                  mark->column + 1);
    } else {
        conf_errf(ld, "%s: ", ld->name);
    }
    va_start(ap, fmt);
    conf_errv(ld, fmt, ap);
    va_end(ap);
}

/* Copies at most CONF_SHOW_BYTES of `s` into `out` for quoting in a message:
 * quotes and backslashes escaped, control bytes shown as '?', and "..."
 * when cut (never inside a UTF-8 sequence). `out` holds at least
 * 2 * CONF_SHOW_BYTES + 4 bytes. */
static void conf_show(char *out, const char *s, size_t len)
{
    size_t i, o = 0;

    for (i = 0; i < len && i < CONF_SHOW_BYTES; i++) {
        unsigned char ch = (unsigned char)s[i];

        if (ch == '"' || ch == '\\') {
            out[o++] = '\\';
            out[o++] = (char)ch;
        } else if (ch < 0x20 || ch == 0x7f) {
            out[o++] = '?';
        } else {
            out[o++] = (char)ch;
        }
    }
    if (i < len) {
        if (((unsigned char)s[i] & 0xc0) == 0x80) {
            while (o > 0 && ((unsigned char)out[o - 1] & 0xc0) == 0x80) {
                o--;
            }
            if (o > 0 && ((unsigned char)out[o - 1] & 0xc0) == 0xc0) {
                o--;
            }
        }
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = '\0';
}

static const char *conf_node_kind(const yaml_node_t *node)
{
    switch (node->type) {
    case YAML_SEQUENCE_NODE:
        return "a sequence";
    case YAML_MAPPING_NODE:
        return "a mapping";
    case YAML_SCALAR_NODE:
        return "a scalar";
    case YAML_NO_NODE:
        break;
    }
    return "nothing";
}

/* Reports `key: expected WANT, got "TEXT"` at `mark`. */
static void conf_bad_text(struct conf_loader *ld, const yaml_mark_t *mark,
                          const struct conf_command *cmd, const char *want,
                          const char *text, size_t len)
{
    char shown[2 * CONF_SHOW_BYTES + 4];

    conf_show(shown, text, len);
    conf_error(ld, mark, "%s: expected %s, got \"%s\"", cmd->name, want, shown);
}

/* Reports that the scalar `node` is not a valid value of `cmd`. */
static void conf_bad_value(struct conf_loader *ld, const yaml_node_t *node,
                           const struct conf_command *cmd)
{
    conf_bad_text(ld, &node->start_mark, cmd, cmd->want,
                  (const char *)node->data.scalar.value,
                  node->data.scalar.length);
}

/* Turns the byte offset of a libyaml reader error into a 0-based mark. */
static yaml_mark_t conf_mark_at(const struct conf_loader *ld, size_t offset)
{
    yaml_mark_t mark = { .index = offset };
    size_t i;

    if (offset > ld->textlen) {
        offset = ld->textlen;
    }
    for (i = 0; i < offset; i++) {
        if (ld->text[i] == '\n') {
            mark.line++;
            mark.column = 0;
        } else {
            mark.column++;
        }
    }
    return mark;
}

/* Reports why yaml_parser_load() failed. CONF_ERR, or CONF_ENOMEM. */
static int conf_syntax_error(struct conf_loader *ld, const yaml_parser_t *p)
{
    const char *problem = p->problem != NULL ? p->problem : "invalid YAML";
    yaml_mark_t mark = p->problem_mark;

    if (p->error == YAML_MEMORY_ERROR) {
        conf_error(ld, NULL, "out of memory");
        return CONF_ENOMEM;
    }
    if (p->error == YAML_READER_ERROR) {
        mark = conf_mark_at(ld, p->problem_offset);
        if (p->problem_value >= 0) {
            conf_error(ld, &mark, "%s (byte 0x%02x)", problem,
                       (unsigned)p->problem_value);
        } else {
            conf_error(ld, &mark, "%s", problem);
        }
        return CONF_ERR;
    }
    if (p->context != NULL) {
        conf_error(ld, &mark, "%s (%s at line %zu, column %zu)", problem,
                   p->context, p->context_mark.line + 1,
                   p->context_mark.column + 1);
    } else {
        conf_error(ld, &mark, "%s", problem);
    }
    return CONF_ERR;
}

/* ---------------- Value parsing ---------------- */

static void *conf_field(struct conf *c, const struct conf_command *cmd)
{
    return (char *)c + cmd->offset;
}

/* YAML's null: an unquoted empty value, "~" or "null". */
static bool conf_is_null(const yaml_node_t *node)
{
    static const char *const nulls[] = { "", "~", "null", "Null", "NULL" };
    size_t i;

    if (node->type != YAML_SCALAR_NODE ||
        node->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) {
        return false;
    }
    for (i = 0; i < CONF_ARRAY_SIZE(nulls); i++) {
        if (strcmp((const char *)node->data.scalar.value, nulls[i]) == 0) {
            return true;
        }
    }
    return false;
}

/* Returns the text of the scalar `node`, or NULL after reporting that it is
 * a collection (expected `want`) or holds a NUL byte. */
static const char *conf_scalar(struct conf_loader *ld, const yaml_node_t *node,
                               const struct conf_command *cmd, const char *want)
{
    const char *s;

    if (node->type != YAML_SCALAR_NODE) {
        conf_error(ld, &node->start_mark, "%s: expected %s, got %s", cmd->name,
                   want, conf_node_kind(node));
        return NULL;
    }
    s = (const char *)node->data.scalar.value;
    if (strlen(s) != node->data.scalar.length) {
        conf_error(ld, &node->start_mark, "%s: the value contains a NUL byte",
                   cmd->name);
        return NULL;
    }
    return s;
}

enum conf_num_status {
    CONF_NUM_OK = 0,
    CONF_NUM_EINVAL = -1, /* not a number of the expected form */
    CONF_NUM_ERANGE = -2, /* a number, but past ULLONG_MAX */
};

/* Parses decimal digits, then (when `units` is set) an optional size
 * suffix. No sign, blanks or fractions. */
static enum conf_num_status conf_parse_number(const char *s, bool units,
                                              unsigned long long *out)
{
    unsigned long long v = 0, mult = 1;
    bool overflow = false;
    const char *p = s;
    size_t i;

    if (*p < '0' || *p > '9') {
        return CONF_NUM_EINVAL;
    }
    for (; *p >= '0' && *p <= '9'; p++) {
        unsigned d = (unsigned)(*p - '0');

        if (v > (ULLONG_MAX - d) / 10) {
            overflow = true;
        }
        v = v * 10 + d;
    }
    if (*p != '\0') {
        if (!units) {
            return CONF_NUM_EINVAL;
        }
        for (i = 0; i < CONF_ARRAY_SIZE(conf_size_units); i++) {
            if (strcasecmp(p, conf_size_units[i].suffix) == 0) {
                break;
            }
        }
        if (i == CONF_ARRAY_SIZE(conf_size_units)) {
            return CONF_NUM_EINVAL;
        }
        mult = conf_size_units[i].mult;
    }
    if (overflow || v > ULLONG_MAX / mult) {
        return CONF_NUM_ERANGE;
    }
    *out = v * mult;
    return CONF_NUM_OK;
}

/* Reads the number of `node` within [cmd->min, cmd->max]. CONF_OK or
 * CONF_ERR after reporting. */
static int conf_number(struct conf_loader *ld, yaml_node_t *node,
                       const struct conf_command *cmd, bool units,
                       unsigned long long *out)
{
    const char *s = conf_scalar(ld, node, cmd, cmd->want);
    enum conf_num_status st;
    char shown[2 * CONF_SHOW_BYTES + 4];

    if (s == NULL) {
        return CONF_ERR;
    }
    st = conf_parse_number(s, units, out);
    if (st == CONF_NUM_EINVAL || (st == CONF_NUM_OK && *out < cmd->min)) {
        conf_bad_value(ld, node, cmd);
        return CONF_ERR;
    }
    if (st == CONF_NUM_ERANGE || *out > cmd->max) {
        conf_show(shown, s, strlen(s));
        conf_error(ld, &node->start_mark, "%s: \"%s\" is too large (max %llu)",
                   cmd->name, shown, cmd->max);
        return CONF_ERR;
    }
    return CONF_OK;
}

static int conf_name_lookup(const struct conf_name *names, size_t n,
                            const char *s)
{
    size_t i;

    if (s == NULL) {
        return -1;
    }
    for (i = 0; i < n; i++) {
        if (strcasecmp(s, names[i].name) == 0) {
            return names[i].value;
        }
    }
    return -1;
}

enum conf_seeds_status {
    CONF_SEEDS_OK = 0,
    CONF_SEEDS_EBAD = -1,     /* an item is not host:port (see *bad) */
    CONF_SEEDS_EEMPTY = -2,   /* no item at all */
    CONF_SEEDS_ETOOMANY = -3, /* more than CONF_MAX_SEEDS items */
};

static bool conf_is_blank(char ch)
{
    return ch == ' ' || ch == '\t';
}

/* Splits "a:1, b:2" into `out`. On CONF_SEEDS_EBAD, `*bad` and `*badlen`
 * point at the rejected item inside `list`. `out` may be partly written on
 * error. */
static enum conf_seeds_status conf_split_seeds(const char *list,
                                               struct conf_addr *out, int *n,
                                               const char **bad, size_t *badlen)
{
    char item[CONF_ADDR_TEXT_MAX];
    const char *p = list, *end;
    size_t len;

    *n = 0;
    while (conf_is_blank(*p)) {
        p++;
    }
    if (*p == '\0') {
        return CONF_SEEDS_EEMPTY;
    }
    for (;;) {
        while (conf_is_blank(*p)) {
            p++;
        }
        end = strchr(p, ',');
        len = end != NULL ? (size_t)(end - p) : strlen(p);
        while (len > 0 && conf_is_blank(p[len - 1])) {
            len--;
        }
        if (*n == CONF_MAX_SEEDS) {
            return CONF_SEEDS_ETOOMANY;
        }
        if (len < sizeof(item)) { /* longer is no valid address */
            memcpy(item, p, len);
            item[len] = '\0';
        }
        if (len >= sizeof(item) || conf_parse_addr(item, &out[*n]) != CONF_OK) {
            *bad = p;
            *badlen = len;
            return CONF_SEEDS_EBAD;
        }
        (*n)++;
        if (end == NULL) {
            return CONF_SEEDS_OK;
        }
        p = end + 1;
    }
}

/* ---------------- Setters ---------------- */

static int conf_set_addr(struct conf_loader *ld, const struct conf_command *cmd,
                         yaml_node_t *node)
{
    const char *s = conf_scalar(ld, node, cmd, cmd->want);

    if (s == NULL) {
        return CONF_ERR;
    }
    if (conf_parse_addr(s, conf_field(ld->c, cmd)) != CONF_OK) {
        conf_bad_value(ld, node, cmd);
        return CONF_ERR;
    }
    return CONF_OK;
}

/* cluster: a sequence of "host:port", each checked at its own position. */
static int conf_set_seed_list(struct conf_loader *ld,
                              const struct conf_command *cmd, yaml_node_t *node,
                              struct conf_addr *seeds, int *n)
{
    yaml_node_item_t *it = node->data.sequence.items.start;
    yaml_node_item_t *top = node->data.sequence.items.top;
    int rc = CONF_OK;

    if (it == top) {
        conf_error(ld, &node->start_mark, "%s: expected at least one host:port",
                   cmd->name);
        return CONF_ERR;
    }
    if (top - it > CONF_MAX_SEEDS) {
        conf_error(ld, &node->start_mark,
                   "%s: at most %d seeds are allowed, got %td", cmd->name,
                   CONF_MAX_SEEDS, top - it);
        return CONF_ERR;
    }
    for (*n = 0; it < top; it++) {
        yaml_node_t *item = yaml_document_get_node(ld->doc, *it);
        const char *s = conf_scalar(ld, item, cmd, "host:port");

        if (s == NULL) {
            rc = CONF_ERR;
        } else if (conf_parse_addr(s, &seeds[(*n)++]) != CONF_OK) {
            conf_bad_text(ld, &item->start_mark, cmd, "host:port", s,
                          item->data.scalar.length);
            rc = CONF_ERR;
        }
    }
    return rc;
}

/* cluster: a sequence, or one comma-separated string. */
static int conf_set_seeds(struct conf_loader *ld,
                          const struct conf_command *cmd, yaml_node_t *node)
{
    struct conf_addr seeds[CONF_MAX_SEEDS];
    const char *s, *bad = NULL;
    size_t badlen = 0;
    int n = 0;

    if (node->type == YAML_SEQUENCE_NODE) {
        if (conf_set_seed_list(ld, cmd, node, seeds, &n) != CONF_OK) {
            return CONF_ERR;
        }
    } else {
        s = conf_scalar(ld, node, cmd, cmd->want);
        if (s == NULL) {
            return CONF_ERR;
        }
        switch (conf_split_seeds(s, seeds, &n, &bad, &badlen)) {
        case CONF_SEEDS_OK:
            break;
        case CONF_SEEDS_EBAD:
            conf_bad_text(ld, &node->start_mark, cmd, "host:port", bad, badlen);
            return CONF_ERR;
        case CONF_SEEDS_EEMPTY:
            conf_error(ld, &node->start_mark,
                       "%s: expected at least one host:port", cmd->name);
            return CONF_ERR;
        case CONF_SEEDS_ETOOMANY:
            conf_error(ld, &node->start_mark,
                       "%s: at most %d seeds are allowed", cmd->name,
                       CONF_MAX_SEEDS);
            return CONF_ERR;
        }
    }
    memcpy(ld->c->seeds, seeds, (size_t)n * sizeof(seeds[0]));
    ld->c->nseeds = n;
    return CONF_OK;
}

/* Strings: null or "" clears an optional one (as `requirepass ""` does in
 * redis.conf); cmd->min = 1 makes it mandatory. */
static int conf_set_string(struct conf_loader *ld,
                           const struct conf_command *cmd, yaml_node_t *node)
{
    const char *s;
    char **field = conf_field(ld->c, cmd);

    if (conf_is_null(node)) {
        s = "";
    } else {
        s = conf_scalar(ld, node, cmd, cmd->want);
        if (s == NULL) {
            return CONF_ERR;
        }
    }
    if (*s == '\0') {
        if (cmd->min > 0) {
            conf_bad_value(ld, node, cmd);
            return CONF_ERR;
        }
        s = NULL;
    }
    return conf_set_str(field, s);
}

static int conf_set_log_level(struct conf_loader *ld,
                              const struct conf_command *cmd, yaml_node_t *node)
{
    const char *s = conf_scalar(ld, node, cmd, cmd->want);
    enum conf_log_level *field = conf_field(ld->c, cmd);
    int v;

    if (s == NULL) {
        return CONF_ERR;
    }
    v = conf_log_level_parse(s);
    if (v < 0) {
        conf_bad_value(ld, node, cmd);
        return CONF_ERR;
    }
    *field = (enum conf_log_level)v;
    return CONF_OK;
}

static int conf_set_store_down(struct conf_loader *ld,
                               const struct conf_command *cmd,
                               yaml_node_t *node)
{
    const char *s = conf_scalar(ld, node, cmd, cmd->want);
    enum conf_store_down *field = conf_field(ld->c, cmd);
    int v;

    if (s == NULL) {
        return CONF_ERR;
    }
    v = conf_name_lookup(conf_store_down_policies,
                         CONF_ARRAY_SIZE(conf_store_down_policies), s);
    if (v < 0) {
        conf_bad_value(ld, node, cmd);
        return CONF_ERR;
    }
    *field = (enum conf_store_down)v;
    return CONF_OK;
}

/* YAML 1.1 booleans, as a human writes them. */
static const struct conf_name conf_bools[] = {
    { .name = "yes", .value = 1 },  { .name = "no", .value = 0 },
    { .name = "true", .value = 1 }, { .name = "false", .value = 0 },
    { .name = "on", .value = 1 },   { .name = "off", .value = 0 },
};

static int conf_set_bool(struct conf_loader *ld, const struct conf_command *cmd,
                         yaml_node_t *node)
{
    const char *s = conf_scalar(ld, node, cmd, cmd->want);
    int *field = conf_field(ld->c, cmd);
    int v;

    if (s == NULL) {
        return CONF_ERR;
    }
    v = conf_name_lookup(conf_bools, CONF_ARRAY_SIZE(conf_bools), s);
    if (v < 0) {
        conf_bad_value(ld, node, cmd);
        return CONF_ERR;
    }
    *field = v;
    return CONF_OK;
}

static int conf_set_uint(struct conf_loader *ld, const struct conf_command *cmd,
                         yaml_node_t *node)
{
    unsigned *field = conf_field(ld->c, cmd);
    unsigned long long v;

    if (conf_number(ld, node, cmd, false, &v) != CONF_OK) {
        return CONF_ERR;
    }
    *field = (unsigned)v; /* cmd->max <= UINT_MAX */
    return CONF_OK;
}

static int conf_set_ull(struct conf_loader *ld, const struct conf_command *cmd,
                        yaml_node_t *node)
{
    unsigned long long *field = conf_field(ld->c, cmd);

    return conf_number(ld, node, cmd, false, field) == CONF_OK ? CONF_OK
                                                               : CONF_ERR;
}

static int conf_set_size(struct conf_loader *ld, const struct conf_command *cmd,
                         yaml_node_t *node)
{
    unsigned long long *field = conf_field(ld->c, cmd);
    unsigned long long v;

    if (conf_number(ld, node, cmd, true, &v) != CONF_OK) {
        return CONF_ERR;
    }
    *field = v;
    return CONF_OK;
}

/* ---------------- The walk ---------------- */

static const struct conf_command *conf_command_find(const char *name,
                                                    size_t len)
{
    size_t i;

    for (i = 0; i < CONF_ARRAY_SIZE(conf_commands); i++) {
        if (strlen(conf_commands[i].name) == len &&
            memcmp(conf_commands[i].name, name, len) == 0) {
            return &conf_commands[i];
        }
    }
    return NULL;
}

/* Reports upstream and cluster set together, at the later of the two. */
static void conf_check_conflicts(struct conf_loader *ld,
                                 yaml_node_t *const *seen)
{
    const yaml_node_t *up = NULL, *cluster = NULL, *later;
    size_t i;

    for (i = 0; i < CONF_ARRAY_SIZE(conf_commands); i++) {
        if (strcmp(conf_commands[i].name, "cluster") == 0) {
            cluster = seen[i];
        } else if (strcmp(conf_commands[i].name, "upstream") == 0) {
            up = seen[i];
        }
    }
    if (up == NULL || cluster == NULL) {
        return;
    }
    later = up->start_mark.index > cluster->start_mark.index ? up : cluster;
    conf_error(ld, &later->start_mark,
               "upstream and cluster are mutually exclusive");
}

/* Applies every key of the top-level mapping. CONF_OK (errors, if any, are
 * counted in ld) or CONF_ENOMEM. */
static int conf_walk(struct conf_loader *ld, yaml_node_t *root)
{
    yaml_node_t *seen[CONF_ARRAY_SIZE(conf_commands)] = { NULL };
    yaml_node_pair_t *pair;
    char shown[2 * CONF_SHOW_BYTES + 4];

    for (pair = root->data.mapping.pairs.start;
         pair < root->data.mapping.pairs.top; pair++) {
        yaml_node_t *key = yaml_document_get_node(ld->doc, pair->key);
        yaml_node_t *value = yaml_document_get_node(ld->doc, pair->value);
        const struct conf_command *cmd;
        size_t i;

        if (key->type != YAML_SCALAR_NODE) {
            conf_error(ld, &key->start_mark, "expected a scalar key, got %s",
                       conf_node_kind(key));
            continue;
        }
        cmd = conf_command_find((const char *)key->data.scalar.value,
                                key->data.scalar.length);
        if (cmd == NULL) {
            conf_show(shown, (const char *)key->data.scalar.value,
                      key->data.scalar.length);
            conf_error(ld, &key->start_mark, "unknown key '%s'", shown);
            continue;
        }
        i = (size_t)(cmd - conf_commands);
        if (seen[i] != NULL) {
            conf_error(ld, &key->start_mark,
                       "duplicate key '%s' (first at line %zu)", cmd->name,
                       seen[i]->start_mark.line + 1);
            continue;
        }
        seen[i] = key;
        if (cmd->set(ld, cmd, value) == CONF_ENOMEM) {
            conf_error(ld, NULL, "out of memory");
            return CONF_ENOMEM;
        }
    }
    conf_check_conflicts(ld, seen);
    return CONF_OK;
}

/* Checks the shape of one loaded document and walks it. CONF_OK or
 * CONF_ENOMEM. */
static int conf_document(struct conf_loader *ld, yaml_document_t *doc)
{
    yaml_node_t *root = yaml_document_get_root_node(doc);

    ld->doc = doc;
    if (root == NULL || conf_is_null(root)) {
        return CONF_OK; /* empty file, comments only, or a bare "---" */
    }
    if (root->type != YAML_MAPPING_NODE) {
        conf_error(ld, &root->start_mark,
                   "top level: expected a mapping, got %s",
                   conf_node_kind(root));
        return CONF_OK;
    }
    return conf_walk(ld, root);
}

static int conf_load_buffer(struct conf_loader *ld, const char *text,
                            size_t len)
{
    yaml_parser_t parser;
    yaml_document_t doc;
    yaml_node_t *root;
    int rc;

    ld->text = text;
    ld->textlen = len;
    if (!yaml_parser_initialize(&parser)) {
        conf_error(ld, NULL, "out of memory");
        return CONF_ENOMEM;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        rc = conf_syntax_error(ld, &parser);
        goto done;
    }
    rc = conf_document(ld, &doc);
    root = yaml_document_get_root_node(&doc);
    yaml_document_delete(&doc);
    if (rc != CONF_OK || root == NULL) {
        goto done;
    }
    /* A second document would be silently ignored: say so instead. */
    if (!yaml_parser_load(&parser, &doc)) {
        rc = conf_syntax_error(ld, &parser);
        goto done;
    }
    root = yaml_document_get_root_node(&doc);
    if (root != NULL) {
        conf_error(ld, &root->start_mark, "only one YAML document is allowed");
    }
    yaml_document_delete(&doc);

done:
    yaml_parser_delete(&parser);
    if (rc == CONF_ENOMEM) {
        return CONF_ENOMEM;
    }
    return ld->nerrors > 0 ? CONF_ERR : CONF_OK;
}

/* Reads the whole file into `*out` (NUL-terminated, owned by the caller).
 * CONF_OK, CONF_ERR after reporting, or CONF_ENOMEM. */
static int conf_read_file(struct conf_loader *ld, const char *path, char **out,
                          size_t *outlen)
{
    FILE *f;
    char *buf = NULL, *nbuf;
    size_t len = 0, cap = 0, n;
    int rc = CONF_ERR;

    f = fopen(path, "rb");
    if (f == NULL) {
        conf_error(ld, NULL, "cannot open: %s", strerror(errno));
        return CONF_ERR;
    }
    for (;;) {
        if (cap - len < CONF_READ_CHUNK + 1) {
            cap = cap == 0 ? CONF_READ_CHUNK + 1 : cap * 2;
            nbuf = realloc(buf, cap);
            if (nbuf == NULL) {
                conf_error(ld, NULL, "out of memory");
                rc = CONF_ENOMEM;
                goto fail;
            }
            buf = nbuf;
        }
        n = fread(buf + len, 1, cap - len - 1, f);
        len += n;
        if (len > CONF_MAX_FILE_BYTES) {
            conf_error(ld, NULL, "file larger than %zu bytes",
                       CONF_MAX_FILE_BYTES);
            goto fail;
        }
        if (n == 0 || ferror(f) || feof(f)) {
            break;
        }
    }
    if (ferror(f)) {
        conf_error(ld, NULL, "cannot read: %s", strerror(errno));
        goto fail;
    }
    fclose(f);
    buf[len] = '\0';
    *out = buf;
    *outlen = len;
    return CONF_OK;

fail:
    fclose(f);
    free(buf);
    return rc;
}

/* ---------------- Public API ---------------- */

int conf_init(struct conf *c)
{
    memset(c, 0, sizeof(*c));
    memcpy(c->listen.host, CONF_DEFAULT_LISTEN_HOST,
           sizeof(CONF_DEFAULT_LISTEN_HOST));
    c->listen.port = CONF_DEFAULT_LISTEN_PORT;
    c->log_level = CONF_DEFAULT_LOG_LEVEL;
    c->store_down = CONF_DEFAULT_STORE_DOWN;
    c->connect_timeout_ms = CONF_DEFAULT_CONNECT_TIMEOUT_MS;
    c->command_timeout_ms = CONF_DEFAULT_COMMAND_TIMEOUT_MS;
    c->max_clients = CONF_DEFAULT_MAX_CLIENTS;
    c->upstream_pool = CONF_DEFAULT_UPSTREAM_POOL;
    c->split_multikey = 1;
    c->max_pipeline = CONF_DEFAULT_MAX_PIPELINE;
    c->max_bulk_bytes = CONF_DEFAULT_MAX_BULK_BYTES;
    c->max_elements = CONF_DEFAULT_MAX_ELEMENTS;
    c->max_inline_bytes = CONF_DEFAULT_MAX_INLINE_BYTES;
    c->client_max_output_bytes = CONF_DEFAULT_CLIENT_MAX_OUTPUT_BYTES;
    return conf_set_str(&c->key_prefix, CONF_DEFAULT_KEY_PREFIX);
}

void conf_free(struct conf *c)
{
    char **owned[] = {
        &c->upstream_user,  &c->upstream_password, &c->requirepass,
        &c->admin_password, &c->limits_file,       &c->key_prefix,
    };
    size_t i;

    for (i = 0; i < CONF_ARRAY_SIZE(owned); i++) {
        free(*owned[i]);
        *owned[i] = NULL;
    }
}

int conf_load_file(struct conf *c, const char *path, char *err, size_t errlen)
{
    struct conf_loader ld;
    char *text = NULL;
    size_t len = 0;
    int rc;

    conf_loader_init(&ld, c, path, err, errlen);
    rc = conf_read_file(&ld, path, &text, &len);
    if (rc != CONF_OK) {
        return rc;
    }
    rc = conf_load_buffer(&ld, text, len);
    free(text);
    return rc;
}

int conf_load_string(struct conf *c, const char *name, const char *text,
                     char *err, size_t errlen)
{
    struct conf_loader ld;

    conf_loader_init(&ld, c, name, err, errlen);
    if (text == NULL) {
        text = "";
    }
    return conf_load_buffer(&ld, text, strlen(text));
}

/* Accepts a port of 1 to 5 digits in 1..65535; -1 otherwise. */
static int conf_parse_port(const char *s)
{
    int port = 0;
    size_t i;

    for (i = 0; s[i] != '\0'; i++) {
        if (i == 5 || s[i] < '0' || s[i] > '9') {
            return -1;
        }
        port = port * 10 + (s[i] - '0');
    }
    return i > 0 && port >= 1 && port <= 65535 ? port : -1;
}

int conf_parse_addr(const char *s, struct conf_addr *out)
{
    const char *host, *colon, *close;
    size_t hostlen, i;
    bool bracketed;
    int port;

    if (s == NULL || out == NULL) {
        return CONF_ERR;
    }
    bracketed = s[0] == '[';
    if (bracketed) {
        close = strchr(s, ']');
        if (close == NULL || close[1] != ':') {
            return CONF_ERR;
        }
        host = s + 1;
        colon = close + 1;
    } else {
        colon = strchr(s, ':');
        if (colon == NULL) {
            return CONF_ERR;
        }
        host = s;
    }
    hostlen = (size_t)(colon - host) - (bracketed ? 1 : 0);
    if (hostlen == 0 || hostlen >= sizeof(out->host)) {
        return CONF_ERR;
    }
    for (i = 0; i < hostlen; i++) {
        unsigned char ch = (unsigned char)host[i];

        if (ch <= ' ' || ch == 0x7f || ch == '[' || ch == ']' || ch == ',') {
            return CONF_ERR;
        }
    }
    port = conf_parse_port(colon + 1);
    if (port < 0) {
        return CONF_ERR;
    }
    memcpy(out->host, host, hostlen);
    out->host[hostlen] = '\0';
    out->port = port;
    return CONF_OK;
}

int conf_parse_seeds(struct conf *c, const char *list)
{
    struct conf_addr seeds[CONF_MAX_SEEDS];
    const char *bad;
    size_t badlen;
    int n;

    if (list == NULL ||
        conf_split_seeds(list, seeds, &n, &bad, &badlen) != CONF_SEEDS_OK) {
        return CONF_ERR;
    }
    memcpy(c->seeds, seeds, (size_t)n * sizeof(seeds[0]));
    c->nseeds = n;
    return CONF_OK;
}

int conf_set_str(char **field, const char *value)
{
    char *copy = NULL;

    if (value != NULL) {
        copy = strdup(value);
        if (copy == NULL) {
            return CONF_ENOMEM;
        }
    }
    free(*field);
    *field = copy;
    return CONF_OK;
}

int conf_log_level_parse(const char *s)
{
    return conf_name_lookup(conf_log_levels, CONF_ARRAY_SIZE(conf_log_levels),
                            s);
}
