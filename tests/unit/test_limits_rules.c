/* Unit tests of conf/limits' LIMITER RULES text and shadow: nodes (marked
 * in the levels and shown after the limits). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf/limits.h"
#include "tests/support/limits_test.h"
#include "tests/support/px_test.h"

PX_TEST_SUITE(limits_rules);

/* ---------------- LIMITER RULES ---------------- */

Test(limits_rules, describe_lists_rules_depth_first_then_overrides)
{
    struct limits_tree *t = limits_test_load_ok(limits_test_tree_yaml);
    char *text = limits_test_describe(t);

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

Test(limits_rules, describe_of_an_empty_tree_is_empty)
{
    struct limits_tree *t = limits_test_load_ok("{}\n");
    char *text = limits_test_describe(t);

    cr_assert_str_empty(text);
    cr_assert_eq(limits_rule_count(t), 0);
    free(text);
    text = limits_test_describe(NULL);
    cr_assert_str_empty(text);
    free(text);
    limits_free(t);
    limits_free(NULL);
}

Test(limits_rules, describe_is_cut_after_one_mebibyte)
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
    t = limits_test_load_ok(yaml);
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

Test(limits_rules, shadow_marks_only_its_own_node_and_survives_overrides)
{
    struct limits_tree *t = limits_test_load_ok(shadow_yaml);
    struct limits_levels *lv = limits_test_levels_new();

    limits_test_resolve(t, "global:bob:new", lv);
    cr_assert_eq(lv->n, 3);
    cr_assert(lv->level[0].shadow);
    cr_assert_not(lv->level[1].shadow, "shadow: FALSE, and not inherited");
    cr_assert(lv->level[2].shadow, "shadow: yes");
    cr_assert(lv->level[2].overridden);
    limits_test_resolve(t, "global:alex", lv);
    cr_assert_eq(lv->n, 2);
    cr_assert(lv->level[0].shadow);
    cr_assert_not(lv->level[1].shadow);
    free(lv);
    limits_free(t);
}

Test(limits_rules, rules_show_shadow_after_the_limits)
{
    struct limits_tree *t = limits_test_load_ok(shadow_yaml);
    char *out = NULL;
    size_t len = 0;

    out = limits_test_describe(t);
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

Test(limits_rules, shadow_takes_a_boolean_on_a_node_with_limits)
{
    limits_test_expect_error(
        "user:\n  limits: [1, 1, 1]\n  shadow: maybe\n",
        "limits.yaml:3:11: user: shadow: expected true or false, "
        "got \"maybe\"");
    limits_test_expect_error(
        "user:\n  limits: [1, 1, 1]\n  shadow: [true]\n",
        "limits.yaml:3:11: user: shadow: expected true or false, "
        "got a sequence");
    limits_test_expect_error(
        "user:\n  limits: [1, 1, 1]\n  shadow: 1\n",
        "limits.yaml:3:11: user: shadow: expected true or false, "
        "got \"1\"");
    limits_test_expect_error(
        "user:\n  shadow: true\n  limits: [1, 1, 1]\n"
        "  shadow: false\n",
        "limits.yaml:4:3: user: duplicate key 'shadow' (first at "
        "line 2)");
    limits_test_expect_error(
        "user:\n  shadow: true\n  children:\n    a:\n"
        "      limits: [1, 1, 1]\n",
        "limits.yaml:2:3: user: shadow: true on a node without "
        "limits (it applies to the node's own limits, not to its "
        "children)");
}
