/* Key positions from a COMMAND reply: fixed ranges, negative last, steps,
 * subcommands, and every movable-keys rule. */
#include "tests/support/px_test.h"

#include <criterion/parameterized.h>
#include <stdio.h>
#include <string.h>

#include "parser/buf.h"
#include "parser/keyspec.h"
#include "parser/resp.h"
#include "parser/resp_enc.h"
#include "tests/support/command_reply.h"

PX_TEST_SUITE(keyspec);

static struct keyspec *table(void)
{
    struct buf b;
    struct keyspec *ks;

    buf_init(&b);
    resp_enc_array_header(&b, 12);
    command_entry(&b, "get", 2, 0, 1, 1, 1, 0);
    command_entry(&b, "MSET", -3, 0, 1, -1, 2, 0);
    command_entry(&b, "mget", -2, 0, 1, -1, 1, 0);
    command_entry(&b, "ping", -1, 0, 0, 0, 0, 0);
    command_entry(&b, "eval", -3, 1, 0, 0, 0, 0);
    command_entry(&b, "xread", -4, 1, 0, 0, 0, 0);
    command_entry(&b, "zunionstore", -4, 1, 1, 1, 1, 0);
    command_entry(&b, "sort", -2, 1, 1, 1, 1, 0);
    command_entry(&b, "migrate", -6, 1, 3, 3, 1, 0);
    command_entry(&b, "mymodule.weird", -2, 1, 0, 0, 0, 0);
    command_entry(&b, "object", -2, 0, 0, 0, 0, 1);
    command_entry(&b, "object|encoding", 3, 0, 2, 2, 1, 0);
    command_entry(&b, "blmpop", -5, 1, 0, 0, 0, 0);
    /* The header said 12 entries; the 13th is outside the frame. */
    ks = keyspec_new(b.data, b.len);
    buf_free(&b);
    cr_assert_not_null(ks);
    return ks;
}

/* Runs keyspec_find on a command given as words. */
static int find(const struct keyspec *ks, const char *words, int *keys, int *n)
{
    struct resp_cmd *cmd = command_words(words);
    int rc = keyspec_find(ks, cmd, keys, n);

    resp_cmd_free(cmd);
    return rc;
}

struct kcase {
    const char *cmd;
    int rc;
    int nkeys;
    int keys[8];
};

static const struct kcase cases[] = {
    { "GET k", KEYSPEC_OK, 1, { 1 } },
    { "mset a 1 b 2 c 3", KEYSPEC_OK, 3, { 1, 3, 5 } },
    { "MGET a b c d", KEYSPEC_OK, 4, { 1, 2, 3, 4 } },
    { "ping", KEYSPEC_OK, 0, { 0 } },
    { "nosuch a b", KEYSPEC_UNKNOWN, 0, { 0 } },
    { "eval s 2 k1 k2 a1", KEYSPEC_OK, 2, { 3, 4 } },
    { "eval s 0 a1", KEYSPEC_OK, 0, { 0 } },
    { "eval s 3 k1", KEYSPEC_ESYNTAX, 0, { 0 } },
    { "eval s -1 k1", KEYSPEC_ESYNTAX, 0, { 0 } },
    { "eval s x k1", KEYSPEC_ESYNTAX, 0, { 0 } },
    { "xread COUNT 2 STREAMS s1 s2 0 0", KEYSPEC_OK, 2, { 4, 5 } },
    { "xread BLOCK 0 STREAMS s1 0", KEYSPEC_OK, 1, { 4 } },
    { "xread STREAMS s1 s2 0", KEYSPEC_ESYNTAX, 0, { 0 } },
    { "zunionstore d 2 a b WEIGHTS 1 2", KEYSPEC_OK, 3, { 1, 3, 4 } },
    { "sort k BY w GET store STORE dst", KEYSPEC_OK, 2, { 1, 7 } },
    { "sort k LIMIT 0 store", KEYSPEC_OK, 1, { 1 } },
    { "migrate h 1 k 0 5", KEYSPEC_OK, 1, { 3 } },
    { "migrate h 1 '' 0 5 AUTH keys KEYS a b", KEYSPEC_OK, 2, { 9, 10 } },
    { "mymodule.weird a", KEYSPEC_EMOVABLE, 0, { 0 } },
    { "OBJECT ENCODING k", KEYSPEC_OK, 1, { 2 } },
    { "object help", KEYSPEC_OK, 0, { 0 } },
    { "blmpop 0 2 a b LEFT", KEYSPEC_OK, 2, { 3, 4 } },
};

#define NCASES (sizeof(cases) / sizeof(cases[0]))

/* Criterion copies parameters into the test process, so the cases are
 * passed by index (pointers in them would not survive the copy). */
ParameterizedTestParameters(keyspec, finds_keys_like_redis)
{
    static size_t ids[NCASES];

    return px_param_ids(ids, NCASES);
}

ParameterizedTest(size_t *id, keyspec, finds_keys_like_redis)
{
    const struct kcase *c = &cases[*id];
    struct keyspec *ks = table();
    int keys[32], n = -1, k;
    int rc = find(ks, c->cmd, keys, &n);

    keyspec_free(ks);
    cr_assert_eq(rc, c->rc, "%s: rc %d, want %d", c->cmd, rc, c->rc);
    if (rc != KEYSPEC_OK) {
        return;
    }
    cr_assert_eq(n, c->nkeys, "%s: %d keys, want %d", c->cmd, n, c->nkeys);
    for (k = 0; k < n; k++) {
        cr_assert_eq(keys[k], c->keys[k], "%s: key %d at %d, want %d", c->cmd,
                     k, keys[k], c->keys[k]);
    }
}

Test(keyspec, counts_commands_and_subcommands)
{
    struct keyspec *ks = table();

    cr_assert_eq(keyspec_count(ks), 13);
    keyspec_free(ks);
}

Test(keyspec, refuses_a_reply_that_is_not_a_command_table)
{
    cr_assert_null(keyspec_new("+OK\r\n", 5));
    cr_assert_null(keyspec_new("-ERR unknown command\r\n", 22));
    cr_assert_null(keyspec_new("*1\r\n:1\r\n", 8));
    cr_assert_null(keyspec_new("*2\r\n", 4));
}

/* One COMMAND entry with the given flags and ACL categories. */
static void entry_flags(struct buf *b, const char *name, const char *flag,
                        const char *acl, int nsub)
{
    resp_enc_array_header(b, 10);
    resp_enc_bulk(b, name, strlen(name));
    resp_enc_int(b, -2);
    resp_enc_array_header(b, 1);
    resp_enc_simple(b, flag);
    resp_enc_int(b, 0);
    resp_enc_int(b, 0);
    resp_enc_int(b, 0);
    resp_enc_array_header(b, 1);
    resp_enc_simple(b, acl);
    resp_enc_array_header(b, 0);
    resp_enc_array_header(b, 0);
    resp_enc_array_header(b, nsub);
}

/* A command of `argc` (1 or 2) arguments. */
static struct resp_cmd *cmd_of(int argc, const char *a0, const char *a1)
{
    const char *argv[2] = { a0, a1 };
    size_t lens[2] = { strlen(a0), strlen(a1) };
    struct resp_cmd *cmd = resp_cmd_new(argc, argv, lens);

    cr_assert_not_null(cmd);
    return cmd;
}

/* The flags the router reads to keep shared connections clean: a module's
 * blocking command, the subscription family, @connection commands (per
 * subcommand), and nothing for what the node does not know. */
Test(keyspec, flags_come_from_command_flags_and_acl_categories)
{
    struct buf b;
    struct keyspec *ks;
    unsigned f = 99;
    struct resp_cmd *cmd;

    buf_init(&b);
    resp_enc_array_header(&b, 5);
    entry_flags(&b, "mod.bpop", "blocking", "@list", 0);
    entry_flags(&b, "ssubscribe", "pubsub", "@pubsub", 0);
    entry_flags(&b, "client", "slow", "@slow", 1);
    entry_flags(&b, "client|setinfo", "fast", "@connection", 0);
    entry_flags(&b, "get", "readonly", "@read", 0);
    entry_flags(&b, "set", "write", "@write", 0);
    ks = keyspec_new(b.data, b.len);
    buf_free(&b);
    cr_assert_not_null(ks);

    cmd = cmd_of(1, "MOD.BPOP", "");
    cr_assert_eq(keyspec_flags(ks, cmd, &f), KEYSPEC_OK);
    cr_assert_eq(f, KEYSPEC_F_BLOCKING);
    resp_cmd_free(cmd);
    cmd = cmd_of(2, "ssubscribe", "ch");
    cr_assert_eq(keyspec_flags(ks, cmd, &f), KEYSPEC_OK);
    cr_assert_eq(f, KEYSPEC_F_PUBSUB);
    resp_cmd_free(cmd);
    cmd = cmd_of(2, "client", "SetInfo");
    cr_assert_eq(keyspec_flags(ks, cmd, &f), KEYSPEC_OK);
    cr_assert_eq(f, KEYSPEC_F_CONNECTION);
    resp_cmd_free(cmd);
    cmd = cmd_of(2, "client", "nosuchsub");
    cr_assert_eq(keyspec_flags(ks, cmd, &f), KEYSPEC_UNKNOWN);
    resp_cmd_free(cmd);
    cmd = cmd_of(2, "get", "k");
    cr_assert_eq(keyspec_flags(ks, cmd, &f), KEYSPEC_OK);
    cr_assert_eq(f, KEYSPEC_F_READONLY);
    resp_cmd_free(cmd);
    cmd = cmd_of(2, "set", "k");
    cr_assert_eq(keyspec_flags(ks, cmd, &f), KEYSPEC_OK);
    cr_assert_eq(f, 0);
    resp_cmd_free(cmd);
    cmd = cmd_of(1, "nosuchcommand", "");
    cr_assert_eq(keyspec_flags(ks, cmd, &f), KEYSPEC_UNKNOWN);
    resp_cmd_free(cmd);
    keyspec_free(ks);
}

/* A table as large as a Redis with modules (600 commands and a container
 * with subcommands): every name is found, whichever slot of the index it
 * landed in, and a name that only shares a prefix, or differs in case
 * only, is what it should be. */
Test(keyspec, every_command_of_a_large_table_is_found)
{
    enum { N = 600 };
    struct buf b;
    struct keyspec *ks;
    char name[32], words[64];
    int keys[16], n, i;

    buf_init(&b);
    resp_enc_array_header(&b, N + 1); /* box's subcommands are inside it */
    for (i = 0; i < N; i++) {
        snprintf(name, sizeof(name), "cmd%d", i);
        command_entry(&b, name, -7, 0, 1 + i % 5, 1 + i % 5, 1, 0);
    }
    command_entry(&b, "box", -2, 0, 0, 0, 0, 2);
    command_entry(&b, "box|a", 3, 0, 2, 2, 1, 0);
    command_entry(&b, "box|b", 4, 0, 3, 3, 1, 0);
    ks = keyspec_new(b.data, b.len);
    buf_free(&b);
    cr_assert_not_null(ks);
    cr_assert_eq(keyspec_count(ks), N + 3);
    for (i = 0; i < N; i++) {
        snprintf(words, sizeof(words), "%s%d k1 k2 k3 k4 k5 k6",
                 i % 2 ? "CMD" : "cmd", i);
        cr_assert_eq(find(ks, words, keys, &n), KEYSPEC_OK, "%s", words);
        cr_assert_eq(n, 1, "%s: %d keys", words, n);
        cr_assert_eq(keys[0], 1 + i % 5, "%s: key at %d", words, keys[0]);
    }
    cr_assert_eq(find(ks, "BOX A x k", keys, &n), KEYSPEC_OK);
    cr_assert(n == 1 && keys[0] == 2);
    cr_assert_eq(find(ks, "box b x k", keys, &n), KEYSPEC_OK);
    cr_assert(n == 1 && keys[0] == 3);
    cr_assert_eq(find(ks, "cmd k", keys, &n), KEYSPEC_UNKNOWN);
    cr_assert_eq(find(ks, "cmd600 k", keys, &n), KEYSPEC_UNKNOWN);
    cr_assert_eq(find(ks, "cmd1x k", keys, &n), KEYSPEC_UNKNOWN);
    cr_assert_eq(find(ks, "bo k", keys, &n), KEYSPEC_UNKNOWN);
    keyspec_free(ks);
}

/* A step or a range past any argument count (what a garbled or hostile
 * COMMAND reply may say) finds the keys that exist and no more: the walk
 * must not wrap around (found by tests/fuzz/fuzz_keyspec.c). */
Test(keyspec, a_huge_step_stops_at_the_last_argument)
{
    struct buf b;
    struct keyspec *ks;
    int keys[8], n = -1;

    buf_init(&b);
    resp_enc_array_header(&b, 2);
    command_entry(&b, "get", 2, 0, 1, 5, 2147483647, 0);
    command_entry(&b, "mget", -2, 0, 2147483647, -1, 1, 0);
    ks = keyspec_new(b.data, b.len);
    buf_free(&b);
    cr_assert_not_null(ks);
    cr_assert_eq(find(ks, "GET a b c", keys, &n), KEYSPEC_OK);
    cr_assert_eq(n, 1);
    cr_assert_eq(keys[0], 1);
    cr_assert_eq(find(ks, "MGET a b", keys, &n), KEYSPEC_OK);
    cr_assert_eq(n, 0);
    keyspec_free(ks);
}
