/* Invariants of the proxy's command table. */
#include <string.h>

#include "parser/resp.h"
#include "proxy/command.h"
#include "tests/support/px_test.h"

PX_TEST_SUITE(cmd);

/* The ways a row's pick may give, tried over a few argument shapes and
 * contexts: every way a row can take must reach something that serves it. */
static unsigned row_ways(const struct cmd_def *d)
{
    static const char *const subs[] = { "x",   "kill", "debug",   "load", "no",
                                        "yes", "list", "caching", "help" };
    unsigned ways = 0, i, k;

    if (d->pick == NULL) {
        return 1u << d->how; /* with a pick, `how` is the class only */
    }
    for (i = 0; i < 9 * 9 * 3; i++) {
        const char *argv[3] = { d->name, subs[i % 9], subs[i / 9 % 9] };
        size_t lens[3] = { strlen(argv[0]), strlen(argv[1]), strlen(argv[2]) };
        struct resp_cmd *cmd = resp_cmd_new(1 + (int)(i / 81), argv, lens);

        for (k = 0; k < 16; k++) {
            struct cmd_ctx ctx = { .has_upstream = (k & 1) != 0,
                                   .has_priv = (k & 2) != 0,
                                   .subscribed = (k & 4) != 0,
                                   .tracking = (k & 8) != 0 };
            unsigned flags = d->flags;

            ways |= 1u << d->pick(cmd, &ctx, &flags);
        }
        resp_cmd_free(cmd);
    }
    return ways;
}

Test(cmd, table_is_sorted_lowercase_and_every_way_reaches_its_server)
{
    size_t n, i, k;
    const struct cmd_def *t = cmd_table(&n);

    cr_assert_gt(n, 10);
    for (i = 0; i < n; i++) {
        unsigned ways = row_ways(&t[i]);

        for (k = 0; t[i].name[k] != '\0'; k++) {
            cr_assert(t[i].name[k] < 'A' || t[i].name[k] > 'Z', "%s",
                      t[i].name);
        }
        if (i > 0) {
            cr_assert_lt(strcmp(t[i - 1].name, t[i].name), 0, "%s before %s",
                         t[i - 1].name, t[i].name);
        }
        /* Answered here: a handler. */
        if (ways & ((1u << CMD_LOCAL) | (1u << CMD_LIMITER))) {
            cr_assert_not_null(t[i].proc, "%s", t[i].name);
        }
        /* A handler only where a way reaches it. */
        if (t[i].proc != NULL) {
            cr_assert(ways & ((1u << CMD_LOCAL) | (1u << CMD_LIMITER)), "%s",
                      t[i].name);
        }
        /* Merged from several nodes: how, said in the row. Only MSET
         * splits with more than its key per key. */
        if (t[i].how == CMD_SPLIT) {
            cr_assert(t[i].merge == MERGE_BY_KEY || t[i].merge == MERGE_SUM ||
                          t[i].merge == MERGE_ALL_OK,
                      "%s", t[i].name);
        }
        if (t[i].how == CMD_FANOUT || t[i].how == CMD_KILL) {
            cr_assert(t[i].merge != MERGE_BY_KEY, "%s", t[i].name);
        }
        if (t[i].how == CMD_KILL) {
            cr_assert_eq(t[i].merge, MERGE_ANY_OK, "%s", t[i].name);
        }
        cr_assert(t[i].key_step == 0 || t[i].how == CMD_SPLIT, "%s", t[i].name);
        /* Subcommand rows: fanned out or KILL, under a parent that says
         * it has them, and never with a pick of their own. */
        if (strchr(t[i].name, '|') != NULL) {
            size_t plen = (size_t)(strchr(t[i].name, '|') - t[i].name);
            const struct cmd_def *parent = cmd_lookup(t[i].name, plen);
            cr_assert(t[i].how == CMD_FANOUT || t[i].how == CMD_KILL, "%s",
                      t[i].name);
            cr_assert_not_null(parent, "%s", t[i].name);
            cr_assert(parent->flags & CMD_F_SUBCMDS, "%s", t[i].name);
            cr_assert_null(t[i].pick, "%s", t[i].name);
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

static struct resp_cmd *cmd_of(int argc, const char *a0, const char *a1,
                               const char *a2)
{
    const char *argv[3] = { a0, a1, a2 };
    size_t lens[3] = { strlen(a0), a1 ? strlen(a1) : 0, a2 ? strlen(a2) : 0 };

    return resp_cmd_new(argc, argv, lens);
}

/* The row that serves a command, as router_dispatch finds it. */
static const struct cmd_def *row_of(const struct resp_cmd *cmd)
{
    size_t len;
    const char *name = resp_cmd_arg(cmd, 0, &len);

    return cmd_sub(cmd_lookup(name, len), cmd);
}

Test(cmd, split_and_fanout_commands_name_their_merge)
{
    static const char *const argv[][2] = {
        { "MGET", "a" },        { "MSET", "a" },        { "DEL", "a" },
        { "script", "LOAD" },   { "SCRIPT", "exists" }, { "function", "kill" },
        { "pubsub", "numsub" }, { "CLIENT", "pause" },  { "script", "Kill" },
    };
    static const enum merge_kind want[] = {
        MERGE_BY_KEY, MERGE_ALL_OK, MERGE_SUM,    MERGE_SAME,   MERGE_AND,
        MERGE_ANY_OK, MERGE_NUMSUB, MERGE_ALL_OK, MERGE_ANY_OK,
    };

    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        struct resp_cmd *cmd = cmd_of(2, argv[i][0], argv[i][1], NULL);
        const struct cmd_def *d = row_of(cmd);
        cr_assert_not_null(d, "%s %s", argv[i][0], argv[i][1]);
        cr_assert(d->how == CMD_SPLIT || d->how == CMD_FANOUT ||
                      d->how == CMD_KILL,
                  "%s %s", argv[i][0], argv[i][1]);
        cr_assert_eq(d->merge, want[i], "%s %s", argv[i][0], argv[i][1]);
        resp_cmd_free(cmd);
    }
}

Test(cmd, subcommand_rows_are_resolved_once_else_the_command_row)
{
    struct resp_cmd *cmd = cmd_of(2, "SCRIPT", "DEBUG", NULL);

    cr_assert_str_eq(row_of(cmd)->name, "script");
    resp_cmd_free(cmd);
    cmd = cmd_of(1, "script", NULL, NULL);
    cr_assert_str_eq(row_of(cmd)->name, "script");
    resp_cmd_free(cmd);
    cmd = cmd_of(2, "client", "UNPAUSE", NULL);
    cr_assert_str_eq(row_of(cmd)->name, "client|unpause");
    resp_cmd_free(cmd);
    cmd = cmd_of(2, "function", "kill", NULL);
    cr_assert_eq(row_of(cmd)->how, CMD_KILL);
    resp_cmd_free(cmd);
    /* Not in the table, nor a parent that has rows: as they are. */
    cmd = cmd_of(2, "get", "k", NULL);
    cr_assert_null(row_of(cmd));
    resp_cmd_free(cmd);
    cmd = cmd_of(2, "mget", "load", NULL);
    cr_assert_str_eq(row_of(cmd)->name, "mget");
    resp_cmd_free(cmd);
}

Test(cmd, mset_splits_key_value_pairs_publish_is_flagged)
{
    struct resp_cmd *cmd = cmd_of(3, "MSET", "k", "v");

    cr_assert_eq(row_of(cmd)->key_step, 2);
    resp_cmd_free(cmd);
    cmd = cmd_of(2, "mget", "k", NULL);
    cr_assert_eq(row_of(cmd)->key_step, 0);
    resp_cmd_free(cmd);
    cmd = cmd_of(3, "PUBLISH", "ch", "m");
    cr_assert(row_of(cmd)->flags & CMD_F_PUBLISH);
    cr_assert_eq(row_of(cmd)->how, CMD_FORWARD);
    resp_cmd_free(cmd);
    /* SPUBLISH and PUBSUB are rows too, so the node's pubsub flag never
     * gives them a private connection. */
    cmd = cmd_of(3, "spublish", "ch", "m");
    cr_assert_not_null(row_of(cmd));
    cr_assert_eq(row_of(cmd)->how, CMD_FORWARD);
    cr_assert_not(row_of(cmd)->flags & CMD_F_PUBLISH);
    resp_cmd_free(cmd);
}

/* pick over `cmd` in a context. */
static enum cmd_how pick(int argc, const char *a0, const char *a1,
                         const char *a2, struct cmd_ctx ctx, unsigned *flags)
{
    struct resp_cmd *cmd = cmd_of(argc, a0, a1, a2);
    const struct cmd_def *d = row_of(cmd);
    enum cmd_how how;

    cr_assert_not_null(d, "%s", a0);
    cr_assert_not_null(d->pick, "%s", a0);
    *flags = d->flags;
    how = d->pick(cmd, &ctx, flags);
    resp_cmd_free(cmd);
    return how;
}

Test(cmd, ping_is_answered_only_without_redis_and_follows_subscriptions)
{
    unsigned f;
    struct cmd_ctx none = { 0 }, up = { .has_upstream = 1 };
    struct cmd_ctx sub = { .has_upstream = 1, .has_priv = 1, .subscribed = 1 };
    struct cmd_ctx priv = { .has_upstream = 1, .has_priv = 1 };

    cr_assert_eq(pick(1, "PING", NULL, NULL, none, &f), CMD_LOCAL);
    cr_assert_eq(pick(2, "ping", "hi", NULL, none, &f), CMD_LOCAL);
    cr_assert_eq(pick(1, "PING", NULL, NULL, up, &f), CMD_FORWARD);
    cr_assert_eq(pick(1, "PING", NULL, NULL, priv, &f), CMD_FORWARD);
    cr_assert_eq(pick(1, "PING", NULL, NULL, sub, &f), CMD_PRIVATE);
    cr_assert_eq(f, 0u);
}

Test(cmd, script_debug_takes_a_private_connection_for_good)
{
    unsigned f;
    struct cmd_ctx up = { .has_upstream = 1 };
    struct cmd_ctx priv = { .has_upstream = 1, .has_priv = 1 };

    cr_assert_eq(pick(3, "SCRIPT", "DEBUG", "YES", up, &f), CMD_PRIVATE);
    cr_assert(f & CMD_F_STICKY);
    cr_assert_eq(pick(3, "script", "debug", "sync", up, &f), CMD_PRIVATE);
    cr_assert(f & CMD_F_STICKY);
    /* NO: ends the session where it runs; without one, nothing to end. */
    cr_assert_eq(pick(3, "script", "debug", "no", priv, &f), CMD_PRIVATE);
    cr_assert_not(f & CMD_F_STICKY);
    cr_assert_eq(pick(3, "script", "debug", "no", up, &f), CMD_LOCAL);
    /* A bad mode, a bad arity, another subcommand: Redis answers. */
    cr_assert_eq(pick(3, "script", "debug", "maybe", up, &f), CMD_FORWARD);
    cr_assert_eq(pick(2, "script", "debug", NULL, up, &f), CMD_FORWARD);
    cr_assert_eq(pick(2, "script", "help", NULL, up, &f), CMD_FORWARD);
    cr_assert_not(f & CMD_F_STICKY);
}

Test(cmd, function_is_forwarded_but_its_kill_and_load_rows)
{
    unsigned f;
    struct cmd_ctx up = { .has_upstream = 1 };

    cr_assert_eq(pick(2, "FUNCTION", "LIST", NULL, up, &f), CMD_FORWARD);
    cr_assert_eq(pick(2, "function", "dump", NULL, up, &f), CMD_FORWARD);
}

Test(cmd, an_unsubscribe_without_a_connection_is_answered_here)
{
    unsigned f;
    struct cmd_ctx up = { .has_upstream = 1 };
    struct cmd_ctx priv = { .has_upstream = 1, .has_priv = 1 };

    cr_assert_eq(pick(1, "UNSUBSCRIBE", NULL, NULL, up, &f), CMD_LOCAL);
    cr_assert_eq(pick(2, "punsubscribe", "a*", NULL, up, &f), CMD_LOCAL);
    cr_assert_eq(pick(2, "sunsubscribe", "c", NULL, priv, &f), CMD_PRIVATE);
    cr_assert_eq(pick(1, "unsubscribe", NULL, NULL, priv, &f), CMD_PRIVATE);
}

Test(cmd, client_subcommands_are_answered_forwarded_or_private)
{
    unsigned f;
    struct cmd_ctx up = { .has_upstream = 1 };
    struct cmd_ctx tracking = { .has_upstream = 1,
                                .has_priv = 1,
                                .tracking = 1 };

    cr_assert_eq(pick(2, "CLIENT", "ID", NULL, up, &f), CMD_LOCAL);
    cr_assert_eq(pick(2, "client", "list", NULL, up, &f), CMD_LOCAL);
    cr_assert_eq(pick(3, "client", "no-touch", "on", up, &f), CMD_LOCAL);
    cr_assert_eq(pick(3, "client", "tracking", "on", up, &f), CMD_LOCAL);
    /* A bad arity is answered here, with Redis's words. */
    cr_assert_eq(pick(3, "client", "id", "x", up, &f), CMD_LOCAL);
    cr_assert_eq(pick(2, "client", "help", NULL, up, &f), CMD_FORWARD);
    /* CACHING acts on the tracking connection; else Redis refuses it. */
    cr_assert_eq(pick(3, "client", "caching", "yes", up, &f), CMD_FORWARD);
    cr_assert_eq(pick(3, "client", "caching", "yes", tracking, &f), CMD_LOCAL);
    /* A subcommand neither cellgate nor the node knows (no COMMAND
     * table yet): the node answers its error. */
    cr_assert_eq(pick(2, "client", "frobnicate", NULL, up, &f), CMD_FORWARD);
    cr_assert_not(f & CMD_F_STICKY);
}
