/* Reply framer: frame lengths for every RESP2 and RESP3 type, pipelined and
 * split, with the type of each frame (a push must be told from a reply).
 *
 * The case table is run fed whole, one byte at a time, and split into two
 * chunks at every position; each must report the same frame lengths and
 * types. These
 * tests also pin the hiredis 0.14.1 cursor arithmetic the framer relies on
 * (frame end = bytes fed - (r->len - r->pos)), including across the 1 KiB
 * point after which hiredis trims its buffer. */
#include "tests/support/px_test.h"

#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parser/buf.h"
#include "parser/resp.h"

PX_TEST_SUITE(resp_framer);

#define B(s) s, sizeof(s) - 1

#define MAX_FRAMES 10

/* One framing case: the expected frame lengths, then maybe an error. */
struct fcase {
    const char *name;
    const char *in;
    size_t in_len;
    size_t frames[MAX_FRAMES]; /* lengths, ended by 0 */
    int fails;                 /* the stream ends in a protocol error */
    const char *types;         /* type of each frame, or NULL: the first
                                  byte of each */
};

static const struct fcase CASES[] = {
    { "simple_string", B("+OK\r\n"), { 5 }, 0, NULL },
    { "error", B("-ERR unknown command\r\n"), { 22 }, 0, NULL },
    { "integer", B(":12345\r\n"), { 8 }, 0, NULL },
    { "negative_integer", B(":-5\r\n"), { 5 }, 0, NULL },
    { "bulk", B("$3\r\nfoo\r\n"), { 9 }, 0, NULL },
    { "empty_bulk", B("$0\r\n\r\n"), { 6 }, 0, NULL },
    { "binary_bulk", B("$6\r\n\r\n\0\r\n\n\r\n"), { 12 }, 0, NULL },
    { "nil_bulk", B("$-1\r\n"), { 5 }, 0, NULL },
    { "nil_array", B("*-1\r\n"), { 5 }, 0, NULL },
    { "empty_array", B("*0\r\n"), { 4 }, 0, NULL },
    { "array_of_mixed_types",
      B("*4\r\n+a\r\n:1\r\n$-1\r\n$2\r\nxy\r\n"),
      { 25 },
      0,
      NULL },
    { "nested_arrays",
      B("*2\r\n*1\r\n:1\r\n*2\r\n$-1\r\n*0\r\n"),
      { 25 },
      0,
      NULL },
    { "nested_seven_deep",
      B("*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n"),
      { 32 },
      0,
      NULL },
    { "pipelined_replies",
      B("+OK\r\n:1\r\n$1\r\na\r\n*2\r\n:1\r\n:2\r\n-ERR x\r\n$-1\r\n"),
      { 5, 4, 7, 12, 8, 5 },
      0,
      NULL },
    /* Deeper than hiredis 0.14's limit of 7, as COMMAND DOCS replies are. */
    { "nested_twelve_deep",
      B("*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n"
        "*1\r\n*2\r\n:1\r\n$1\r\nx\r\n"),
      { 59 },
      0,
      NULL },
    { "resp3_map_set_double_bool_null",
      B("%2\r\n+a\r\n,1.5\r\n+b\r\n~2\r\n#t\r\n_\r\n"),
      { 29 },
      0,
      NULL },
    { "resp3_push_then_reply",
      B(">2\r\n+m\r\n:1\r\n+OK\r\n"),
      { 12, 5 },
      0,
      NULL },
    { "resp3_attribute_belongs_to_next_value",
      B("|1\r\n+k\r\n:1\r\n$2\r\nhi\r\n+OK\r\n"),
      { 20, 5 },
      0,
      "$+" },
    { "resp3_blob_error_and_verbatim",
      B("!3\r\nERR\r\n=7\r\ntxt:abc\r\n(12345\r\n"),
      { 9, 13, 8 },
      0,
      NULL },
    /* Every RESP3 scalar, one frame each, as Redis 7.0 sends them
     * (DEBUG PROTOCOL). */
    { "resp3_every_scalar_type",
      B("_\r\n,3.141\r\n,-inf\r\n#t\r\n#f\r\n"
        "(1234567999999999999999999999999999999\r\n"
        "=29\r\ntxt:This is a verbatim\nstring\r\n!0\r\n\r\n"),
      { 3, 8, 7, 4, 4, 40, 36, 6 },
      0,
      NULL },
    { "resp3_empty_aggregates",
      B("%0\r\n~0\r\n>0\r\n*0\r\n"),
      { 4, 4, 4, 4 },
      0,
      NULL },
    { "resp3_map_of_bools",
      B("%3\r\n:0\r\n#f\r\n:1\r\n#t\r\n:2\r\n#f\r\n"),
      { 28 },
      0,
      NULL },
    /* Redis 7.0's EXEC of a SUBSCRIBE queued in RESP3: a push inside an
     * array is part of the reply. */
    { "resp3_push_nested_in_a_reply_is_not_a_frame",
      B("*1\r\n>3\r\n$9\r\nsubscribe\r\n$1\r\nq\r\n:1\r\n"),
      { 34 },
      0,
      NULL },
    { "resp3_nested_map_set_push_and_attribute",
      B("%1\r\n~2\r\n%1\r\n+k\r\n|1\r\n+a\r\n#t\r\n,1e3\r\n_\r\n"
        "*2\r\n|0\r\n:7\r\n>1\r\n(9\r\n"),
      { 57 },
      0,
      NULL },
    /* Pushes (pub/sub, invalidations) fall between replies on one
     * connection; each is a frame of its own, typed '>'. */
    { "resp3_pushes_between_replies",
      B("+OK\r\n>3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n"
        "$1\r\nv\r\n>2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n"
        "_\r\n"),
      { 5, 33, 7, 32, 3 },
      0,
      NULL },
    { "resp3_attribute_before_a_push_types_it_as_a_push",
      B("|1\r\n+a\r\n:1\r\n>1\r\n+p\r\n:2\r\n"),
      { 20, 4 },
      0,
      ">:" },
    { "resp3_attribute_with_no_pairs", B("|0\r\n:5\r\n"), { 8 }, 0, ":" },
    { "resp3_deep_attributes_inside_aggregates",
      B("~1\r\n|1\r\n|1\r\n+x\r\n+y\r\n+k\r\n+v\r\n+e\r\n"),
      { 32 },
      0,
      "~" },
    /* A line ends at its first CRLF, as hiredis reads it: a bare LF (or
     * CR) is part of the line. Read to its first LF instead, the first
     * case would be two replies where a client sees one. */
    { "bare_lf_inside_a_simple_string_is_content",
      B("+OK\n+x\r\n:1\r\n"),
      { 8, 4 },
      0,
      "+:" },
    { "bare_lf_inside_an_error_is_content",
      B("-ERR a\nb\r\n"),
      { 10 },
      0,
      NULL },
    { "bare_lf_inside_an_integer_line_is_content",
      B(":1\n2\r\n+OK\r\n"),
      { 6, 5 },
      0,
      NULL },
    { "bare_lf_right_after_the_type_byte_is_content",
      B("+\n\r\n"),
      { 4 },
      0,
      NULL },
    { "bare_cr_inside_a_line_is_content", B("+a\rb\r\r\n"), { 7 }, 0, NULL },
    { "bare_lf_inside_an_array_element",
      B("*2\r\n+a\nb\r\n+c\r\n"),
      { 14 },
      0,
      NULL },
    /* A blob's payload is followed by CRLF, or the stream is not RESP. */
    { "blob_not_followed_by_crlf_refused", B("$1\r\naXY\r\n"), { 0 }, 1, NULL },
    { "empty_blob_not_followed_by_crlf_refused",
      B("+OK\r\n$0\r\n\n\r"),
      { 5 },
      1,
      NULL },
    { "blob_followed_by_bare_lf_refused", B("$1\r\na\n"), { 0 }, 1, NULL },
    { "null_written_other_than_minus_one_refused",
      B("$-01\r\n"),
      { 0 },
      1,
      NULL },
    { "minus_zero_length_refused", B("*-0\r\n"), { 0 }, 1, NULL },
    { "null_blob_error_refused", B("!-1\r\n"), { 0 }, 1, NULL },
    { "negative_length_other_than_minus_one", B("$-2\r\n"), { 0 }, 1, NULL },
    { "null_map_is_not_resp", B("%-1\r\n"), { 0 }, 1, NULL },
    { "streamed_aggregate_is_refused", B("*?\r\n"), { 0 }, 1, NULL },
    /* Lengths no reply can have are refused from their header, before any
     * byte of the payload: they must not wrap the arithmetic. */
    { "bulk_length_over_int64_refused",
      B("$9300000000000000000\r\n"),
      { 0 },
      1,
      NULL },
    { "bulk_length_of_twenty_digits_refused",
      B("+OK\r\n$18446744073709551617\r\n"),
      { 5 },
      1,
      NULL },
    { "array_over_four_billion_elements_refused",
      B("*4294967296\r\n"),
      { 0 },
      1,
      NULL },
    { "map_whose_pairs_double_past_the_limit_refused",
      B("%9223372036854775807\r\n"),
      { 0 },
      1,
      NULL },
    { "push_with_a_huge_count_refused", B(">99999999999\r\n"), { 0 }, 1, NULL },
    { "length_without_digits_refused", B("$\r\n"), { 0 }, 1, NULL },
    { "length_with_a_stray_byte_refused", B("*1x\r\n"), { 0 }, 1, NULL },
    { "garbage_type_byte", B("?foo\r\n"), { 0 }, 1, NULL },
    { "garbage_after_reply", B("+OK\r\n?foo\r\n"), { 5 }, 1, NULL },
    { "garbage_inside_array", B("*2\r\n:1\r\n?\r\n"), { 0 }, 1, NULL },
};

#define NCASES (sizeof(CASES) / sizeof(CASES[0]))

/* What a run produced. */
struct fresult {
    size_t frames[MAX_FRAMES + 1];
    char types[MAX_FRAMES + 1];
    size_t n;
    int rc;
};

static void drain(struct resp_framer *fr, struct fresult *r)
{
    size_t len = 0;
    char type = 0;
    int rc;

    while ((rc = resp_framer_next_typed(fr, &len, &type)) == RESP_OK) {
        cr_assert_lt(r->n, MAX_FRAMES, "too many frames");
        r->types[r->n] = type;
        r->frames[r->n++] = len;
    }
    cr_assert(rc == RESP_AGAIN || rc == RESP_EPROTO, "unexpected rc %d", rc);
    r->rc = rc;
}

static void run(const struct fcase *tc, size_t first, size_t step,
                struct fresult *r)
{
    struct resp_framer *fr = resp_framer_new();
    size_t pos = first < tc->in_len ? first : tc->in_len;
    int rc;

    cr_assert_not_null(fr);
    memset(r, 0, sizeof(*r));
    cr_assert_eq(resp_framer_feed(fr, tc->in, pos), RESP_OK);
    drain(fr, r);
    while (pos < tc->in_len) {
        size_t n = tc->in_len - pos < step ? tc->in_len - pos : step;

        rc = resp_framer_feed(fr, tc->in + pos, n);
        cr_assert(rc == RESP_OK || (rc == RESP_EPROTO && r->rc == RESP_EPROTO));
        pos += n;
        drain(fr, r);
    }
    if (r->rc == RESP_EPROTO) {
        size_t len;

        /* Sticky. */
        cr_assert_eq(resp_framer_feed(fr, B("+OK\r\n")), RESP_EPROTO);
        cr_assert_eq(resp_framer_next(fr, &len), RESP_EPROTO);
    }
    resp_framer_free(fr);
}

static void check(const struct fcase *tc, const struct fresult *r,
                  const char *how)
{
    size_t i, sum = 0;

    for (i = 0; i < MAX_FRAMES && tc->frames[i] != 0; i++) {
        char want = tc->types != NULL ? tc->types[i] : tc->in[sum];

        cr_assert_lt(i, r->n, "%s (%s): missing frame %zu", tc->name, how, i);
        cr_assert_eq(r->frames[i], tc->frames[i], "%s (%s): frame %zu",
                     tc->name, how, i);
        cr_assert_eq(r->types[i], want, "%s (%s): frame %zu is '%c', not '%c'",
                     tc->name, how, i, r->types[i], want);
        sum += tc->frames[i];
    }
    cr_assert_eq(r->n, i, "%s (%s): extra frames", tc->name, how);
    if (tc->fails) {
        cr_assert_eq(r->rc, RESP_EPROTO, "%s (%s)", tc->name, how);
    } else {
        cr_assert_eq(r->rc, RESP_AGAIN, "%s (%s)", tc->name, how);
        cr_assert_eq(sum, tc->in_len, "%s: frames must cover the input",
                     tc->name);
    }
}

static struct criterion_test_params case_ids(void)
{
    static size_t ids[NCASES];

    return px_param_ids(ids, NCASES);
}

ParameterizedTestParameters(resp_framer, case_fed_whole)
{
    return case_ids();
}

ParameterizedTest(size_t *id, resp_framer, case_fed_whole)
{
    struct fresult r;

    run(&CASES[*id], CASES[*id].in_len, CASES[*id].in_len, &r);
    check(&CASES[*id], &r, "whole");
}

ParameterizedTestParameters(resp_framer, case_fed_one_byte_at_a_time)
{
    return case_ids();
}

ParameterizedTest(size_t *id, resp_framer, case_fed_one_byte_at_a_time)
{
    struct fresult r;

    run(&CASES[*id], 0, 1, &r);
    check(&CASES[*id], &r, "byte at a time");
}

ParameterizedTestParameters(resp_framer, case_split_at_every_position)
{
    return case_ids();
}

ParameterizedTest(size_t *id, resp_framer, case_split_at_every_position)
{
    const struct fcase *tc = &CASES[*id];
    struct fresult r;
    char how[64];
    size_t k;

    for (k = 0; k <= tc->in_len; k++) {
        snprintf(how, sizeof(how), "split at %zu", k);
        run(tc, k, tc->in_len, &r);
        check(tc, &r, how);
    }
}

/* Many replies of varying size, well past hiredis's 1 KiB trim point, fed in
 * awkward chunk sizes: every length must still be exact. */
Test(resp_framer, lengths_stay_exact_across_hiredis_buffer_trims)
{
    static const size_t steps[] = { 1, 3, 7, 1000, 4096 };
    struct buf in;
    size_t want[500];
    char tmp[64];
    size_t s, i;

    buf_init(&in);
    for (i = 0; i < 500; i++) {
        size_t before = in.len;

        if (i % 3 == 0) {
            snprintf(tmp, sizeof(tmp), ":%zu\r\n", i * 1000);
        } else if (i % 3 == 1) {
            snprintf(tmp, sizeof(tmp), "$%zu\r\n%0*zu\r\n", i % 10 + 1,
                     (int)(i % 10 + 1), (size_t)0);
        } else {
            snprintf(tmp, sizeof(tmp), "*2\r\n+ok\r\n$-1\r\n");
        }
        cr_assert_eq(buf_append_str(&in, tmp), BUF_OK);
        want[i] = in.len - before;
    }
    for (s = 0; s < sizeof(steps) / sizeof(steps[0]); s++) {
        struct resp_framer *fr = resp_framer_new();
        size_t pos = 0, n = 0, len;

        while (pos < in.len) {
            size_t k = in.len - pos < steps[s] ? in.len - pos : steps[s];

            cr_assert_eq(resp_framer_feed(fr, in.data + pos, k), RESP_OK);
            pos += k;
            while (resp_framer_next(fr, &len) == RESP_OK) {
                cr_assert_lt(n, 500);
                cr_assert_eq(len, want[n], "step %zu frame %zu", steps[s], n);
                n++;
            }
        }
        cr_assert_eq(n, 500, "step %zu", steps[s]);
        resp_framer_free(fr);
    }
    buf_free(&in);
}

Test(resp_framer, large_bulk_reply_in_4k_chunks_is_one_frame)
{
    const size_t big = 300000;
    static const char head[] = "$300000\r\n";
    struct resp_framer *fr = resp_framer_new();
    size_t total = sizeof(head) - 1 + big + 2 + 5;
    char *in = malloc(total);
    size_t pos = 0, len = 0;

    cr_assert_not_null(in);
    memcpy(in, head, sizeof(head) - 1);
    memset(in + sizeof(head) - 1, 'v', big);
    memcpy(in + sizeof(head) - 1 + big, "\r\n+OK\r\n", 7);
    while (pos < total) {
        size_t k = total - pos < 4096 ? total - pos : 4096;

        cr_assert_eq(resp_framer_feed(fr, in + pos, k), RESP_OK);
        pos += k;
        if (pos < total - 5) {
            cr_assert_eq(resp_framer_next(fr, &len), RESP_AGAIN);
        }
    }
    cr_assert_eq(resp_framer_next(fr, &len), RESP_OK);
    cr_assert_eq(len, total - 5);
    cr_assert_eq(resp_framer_next(fr, &len), RESP_OK);
    cr_assert_eq(len, 5);
    cr_assert_eq(resp_framer_next(fr, &len), RESP_AGAIN);
    free(in);
    resp_framer_free(fr);
}

Test(resp_framer, empty_feed_and_free_null_are_harmless)
{
    struct resp_framer *fr = resp_framer_new();
    size_t len;

    cr_assert_eq(resp_framer_feed(fr, NULL, 0), RESP_OK);
    cr_assert_eq(resp_framer_next(fr, &len), RESP_AGAIN);
    resp_framer_free(fr);
    resp_framer_free(NULL);
}

/* What Redis sends for a Lua table that holds itself: thousands of nested
 * `*1` ending in an error. Framing counts what is still owed, so any depth
 * is one frame, fed whole or a byte at a time, and the next reply after it
 * is framed as usual. */
Test(resp_framer, reply_nested_100000_deep_is_one_frame)
{
    static const char tail[] = "-ERR reached lua stack limit\r\n";
    const size_t depth = 100000, step[] = { 0, 1, 777 };
    size_t total = depth * 4 + sizeof(tail) - 1, k, s;
    char *in = malloc(total + 5);

    cr_assert_not_null(in);
    for (k = 0; k < depth; k++) {
        memcpy(in + k * 4, "*1\r\n", 4);
    }
    memcpy(in + depth * 4, tail, sizeof(tail) - 1);
    memcpy(in + total, "+OK\r\n", 5);
    for (s = 0; s < sizeof(step) / sizeof(step[0]); s++) {
        struct resp_framer *fr = resp_framer_new();
        size_t pos = 0, len = 0, chunk = step[s] ? step[s] : total + 5;
        char type = 0;

        while (pos < total + 5) {
            k = total + 5 - pos < chunk ? total + 5 - pos : chunk;
            cr_assert_eq(resp_framer_feed(fr, in + pos, k), RESP_OK);
            pos += k;
        }
        cr_assert_eq(resp_framer_next_typed(fr, &len, &type), RESP_OK);
        cr_assert_eq(len, total, "step %zu", step[s]);
        cr_assert_eq(type, '*');
        cr_assert_eq(resp_framer_next_typed(fr, &len, &type), RESP_OK);
        cr_assert_eq(len, 5);
        cr_assert_eq(type, '+');
        cr_assert_eq(resp_framer_next(fr, &len), RESP_AGAIN);
        resp_framer_free(fr);
    }
    free(in);
}
