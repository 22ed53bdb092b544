/* Unit tests of conf/limits' hot path: a path resolved into levels top
 * first, their hash tags and key bases, the key of each limit, and the
 * paths and prefixes refused. */
#include <stdlib.h>
#include <string.h>

#include "conf/limits.h"
#include "tests/support/limits_test.h"
#include "tests/support/px_test.h"

/* After px_test.h: criterion.h must come before its parameterized.h. */
#include <criterion/parameterized.h>

PX_TEST_SUITE(limits_resolve);

/* ---------------- Resolution ---------------- */

Test(limits_resolve, levels_come_top_first_and_share_one_tag_below_the_wildcard)
{
    struct limits_tree *t = limits_test_load_ok(limits_test_tree_yaml);
    struct limits_levels *lv = limits_test_levels_new();

    limits_test_resolve(t, "user:zoe:trade", lv);
    cr_assert_eq(lv->n, 3);
    cr_assert_eq(lv->ngroups, 2);
    limits_test_assert_level(lv, 0, "user", "cellgate:{user}");
    limits_test_assert_level(lv, 1, "user:zoe", "cellgate:{user:zoe}");
    limits_test_assert_level(lv, 2, "user:zoe:trade",
                             "cellgate:{user:zoe}:trade");
    cr_assert_eq(lv->level[0].group, 0);
    cr_assert_eq(lv->level[1].group, 1);
    cr_assert_eq(lv->level[2].group, 1);
    cr_assert_eq(lv->level[0].tag_len, 4);
    cr_assert_eq(lv->level[0].limits[0].u.gcra.max_burst, 100);
    cr_assert_eq(lv->level[1].limits[0].u.gcra.max_burst, 15);
    cr_assert_eq(lv->level[2].limits[0].u.gcra.max_burst, 5);
    /* One "*" on the path: every level may be a record of its tag's
     * state string. */
    cr_assert_not(lv->level[1].own_keys);
    cr_assert_not(lv->level[2].own_keys);
    free(lv);
    limits_free(t);
}

Test(limits_resolve, an_exact_segment_beats_the_wildcard)
{
    struct limits_tree *t = limits_test_load_ok(limits_test_tree_yaml);
    struct limits_levels *lv = limits_test_levels_new();

    limits_test_resolve(t, "user:admin:trade", lv);
    cr_assert_eq(lv->n, 2, "admin:trade is an empty node, not user:*:trade");
    cr_assert_eq(lv->level[1].limits[0].u.gcra.max_burst, 50);
    cr_assert_not(lv->level[1].wildcard);
    /* No "*" matched: each level is tagged with its own path. */
    limits_test_assert_level(lv, 1, "user:admin", "cellgate:{user:admin}");
    cr_assert_eq(lv->ngroups, 2);
    cr_assert_eq(lv->matched, 3);
    limits_test_resolve(t, "user:zoe:other", lv);
    cr_assert_eq(lv->n, 3, "user:*:* matches other");
    cr_assert_eq(lv->level[2].limits[0].u.gcra.max_burst, 1);
    /* user:*:*: the second "*" is below the identity's, so zoe's "other"
     * keeps keys of its own (zoe's string would hold every such path). */
    cr_assert_not(lv->level[1].own_keys);
    cr_assert(lv->level[2].own_keys);
    free(lv);
    limits_free(t);
}

Test(limits_resolve, literal_paths_tag_each_level_with_its_own_path)
{
    struct limits_tree *t = limits_test_load_ok(limits_test_tree_yaml);
    struct limits_levels *lv = limits_test_levels_new();

    limits_test_resolve(t, "api:search", lv);
    cr_assert_eq(lv->n, 2);
    cr_assert_eq(lv->ngroups, 2);
    limits_test_assert_level(lv, 0, "api", "cellgate:{api}");
    limits_test_assert_level(lv, 1, "api:search", "cellgate:{api:search}");
    limits_test_resolve(t, "api:nolimits:deep", lv);
    cr_assert_eq(lv->n, 2, "a node without limits is no level");
    limits_test_assert_level(lv, 1, "api:nolimits:deep",
                             "cellgate:{api:nolimits:deep}");
    cr_assert_eq(lv->level[1].depth, 3);
    free(lv);
    limits_free(t);
}

Test(limits_resolve, the_tag_ends_at_the_first_wildcard_even_with_two)
{
    struct limits_tree *t = limits_test_load_ok(limits_test_tree_yaml);
    struct limits_levels *lv = limits_test_levels_new();

    limits_test_resolve(t, "tenant:acme:app:web", lv);
    cr_assert_eq(lv->n, 1);
    cr_assert_eq(lv->ngroups, 1);
    limits_test_assert_level(lv, 0, "tenant:acme:app:web",
                             "cellgate:{tenant:acme}:app:web");
    cr_assert_eq(lv->level[0].tag_len, strlen("tenant:acme"));
    cr_assert(lv->level[0].own_keys, "app:* is below the tenant's \"*\"");
    free(lv);
    limits_free(t);
}

/* Where a level's state lives (a record of its identity's string, or keys
 * of its own) depends on the nodes of its own path alone: a reload that
 * adds a second "*" elsewhere under the identity never moves it. */
Test(limits_resolve, a_second_wildcard_elsewhere_leaves_a_level_in_the_string)
{
    static const char before[] = "user:\n"
                                 "  children:\n"
                                 "    \"*\":\n"
                                 "      limits: [1, 1, 60]\n"
                                 "      children:\n"
                                 "        trade: {limits: [1, 1, 60]}\n";
    static const char after[] = "user:\n"
                                "  children:\n"
                                "    \"*\":\n"
                                "      limits: [1, 1, 60]\n"
                                "      children:\n"
                                "        trade: {limits: [1, 1, 60]}\n"
                                "        device:\n"
                                "          children:\n"
                                "            \"*\": {limits: [1, 1, 60]}\n";
    struct limits_tree *t1 = limits_test_load_ok(before),
                       *t2 = limits_test_load_ok(after);
    struct limits_levels *lv = limits_test_levels_new();

    limits_test_resolve(t2, "user:zoe:trade", lv);
    cr_assert_eq(lv->n, 2);
    cr_assert_not(lv->level[0].own_keys);
    cr_assert_not(lv->level[1].own_keys);
    limits_test_resolve(t1, "user:zoe:trade", lv);
    cr_assert_not(lv->level[0].own_keys);
    cr_assert_not(lv->level[1].own_keys);
    limits_test_resolve(t2, "user:zoe:device:tv", lv);
    cr_assert_eq(lv->n, 2);
    cr_assert_not(lv->level[0].own_keys, "zoe's level moved");
    cr_assert(lv->level[1].own_keys);
    limits_test_assert_level(lv, 1, "user:zoe:device:tv",
                             "cellgate:{user:zoe}:device:tv");
    free(lv);
    limits_free(t2);
    limits_free(t1);
}

Test(limits_resolve, paths_that_meet_no_limits_give_zero_levels)
{
    struct limits_tree *t = limits_test_load_ok(limits_test_tree_yaml);
    struct limits_levels *lv = limits_test_levels_new();
    const char *why = NULL;

    limits_test_resolve(t, "nothing:here", lv);
    cr_assert_eq(lv->n, 0);
    cr_assert_eq(lv->ngroups, 0);
    cr_assert_eq(lv->matched, 0);
    cr_assert_eq(lv->nsegments, 2);
    limits_test_resolve(t, "tenant:acme", lv);
    cr_assert_eq(lv->n, 0);
    cr_assert_eq(lv->matched, 2);
    limits_test_resolve(t, "api:nolimits", lv);
    cr_assert_eq(lv->n, 1, "only api itself");
    cr_assert_eq(limits_resolve(NULL, "user:a", 6, NULL, 0, lv, &why),
                 LIMITS_OK);
    cr_assert_eq(lv->n, 0, "no tree, no limits");
    free(lv);
    limits_free(t);
}

Test(limits_resolve, a_path_deeper_than_the_tree_keeps_the_levels_it_met)
{
    struct limits_tree *t = limits_test_load_ok(limits_test_tree_yaml);
    struct limits_levels *lv = limits_test_levels_new();

    limits_test_resolve(t, "user:zoe:trade:x:y", lv);
    cr_assert_eq(lv->n, 3);
    cr_assert_eq(lv->matched, 3);
    cr_assert_eq(lv->nsegments, 5);
    limits_test_assert_level(lv, 2, "user:zoe:trade",
                             "cellgate:{user:zoe}:trade");
    free(lv);
    limits_free(t);
}

Test(limits_resolve, overrides_apply_to_their_exact_concrete_path_only)
{
    struct limits_tree *t = limits_test_load_ok(limits_test_tree_yaml);
    struct limits_levels *lv = limits_test_levels_new();

    limits_test_resolve(t, "user:alex:trade", lv);
    cr_assert_eq(lv->n, 3);
    cr_assert_not(lv->level[0].overridden, "user itself");
    cr_assert(lv->level[1].overridden);
    cr_assert_eq(lv->level[1].limits[0].u.gcra.max_burst, 7);
    cr_assert_eq(lv->level[1].limits[0].u.gcra.period_ms, 120000);
    cr_assert(lv->level[2].unlimited);
    cr_assert_eq(lv->level[2].nlimits, 0);
    cr_assert_eq(limits_limit_key(&lv->level[2], 0, NULL, 0), -1);
    limits_test_assert_level(lv, 2, "user:alex:trade",
                             "cellgate:{user:alex}:trade");

    limits_test_resolve(t, "user:alexander:trade", lv);
    cr_assert_not(lv->level[1].overridden);
    cr_assert_not(lv->level[2].overridden);
    cr_assert_eq(lv->level[1].limits[0].u.gcra.max_burst, 15);

    limits_test_resolve(t, "user:bob:trade", lv);
    cr_assert_not(lv->level[1].overridden);
    cr_assert(lv->level[2].overridden);
    cr_assert_str_eq(limits_test_fmt(&lv->level[2].limits[0]),
                     "gcra(max_burst=5,count=20,period=15s)");
    free(lv);
    limits_free(t);
}

Test(limits_resolve, prefix_is_a_parameter_and_defaults_to_cellgate)
{
    struct limits_tree *t = limits_test_load_ok(limits_test_seed_yaml);
    struct limits_levels *lv = limits_test_levels_new();
    const char *why = NULL;

    cr_assert_eq(limits_resolve(t, "user:alex:trade", 9, "rl:xyz", 3, lv, &why),
                 LIMITS_OK, "only the first 9 bytes of the path count");
    cr_assert_eq(lv->n, 1);
    limits_test_assert_level(lv, 0, "user:alex", "rl:{user:alex}");
    cr_assert_str_eq(limits_test_limit_key(&lv->level[0], 0),
                     "rl:{user:alex}#0:gcra");
    cr_assert_eq(limits_resolve(t, "user:alex", 9, "", 0, lv, &why), LIMITS_OK);
    limits_test_assert_level(lv, 0, "user:alex", "{user:alex}");
    cr_assert_eq(limits_resolve(t, "user:alex", 9, NULL, 99, lv, &why),
                 LIMITS_OK);
    limits_test_assert_level(lv, 0, "user:alex", "cellgate:{user:alex}");
    free(lv);
    limits_free(t);
}

struct path_case {
    char path[48]; /* the path */
    char err[64];  /* the exact reason */
};

ParameterizedTestParameters(limits_resolve, bad_paths_are_refused_with_a_reason)
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

ParameterizedTest(struct path_case *tc, limits_resolve,
                  bad_paths_are_refused_with_a_reason)
{
    struct limits_tree *t = limits_test_load_ok(limits_test_seed_yaml);
    struct limits_levels *lv = limits_test_levels_new();
    const char *why = NULL;

    LIMITS_TEST_ASSERT_TERMINATED(tc->path);
    LIMITS_TEST_ASSERT_TERMINATED(tc->err);
    cr_assert_eq(
        limits_resolve(t, tc->path, strlen(tc->path), NULL, 0, lv, &why),
        LIMITS_ERR, "\"%s\" accepted", tc->path);
    cr_assert_str_eq(why, tc->err, "\"%s\"", tc->path);
    cr_assert_eq(lv->n, 0);
    free(lv);
    limits_free(t);
}

Test(limits_resolve, path_length_and_segment_caps_are_exact)
{
    struct limits_tree *t = limits_test_load_ok(limits_test_seed_yaml);
    struct limits_levels *lv = limits_test_levels_new();
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

Test(limits_resolve, bad_prefixes_are_refused)
{
    struct limits_tree *t = limits_test_load_ok(limits_test_seed_yaml);
    struct limits_levels *lv = limits_test_levels_new();
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

Test(limits_resolve, any_other_byte_may_name_an_identity_and_keys_keep_it)
{
    static const char path[] = "user:a\0b\xff *:trade";
    struct limits_tree *t = limits_test_load_ok(limits_test_seed_yaml);
    struct limits_levels *lv = limits_test_levels_new();
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

Test(limits_resolve, every_key_hashes_exactly_the_tag_the_module_wrote)
{
    /* Redis hashes the bytes between the first '{' and the next '}'. */
    static const char *const paths[] = {
        "user:zoe:trade",   "user:admin:trade", "api:search",
        "tenant:a*b:app:x", "user:*:trade",     "user:a-b c:z",
    };
    struct limits_tree *t = limits_test_load_ok(limits_test_tree_yaml);
    struct limits_levels *lv = limits_test_levels_new();
    size_t i, j;

    for (i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        limits_test_resolve(t, paths[i], lv);
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

Test(limits_resolve, limit_key_reports_its_length_and_truncates_safely)
{
    struct limits_tree *t = limits_test_load_ok(limits_test_seed_yaml);
    struct limits_levels *lv = limits_test_levels_new();
    char small[10];

    limits_test_resolve(t, "user:alex:trade", lv);
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
