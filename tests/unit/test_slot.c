/* Hash slots: CRC16/XMODEM and the {hash tag} rules of Redis Cluster.
 *
 * Expected slots come from a live redis-server 7.0 (CLUSTER KEYSLOT), so a
 * mismatch here means the proxy would send a key to the wrong node. */
#include "tests/support/px_test.h"
/* After px_test.h: criterion.h must come before its parameterized.h. */
#include <criterion/parameterized.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parser/slot.h"

PX_TEST_SUITE(slot);

/* One key and the slot CLUSTER KEYSLOT gives for it on redis-server 7.0.
 * Criterion copies parameters into the worker process, so the key bytes are
 * inline: a pointer to a literal would not survive the copy. */
struct slot_case {
    char key[24];  /* key bytes (may hold NUL) */
    size_t len;    /* key length */
    unsigned slot; /* expected slot */
};

/* Initialiser of a slot_case from a string literal, NULs included. */
#define SLOT_CASE(lit, s)                                                      \
    {                                                                          \
        .key = lit, .len = sizeof(lit) - 1, .slot = (s),                       \
    }

/* Values recorded from redis-server 7.0.15 with CLUSTER KEYSLOT. */
static struct slot_case slot_cases[] = {
    SLOT_CASE("foo", 12182),
    SLOT_CASE("bar", 5061),
    SLOT_CASE("123456789", 12739),
    SLOT_CASE("user1000", 3443),
    SLOT_CASE("{user1000}.following", 3443),
    SLOT_CASE("{user1000}.followers", 3443),
    SLOT_CASE("foo{}{bar}", 8363),
    SLOT_CASE("foo{{bar}}zap", 4015),
    SLOT_CASE("foo{bar}{zap}", 5061),
    SLOT_CASE("", 0),
    SLOT_CASE("{}", 15257),
    SLOT_CASE("{", 4092),
    SLOT_CASE("}", 12090),
    SLOT_CASE("a{b", 13340),
    SLOT_CASE("a}b{c}", 7365),
    SLOT_CASE("{a}}", 15495),
    SLOT_CASE("}{a}", 15495),
    SLOT_CASE("{{}}", 4092),
    SLOT_CASE("a\0b", 8383),
    SLOT_CASE("\xff\xfe\x80", 11813),
    SLOT_CASE("\xff\xfe{\0}", 0),
};

ParameterizedTestParameters(slot, matches_redis_cluster_keyslot)
{
    return cr_make_param_array(struct slot_case, slot_cases,
                               sizeof(slot_cases) / sizeof(*slot_cases));
}

ParameterizedTest(struct slot_case *tc, slot, matches_redis_cluster_keyslot)
{
    unsigned got = slot_for_key(tc->key, tc->len);

    cr_assert_eq(got, tc->slot, "slot of case %.*s: %u, expected %u",
                 (int)tc->len, tc->key, got, tc->slot);
}

/* CRC16/XMODEM computed bit by bit, the definition the table must match. */
static uint16_t crc16_bitwise(const unsigned char *p, size_t len)
{
    uint16_t crc = 0;

    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)(p[i] << 8);
        for (int bit = 0; bit < 8; bit++) {
            crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021)
                                 : (uint16_t)(crc << 1);
        }
    }
    return crc;
}

Test(slot, crc16_is_the_xmodem_check_value)
{
    cr_assert_eq(slot_crc16("123456789", 9), 0x31c3);
    cr_assert_eq(slot_crc16(NULL, 0), 0);
    cr_assert_eq(slot_crc16("", 0), 0);
}

Test(slot, crc16_of_every_byte_value_matches_the_bitwise_definition)
{
    for (unsigned b = 0; b < 256; b++) {
        unsigned char c = (unsigned char)b;
        cr_assert_eq(slot_crc16((const char *)&c, 1), crc16_bitwise(&c, 1),
                     "byte 0x%02x", b);
    }
}

/* xorshift32: a fixed-seed stream so failures reproduce. */
static uint32_t next_random(uint32_t *state)
{
    uint32_t x = *state;

    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    *state = x;
    return x;
}

Test(slot, crc16_of_random_binary_strings_matches_the_bitwise_definition)
{
    unsigned char buf[64];
    uint32_t seed = 0x5eed1234u;

    for (int round = 0; round < 2000; round++) {
        size_t len = next_random(&seed) % sizeof(buf);
        for (size_t i = 0; i < len; i++) {
            buf[i] = (unsigned char)next_random(&seed);
        }
        cr_assert_eq(slot_crc16((const char *)buf, len),
                     crc16_bitwise(buf, len), "round %d, %zu bytes", round,
                     len);
    }
}

Test(slot, empty_key_is_in_slot_zero)
{
    cr_assert_eq(slot_for_key(NULL, 0), 0);
    cr_assert_eq(slot_for_key("", 0), 0);
}

Test(slot, every_slot_is_below_16384)
{
    char key[32];
    unsigned seen_high = 0;

    for (unsigned i = 0; i < 100000; i++) {
        memcpy(key, &i, sizeof(i));
        unsigned s = slot_for_key(key, sizeof(i));
        cr_assert_lt(s, SLOT_COUNT);
        seen_high |= s;
    }
    /* Every one of the 14 slot bits is used by some key. */
    cr_assert_eq(seen_high, SLOT_COUNT - 1);
}

Test(slot, keys_sharing_a_hashtag_share_a_slot)
{
    cr_assert_eq(slot_for_key("{user1000}.following", 20),
                 slot_for_key("{user1000}.followers", 20));
    cr_assert_eq(slot_for_key("{user1000}.following", 20),
                 slot_for_key("user1000", 8));
    cr_assert_eq(slot_for_key("x{tag}", 6), slot_for_key("tag", 3));
    cr_assert_eq(slot_for_key("{tag}", 5), slot_for_key("tag", 3));
}

Test(slot, hashes_only_the_first_nonempty_hashtag)
{
    /* First '{' then the first '}' after it: "bar", not "zap". */
    cr_assert_eq(slot_for_key("foo{bar}{zap}", 13), slot_for_key("bar", 3));
    /* The tag runs from the first '{' to the first '}': "{bar". */
    cr_assert_eq(slot_for_key("foo{{bar}}zap", 13), slot_for_key("{bar", 4));
}

Test(slot, empty_hashtag_hashes_the_whole_key)
{
    cr_assert_eq(slot_for_key("foo{}{bar}", 10),
                 slot_crc16("foo{}{bar}", 10) % SLOT_COUNT);
    cr_assert_neq(slot_for_key("foo{}{bar}", 10), slot_for_key("bar", 3));
}

Test(slot, unclosed_brace_hashes_the_whole_key)
{
    cr_assert_eq(slot_for_key("a{b", 3), slot_crc16("a{b", 3) % SLOT_COUNT);
    cr_assert_eq(slot_for_key("ab{", 3), slot_crc16("ab{", 3) % SLOT_COUNT);
    /* A '}' before the first '{' does not close it. */
    cr_assert_eq(slot_for_key("}a{", 3), slot_crc16("}a{", 3) % SLOT_COUNT);
}

Test(slot, binary_keys_hash_every_byte_including_nul)
{
    static const char with_nul[] = "a\0b";
    static const char tagged_nul[] = "x{\0\x01}y";

    cr_assert_eq(slot_for_key(with_nul, 3), 8383);
    cr_assert_neq(slot_for_key(with_nul, 3), slot_for_key("a", 1));
    cr_assert_eq(slot_for_key(tagged_nul, 6), slot_for_key("\0\x01", 2));
    cr_assert_eq(slot_for_key("\xff{\xfe}", 4), slot_for_key("\xfe", 1));
}

Test(slot, reads_only_len_bytes)
{
    /* Exact-size heap copies, so ASan reports any read past len. */
    char *open_tag = malloc(4);
    char *foo = malloc(3);

    cr_assert_not_null(open_tag);
    cr_assert_not_null(foo);
    memcpy(open_tag, "{abc", 4);
    memcpy(foo, "foo", 3);
    cr_assert_eq(slot_for_key(open_tag, 4), slot_crc16("{abc", 4) % SLOT_COUNT);
    cr_assert_eq(slot_for_key(foo, 3), 12182);
    free(open_tag);
    free(foo);
}
