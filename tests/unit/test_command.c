/* Invariants of the proxy's command table. */
#include <string.h>

#include "proxy/command.h"
#include "tests/support/px_test.h"

PX_TEST_SUITE(cmd);

Test(cmd, table_is_sorted_lowercase_and_local_entries_have_a_proc)
{
    size_t n, i, k;
    const struct cmd_def *t = cmd_table(&n);

    cr_assert_gt(n, 10);
    for (i = 0; i < n; i++) {
        for (k = 0; t[i].name[k] != '\0'; k++) {
            cr_assert(t[i].name[k] < 'A' || t[i].name[k] > 'Z', "%s",
                      t[i].name);
        }
        if (i > 0) {
            cr_assert_lt(strcmp(t[i - 1].name, t[i].name), 0, "%s before %s",
                         t[i - 1].name, t[i].name);
        }
        cr_assert_eq((t[i].flags & CMD_F_LOCAL) != 0, t[i].proc != NULL, "%s",
                     t[i].name);
        cr_assert_neq(t[i].arity, 0, "%s", t[i].name);
    }
}

Test(cmd, lookup_ignores_case_and_misses_unknown_commands)
{
    const struct cmd_def *d = cmd_lookup("BLPop", 5);

    cr_assert_not_null(d);
    cr_assert_str_eq(d->name, "blpop");
    cr_assert(d->flags & CMD_F_BLOCKING);
    cr_assert_null(cmd_lookup("get", 3));
    cr_assert_null(cmd_lookup("blpopx", 6));
    cr_assert_null(cmd_lookup("", 0));
    cr_assert_null(cmd_lookup("averyveryveryveryverylongcommandname12345", 41));
}

Test(cmd, arity_follows_the_redis_convention)
{
    const struct cmd_def *echo = cmd_lookup("echo", 4);
    const struct cmd_def *ping = cmd_lookup("ping", 4);
    const struct cmd_def *blpop = cmd_lookup("blpop", 5);

    cr_assert(cmd_arity_ok(echo, 2));
    cr_assert_not(cmd_arity_ok(echo, 1));
    cr_assert_not(cmd_arity_ok(echo, 3));
    cr_assert(cmd_arity_ok(ping, 1));
    cr_assert(cmd_arity_ok(ping, 2));
    cr_assert_not(cmd_arity_ok(blpop, 2));
    cr_assert(cmd_arity_ok(blpop, 3));
    cr_assert(cmd_arity_ok(blpop, 9));
}
