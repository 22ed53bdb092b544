/* SHA-256: the FIPS 180-2 example messages, the NIST short-message
 * vectors' boundary lengths, and streaming in any split giving the
 * one-shot digest. */
#include "tests/support/px_test.h"

#include <stdlib.h>
#include <string.h>

#include "conf/sha256.h"

PX_TEST_SUITE(sha256);

static void check_hex(const char *msg, size_t len, const char *want)
{
    char hex[SHA256_HEX_LEN];

    sha256_hex(msg, len, hex);
    cr_assert_str_eq(hex, want, "sha256 of %zu bytes", len);
}

Test(sha256, fips_examples)
{
    check_hex(
        "", 0,
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    check_hex(
        "abc", 3,
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    check_hex(
        "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56,
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    check_hex(
        "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmno"
        "ijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
        112,
        "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

Test(sha256, million_a)
{
    size_t n = 1000000;
    char *a = malloc(n);
    char hex[SHA256_HEX_LEN];

    cr_assert_not_null(a);
    memset(a, 'a', n);
    sha256_hex(a, n, hex);
    free(a);
    cr_assert_str_eq(
        hex,
        "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

/* Lengths around the padding boundary (55, 56, 63, 64 bytes): NIST SHAVS
 * short messages of the byte 0x00 repeated are not at hand, so these
 * compare with digests computed by sha256sum. */
Test(sha256, padding_boundaries)
{
    static const struct {
        size_t len;
        const char *want;
    } cases[] = {
        { 55,
          "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318" },
        { 56,
          "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a" },
        { 63,
          "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34" },
        { 64,
          "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb" },
    };
    char msg[64];
    size_t k;

    memset(msg, 'a', sizeof(msg));
    for (k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        check_hex(msg, cases[k].len, cases[k].want);
    }
}

Test(sha256, streaming_any_split)
{
    unsigned char whole[SHA256_LEN], parts[SHA256_LEN];
    char msg[1000];
    struct sha256 s;
    unsigned seed = 7;
    size_t k, off;

    for (k = 0; k < sizeof(msg); k++) {
        msg[k] = (char)(k * 31 + 5);
    }
    sha256_init(&s);
    sha256_update(&s, msg, sizeof(msg));
    sha256_final(&s, whole);
    for (k = 0; k < 200; k++) {
        sha256_init(&s);
        for (off = 0; off < sizeof(msg);) {
            size_t n;
            seed = seed * 1103515245u + 12345u;
            n = (seed >> 16) % 130;
            if (n > sizeof(msg) - off) {
                n = sizeof(msg) - off;
            }
            sha256_update(&s, msg + off, n);
            off += n;
        }
        sha256_final(&s, parts);
        cr_assert_eq(memcmp(whole, parts, SHA256_LEN), 0, "split %zu", k);
    }
}
