/* Unit tests of conf/limits' overrides: factors on every algorithm,
 * overrides of the file, limits_scale's rounding and refusals, and
 * run-time overrides (LIMITER OVERRIDE) read from words. */
#include <stdlib.h>
#include <string.h>

#include "conf/limits.h"
#include "tests/support/limits_test.h"
#include "tests/support/px_test.h"

/* After px_test.h: criterion.h must come before its parameterized.h. */
#include <criterion/parameterized.h>

PX_TEST_SUITE(limits_override);

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

ParameterizedTestParameters(limits_override,
                            a_factor_divides_amounts_and_stretches_gaps)
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

ParameterizedTest(struct factor_case *tc, limits_override,
                  a_factor_divides_amounts_and_stretches_gaps)
{
    struct limits_tree *t = limits_test_load_ok(algos_yaml);
    struct limits_levels *lv = limits_test_levels_new();

    LIMITS_TEST_ASSERT_TERMINATED(tc->path);
    LIMITS_TEST_ASSERT_TERMINATED(tc->want);
    limits_test_resolve(t, tc->path, lv);
    cr_assert_eq(lv->n, 1, "%s", tc->path);
    cr_assert_eq(lv->level[0].nlimits, 1);
    cr_assert_str_eq(limits_test_fmt(&lv->level[0].limits[0]), tc->want, "%s",
                     tc->path);
    cr_assert_eq(lv->level[0].overridden, strcmp(tc->path, "g:x") != 0);
    free(lv);
    limits_free(t);
}

Test(limits_override, a_limits_override_replaces_the_whole_list)
{
    struct limits_tree *t = limits_test_load_ok(algos_yaml);
    struct limits_levels *lv = limits_test_levels_new();

    cr_assert_eq(limits_override_count(t), 17);
    limits_test_resolve(t, "f:two", lv);
    cr_assert_eq(lv->level[0].nlimits, 2);
    cr_assert_str_eq(limits_test_fmt(&lv->level[0].limits[0]),
                     "fixed_window(max=1,window=1s)");
    cr_assert_str_eq(limits_test_fmt(&lv->level[0].limits[1]),
                     "gcra(max_burst=1,count=2,period=3s)");
    cr_assert_str_eq(limits_test_limit_key(&lv->level[0], 1),
                     "cellgate:{f:two}#1:gcra");
    free(lv);
    limits_free(t);
}

Test(limits_override, scale_rounds_and_clamps_into_the_valid_range)
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

Test(limits_override, scale_refuses_bad_factors_and_invalid_results)
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

Test(limits_override, runtime_overrides_apply_to_the_nodes_own_limits)
{
    struct limits_levels *lv = limits_test_levels_new();
    struct limits_tree *t = limits_test_load_ok(
        "tb:\n  children:\n    \"*\":\n      limits:\n"
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
                          "(expected capacity, refill_per_sec, warmup, "
                          "cold_factor)");
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
