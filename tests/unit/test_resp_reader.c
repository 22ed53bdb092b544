/* Request reader: RESP arrays, inline commands, limits and error texts.
 *
 * The case table is run three ways: fed whole, fed one byte at a time, and
 * split into two chunks at every possible position. Every way must produce
 * the same commands and the same final status. Commands are compared through
 * their canonical RESP encoding (re-encoded from argv), so one expected
 * string describes argc and every argument, binary bytes included.
 *
 * Case parameters are indices into CASES: criterion runs each test in a new
 * process, where pointers stored in parameters would not be valid. */
#include "tests/support/px_test.h"

#include <criterion/parameterized.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parser/buf.h"
#include "parser/resp.h"
#include "parser/resp_enc.h"

PX_TEST_SUITE(resp_reader);

/* A string literal as (pointer, length), embedded NULs included. */
#define B(s)    s, sizeof(s) - 1
#define IN(s)   .in = s, .in_len = sizeof(s) - 1
#define WANT(s) .want = s, .want_len = sizeof(s) - 1

static const char E_MBULK_LEN[] = "Protocol error: invalid multibulk length";
static const char E_BULK_LEN[] = "Protocol error: invalid bulk length";
static const char E_MBULK_BIG[] = "Protocol error: too big mbulk count string";
static const char E_BULK_BIG[] = "Protocol error: too big bulk count string";
static const char E_INLINE_BIG[] = "Protocol error: too big inline request";
static const char E_QUOTES[] = "Protocol error: unbalanced quotes in request";

/* One parser case. Zero limits mean the defaults. */
struct rcase {
    const char *name;
    const char *in; /* input stream */
    size_t in_len;
    const char *want; /* canonical RESP of every command, in order */
    size_t want_len;
    const char *err;  /* final error text, or NULL: ends with RESP_AGAIN */
    int raw_is_input; /* the commands' raw bytes, concatenated, are `in` */
    unsigned long long max_inline;
    unsigned long long max_bulk;
    unsigned long long max_elements;
};

static const struct rcase CASES[] = {
    /* RESP arrays */
    { .name = "single_command",
      IN("*1\r\n$4\r\nPING\r\n"),
      WANT("*1\r\n$4\r\nPING\r\n"),
      .raw_is_input = 1 },
    { .name = "command_with_args",
      IN("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nvalue\r\n"),
      WANT("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nvalue\r\n"),
      .raw_is_input = 1 },
    { .name = "pipelined_commands",
      IN("*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"
         "*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\n"),
      WANT("*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"
           "*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\n"),
      .raw_is_input = 1 },
    { .name = "binary_safe_args",
      IN("*2\r\n$4\r\nECHO\r\n$6\r\na\0\r\n\nb\r\n"),
      WANT("*2\r\n$4\r\nECHO\r\n$6\r\na\0\r\n\nb\r\n"),
      .raw_is_input = 1 },
    { .name = "empty_bulk",
      IN("*2\r\n$4\r\nECHO\r\n$0\r\n\r\n"),
      WANT("*2\r\n$4\r\nECHO\r\n$0\r\n\r\n"),
      .raw_is_input = 1 },
    { .name = "empty_and_nil_arrays_skipped",
      IN("*0\r\n*-1\r\n*1\r\n$4\r\nPING\r\n*0\r\n"),
      WANT("*1\r\n$4\r\nPING\r\n") },
    { .name = "long_bulk_length",
      IN("*1\r\n$12\r\nhello world!\r\n"),
      WANT("*1\r\n$12\r\nhello world!\r\n"),
      .raw_is_input = 1 },

    /* inline commands */
    { .name = "inline_crlf", IN("PING\r\n"), WANT("*1\r\n$4\r\nPING\r\n") },
    { .name = "inline_lf_only",
      IN("GET k\n"),
      WANT("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n") },
    { .name = "inline_blanks_separate",
      IN("  SET\tk  v \r\n"),
      WANT("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n") },
    { .name = "inline_blank_lines_skipped",
      IN("\r\n\n \t \r\nPING\n"),
      WANT("*1\r\n$4\r\nPING\r\n") },
    { .name = "inline_double_quote_escapes",
      IN("ECHO \"a b\\n\\x41\\\\\\\"\\r\\t\\b\\a\\q\"\r\n"),
      WANT("*2\r\n$4\r\nECHO\r\n$12\r\na b\nA\\\"\r\t\b\aq\r\n") },
    { .name = "inline_hex_escape_needs_two_digits",
      IN("ECHO \"\\xZZ\\x4\"\r\n"),
      WANT("*2\r\n$4\r\nECHO\r\n$5\r\nxZZx4\r\n") },
    { .name = "inline_single_quotes",
      IN("ECHO 'it\\'s \"q\" \\n'\r\n"),
      WANT("*2\r\n$4\r\nECHO\r\n$11\r\nit's \"q\" \\n\r\n") },
    { .name = "inline_empty_quoted_args",
      IN("ECHO \"\" ''\r\n"),
      WANT("*3\r\n$4\r\nECHO\r\n$0\r\n\r\n$0\r\n\r\n") },
    { .name = "inline_quote_inside_word",
      IN("SET k ab\"c d\"\r\n"),
      WANT("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nabc d\r\n") },
    { .name = "inline_nul_ends_line",
      IN("ECHO a\0b\r\n"),
      WANT("*2\r\n$4\r\nECHO\r\n$1\r\na\r\n") },
    { .name = "inline_star_inside_line",
      IN("ECHO *1\r\n"),
      WANT("*2\r\n$4\r\nECHO\r\n$2\r\n*1\r\n") },
    { .name = "inline_only_some_blanks_end_a_word",
      IN("\vECHO a\vb\f\r\n"),
      WANT("*2\r\n$4\r\nECHO\r\n$4\r\na\vb\f\r\n") },
    { .name = "mixed_inline_resp_inline",
      IN("PING\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\nECHO hi\r\n"),
      WANT("*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"
           "*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\n") },
    { .name = "limits_are_inclusive",
      IN("*2\r\n$4\r\nabcd\r\n$0\r\n\r\n12345678\n1234567\r\n"),
      WANT("*2\r\n$4\r\nabcd\r\n$0\r\n\r\n*1\r\n$8\r\n12345678\r\n"
           "*1\r\n$7\r\n1234567\r\n"),
      .max_inline = 8,
      .max_bulk = 4,
      .max_elements = 2 },

    /* Redis ignores a non-positive multibulk length, whatever it is. */
    { .name = "count_negative_is_skipped",
      IN("*-10\r\n*-2\r\n*0\r\n*1\r\n$4\r\nPING\r\n"),
      WANT("*1\r\n$4\r\nPING\r\n") },

    /* array header errors */
    { .name = "count_not_a_number", IN("*abc\r\n"), .err = E_MBULK_LEN },
    { .name = "count_with_plus_sign", IN("*+1\r\n"), .err = E_MBULK_LEN },
    { .name = "count_leading_zero", IN("*01\r\n"), .err = E_MBULK_LEN },
    { .name = "count_empty", IN("*\r\n"), .err = E_MBULK_LEN },
    { .name = "count_cr_without_lf", IN("*1\rx"), .err = E_MBULK_LEN },
    { .name = "count_overflows",
      IN("*99999999999999999999\r\n"),
      .err = E_MBULK_LEN },
    { .name = "count_100m_rejected_at_header",
      IN("*100000000\r\n"),
      .err = E_MBULK_LEN },
    { .name = "count_over_limit",
      IN("*3\r\n"),
      .err = E_MBULK_LEN,
      .max_elements = 2 },
    { .name = "count_line_too_long",
      IN("*12345"),
      .err = E_MBULK_BIG,
      .max_inline = 4 },
    { .name = "count_line_too_long_with_crlf",
      IN("*12345\r\n"),
      .err = E_MBULK_BIG,
      .max_inline = 4 },

    /* bulk header errors */
    { .name = "bulk_len_not_a_number",
      IN("*1\r\n$abc\r\n"),
      .err = E_BULK_LEN },
    { .name = "bulk_len_nil", IN("*1\r\n$-1\r\n"), .err = E_BULK_LEN },
    { .name = "bulk_len_negative", IN("*1\r\n$-5\r\n"), .err = E_BULK_LEN },
    { .name = "bulk_len_cr_without_lf", IN("*1\r\n$1\rx"), .err = E_BULK_LEN },
    { .name = "bulk_4gb_rejected_at_header",
      IN("*1\r\n$4000000000\r\n"),
      .err = E_BULK_LEN },
    { .name = "bulk_over_limit",
      IN("*1\r\n$5\r\n"),
      .err = E_BULK_LEN,
      .max_bulk = 4 },
    { .name = "bulk_line_too_long",
      IN("*1\r\n$12345"),
      .err = E_BULK_BIG,
      .max_inline = 4 },
    { .name = "bulk_line_too_long_with_crlf",
      IN("*1\r\n$12345\r\n"),
      .err = E_BULK_BIG,
      .max_inline = 4 },

    /* element type errors */
    { .name = "nested_array",
      IN("*2\r\n*1\r\n$1\r\na\r\n"),
      .err = "Protocol error: expected '$', got '*'" },
    { .name = "integer_element",
      IN("*1\r\n:1\r\n"),
      .err = "Protocol error: expected '$', got ':'" },
    { .name = "simple_string_element",
      IN("*1\r\n+OK\r\n"),
      .err = "Protocol error: expected '$', got '+'" },
    { .name = "text_where_a_bulk_belongs",
      IN("*1\r\nPING\r\n"),
      .err = "Protocol error: expected '$', got 'P'" },
    { .name = "error_element",
      IN("*2\r\n$1\r\na\r\n-ERR\r\n"),
      .err = "Protocol error: expected '$', got '-'" },

    /* inline errors */
    { .name = "unterminated_double_quote",
      IN("SET k \"abc\r\n"),
      .err = E_QUOTES },
    { .name = "closing_double_quote_then_text",
      IN("SET k \"a\"b\r\n"),
      .err = E_QUOTES },
    { .name = "unterminated_single_quote",
      IN("SET 'abc\r\n"),
      .err = E_QUOTES },
    { .name = "closing_single_quote_then_text",
      IN("SET 'a'b\r\n"),
      .err = E_QUOTES },
    { .name = "inline_too_long_without_newline",
      IN("123456789"),
      .err = E_INLINE_BIG,
      .max_inline = 8 },
    { .name = "inline_too_long_with_newline",
      IN("123456789\n"),
      .err = E_INLINE_BIG,
      .max_inline = 8 },
    { .name = "inline_too_long_counting_cr",
      IN("12345678\r\n"),
      .err = E_INLINE_BIG,
      .max_inline = 8 },

    /* what came before an error is still delivered */
    { .name = "commands_before_error_are_returned",
      IN("PING\r\n*1\r\n$4\r\nPING\r\n*1\r\n:1\r\n"),
      WANT("*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nPING\r\n"),
      .err = "Protocol error: expected '$', got ':'" },
};

#define NCASES (sizeof(CASES) / sizeof(CASES[0]))

/* What a run produced. */
struct result {
    struct buf got;  /* canonical encoding of every command */
    struct buf raws; /* raw bytes of every command */
    int rc;          /* last status of resp_reader_next */
    char err[160];   /* error text if rc is RESP_EPROTO */
    size_t pending;  /* resp_reader_pending at the end */
};

static struct resp_reader *reader_for(const struct rcase *tc)
{
    struct resp_limits lim = {
        .max_bulk = tc->max_bulk ? tc->max_bulk : RESP_DEFAULT_MAX_BULK,
        .max_elements =
            tc->max_elements ? tc->max_elements : RESP_DEFAULT_MAX_ELEMENTS,
        .max_inline = tc->max_inline ? tc->max_inline : RESP_DEFAULT_MAX_INLINE,
    };
    struct resp_reader *rd = resp_reader_new(&lim);

    cr_assert_not_null(rd);
    return rd;
}

/* Checks the shape every command has, whatever its source: argv spans lie
 * inside raw, each is a bulk payload framed by CRLFs. */
static void check_cmd_shape(const struct resp_cmd *c)
{
    int i;

    cr_assert_geq(c->argc, 1);
    cr_assert_eq(c->raw[0], '*');
    for (i = 0; i < c->argc; i++) {
        size_t off = c->argv[i].off, len = c->argv[i].len;

        cr_assert_geq(off, 2);
        cr_assert_leq(off + len + 2, c->raw_len);
        cr_assert(memcmp(c->raw + off - 2, "\r\n", 2) == 0);
    }
}

/* Appends the canonical RESP encoding of `c`'s arguments to `b`. */
static void encode_args(struct buf *b, const struct resp_cmd *c)
{
    size_t len;
    const char *p;
    int i;

    cr_assert_eq(resp_enc_array_header(b, c->argc), BUF_OK);
    for (i = 0; i < c->argc; i++) {
        p = resp_cmd_arg(c, i, &len);
        cr_assert_eq(resp_enc_bulk(b, p, len), BUF_OK);
    }
}

/* Pulls every available command into `r`. */
static void drain(struct resp_reader *rd, struct result *r)
{
    struct resp_cmd *c = NULL;
    int rc;

    while ((rc = resp_reader_next(rd, &c)) == RESP_OK) {
        cr_assert_not_null(c);
        check_cmd_shape(c);
        encode_args(&r->got, c);
        cr_assert_eq(buf_append(&r->raws, c->raw, c->raw_len), BUF_OK);
        resp_cmd_free(c);
        c = NULL;
    }
    cr_assert_null(c);
    cr_assert(rc == RESP_AGAIN || rc == RESP_EPROTO, "unexpected rc %d", rc);
    r->rc = rc;
}

/* Feeds the first `first` bytes, then the rest `step` bytes at a time,
 * draining after every feed. */
static void run(const struct rcase *tc, size_t first, size_t step,
                struct result *r)
{
    struct resp_reader *rd = reader_for(tc);
    size_t pos = first < tc->in_len ? first : tc->in_len;

    buf_init(&r->got);
    buf_init(&r->raws);
    cr_assert_eq(resp_reader_feed(rd, tc->in, pos), RESP_OK);
    drain(rd, r);
    while (pos < tc->in_len) {
        size_t n = tc->in_len - pos < step ? tc->in_len - pos : step;

        cr_assert_eq(resp_reader_feed(rd, tc->in + pos, n), RESP_OK);
        pos += n;
        drain(rd, r);
    }
    snprintf(r->err, sizeof(r->err), "%s", resp_reader_error(rd));
    r->pending = resp_reader_pending(rd);
    if (r->rc == RESP_EPROTO) {
        struct resp_cmd *c = NULL;

        /* Sticky: more input is dropped and the same reason stays. */
        cr_assert_eq(resp_reader_feed(rd, B("PING\r\n")), RESP_OK);
        cr_assert_eq(resp_reader_next(rd, &c), RESP_EPROTO);
        cr_assert_null(c);
        cr_assert_str_eq(resp_reader_error(rd), r->err);
        cr_assert_eq(resp_reader_pending(rd), 0);
    }
    resp_reader_free(rd);
}

static void check(const struct rcase *tc, struct result *r, const char *how)
{
    cr_assert_eq(r->got.len, tc->want_len, "%s (%s): got %zu bytes of %zu",
                 tc->name, how, r->got.len, tc->want_len);
    cr_assert(tc->want_len == 0 ||
                  memcmp(r->got.data, tc->want, tc->want_len) == 0,
              "%s (%s): commands differ", tc->name, how);
    if (tc->err != NULL) {
        cr_assert_eq(r->rc, RESP_EPROTO, "%s (%s): no error", tc->name, how);
        cr_assert_str_eq(r->err, tc->err, "%s (%s)", tc->name, how);
    } else {
        cr_assert_eq(r->rc, RESP_AGAIN, "%s (%s): rc %d (%s)", tc->name, how,
                     r->rc, r->err);
        cr_assert_eq(r->pending, 0, "%s (%s)", tc->name, how);
    }
    if (tc->raw_is_input) {
        cr_assert_eq(r->raws.len, tc->in_len, "%s (%s)", tc->name, how);
        cr_assert(memcmp(r->raws.data, tc->in, tc->in_len) == 0,
                  "%s (%s): raw differs from input", tc->name, how);
    }
    buf_free(&r->got);
    buf_free(&r->raws);
}

static struct criterion_test_params case_ids(void)
{
    static size_t ids[NCASES];

    return px_param_ids(ids, NCASES);
}

ParameterizedTestParameters(resp_reader, case_fed_whole)
{
    return case_ids();
}

ParameterizedTest(size_t *id, resp_reader, case_fed_whole)
{
    const struct rcase *tc = &CASES[*id];
    struct result r;

    run(tc, tc->in_len, tc->in_len, &r);
    check(tc, &r, "whole");
}

ParameterizedTestParameters(resp_reader, case_fed_one_byte_at_a_time)
{
    return case_ids();
}

ParameterizedTest(size_t *id, resp_reader, case_fed_one_byte_at_a_time)
{
    const struct rcase *tc = &CASES[*id];
    struct result r;

    run(tc, 0, 1, &r);
    check(tc, &r, "byte at a time");
}

ParameterizedTestParameters(resp_reader, case_split_at_every_position)
{
    return case_ids();
}

ParameterizedTest(size_t *id, resp_reader, case_split_at_every_position)
{
    const struct rcase *tc = &CASES[*id];
    char how[64];
    struct result r;
    size_t k;

    for (k = 0; k <= tc->in_len; k++) {
        snprintf(how, sizeof(how), "split at %zu", k);
        run(tc, k, tc->in_len, &r);
        check(tc, &r, how);
    }
}

/* ---------------- Individual behaviours ---------------- */

Test(resp_reader, rejects_4gb_bulk_as_soon_as_its_header_line_is_complete)
{
    static const char in[] = "*1\r\n$4000000000\r\n";
    struct resp_reader *rd = resp_reader_new(NULL);
    struct resp_cmd *c = NULL;

    cr_assert_eq(resp_reader_feed(rd, in, 5), RESP_OK);
    cr_assert_eq(resp_reader_next(rd, &c), RESP_AGAIN);
    cr_assert_eq(resp_reader_feed(rd, in + 5, sizeof(in) - 1 - 5), RESP_OK);
    cr_assert_leq(resp_reader_pending(rd), sizeof(in) - 1);
    cr_assert_eq(resp_reader_next(rd, &c), RESP_EPROTO);
    cr_assert_str_eq(resp_reader_error(rd), E_BULK_LEN);
    cr_assert_eq(resp_reader_pending(rd), 0);
    resp_reader_free(rd);
}

Test(resp_reader, rejects_100m_elements_as_soon_as_the_count_line_is_complete)
{
    struct resp_reader *rd = resp_reader_new(NULL);
    struct resp_cmd *c = NULL;

    cr_assert_eq(resp_reader_feed(rd, B("*100000000\r\n")), RESP_OK);
    cr_assert_eq(resp_reader_pending(rd), 12);
    cr_assert_eq(resp_reader_next(rd, &c), RESP_EPROTO);
    cr_assert_str_eq(resp_reader_error(rd), E_MBULK_LEN);
    cr_assert_eq(resp_reader_pending(rd), 0);
    resp_reader_free(rd);
}

Test(resp_reader, default_limits_are_redis_defaults)
{
    static const struct {
        const char *in;
        int rc;
    } cases[] = {
        { "*1\r\n$536870912\r\n", RESP_AGAIN },  /* 512 MiB: allowed */
        { "*1\r\n$536870913\r\n", RESP_EPROTO }, /* one more: refused */
        { "*1048576\r\n", RESP_AGAIN },
        { "*1048577\r\n", RESP_EPROTO },
    };
    size_t i;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct resp_reader *rd = resp_reader_new(NULL);
        struct resp_cmd *c = NULL;

        cr_assert_eq(resp_reader_feed(rd, cases[i].in, strlen(cases[i].in)),
                     RESP_OK);
        cr_assert_eq(resp_reader_next(rd, &c), cases[i].rc, "%s", cases[i].in);
        resp_reader_free(rd);
    }
}

Test(resp_reader, default_inline_limit_is_64k)
{
    struct resp_reader *rd = resp_reader_new(NULL);
    struct resp_cmd *c = NULL;
    char *line = malloc(RESP_DEFAULT_MAX_INLINE + 1);

    cr_assert_not_null(line);
    memset(line, 'a', RESP_DEFAULT_MAX_INLINE + 1);
    cr_assert_eq(resp_reader_feed(rd, line, RESP_DEFAULT_MAX_INLINE), RESP_OK);
    cr_assert_eq(resp_reader_next(rd, &c), RESP_AGAIN);
    cr_assert_eq(resp_reader_feed(rd, line, 1), RESP_OK);
    cr_assert_eq(resp_reader_next(rd, &c), RESP_EPROTO);
    cr_assert_str_eq(resp_reader_error(rd), E_INLINE_BIG);
    free(line);
    resp_reader_free(rd);
}

Test(resp_reader, raw_is_each_requests_exact_bytes)
{
    static const char *const reqs[] = {
        "*1\r\n$4\r\nPING\r\n",
        "*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n",
        "*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$4\r\na\r\nb\r\n",
    };
    struct resp_reader *rd = resp_reader_new(NULL);
    struct resp_cmd *c = NULL;
    size_t i;

    for (i = 0; i < 3; i++) {
        cr_assert_eq(resp_reader_feed(rd, reqs[i], strlen(reqs[i])), RESP_OK);
    }
    for (i = 0; i < 3; i++) {
        cr_assert_eq(resp_reader_next(rd, &c), RESP_OK);
        cr_assert_eq(c->raw_len, strlen(reqs[i]));
        cr_assert(memcmp(c->raw, reqs[i], c->raw_len) == 0);
        resp_cmd_free(c);
    }
    cr_assert_eq(resp_reader_next(rd, &c), RESP_AGAIN);
    resp_reader_free(rd);
}

Test(resp_reader, pending_counts_bytes_not_yet_returned)
{
    struct resp_reader *rd = resp_reader_new(NULL);
    struct resp_cmd *c = NULL;

    cr_assert_eq(resp_reader_pending(rd), 0);
    cr_assert_eq(resp_reader_feed(rd, B("*1\r\n$4\r\nPI")), RESP_OK);
    cr_assert_eq(resp_reader_next(rd, &c), RESP_AGAIN);
    cr_assert_eq(resp_reader_pending(rd), 10);
    cr_assert_eq(resp_reader_feed(rd, B("NG\r\nPING")), RESP_OK);
    cr_assert_eq(resp_reader_next(rd, &c), RESP_OK);
    resp_cmd_free(c);
    cr_assert_eq(resp_reader_pending(rd), 4);
    cr_assert_eq(resp_reader_next(rd, &c), RESP_AGAIN);
    cr_assert_eq(resp_reader_pending(rd), 4);
    resp_reader_free(rd);
}

Test(resp_reader, error_text_is_empty_before_any_error)
{
    struct resp_reader *rd = resp_reader_new(NULL);

    cr_assert_str_eq(resp_reader_error(rd), "");
    resp_reader_free(rd);
    resp_reader_free(NULL);
}

/* 300 pipelined SETs: far more than the 1 KiB after which hiredis trims its
 * buffer, so argument offsets must survive the trim. */
static void check_many_sets(size_t step)
{
    struct resp_reader *rd = resp_reader_new(NULL);
    struct resp_cmd *c = NULL;
    struct buf in;
    char tmp[96];
    size_t pos = 0, len;
    const char *p;
    int i, n = 0;

    buf_init(&in);
    for (i = 0; i < 300; i++) {
        snprintf(tmp, sizeof(tmp),
                 "*3\r\n$3\r\nSET\r\n$6\r\nkey%03d\r\n$10\r\nval%07d\r\n", i,
                 i);
        cr_assert_eq(buf_append_str(&in, tmp), BUF_OK);
    }
    while (pos < in.len) {
        size_t k = in.len - pos < step ? in.len - pos : step;

        cr_assert_eq(resp_reader_feed(rd, in.data + pos, k), RESP_OK);
        pos += k;
        while (resp_reader_next(rd, &c) == RESP_OK) {
            cr_assert_eq(c->argc, 3);
            p = resp_cmd_arg(c, 1, &len);
            snprintf(tmp, sizeof(tmp), "key%03d", n);
            cr_assert_eq(len, 6);
            cr_assert(memcmp(p, tmp, 6) == 0, "cmd %d key", n);
            p = resp_cmd_arg(c, 2, &len);
            snprintf(tmp, sizeof(tmp), "val%07d", n);
            cr_assert_eq(len, 10);
            cr_assert(memcmp(p, tmp, 10) == 0, "cmd %d value", n);
            resp_cmd_free(c);
            n++;
        }
    }
    cr_assert_eq(n, 300);
    cr_assert_eq(resp_reader_pending(rd), 0);
    buf_free(&in);
    resp_reader_free(rd);
}

Test(resp_reader, args_survive_hiredis_buffer_trim_when_pipelined)
{
    check_many_sets(SIZE_MAX);
    check_many_sets(7);
    check_many_sets(1);
}

Test(resp_reader, one_mb_argument_fed_in_4k_chunks)
{
    static const char head[] = "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1048576\r\n";
    static const char tail[] = "\r\n*1\r\n$4\r\nPING\r\n";
    const size_t big = 1048576;
    struct resp_reader *rd = resp_reader_new(NULL);
    struct resp_cmd *c = NULL;
    size_t total, pos = 0, i, len;
    const char *p;
    char *in;

    total = sizeof(head) - 1 + big + sizeof(tail) - 1;
    in = malloc(total);
    cr_assert_not_null(in);
    memcpy(in, head, sizeof(head) - 1);
    for (i = 0; i < big; i++) {
        in[sizeof(head) - 1 + i] = (char)(i * 7 + i / 251);
    }
    memcpy(in + sizeof(head) - 1 + big, tail, sizeof(tail) - 1);

    while (pos < total) {
        size_t k = total - pos < 4096 ? total - pos : 4096;

        cr_assert_eq(resp_reader_feed(rd, in + pos, k), RESP_OK);
        pos += k;
        if (pos < sizeof(head) - 1 + big + 2) {
            cr_assert_eq(resp_reader_next(rd, &c), RESP_AGAIN, "at %zu", pos);
        }
    }
    cr_assert_eq(resp_reader_next(rd, &c), RESP_OK);
    cr_assert_eq(c->argc, 3);
    p = resp_cmd_arg(c, 2, &len);
    cr_assert_eq(len, big);
    cr_assert(memcmp(p, in + sizeof(head) - 1, big) == 0);
    cr_assert_eq(c->raw_len, total - (sizeof(tail) - 1 - 2));
    cr_assert(memcmp(c->raw, in, c->raw_len) == 0);
    resp_cmd_free(c);

    cr_assert_eq(resp_reader_next(rd, &c), RESP_OK);
    cr_assert_eq(c->argc, 1);
    p = resp_cmd_arg(c, 0, &len);
    cr_assert_eq(len, 4);
    cr_assert(memcmp(p, "PING", 4) == 0);
    resp_cmd_free(c);
    cr_assert_eq(resp_reader_next(rd, &c), RESP_AGAIN);
    cr_assert_eq(resp_reader_pending(rd), 0);
    free(in);
    resp_reader_free(rd);
}

/* A frame over 256 KiB read from the start of the buffer becomes the
 * command's raw as it is (held once, not copied); what follows it stays
 * pending and parses; a small frame is copied into the command. */
Test(resp_reader, a_large_frame_is_taken_not_copied)
{
    static const char head[] = "*2\r\n$4\r\nECHO\r\n$1048576\r\n";
    static const char tail[] = "\r\n*1\r\n$4\r\nPING\r\n";
    const size_t big = 1048576, hl = sizeof(head) - 1, tl = sizeof(tail) - 1;
    struct resp_reader *rd = resp_reader_new(NULL);
    struct resp_cmd *c = NULL;
    char *in = malloc(hl + big + tl);
    const char *p;
    size_t len;

    cr_assert_not_null(in);
    memcpy(in, head, hl);
    memset(in + hl, 'v', big);
    memcpy(in + hl + big, tail, tl);
    cr_assert_eq(resp_reader_feed(rd, in, hl + big + tl), RESP_OK);
    cr_assert_eq(resp_reader_next(rd, &c), RESP_OK);
    cr_assert_neq(c->raw, (char *)(c->argv + c->argc), "the frame was copied");
    cr_assert_eq(c->raw_len, hl + big + 2);
    cr_assert(memcmp(c->raw, in, c->raw_len) == 0);
    p = resp_cmd_arg(c, 1, &len);
    cr_assert(len == big && p[0] == 'v' && p[big - 1] == 'v');
    cr_assert_eq(resp_reader_pending(rd), tl - 2);
    resp_cmd_free(c);
    cr_assert_eq(resp_reader_next(rd, &c), RESP_OK);
    cr_assert_eq(c->raw, (char *)(c->argv + c->argc), "a small frame taken");
    cr_assert(c->argc == 1 && c->raw_len == tl - 2);
    resp_cmd_free(c);
    cr_assert_eq(resp_reader_next(rd, &c), RESP_AGAIN);
    free(in);
    resp_reader_free(rd);
}

Test(resp_reader, large_bulk_in_tiny_chunks_keeps_only_its_bytes_pending)
{
    static const char head[] = "*1\r\n$100000\r\n";
    struct resp_reader *rd = resp_reader_new(NULL);
    struct resp_cmd *c = NULL;
    char chunk[3] = { 'x', 'y', 'z' };
    size_t fed = sizeof(head) - 1;
    size_t len;

    cr_assert_eq(resp_reader_feed(rd, head, fed), RESP_OK);
    while (fed + sizeof(chunk) <= sizeof(head) - 1 + 100000) {
        cr_assert_eq(resp_reader_feed(rd, chunk, sizeof(chunk)), RESP_OK);
        fed += sizeof(chunk);
        cr_assert_eq(resp_reader_next(rd, &c), RESP_AGAIN);
        cr_assert_eq(resp_reader_pending(rd), fed);
    }
    cr_assert_eq(resp_reader_feed(rd, "x\r\n", 3), RESP_OK);
    cr_assert_eq(resp_reader_next(rd, &c), RESP_OK);
    (void)resp_cmd_arg(c, 0, &len);
    cr_assert_eq(len, 100000);
    resp_cmd_free(c);
    resp_reader_free(rd);
}

Test(resp_reader, cmd_new_encodes_args_as_resp)
{
    static const char *const argv[] = { "SET", "key", "", "a\0b" };
    static const size_t lens[] = { 3, 3, 0, 3 };
    static const char want[] =
        "*4\r\n$3\r\nSET\r\n$3\r\nkey\r\n$0\r\n\r\n$3\r\na\0b\r\n";
    struct resp_cmd *c = resp_cmd_new(4, argv, lens);
    size_t len;
    const char *p;
    int i;

    cr_assert_not_null(c);
    cr_assert_eq(c->argc, 4);
    cr_assert_eq(c->raw_len, sizeof(want) - 1);
    cr_assert(memcmp(c->raw, want, c->raw_len) == 0);
    for (i = 0; i < 4; i++) {
        p = resp_cmd_arg(c, i, &len);
        cr_assert_eq(len, lens[i]);
        cr_assert(memcmp(p, argv[i], len) == 0);
    }
    resp_cmd_free(c);
    resp_cmd_free(NULL);
}

Test(resp_reader, cmd_new_writes_multi_digit_lengths)
{
    static const char *const argv[] = { "ECHO", "0123456789ab" };
    static const size_t lens[] = { 4, 12 };
    static const char want[] = "*2\r\n$4\r\nECHO\r\n$12\r\n0123456789ab\r\n";
    struct resp_cmd *c = resp_cmd_new(2, argv, lens);

    cr_assert_not_null(c);
    cr_assert_eq(c->raw_len, sizeof(want) - 1);
    cr_assert(memcmp(c->raw, want, c->raw_len) == 0);
    resp_cmd_free(c);
}

Test(resp_reader, cmd_new_refuses_zero_args)
{
    cr_assert_null(resp_cmd_new(0, NULL, NULL));
}
