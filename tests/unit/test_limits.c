/* Unit tests of conf/limits, loading what is valid: the seed schema and the
 * example file, every algorithm with its parameters in stored units and
 * rendered back, and the syntax of values (durations, counts, rates). The
 * other suites: limits_errors (every refusal), limits_resolve (paths into
 * levels and keys), limits_override (factors, file and run-time
 * overrides), limits_rules (LIMITER RULES, shadow:). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf/limits.h"
#include "conf/sha256.h"
#include "tests/support/limits_test.h"
#include "tests/support/px_test.h"

/* After px_test.h: criterion.h must come before its parameterized.h. */
#include <criterion/parameterized.h>

PX_TEST_SUITE(limits);

/* ---------------- The seed schema and the example file ---------------- */

Test(limits, seed_schema_loads_two_gcra_rules)
{
    struct limits_tree *t = limits_test_load_ok(limits_test_seed_yaml);
    struct limits_levels *lv = limits_test_levels_new();
    const struct limits_gcra *g;

    cr_assert_eq(limits_rule_count(t), 2);
    cr_assert_eq(limits_override_count(t), 0);
    limits_test_resolve(t, "user:alex:trade", lv);
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
    struct limits_tree *t = limits_test_load_ok(limits_test_seed_yaml);
    struct limits_levels *lv = limits_test_levels_new(), *c;

    limits_test_resolve(t, "user:alex:trade", lv);
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
    limits_test_resolve(t, "user:bob", lv);
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
    struct limits_tree *t = limits_test_load_ok(limits_test_seed_yaml);
    struct limits_levels *lv = limits_test_levels_new();
    char sha[SHA256_HEX_LEN];

    cr_assert_eq(limits_rule_count(t), 2);
    cr_assert_str_eq(limits_rule_pattern(t, 0), "user:*");
    cr_assert_str_eq(limits_rule_pattern(t, 1), "user:*:trade");
    cr_assert_null(limits_rule_pattern(t, 2));
    limits_test_resolve(t, "user:alex:trade", lv);
    cr_assert_eq(lv->n, 2);
    cr_assert_str_eq(limits_rule_pattern(t, lv->level[0].rule), "user:*");
    cr_assert_str_eq(limits_rule_pattern(t, lv->level[1].rule), "user:*:trade");
    sha256_hex(limits_test_seed_yaml, strlen(limits_test_seed_yaml), sha);
    cr_assert_str_eq(limits_sha256(t), sha);
    cr_assert_null(limits_sha256(NULL));
    free(lv);
    limits_free(t);
}

Test(limits, seed_path_keys_share_the_identity_tag)
{
    struct limits_tree *t = limits_test_load_ok(limits_test_seed_yaml);
    struct limits_levels *lv = limits_test_levels_new();

    limits_test_resolve(t, "user:alex:trade", lv);
    cr_assert_eq(lv->n, 2);
    cr_assert_eq(lv->ngroups, 1);
    cr_assert_eq(lv->nsegments, 3);
    cr_assert_eq(lv->matched, 3);
    limits_test_assert_level(lv, 0, "user:alex", "cellgate:{user:alex}");
    limits_test_assert_level(lv, 1, "user:alex:trade",
                             "cellgate:{user:alex}:trade");
    cr_assert_eq(lv->level[0].depth, 2);
    cr_assert_eq(lv->level[1].depth, 3);
    cr_assert(lv->level[0].wildcard);
    cr_assert_not(lv->level[1].wildcard);
    cr_assert_eq(lv->level[0].group, 0);
    cr_assert_eq(lv->level[1].group, 0);
    cr_assert_eq(lv->level[1].tag_len, strlen("user:alex"));
    cr_assert_eq(memcmp(lv->level[1].tag, "user:alex", 9), 0);
    cr_assert_str_eq(limits_test_limit_key(&lv->level[0], 0),
                     "cellgate:{user:alex}#0:gcra");
    cr_assert_str_eq(limits_test_limit_key(&lv->level[1], 0),
                     "cellgate:{user:alex}:trade#0:gcra");
    cr_assert_not(lv->level[0].overridden);
    cr_assert_not(lv->level[0].unlimited);
    free(lv);
    limits_free(t);
}

Test(limits, example_file_loads_and_resolves)
{
    struct limits_tree *t = NULL;
    struct limits_levels *lv = limits_test_levels_new();
    char err[LIMITS_TEST_ERRLEN];

    cr_assert_eq(
        limits_load_file(LIMITS_TEST_EXAMPLE_FILE, &t, err, sizeof(err)),
        LIMITS_OK, "%s", err);
    cr_assert_str_empty(err);
    cr_assert_eq(limits_rule_count(t), 8);
    cr_assert_eq(limits_override_count(t), 5);

    /* The factor 2 of user:alex halves the burst and doubles the period. */
    limits_test_resolve(t, "user:alex:trade", lv);
    cr_assert_eq(lv->n, 2);
    cr_assert(lv->level[0].overridden);
    cr_assert_str_eq(limits_test_fmt(&lv->level[0].limits[0]),
                     "gcra(max_burst=7,count=30,period=120s)");
    cr_assert_str_eq(limits_test_fmt(&lv->level[1].limits[0]),
                     "gcra(max_burst=5,count=10,period=15s)");

    /* A level above the wildcard lives in a slot of its own. */
    limits_test_resolve(t, "api:k1:search", lv);
    cr_assert_eq(lv->n, 3);
    cr_assert_eq(lv->ngroups, 2);
    limits_test_assert_level(lv, 0, "api", "cellgate:{api}");
    limits_test_assert_level(lv, 1, "api:k1", "cellgate:{api:k1}");
    limits_test_assert_level(lv, 2, "api:k1:search",
                             "cellgate:{api:k1}:search");
    cr_assert_eq(lv->level[0].group, 0);
    cr_assert_eq(lv->level[1].group, 1);
    cr_assert_eq(lv->level[2].group, 1);
    cr_assert_eq(lv->level[1].nlimits, 2);
    cr_assert_str_eq(limits_test_limit_key(&lv->level[1], 1),
                     "cellgate:{api:k1}#1:sliding_counter");
    cr_assert_str_eq(limits_test_fmt(&lv->level[2].limits[0]),
                     "token_bucket(capacity=20,refill_per_sec=2.5)");

    /* Parameters override (NERD style) on the token bucket. */
    limits_test_resolve(t, "api:partner:search", lv);
    cr_assert(lv->level[2].overridden);
    cr_assert_str_eq(limits_test_fmt(&lv->level[2].limits[0]),
                     "token_bucket(capacity=200,refill_per_sec=50)");

    /* The exempting empty node beats the wildcard. */
    limits_test_resolve(t, "user:healthcheck", lv);
    cr_assert_eq(lv->n, 0);
    cr_assert_eq(lv->matched, 2);

    /* inf and unlimited: true. */
    limits_test_resolve(t, "api:internal", lv);
    cr_assert_eq(lv->n, 2);
    cr_assert(lv->level[1].unlimited);
    cr_assert_eq(lv->level[1].nlimits, 0);
    cr_assert_null(lv->level[1].limits);
    limits_test_resolve(t, "user:ops:trade", lv);
    cr_assert(lv->level[0].unlimited);
    cr_assert_not(lv->level[1].unlimited);

    /* A replacement list. */
    limits_test_resolve(t, "user:carol:trade", lv);
    cr_assert_str_eq(limits_test_fmt(&lv->level[1].limits[0]),
                     "gcra(max_burst=20,count=60,period=60s)");

    limits_test_resolve(t, "login:10.0.0.1", lv);
    cr_assert_eq(lv->n, 1);
    cr_assert_str_eq(limits_test_fmt(&lv->level[0].limits[0]),
                     "sliding_log(max=5,window=900s,min_interval=1s)");
    limits_test_resolve(t, "api:k1:upload", lv);
    cr_assert_str_eq(limits_test_fmt(&lv->level[2].limits[0]),
                     "leaky_bucket(size=5,drip_ms=2000,drip_size=1)");
    free(lv);
    limits_free(t);
}

Test(limits, example_file_is_described_in_a_fixed_order)
{
    struct limits_tree *t = NULL;
    char err[LIMITS_TEST_ERRLEN], *text;

    cr_assert_eq(
        limits_load_file(LIMITS_TEST_EXAMPLE_FILE, &t, err, sizeof(err)),
        LIMITS_OK, "%s", err);
    text = limits_test_describe(t);
    cr_assert_str_eq(
        text,
        "api  fixed_window(max=100000,window=60s)\n"
        "api:*  sliding_window(max=600,window=60s,resolution=1s) "
        "sliding_counter(max=20000,window=3600s)\n"
        "api:*:search  token_bucket(capacity=20,refill_per_sec=2.5)\n"
        "api:*:upload  leaky_bucket(size=5,drip_ms=2000,drip_size=1)\n"
        "jobs:*  concurrency(max=10,lease=30s) "
        "sliding_window(max=100,window=60s,resolution=1s)\n"
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
    struct limits_tree *t = limits_test_load_ok(yaml);
    struct limits_levels *lv = limits_test_levels_new();
    const struct limits_limit *l;

    cr_assert_eq(limits_rule_count(t), 2);
    limits_test_resolve(t, "a", lv);
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
    limits_test_resolve(t, "b", lv);
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
    cr_assert_str_eq(limits_test_limit_key(&lv->level[0], 2),
                     "cellgate:{b}#2:gcra");
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
    cr_assert_str_eq(limits_test_fmt(&l),
                     "gcra(max_burst=15,count=30,period=60s)");
    l.u.gcra.period_ms = 1250;
    cr_assert_str_eq(limits_test_fmt(&l),
                     "gcra(max_burst=15,count=30,period=1.25s)");
    l.u.gcra.period_ms = 1;
    cr_assert_str_eq(limits_test_fmt(&l),
                     "gcra(max_burst=15,count=30,period=0.001s)");
    l.algo = LIMITS_TOKEN_BUCKET;
    l.u.token_bucket = (struct limits_token_bucket){
        .capacity = 3,
        .refill_per_sec_micro = 1,
    };
    cr_assert_str_eq(limits_test_fmt(&l),
                     "token_bucket(capacity=3,refill_per_sec=0.000001)");
    l.u.token_bucket.refill_per_sec_micro = LIMITS_RATE_INF;
    cr_assert_str_eq(limits_test_fmt(&l),
                     "token_bucket(capacity=3,refill_per_sec=inf)");
    l.algo = LIMITS_SLIDING_WINDOW;
    l.u.sliding_window = (struct limits_sliding_window){
        .max = 9,
        .window_ms = 10000,
        .resolution_ms = 500,
    };
    cr_assert_str_eq(limits_test_fmt(&l),
                     "sliding_window(max=9,window=10s,resolution=0.5s)");
    l.algo = LIMITS_SLIDING_COUNTER;
    l.u.sliding_counter =
        (struct limits_sliding_counter){ .max = 2, .window_ms = 1000 };
    cr_assert_str_eq(limits_test_fmt(&l), "sliding_counter(max=2,window=1s)");
    l.algo = LIMITS_FIXED_WINDOW;
    l.u.fixed_window =
        (struct limits_fixed_window){ .max = 2, .window_ms = 1000 };
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
    char yaml[512], err[LIMITS_TEST_ERRLEN];
    int rc;

    LIMITS_TEST_ASSERT_TERMINATED(tc->text);
    LIMITS_TEST_ASSERT_TERMINATED(tc->err);
    snprintf(yaml, sizeof(yaml), "%s      %s: \"%s\"\n", head, param, tc->text);
    rc = limits_load_string("limits.yaml", yaml, &t, err, sizeof(err));
    if (tc->err[0] != '\0') {
        cr_assert_eq(rc, LIMITS_ERR, "\"%s\" accepted", tc->text);
        cr_assert_str_eq(err, tc->err, "\"%s\"", tc->text);
        return;
    }
    cr_assert_eq(rc, LIMITS_OK, "\"%s\": %s", tc->text, err);
    lv = limits_test_levels_new();
    limits_test_resolve(t, "u", lv);
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

#define WANT_WINDOW                                                            \
    "a positive duration such as 60, 1.5, 500ms or 2m, or day, week or month"
#define LOC_WINDOW "limits.yaml:5:15: u: window: "

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
