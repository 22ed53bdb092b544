/* Unit tests of conf/cmdpolicy: the default command policy, each form of
 * rule, the order rules apply in, and lookups by any case. */
#include <stdio.h>
#include <string.h>

#include "conf/cmdpolicy.h"
#include "tests/support/px_test.h"

PX_TEST_SUITE(cmdpolicy);

/* True when `p` lets an ordinary client run `name` [arg]. */
static int allows(const struct cmdpolicy *p, const char *name, const char *arg)
{
    return cmdpolicy_allows(p, name, strlen(name), arg,
                            arg != NULL ? strlen(arg) : 0);
}

static void apply(struct cmdpolicy *p, const char *rules)
{
    const char *bad = NULL;
    size_t badlen = 0;

    cr_assert_eq(cmdpolicy_apply_all(p, rules, &bad, &badlen), CMDPOLICY_OK,
                 "rules \"%s\" refused at \"%.*s\"", rules, (int)badlen,
                 bad != NULL ? bad : "");
}

/* What the table of docs/commands.md "Command policy" says is refused by
 * default. */
static const char *const refused_by_default[][2] = {
    { "flushall", NULL },      { "flushdb", "async" },
    { "swapdb", "0" },         { "shutdown", NULL },
    { "shutdown", "nosave" },  { "debug", "sleep" },
    { "failover", NULL },      { "replicaof", "no" },
    { "slaveof", "no" },       { "monitor", NULL },
    { "save", NULL },          { "bgsave", NULL },
    { "bgrewriteaof", NULL },  { "sync", NULL },
    { "psync", "?" },          { "replconf", "ack" },
    { "config", "set" },       { "config", "get" },
    { "config", "resetstat" }, { "config", "rewrite" },
    { "client", "kill" },      { "client", "pause" },
    { "client", "unpause" },   { "client", "no-evict" },
    { "client", "list" },      { "client", "unblock" },
    { "module", "load" },      { "module", "list" },
    { "acl", "setuser" },      { "acl", "list" },
    { "slowlog", "get" },      { "latency", "reset" },
    { "cluster", "failover" }, { "cluster", "reset" },
    { "cluster", "meet" },     { "migrate", "h" },
    { "lastsave", NULL },      { "role", NULL },
    { "pfdebug", "x" },        { "pfselftest", NULL },
};

/* Handshakes, data commands and what cellgate answers itself. */
static const char *const allowed_by_default[][2] = {
    { "get", "k" },          { "set", "k" },           { "info", NULL },
    { "info", "server" },    { "command", NULL },      { "command", "docs" },
    { "hello", "3" },        { "auth", "x" },          { "ping", NULL },
    { "client", "setname" }, { "client", "getname" },  { "client", "id" },
    { "client", "info" },    { "client", "tracking" }, { "client", "reply" },
    { "client", "setinfo" }, { "client", "no-touch" }, { "client", "caching" },
    { "select", "0" },       { "multi", NULL },        { "exec", NULL },
    { "eval", "return 1" },  { "keys", "*" },          { "sort", "k" },
    { "sort_ro", "k" },      { "restore", "k" },       { "scan", "0" },
    { "cluster", "slots" },  { "cluster", "info" },    { "cluster", "keyslot" },
    { "memory", "usage" },   { "object", "encoding" }, { "limiter", "check" },
    { "cl.throttle", "k" },  { "wait", "0" },          { "dbsize", NULL },
    { "script", "load" },    { "function", "list" },   { "readonly", NULL },
};

Test(cmdpolicy, default_refuses_server_and_admin_commands)
{
    struct cmdpolicy p;
    size_t i;

    cmdpolicy_init(&p);
    for (i = 0; i < sizeof(refused_by_default) / sizeof(refused_by_default[0]);
         i++) {
        cr_expect_not(
            allows(&p, refused_by_default[i][0], refused_by_default[i][1]),
            "%s %s allowed", refused_by_default[i][0],
            refused_by_default[i][1] ? refused_by_default[i][1] : "");
    }
    for (i = 0; i < sizeof(allowed_by_default) / sizeof(allowed_by_default[0]);
         i++) {
        cr_expect(
            allows(&p, allowed_by_default[i][0], allowed_by_default[i][1]),
            "%s %s refused", allowed_by_default[i][0],
            allowed_by_default[i][1] ? allowed_by_default[i][1] : "");
    }
}

Test(cmdpolicy, default_rules_parse)
{
    struct cmdpolicy p;

    memset(&p, 0, sizeof(p));
    apply(&p, CMDPOLICY_DEFAULT_RULES);
}

Test(cmdpolicy, names_are_case_insensitive)
{
    struct cmdpolicy p;

    cmdpolicy_init(&p);
    cr_assert_not(allows(&p, "FlushALL", NULL));
    cr_assert_not(allows(&p, "CONFIG", "SET"));
    cr_assert_not(allows(&p, "Client", "Kill"));
    cr_assert(allows(&p, "CLIENT", "SETNAME"));
    apply(&p, "+FLUSHALL -Get +Client|KILL");
    cr_assert(allows(&p, "flushall", NULL));
    cr_assert_not(allows(&p, "GET", "k"));
    cr_assert(allows(&p, "client", "kill"));
}

Test(cmdpolicy, command_rules_cover_every_subcommand)
{
    struct cmdpolicy p;

    cmdpolicy_init(&p);
    apply(&p, "+config");
    cr_assert(allows(&p, "config", "set"));
    cr_assert(allows(&p, "config", "get"));
    apply(&p, "-config|get");
    cr_assert_not(allows(&p, "config", "get"));
    cr_assert(allows(&p, "config", "set"));
    apply(&p, "-client");
    cr_assert_not(allows(&p, "client", "setname"));
    cr_assert_not(allows(&p, "client", "no-such-sub"));
    cr_assert_not(allows(&p, "client", NULL));
}

Test(cmdpolicy, rules_apply_in_order)
{
    struct cmdpolicy p;

    cmdpolicy_init(&p);
    apply(&p, "+flushall -flushall");
    cr_assert_not(allows(&p, "flushall", NULL));
    apply(&p, "-flushall +flushall");
    cr_assert(allows(&p, "flushall", NULL));
    apply(&p, "+@dangerous -@admin");
    cr_assert(allows(&p, "flushdb", NULL));
    cr_assert(allows(&p, "swapdb", "0"));
    cr_assert_not(allows(&p, "config", "set"));
    cr_assert_not(allows(&p, "shutdown", NULL));
    apply(&p, "-keys");
    cr_assert_not(allows(&p, "keys", "*"));
}

Test(cmdpolicy, all_and_none_also_decide_unknown_commands)
{
    struct cmdpolicy p;

    cmdpolicy_init(&p);
    cr_assert(allows(&p, "newer.module.cmd", NULL));
    apply(&p, "nocommands");
    cr_assert_not(allows(&p, "get", "k"));
    cr_assert_not(allows(&p, "newer.module.cmd", NULL));
    apply(&p, "+get");
    cr_assert(allows(&p, "get", "k"));
    cr_assert_not(allows(&p, "set", "k"));
    apply(&p, "allcommands");
    cr_assert(allows(&p, "shutdown", NULL));
    cr_assert(allows(&p, "newer.module.cmd", NULL));
    apply(&p, "-@all");
    cr_assert_not(allows(&p, "ping", NULL));
    apply(&p, "+@ALL");
    cr_assert(allows(&p, "debug", "sleep"));
}

Test(cmdpolicy, bad_rules_are_refused_and_change_nothing)
{
    static const struct {
        const char *rule;
        int code;
    } bad[] = {
        { "flushall", CMDPOLICY_ESYNTAX },
        { "+", CMDPOLICY_ESYNTAX },
        { "", CMDPOLICY_ESYNTAX },
        { "+nosuchcommand", CMDPOLICY_ECOMMAND },
        { "-config|nosuch", CMDPOLICY_ECOMMAND },
        { "+client|", CMDPOLICY_ECOMMAND },
        { "+|kill", CMDPOLICY_ECOMMAND },
        { "+@nosuchcat", CMDPOLICY_ECATEGORY },
        { "+@", CMDPOLICY_ECATEGORY },
        { "+aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
          "aaaaaaaaaaaa",
          CMDPOLICY_ECOMMAND },
    };
    struct cmdpolicy p, before;
    size_t i;

    cmdpolicy_init(&p);
    before = p;
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cr_expect_eq(cmdpolicy_apply(&p, bad[i].rule, strlen(bad[i].rule)),
                     bad[i].code, "rule \"%s\"", bad[i].rule);
        cr_expect_eq(memcmp(&p, &before, sizeof(p)), 0, "rule \"%s\"",
                     bad[i].rule);
    }
}

Test(cmdpolicy, apply_all_names_the_bad_rule)
{
    static const char text[] = "  +flushall\t-keys  +nosuch -get";
    struct cmdpolicy p;
    const char *bad = NULL;
    size_t badlen = 0;

    cmdpolicy_init(&p);
    cr_assert_eq(cmdpolicy_apply_all(&p, text, &bad, &badlen),
                 CMDPOLICY_ECOMMAND);
    cr_assert_eq(bad, text + 19);
    cr_assert_eq(badlen, 7);
    /* The rules before it are applied, those after it are not. */
    cr_assert(allows(&p, "flushall", NULL));
    cr_assert_not(allows(&p, "keys", "*"));
    cr_assert(allows(&p, "get", "k"));
}

Test(cmdpolicy, odd_lookups_follow_the_command)
{
    struct cmdpolicy p;

    cmdpolicy_init(&p);
    /* A '|' in a name is never a subcommand lookup. */
    cr_assert(allows(&p, "config|set", NULL));
    cr_assert_not(allows(&p, "config", "set"));
    /* An unknown subcommand of a container follows the container. */
    cr_assert(allows(&p, "config", "nosuch"));
    /* A command without subcommands ignores its argument. */
    cr_assert_not(allows(&p, "flushall", "kill"));
    cr_assert(allows(&p, "get", "kill"));
    /* A huge argument is no subcommand. */
    cr_assert_not(allows(
        &p, "flushall",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"));
    cr_assert(allows(&p, "", NULL));
}

/* The table itself, to name every entry (cmdpolicy.c keeps it private). */
struct cmdpolicy_cmd {
    const char *name;
    unsigned cats;
};
#include "conf/cmdpolicy_table.h"

/* Every entry of the table is found by its name through the hash index:
 * allowed alone under "nocommands", refused alone under "allcommands"
 * (a subcommand as its command and first argument). A name the index
 * lost would follow the unknown-command bit instead. */
Test(cmdpolicy, every_table_entry_is_found_by_its_name)
{
    size_t n = sizeof(cmdpolicy_cmds) / sizeof(cmdpolicy_cmds[0]), i;

    cr_assert_gt(n, 300);
    for (i = 0; i < n; i++) {
        const char *name = cmdpolicy_cmds[i].name, *bar = strchr(name, '|');
        char cmd[64], rule[80];
        struct cmdpolicy only, but;
        size_t clen = bar != NULL ? (size_t)(bar - name) : strlen(name);

        cr_assert_lt(clen, sizeof(cmd));
        memcpy(cmd, name, clen);
        cmd[clen] = '\0';
        cmdpolicy_init(&only);
        cmdpolicy_init(&but);
        snprintf(rule, sizeof(rule), "nocommands +%s", name);
        apply(&only, rule);
        snprintf(rule, sizeof(rule), "allcommands -%s", name);
        apply(&but, rule);
        cr_assert(allows(&only, cmd, bar != NULL ? bar + 1 : NULL), "%s", name);
        cr_assert(!allows(&but, cmd, bar != NULL ? bar + 1 : NULL), "%s", name);
    }
}

/* cellgate's own commands take rules like Redis's: one LIMITER subcommand
 * can be denied (a client that could give any identity's units back), the
 * command as a whole covers the CL.THROTTLE form ("LIMITER <key> ..."),
 * Redis's categories leave them alone, and the rules given to the Redis
 * users never name them (Redis would refuse the unknown command). */
Test(cmdpolicy, own_commands_take_command_rules)
{
    struct cmdpolicy p;
    char acl[8192];

    cmdpolicy_init(&p);
    apply(&p, "-limiter|adjust -LIMITER|Release");
    cr_assert_not(allows(&p, "LIMITER", "ADJUST"));
    cr_assert_not(allows(&p, "limiter", "release"));
    cr_assert(allows(&p, "limiter", "check"));
    cr_assert(allows(&p, "limiter", "peek"));
    cr_assert(allows(&p, "limiter", "user:1"));
    cr_assert(allows(&p, "cl.throttle", "k"));
    cr_assert_lt(cmdpolicy_acl_rules(&p, acl, sizeof(acl)), sizeof(acl));
    cr_assert_null(strstr(acl, "limiter"), "%s", acl);

    cmdpolicy_init(&p);
    apply(&p, "-limiter +limiter|check -cl.throttle");
    cr_assert(allows(&p, "limiter", "check"));
    cr_assert_not(allows(&p, "limiter", "adjust"));
    cr_assert_not(allows(&p, "limiter", "key"));
    cr_assert_not(allows(&p, "cl.throttle", "k"));
    cr_assert_lt(cmdpolicy_acl_rules(&p, acl, sizeof(acl)), sizeof(acl));
    cr_assert_null(strstr(acl, "throttle"), "%s", acl);

    /* Categories: none of Redis's covers them; @all and nocommands do. */
    cmdpolicy_init(&p);
    apply(&p, "-@write -@fast -@slow -@keyspace");
    cr_assert(allows(&p, "limiter", "adjust"));
    cr_assert(allows(&p, "cl.throttle", "k"));
    apply(&p, "nocommands +limiter|peek");
    cr_assert(allows(&p, "limiter", "peek"));
    cr_assert_not(allows(&p, "limiter", "check"));
    cr_assert_not(allows(&p, "cl.throttle", "k"));
    cr_assert_eq(cmdpolicy_apply_all(&p, "-limiter|nosuch", NULL, NULL),
                 CMDPOLICY_ECOMMAND);
}
