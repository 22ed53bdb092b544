/* RESP encoders: the exact bytes of every encoder, in both protocols where
 * they differ. */
#include "tests/support/px_test.h"

#include <limits.h>
#include <string.h>

#include "parser/buf.h"
#include "parser/resp_enc.h"

PX_TEST_SUITE(resp_enc);

#define B(s) s, sizeof(s) - 1

/* Asserts that `b` holds exactly `want` (n bytes), then frees it. */
static void expect(struct buf *b, const char *want, size_t n)
{
    cr_assert_eq(b->len, n, "got %zu bytes, want %zu", b->len, n);
    cr_assert(n == 0 || memcmp(b->data, want, n) == 0, "got '%.*s'",
              (int)b->len, b->data);
    buf_free(b);
}

Test(resp_enc, simple_string)
{
    struct buf b;

    buf_init(&b);
    cr_assert_eq(resp_enc_simple(&b, "OK"), BUF_OK);
    expect(&b, B("+OK\r\n"));
    cr_assert_eq(resp_enc_simple(&b, ""), BUF_OK);
    expect(&b, B("+\r\n"));
}

Test(resp_enc, error_gets_a_minus_prefix)
{
    struct buf b;

    buf_init(&b);
    cr_assert_eq(resp_enc_error(&b, "ERR syntax error"), BUF_OK);
    expect(&b, B("-ERR syntax error\r\n"));
}

Test(resp_enc, integers_including_extremes)
{
    static const struct {
        long long v;
        const char *want;
    } cases[] = {
        { 0, ":0\r\n" },
        { 1, ":1\r\n" },
        { -1, ":-1\r\n" },
        { 10, ":10\r\n" },
        { -10, ":-10\r\n" },
        { 123456789, ":123456789\r\n" },
        { LLONG_MAX, ":9223372036854775807\r\n" },
        { LLONG_MIN, ":-9223372036854775808\r\n" },
        { LLONG_MIN + 1, ":-9223372036854775807\r\n" },
    };
    size_t i;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct buf b;

        buf_init(&b);
        cr_assert_eq(resp_enc_int(&b, cases[i].v), BUF_OK);
        expect(&b, cases[i].want, strlen(cases[i].want));
    }
}

Test(resp_enc, fmt_ll_writes_decimal_and_a_nul)
{
    static const struct {
        long long v;
        const char *want;
    } cases[] = {
        { 0, "0" },
        { 7, "7" },
        { -7, "-7" },
        { 1000000, "1000000" },
        { LLONG_MAX, "9223372036854775807" },
        { LLONG_MIN, "-9223372036854775808" },
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char out[RESP_FMT_LL_MAX + 1];

        memset(out, 'x', sizeof(out));
        cr_assert_eq(resp_fmt_ll(out, cases[i].v), strlen(cases[i].want));
        cr_assert_str_eq(out, cases[i].want);
    }
}

Test(resp_enc, put_ints_writes_an_array_of_integers)
{
    static const long long v[5] = { 1, LLONG_MIN, 0, -1, LLONG_MAX };
    static const char want[] = "*5\r\n:1\r\n:-9223372036854775808\r\n:0\r\n"
                               ":-1\r\n:9223372036854775807\r\n";
    char out[RESP_PUT_INTS_SIZE(5)];

    cr_assert_eq(resp_put_ints(out, v, 5), sizeof(want) - 1);
    cr_assert_eq(memcmp(out, want, sizeof(want) - 1), 0);
    cr_assert_eq(resp_put_ints(out, v, 0), 4);
    cr_assert_eq(memcmp(out, "*0\r\n", 4), 0);
}

Test(resp_enc, bulk_strings_are_binary_safe)
{
    struct buf b;

    buf_init(&b);
    cr_assert_eq(resp_enc_bulk(&b, B("foo")), BUF_OK);
    expect(&b, B("$3\r\nfoo\r\n"));
    cr_assert_eq(resp_enc_bulk(&b, B("a\0\r\nb")), BUF_OK);
    expect(&b, B("$5\r\na\0\r\nb\r\n"));
    cr_assert_eq(resp_enc_bulk(&b, NULL, 0), BUF_OK);
    expect(&b, B("$0\r\n\r\n"));
    cr_assert_eq(resp_enc_bulk(&b, B("0123456789")), BUF_OK);
    expect(&b, B("$10\r\n0123456789\r\n"));
}

Test(resp_enc, nil_bulk)
{
    struct buf b;

    buf_init(&b);
    cr_assert_eq(resp_enc_nil(&b), BUF_OK);
    expect(&b, B("$-1\r\n"));
}

Test(resp_enc, array_headers_including_nil_and_empty)
{
    struct buf b;

    buf_init(&b);
    cr_assert_eq(resp_enc_array_header(&b, 3), BUF_OK);
    expect(&b, B("*3\r\n"));
    cr_assert_eq(resp_enc_array_header(&b, 0), BUF_OK);
    expect(&b, B("*0\r\n"));
    cr_assert_eq(resp_enc_array_header(&b, -1), BUF_OK);
    expect(&b, B("*-1\r\n"));
    cr_assert_eq(resp_enc_array_header(&b, 1048576), BUF_OK);
    expect(&b, B("*1048576\r\n"));
}

Test(resp_enc, argv_is_an_array_of_bulk_strings)
{
    static const char *const argv[] = { "SET", "k", "", "v\r\n" };
    static const size_t lens[] = { 3, 1, 0, 3 };
    struct buf b;

    buf_init(&b);
    cr_assert_eq(resp_enc_argv(&b, 4, argv, lens), BUF_OK);
    expect(&b, B("*4\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n$3\r\nv\r\n\r\n"));
}

Test(resp_enc, encoders_append_after_existing_bytes)
{
    static const char *const argv[] = { "PING" };
    static const size_t lens[] = { 4 };
    struct buf b;

    buf_init(&b);
    cr_assert_eq(buf_append_str(&b, "x"), BUF_OK);
    cr_assert_eq(resp_enc_simple(&b, "OK"), BUF_OK);
    cr_assert_eq(resp_enc_int(&b, -7), BUF_OK);
    cr_assert_eq(resp_enc_argv(&b, 1, argv, lens), BUF_OK);
    cr_assert_eq(resp_enc_nil(&b), BUF_OK);
    cr_assert_eq(resp_enc_error(&b, "ERR x"), BUF_OK);
    expect(&b, B("x+OK\r\n:-7\r\n*1\r\n$4\r\nPING\r\n$-1\r\n-ERR x\r\n"));
}

Test(resp_enc, oversized_bulk_fails_without_writing)
{
    struct buf b;

    buf_init(&b);
    cr_assert_eq(buf_append_str(&b, "keep"), BUF_OK);
    cr_assert_eq(resp_enc_bulk(&b, "x", (size_t)-1), BUF_ENOMEM);
    expect(&b, B("keep"));
}

Test(resp_enc, null_is_spelled_per_protocol)
{
    struct buf b;

    buf_init(&b);
    cr_assert_eq(resp_enc_null(&b, RESP_PROTO2), BUF_OK);
    expect(&b, B("$-1\r\n"));
    cr_assert_eq(resp_enc_null(&b, RESP_PROTO3), BUF_OK);
    expect(&b, B("_\r\n"));
}

Test(resp_enc, map_is_an_array_of_pairs_in_resp2)
{
    struct buf b;

    buf_init(&b);
    cr_assert_eq(resp_enc_map_header(&b, 7, RESP_PROTO3), BUF_OK);
    expect(&b, B("%7\r\n"));
    cr_assert_eq(resp_enc_map_header(&b, 7, RESP_PROTO2), BUF_OK);
    expect(&b, B("*14\r\n"));
    cr_assert_eq(resp_enc_map_header(&b, 0, RESP_PROTO3), BUF_OK);
    expect(&b, B("%0\r\n"));
    cr_assert_eq(resp_enc_map_header(&b, 0, RESP_PROTO2), BUF_OK);
    expect(&b, B("*0\r\n"));
}

Test(resp_enc, set_is_an_array_in_resp2)
{
    struct buf b;

    buf_init(&b);
    cr_assert_eq(resp_enc_set_header(&b, 3, RESP_PROTO3), BUF_OK);
    expect(&b, B("~3\r\n"));
    cr_assert_eq(resp_enc_set_header(&b, 3, RESP_PROTO2), BUF_OK);
    expect(&b, B("*3\r\n"));
}

/* Redis 7.0 sends INFO as `=<n>\r\ntxt:<text>\r\n` to RESP3 clients. */
Test(resp_enc, verbatim_string_carries_its_format_in_resp3_only)
{
    struct buf b;

    buf_init(&b);
    cr_assert_eq(
        resp_enc_verbatim(&b, "txt", B("# Server\r\nx:1\r\n"), RESP_PROTO3),
        BUF_OK);
    expect(&b, B("=19\r\ntxt:# Server\r\nx:1\r\n\r\n"));
    cr_assert_eq(
        resp_enc_verbatim(&b, "txt", B("# Server\r\nx:1\r\n"), RESP_PROTO2),
        BUF_OK);
    expect(&b, B("$15\r\n# Server\r\nx:1\r\n\r\n"));
    cr_assert_eq(resp_enc_verbatim(&b, "txt", NULL, 0, RESP_PROTO3), BUF_OK);
    expect(&b, B("=4\r\ntxt:\r\n"));
}

Test(resp_enc, verbatim_refuses_a_bad_format_without_writing)
{
    struct buf b;

    buf_init(&b);
    cr_assert_eq(buf_append_str(&b, "keep"), BUF_OK);
    cr_assert_eq(resp_enc_verbatim(&b, "text", B("x"), RESP_PROTO3),
                 BUF_ENOMEM);
    cr_assert_eq(resp_enc_verbatim(&b, "txt", "x", (size_t)-1, RESP_PROTO3),
                 BUF_ENOMEM);
    expect(&b, B("keep"));
}

/* LIMITER RULES' shape: one bulk string per line, the '\n's gone; a last
 * line without '\n' still counts, an empty line stays an empty string. */
Test(resp_enc, lines_are_an_array_of_one_bulk_per_line)
{
    struct buf b;

    buf_init(&b);
    cr_assert_eq(resp_enc_lines(&b, B("a  x\nbc\n")), BUF_OK);
    expect(&b, B("*2\r\n$4\r\na  x\r\n$2\r\nbc\r\n"));
    cr_assert_eq(resp_enc_lines(&b, B("a\n\nlast")), BUF_OK);
    expect(&b, B("*3\r\n$1\r\na\r\n$0\r\n\r\n$4\r\nlast\r\n"));
    cr_assert_eq(resp_enc_lines(&b, B("\n")), BUF_OK);
    expect(&b, B("*1\r\n$0\r\n\r\n"));
    cr_assert_eq(resp_enc_lines(&b, "", 0), BUF_OK);
    expect(&b, B("*0\r\n"));
}
