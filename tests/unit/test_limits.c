/* Unit tests of conf/limits: loading limits.yaml (every algorithm, every
 * override kind, every error with its file:line:column), the hostile-input
 * caps, resolution of paths into levels and Redis keys, and the LIMITER
 * RULES rendering. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf/limits.h"
#include "conf/sha256.h"
#include "tests/support/px_test.h"

/* After px_test.h: criterion.h must come before its parameterized.h. */
#include <criterion/parameterized.h>

PX_TEST_SUITE(limits);

#define ERRLEN 16384

#define EXAMPLE_FILE PX_SOURCE_DIR "/conf/limits.example.yaml"

/* A case string that fills its array exactly compiles without its NUL. */
#define ASSERT_TERMINATED(a)                                                   \
    cr_assert_not_null(memchr((a), '\0', sizeof(a)), "case string too long")

static const char seed_yaml[] = "user:\n"
                                "  children:\n"
                                "    \"*\":\n"
                                "      limits: [15, 30, 60]\n"
                                "      children:\n"
                                "        trade:\n"
                                "          limits: [5, 10, 15]\n";

/* ---------------- Helpers ---------------- */

/* Loads `yaml` and fails unless it is accepted without a message. */
static struct limits_tree *load_ok(const char *yaml)
{
    struct limits_tree *t = NULL;
    char err[ERRLEN];
    int rc = limits_load_string("limits.yaml", yaml, &t, err, sizeof(err));

    cr_assert_eq(rc, LIMITS_OK, "rc %d: %.2000s\nfor YAML:\n%.300s", rc, err,
                 yaml);
    cr_assert_str_empty(err);
    cr_assert_not_null(t);
    return t;
}

/* Loads `yaml`, expects it to be refused with exactly `want`, and checks
 * that the output pointer was left alone. */
static void expect_error(const char *yaml, const char *want)
{
    struct limits_tree *t = NULL;
    static char err[1 << 17];
    int rc = limits_load_string("limits.yaml", yaml, &t, err, sizeof(err));

    cr_assert_eq(rc, LIMITS_ERR, "rc %d, accepted:\n%.300s", rc, yaml);
    cr_assert_null(t);
    cr_assert_str_eq(err, want,
                     "got:\n%.2000s\nwant:\n%.2000s\nfor YAML:\n%.300s", err,
                     want, yaml);
}

/* Resolves `path` with the default prefix; fails on a refused path. */
static void resolve(const struct limits_tree *t, const char *path,
                    struct limits_levels *lv)
{
    const char *why = NULL;
    int rc = limits_resolve(t, path, strlen(path), NULL, 0, lv, &why);

    cr_assert_eq(rc, LIMITS_OK, "%s: %s", path, why != NULL ? why : "");
}

/* Fails unless level `i` has this concrete path and key base. */
static void assert_level(const struct limits_levels *lv, size_t i,
                         const char *path, const char *key)
{
    const struct limits_level *l = &lv->level[i];

    cr_assert_lt(i, lv->n);
    cr_assert_eq(l->path_len, strlen(path), "level %zu", i);
    cr_assert_eq(memcmp(l->path, path, l->path_len), 0, "level %zu: %.*s", i,
                 (int)l->path_len, l->path);
    cr_assert_str_eq(l->key, key, "level %zu", i);
    cr_assert_eq(l->key_len, strlen(key));
}

/* The key of limit `i` of level `l`. */
static const char *limit_key(const struct limits_level *l, size_t i)
{
    static char out[4096];

    cr_assert_geq(limits_limit_key(l, i, out, sizeof(out)), 0);
    return out;
}

/* The rendering of one limit. */
static const char *fmt(const struct limits_limit *l)
{
    static char out[256];

    limits_format(l, out, sizeof(out));
    return out;
}

static struct limits_levels *levels_new(void)
{
    struct limits_levels *lv = malloc(LIMITS_LEVELS_BYTES);

    cr_assert_not_null(lv);
    return lv;
}

/* The tree's LIMITER RULES text (caller frees). */
static char *describe(const struct limits_tree *t)
{
    char *out = NULL;
    size_t len = 0;

    cr_assert_eq(limits_describe(t, false, true, &out, &len), LIMITS_OK);
    cr_assert_not_null(out);
    cr_assert_eq(strlen(out), len);
    return out;
}

/* ---------------- The seed schema and the example file ---------------- */

Test(limits, seed_schema_loads_two_gcra_rules)
{
    struct limits_tree *t = load_ok(seed_yaml);
    struct limits_levels *lv = levels_new();
    const struct limits_gcra *g;

    cr_assert_eq(limits_rule_count(t), 2);
    cr_assert_eq(limits_override_count(t), 0);
    resolve(t, "user:alex:trade", lv);
    cr_assert_eq(lv->n, 2);
    cr_assert_eq(lv->level[0].nlimits, 1);
    cr_assert_eq(lv->level[0].limits[0].algo, LIMITS_GCRA);
    g = &lv->level[0].limits[0].u.gcra;
    cr_assert_eq(g->max_burst, 15);
    cr_assert_eq(g->count, 30);
    cr_assert_eq(g->period_ms, 60000);
    g = &lv->level[1].limits[0].u.gcra;
    cr_assert_eq(g->max_burst, 5);
    cr_assert_eq(g->count, 10);
    cr_assert_eq(g->period_ms, 15000);
    free(lv);
    limits_free(t);
}

/* A copy keeps the levels of a resolved path in the room they need, with
 * its own text: resolving another path into the source changes nothing
 * of it. */
Test(limits, a_copy_of_resolved_levels_stands_alone)
{
    struct limits_tree *t = load_ok(seed_yaml);
    struct limits_levels *lv = levels_new(), *c;

    resolve(t, "user:alex:trade", lv);
    c = limits_levels_copy(lv);
    cr_assert_not_null(c);
    cr_assert_eq(c->n, 2);
    cr_assert_eq(c->ngroups, lv->ngroups);
    cr_assert_eq(c->nsegments, 3);
    cr_assert_eq(c->text_len, lv->text_len);
    /* Its text follows its two levels: no room kept for the other 30. */
    cr_assert_eq(c->text, (char *)&c->level[2]);
    /* The path and two key bases, each NUL-ended. */
    cr_assert_eq(c->text_len, strlen("user:alex:trade") + 1 +
                                  strlen("cellgate:{user:alex}") + 1 +
                                  strlen("cellgate:{user:alex}:trade") + 1);
    resolve(t, "user:bob", lv);
    cr_assert_eq(lv->n, 1);
    for (size_t i = 0; i < c->n; i++) {
        const struct limits_level *l = &c->level[i];

        cr_assert(l->path >= c->text && l->path < c->text + c->text_len);
        cr_assert(l->key >= c->text && l->key < c->text + c->text_len);
        cr_assert_eq(l->tag, l->key + strlen("cellgate:{"));
        cr_assert_eq(memcmp(l->tag, "user:alex", l->tag_len), 0);
        cr_assert_eq(l->tag_len, strlen("user:alex"));
    }
    cr_assert_eq(c->level[0].path_len, strlen("user:alex"));
    cr_assert_eq(memcmp(c->level[1].path, "user:alex:trade", 15), 0);
    cr_assert_str_eq(c->level[0].key, "cellgate:{user:alex}");
    cr_assert_str_eq(c->level[1].key, "cellgate:{user:alex}:trade");
    cr_assert_eq(c->level[1].limits[0].u.gcra.count, 10);
    free(c);
    free(lv);
    limits_free(t);
}

/* Each node with limits is a numbered rule with its pattern, and a level
 * names its rule; the tree keeps the file's SHA-256. */
Test(limits, rules_have_patterns_and_levels_name_them)
{
    struct limits_tree *t = load_ok(seed_yaml);
    struct limits_levels *lv = levels_new();
    char sha[SHA256_HEX_LEN];

    cr_assert_eq(limits_rule_count(t), 2);
    cr_assert_str_eq(limits_rule_pattern(t, 0), "user:*");
    cr_assert_str_eq(limits_rule_pattern(t, 1), "user:*:trade");
    cr_assert_null(limits_rule_pattern(t, 2));
    resolve(t, "user:alex:trade", lv);
    cr_assert_eq(lv->n, 2);
    cr_assert_str_eq(limits_rule_pattern(t, lv->level[0].rule), "user:*");
    cr_assert_str_eq(limits_rule_pattern(t, lv->level[1].rule), "user:*:trade");
    sha256_hex(seed_yaml, strlen(seed_yaml), sha);
    cr_assert_str_eq(limits_sha256(t), sha);
    cr_assert_null(limits_sha256(NULL));
    free(lv);
    limits_free(t);
}

Test(limits, seed_path_keys_share_the_identity_tag)
{
    struct limits_tree *t = load_ok(seed_yaml);
    struct limits_levels *lv = levels_new();

    resolve(t, "user:alex:trade", lv);
    cr_assert_eq(lv->n, 2);
    cr_assert_eq(lv->ngroups, 1);
    cr_assert_eq(lv->nsegments, 3);
    cr_assert_eq(lv->matched, 3);
    assert_level(lv, 0, "user:alex", "cellgate:{user:alex}");
    assert_level(lv, 1, "user:alex:trade", "cellgate:{user:alex}:trade");
    cr_assert_eq(lv->level[0].depth, 2);
    cr_assert_eq(lv->level[1].depth, 3);
    cr_assert(lv->level[0].wildcard);
    cr_assert_not(lv->level[1].wildcard);
    cr_assert_eq(lv->level[0].group, 0);
    cr_assert_eq(lv->level[1].group, 0);
    cr_assert_eq(lv->level[1].tag_len, strlen("user:alex"));
    cr_assert_eq(memcmp(lv->level[1].tag, "user:alex", 9), 0);
    cr_assert_str_eq(limit_key(&lv->level[0], 0),
                     "cellgate:{user:alex}#0:gcra");
    cr_assert_str_eq(limit_key(&lv->level[1], 0),
                     "cellgate:{user:alex}:trade#0:gcra");
    cr_assert_not(lv->level[0].overridden);
    cr_assert_not(lv->level[0].unlimited);
    free(lv);
    limits_free(t);
}

Test(limits, example_file_loads_and_resolves)
{
    struct limits_tree *t = NULL;
    struct limits_levels *lv = levels_new();
    char err[ERRLEN];

    cr_assert_eq(limits_load_file(EXAMPLE_FILE, &t, err, sizeof(err)),
                 LIMITS_OK, "%s", err);
    cr_assert_str_empty(err);
    cr_assert_eq(limits_rule_count(t), 7);
    cr_assert_eq(limits_override_count(t), 5);

    /* The factor 2 of user:alex halves the burst and doubles the period. */
    resolve(t, "user:alex:trade", lv);
    cr_assert_eq(lv->n, 2);
    cr_assert(lv->level[0].overridden);
    cr_assert_str_eq(fmt(&lv->level[0].limits[0]),
                     "gcra(max_burst=7,count=30,period=120s)");
    cr_assert_str_eq(fmt(&lv->level[1].limits[0]),
                     "gcra(max_burst=5,count=10,period=15s)");

    /* A level above the wildcard lives in a slot of its own. */
    resolve(t, "api:k1:search", lv);
    cr_assert_eq(lv->n, 3);
    cr_assert_eq(lv->ngroups, 2);
    assert_level(lv, 0, "api", "cellgate:{api}");
    assert_level(lv, 1, "api:k1", "cellgate:{api:k1}");
    assert_level(lv, 2, "api:k1:search", "cellgate:{api:k1}:search");
    cr_assert_eq(lv->level[0].group, 0);
    cr_assert_eq(lv->level[1].group, 1);
    cr_assert_eq(lv->level[2].group, 1);
    cr_assert_eq(lv->level[1].nlimits, 2);
    cr_assert_str_eq(limit_key(&lv->level[1], 1),
                     "cellgate:{api:k1}#1:sliding_counter");
    cr_assert_str_eq(fmt(&lv->level[2].limits[0]),
                     "token_bucket(capacity=20,refill_per_sec=2.5)");

    /* Parameters override (NERD style) on the token bucket. */
    resolve(t, "api:partner:search", lv);
    cr_assert(lv->level[2].overridden);
    cr_assert_str_eq(fmt(&lv->level[2].limits[0]),
                     "token_bucket(capacity=200,refill_per_sec=50)");

    /* The exempting empty node beats the wildcard. */
    resolve(t, "user:healthcheck", lv);
    cr_assert_eq(lv->n, 0);
    cr_assert_eq(lv->matched, 2);

    /* inf and unlimited: true. */
    resolve(t, "api:internal", lv);
    cr_assert_eq(lv->n, 2);
    cr_assert(lv->level[1].unlimited);
    cr_assert_eq(lv->level[1].nlimits, 0);
    cr_assert_null(lv->level[1].limits);
    resolve(t, "user:ops:trade", lv);
    cr_assert(lv->level[0].unlimited);
    cr_assert_not(lv->level[1].unlimited);

    /* A replacement list. */
    resolve(t, "user:carol:trade", lv);
    cr_assert_str_eq(fmt(&lv->level[1].limits[0]),
                     "gcra(max_burst=20,count=60,period=60s)");

    resolve(t, "login:10.0.0.1", lv);
    cr_assert_eq(lv->n, 1);
    cr_assert_str_eq(fmt(&lv->level[0].limits[0]),
                     "sliding_log(max=5,window=900s,min_interval=1s)");
    resolve(t, "api:k1:upload", lv);
    cr_assert_str_eq(fmt(&lv->level[2].limits[0]),
                     "leaky_bucket(size=5,drip_ms=2000,drip_size=1)");
    free(lv);
    limits_free(t);
}

Test(limits, example_file_is_described_in_a_fixed_order)
{
    struct limits_tree *t = NULL;
    char err[ERRLEN], *text;

    cr_assert_eq(limits_load_file(EXAMPLE_FILE, &t, err, sizeof(err)),
                 LIMITS_OK, "%s", err);
    text = describe(t);
    cr_assert_str_eq(
        text,
        "api  fixed_window(max=100000,window=60s)\n"
        "api:*  sliding_window(max=600,window=60s,resolution=1s) "
        "sliding_counter(max=20000,window=3600s)\n"
        "api:*:search  token_bucket(capacity=20,refill_per_sec=2.5)\n"
        "api:*:upload  leaky_bucket(size=5,drip_ms=2000,drip_size=1)\n"
        "login:*  sliding_log(max=5,window=900s,min_interval=1s)\n"
        "user:*  gcra(max_burst=15,count=30,period=60s)\n"
        "user:*:trade  gcra(max_burst=5,count=10,period=15s)\n"
        "override api:internal  unlimited\n"
        "override api:partner:search  "
        "token_bucket(capacity=200,refill_per_sec=50)\n"
        "override user:alex  factor=2 gcra(max_burst=7,count=30,period=120s)\n"
        "override user:carol:trade  gcra(max_burst=20,count=60,period=60s)\n"
        "override user:ops  unlimited\n");
    free(text);
    limits_free(t);
}

/* ---------------- Every algorithm ---------------- */

Test(limits, every_algorithm_stores_its_parameters_in_documented_units)
{
    static const char yaml[] = "a:\n"
                               "  limits:\n"
                               "    - algorithm: gcra\n"
                               "      max_burst: 0\n"
                               "      count: 3\n"
                               "      period: 1.5\n"
                               "    - algorithm: token_bucket\n"
                               "      capacity: 10\n"
                               "      refill_per_sec: 0.25\n"
                               "    - algorithm: token_bucket\n"
                               "      capacity: 1\n"
                               "      refill_per_sec: .inf\n"
                               "    - algorithm: leaky_bucket\n"
                               "      size: 4\n"
                               "      drip_ms: 250\n"
                               "      drip_size: 2\n"
                               "    - algorithm: leaky_bucket\n"
                               "      size: 4\n"
                               "      drip_ms: 1000\n"
                               "    - algorithm: fixed_window\n"
                               "      max: 100\n"
                               "      window: 2m\n"
                               "    - algorithm: sliding_window\n"
                               "      max: 50\n"
                               "      window: 1h\n"
                               "      resolution: 1s\n"
                               "    - algorithm: sliding_log\n"
                               "      max: 5\n"
                               "      window: 500ms\n"
                               "b:\n"
                               "  limits:\n"
                               "    - algorithm: sliding_log\n"
                               "      max: 5\n"
                               "      window: 1d\n"
                               "      min_interval: 0.1\n"
                               "    - {algorithm: sliding_counter, max: 7, "
                               "window: 90}\n"
                               "    - {max_burst: 2, count: 4, period: 8}\n";
    struct limits_tree *t = load_ok(yaml);
    struct limits_levels *lv = levels_new();
    const struct limits_limit *l;

    cr_assert_eq(limits_rule_count(t), 2);
    resolve(t, "a", lv);
    cr_assert_eq(lv->n, 1);
    cr_assert_eq(lv->level[0].nlimits, 8);
    l = lv->level[0].limits;
    cr_assert_eq(l[0].algo, LIMITS_GCRA);
    cr_assert_eq(l[0].u.gcra.max_burst, 0);
    cr_assert_eq(l[0].u.gcra.count, 3);
    cr_assert_eq(l[0].u.gcra.period_ms, 1500);
    cr_assert_eq(l[1].algo, LIMITS_TOKEN_BUCKET);
    cr_assert_eq(l[1].u.token_bucket.capacity, 10);
    cr_assert_eq(l[1].u.token_bucket.refill_per_sec_micro, 250000);
    cr_assert_eq(l[2].u.token_bucket.refill_per_sec_micro, LIMITS_RATE_INF);
    cr_assert_eq(l[3].algo, LIMITS_LEAKY_BUCKET);
    cr_assert_eq(l[3].u.leaky_bucket.size, 4);
    cr_assert_eq(l[3].u.leaky_bucket.drip_ms, 250);
    cr_assert_eq(l[3].u.leaky_bucket.drip_size, 2);
    cr_assert_eq(l[4].u.leaky_bucket.drip_size, 1, "default drip_size");
    cr_assert_eq(l[5].algo, LIMITS_FIXED_WINDOW);
    cr_assert_eq(l[5].u.fixed_window.max, 100);
    cr_assert_eq(l[5].u.fixed_window.window_ms, 120000);
    cr_assert_eq(l[6].algo, LIMITS_SLIDING_WINDOW);
    cr_assert_eq(l[6].u.sliding_window.max, 50);
    cr_assert_eq(l[6].u.sliding_window.window_ms, 3600000);
    cr_assert_eq(l[6].u.sliding_window.resolution_ms, 1000);
    cr_assert_eq(l[7].algo, LIMITS_SLIDING_LOG);
    cr_assert_eq(l[7].u.sliding_log.max, 5);
    cr_assert_eq(l[7].u.sliding_log.window_ms, 500);
    cr_assert_eq(l[7].u.sliding_log.min_interval_ms, 0, "default");
    resolve(t, "b", lv);
    l = lv->level[0].limits;
    cr_assert_eq(lv->level[0].nlimits, 3);
    cr_assert_eq(l[0].u.sliding_log.window_ms, 86400000);
    cr_assert_eq(l[0].u.sliding_log.min_interval_ms, 100);
    cr_assert_eq(l[1].algo, LIMITS_SLIDING_COUNTER);
    cr_assert_eq(l[1].u.sliding_counter.max, 7);
    cr_assert_eq(l[1].u.sliding_counter.window_ms, 90000);
    cr_assert_eq(l[2].algo, LIMITS_GCRA, "algorithm: defaults to gcra");
    cr_assert_eq(l[2].u.gcra.max_burst, 2);
    cr_assert_eq(l[2].u.gcra.count, 4);
    cr_assert_eq(l[2].u.gcra.period_ms, 8000);
    cr_assert_str_eq(limit_key(&lv->level[0], 2), "cellgate:{b}#2:gcra");
    free(lv);
    limits_free(t);
}

Test(limits, format_renders_each_algorithm_as_the_file_says_it)
{
    struct limits_limit l;
    char small[8];

    memset(&l, 0, sizeof(l));
    l.algo = LIMITS_GCRA;
    l.u.gcra = (struct limits_gcra){ .max_burst = 15,
                                     .count = 30,
                                     .period_ms = 60000 };
    cr_assert_str_eq(fmt(&l), "gcra(max_burst=15,count=30,period=60s)");
    l.u.gcra.period_ms = 1250;
    cr_assert_str_eq(fmt(&l), "gcra(max_burst=15,count=30,period=1.25s)");
    l.u.gcra.period_ms = 1;
    cr_assert_str_eq(fmt(&l), "gcra(max_burst=15,count=30,period=0.001s)");
    l.algo = LIMITS_TOKEN_BUCKET;
    l.u.token_bucket = (struct limits_token_bucket){
        .capacity = 3,
        .refill_per_sec_micro = 1,
    };
    cr_assert_str_eq(fmt(&l),
                     "token_bucket(capacity=3,refill_per_sec=0.000001)");
    l.u.token_bucket.refill_per_sec_micro = LIMITS_RATE_INF;
    cr_assert_str_eq(fmt(&l), "token_bucket(capacity=3,refill_per_sec=inf)");
    l.algo = LIMITS_SLIDING_WINDOW;
    l.u.sliding_window = (struct limits_sliding_window){
        .max = 9,
        .window_ms = 10000,
        .resolution_ms = 500,
    };
    cr_assert_str_eq(fmt(&l),
                     "sliding_window(max=9,window=10s,resolution=0.5s)");
    l.algo = LIMITS_SLIDING_COUNTER;
    l.u.sliding_counter =
        (struct limits_sliding_counter){ .max = 2, .window_ms = 1000 };
    cr_assert_str_eq(fmt(&l), "sliding_counter(max=2,window=1s)");
    l.algo = LIMITS_FIXED_WINDOW;
    cr_assert_eq(limits_format(&l, small, sizeof(small)),
                 (int)strlen("fixed_window(max=2,window=1s)"));
    cr_assert_str_eq(small, "fixed_w");
    cr_assert_str_eq(limits_algo_name(LIMITS_SLIDING_LOG), "sliding_log");
    cr_assert_str_eq(limits_algo_name((enum limits_algo)99), "?");
}

/* ---------------- Values: durations, counts, rates ---------------- */

/* Criterion copies parameters into the worker process, so case tables hold
 * their strings inline: a pointer to a literal would not survive the copy. */

struct value_case {
    char text[32];   /* the value, written quoted */
    long long value; /* expected stored value when err is "" */
    char err[160];   /* the exact error, or "" */
};

/* Loads one value of `param` of `algo` (written quoted at line 5, column
 * col) and checks the stored value or the error. */
static void check_value(const struct value_case *tc, const char *head,
                        const char *param, int which)
{
    struct limits_tree *t = NULL;
    struct limits_levels *lv;
    char yaml[512], err[ERRLEN];
    int rc;

    ASSERT_TERMINATED(tc->text);
    ASSERT_TERMINATED(tc->err);
    snprintf(yaml, sizeof(yaml), "%s      %s: \"%s\"\n", head, param, tc->text);
    rc = limits_load_string("limits.yaml", yaml, &t, err, sizeof(err));
    if (tc->err[0] != '\0') {
        cr_assert_eq(rc, LIMITS_ERR, "\"%s\" accepted", tc->text);
        cr_assert_str_eq(err, tc->err, "\"%s\"", tc->text);
        return;
    }
    cr_assert_eq(rc, LIMITS_OK, "\"%s\": %s", tc->text, err);
    lv = levels_new();
    resolve(t, "u", lv);
    switch (which) {
    case 0:
        cr_assert_eq(lv->level[0].limits[0].u.fixed_window.window_ms, tc->value,
                     "\"%s\"", tc->text);
        break;
    case 1:
        cr_assert_eq(lv->level[0].limits[0].u.fixed_window.max, tc->value,
                     "\"%s\"", tc->text);
        break;
    default:
        cr_assert_eq(lv->level[0].limits[0].u.token_bucket.refill_per_sec_micro,
                     tc->value, "\"%s\"", tc->text);
        break;
    }
    free(lv);
    limits_free(t);
}

#define WANT_WINDOW "a positive duration such as 60, 1.5, 500ms or 2m"
#define LOC_WINDOW  "limits.yaml:5:15: u: window: "

ParameterizedTestParameters(limits, durations_are_seconds_or_take_a_unit)
{
    static struct value_case cases[] = {
        { "60", 60000, "" },
        { "1.5", 1500, "" },
        { "0.001", 1, "" },
        { "1.250", 1250, "" },
        { "2.5000", 2500, "" },
        { "007", 7000, "" },
        { "500ms", 500, "" },
        { "1s", 1000, "" },
        { "2m", 120000, "" },
        { "0.5m", 30000, "" },
        { "1.5h", 5400000, "" },
        { "1d", 86400000, "" },
        { "3650d", 315360000000LL, "" },
        { "0", 0, LOC_WINDOW "expected " WANT_WINDOW ", got \"0\"" },
        { "0ms", 0, LOC_WINDOW "expected " WANT_WINDOW ", got \"0ms\"" },
        { "", 0, LOC_WINDOW "expected " WANT_WINDOW ", got \"\"" },
        { "-1", 0, LOC_WINDOW "expected " WANT_WINDOW ", got \"-1\"" },
        { "+1", 0, LOC_WINDOW "expected " WANT_WINDOW ", got \"+1\"" },
        { "1e3", 0, LOC_WINDOW "expected " WANT_WINDOW ", got \"1e3\"" },
        { "1 s", 0, LOC_WINDOW "expected " WANT_WINDOW ", got \"1 s\"" },
        { "1S", 0, LOC_WINDOW "expected " WANT_WINDOW ", got \"1S\"" },
        { "1.", 0, LOC_WINDOW "expected " WANT_WINDOW ", got \"1.\"" },
        { ".5", 0, LOC_WINDOW "expected " WANT_WINDOW ", got \".5\"" },
        { "1.2.3", 0, LOC_WINDOW "expected " WANT_WINDOW ", got \"1.2.3\"" },
        { "ms", 0, LOC_WINDOW "expected " WANT_WINDOW ", got \"ms\"" },
        { "1w", 0, LOC_WINDOW "expected " WANT_WINDOW ", got \"1w\"" },
        { "0.0005", 0, LOC_WINDOW "\"0.0005\" is finer than 1 ms" },
        { "1.5ms", 0, LOC_WINDOW "\"1.5ms\" is finer than 1 ms" },
        { "3651d", 0, LOC_WINDOW "\"3651d\" is too large (max 3650d)" },
        { "315360000.001", 0,
          LOC_WINDOW "\"315360000.001\" is too large (max 3650d)" },
        { "99999999999999999999h", 0,
          LOC_WINDOW "\"99999999999999999999h\" is too large (max 3650d)" },
    };

    return cr_make_param_array(struct value_case, cases,
                               sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct value_case *tc, limits,
                  durations_are_seconds_or_take_a_unit)
{
    check_value(tc,
                "u:\n  limits:\n    - algorithm: fixed_window\n      max: 1\n",
                "window", 0);
}

#define LOC_MAX "limits.yaml:5:12: u: max: "

ParameterizedTestParameters(limits, counts_are_positive_integers_up_to_2_53)
{
    static struct value_case cases[] = {
        { "1", 1, "" },
        { "007", 7, "" },
        { "9007199254740991", 9007199254740991LL, "" },
        { "0", 0, LOC_MAX "expected a positive integer, got \"0\"" },
        { "-3", 0, LOC_MAX "expected a positive integer, got \"-3\"" },
        { "1.0", 0, LOC_MAX "expected a positive integer, got \"1.0\"" },
        { "1e2", 0, LOC_MAX "expected a positive integer, got \"1e2\"" },
        { "0x10", 0, LOC_MAX "expected a positive integer, got \"0x10\"" },
        { "ten", 0, LOC_MAX "expected a positive integer, got \"ten\"" },
        { "9007199254740992", 0,
          LOC_MAX "\"9007199254740992\" is too large (max 9007199254740991)" },
        { "18446744073709551616", 0,
          LOC_MAX "\"18446744073709551616\" is too large (max "
                  "9007199254740991)" },
    };

    return cr_make_param_array(struct value_case, cases,
                               sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct value_case *tc, limits,
                  counts_are_positive_integers_up_to_2_53)
{
    check_value(
        tc, "u:\n  limits:\n    - algorithm: fixed_window\n      window: 1\n",
        "max", 1);
}

#define LOC_RATE "limits.yaml:5:23: u: refill_per_sec: "

ParameterizedTestParameters(limits, rates_take_six_decimals_or_inf)
{
    static struct value_case cases[] = {
        { "1", 1000000, "" },
        { "0.5", 500000, "" },
        { "2.25", 2250000, "" },
        { "0.000001", 1, "" },
        { "1000000000", 1000000000000000LL, "" },
        { "inf", LIMITS_RATE_INF, "" },
        { ".inf", LIMITS_RATE_INF, "" },
        { "+.inf", LIMITS_RATE_INF, "" },
        { "Infinity", LIMITS_RATE_INF, "" },
        { "INF", LIMITS_RATE_INF, "" },
        { "0", 0, LOC_RATE "expected a positive number or inf, got \"0\"" },
        { "0.0", 0, LOC_RATE "expected a positive number or inf, got \"0.0\"" },
        { "-1", 0, LOC_RATE "expected a positive number or inf, got \"-1\"" },
        { "-inf", 0,
          LOC_RATE "expected a positive number or inf, got \"-inf\"" },
        { "0.0000001", 0, LOC_RATE "\"0.0000001\" is finer than 0.000001" },
        { "1000000001", 0,
          LOC_RATE "\"1000000001\" is too large (max 1000000000)" },
    };

    return cr_make_param_array(struct value_case, cases,
                               sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct value_case *tc, limits, rates_take_six_decimals_or_inf)
{
    check_value(
        tc, "u:\n  limits:\n    - algorithm: token_bucket\n      capacity: 1\n",
        "refill_per_sec", 2);
}

/* ---------------- Errors, one kind at a time ---------------- */

struct error_case {
    char yaml[256]; /* the whole file */
    char err[384];  /* the exact error text */
};

#define ONE_LIMIT_USER "user:\n  limits: [1, 1, 1]\n"

ParameterizedTestParameters(limits, each_error_names_file_line_and_column)
{
    static struct error_case cases[] = {
        /* The shape of the file. */
        { "", "limits.yaml:1:1: empty file: expected a mapping of path "
              "segments" },
        { "# only a comment\n", "limits.yaml:1:1: empty file: expected a "
                                "mapping of path segments" },
        { "~\n", "limits.yaml:1:1: empty file: expected a mapping of path "
                 "segments" },
        { "- user\n", "limits.yaml:1:1: top level: expected a mapping of path "
                      "segments, got a sequence" },
        { "\n  hello\n", "limits.yaml:2:3: top level: expected a mapping of "
                         "path segments, got a scalar" },
        { "a: ~\n---\nb: ~\n",
          "limits.yaml:2:1: only one YAML document is allowed" },
        { "user:\n  limits: [1, 1, 1\n",
          "limits.yaml:3:1: did not find expected ',' or ']' (while parsing a "
          "flow sequence at line 2, column 11)" },
        { "a: *nowhere\n", "limits.yaml:1:4: YAML aliases are not supported "
                           "(*nowhere): write the tree out in full" },
        { "a: &x {limits: [1, 1, 1]}\nb: *x\n",
          "limits.yaml:2:4: YAML aliases are not supported (*x): write the "
          "tree out in full" },
        { "a: \"\\x01\"\nb: \x01\n",
          "limits.yaml:2:4: control characters are not allowed (byte 0x01)" },
        /* Nodes. */
        { "user:\n  limts: [1, 1, 1]\n",
          "limits.yaml:2:3: user: unknown key 'limts' (expected limits, "
          "children or shadow)" },
        { "user: [15, 30, 60]\n",
          "limits.yaml:1:7: user: expected a mapping with limits and/or "
          "children, got a sequence" },
        { "user:\n  children: [a]\n",
          "limits.yaml:2:13: user: children: expected a mapping of path "
          "segments, got a sequence" },
        { "user:\n  limits: [1, 1, 1]\n  limits: [2, 2, 2]\n",
          "limits.yaml:3:3: user: duplicate key 'limits' (first at line 2)" },
        { "user:\n  children: {}\n  children: {}\n",
          "limits.yaml:3:3: user: duplicate key 'children' (first at line "
          "2)" },
        { "user:\n  ? [x]\n  : 1\n",
          "limits.yaml:2:5: user: expected a scalar key, got a sequence" },
        /* Segments. */
        { "user:\n  children:\n    a: ~\n    b: ~\n    a: ~\n",
          "limits.yaml:5:5: user: duplicate key 'a' (first at line 3)" },
        { "user: ~\n\"user\": ~\n",
          "limits.yaml:2:1: top level: duplicate key 'user' (first at line "
          "1)" },
        { "\"*\": ~\n'*': ~\n",
          "limits.yaml:2:1: top level: duplicate key '*' (first at line 1)" },
        { "\"a:b\": ~\n", "limits.yaml:1:1: top level: segment \"a:b\" "
                          "contains ':', the path separator" },
        { "\"a{b\": ~\n", "limits.yaml:1:1: top level: segment \"a{b\" "
                          "contains '{' or '}', which would move the Redis "
                          "hash tag" },
        { "user:\n  children:\n    \"b}\": ~\n",
          "limits.yaml:3:5: user: segment \"b}\" contains '{' or '}', which "
          "would move the Redis hash tag" },
        { "user:\n  children:\n    \"*x\": ~\n",
          "limits.yaml:3:5: user: segment \"*x\" mixes '*' with text: a "
          "wildcard is the whole segment \"*\"" },
        { "user:\n  children:\n    \"a\\tb\": ~\n",
          "limits.yaml:3:5: user: segment \"a?b\" contains a control "
          "character" },
        { "\"\": ~\n", "limits.yaml:1:1: top level: segment \"\" is empty" },
        { "? [a]\n: ~\n",
          "limits.yaml:1:3: top level: expected a scalar key, got a "
          "sequence" },
        /* limits: */
        { "user:\n  limits: 5\n",
          "limits.yaml:2:11: user: limits: expected [max_burst, count, "
          "period] or a list of limit mappings, got a scalar" },
        { "user:\n  limits: {algorithm: gcra}\n",
          "limits.yaml:2:11: user: limits: expected [max_burst, count, "
          "period] or a list of limit mappings, got a mapping" },
        { "user:\n  limits: []\n",
          "limits.yaml:2:11: user: limits: expected at least one limit" },
        { "user:\n  limits: [1, 2]\n",
          "limits.yaml:2:11: user: limits: the shorthand is [max_burst, "
          "count, period], got 2 values" },
        { "user:\n  limits: [1, [2], 3]\n",
          "limits.yaml:2:15: user: count: expected a positive integer, got a "
          "sequence" },
        { "user:\n  limits: [15, 0, 60]\n",
          "limits.yaml:2:16: user: count: expected a positive integer, got "
          "\"0\"" },
        { "user:\n  limits: [-1, 1, 1]\n",
          "limits.yaml:2:12: user: max_burst: expected a non-negative "
          "integer, got \"-1\"" },
        { "user:\n  limits: [1, \"1\\0\", 1]\n",
          "limits.yaml:2:15: user: count: the value contains a NUL byte" },
        { "user:\n  limits: [{count: 1, max_burst: 1, period: 1}, 5]\n",
          "limits.yaml:2:49: user: limits: expected a mapping naming an "
          "algorithm, got a scalar" },
        { "user:\n  limits:\n    - algorithm: nope\n",
          "limits.yaml:3:18: user: algorithm: unknown algorithm \"nope\" "
          "(expected gcra, token_bucket, leaky_bucket, fixed_window, "
          "sliding_window, sliding_log or sliding_counter)" },
        { "user:\n  limits:\n    - algorithm: [gcra]\n",
          "limits.yaml:3:18: user: algorithm: expected an algorithm name, got "
          "a sequence" },
        { "user:\n  limits:\n    - {algorithm: fixed_window, max: 1, window: "
          "1, burst: 2}\n",
          "limits.yaml:3:52: user: fixed_window: unknown parameter 'burst' "
          "(expected max, window)" },
        { "user:\n  limits:\n    - algorithm: fixed_window\n      max: 1\n",
          "limits.yaml:3:7: user: fixed_window: missing parameter 'window'" },
        { "user:\n  limits:\n    - {max: 1}\n",
          "limits.yaml:3:8: user: gcra: unknown parameter 'max' (expected "
          "max_burst, count, period)\n"
          "limits.yaml:3:7: user: gcra: missing parameter 'max_burst'\n"
          "limits.yaml:3:7: user: gcra: missing parameter 'count'\n"
          "limits.yaml:3:7: user: gcra: missing parameter 'period'" },
        { "user:\n  limits:\n    - algorithm: fixed_window\n      max: 1\n"
          "      max: 2\n      window: 1\n",
          "limits.yaml:5:7: user: duplicate key 'max' (first at line 4)" },
        { "user:\n  limits:\n    - algorithm: fixed_window\n"
          "      algorithm: fixed_window\n      max: 1\n      window: 1\n",
          "limits.yaml:4:7: user: duplicate key 'algorithm' (first at line "
          "3)" },
        { "user:\n  limits:\n    - {algorithm: leaky_bucket, size: 1, "
          "drip_ms: 1.5}\n",
          "limits.yaml:3:51: user: drip_ms: expected a positive integer "
          "(milliseconds), got \"1.5\"" },
        { "user:\n  limits:\n    - {algorithm: sliding_log, max: 1, window: "
          "1, min_interval: -1}\n",
          "limits.yaml:3:65: user: min_interval: expected a duration such as "
          "0, 1.5, 500ms or 2m, got \"-1\"" },
        /* Rules across parameters. */
        { "user:\n  limits: [0, 2000000000, 1ms]\n",
          "limits.yaml:2:11: user: gcra: period / count is under 1 ns (zero "
          "rates are not supported)" },
        { "user:\n  limits: [9007199254740991, 1, 3650d]\n",
          "limits.yaml:2:11: user: gcra: (max_burst + 1) * period / count is "
          "longer than 292 years" },
        { "user:\n  limits:\n    - {algorithm: sliding_window, max: 1, "
          "window: 1, resolution: 2}\n",
          "limits.yaml:3:7: user: sliding_window: resolution is longer than "
          "window" },
        { "user:\n  limits:\n    - {algorithm: sliding_window, max: 1, "
          "window: 10, resolution: 3}\n",
          "limits.yaml:3:7: user: sliding_window: resolution does not divide "
          "window" },
        { "user:\n  limits:\n    - {algorithm: sliding_window, max: 1, "
          "window: 2h, resolution: 1s}\n",
          "limits.yaml:3:7: user: sliding_window: window / resolution is "
          "more than 3600 slots" },
        { "user:\n  limits:\n    - {algorithm: sliding_log, max: 100001, "
          "window: 1}\n",
          "limits.yaml:3:37: user: max: \"100001\" is too large (max "
          "100000)" },
        /* Overrides: the mapping and its paths. */
        { ONE_LIMIT_USER "overrides: [a]\n",
          "limits.yaml:3:12: overrides: expected a mapping of paths, got a "
          "sequence" },
        { ONE_LIMIT_USER "overrides:\n  \"user::x\": inf\n",
          "limits.yaml:4:3: overrides: \"user::x\": limiter path has an empty "
          "segment" },
        { ONE_LIMIT_USER "overrides:\n  \"user:{x}\": inf\n",
          "limits.yaml:4:3: overrides: \"user:{x}\": limiter path may not "
          "contain '{' or '}'" },
        { ONE_LIMIT_USER "overrides:\n  \"user\\x01\": inf\n",
          "limits.yaml:4:3: overrides: \"user?\": path contains a control "
          "character" },
        { ONE_LIMIT_USER "overrides:\n  nobody: inf\n",
          "limits.yaml:4:3: overrides: \"nobody\": matches no node with "
          "limits" },
        { "user:\n  children:\n    \"*\": {limits: [1, 1, 1]}\n"
          "overrides:\n  user: inf\n",
          "limits.yaml:5:3: overrides: \"user\": matches no node with "
          "limits" },
        { "user:\n  children:\n    \"*\": {limits: [1, 1, 1]}\n"
          "overrides:\n  user:a:b: inf\n",
          "limits.yaml:5:3: overrides: \"user:a:b\": matches no node with "
          "limits" },
        { "user:\n  children:\n    \"*\": {limits: [1, 1, 1]}\n"
          "overrides:\n  \"user:*\": inf\n",
          "limits.yaml:5:3: overrides: \"user:*\": an override names a "
          "concrete path, without '*' segments" },
        { ONE_LIMIT_USER "overrides:\n  user: inf\n  user: {factor: 2}\n",
          "limits.yaml:5:3: overrides: duplicate key 'user' (first at line "
          "4)" },
        { ONE_LIMIT_USER "overrides:\n  ? [user]\n  : inf\n",
          "limits.yaml:4:5: overrides: expected a scalar key, got a "
          "sequence" },
        /* Overrides: the values. */
        { ONE_LIMIT_USER "overrides:\n  user: [1]\n",
          "limits.yaml:4:9: override user: expected a mapping with factor, "
          "limits, unlimited or parameters, or inf, got a sequence" },
        { ONE_LIMIT_USER "overrides:\n  user: {}\n",
          "limits.yaml:4:9: override user: expected a mapping with factor, "
          "limits, unlimited or parameters, or inf, got an empty mapping" },
        { ONE_LIMIT_USER "overrides:\n  user: 5\n",
          "limits.yaml:4:9: override user: expected a mapping with factor, "
          "limits, unlimited or parameters, or inf, got a scalar" },
        { ONE_LIMIT_USER "overrides:\n  user: {factor: 0}\n",
          "limits.yaml:4:18: override user: factor: expected a positive "
          "number, got \"0\"" },
        { ONE_LIMIT_USER "overrides:\n  user: {factor: two}\n",
          "limits.yaml:4:18: override user: factor: expected a positive "
          "number, got \"two\"" },
        { ONE_LIMIT_USER "overrides:\n  user: {factor: 1000001}\n",
          "limits.yaml:4:18: override user: factor: \"1000001\" is too large "
          "(max 1000000)" },
        { ONE_LIMIT_USER "overrides:\n  user: {factor: 0.0000001}\n",
          "limits.yaml:4:18: override user: factor: \"0.0000001\" is finer "
          "than 0.000001" },
        { "user:\n  limits: [1, 1000000000, 1]\n"
          "overrides:\n  user: {factor: 0.0001}\n",
          "limits.yaml:4:18: override user: factor: 0.0001 makes gcra "
          "invalid: period / count is under 1 ns (zero rates are not "
          "supported)" },
        { ONE_LIMIT_USER "overrides:\n  user: {factor: 2, limits: [1, 1, "
                         "1]}\n",
          "limits.yaml:4:21: override user: 'limits' cannot be combined with "
          "'factor'" },
        { ONE_LIMIT_USER "overrides:\n  user: {count: 2, unlimited: true}\n",
          "limits.yaml:4:20: override user: 'unlimited' cannot be combined "
          "with 'count'" },
        { ONE_LIMIT_USER "overrides:\n  user: {capacity: 2}\n",
          "limits.yaml:4:10: override user: unknown key 'capacity' (expected "
          "factor, limits, unlimited or a parameter of gcra: max_burst, "
          "count, period)" },
        { "user:\n  limits:\n    - {algorithm: fixed_window, max: 1, window: "
          "1}\n    - {algorithm: fixed_window, max: 1, window: 60}\n"
          "overrides:\n  user: {max: 2}\n",
          "limits.yaml:6:10: override user: 'max': parameters need a node "
          "with exactly one limit, this one has 2 (use limits:)" },
        { "user:\n  limits:\n    - {algorithm: fixed_window, max: 1, window: "
          "1}\n    - {algorithm: fixed_window, max: 1, window: 60}\n"
          "overrides:\n  user: {capacity: 2}\n",
          "limits.yaml:6:10: override user: unknown key 'capacity' (expected "
          "factor, limits or unlimited)" },
        { ONE_LIMIT_USER "overrides:\n  user: {unlimited: false}\n",
          "limits.yaml:4:21: override user: unlimited: expected true, got "
          "\"false\" (remove the override instead)" },
        { ONE_LIMIT_USER "overrides:\n  user: {count: 0}\n",
          "limits.yaml:4:17: override user: count: expected a positive "
          "integer, got \"0\"" },
        { ONE_LIMIT_USER "overrides:\n  user: {count: 1, count: 2}\n",
          "limits.yaml:4:20: override user: duplicate key 'count' (first at "
          "line 4)" },
        { ONE_LIMIT_USER "overrides:\n  user: {count: 2000000000, period: "
                         "1ms}\n",
          "limits.yaml:4:9: override user: gcra: period / count is under 1 "
          "ns (zero rates are not supported)" },
        { ONE_LIMIT_USER "overrides:\n  user: {limits: [1, 0, 1]}\n",
          "limits.yaml:4:22: override user: count: expected a positive "
          "integer, got \"0\"" },
        { ONE_LIMIT_USER "overrides:\n  user: {? [x] : 1}\n",
          "limits.yaml:4:12: override user: expected a scalar key, got a "
          "sequence" },
    };

    return cr_make_param_array(struct error_case, cases,
                               sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct error_case *tc, limits,
                  each_error_names_file_line_and_column)
{
    ASSERT_TERMINATED(tc->yaml);
    ASSERT_TERMINATED(tc->err);
    expect_error(tc->yaml, tc->err);
}

Test(limits, every_error_of_the_file_is_reported_one_per_line)
{
    static const char yaml[] = "user:\n"
                               "  limts: 1\n"
                               "  children:\n"
                               "    \"*\":\n"
                               "      limits: [15, 0, 60]\n"
                               "      children:\n"
                               "        trade:\n"
                               "          limits:\n"
                               "            - algorithm: token_bucket\n"
                               "              capacity: -1\n"
                               "              refill_per_sec: 1\n"
                               "            - algorithm: foo\n"
                               "        \"a:b\": ~\n"
                               "api:\n"
                               "  limits: [1, 1, 1]\n"
                               "overrides:\n"
                               "  nobody: inf\n"
                               "  api: {factor: 0}\n";

    expect_error(yaml,
                 "limits.yaml:2:3: user: unknown key 'limts' (expected "
                 "limits, children or shadow)\n"
                 "limits.yaml:5:20: user:*: count: expected a positive "
                 "integer, got \"0\"\n"
                 "limits.yaml:10:25: user:*:trade: capacity: expected a "
                 "positive integer, got \"-1\"\n"
                 "limits.yaml:12:26: user:*:trade: algorithm: unknown "
                 "algorithm \"foo\" (expected gcra, token_bucket, "
                 "leaky_bucket, fixed_window, sliding_window, sliding_log or "
                 "sliding_counter)\n"
                 "limits.yaml:13:9: user:*: segment \"a:b\" contains ':', "
                 "the path separator\n"
                 "limits.yaml:17:3: overrides: \"nobody\": matches no node "
                 "with limits\n"
                 "limits.yaml:18:17: override api: factor: expected a "
                 "positive number, got \"0\"");
}

Test(limits, an_override_of_a_refused_node_adds_no_second_error)
{
    expect_error(
        "user:\n  limits: [1, 0, 1]\noverrides:\n  user: {factor: 2}\n",
        "limits.yaml:2:15: user: count: expected a positive integer, "
        "got \"0\"");
}

Test(limits, a_bad_file_leaves_the_old_tree_in_place)
{
    struct limits_tree *t = load_ok(seed_yaml), *old = t;
    struct limits_levels *lv = levels_new();
    char err[ERRLEN];

    cr_assert_eq(
        limits_load_string("limits.yaml", "user: [1]\n", &t, err, sizeof(err)),
        LIMITS_ERR);
    cr_assert_eq(t, old);
    cr_assert_str_eq(err, "limits.yaml:1:7: user: expected a mapping with "
                          "limits and/or children, got a sequence");
    resolve(t, "user:bob:trade", lv);
    cr_assert_eq(lv->n, 2);
    free(lv);
    limits_free(t);
}

Test(limits, error_buffer_is_truncated_terminated_or_absent)
{
    static const char yaml[] = "a: [1]\nb: [2]\n";
    struct limits_tree *t = NULL;
    char full[ERRLEN], small[16];

    cr_assert_eq(limits_load_string("l", yaml, &t, full, sizeof(full)),
                 LIMITS_ERR);
    memset(small, 'x', sizeof(small));
    cr_assert_eq(limits_load_string("l", yaml, &t, small, sizeof(small)),
                 LIMITS_ERR);
    cr_assert_eq(strlen(small), sizeof(small) - 1);
    cr_assert_eq(strncmp(small, full, sizeof(small) - 1), 0);
    cr_assert_eq(limits_load_string("l", yaml, &t, NULL, 0), LIMITS_ERR);
    cr_assert_null(t);
    cr_assert_eq(limits_load_string(NULL, "a: [1]\n", &t, full, sizeof(full)),
                 LIMITS_ERR);
    cr_assert_str_eq(full, "(string):1:4: a: expected a mapping with limits "
                           "and/or children, got a sequence");
}

Test(limits, long_values_are_cut_in_messages)
{
    char yaml[512], want[512], value[201];

    memset(value, 'v', 200);
    value[200] = '\0';
    snprintf(yaml, sizeof(yaml), "u:\n  limits: [1, %s, 1]\n", value);
    snprintf(want, sizeof(want),
             "limits.yaml:2:15: u: count: expected a positive integer, got "
             "\"%.64s...\"",
             value);
    expect_error(yaml, want);
}

/* ---------------- Files ---------------- */

Test(limits, missing_file_names_the_path_and_the_system_error)
{
    static const char path[] = PX_SOURCE_DIR "/conf/no-such-limits.yaml";
    struct limits_tree *t = NULL;
    char err[ERRLEN], want[ERRLEN];

    cr_assert_eq(limits_load_file(path, &t, err, sizeof(err)), LIMITS_ERR);
    snprintf(want, sizeof(want), "%s: cannot open: %s", path, strerror(ENOENT));
    cr_assert_str_eq(err, want);
    cr_assert_null(t);
}

Test(limits, directory_instead_of_file_is_a_read_error)
{
    static const char path[] = PX_SOURCE_DIR "/conf";
    struct limits_tree *t = NULL;
    char err[ERRLEN], want[ERRLEN];

    cr_assert_eq(limits_load_file(path, &t, err, sizeof(err)), LIMITS_ERR);
    snprintf(want, sizeof(want), "%s: cannot read: %s", path, strerror(EISDIR));
    cr_assert_str_eq(err, want);
}

Test(limits, endless_file_is_refused_past_the_size_cap)
{
    struct limits_tree *t = NULL;
    char err[ERRLEN];

    cr_assert_eq(limits_load_file("/dev/zero", &t, err, sizeof(err)),
                 LIMITS_ERR);
    cr_assert_str_eq(err, "/dev/zero: file larger than 4194304 bytes");
    cr_assert_null(t);
}

/* ---------------- Hostile input ---------------- */

/* A malloc'd string of `n` copies of `s` between `head` and `tail`. */
static char *repeat(const char *head, const char *s, size_t n, const char *tail)
{
    size_t hl = strlen(head), sl = strlen(s), tl = strlen(tail), i;
    char *out = malloc(hl + sl * n + tl + 1), *p;

    cr_assert_not_null(out);
    memcpy(out, head, hl);
    p = out + hl;
    for (i = 0; i < n; i++, p += sl) {
        memcpy(p, s, sl);
    }
    memcpy(p, tail, tl + 1);
    return out;
}

Test(limits, deep_yaml_nesting_is_refused_before_libyaml_builds_it)
{
    char *yaml = repeat("a: ", "[", 100000, "");

    expect_error(yaml, "limits.yaml:1:131: YAML nesting deeper than 128 "
                       "levels");
    free(yaml);
}

Test(limits, tree_deeper_than_32_levels_is_refused)
{
    char yaml[4096] = "", seg[32];
    int i;

    for (i = 0; i < 33; i++) {
        snprintf(seg, sizeof(seg), "s%d: {children: {", i);
        strcat(yaml, seg);
    }
    strcat(yaml, "x: ~");
    for (i = 0; i < 33; i++) {
        strcat(yaml, "}}");
    }
    strcat(yaml, "\n");
    {
        char want[1024] = "limits.yaml:1:", where[512] = "";

        for (i = 0; i < 33; i++) {
            snprintf(seg, sizeof(seg), "%ss%d", i > 0 ? ":" : "", i);
            strcat(where, seg);
        }
        /* Reported at the key of the 33rd segment, s32. */
        snprintf(want + strlen(want), sizeof(want) - strlen(want),
                 "%zu: ", (size_t)(strstr(yaml, "s32:") - yaml) + 1);
        *strrchr(where, ':') = '\0';
        snprintf(want + strlen(want), sizeof(want) - strlen(want),
                 "%s: more than 32 levels deep (a path has at most 32 "
                 "segments)",
                 where);
        expect_error(yaml, want);
    }
}

Test(limits, thirty_two_levels_with_limits_all_resolve_with_own_tags)
{
    /* 32 literal segments of 31 bytes: a 1023-byte path, every level with
     * limits and a tag of its own, and the longest prefix: the worst case
     * for the text of struct limits_levels. */
    char *yaml = malloc(65536), seg[32], path[1100] = "", prefix[129];
    struct limits_tree *t;
    struct limits_levels *lv = levels_new();
    const char *why = NULL;
    size_t len = 0;
    int i;

    cr_assert_not_null(yaml);
    yaml[0] = '\0';
    for (i = 0; i < 32; i++) {
        snprintf(seg, sizeof(seg), "%02d%029d", i, 0);
        len += (size_t)snprintf(yaml + len, 65536 - len,
                                "%s: {limits: [1, 1, 1], children: {", seg);
        strcat(path, i > 0 ? ":" : "");
        strcat(path, seg);
    }
    for (i = 0; i < 32; i++) {
        len += (size_t)snprintf(yaml + len, 65536 - len, "}}");
    }
    strcat(yaml, "\n");
    cr_assert_eq(strlen(path), 1023);
    t = load_ok(yaml);
    memset(prefix, 'p', 128);
    prefix[128] = '\0';
    cr_assert_eq(limits_resolve(t, path, strlen(path), prefix, 128, lv, &why),
                 LIMITS_OK);
    cr_assert_eq(lv->n, 32);
    cr_assert_eq(lv->ngroups, 32);
    cr_assert_eq(lv->level[31].key_len, 128 + 2 + 1023);
    cr_assert_eq(lv->level[31].group, 31);
    cr_assert_eq(lv->level[0].key_len, 128 + 2 + 31);
    cr_assert_eq(memcmp(lv->level[0].key + 128, "{00", 3), 0);
    free(yaml);
    free(lv);
    limits_free(t);
}

Test(limits, a_pattern_longer_than_any_path_is_refused)
{
    char *yaml = repeat("a: {children: {", "b", 1024, ": ~}}\n");

    expect_error(yaml,
                 "limits.yaml:1:16: a: segment "
                 "\"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
                 "bbbbbbbbbb...\" makes a pattern longer than 1024 "
                 "bytes, which no path can match");
    free(yaml);
}

Test(limits, huge_limit_lists_are_refused)
{
    char *yaml = repeat("u:\n  limits:\n", "    - [1, 1, 1]\n", 100000, "");

    expect_error(yaml, "limits.yaml:3:5: u: limits: at most 8 limits per "
                       "node, got 100000");
    free(yaml);
}

Test(limits, more_than_100000_nodes_are_refused)
{
    char *yaml = malloc(100001 * 12 + 1);
    size_t len = 0;
    int i;

    cr_assert_not_null(yaml);
    for (i = 0; i <= 100000; i++) {
        len += (size_t)sprintf(yaml + len, "n%06d: ~\n", i);
    }
    expect_error(yaml, "limits.yaml:1:1: more than 100000 nodes");
    yaml[len - 11] = '\0'; /* drop the last node: exactly 100000 */
    limits_free(load_ok(yaml));
    free(yaml);
}

Test(limits, more_than_500000_yaml_nodes_are_refused_by_the_prescan)
{
    char *yaml = repeat("a: [", "1,", 500000, "1]\n"), want[128];

    /* Mapping, key and sequence count 3; scalar k (0-based) sits at column
     * 5 + 2k, and the 499998th scalar makes 500001 nodes. */
    snprintf(want, sizeof(want),
             "limits.yaml:1:%d: more than 500000 YAML nodes", 5 + 2 * 499997);
    expect_error(yaml, want);
    free(yaml);
}

Test(limits, aliases_cannot_multiply_the_tree)
{
    static const char laughs[] = "a: &a {limits: [1, 1, 1]}\n"
                                 "b: &b {children: {x: *a, y: *a}}\n"
                                 "c: {children: {x: *b, y: *b}}\n";

    expect_error(laughs, "limits.yaml:2:22: YAML aliases are not supported "
                         "(*a): write the tree out in full\n"
                         "limits.yaml:2:29: YAML aliases are not supported "
                         "(*a): write the tree out in full\n"
                         "limits.yaml:3:19: YAML aliases are not supported "
                         "(*b): write the tree out in full\n"
                         "limits.yaml:3:26: YAML aliases are not supported "
                         "(*b): write the tree out in full");
}

Test(limits, listing_stops_after_100_errors)
{
    char *yaml = malloc(200 * 16), *err = malloc(1 << 16), *last;
    struct limits_tree *t = NULL;
    size_t len = 0, lines = 1, i;

    cr_assert_not_null(yaml);
    cr_assert_not_null(err);
    for (i = 0; i < 200; i++) {
        len += (size_t)sprintf(yaml + len, "\"a:%03zu\": ~\n", i);
    }
    cr_assert_eq(limits_load_string("limits.yaml", yaml, &t, err, 1 << 16),
                 LIMITS_ERR);
    for (i = 0; err[i] != '\0'; i++) {
        lines += err[i] == '\n';
    }
    cr_assert_eq(lines, 101);
    last = strrchr(err, '\n') + 1;
    cr_assert_str_eq(last, "limits.yaml: too many errors, stopping");
    free(yaml);
    free(err);
}

Test(limits, huge_numbers_are_range_errors_not_overflows)
{
    expect_error("u:\n  limits: [99999999999999999999999999999, 1, 1]\n",
                 "limits.yaml:2:12: u: max_burst: "
                 "\"99999999999999999999999999999\" is too large (max "
                 "9007199254740991)");
    expect_error("u:\n  limits:\n    - {algorithm: token_bucket, capacity: 1, "
                 "refill_per_sec: 99999999999999999999.5}\n",
                 "limits.yaml:3:62: u: refill_per_sec: "
                 "\"99999999999999999999.5\" is too large (max 1000000000)");
}

/* ---------------- Resolution ---------------- */

static const char tree_yaml[] =
    "user:\n"
    "  limits: [100, 1000, 1]\n" /* above the wildcard: shared */
    "  children:\n"
    "    \"*\":\n"
    "      limits: [15, 30, 60]\n"
    "      children:\n"
    "        trade: {limits: [5, 10, 15]}\n"
    "        \"*\": {limits: [1, 2, 3]}\n"
    "    admin:\n" /* exact beats the wildcard */
    "      limits: [50, 100, 60]\n"
    "      children:\n"
    "        trade: ~\n"
    "api:\n"
    "  limits: [9, 9, 9]\n"
    "  children:\n"
    "    search: {limits: [8, 8, 8]}\n"
    "    nolimits:\n"
    "      children:\n"
    "        deep: {limits: [7, 7, 7]}\n"
    "tenant:\n"
    "  children:\n"
    "    \"*\":\n"
    "      children:\n"
    "        app:\n"
    "          children:\n"
    "            \"*\": {limits: [4, 4, 4]}\n"
    "overrides:\n"
    "  user:alex: {factor: 2}\n"
    "  user:alex:trade: {unlimited: true}\n"
    "  user:bob:trade: {count: 20}\n";

Test(limits, levels_come_top_first_and_share_one_tag_below_the_wildcard)
{
    struct limits_tree *t = load_ok(tree_yaml);
    struct limits_levels *lv = levels_new();

    resolve(t, "user:zoe:trade", lv);
    cr_assert_eq(lv->n, 3);
    cr_assert_eq(lv->ngroups, 2);
    assert_level(lv, 0, "user", "cellgate:{user}");
    assert_level(lv, 1, "user:zoe", "cellgate:{user:zoe}");
    assert_level(lv, 2, "user:zoe:trade", "cellgate:{user:zoe}:trade");
    cr_assert_eq(lv->level[0].group, 0);
    cr_assert_eq(lv->level[1].group, 1);
    cr_assert_eq(lv->level[2].group, 1);
    cr_assert_eq(lv->level[0].tag_len, 4);
    cr_assert_eq(lv->level[0].limits[0].u.gcra.max_burst, 100);
    cr_assert_eq(lv->level[1].limits[0].u.gcra.max_burst, 15);
    cr_assert_eq(lv->level[2].limits[0].u.gcra.max_burst, 5);
    free(lv);
    limits_free(t);
}

Test(limits, an_exact_segment_beats_the_wildcard)
{
    struct limits_tree *t = load_ok(tree_yaml);
    struct limits_levels *lv = levels_new();

    resolve(t, "user:admin:trade", lv);
    cr_assert_eq(lv->n, 2, "admin:trade is an empty node, not user:*:trade");
    cr_assert_eq(lv->level[1].limits[0].u.gcra.max_burst, 50);
    cr_assert_not(lv->level[1].wildcard);
    /* No "*" matched: each level is tagged with its own path. */
    assert_level(lv, 1, "user:admin", "cellgate:{user:admin}");
    cr_assert_eq(lv->ngroups, 2);
    cr_assert_eq(lv->matched, 3);
    resolve(t, "user:zoe:other", lv);
    cr_assert_eq(lv->n, 3, "user:*:* matches other");
    cr_assert_eq(lv->level[2].limits[0].u.gcra.max_burst, 1);
    free(lv);
    limits_free(t);
}

Test(limits, literal_paths_tag_each_level_with_its_own_path)
{
    struct limits_tree *t = load_ok(tree_yaml);
    struct limits_levels *lv = levels_new();

    resolve(t, "api:search", lv);
    cr_assert_eq(lv->n, 2);
    cr_assert_eq(lv->ngroups, 2);
    assert_level(lv, 0, "api", "cellgate:{api}");
    assert_level(lv, 1, "api:search", "cellgate:{api:search}");
    resolve(t, "api:nolimits:deep", lv);
    cr_assert_eq(lv->n, 2, "a node without limits is no level");
    assert_level(lv, 1, "api:nolimits:deep", "cellgate:{api:nolimits:deep}");
    cr_assert_eq(lv->level[1].depth, 3);
    free(lv);
    limits_free(t);
}

Test(limits, the_tag_ends_at_the_first_wildcard_even_with_two)
{
    struct limits_tree *t = load_ok(tree_yaml);
    struct limits_levels *lv = levels_new();

    resolve(t, "tenant:acme:app:web", lv);
    cr_assert_eq(lv->n, 1);
    cr_assert_eq(lv->ngroups, 1);
    assert_level(lv, 0, "tenant:acme:app:web",
                 "cellgate:{tenant:acme}:app:web");
    cr_assert_eq(lv->level[0].tag_len, strlen("tenant:acme"));
    free(lv);
    limits_free(t);
}

Test(limits, paths_that_meet_no_limits_give_zero_levels)
{
    struct limits_tree *t = load_ok(tree_yaml);
    struct limits_levels *lv = levels_new();
    const char *why = NULL;

    resolve(t, "nothing:here", lv);
    cr_assert_eq(lv->n, 0);
    cr_assert_eq(lv->ngroups, 0);
    cr_assert_eq(lv->matched, 0);
    cr_assert_eq(lv->nsegments, 2);
    resolve(t, "tenant:acme", lv);
    cr_assert_eq(lv->n, 0);
    cr_assert_eq(lv->matched, 2);
    resolve(t, "api:nolimits", lv);
    cr_assert_eq(lv->n, 1, "only api itself");
    cr_assert_eq(limits_resolve(NULL, "user:a", 6, NULL, 0, lv, &why),
                 LIMITS_OK);
    cr_assert_eq(lv->n, 0, "no tree, no limits");
    free(lv);
    limits_free(t);
}

Test(limits, a_path_deeper_than_the_tree_keeps_the_levels_it_met)
{
    struct limits_tree *t = load_ok(tree_yaml);
    struct limits_levels *lv = levels_new();

    resolve(t, "user:zoe:trade:x:y", lv);
    cr_assert_eq(lv->n, 3);
    cr_assert_eq(lv->matched, 3);
    cr_assert_eq(lv->nsegments, 5);
    assert_level(lv, 2, "user:zoe:trade", "cellgate:{user:zoe}:trade");
    free(lv);
    limits_free(t);
}

Test(limits, overrides_apply_to_their_exact_concrete_path_only)
{
    struct limits_tree *t = load_ok(tree_yaml);
    struct limits_levels *lv = levels_new();

    resolve(t, "user:alex:trade", lv);
    cr_assert_eq(lv->n, 3);
    cr_assert_not(lv->level[0].overridden, "user itself");
    cr_assert(lv->level[1].overridden);
    cr_assert_eq(lv->level[1].limits[0].u.gcra.max_burst, 7);
    cr_assert_eq(lv->level[1].limits[0].u.gcra.period_ms, 120000);
    cr_assert(lv->level[2].unlimited);
    cr_assert_eq(lv->level[2].nlimits, 0);
    cr_assert_eq(limits_limit_key(&lv->level[2], 0, NULL, 0), -1);
    assert_level(lv, 2, "user:alex:trade", "cellgate:{user:alex}:trade");

    resolve(t, "user:alexander:trade", lv);
    cr_assert_not(lv->level[1].overridden);
    cr_assert_not(lv->level[2].overridden);
    cr_assert_eq(lv->level[1].limits[0].u.gcra.max_burst, 15);

    resolve(t, "user:bob:trade", lv);
    cr_assert_not(lv->level[1].overridden);
    cr_assert(lv->level[2].overridden);
    cr_assert_str_eq(fmt(&lv->level[2].limits[0]),
                     "gcra(max_burst=5,count=20,period=15s)");
    free(lv);
    limits_free(t);
}

Test(limits, prefix_is_a_parameter_and_defaults_to_cellgate)
{
    struct limits_tree *t = load_ok(seed_yaml);
    struct limits_levels *lv = levels_new();
    const char *why = NULL;

    cr_assert_eq(limits_resolve(t, "user:alex:trade", 9, "rl:xyz", 3, lv, &why),
                 LIMITS_OK, "only the first 9 bytes of the path count");
    cr_assert_eq(lv->n, 1);
    assert_level(lv, 0, "user:alex", "rl:{user:alex}");
    cr_assert_str_eq(limit_key(&lv->level[0], 0), "rl:{user:alex}#0:gcra");
    cr_assert_eq(limits_resolve(t, "user:alex", 9, "", 0, lv, &why), LIMITS_OK);
    assert_level(lv, 0, "user:alex", "{user:alex}");
    cr_assert_eq(limits_resolve(t, "user:alex", 9, NULL, 99, lv, &why),
                 LIMITS_OK);
    assert_level(lv, 0, "user:alex", "cellgate:{user:alex}");
    free(lv);
    limits_free(t);
}

struct path_case {
    char path[48]; /* the path */
    char err[64];  /* the exact reason */
};

ParameterizedTestParameters(limits, bad_paths_are_refused_with_a_reason)
{
    static struct path_case cases[] = {
        { "", "empty limiter path" },
        { ":", "limiter path has an empty segment" },
        { "user:", "limiter path has an empty segment" },
        { ":user", "limiter path has an empty segment" },
        { "user::trade", "limiter path has an empty segment" },
        { "{user}", "limiter path may not contain '{' or '}'" },
        { "user:{alex}:trade", "limiter path may not contain '{' or '}'" },
        { "user:al}ex", "limiter path may not contain '{' or '}'" },
        { "user:{", "limiter path may not contain '{' or '}'" },
    };

    return cr_make_param_array(struct path_case, cases,
                               sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct path_case *tc, limits,
                  bad_paths_are_refused_with_a_reason)
{
    struct limits_tree *t = load_ok(seed_yaml);
    struct limits_levels *lv = levels_new();
    const char *why = NULL;

    ASSERT_TERMINATED(tc->path);
    ASSERT_TERMINATED(tc->err);
    cr_assert_eq(
        limits_resolve(t, tc->path, strlen(tc->path), NULL, 0, lv, &why),
        LIMITS_ERR, "\"%s\" accepted", tc->path);
    cr_assert_str_eq(why, tc->err, "\"%s\"", tc->path);
    cr_assert_eq(lv->n, 0);
    free(lv);
    limits_free(t);
}

Test(limits, path_length_and_segment_caps_are_exact)
{
    struct limits_tree *t = load_ok(seed_yaml);
    struct limits_levels *lv = levels_new();
    char path[2048];
    const char *why = NULL;
    int i;

    memset(path, 'a', sizeof(path));
    cr_assert_eq(limits_resolve(t, path, 1024, NULL, 0, lv, &why), LIMITS_OK);
    cr_assert_eq(limits_resolve(t, path, 1025, NULL, 0, lv, &why), LIMITS_ERR);
    cr_assert_str_eq(why, "limiter path longer than 1024 bytes");
    for (i = 1; i < 66; i += 2) {
        path[i] = ':';
    }
    cr_assert_eq(limits_resolve(t, path, 63, NULL, 0, lv, &why), LIMITS_OK);
    cr_assert_eq(lv->nsegments, 32);
    cr_assert_eq(limits_resolve(t, path, 65, NULL, 0, lv, &why), LIMITS_ERR);
    cr_assert_str_eq(why, "limiter path has more than 32 segments");
    cr_assert_eq(limits_resolve(t, NULL, 0, NULL, 0, lv, &why), LIMITS_ERR);
    cr_assert_str_eq(why, "empty limiter path");
    free(lv);
    limits_free(t);
}

Test(limits, bad_prefixes_are_refused)
{
    struct limits_tree *t = load_ok(seed_yaml);
    struct limits_levels *lv = levels_new();
    char prefix[200];
    const char *why = NULL;

    memset(prefix, 'p', sizeof(prefix));
    cr_assert_eq(limits_resolve(t, "user:a", 6, prefix, 128, lv, &why),
                 LIMITS_OK);
    cr_assert_eq(limits_resolve(t, "user:a", 6, prefix, 129, lv, &why),
                 LIMITS_ERR);
    cr_assert_str_eq(why, "key prefix longer than 128 bytes");
    cr_assert_eq(limits_resolve(t, "user:a", 6, "x{y}:", 5, lv, &why),
                 LIMITS_ERR);
    cr_assert_str_eq(why, "key prefix may not contain '{' or '}'");
    cr_assert_eq(limits_resolve(t, "user:a", 6, "x}", 2, lv, &why), LIMITS_ERR);
    free(lv);
    limits_free(t);
}

Test(limits, any_other_byte_may_name_an_identity_and_keys_keep_it)
{
    static const char path[] = "user:a\0b\xff *:trade";
    struct limits_tree *t = load_ok(seed_yaml);
    struct limits_levels *lv = levels_new();
    static const char want[] = "cellgate:{user:a\0b\xff *}:trade#0:gcra";
    char key[128];
    const char *why = NULL;

    cr_assert_eq(limits_resolve(t, path, sizeof(path) - 1, NULL, 0, lv, &why),
                 LIMITS_OK);
    cr_assert_eq(lv->n, 2);
    cr_assert_eq(lv->level[1].path_len, sizeof(path) - 1);
    cr_assert_eq(limits_limit_key(&lv->level[1], 0, key, sizeof(key)),
                 (int)sizeof(want) - 1);
    cr_assert_eq(memcmp(key, want, sizeof(want)), 0);
    free(lv);
    limits_free(t);
}

Test(limits, every_key_hashes_exactly_the_tag_the_module_wrote)
{
    /* Redis hashes the bytes between the first '{' and the next '}'. */
    static const char *const paths[] = {
        "user:zoe:trade",   "user:admin:trade", "api:search",
        "tenant:a*b:app:x", "user:*:trade",     "user:a-b c:z",
    };
    struct limits_tree *t = load_ok(tree_yaml);
    struct limits_levels *lv = levels_new();
    size_t i, j;

    for (i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        resolve(t, paths[i], lv);
        cr_assert_gt(lv->n, 0, "%s", paths[i]);
        for (j = 0; j < lv->n; j++) {
            const struct limits_level *l = &lv->level[j];
            const char *open = memchr(l->key, '{', l->key_len);
            const char *close = memchr(open, '}', l->key_len);

            cr_assert_eq(open + 1, l->tag, "%s", l->key);
            cr_assert_eq(close, l->tag + l->tag_len, "%s", l->key);
            cr_assert_gt(l->tag_len, 0);
        }
    }
    free(lv);
    limits_free(t);
}

Test(limits, limit_key_reports_its_length_and_truncates_safely)
{
    struct limits_tree *t = load_ok(seed_yaml);
    struct limits_levels *lv = levels_new();
    char small[10];

    resolve(t, "user:alex:trade", lv);
    memset(small, 'x', sizeof(small));
    cr_assert_eq(limits_limit_key(&lv->level[1], 0, small, sizeof(small)),
                 (int)strlen("cellgate:{user:alex}:trade#0:gcra"));
    cr_assert_str_eq(small, "cellgate:");
    cr_assert_eq(limits_limit_key(&lv->level[1], 1, small, sizeof(small)), -1);
    cr_assert_eq(limits_limit_key(&lv->level[1], 0, NULL, 0),
                 (int)strlen("cellgate:{user:alex}:trade#0:gcra"));
    free(lv);
    limits_free(t);
}

/* ---------------- Overrides and factors ---------------- */

static const char algos_yaml[] =
    "g: {children: {\"*\": {limits: [15, 30, 60]}}}\n"
    "t: {children: {\"*\": {limits: [{algorithm: token_bucket, capacity: 20, "
    "refill_per_sec: 2.5}]}}}\n"
    "l: {children: {\"*\": {limits: [{algorithm: leaky_bucket, size: 5, "
    "drip_ms: 2000, drip_size: 3}]}}}\n"
    "f: {children: {\"*\": {limits: [{algorithm: fixed_window, max: 100, "
    "window: 60}]}}}\n"
    "w: {children: {\"*\": {limits: [{algorithm: sliding_window, max: 600, "
    "window: 60, resolution: 1}]}}}\n"
    "s: {children: {\"*\": {limits: [{algorithm: sliding_log, max: 5, window: "
    "900, min_interval: 1}]}}}\n"
    "c: {children: {\"*\": {limits: [{algorithm: sliding_counter, max: 7, "
    "window: 10}]}}}\n"
    "overrides:\n"
    "  g:half: {factor: 2}\n"
    "  g:double: {factor: 0.5}\n"
    "  t:half: {factor: 2}\n"
    "  t:double: {factor: 0.5}\n"
    "  l:half: {factor: 2}\n"
    "  l:double: {factor: 0.5}\n"
    "  f:half: {factor: 2}\n"
    "  f:double: {factor: 0.5}\n"
    "  w:half: {factor: 2}\n"
    "  w:double: {factor: 0.5}\n"
    "  s:half: {factor: 2}\n"
    "  s:double: {factor: 0.5}\n"
    "  c:half: {factor: 2}\n"
    "  c:double: {factor: 0.5}\n"
    "  t:inf: {refill_per_sec: inf}\n"
    "  t:cap: {capacity: 1}\n"
    "  f:two: {limits: [{algorithm: fixed_window, max: 1, window: 1}, "
    "{max_burst: 1, count: 2, period: 3}]}\n";

struct factor_case {
    char path[16];  /* the overridden path */
    char want[128]; /* its one limit, rendered */
};

ParameterizedTestParameters(limits, a_factor_divides_amounts_and_stretches_gaps)
{
    static struct factor_case cases[] = {
        { "g:x", "gcra(max_burst=15,count=30,period=60s)" },
        { "g:half", "gcra(max_burst=7,count=30,period=120s)" },
        { "g:double", "gcra(max_burst=30,count=30,period=30s)" },
        { "t:half", "token_bucket(capacity=10,refill_per_sec=1.25)" },
        { "t:double", "token_bucket(capacity=40,refill_per_sec=5)" },
        { "l:half", "leaky_bucket(size=2,drip_ms=4000,drip_size=3)" },
        { "l:double", "leaky_bucket(size=10,drip_ms=1000,drip_size=3)" },
        { "f:half", "fixed_window(max=50,window=60s)" },
        { "f:double", "fixed_window(max=200,window=60s)" },
        { "w:half", "sliding_window(max=300,window=60s,resolution=1s)" },
        { "w:double", "sliding_window(max=1200,window=60s,resolution=1s)" },
        { "s:half", "sliding_log(max=2,window=900s,min_interval=2s)" },
        { "s:double", "sliding_log(max=10,window=900s,min_interval=0.5s)" },
        { "c:half", "sliding_counter(max=3,window=10s)" },
        { "c:double", "sliding_counter(max=14,window=10s)" },
        { "t:inf", "token_bucket(capacity=20,refill_per_sec=inf)" },
        { "t:cap", "token_bucket(capacity=1,refill_per_sec=2.5)" },
    };

    return cr_make_param_array(struct factor_case, cases,
                               sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct factor_case *tc, limits,
                  a_factor_divides_amounts_and_stretches_gaps)
{
    struct limits_tree *t = load_ok(algos_yaml);
    struct limits_levels *lv = levels_new();

    ASSERT_TERMINATED(tc->path);
    ASSERT_TERMINATED(tc->want);
    resolve(t, tc->path, lv);
    cr_assert_eq(lv->n, 1, "%s", tc->path);
    cr_assert_eq(lv->level[0].nlimits, 1);
    cr_assert_str_eq(fmt(&lv->level[0].limits[0]), tc->want, "%s", tc->path);
    cr_assert_eq(lv->level[0].overridden, strcmp(tc->path, "g:x") != 0);
    free(lv);
    limits_free(t);
}

Test(limits, a_limits_override_replaces_the_whole_list)
{
    struct limits_tree *t = load_ok(algos_yaml);
    struct limits_levels *lv = levels_new();

    cr_assert_eq(limits_override_count(t), 17);
    resolve(t, "f:two", lv);
    cr_assert_eq(lv->level[0].nlimits, 2);
    cr_assert_str_eq(fmt(&lv->level[0].limits[0]),
                     "fixed_window(max=1,window=1s)");
    cr_assert_str_eq(fmt(&lv->level[0].limits[1]),
                     "gcra(max_burst=1,count=2,period=3s)");
    cr_assert_str_eq(limit_key(&lv->level[0], 1), "cellgate:{f:two}#1:gcra");
    free(lv);
    limits_free(t);
}

Test(limits, scale_rounds_and_clamps_into_the_valid_range)
{
    struct limits_limit in, out;
    const char *why = NULL;

    memset(&in, 0, sizeof(in));
    in.algo = LIMITS_GCRA;
    in.u.gcra =
        (struct limits_gcra){ .max_burst = 1, .count = 1, .period_ms = 1 };
    cr_assert_eq(limits_scale(&in, 3000000, &out, &why), LIMITS_OK);
    cr_assert_eq(out.u.gcra.max_burst, 0, "1/3 rounds down to 0");
    cr_assert_eq(out.u.gcra.period_ms, 3);
    cr_assert_eq(limits_scale(&in, 1000100, &out, &why), LIMITS_OK);
    cr_assert_eq(out.u.gcra.period_ms, 2, "1.0001 ms rounds up");
    cr_assert_eq(limits_scale(&in, 1, &out, &why), LIMITS_OK);
    cr_assert_eq(out.u.gcra.period_ms, 1, "never under 1 ms");
    cr_assert_eq(out.u.gcra.max_burst, 1000000);
    in.u.gcra.period_ms = LIMITS_MAX_DURATION_MS;
    cr_assert_eq(limits_scale(&in, LIMITS_MAX_FACTOR_MICRO, &out, &why),
                 LIMITS_OK);
    cr_assert_eq(out.u.gcra.period_ms, LIMITS_MAX_DURATION_MS);

    in.algo = LIMITS_SLIDING_LOG;
    in.u.sliding_log = (struct limits_sliding_log){
        .max = 100000,
        .window_ms = 1000,
        .min_interval_ms = 0,
    };
    cr_assert_eq(limits_scale(&in, 500000, &out, &why), LIMITS_OK);
    cr_assert_eq(out.u.sliding_log.max, LIMITS_MAX_LOG_ENTRIES);
    cr_assert_eq(out.u.sliding_log.min_interval_ms, 0);
    in.u.sliding_log.max = 1;
    cr_assert_eq(limits_scale(&in, 7000000, &out, &why), LIMITS_OK);
    cr_assert_eq(out.u.sliding_log.max, 1, "never under 1");

    in.algo = LIMITS_TOKEN_BUCKET;
    in.u.token_bucket = (struct limits_token_bucket){
        .capacity = LIMITS_MAX_COUNT,
        .refill_per_sec_micro = LIMITS_MAX_RATE_MICRO,
    };
    cr_assert_eq(limits_scale(&in, 1, &out, &why), LIMITS_OK);
    cr_assert_eq(out.u.token_bucket.capacity, LIMITS_MAX_COUNT);
    cr_assert_eq(out.u.token_bucket.refill_per_sec_micro,
                 LIMITS_MAX_RATE_MICRO);
    in.u.token_bucket.refill_per_sec_micro = 1;
    cr_assert_eq(limits_scale(&in, LIMITS_MAX_FACTOR_MICRO, &out, &why),
                 LIMITS_OK);
    cr_assert_eq(out.u.token_bucket.refill_per_sec_micro, 1);
}

Test(limits, scale_refuses_bad_factors_and_invalid_results)
{
    struct limits_limit in, out;
    const char *why = NULL;

    memset(&in, 0, sizeof(in));
    memset(&out, 0x5a, sizeof(out));
    in.algo = LIMITS_GCRA;
    in.u.gcra = (struct limits_gcra){ .max_burst = 1,
                                      .count = 1000000000,
                                      .period_ms = 1000 };
    cr_assert_eq(limits_scale(&in, 0, &out, &why), LIMITS_ERR);
    cr_assert_str_eq(why, "factor out of range (0.000001 to 1000000)");
    cr_assert_eq(limits_scale(&in, LIMITS_MAX_FACTOR_MICRO + 1, &out, NULL),
                 LIMITS_ERR);
    cr_assert_eq(limits_scale(&in, 100, &out, &why), LIMITS_ERR);
    cr_assert_str_eq(why, "period / count is under 1 ns (zero rates are not "
                          "supported)");
    cr_assert_eq(out.u.gcra.count, 0x5a5a5a5a5a5a5a5aLL, "out untouched");
    in.algo = (enum limits_algo)42;
    cr_assert_eq(limits_scale(&in, 1000000, &out, &why), LIMITS_ERR);
    cr_assert_str_eq(why, "unknown algorithm");
}

/* ---------------- LIMITER RULES ---------------- */

Test(limits, describe_lists_rules_depth_first_then_overrides)
{
    struct limits_tree *t = load_ok(tree_yaml);
    char *text = describe(t);

    cr_assert_str_eq(text, "api  gcra(max_burst=9,count=9,period=9s)\n"
                           "api:nolimits:deep  "
                           "gcra(max_burst=7,count=7,period=7s)\n"
                           "api:search  gcra(max_burst=8,count=8,period=8s)\n"
                           "tenant:*:app:*  "
                           "gcra(max_burst=4,count=4,period=4s)\n"
                           "user  gcra(max_burst=100,count=1000,period=1s)\n"
                           "user:*  gcra(max_burst=15,count=30,period=60s)\n"
                           "user:*:*  gcra(max_burst=1,count=2,period=3s)\n"
                           "user:*:trade  "
                           "gcra(max_burst=5,count=10,period=15s)\n"
                           "user:admin  "
                           "gcra(max_burst=50,count=100,period=60s)\n"
                           "override user:alex  factor=2 "
                           "gcra(max_burst=7,count=30,period=120s)\n"
                           "override user:alex:trade  unlimited\n"
                           "override user:bob:trade  "
                           "gcra(max_burst=5,count=20,period=15s)\n");
    free(text);
    limits_free(t);
}

Test(limits, describe_of_an_empty_tree_is_empty)
{
    struct limits_tree *t = load_ok("{}\n");
    char *text = describe(t);

    cr_assert_str_empty(text);
    cr_assert_eq(limits_rule_count(t), 0);
    free(text);
    text = describe(NULL);
    cr_assert_str_empty(text);
    free(text);
    limits_free(t);
    limits_free(NULL);
}

Test(limits, describe_is_cut_after_one_mebibyte)
{
    /* 20000 rules of about 100 bytes each: about 2 MB of rules. */
    char *yaml = malloc(20000 * 100), *text;
    struct limits_tree *t;
    size_t len = 0, outlen = 0;
    int i;

    cr_assert_not_null(yaml);
    for (i = 0; i < 20000; i++) {
        len += (size_t)sprintf(yaml + len, "r%05d%048d: {limits: [1, 1, 1]}\n",
                               i, 0);
    }
    t = load_ok(yaml);
    cr_assert_eq(limits_rule_count(t), 20000);
    cr_assert_eq(limits_describe(t, false, true, &text, &outlen), LIMITS_OK);
    cr_assert_leq(outlen, 1024 * 1024 + 16);
    cr_assert_gt(outlen, 1024 * 1024 - 200);
    cr_assert_eq(strcmp(text + outlen - 12, "(truncated)\n"), 0);
    cr_assert_eq(strncmp(text, "r00000", 6), 0);
    free(text);
    free(yaml);
    limits_free(t);
}

/* ---------------- Run-time overrides (LIMITER OVERRIDE) ---------------- */

/* The node's own limits of `path` in `yaml` into *lv (asserting it has
 * them). */
static void base_of(struct limits_tree *t, const char *path,
                    struct limits_levels *lv)
{
    const char *err = NULL;

    cr_assert_eq(limits_resolve(t, path, strlen(path), NULL, 0, lv, &err),
                 LIMITS_OK, "%s: %s", path, err ? err : "");
    cr_assert_geq(lv->n, 1, "%s has limits", path);
}

Test(limits, runtime_overrides_apply_to_the_nodes_own_limits)
{
    struct limits_levels *lv = levels_new();
    struct limits_tree *t =
        load_ok("tb:\n  children:\n    \"*\":\n      limits:\n"
                "        - {algorithm: token_bucket, capacity: 10, "
                "refill_per_sec: 2}\n"
                "two:\n  limits:\n    - {max_burst: 3, count: 6, period: 60}\n"
                "    - {algorithm: fixed_window, max: 100, window: 1h}\n"
                "overrides:\n  tb:alex: {factor: 2}\n");
    struct limits_runtime rt;
    char err[256];

    base_of(t, "tb:alex", lv);
    /* The file's override applies to the level; the base stays. */
    cr_assert_eq(lv->level[0].limits[0].u.token_bucket.capacity, 5);
    cr_assert_eq(lv->level[0].base[0].u.token_bucket.capacity, 10);

    cr_assert_eq(limits_runtime_parse_text(lv->level[0].base,
                                           lv->level[0].nbase,
                                           "capacity 50 refill_per_sec 0.5", 30,
                                           &rt, err, sizeof(err)),
                 LIMITS_OK, "%s", err);
    cr_assert(!rt.unlimited);
    cr_assert_eq(rt.nlimits, 1);
    cr_assert_eq(rt.limits[0].u.token_bucket.capacity, 50);
    cr_assert_eq(rt.limits[0].u.token_bucket.refill_per_sec_micro, 500000);

    cr_assert_eq(limits_runtime_parse_text(lv->level[0].base, 1, "FACTOR 4", 8,
                                           &rt, err, sizeof(err)),
                 LIMITS_OK, "%s", err);
    cr_assert_eq(rt.limits[0].u.token_bucket.capacity, 2); /* 10 / 4 */
    cr_assert_eq(rt.limits[0].u.token_bucket.refill_per_sec_micro, 500000);

    cr_assert_eq(limits_runtime_parse_text(lv->level[0].base, 1, "inf", 3, &rt,
                                           err, sizeof(err)),
                 LIMITS_OK);
    cr_assert(rt.unlimited);
    cr_assert_eq(limits_runtime_parse_text(lv->level[0].base, 1, "Unlimited", 9,
                                           &rt, err, sizeof(err)),
                 LIMITS_OK);
    cr_assert(rt.unlimited);

    /* Refused, each with its reason. */
    cr_assert_eq(limits_runtime_parse_text(lv->level[0].base, 1, "", 0, &rt,
                                           err, sizeof(err)),
                 LIMITS_ERR);
    cr_assert_str_eq(err, "an override needs FACTOR f, UNLIMITED or "
                          "parameters with values");
    cr_assert_eq(limits_runtime_parse_text(lv->level[0].base, 1, "size 3", 6,
                                           &rt, err, sizeof(err)),
                 LIMITS_ERR);
    cr_assert_str_eq(err, "unknown parameter 'size' of token_bucket "
                          "(expected capacity, refill_per_sec)");
    cr_assert_eq(limits_runtime_parse_text(lv->level[0].base, 1, "capacity 1.5",
                                           12, &rt, err, sizeof(err)),
                 LIMITS_ERR);
    cr_assert_str_eq(err, "capacity: expected a positive integer, got "
                          "\"1.5\"");
    cr_assert_eq(limits_runtime_parse_text(lv->level[0].base, 1, "factor 0", 8,
                                           &rt, err, sizeof(err)),
                 LIMITS_ERR);
    cr_assert_eq(limits_runtime_parse_text(lv->level[0].base, 1, "factor 2 3",
                                           10, &rt, err, sizeof(err)),
                 LIMITS_ERR);
    cr_assert_str_eq(err, "FACTOR takes one number");

    /* Two limits: a factor scales both; parameters are refused. */
    base_of(t, "two", lv);
    cr_assert_eq(lv->level[0].nbase, 2);
    cr_assert_eq(limits_runtime_parse_text(lv->level[0].base, 2, "factor 0.5",
                                           10, &rt, err, sizeof(err)),
                 LIMITS_OK, "%s", err);
    cr_assert_eq(rt.nlimits, 2);
    cr_assert_eq(rt.limits[0].u.gcra.max_burst, 6);
    cr_assert_eq(rt.limits[1].u.fixed_window.max, 200);
    cr_assert_eq(limits_runtime_parse_text(lv->level[0].base, 2, "max 5", 5,
                                           &rt, err, sizeof(err)),
                 LIMITS_ERR);
    cr_assert_str_eq(err, "parameters need a node with exactly one limit, "
                          "this one has 2 (use FACTOR or UNLIMITED)");
    free(lv);
    limits_free(t);
}

/* ---------------- shadow: ---------------- */

static const char shadow_yaml[] = "global:\n"
                                  "  limits: [9, 10, 1]\n"
                                  "  shadow: true\n"
                                  "  children:\n"
                                  "    \"*\":\n"
                                  "      shadow: FALSE\n"
                                  "      limits: [1, 2, 3]\n"
                                  "      children:\n"
                                  "        new:\n"
                                  "          shadow: yes\n"
                                  "          limits:\n"
                                  "            - {algorithm: fixed_window, "
                                  "max: 5, window: 1h}\n"
                                  "overrides:\n"
                                  "  global:bob:new: {factor: 2}\n";

Test(limits, shadow_marks_only_its_own_node_and_survives_overrides)
{
    struct limits_tree *t = load_ok(shadow_yaml);
    struct limits_levels *lv = levels_new();

    resolve(t, "global:bob:new", lv);
    cr_assert_eq(lv->n, 3);
    cr_assert(lv->level[0].shadow);
    cr_assert_not(lv->level[1].shadow, "shadow: FALSE, and not inherited");
    cr_assert(lv->level[2].shadow, "shadow: yes");
    cr_assert(lv->level[2].overridden);
    resolve(t, "global:alex", lv);
    cr_assert_eq(lv->n, 2);
    cr_assert(lv->level[0].shadow);
    cr_assert_not(lv->level[1].shadow);
    free(lv);
    limits_free(t);
}

Test(limits, rules_show_shadow_after_the_limits)
{
    struct limits_tree *t = load_ok(shadow_yaml);
    char *out = NULL;
    size_t len = 0;

    out = describe(t);
    cr_assert_str_eq(out,
                     "global  gcra(max_burst=9,count=10,period=1s)  shadow\n"
                     "global:*  gcra(max_burst=1,count=2,period=3s)\n"
                     "global:*:new  fixed_window(max=5,window=3600s)  shadow\n"
                     "override global:bob:new  factor=2 "
                     "fixed_window(max=2,window=3600s)\n");
    free(out);
    /* limiter_shadow: every node. */
    cr_assert_eq(limits_describe(t, true, true, &out, &len), LIMITS_OK);
    cr_assert_str_eq(out,
                     "global  gcra(max_burst=9,count=10,period=1s)  shadow\n"
                     "global:*  gcra(max_burst=1,count=2,period=3s)  shadow\n"
                     "global:*:new  fixed_window(max=5,window=3600s)  shadow\n"
                     "override global:bob:new  factor=2 "
                     "fixed_window(max=2,window=3600s)\n");
    free(out);
    /* For a client that is not admin: the overrides name identities. */
    cr_assert_eq(limits_describe(t, false, false, &out, &len), LIMITS_OK);
    cr_assert_str_eq(out,
                     "global  gcra(max_burst=9,count=10,period=1s)  shadow\n"
                     "global:*  gcra(max_burst=1,count=2,period=3s)\n"
                     "global:*:new  fixed_window(max=5,window=3600s)  "
                     "shadow\n");
    free(out);
    limits_free(t);
}

Test(limits, shadow_takes_a_boolean_on_a_node_with_limits)
{
    expect_error("user:\n  limits: [1, 1, 1]\n  shadow: maybe\n",
                 "limits.yaml:3:11: user: shadow: expected true or false, "
                 "got \"maybe\"");
    expect_error("user:\n  limits: [1, 1, 1]\n  shadow: [true]\n",
                 "limits.yaml:3:11: user: shadow: expected true or false, "
                 "got a sequence");
    expect_error("user:\n  limits: [1, 1, 1]\n  shadow: 1\n",
                 "limits.yaml:3:11: user: shadow: expected true or false, "
                 "got \"1\"");
    expect_error("user:\n  shadow: true\n  limits: [1, 1, 1]\n"
                 "  shadow: false\n",
                 "limits.yaml:4:3: user: duplicate key 'shadow' (first at "
                 "line 2)");
    expect_error("user:\n  shadow: true\n  children:\n    a:\n"
                 "      limits: [1, 1, 1]\n",
                 "limits.yaml:2:3: user: shadow: true on a node without "
                 "limits (it applies to the node's own limits, not to its "
                 "children)");
}
