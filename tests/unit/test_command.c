/* Invariants of the proxy's command table. */
#include <string.h>

#include "parser/resp.h"
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
        cr_assert_eq(t[i].how == CMD_LOCAL || t[i].how == CMD_LIMITER,
                     t[i].proc != NULL, "%s", t[i].name);
        /* Only subcommand entries carry a '|', and only to fan out. */
        if (strchr(t[i].name, '|') != NULL) {
            cr_assert_eq(t[i].how, CMD_FANOUT, "%s", t[i].name);
        }
        /* Connection state lives on a private connection. */
        if (t[i].flags & (CMD_F_MULTI | CMD_F_WATCH | CMD_F_PUBSUB |
                          CMD_F_BLOCKING | CMD_F_MONITOR)) {
            cr_assert_eq(t[i].how, CMD_PRIVATE, "%s", t[i].name);
        }
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

Test(cmd, the_table_says_where_each_command_goes)
{
    static const struct {
        const char *name;
        enum cmd_how how;
    } cases[] = {
        { "cl.throttle", CMD_LIMITER }, { "limiter", CMD_LIMITER },
        { "hello", CMD_LOCAL },         { "mget", CMD_SPLIT },
        { "del", CMD_SPLIT },           { "keys", CMD_FANOUT },
        { "info", CMD_FANOUT },         { "blpop", CMD_PRIVATE },
        { "multi", CMD_PRIVATE },       { "sync", CMD_TUNNEL },
        { "replconf", CMD_REFUSE },
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct cmd_def *d =
            cmd_lookup(cases[i].name, strlen(cases[i].name));
        cr_assert_not_null(d, "%s", cases[i].name);
        cr_assert_eq(d->how, cases[i].how, "%s", cases[i].name);
    }
    /* A subcommand entry is never a command a client can name. */
    cr_assert_null(cmd_lookup("script|load", 11));
}

Test(cmd, split_and_fanout_commands_name_their_merge)
{
    static const char *const argv[][2] = {
        { "MGET", "a" },        { "MSET", "a" },        { "DEL", "a" },
        { "script", "LOAD" },   { "SCRIPT", "exists" }, { "function", "kill" },
        { "pubsub", "numsub" }, { "CLIENT", "pause" },
    };
    static const enum merge_kind want[] = {
        MERGE_BY_KEY, MERGE_ALL_OK, MERGE_SUM,    MERGE_SAME,
        MERGE_AND,    MERGE_ANY_OK, MERGE_NUMSUB, MERGE_ALL_OK,
    };

    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        size_t lens[2] = { strlen(argv[i][0]), strlen(argv[i][1]) };
        struct resp_cmd *cmd = resp_cmd_new(2, argv[i], lens);
        const struct cmd_def *d =
            cmd_merge_of(cmd_lookup(argv[i][0], lens[0]), cmd);
        cr_assert_not_null(d, "%s %s", argv[i][0], argv[i][1]);
        cr_assert_eq(d->merge, want[i], "%s %s", argv[i][0], argv[i][1]);
        resp_cmd_free(cmd);
    }
    {
        /* Neither: forwarded as they are. */
        const char *a[2] = { "SCRIPT", "DEBUG" };
        size_t lens[2] = { 6, 5 };
        struct resp_cmd *cmd = resp_cmd_new(2, a, lens);
        cr_assert_null(cmd_merge_of(cmd_lookup(a[0], lens[0]), cmd));
        resp_cmd_free(cmd);
    }
}
