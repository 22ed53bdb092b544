/* Reply tree parser: shapes, spans, incomplete input at every split point,
 * and hostile counts. */
#include "tests/support/px_test.h"

#include <string.h>

#include "parser/resp.h"
#include "parser/resp_value.h"

PX_TEST_SUITE(resp_value);

#define B(s) s, sizeof(s) - 1

/* A CLUSTER SLOTS reply of Redis 7: one range, a master and a replica. */
static const char slots_reply[] =
    "*1\r\n*4\r\n:0\r\n:16383\r\n"
    "*3\r\n$9\r\n127.0.0.1\r\n:7000\r\n$40\r\n"
    "0123456789012345678901234567890123456789\r\n"
    "*3\r\n$9\r\n127.0.0.1\r\n:7001\r\n$40\r\n"
    "abcdefghijabcdefghijabcdefghijabcdefghij\r\n";

Test(resp_value, parses_nested_arrays_into_spans)
{
    struct resp_value v;
    size_t used = 0;

    cr_assert_eq(resp_value_parse(B(slots_reply), &v, &used), RESP_OK);
    cr_assert_eq(used, sizeof(slots_reply) - 1);
    cr_assert_eq(v.type, '*');
    cr_assert_eq(v.n, 1);
    cr_assert_eq(v.elem[0].n, 4);
    cr_assert_eq(v.elem[0].elem[0].integer, 0);
    cr_assert_eq(v.elem[0].elem[1].integer, 16383);
    const struct resp_value *m = &v.elem[0].elem[2];
    cr_assert_eq(m->n, 3);
    cr_assert_eq(m->elem[0].len, 9);
    cr_assert(memcmp(m->elem[0].str, "127.0.0.1", 9) == 0);
    cr_assert_eq(m->elem[1].integer, 7000);
    cr_assert_eq(v.elem[0].elem[3].elem[1].integer, 7001);
    /* raw spans cover exactly each value's wire form. */
    cr_assert_eq(m->elem[1].raw_len, 7);
    cr_assert(memcmp(m->elem[1].raw, ":7000\r\n", 7) == 0);
    resp_value_free(&v);
}

Test(resp_value, every_proper_prefix_is_incomplete)
{
    size_t n = sizeof(slots_reply) - 1, k, used;
    struct resp_value v;

    for (k = 0; k < n; k++) {
        int rc = resp_value_parse(slots_reply, k, &v, &used);
        cr_assert_eq(rc, RESP_AGAIN, "prefix of %zu bytes gave %d", k, rc);
    }
}

Test(resp_value, nulls_errors_and_resp3_scalars)
{
    struct resp_value v;
    size_t used;

    cr_assert_eq(resp_value_parse(B("$-1\r\n"), &v, &used), RESP_OK);
    cr_assert(v.null);
    cr_assert_eq(resp_value_parse(B("*-1\r\n"), &v, &used), RESP_OK);
    cr_assert(v.null);
    cr_assert_eq(resp_value_parse(B("_\r\n"), &v, &used), RESP_OK);
    cr_assert(v.null);
    cr_assert_eq(
        resp_value_parse(B("-MOVED 3999 127.0.0.1:6381\r\n"), &v, &used),
        RESP_OK);
    cr_assert_eq(v.type, '-');
    cr_assert_eq(v.len, strlen("MOVED 3999 127.0.0.1:6381"));
    cr_assert_eq(resp_value_parse(B("#t\r\n"), &v, &used), RESP_OK);
    cr_assert_eq(v.integer, 1);
    cr_assert_eq(resp_value_parse(B("%1\r\n+a\r\n:1\r\n"), &v, &used), RESP_OK);
    cr_assert_eq(v.n, 2);
    cr_assert_eq(v.elem[1].integer, 1);
    resp_value_free(&v);
}

Test(resp_value, binary_bulk_with_crlf_inside_is_one_string)
{
    struct resp_value v;
    size_t used;

    cr_assert_eq(resp_value_parse(B("$4\r\na\r\nb\r\n:1\r\n"), &v, &used),
                 RESP_OK);
    cr_assert_eq(used, 10);
    cr_assert_eq(v.len, 4);
    cr_assert(memcmp(v.str, "a\r\nb", 4) == 0);
}

Test(resp_value, refuses_garbage_and_bad_lengths)
{
    static const char *const bad[] = {
        "?\r\n",
        ":12a\r\n",
        "$-2\r\n",
        "$3\r\nabcd\r\n",
        "*x\r\n",
        "#x\r\n",
        ":99999999999999999999\r\n",
    };
    struct resp_value v;
    size_t used, k;

    for (k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        cr_assert_eq(resp_value_parse(bad[k], strlen(bad[k]), &v, &used),
                     RESP_EPROTO, "accepted %s", bad[k]);
    }
}

Test(resp_value, huge_declared_count_allocates_nothing_big)
{
    struct resp_value v;
    size_t used;

    /* The most elements the framer accepts, with 3 bytes behind them:
     * incomplete, and no array sized by the count was attempted (ASan
     * would fail it). One more is no reply at all, as for the framer. */
    cr_assert_eq(resp_value_parse(B("*4294967295\r\n:1\r\n"), &v, &used),
                 RESP_AGAIN);
    cr_assert_eq(resp_value_parse(B("%4294967295\r\n:1\r\n"), &v, &used),
                 RESP_AGAIN);
    cr_assert_eq(
        resp_value_parse(B("*1152921504606846976\r\n:1\r\n"), &v, &used),
        RESP_EPROTO);
    cr_assert_eq(resp_value_parse(B("*4294967296\r\n:1\r\n"), &v, &used),
                 RESP_EPROTO);
}

/* A line ends at its first CRLF (hiredis's reading, the framer's): a bare
 * LF or CR is part of the string. */
Test(resp_value, bare_lf_inside_a_line_is_content)
{
    struct resp_value v;
    size_t used;

    cr_assert_eq(resp_value_parse(B("+OK\n+x\r\n:1\r\n"), &v, &used), RESP_OK);
    cr_assert_eq(used, 8);
    cr_assert_eq(v.len, 5);
    cr_assert(memcmp(v.str, "OK\n+x", 5) == 0);
    cr_assert_eq(resp_value_parse(B("-ERR a\nb\r\n"), &v, &used), RESP_OK);
    cr_assert_eq(v.type, '-');
    cr_assert_eq(v.len, 7);
    cr_assert_eq(resp_value_parse(B("+a\rb\r\r\n"), &v, &used), RESP_OK);
    cr_assert_eq(used, 7);
    cr_assert_eq(v.len, 4);
    /* A line that has only a bare LF so far is not complete. */
    cr_assert_eq(resp_value_parse(B("+OK\n"), &v, &used), RESP_AGAIN);
    /* An integer whose line holds a bare LF is not an integer. */
    cr_assert_eq(resp_value_parse(B(":1\n2\r\n"), &v, &used), RESP_EPROTO);
    cr_assert_eq(resp_value_parse(B("*2\r\n+a\nb\r\n+c\r\n"), &v, &used),
                 RESP_OK);
    cr_assert_eq(used, 14);
    cr_assert_eq(v.n, 2);
    cr_assert_eq(v.elem[0].len, 3);
    resp_value_free(&v);
}

/* Lengths are read as the framer reads them. */
Test(resp_value, lengths_are_read_as_the_framer_reads_them)
{
    static const char *const bad[] = {
        "$+3\r\nabc\r\n",
        "*+1\r\n:1\r\n",
        "$-0\r\n\r\n",
        "$-01\r\n",
        "*-1 \r\n",
        "!-1\r\n",
        "=-1\r\n",
        "~-1\r\n",
        ">-1\r\n",
        "%-1\r\n",
        "$ 1\r\nx\r\n",
        "$1\r\naXY\r\n",
        "$1\r\na\n\r\n",
        "$9223372036854775806\r\n",
        "$00000000000000000001\r\nx\r\n",
    };
    struct resp_value v;
    size_t used, k;

    for (k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        cr_assert_eq(resp_value_parse(bad[k], strlen(bad[k]), &v, &used),
                     RESP_EPROTO, "accepted %s", bad[k]);
    }
    /* Leading zeros are digits to both. */
    cr_assert_eq(resp_value_parse(B("*01\r\n$0001\r\nx\r\n"), &v, &used),
                 RESP_OK);
    cr_assert_eq(used, 15);
    cr_assert_eq(v.elem[0].len, 1);
    resp_value_free(&v);
    cr_assert_eq(resp_value_parse(B("$9223372036854775805\r\n"), &v, &used),
                 RESP_AGAIN);
}

/* Each input parses to the length the framer gives its first frame, or is
 * refused by both. */
Test(resp_value, frames_every_value_as_the_framer_does)
{
    static const char *const in[] = {
        "+OK\n+x\r\n:1\r\n", "-E\n\r\n",
        "+\r\r\n",           ",1.5\n\r\n",
        "(12\r\n",           "_\n\r\n",
        "$2\r\n\r\n\r\n",    "$2\r\n\n\n\r\n",
        "*1\r\n+\n\n\r\n",   "%1\r\n+k\n\r\n+v\r\n",
        "$1\r\naXY\r\n",     "$-01\r\n",
        "!-1\r\n",           "~-1\r\n",
        "*-0\r\n",
    };
    size_t k;

    for (k = 0; k < sizeof(in) / sizeof(in[0]); k++) {
        struct resp_framer *fr = resp_framer_new();
        struct resp_value v;
        size_t used = 0, flen = 0, n = strlen(in[k]);
        int vrc, frc;

        cr_assert_not_null(fr);
        vrc = resp_value_parse(in[k], n, &v, &used);
        cr_assert_eq(resp_framer_feed(fr, in[k], n), RESP_OK);
        frc = resp_framer_next(fr, &flen);
        resp_framer_free(fr);
        cr_assert_eq(vrc, frc, "input %zu: value %d, framer %d", k, vrc, frc);
        if (vrc == RESP_OK) {
            cr_assert_eq(used, flen, "input %zu: value %zu, framer %zu", k,
                         used, flen);
            resp_value_free(&v);
        }
    }
}

Test(resp_value, depth_over_the_cap_is_refused)
{
    char deep[2000];
    size_t k, n = 0, used;
    struct resp_value v;

    for (k = 0; k < 200; k++) {
        memcpy(deep + n, "*1\r\n", 4);
        n += 4;
    }
    memcpy(deep + n, ":1\r\n", 4);
    n += 4;
    cr_assert_eq(resp_value_parse(deep, n, &v, &used), RESP_EPROTO);
}

Test(resp_value, is_compares_ascii_case_insensitively)
{
    struct resp_value v;
    size_t used;

    cr_assert_eq(resp_value_parse(B("$8\r\nMovAbleK\r\n"), &v, &used), RESP_OK);
    cr_assert(resp_value_is(&v, "movablek"));
    cr_assert(!resp_value_is(&v, "movable"));
}
