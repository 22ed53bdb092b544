/* Test support for the conf/limits suites (test_limits*.c): loading with
 * or without the errors expected, resolving, the rendering of a limit and
 * of LIMITER RULES, and the two trees several suites walk. */
#ifndef PX_TESTS_SUPPORT_LIMITS_TEST_H
#define PX_TESTS_SUPPORT_LIMITS_TEST_H

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "conf/limits.h"

#define LIMITS_TEST_ERRLEN 16384

#define LIMITS_TEST_EXAMPLE_FILE PX_SOURCE_DIR "/conf/limits.example.yaml"

/* A case string that fills its array exactly compiles without its NUL. */
#define LIMITS_TEST_ASSERT_TERMINATED(a)                                       \
    cr_assert_not_null(memchr((a), '\0', sizeof(a)), "case string too long")

static const char limits_test_seed_yaml[] = "user:\n"
                                            "  children:\n"
                                            "    \"*\":\n"
                                            "      limits: [15, 30, 60]\n"
                                            "      children:\n"
                                            "        trade:\n"
                                            "          limits: [5, 10, 15]\n";
/* Loads `yaml` and fails unless it is accepted without a message. */
static inline struct limits_tree *limits_test_load_ok(const char *yaml)
{
    struct limits_tree *t = NULL;
    char err[LIMITS_TEST_ERRLEN];
    int rc = limits_load_string("limits.yaml", yaml, &t, err, sizeof(err));

    cr_assert_eq(rc, LIMITS_OK, "rc %d: %.2000s\nfor YAML:\n%.300s", rc, err,
                 yaml);
    cr_assert_str_empty(err);
    cr_assert_not_null(t);
    return t;
}

/* Loads `yaml`, expects it to be refused with exactly `want`, and checks
 * that the output pointer was left alone. */
static inline void limits_test_expect_error(const char *yaml, const char *want)
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
static inline void limits_test_resolve(const struct limits_tree *t,
                                       const char *path,
                                       struct limits_levels *lv)
{
    const char *why = NULL;
    int rc = limits_resolve(t, path, strlen(path), NULL, 0, lv, &why);

    cr_assert_eq(rc, LIMITS_OK, "%s: %s", path, why != NULL ? why : "");
}

/* Fails unless level `i` has this concrete path and key base. */
static inline void limits_test_assert_level(const struct limits_levels *lv,
                                            size_t i, const char *path,
                                            const char *key)
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
static inline const char *limits_test_limit_key(const struct limits_level *l,
                                                size_t i)
{
    static char out[4096];

    cr_assert_geq(limits_limit_key(l, i, out, sizeof(out)), 0);
    return out;
}

/* The rendering of one limit. */
static inline const char *limits_test_fmt(const struct limits_limit *l)
{
    static char out[256];

    limits_format(l, out, sizeof(out));
    return out;
}

static inline struct limits_levels *limits_test_levels_new(void)
{
    struct limits_levels *lv = malloc(LIMITS_LEVELS_BYTES);

    cr_assert_not_null(lv);
    return lv;
}

/* The tree's LIMITER RULES text (caller frees). */
static inline char *limits_test_describe(const struct limits_tree *t)
{
    char *out = NULL;
    size_t len = 0;

    cr_assert_eq(limits_describe(t, false, true, &out, &len), LIMITS_OK);
    cr_assert_not_null(out);
    cr_assert_eq(strlen(out), len);
    return out;
}

static const char limits_test_tree_yaml[] =
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

#endif /* PX_TESTS_SUPPORT_LIMITS_TEST_H */
