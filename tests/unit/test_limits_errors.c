/* Unit tests of conf/limits, what it refuses: every error with its
 * file:line:column, all errors of a file at once, files that cannot be
 * read, and the caps against hostile input (depth, size, nodes, aliases,
 * numbers). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf/limits.h"
#include "tests/support/limits_test.h"
#include "tests/support/px_test.h"

/* After px_test.h: criterion.h must come before its parameterized.h. */
#include <criterion/parameterized.h>

PX_TEST_SUITE(limits_errors);

/* ---------------- Errors, one kind at a time ---------------- */

struct error_case {
    char yaml[256]; /* the whole file */
    char err[384];  /* the exact error text */
};

#define ONE_LIMIT_USER "user:\n  limits: [1, 1, 1]\n"

ParameterizedTestParameters(limits_errors,
                            each_error_names_file_line_and_column)
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
          "children, shadow or lease)" },
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
          "sliding_window, sliding_log, sliding_counter or concurrency)" },
        { "user:\n  limits:\n    - algorithm: [gcra]\n",
          "limits.yaml:3:18: user: algorithm: expected an algorithm name, got "
          "a sequence" },
        { "user:\n  limits:\n    - {algorithm: fixed_window, max: 1, window: "
          "1, burst: 2}\n",
          "limits.yaml:3:52: user: fixed_window: unknown parameter 'burst' "
          "(expected max, window, tz)" },
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
        { "user:\n  limits:\n    - {algorithm: concurrency, max: 100001}\n",
          "limits.yaml:3:37: user: max: \"100001\" is too large (max "
          "100000)" },
        { "user:\n  limits:\n    - {algorithm: concurrency, max: 1, lease: "
          "2d}\n",
          "limits.yaml:3:47: user: lease: \"2d\" is too large (max 1d)" },
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

ParameterizedTest(struct error_case *tc, limits_errors,
                  each_error_names_file_line_and_column)
{
    LIMITS_TEST_ASSERT_TERMINATED(tc->yaml);
    LIMITS_TEST_ASSERT_TERMINATED(tc->err);
    limits_test_expect_error(tc->yaml, tc->err);
}

Test(limits_errors, every_error_of_the_file_is_reported_one_per_line)
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

    limits_test_expect_error(
        yaml, "limits.yaml:2:3: user: unknown key 'limts' (expected "
              "limits, children, shadow or lease)\n"
              "limits.yaml:5:20: user:*: count: expected a positive "
              "integer, got \"0\"\n"
              "limits.yaml:10:25: user:*:trade: capacity: expected a "
              "positive integer, got \"-1\"\n"
              "limits.yaml:12:26: user:*:trade: algorithm: unknown "
              "algorithm \"foo\" (expected gcra, token_bucket, "
              "leaky_bucket, fixed_window, sliding_window, sliding_log, "
              "sliding_counter or concurrency)\n"
              "limits.yaml:13:9: user:*: segment \"a:b\" contains ':', "
              "the path separator\n"
              "limits.yaml:17:3: overrides: \"nobody\": matches no node "
              "with limits\n"
              "limits.yaml:18:17: override api: factor: expected a "
              "positive number, got \"0\"");
}

Test(limits_errors, an_override_of_a_refused_node_adds_no_second_error)
{
    limits_test_expect_error(
        "user:\n  limits: [1, 0, 1]\noverrides:\n  user: {factor: 2}\n",
        "limits.yaml:2:15: user: count: expected a positive integer, "
        "got \"0\"");
}

Test(limits_errors, a_bad_file_leaves_the_old_tree_in_place)
{
    struct limits_tree *t = limits_test_load_ok(limits_test_seed_yaml),
                       *old = t;
    struct limits_levels *lv = limits_test_levels_new();
    char err[LIMITS_TEST_ERRLEN];

    cr_assert_eq(
        limits_load_string("limits.yaml", "user: [1]\n", &t, err, sizeof(err)),
        LIMITS_ERR);
    cr_assert_eq(t, old);
    cr_assert_str_eq(err, "limits.yaml:1:7: user: expected a mapping with "
                          "limits and/or children, got a sequence");
    limits_test_resolve(t, "user:bob:trade", lv);
    cr_assert_eq(lv->n, 2);
    free(lv);
    limits_free(t);
}

Test(limits_errors, error_buffer_is_truncated_terminated_or_absent)
{
    static const char yaml[] = "a: [1]\nb: [2]\n";
    struct limits_tree *t = NULL;
    char full[LIMITS_TEST_ERRLEN], small[16];

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

Test(limits_errors, long_values_are_cut_in_messages)
{
    char yaml[512], want[512], value[201];

    memset(value, 'v', 200);
    value[200] = '\0';
    snprintf(yaml, sizeof(yaml), "u:\n  limits: [1, %s, 1]\n", value);
    snprintf(want, sizeof(want),
             "limits.yaml:2:15: u: count: expected a positive integer, got "
             "\"%.64s...\"",
             value);
    limits_test_expect_error(yaml, want);
}

/* ---------------- Files ---------------- */

Test(limits_errors, missing_file_names_the_path_and_the_system_error)
{
    static const char path[] = PX_SOURCE_DIR "/conf/no-such-limits.yaml";
    struct limits_tree *t = NULL;
    char err[LIMITS_TEST_ERRLEN], want[LIMITS_TEST_ERRLEN];

    cr_assert_eq(limits_load_file(path, &t, err, sizeof(err)), LIMITS_ERR);
    snprintf(want, sizeof(want), "%s: cannot open: %s", path, strerror(ENOENT));
    cr_assert_str_eq(err, want);
    cr_assert_null(t);
}

Test(limits_errors, directory_instead_of_file_is_a_read_error)
{
    static const char path[] = PX_SOURCE_DIR "/conf";
    struct limits_tree *t = NULL;
    char err[LIMITS_TEST_ERRLEN], want[LIMITS_TEST_ERRLEN];

    cr_assert_eq(limits_load_file(path, &t, err, sizeof(err)), LIMITS_ERR);
    snprintf(want, sizeof(want), "%s: cannot read: %s", path, strerror(EISDIR));
    cr_assert_str_eq(err, want);
}

Test(limits_errors, endless_file_is_refused_past_the_size_cap)
{
    struct limits_tree *t = NULL;
    char err[LIMITS_TEST_ERRLEN];

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

Test(limits_errors, deep_yaml_nesting_is_refused_before_libyaml_builds_it)
{
    char *yaml = repeat("a: ", "[", 100000, "");

    limits_test_expect_error(yaml,
                             "limits.yaml:1:131: YAML nesting deeper than 128 "
                             "levels");
    free(yaml);
}

Test(limits_errors, tree_deeper_than_32_levels_is_refused)
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
        limits_test_expect_error(yaml, want);
    }
}

Test(limits_errors, thirty_two_levels_with_limits_all_resolve_with_own_tags)
{
    /* 32 literal segments of 31 bytes: a 1023-byte path, every level with
     * limits and a tag of its own, and the longest prefix: the worst case
     * for the text of struct limits_levels. */
    char *yaml = malloc(65536), seg[32], path[1100] = "", prefix[129];
    struct limits_tree *t;
    struct limits_levels *lv = limits_test_levels_new();
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
    t = limits_test_load_ok(yaml);
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

Test(limits_errors, a_pattern_longer_than_any_path_is_refused)
{
    char *yaml = repeat("a: {children: {", "b", 1024, ": ~}}\n");

    limits_test_expect_error(
        yaml, "limits.yaml:1:16: a: segment "
              "\"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
              "bbbbbbbbbb...\" makes a pattern longer than 1024 "
              "bytes, which no path can match");
    free(yaml);
}

Test(limits_errors, huge_limit_lists_are_refused)
{
    char *yaml = repeat("u:\n  limits:\n", "    - [1, 1, 1]\n", 100000, "");

    limits_test_expect_error(yaml,
                             "limits.yaml:3:5: u: limits: at most 8 limits per "
                             "node, got 100000");
    free(yaml);
}

Test(limits_errors, more_than_100000_nodes_are_refused)
{
    char *yaml = malloc(100001 * 12 + 1);
    size_t len = 0;
    int i;

    cr_assert_not_null(yaml);
    for (i = 0; i <= 100000; i++) {
        len += (size_t)sprintf(yaml + len, "n%06d: ~\n", i);
    }
    limits_test_expect_error(yaml, "limits.yaml:1:1: more than 100000 nodes");
    yaml[len - 11] = '\0'; /* drop the last node: exactly 100000 */
    limits_free(limits_test_load_ok(yaml));
    free(yaml);
}

Test(limits_errors, more_than_500000_yaml_nodes_are_refused_by_the_prescan)
{
    char *yaml = repeat("a: [", "1,", 500000, "1]\n"), want[128];

    /* Mapping, key and sequence count 3; scalar k (0-based) sits at column
     * 5 + 2k, and the 499998th scalar makes 500001 nodes. */
    snprintf(want, sizeof(want),
             "limits.yaml:1:%d: more than 500000 YAML nodes", 5 + 2 * 499997);
    limits_test_expect_error(yaml, want);
    free(yaml);
}

Test(limits_errors, aliases_cannot_multiply_the_tree)
{
    static const char laughs[] = "a: &a {limits: [1, 1, 1]}\n"
                                 "b: &b {children: {x: *a, y: *a}}\n"
                                 "c: {children: {x: *b, y: *b}}\n";

    limits_test_expect_error(laughs,
                             "limits.yaml:2:22: YAML aliases are not supported "
                             "(*a): write the tree out in full\n"
                             "limits.yaml:2:29: YAML aliases are not supported "
                             "(*a): write the tree out in full\n"
                             "limits.yaml:3:19: YAML aliases are not supported "
                             "(*b): write the tree out in full\n"
                             "limits.yaml:3:26: YAML aliases are not supported "
                             "(*b): write the tree out in full");
}

Test(limits_errors, listing_stops_after_100_errors)
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

Test(limits_errors, huge_numbers_are_range_errors_not_overflows)
{
    limits_test_expect_error(
        "u:\n  limits: [99999999999999999999999999999, 1, 1]\n",
        "limits.yaml:2:12: u: max_burst: "
        "\"99999999999999999999999999999\" is too large (max "
        "9007199254740991)");
    limits_test_expect_error(
        "u:\n  limits:\n    - {algorithm: token_bucket, capacity: 1, "
        "refill_per_sec: 99999999999999999999.5}\n",
        "limits.yaml:3:62: u: refill_per_sec: "
        "\"99999999999999999999.5\" is too large (max 1000000000)");
}
