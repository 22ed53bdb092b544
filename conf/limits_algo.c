/* limits_algo.c: the algorithms of limits.yaml as data.
 *
 * Each algorithm is one row of limits_algos: its name, a table of its
 * parameters (name, kind, offset in struct limits_limit, range, how a
 * factor scales it) and the check of the rules that span them (gcra's
 * emission interval, sliding_window's slots). Parsing, rendering, scaling
 * and checking all read the row, so nothing in conf/ switches on the
 * algorithm and a parameter is described once. The kinds carry the syntax
 * of the file's numbers (counts, durations with units, rates with six
 * decimals or inf).
 * Pure functions over constant tables; see conf/limits_impl.h for the
 * module's other files. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "conf/limits_impl.h"

#define LIMITS_MICRO     UINT64_C(1000000) /* rates and factors, in 1e-6 */
#define LIMITS_NS_PER_MS INT64_C(1000000)

/* ---------------- The table ---------------- */

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

/* An optional parameter of a feature that is off while it is 0: left
 * out of renderings and of the script's words then (terse). */
#define LIMITS_QUIET(key, k, field, hi)                                        \
    {                                                                          \
        .name = (key), .kind = (k), .scaling = LIMITS_S_KEEP,                  \
        .offset = LIMITS_OFF(field), .max = (hi), .optional = true, .dflt = 0, \
        .terse = true,                                                         \
    }

static const struct limits_param limits_token_bucket_params[] = {
    LIMITS_PARAM("capacity", LIMITS_K_COUNT, LIMITS_S_DIVIDE,
                 token_bucket.capacity, LIMITS_MAX_COUNT),
    LIMITS_PARAM("refill_per_sec", LIMITS_K_RATE, LIMITS_S_DIVIDE,
                 token_bucket.refill_per_sec_micro, LIMITS_MAX_RATE_MICRO),
    /* Warm-up (Guava's SmoothWarmingUp): see limits_token_bucket_check. */
    LIMITS_QUIET("warmup", LIMITS_K_DURATION, token_bucket.warmup_ms,
                 LIMITS_MAX_DURATION_MS),
    LIMITS_QUIET("cold_factor", LIMITS_K_COUNT, token_bucket.cold_factor,
                 LIMITS_MAX_COUNT),
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
    LIMITS_PARAM("window", LIMITS_K_WINDOW, LIMITS_S_KEEP,
                 fixed_window.window_ms, LIMITS_MAX_DURATION_MS),
    /* Shown only when set: the rules of numeric windows read as before. */
    {
        .name = "tz",
        .kind = LIMITS_K_TZ,
        .scaling = LIMITS_S_KEEP,
        .offset = LIMITS_OFF(fixed_window.tz_min),
        .max = LIMITS_MAX_TZ_MIN,
        .optional = true,
        .dflt = 0,
        .terse = true,
    },
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

/* concurrency: a count of slots (a factor divides it) and how long a
 * holder keeps one without renewing it. */
static const struct limits_param limits_concurrency_params[] = {
    LIMITS_PARAM("max", LIMITS_K_COUNT, LIMITS_S_DIVIDE, concurrency.max,
                 LIMITS_MAX_HOLDERS),
    LIMITS_OPTIONAL("lease", LIMITS_K_DURATION, LIMITS_S_KEEP,
                    concurrency.lease_ms, LIMITS_MAX_LEASE_MS,
                    LIMITS_DEFAULT_LEASE_MS),
};

/* gcra: the emission interval period / count, in ns as algorithms/gcra.c
 * computes it, must be at least 1 ns, and the burst window it spans must
 * fit an int64_t of ns. */
static const char *limits_gcra_check(const struct limits_limit *l)
{
    const struct limits_gcra *g = &l->u.gcra;
    int64_t ei_ns = g->period_ms * LIMITS_NS_PER_MS / g->count;

    if (ei_ns < 1) {
        return "period / count is under 1 ns (zero rates are not "
               "supported)";
    }
    if (g->max_burst + 1 > INT64_MAX / ei_ns) {
        return "(max_burst + 1) * period / count is longer than 292 "
               "years";
    }
    return NULL;
}

/* token_bucket's warm-up: the bounds of algorithms/token_bucket.h
 * (token_bucket_params_warmup; conf/ is a leaf and says them again): a
 * day at most, an integer cold_factor from 2 to 1000, and warmup * rate
 * from 1 to 1e9 tokens, so the warm-up math fits its integers. */
static const char *limits_token_bucket_check(const struct limits_limit *l)
{
    const struct limits_token_bucket *tb = &l->u.token_bucket;

    if (tb->warmup_ms == 0) {
        return tb->cold_factor != 0 ? "cold_factor needs warmup" : NULL;
    }
    if (tb->warmup_ms > 86400000) {
        return "warmup is longer than 1 day";
    }
    if (tb->cold_factor == 1 || tb->cold_factor > 1000) {
        return "cold_factor must be an integer from 2 to 1000";
    }
    if (tb->refill_per_sec_micro == LIMITS_RATE_INF) {
        return "warmup needs a finite refill_per_sec";
    }
    if (tb->refill_per_sec_micro >
            INT64_C(1000000000000000000) / tb->warmup_ms ||
        tb->warmup_ms * tb->refill_per_sec_micro < INT64_C(1000000000)) {
        return "warmup * refill_per_sec must be between 1 and 1e9 tokens";
    }
    return NULL;
}

/* sliding_window: whole slots, and a bounded count of them (each slot is
 * a field of a Redis hash). */
static const char *limits_sliding_window_check(const struct limits_limit *l)
{
    const struct limits_sliding_window *sw = &l->u.sliding_window;

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
}

/* fixed_window: a UTC offset places calendar windows; a numeric window is
 * aligned to the epoch, which no offset moves (a shifted day is `window:
 * day` with `tz`). */
static const char *limits_fixed_window_check(const struct limits_limit *l)
{
    const struct limits_fixed_window *fw = &l->u.fixed_window;

    if (fw->tz_min != 0 && fw->window_ms > 0) {
        return "tz needs a calendar window (window: day, week or month)";
    }
    return NULL;
}

#define LIMITS_ALGO(id, key, table, chk)                                       \
    [id] = {                                                                   \
        .algo = (id),                                                          \
        .name = (key),                                                         \
        .params = (table),                                                     \
        .nparams = LIMITS_ARRAY_SIZE(table),                                   \
        .check = (chk),                                                        \
    }

/* Indexed by enum limits_algo (each row says its index). */
static const struct limits_algo_def limits_algos[] = {
    LIMITS_ALGO(LIMITS_GCRA, "gcra", limits_gcra_params, limits_gcra_check),
    LIMITS_ALGO(LIMITS_TOKEN_BUCKET, "token_bucket", limits_token_bucket_params,
                limits_token_bucket_check),
    LIMITS_ALGO(LIMITS_LEAKY_BUCKET, "leaky_bucket", limits_leaky_bucket_params,
                NULL),
    LIMITS_ALGO(LIMITS_FIXED_WINDOW, "fixed_window", limits_fixed_window_params,
                limits_fixed_window_check),
    LIMITS_ALGO(LIMITS_SLIDING_WINDOW, "sliding_window",
                limits_sliding_window_params, limits_sliding_window_check),
    LIMITS_ALGO(LIMITS_SLIDING_LOG, "sliding_log", limits_sliding_log_params,
                NULL),
    LIMITS_ALGO(LIMITS_SLIDING_COUNTER, "sliding_counter",
                limits_sliding_counter_params, NULL),
    LIMITS_ALGO(LIMITS_CONCURRENCY, "concurrency", limits_concurrency_params,
                NULL),
};
/* A new algorithm is a row here: one per value of enum limits_algo. */
_Static_assert(LIMITS_ARRAY_SIZE(limits_algos) == LIMITS_CONCURRENCY + 1,
               "a value of enum limits_algo has no row in limits_algos");

/* Spellings of an unlimited rate (YAML's own is .inf). */
static const char *const limits_inf_names[] = { "inf", ".inf", "+inf", "+.inf",
                                                "infinity" };

int64_t *limits_field(struct limits_limit *l, const struct limits_param *p)
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
const struct limits_algo_def *limits_def(enum limits_algo algo)
{
    return (size_t)algo < LIMITS_ARRAY_SIZE(limits_algos)
               ? &limits_algos[algo]
               : &limits_unknown_algo;
}

const struct limits_algo_def *limits_algo_find(const char *name)
{
    size_t i;

    for (i = 0; i < LIMITS_ARRAY_SIZE(limits_algos); i++) {
        if (strcmp(name, limits_algos[i].name) == 0) {
            return &limits_algos[i];
        }
    }
    return NULL;
}

const struct limits_param *limits_param_find(const struct limits_algo_def *def,
                                             const char *name, size_t len)
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
const char *limits_check(const struct limits_limit *l)
{
    const struct limits_algo_def *def = limits_def(l->algo);

    if (def == &limits_unknown_algo) {
        return "unknown algorithm";
    }
    return def->check != NULL ? def->check(l) : NULL;
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

/* The calendar windows of fixed_window, by name. */
static const struct {
    const char *name;
    int64_t code; /* LIMITS_WINDOW_* */
} limits_calendar[] = {
    { "day", LIMITS_WINDOW_DAY },
    { "week", LIMITS_WINDOW_WEEK },
    { "month", LIMITS_WINDOW_MONTH },
};

/* Parses a UTC offset, exactly [+-]HH:MM, into minutes: EINVAL when
 * malformed ("+9", "+09:60"), ERANGE beyond 14:00. */
static enum conf_yaml_num limits_parse_tz(const char *s, int64_t *out)
{
    int64_t hh, mm;

    if (strlen(s) != 6 || (s[0] != '+' && s[0] != '-') || s[3] != ':' ||
        strspn(s + 1, "0123456789") != 2 || strspn(s + 4, "0123456789") != 2) {
        return CONF_YAML_NUM_EINVAL;
    }
    hh = (s[1] - '0') * 10 + (s[2] - '0');
    mm = (s[4] - '0') * 10 + (s[5] - '0');
    if (mm > 59) {
        return CONF_YAML_NUM_EINVAL;
    }
    if (hh * 60 + mm > LIMITS_MAX_TZ_MIN) {
        return CONF_YAML_NUM_ERANGE;
    }
    *out = s[0] == '-' ? -(hh * 60 + mm) : hh * 60 + mm;
    return CONF_YAML_NUM_OK;
}

bool limits_is_inf(const char *s)
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
enum conf_yaml_num limits_parse_param(const struct limits_param *p,
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
    case LIMITS_K_WINDOW:
        for (size_t i = 0; i < LIMITS_ARRAY_SIZE(limits_calendar); i++) {
            if (strcmp(s, limits_calendar[i].name) == 0) {
                *out = limits_calendar[i].code;
                return CONF_YAML_NUM_OK;
            }
        }
        st = limits_parse_duration(s, &v);
        break;
    case LIMITS_K_DURATION:
    case LIMITS_K_DURATION0:
        st = limits_parse_duration(s, &v);
        break;
    case LIMITS_K_TZ:
        return limits_parse_tz(s, out);
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

const char *limits_kind_want(enum limits_kind kind)
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
    case LIMITS_K_WINDOW:
        return "a positive duration such as 60, 1.5, 500ms or 2m, or day, "
               "week or month";
    case LIMITS_K_TZ:
        return "a UTC offset such as +09:00 or -05:30";
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
int limits_fmt_micro(char *out, size_t len, uint64_t micro)
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
void limits_fmt_value(char *out, size_t len, enum limits_kind kind, int64_t v)
{
    char num[32];

    for (size_t i = 0;
         kind == LIMITS_K_WINDOW && i < LIMITS_ARRAY_SIZE(limits_calendar);
         i++) {
        if (v == limits_calendar[i].code) {
            snprintf(out, len, "%s", limits_calendar[i].name);
            return;
        }
    }
    switch (kind) {
    case LIMITS_K_WINDOW: /* a duration */
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
    case LIMITS_K_TZ:
        snprintf(out, len, "%c%02lld:%02lld", v < 0 ? '-' : '+',
                 (long long)(v < 0 ? -v : v) / 60,
                 (long long)(v < 0 ? -v : v) % 60);
        return;
    case LIMITS_K_COUNT:
    case LIMITS_K_COUNT0:
    case LIMITS_K_MS:
        break;
    }
    snprintf(out, len, "%lld", (long long)v);
}

void limits_str_add(struct limits_str *s, const char *fmt, ...)
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

/* Writes "a, b, c" (the parameter names of `def`) into `out`. */
void limits_param_names(const struct limits_algo_def *def, char *out,
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

/* ---------------- Public API ---------------- */

size_t limits_params(const struct limits_limit *l,
                     int64_t out[LIMITS_MAX_PARAMS])
{
    const struct limits_algo_def *def = limits_def(l->algo);
    size_t i;

    for (i = 0; i < def->nparams && i < LIMITS_MAX_PARAMS; i++) {
        out[i] = limits_get(l, &def->params[i]);
    }
    /* A terse parameter at its default is left out at the end: the
     * script's words for a numeric fixed window stay what they were. */
    while (i > 0 && def->params[i - 1].terse &&
           out[i - 1] == def->params[i - 1].dflt) {
        i--;
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
        if (def->params[i].terse &&
            limits_get(l, &def->params[i]) == def->params[i].dflt) {
            continue;
        }
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
