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
 *                            `---> or conf_yaml_error("file:line:col: ...")
 *
 * A rejected value is reported and the walk goes on, so one run lists every
 * error of the file (a YAML syntax error stops libyaml, so it is reported
 * alone). Rules that span keys (upstream vs cluster) are checked once the
 * walk is over. Loading only overlays the keys present; conf_init() applies
 * the named defaults below. Leaf layer: no logging, no globals, errors go to
 * the caller's buffer and allocation failures return CONF_ENOMEM. */
#include "conf/conf.h"

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <yaml.h>

#include "conf/conf_addr.h"
#include "conf/conf_keys.h"
#include "conf/conf_sentinel.h" /* its section, after conf_keys.h */
#include "conf/conf_yaml.h"

/* conf_yaml's codes are returned as ours. */
_Static_assert(CONF_YAML_OK == CONF_OK && CONF_YAML_ERR == CONF_ERR &&
                   CONF_YAML_ENOMEM == CONF_ENOMEM,
               "conf_yaml codes differ from conf codes");
/* Numbers are parsed as uint64_t and stored as unsigned long long. */
_Static_assert(ULLONG_MAX == UINT64_MAX, "unsigned long long is not 64-bit");

/* ---------------- Defaults and limits ---------------- */

#define CONF_DEFAULT_LISTEN_HOST "127.0.0.1" /* loopback: safe when unset */
#define CONF_DEFAULT_LISTEN_PORT 7777
#define CONF_DEFAULT_KEY_PREFIX  "cellgate:" /* namespace of limiter keys */
#define CONF_DEFAULT_LOG_LEVEL   CONF_LOG_INFO
#define CONF_DEFAULT_STORE_DOWN                                                \
    CONF_FAIL_CLOSED /* safe side: docs/limiter.md "CL.THROTTLE" */
/* docs/operations.md "Failure behaviour": every upstream command times out
 * after 1 s by default; connecting gets the same budget. */
#define CONF_DEFAULT_CONNECT_TIMEOUT_MS 1000
#define CONF_DEFAULT_COMMAND_TIMEOUT_MS 1000
/* Redis's own default busy-reply-threshold (lua-time-limit): until then a
 * silent node is running one long command, not failing. */
#define CONF_DEFAULT_BUSY_REPLY_THRESHOLD_MS 5000
/* Idle private connections kept per node for reuse: enough for a few job
 * workers that each open a MULTI per job, small enough to cost Redis
 * little. */
#define CONF_DEFAULT_PRIVATE_POOL 4
#define CONF_DEFAULT_PRIVATE_MAX                                               \
    1000 /* per node: a tenth of Redis's                                       \
            default maxclients (10000) */
#define CONF_MAX_PRIVATE_MAX       1000000
#define CONF_DEFAULT_MAX_CLIENTS   10000 /* Redis maxclients default */
#define CONF_DEFAULT_UPSTREAM_POOL 2
#define CONF_MAX_UPSTREAM_POOL     64 /* beyond this, pipelining wins */
#define CONF_DEFAULT_MAX_PIPELINE  1024
/* Redis proto-max-bulk-len default. */
#define CONF_DEFAULT_MAX_BULK_BYTES (512ULL * 1024 * 1024)
/* Redis's historical multibulk length limit (1M elements). */
#define CONF_DEFAULT_MAX_ELEMENTS (1024ULL * 1024)
/* Redis PROTO_INLINE_MAX_SIZE. */
#define CONF_DEFAULT_MAX_INLINE_BYTES (64ULL * 1024)
/* Room for a large MGET reply, small enough that a stalled reader cannot
 * hold much memory. */
#define CONF_DEFAULT_CLIENT_MAX_OUTPUT_BYTES (64ULL * 1024 * 1024)
/* Keys the refusal cache holds, by default and at most (an entry costs
 * about 150 bytes plus its key). */
#define CONF_DEFAULT_REFUSAL_CACHE 100000
#define CONF_MAX_REFUSAL_CACHE     10000000

/* Embedded store: a million keys is about 200 MB of GCRA state; fewer
 * than 100 could not hold the keys of one deep check. */
#define CONF_DEFAULT_EMBEDDED_MAX_KEYS 1000000
#define CONF_MIN_EMBEDDED_MAX_KEYS     100

/* LIMITER CHECK ... WAIT replies held: 100 per identity is a long queue
 * for one user; 10,000 in all is about 2 MB of timers. */
#define CONF_DEFAULT_WAIT_MAX_PER_IDENTITY 100
#define CONF_DEFAULT_WAIT_MAX_TOTAL        10000
/* How far ahead a LIMITER CHECK ... WAIT may reserve: a minute by
 * default, an hour at most (a longer reservation is a queue, not a rate
 * limit, and lets a few held calls take an identity's capacity for that
 * long). */
#define CONF_DEFAULT_WAIT_MAX_MS 60000
#define CONF_MAX_WAIT_MAX_MS     3600000

/* Byte bounds of what clients make the limiter hold, keys included: far
 * above a million small embedded keys (~260 MB), 100,000 refusal entries
 * (~30 MB), tens of thousands of overrides, thousands of deep checks. */
#define CONF_DEFAULT_EMBEDDED_MAX_BYTES      (512ULL * 1024 * 1024)
#define CONF_DEFAULT_REFUSAL_CACHE_MAX_BYTES (64ULL * 1024 * 1024)
#define CONF_DEFAULT_OVERRIDE_MAX_BYTES      (16ULL * 1024 * 1024)
#define CONF_DEFAULT_PENDING_MAX_BYTES       (256ULL * 1024 * 1024)

/* A decision is near its limit at 80% of it used, by default. */
#define CONF_DEFAULT_NEAR_LIMIT_RATIO 0.8

/* A proxy.yaml is a few hundred bytes; refuse to read anything absurd. */
#define CONF_MAX_FILE_BYTES ((size_t)1024 * 1024)

/* ---------------- The key table ---------------- */

static conf_set_fn conf_set_log_level;
static conf_set_fn conf_set_store_down;
static conf_set_fn conf_set_ull;
static conf_set_fn conf_set_commands;
static conf_set_fn conf_set_ratio;

static const struct conf_command conf_commands[] = {
    CONF_CMD("listen", conf_set_addr_or_off, listen, 0, 0, "host:port or off"),
    CONF_CMD("upstream", conf_set_addr, upstream, 0, 0, "host:port"),
    CONF_CMD("cluster", conf_set_seeds, seeds, 0, offsetof(struct conf, nseeds),
             "a list of host:port"),
    CONF_CMD("upstream_user", conf_set_string, upstream_user, 0, 0,
             CONF_WANT_STRING),
    CONF_CMD("upstream_password", conf_set_string, upstream_password, 0, 0,
             CONF_WANT_STRING),
    CONF_CMD("limiter_user", conf_set_string, limiter_user, 1, 0,
             "a non-empty string"),
    CONF_CMD("limiter_password", conf_set_string, limiter_password, 0, 0,
             CONF_WANT_STRING),
    CONF_CMD("requirepass", conf_set_string, requirepass, 0, 0,
             CONF_WANT_STRING),
    CONF_CMD("admin_password", conf_set_string, admin_password, 1, 0,
             "a non-empty string (leave the key out to turn limiter "
             "administration off)"),
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
    CONF_CMD("busy_reply_threshold_ms", conf_set_uint, busy_reply_threshold_ms,
             0, UINT_MAX, "a non-negative integer"),
    CONF_CMD("private_pool", conf_set_uint, private_pool, 0, 1024,
             "an integer from 0 to 1024"),
    CONF_CMD("private_max_per_node", conf_set_uint, private_max_per_node, 1,
             CONF_MAX_PRIVATE_MAX, "an integer from 1 to 1000000"),
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
    CONF_CMD("commands", conf_set_commands, commands, 0, 0,
             "ACL command rules such as \"+flushall -keys\""),
    CONF_CMD("refusal_cache_size", conf_set_uint, refusal_cache_size, 0,
             CONF_MAX_REFUSAL_CACHE, "an integer from 0 to 10000000"),
    CONF_CMD("embedded_max_keys", conf_set_uint, embedded_max_keys,
             CONF_MIN_EMBEDDED_MAX_KEYS, UINT_MAX,
             "an integer of at least 100"),
    CONF_CMD("limiter_wait_max_per_identity", conf_set_uint,
             limiter_wait_max_per_identity, 0, UINT_MAX,
             "a non-negative integer"),
    CONF_CMD("limiter_wait_max_total", conf_set_uint, limiter_wait_max_total, 0,
             UINT_MAX, "a non-negative integer"),
    CONF_CMD("limiter_wait_max_ms", conf_set_uint, limiter_wait_max_ms, 0,
             CONF_MAX_WAIT_MAX_MS, "an integer from 0 to 3600000"),
    CONF_CMD("embedded_max_bytes", conf_set_size, embedded_max_bytes, 1,
             ULLONG_MAX, CONF_WANT_SIZE),
    CONF_CMD("refusal_cache_max_bytes", conf_set_size, refusal_cache_max_bytes,
             1, ULLONG_MAX, CONF_WANT_SIZE),
    CONF_CMD("limiter_override_max_bytes", conf_set_size,
             limiter_override_max_bytes, 1, ULLONG_MAX, CONF_WANT_SIZE),
    CONF_CMD("limiter_pending_max_bytes", conf_set_size,
             limiter_pending_max_bytes, 1, ULLONG_MAX, CONF_WANT_SIZE),
    CONF_CMD("limiter_shadow", conf_set_bool, limiter_shadow, 0, 1,
             "yes or no"),
    CONF_CMD("metrics_listen", conf_set_addr, metrics_listen, 0, 0,
             "host:port"),
    CONF_CMD("metrics_near_limit_ratio", conf_set_ratio,
             metrics_near_limit_ratio, 0, 0,
             "a decimal number above 0 and at most 1, such as 0.8"),
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
    conf_yaml_diag_init(&ld->diag, name, err, errlen, 0);
    ld->c = c;
}

/* Reports `key: expected WANT, got "TEXT"` at `mark`. */
void conf_bad_text(struct conf_loader *ld, const yaml_mark_t *mark,
                   const struct conf_command *cmd, const char *want,
                   const char *text, size_t len)
{
    char shown[CONF_YAML_SHOW_SIZE];

    conf_yaml_show(shown, text, len);
    conf_yaml_error(&ld->diag, mark, "%s: expected %s, got \"%s\"", cmd->name,
                    want, shown);
}

/* Reports that the scalar `node` is not a valid value of `cmd`. */
void conf_bad_value(struct conf_loader *ld, const yaml_node_t *node,
                    const struct conf_command *cmd)
{
    conf_bad_text(ld, &node->start_mark, cmd, cmd->want,
                  (const char *)node->data.scalar.value,
                  node->data.scalar.length);
}

/* ---------------- Value parsing ---------------- */

void *conf_field(struct conf *c, const struct conf_command *cmd)
{
    return (char *)c + cmd->offset;
}

/* Parses decimal digits, then (when `units` is set) an optional size
 * suffix. No sign, blanks or fractions. A bad suffix is CONF_YAML_NUM_EINVAL
 * even when the digits overflow. */
static enum conf_yaml_num conf_parse_number(const char *s, bool units,
                                            unsigned long long *out)
{
    size_t n = strspn(s, "0123456789"), i;
    unsigned long long mult = 1;
    enum conf_yaml_num st;
    uint64_t v;

    if (s[n] != '\0') {
        if (!units) {
            return CONF_YAML_NUM_EINVAL;
        }
        for (i = 0; i < CONF_ARRAY_SIZE(conf_size_units); i++) {
            if (strcasecmp(s + n, conf_size_units[i].suffix) == 0) {
                break;
            }
        }
        if (i == CONF_ARRAY_SIZE(conf_size_units)) {
            return CONF_YAML_NUM_EINVAL;
        }
        mult = conf_size_units[i].mult;
    }
    st = conf_yaml_parse_decimal(s, n, 0, &v); /* digits only: no EPREC */
    if (st != CONF_YAML_NUM_OK) {
        return st;
    }
    if (v > ULLONG_MAX / mult) {
        return CONF_YAML_NUM_ERANGE;
    }
    *out = v * mult;
    return CONF_YAML_NUM_OK;
}

/* Reads the number of `node` within [cmd->min, cmd->max]. CONF_OK or
 * CONF_ERR after reporting. */
static int conf_number(struct conf_loader *ld, yaml_node_t *node,
                       const struct conf_command *cmd, bool units,
                       unsigned long long *out)
{
    const char *s =
        conf_yaml_scalar(&ld->diag, node, NULL, cmd->name, cmd->want);
    enum conf_yaml_num st;
    char shown[CONF_YAML_SHOW_SIZE];

    if (s == NULL) {
        return CONF_ERR;
    }
    st = conf_parse_number(s, units, out);
    if (st == CONF_YAML_NUM_EINVAL ||
        (st == CONF_YAML_NUM_OK && *out < cmd->min)) {
        conf_bad_value(ld, node, cmd);
        return CONF_ERR;
    }
    if (st == CONF_YAML_NUM_ERANGE || *out > cmd->max) {
        conf_yaml_show(shown, s, strlen(s));
        conf_yaml_error(&ld->diag, &node->start_mark,
                        "%s: \"%s\" is too large (max %llu)", cmd->name, shown,
                        cmd->max);
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

/* ---------------- Setters ---------------- */

int conf_set_addr(struct conf_loader *ld, const struct conf_command *cmd,
                  yaml_node_t *node)
{
    const char *s =
        conf_yaml_scalar(&ld->diag, node, NULL, cmd->name, cmd->want);

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
        conf_yaml_error(&ld->diag, &node->start_mark,
                        "%s: expected at least one host:port", cmd->name);
        return CONF_ERR;
    }
    if (top - it > CONF_MAX_SEEDS) {
        conf_yaml_error(&ld->diag, &node->start_mark,
                        "%s: at most %d seeds are allowed, got %td", cmd->name,
                        CONF_MAX_SEEDS, top - it);
        return CONF_ERR;
    }
    for (*n = 0; it < top; it++) {
        yaml_node_t *item = yaml_document_get_node(ld->doc, *it);
        const char *s =
            conf_yaml_scalar(&ld->diag, item, NULL, cmd->name, "host:port");

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
int conf_set_seeds(struct conf_loader *ld, const struct conf_command *cmd,
                   yaml_node_t *node)
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
        s = conf_yaml_scalar(&ld->diag, node, NULL, cmd->name, cmd->want);
        if (s == NULL) {
            return CONF_ERR;
        }
        switch (conf_addr_split(s, seeds, &n, &bad, &badlen)) {
        case CONF_ADDRS_OK:
            break;
        case CONF_ADDRS_EBAD:
            conf_bad_text(ld, &node->start_mark, cmd, "host:port", bad, badlen);
            return CONF_ERR;
        case CONF_ADDRS_EEMPTY:
            conf_yaml_error(&ld->diag, &node->start_mark,
                            "%s: expected at least one host:port", cmd->name);
            return CONF_ERR;
        case CONF_ADDRS_ETOOMANY:
            conf_yaml_error(&ld->diag, &node->start_mark,
                            "%s: at most %d seeds are allowed", cmd->name,
                            CONF_MAX_SEEDS);
            return CONF_ERR;
        }
    }
    memcpy(conf_field(ld->c, cmd), seeds, (size_t)n * sizeof(seeds[0]));
    *(int *)(void *)((char *)ld->c + cmd->max) = n;
    return CONF_OK;
}

/* Strings: null or "" clears an optional one (as `requirepass ""` does in
 * redis.conf); cmd->min = 1 makes it mandatory. */
int conf_set_string(struct conf_loader *ld, const struct conf_command *cmd,
                    yaml_node_t *node)
{
    const char *s;
    char **field = conf_field(ld->c, cmd);

    if (conf_yaml_is_null(node)) {
        s = "";
    } else {
        s = conf_yaml_scalar(&ld->diag, node, NULL, cmd->name, cmd->want);
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
    const char *s =
        conf_yaml_scalar(&ld->diag, node, NULL, cmd->name, cmd->want);
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
    const char *s =
        conf_yaml_scalar(&ld->diag, node, NULL, cmd->name, cmd->want);
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

int conf_set_bool(struct conf_loader *ld, const struct conf_command *cmd,
                  yaml_node_t *node)
{
    const char *s =
        conf_yaml_scalar(&ld->diag, node, NULL, cmd->name, cmd->want);
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

int conf_set_uint(struct conf_loader *ld, const struct conf_command *cmd,
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

int conf_set_size(struct conf_loader *ld, const struct conf_command *cmd,
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

/* A ratio: digits and at most one '.', above 0 and at most 1 (no sign,
 * exponent, inf or nan, which strtod alone would take). */
static int conf_set_ratio(struct conf_loader *ld,
                          const struct conf_command *cmd, yaml_node_t *node)
{
    const char *s =
        conf_yaml_scalar(&ld->diag, node, NULL, cmd->name, cmd->want);
    double *field = conf_field(ld->c, cmd);
    size_t k, dots = 0;
    char *end = NULL;
    double v;

    if (s == NULL) {
        return CONF_ERR;
    }
    for (k = 0; s[k] != '\0'; k++) {
        dots += s[k] == '.';
        if ((s[k] < '0' || s[k] > '9') && s[k] != '.') {
            break;
        }
    }
    v = k > 0 && s[k] == '\0' && dots <= 1 && s[0] != '.' ? strtod(s, &end) : 0;
    if (end == NULL || *end != '\0' || !(v > 0 && v <= 1)) {
        conf_bad_value(ld, node, cmd);
        return CONF_ERR;
    }
    *field = v;
    return CONF_OK;
}

/* One scalar of `commands:`: its rules, applied in order to `p`. An
 * unknown name is reported at the scalar. */
static int conf_commands_scalar(struct conf_loader *ld,
                                const struct conf_command *cmd,
                                yaml_node_t *node, struct cmdpolicy *p)
{
    const char *s =
        conf_yaml_scalar(&ld->diag, node, NULL, cmd->name, "a string of rules");
    const char *bad = NULL;
    size_t badlen = 0;
    int rc;

    if (s == NULL) {
        return CONF_ERR;
    }
    rc = cmdpolicy_apply_all(p, s, &bad, &badlen);
    if (rc != CMDPOLICY_OK) {
        char shown[CONF_YAML_SHOW_SIZE];
        conf_yaml_show(shown, bad, badlen);
        conf_yaml_error(&ld->diag, &node->start_mark, "%s: %s \"%s\"",
                        cmd->name, cmdpolicy_strerror(rc), shown);
        return CONF_ERR;
    }
    return CONF_OK;
}

/* commands: a string of rules or a sequence of them, applied in order
 * after what is there already (the default policy). */
static int conf_set_commands(struct conf_loader *ld,
                             const struct conf_command *cmd, yaml_node_t *node)
{
    struct cmdpolicy *field = conf_field(ld->c, cmd);
    struct cmdpolicy p = *field;
    yaml_node_item_t *it;
    int rc = CONF_OK;

    if (conf_yaml_is_null(node)) {
        return CONF_OK;
    }
    if (node->type != YAML_SEQUENCE_NODE) {
        rc = conf_commands_scalar(ld, cmd, node, &p);
    } else {
        for (it = node->data.sequence.items.start;
             it < node->data.sequence.items.top; it++) {
            yaml_node_t *item = yaml_document_get_node(ld->doc, *it);
            if (conf_commands_scalar(ld, cmd, item, &p) != CONF_OK) {
                rc = CONF_ERR;
            }
        }
    }
    if (rc == CONF_OK) {
        *field = p;
    }
    return rc;
}

/* ---------------- The walk ---------------- */

/* The sections of keys (conf_keys.h): the core table first. */
static const struct conf_section conf_sections[] = {
    { .cmds = conf_commands, .ncmds = CONF_ARRAY_SIZE(conf_commands) },
    CONF_SECRET_SECTION,
    CONF_SENTINEL_SECTION,
    CONF_TLS_SECTION,
    CONF_LEASE_SECTION,
    CONF_STATE_SECTION,
};

/* The key `name` (`len` bytes) and its index over all sections, or NULL. */
static const struct conf_command *conf_command_find(const char *name,
                                                    size_t len, size_t *index)
{
    size_t s, i, base = 0;

    for (s = 0; s < CONF_ARRAY_SIZE(conf_sections); s++) {
        const struct conf_section *sec = &conf_sections[s];

        for (i = 0; i < sec->ncmds; i++) {
            if (strlen(sec->cmds[i].name) == len &&
                memcmp(sec->cmds[i].name, name, len) == 0 &&
                base + i < CONF_MAX_KEYS) { /* tests/unit: all fit */
                *index = base + i;
                return &sec->cmds[i];
            }
        }
        base += sec->ncmds;
    }
    return NULL;
}

const yaml_node_t *conf_key_seen(const struct conf_loader *ld, const char *name)
{
    size_t index;

    if (conf_command_find(name, strlen(name), &index) == NULL) {
        return NULL;
    }
    return ld->seen[index];
}

/* Reports upstream and cluster set together, at the later of the two. */
static void conf_check_conflicts(struct conf_loader *ld)
{
    const yaml_node_t *up = conf_key_seen(ld, "upstream");
    const yaml_node_t *cluster = conf_key_seen(ld, "cluster");
    const yaml_node_t *later;
    size_t s;

    for (s = 0; s < CONF_ARRAY_SIZE(conf_sections); s++) {
        if (conf_sections[s].check != NULL) {
            conf_sections[s].check(ld);
        }
    }
    if (up == NULL || cluster == NULL) {
        return;
    }
    later = up->start_mark.index > cluster->start_mark.index ? up : cluster;
    conf_yaml_error(&ld->diag, &later->start_mark,
                    "upstream and cluster are mutually exclusive");
}

/* Applies every key of the top-level mapping. CONF_OK (errors, if any, are
 * counted in ld) or CONF_ENOMEM. */
static int conf_walk(struct conf_loader *ld, yaml_node_t *root)
{
    yaml_node_t *seen[CONF_MAX_KEYS] = { NULL };
    yaml_node_pair_t *pair;
    char shown[CONF_YAML_SHOW_SIZE];

    ld->seen = seen;
    for (pair = root->data.mapping.pairs.start;
         pair < root->data.mapping.pairs.top; pair++) {
        yaml_node_t *key = yaml_document_get_node(ld->doc, pair->key);
        yaml_node_t *value = yaml_document_get_node(ld->doc, pair->value);
        const struct conf_command *cmd;
        size_t i;

        if (key->type != YAML_SCALAR_NODE) {
            conf_yaml_error(&ld->diag, &key->start_mark,
                            "expected a scalar key, got %s",
                            conf_yaml_node_kind(key));
            continue;
        }
        cmd = conf_command_find((const char *)key->data.scalar.value,
                                key->data.scalar.length, &i);
        if (cmd == NULL) {
            conf_yaml_show(shown, (const char *)key->data.scalar.value,
                           key->data.scalar.length);
            conf_yaml_error(&ld->diag, &key->start_mark, "unknown key '%s'",
                            shown);
            continue;
        }
        if (seen[i] != NULL) {
            conf_yaml_error(&ld->diag, &key->start_mark,
                            "duplicate key '%s' (first at line %zu)", cmd->name,
                            seen[i]->start_mark.line + 1);
            continue;
        }
        seen[i] = key;
        if (cmd->set(ld, cmd, value) == CONF_ENOMEM) {
            conf_yaml_error(&ld->diag, NULL, "out of memory");
            return CONF_ENOMEM;
        }
    }
    conf_check_conflicts(ld);
    return CONF_OK;
}

/* Checks the shape of one loaded document and walks it. CONF_OK or
 * CONF_ENOMEM. */
static int conf_document(struct conf_loader *ld, yaml_document_t *doc)
{
    yaml_node_t *root = yaml_document_get_root_node(doc);

    ld->doc = doc;
    if (root == NULL || conf_yaml_is_null(root)) {
        return CONF_OK; /* empty file, comments only, or a bare "---" */
    }
    if (root->type != YAML_MAPPING_NODE) {
        conf_yaml_error(&ld->diag, &root->start_mark,
                        "top level: expected a mapping, got %s",
                        conf_yaml_node_kind(root));
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

    if (!yaml_parser_initialize(&parser)) {
        conf_yaml_error(&ld->diag, NULL, "out of memory");
        return CONF_ENOMEM;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        rc = conf_yaml_syntax_error(&ld->diag, &parser, text, len);
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
        rc = conf_yaml_syntax_error(&ld->diag, &parser, text, len);
        goto done;
    }
    root = yaml_document_get_root_node(&doc);
    if (root != NULL) {
        conf_yaml_error(&ld->diag, &root->start_mark,
                        "only one YAML document is allowed");
    }
    yaml_document_delete(&doc);

done:
    yaml_parser_delete(&parser);
    if (rc == CONF_ENOMEM) {
        return CONF_ENOMEM;
    }
    return ld->diag.nerrors > 0 ? CONF_ERR : CONF_OK;
}

/* ---------------- Public API ---------------- */

int conf_init(struct conf *c)
{
    size_t s;

    memset(c, 0, sizeof(*c));
    memcpy(c->listen.host, CONF_DEFAULT_LISTEN_HOST,
           sizeof(CONF_DEFAULT_LISTEN_HOST));
    c->listen.port = CONF_DEFAULT_LISTEN_PORT;
    c->log_level = CONF_DEFAULT_LOG_LEVEL;
    c->store_down = CONF_DEFAULT_STORE_DOWN;
    c->connect_timeout_ms = CONF_DEFAULT_CONNECT_TIMEOUT_MS;
    c->command_timeout_ms = CONF_DEFAULT_COMMAND_TIMEOUT_MS;
    c->busy_reply_threshold_ms = CONF_DEFAULT_BUSY_REPLY_THRESHOLD_MS;
    c->private_pool = CONF_DEFAULT_PRIVATE_POOL;
    c->private_max_per_node = CONF_DEFAULT_PRIVATE_MAX;
    c->max_clients = CONF_DEFAULT_MAX_CLIENTS;
    c->upstream_pool = CONF_DEFAULT_UPSTREAM_POOL;
    c->split_multikey = 1;
    c->max_pipeline = CONF_DEFAULT_MAX_PIPELINE;
    c->max_bulk_bytes = CONF_DEFAULT_MAX_BULK_BYTES;
    c->max_elements = CONF_DEFAULT_MAX_ELEMENTS;
    c->max_inline_bytes = CONF_DEFAULT_MAX_INLINE_BYTES;
    c->client_max_output_bytes = CONF_DEFAULT_CLIENT_MAX_OUTPUT_BYTES;
    c->refusal_cache_size = CONF_DEFAULT_REFUSAL_CACHE;
    cmdpolicy_init(&c->commands);
    c->embedded_max_keys = CONF_DEFAULT_EMBEDDED_MAX_KEYS;
    c->limiter_wait_max_per_identity = CONF_DEFAULT_WAIT_MAX_PER_IDENTITY;
    c->limiter_wait_max_total = CONF_DEFAULT_WAIT_MAX_TOTAL;
    c->limiter_wait_max_ms = CONF_DEFAULT_WAIT_MAX_MS;
    c->embedded_max_bytes = CONF_DEFAULT_EMBEDDED_MAX_BYTES;
    c->refusal_cache_max_bytes = CONF_DEFAULT_REFUSAL_CACHE_MAX_BYTES;
    c->limiter_override_max_bytes = CONF_DEFAULT_OVERRIDE_MAX_BYTES;
    c->limiter_pending_max_bytes = CONF_DEFAULT_PENDING_MAX_BYTES;
    c->metrics_near_limit_ratio = CONF_DEFAULT_NEAR_LIMIT_RATIO;
    for (s = 0; s < CONF_ARRAY_SIZE(conf_sections); s++) {
        if (conf_sections[s].defaults != NULL &&
            conf_sections[s].defaults(c) != CONF_OK) {
            return CONF_ENOMEM;
        }
    }
    return conf_set_str(&c->key_prefix, CONF_DEFAULT_KEY_PREFIX);
}

void conf_free(struct conf *c)
{
    char **owned[] = {
        &c->upstream_user,    &c->upstream_password, &c->limiter_user,
        &c->limiter_password, &c->requirepass,       &c->admin_password,
        &c->limits_file,      &c->key_prefix,
    };
    size_t i;

    for (i = 0; i < CONF_ARRAY_SIZE(owned); i++) {
        free(*owned[i]);
        *owned[i] = NULL;
    }
    for (i = 0; i < CONF_ARRAY_SIZE(conf_sections); i++) {
        if (conf_sections[i].free != NULL) {
            conf_sections[i].free(c);
        }
    }
}

int conf_load_file(struct conf *c, const char *path, char *err, size_t errlen)
{
    struct conf_loader ld;
    char *text = NULL;
    size_t len = 0;
    int rc;

    conf_loader_init(&ld, c, path, err, errlen);
    rc = conf_yaml_read_file(&ld.diag, path, CONF_MAX_FILE_BYTES, &text, &len);
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

int conf_parse_seeds(struct conf *c, const char *list)
{
    struct conf_addr seeds[CONF_MAX_SEEDS];
    const char *bad;
    size_t badlen;
    int n;

    if (list == NULL ||
        conf_addr_split(list, seeds, &n, &bad, &badlen) != CONF_ADDRS_OK) {
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
