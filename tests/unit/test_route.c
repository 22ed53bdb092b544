/* The routing decision: route_classify on every shape of command, and every
 * rule of route_decide, in both modes, on a key table built like a Redis 7
 * COMMAND reply. */
#include "tests/support/px_test.h"

#include <string.h>

#include "parser/buf.h"
#include "parser/keyspec.h"
#include "parser/resp.h"
#include "parser/slot.h"
#include "proxy/core/route.h"
#include "tests/support/command_reply.h"

PX_TEST_SUITE(route);

/* The key table decide() classifies with (NULL: not known yet). */
static const struct keyspec *route_ks;

static struct keyspec *route_table(void)
{
    struct buf b;
    struct keyspec *ks;

    buf_init(&b);
    resp_enc_array_header(&b, 6);
    command_entry(&b, "get", 2, 0, 1, 1, 1, 0);
    command_entry(&b, "mset", -3, 0, 1, -1, 2, 0);
    command_entry(&b, "mget", -2, 0, 1, -1, 1, 0);
    command_entry(&b, "del", -2, 0, 1, -1, 1, 0);
    command_entry(&b, "ping", -1, 0, 0, 0, 0, 0);
    command_entry(&b, "mymodule.weird", -2, 1, 0, 0, 0, 0);
    ks = keyspec_new(b.data, b.len);
    buf_free(&b);
    cr_assert_not_null(ks);
    route_ks = ks; /* decide() classifies with it */
    return ks;
}

/* Classifies `words` (space separated) with route_ks, then decides it with
 * `in`; keys[] receives the key indexes (it has room for 8). */
static enum route_kind decide(const struct route_in *in, const char *words,
                              int *keys, struct route *out)
{
    struct resp_cmd *cmd = command_words(words);
    struct route_facts f = { 0 };
    enum route_kind kind;
    int k;

    route_classify(route_ks, cmd, &f);
    kind = route_decide(in, cmd, &f, out);
    for (k = 0; k < f.nkeys && k < 8; k++) {
        keys[k] = route_facts_keys(&f)[k];
    }
    route_facts_free(&f);
    resp_cmd_free(cmd);
    return kind;
}

static unsigned slot_of(const char *key)
{
    return slot_for_key(key, strlen(key));
}

Test(route, embedded_mode_has_nowhere_to_send)
{
    struct route_in in = { .cluster = 0,
                           .has_upstream = 0,
                           .key_prefix = "cellgate:" };
    struct route r;
    int keys[8];

    route_ks = NULL;
    cr_assert_eq(decide(&in, "GET a", keys, &r), ROUTE_NO_UPSTREAM);
}

Test(route, single_mode_sends_everything_to_its_node)
{
    struct keyspec *ks = route_table();
    struct route_in in = { .cluster = 0,
                           .has_upstream = 1,
                           .key_prefix = "cellgate:" };
    struct route r;
    int keys[8];

    cr_assert_eq(decide(&in, "MGET a b c", keys, &r), ROUTE_SINGLE);
    cr_assert_eq(decide(&in, "PING", keys, &r), ROUTE_SINGLE);
    cr_assert_eq(decide(&in, "MYMODULE.WEIRD x", keys, &r), ROUTE_SINGLE);
    /* Before COMMAND answered, too. */
    route_ks = NULL;
    cr_assert_eq(decide(&in, "GET cellgate:x", keys, &r), ROUTE_SINGLE);
    keyspec_free(ks);
}

Test(route, limiter_keys_are_refused_unless_admin_in_both_modes)
{
    struct keyspec *ks = route_table();
    struct route_in in = { .cluster = 0,
                           .has_upstream = 1,
                           .key_prefix = "cellgate:" };
    struct route r;
    int keys[8];

    cr_assert_eq(decide(&in, "DEL a cellgate:{u}#0:gcra", keys, &r),
                 ROUTE_NOPERM);
    cr_assert_eq(r.key, 2, "the argument index of the limiter key");
    in.cluster = 1;
    cr_assert_eq(decide(&in, "GET cellgate:x", keys, &r), ROUTE_NOPERM);
    cr_assert_eq(r.key, 1);
    /* A key that merely contains the prefix is an ordinary key. */
    cr_assert_eq(decide(&in, "GET xcellgate:x", keys, &r), ROUTE_SLOT);
    in.admin = 1;
    cr_assert_eq(decide(&in, "GET cellgate:x", keys, &r), ROUTE_SLOT);
    cr_assert_eq(r.slot, slot_of("cellgate:x"));
    keyspec_free(ks);
}

Test(route, cluster_keys_of_one_slot_go_to_that_slot)
{
    struct keyspec *ks = route_table();
    struct route_in in = { .cluster = 1,
                           .has_upstream = 1,
                           .key_prefix = "cellgate:" };
    struct route r;
    int keys[8];

    cr_assert_eq(decide(&in, "GET foo", keys, &r), ROUTE_SLOT);
    cr_assert_eq(r.slot, slot_of("foo"));
    cr_assert_eq(r.slot, 12182u, "foo is slot 12182 in Redis Cluster");
    cr_assert_eq(decide(&in, "MGET {u}a {u}b", keys, &r), ROUTE_SLOT);
    cr_assert_eq(r.slot, slot_of("u"));
    cr_assert_eq(r.nkeys, 2);
    cr_assert_eq(keys[0], 1);
    cr_assert_eq(keys[1], 2);
    keyspec_free(ks);
}

Test(route, cluster_keys_of_two_slots_are_crossslot_with_their_keys)
{
    struct keyspec *ks = route_table();
    struct route_in in = { .cluster = 1,
                           .has_upstream = 1,
                           .key_prefix = "cellgate:" };
    struct route r;
    int keys[8];

    cr_assert_eq(decide(&in, "MSET a 1 b 2 c 3", keys, &r), ROUTE_CROSSSLOT);
    cr_assert_eq(r.nkeys, 3);
    cr_assert_eq(keys[0], 1);
    cr_assert_eq(keys[1], 3);
    cr_assert_eq(keys[2], 5);
    keyspec_free(ks);
}

Test(route, cluster_keyless_unknown_and_unlocatable_commands)
{
    struct keyspec *ks = route_table();
    struct route_in in = { .cluster = 1,
                           .has_upstream = 1,
                           .key_prefix = "cellgate:" };
    struct route r;
    int keys[8];

    cr_assert_eq(decide(&in, "PING", keys, &r), ROUTE_ANY);
    cr_assert_eq(decide(&in, "NOSUCHCOMMAND a b", keys, &r), ROUTE_ANY);
    cr_assert_eq(decide(&in, "MYMODULE.WEIRD a", keys, &r), ROUTE_UNLOCATABLE);
    keyspec_free(ks);
}

Test(route, cluster_pubsub_goes_to_the_channel_slot_and_patterns_to_zero)
{
    struct keyspec *ks = route_table();
    struct route_in in = { .cluster = 1,
                           .has_upstream = 1,
                           .key_prefix = "cellgate:" };
    struct route r;
    int keys[8];

    cr_assert_eq(decide(&in, "PUBLISH news hello", keys, &r), ROUTE_SLOT);
    cr_assert_eq(r.slot, slot_of("news"));
    cr_assert_eq(decide(&in, "SUBSCRIBE news other", keys, &r), ROUTE_SLOT);
    cr_assert_eq(r.slot, slot_of("news"), "the first channel decides");
    cr_assert_eq(decide(&in, "PSUBSCRIBE n*", keys, &r), ROUTE_SLOT);
    cr_assert_eq(r.slot, 0u);
    cr_assert_eq(decide(&in, "PUBSUB NUMPAT", keys, &r), ROUTE_SLOT);
    cr_assert_eq(r.slot, 0u);
    /* Single mode has one node for them all. */
    in.cluster = 0;
    cr_assert_eq(decide(&in, "PUBLISH news hello", keys, &r), ROUTE_SINGLE);
    keyspec_free(ks);
}

/* ---------------- route_classify ---------------- */

/* One COMMAND entry with one flag, a key range and one ACL category. */
static void facts_entry(struct buf *b, const char *name, int arity,
                        const char *flag, int first, int last, int step,
                        const char *acl)
{
    resp_enc_array_header(b, 10);
    resp_enc_bulk(b, name, strlen(name));
    resp_enc_int(b, arity);
    resp_enc_array_header(b, 1);
    resp_enc_simple(b, flag);
    resp_enc_int(b, first);
    resp_enc_int(b, last);
    resp_enc_int(b, step);
    resp_enc_array_header(b, 1);
    resp_enc_simple(b, acl);
    resp_enc_array_header(b, 0);
    resp_enc_array_header(b, 0);
    resp_enc_array_header(b, 0);
}

static struct keyspec *facts_table(void)
{
    struct buf b;
    struct keyspec *ks;

    buf_init(&b);
    resp_enc_array_header(&b, 9);
    facts_entry(&b, "get", 2, "readonly", 1, 1, 1, "@read");
    facts_entry(&b, "mget", -2, "readonly", 1, -1, 1, "@read");
    facts_entry(&b, "mset", -3, "write", 1, -1, 2, "@write");
    facts_entry(&b, "blpop", -3, "blocking", 1, -2, 1, "@list");
    facts_entry(&b, "subscribe", -2, "pubsub", 0, 0, 0, "@pubsub");
    facts_entry(&b, "hello", -1, "fast", 0, 0, 0, "@connection");
    facts_entry(&b, "ping", -1, "fast", 0, 0, 0, "@connection");
    facts_entry(&b, "set", -3, "write", 1, 1, 1, "@write");
    command_entry(&b, "mymodule.weird", -2, 1, 0, 0, 0, 0);
    ks = keyspec_new(b.data, b.len);
    buf_free(&b);
    cr_assert_not_null(ks);
    return ks;
}

/* Classifies `words` against `ks` into `f` (which the caller frees). */
static void classify(const struct keyspec *ks, const char *words,
                     struct route_facts *f)
{
    struct resp_cmd *cmd = command_words(words);

    route_classify(ks, cmd, f);
    resp_cmd_free(cmd);
}

Test(route, classify_keyless_command)
{
    struct keyspec *ks = facts_table();
    struct route_facts f = { 0 };

    classify(ks, "PING", &f);
    cr_assert(f.known && f.listed);
    cr_assert_eq(f.status, 0 /* KEYSPEC_OK */);
    cr_assert_eq(f.nkeys, 0);
    cr_assert(!f.readonly && !f.blocking && !f.pubsub && !f.cross);
    cr_assert(f.connection, "PING is @connection in this table");
    route_facts_free(&f);
    keyspec_free(ks);
}

Test(route, classify_one_key_readonly_and_write)
{
    struct keyspec *ks = facts_table();
    struct route_facts f = { 0 };

    classify(ks, "GET foo", &f);
    cr_assert(f.known && f.listed && f.readonly);
    cr_assert_eq(f.nkeys, 1);
    cr_assert_eq(route_facts_keys(&f)[0], 1);
    cr_assert_eq(f.slot, slot_of("foo"));
    cr_assert(!f.cross);
    cr_assert_null(f.heap, "a short command keeps its keys inline");
    classify(ks, "SET foo bar", &f); /* the same facts, classified again */
    cr_assert(f.listed && !f.readonly);
    cr_assert_eq(f.nkeys, 1);
    route_facts_free(&f);
    keyspec_free(ks);
}

/* In front of one node: the same keys and flags, no slots computed, and
 * the decision still finds a limiter key among them. */
Test(route, classify_unslotted_finds_the_keys_without_their_slots)
{
    struct keyspec *ks = facts_table();
    struct route_facts f = { 0 };
    struct route_in in = { .cluster = 0,
                           .has_upstream = 1,
                           .key_prefix = "cellgate:" };
    struct route r;
    struct resp_cmd *cmd = command_words("MGET a b c d e f g h i j cellgate:x");
    int k;

    route_classify_unslotted(ks, cmd, &f);
    cr_assert(f.known && f.listed && f.readonly);
    cr_assert_eq(f.nkeys, 11);
    for (k = 0; k < 11; k++) {
        cr_assert_eq(route_facts_keys(&f)[k], k + 1);
    }
    cr_assert(f.slot == 0 && !f.cross, "no slots in front of one node");
    cr_assert_eq(route_decide(&in, cmd, &f, &r), ROUTE_NOPERM);
    cr_assert_eq(r.key, 11);
    route_facts_free(&f);
    resp_cmd_free(cmd);
    keyspec_free(ks);
}

Test(route, classify_many_keys_go_to_the_heap_beyond_the_inline_ones)
{
    struct keyspec *ks = facts_table();
    struct route_facts f = { 0 };
    int k;

    classify(ks, "MGET {u}a {u}b {u}c {u}d {u}e {u}f {u}g {u}h {u}i {u}j", &f);
    cr_assert_eq(f.nkeys, 10);
    cr_assert_not_null(f.heap);
    for (k = 0; k < 10; k++) {
        cr_assert_eq(route_facts_keys(&f)[k], k + 1);
    }
    cr_assert_eq(f.slot, slot_of("u"));
    cr_assert(!f.cross, "one hash tag, one slot");
    classify(ks, "MGET a b c d e f g h i j k", &f); /* frees the old heap */
    cr_assert_eq(f.nkeys, 11);
    cr_assert(f.cross);
    cr_assert_eq(f.slot, slot_of("a"), "the first key's slot");
    route_facts_free(&f);
    cr_assert_null(f.heap);
    keyspec_free(ks);
}

Test(route, classify_mset_takes_every_other_argument)
{
    struct keyspec *ks = facts_table();
    struct route_facts f = { 0 };

    classify(ks, "MSET a 1 b 2 c 3", &f);
    cr_assert(!f.readonly);
    cr_assert_eq(f.nkeys, 3);
    cr_assert_eq(route_facts_keys(&f)[0], 1);
    cr_assert_eq(route_facts_keys(&f)[1], 3);
    cr_assert_eq(route_facts_keys(&f)[2], 5);
    cr_assert(f.cross);
    route_facts_free(&f);
    keyspec_free(ks);
}

Test(route, classify_movable_and_unknown_commands_have_no_keys)
{
    struct keyspec *ks = facts_table();
    struct route_facts f = { 0 };

    classify(ks, "MYMODULE.WEIRD a", &f);
    cr_assert(f.known && f.listed);
    cr_assert_eq(f.status, -1 /* KEYSPEC_EMOVABLE */);
    cr_assert_eq(f.nkeys, 0);
    classify(ks, "NOSUCHCOMMAND a b", &f);
    cr_assert(f.known);
    cr_assert(!f.listed, "the node does not know it");
    cr_assert_eq(f.status, 1 /* KEYSPEC_UNKNOWN */);
    cr_assert_eq(f.nkeys, 0);
    cr_assert(!f.readonly && !f.blocking && !f.connection && !f.pubsub);
    route_facts_free(&f);
    keyspec_free(ks);
}

Test(route, classify_blocking_pubsub_and_connection_flags)
{
    struct keyspec *ks = facts_table();
    struct route_facts f = { 0 };

    classify(ks, "BLPOP q1 q2 0", &f);
    cr_assert(f.blocking && !f.pubsub && !f.connection);
    cr_assert_eq(f.nkeys, 2, "the timeout is not a key");
    classify(ks, "SUBSCRIBE news", &f);
    cr_assert(f.pubsub && !f.blocking);
    cr_assert_eq(f.nkeys, 0);
    classify(ks, "HELLO 3", &f);
    cr_assert(f.connection && !f.pubsub && !f.blocking);
    route_facts_free(&f);
    keyspec_free(ks);
}

Test(route, classify_before_the_table_is_known_then_again)
{
    struct keyspec *ks = facts_table();
    struct route_facts f = { 0 };
    struct route_in in = { .cluster = 1,
                           .has_upstream = 1,
                           .key_prefix = "cellgate:" };
    struct resp_cmd *cmd = command_words("GET foo");
    struct route r;

    route_classify(NULL, cmd, &f);
    cr_assert(!f.known && !f.listed);
    cr_assert_eq(f.nkeys, 0);
    cr_assert_eq(route_decide(&in, cmd, &f, &r), ROUTE_ANY);
    /* A held request is classified again once the table is known. */
    route_classify(ks, cmd, &f);
    cr_assert(f.known && f.readonly);
    cr_assert_eq(route_decide(&in, cmd, &f, &r), ROUTE_SLOT);
    cr_assert_eq(r.slot, slot_of("foo"));
    route_facts_free(&f);
    resp_cmd_free(cmd);
    keyspec_free(ks);
}
