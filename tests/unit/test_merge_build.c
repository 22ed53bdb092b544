/* merge_build: every kind of merge, on parts' replies as nodes send them,
 * with the exact bytes the client must get. */
#include "tests/support/px_test.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "parser/buf.h"
#include "parser/resp.h"
#include "parser/resp_enc.h"
#include "proxy/core/util.h"
#include "proxy/merge_build.h"

PX_TEST_SUITE(merge_build);

/* A merge of `kind` whose part i replied parts[i] (NULL-ended). */
static struct merge *with_parts(enum merge_kind kind, ...)
{
    const char *p[16];
    unsigned n = 0;
    struct merge *mg;
    va_list ap;

    va_start(ap, kind);
    while (n < 16 && (p[n] = va_arg(ap, const char *)) != NULL) {
        n++;
    }
    va_end(ap);
    mg = merge_new(kind, n);
    for (unsigned i = 0; i < n; i++) {
        cr_assert_eq(buf_append(&mg->parts[i], p[i], strlen(p[i])), BUF_OK);
    }
    return mg;
}

/* Builds and checks the reply, then frees the merge. */
static void built_is(struct merge *mg, int proto, const char *want)
{
    struct buf out;

    buf_init(&out);
    merge_build(mg, &out, proto);
    cr_assert(out.len == strlen(want) && memcmp(out.data, want, out.len) == 0,
              "got '%.*s', want '%s'", (int)out.len, out.data, want);
    buf_free(&out);
    merge_free(mg);
}

Test(merge_build, sum_adds_the_counts_of_every_node)
{
    built_is(with_parts(MERGE_SUM, ":1\r\n", ":0\r\n", ":2\r\n", NULL),
             RESP_PROTO2, ":3\r\n");
}

Test(merge_build, the_first_error_among_the_parts_is_the_reply)
{
    built_is(with_parts(MERGE_SUM, ":1\r\n", "-MOVED 1 h:1\r\n",
                        "-ERR second\r\n", NULL),
             RESP_PROTO2, "-MOVED 1 h:1\r\n");
    /* A part of the wrong type is not passed on as if it were right. */
    built_is(with_parts(MERGE_SUM, ":1\r\n", "+OK\r\n", NULL), RESP_PROTO2,
             "-ERR cellgate got an unexpected reply from a node\r\n");
}

Test(merge_build, mget_values_come_back_in_key_order)
{
    /* Keys k0 k1 k2 k3; part 0 held k0 and k2, part 1 held k1 and k3. */
    struct merge *mg = with_parts(MERGE_BY_KEY, "*2\r\n$2\r\nv0\r\n$-1\r\n",
                                  "*2\r\n$2\r\nv1\r\n$2\r\nv3\r\n", NULL);
    static const unsigned part_of[4] = { 0, 1, 0, 1 };

    mg->nkeys = 4;
    mg->key_part = px_calloc(4, sizeof(*mg->key_part));
    memcpy(mg->key_part, part_of, sizeof(part_of));
    built_is(mg, RESP_PROTO2,
             "*4\r\n$2\r\nv0\r\n$2\r\nv1\r\n$-1\r\n$2\r\nv3\r\n");
}

Test(merge_build, mget_with_a_short_part_is_an_error_not_a_shifted_reply)
{
    struct merge *mg = with_parts(MERGE_BY_KEY, "*1\r\n$2\r\nv0\r\n",
                                  "*1\r\n$2\r\nv1\r\n", NULL);
    static const unsigned part_of[3] = { 0, 1, 0 };

    mg->nkeys = 3;
    mg->key_part = px_calloc(3, sizeof(*mg->key_part));
    memcpy(mg->key_part, part_of, sizeof(part_of));
    built_is(mg, RESP_PROTO2,
             "-ERR cellgate got an unexpected reply from a node\r\n");
}

Test(merge_build, all_ok_and_same_pass_the_first_answer)
{
    built_is(with_parts(MERGE_ALL_OK, "+OK\r\n", "+OK\r\n", NULL), RESP_PROTO2,
             "+OK\r\n");
    built_is(with_parts(MERGE_SAME, "$3\r\nabc\r\n", "$3\r\nabc\r\n", NULL),
             RESP_PROTO2, "$3\r\nabc\r\n");
}

Test(merge_build, keys_concatenates_the_arrays)
{
    built_is(with_parts(MERGE_CONCAT, "*1\r\n$1\r\na\r\n", "*0\r\n",
                        "*2\r\n$1\r\nb\r\n$1\r\nc\r\n", NULL),
             RESP_PROTO2, "*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n");
}

Test(merge_build, script_exists_is_one_only_where_every_node_has_it)
{
    built_is(with_parts(MERGE_AND, "*3\r\n:1\r\n:1\r\n:0\r\n",
                        "*3\r\n:1\r\n:0\r\n:0\r\n", NULL),
             RESP_PROTO2, "*3\r\n:1\r\n:0\r\n:0\r\n");
}

Test(merge_build, kill_is_ok_when_one_node_killed_something)
{
    built_is(with_parts(MERGE_ANY_OK, "-NOTBUSY No scripts in execution\r\n",
                        "+OK\r\n", NULL),
             RESP_PROTO2, "+OK\r\n");
    built_is(with_parts(MERGE_ANY_OK, "-NOTBUSY No scripts in execution\r\n",
                        "-NOTBUSY No scripts in execution\r\n", NULL),
             RESP_PROTO2, "-NOTBUSY No scripts in execution\r\n");
}

Test(merge_build, numsub_sums_each_channel_over_the_nodes)
{
    built_is(with_parts(MERGE_NUMSUB,
                        "*4\r\n$1\r\na\r\n:1\r\n$1\r\nb\r\n:0\r\n",
                        "*4\r\n$1\r\na\r\n:2\r\n$1\r\nb\r\n:5\r\n", NULL),
             RESP_PROTO2, "*4\r\n$1\r\na\r\n:3\r\n$1\r\nb\r\n:5\r\n");
}

Test(merge_build, scan_cursor_names_the_master_and_its_own_cursor)
{
    struct merge *mg =
        with_parts(MERGE_SCAN, "*2\r\n$2\r\n17\r\n*1\r\n$1\r\nk\r\n", NULL);

    mg->scan_node = 2;
    mg->nmasters = 3;
    /* 17 * MERGE_SCAN_NODES + 2 */
    built_is(mg, RESP_PROTO2, "*2\r\n$5\r\n17410\r\n*1\r\n$1\r\nk\r\n");

    /* A master walked to its end hands over to the next one... */
    mg = with_parts(MERGE_SCAN, "*2\r\n$1\r\n0\r\n*0\r\n", NULL);
    mg->scan_node = 1;
    mg->nmasters = 3;
    built_is(mg, RESP_PROTO2, "*2\r\n$1\r\n2\r\n*0\r\n");

    /* ...and the last one ends the walk. */
    mg = with_parts(MERGE_SCAN, "*2\r\n$1\r\n0\r\n*0\r\n", NULL);
    mg->scan_node = 2;
    mg->nmasters = 3;
    built_is(mg, RESP_PROTO2, "*2\r\n$1\r\n0\r\n*0\r\n");
}

Test(merge_build, info_puts_the_proxy_section_first_then_each_node)
{
    struct merge *mg =
        with_parts(MERGE_INFO, "$6\r\na:1\r\nb\r\n", "$3\r\nc:2\r\n", NULL);
    const char *text = "# Proxy\r\nx:1\r\n"
                       "\r\n# Node n1:1\r\na:1\r\nb"
                       "\r\n# Node n2:2\r\nc:2";
    char want[256];

    mg->names = px_calloc(2, sizeof(*mg->names));
    strcpy(mg->names[0], "n1:1");
    strcpy(mg->names[1], "n2:2");
    mg->info_proxy = 1;
    cr_assert_eq(buf_append_str(&mg->proxy_info, "# Proxy\r\nx:1\r\n"), BUF_OK);
    snprintf(want, sizeof(want), "$%zu\r\n%s\r\n", strlen(text), text);
    built_is(mg, RESP_PROTO2, want);
}

Test(merge_build, info_is_a_verbatim_string_for_resp3)
{
    struct merge *mg = with_parts(MERGE_INFO, "=7\r\ntxt:a:1\r\n", NULL);

    mg->names = px_calloc(1, sizeof(*mg->names));
    strcpy(mg->names[0], "n:1");
    built_is(mg, RESP_PROTO3, "=19\r\ntxt:# Node n:1\r\na:1\r\n");
}
