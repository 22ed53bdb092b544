/* The routing decision: every rule of route_decide, in both modes, on a
 * key table built like a Redis 7 COMMAND reply. */
#include "tests/support/px_test.h"

#include <string.h>

#include "parser/buf.h"
#include "parser/keyspec.h"
#include "parser/resp.h"
#include "parser/slot.h"
#include "proxy/core/route.h"
#include "tests/support/command_reply.h"

PX_TEST_SUITE(route);

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
    return ks;
}

/* Decides `words` (space separated) with `in`; keys[] receives the key
 * indexes. */
static enum route_kind decide(const struct route_in *in, const char *words,
                              int *keys, struct route *out)
{
    struct resp_cmd *cmd = command_words(words);
    enum route_kind kind = route_decide(in, cmd, keys, out);

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

    cr_assert_eq(decide(&in, "GET a", keys, &r), ROUTE_NO_UPSTREAM);
}

Test(route, single_mode_sends_everything_to_its_node)
{
    struct keyspec *ks = route_table();
    struct route_in in = {
        .cluster = 0, .has_upstream = 1, .keys = ks, .key_prefix = "cellgate:"
    };
    struct route r;
    int keys[8];

    cr_assert_eq(decide(&in, "MGET a b c", keys, &r), ROUTE_SINGLE);
    cr_assert_eq(decide(&in, "PING", keys, &r), ROUTE_SINGLE);
    cr_assert_eq(decide(&in, "MYMODULE.WEIRD x", keys, &r), ROUTE_SINGLE);
    /* Before COMMAND answered, too. */
    in.keys = NULL;
    cr_assert_eq(decide(&in, "GET cellgate:x", keys, &r), ROUTE_SINGLE);
    keyspec_free(ks);
}

Test(route, limiter_keys_are_refused_unless_admin_in_both_modes)
{
    struct keyspec *ks = route_table();
    struct route_in in = {
        .cluster = 0, .has_upstream = 1, .keys = ks, .key_prefix = "cellgate:"
    };
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
    struct route_in in = {
        .cluster = 1, .has_upstream = 1, .keys = ks, .key_prefix = "cellgate:"
    };
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
    struct route_in in = {
        .cluster = 1, .has_upstream = 1, .keys = ks, .key_prefix = "cellgate:"
    };
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
    struct route_in in = {
        .cluster = 1, .has_upstream = 1, .keys = ks, .key_prefix = "cellgate:"
    };
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
    struct route_in in = {
        .cluster = 1, .has_upstream = 1, .keys = ks, .key_prefix = "cellgate:"
    };
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
