/* hidden_filter: which replies and commands would show an ordinary client
 * the limiter's key names, and the exact bytes it gets instead. */
#include "tests/support/px_test.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "parser/buf.h"
#include "parser/resp.h"
#include "parser/resp_enc.h"
#include "parser/resp_value.h"
#include "proxy/hidden_filter.h"
#include "proxy/merge_build.h"

PX_TEST_SUITE(hidden_filter);

#define PREFIX "cellgate:"

/* A command of the NULL-ended words. */
static struct resp_cmd *cmd_of(const char *first, ...)
{
    const char *argv[16];
    size_t lens[16];
    int argc = 0;
    va_list ap;
    struct resp_cmd *cmd;

    va_start(ap, first);
    for (const char *w = first; w != NULL && argc < 16;
         w = va_arg(ap, const char *)) {
        argv[argc] = w;
        lens[argc] = strlen(w);
        argc++;
    }
    va_end(ap);
    cmd = resp_cmd_new(argc, argv, lens);
    cr_assert_not_null(cmd);
    return cmd;
}

/* The refusal of `cmd` (freed), outside MULTI or in it. */
static enum hidden_refusal refusal(struct resp_cmd *cmd, int in_multi)
{
    enum hidden_refusal r = hidden_filter_refusal(cmd, in_multi);

    resp_cmd_free(cmd);
    return r;
}

/* Filters `reply` as a `kind` command's and checks the exact bytes. */
static void filtered_is(enum hidden_kind kind, const char *reply,
                        const char *want)
{
    struct buf out;

    buf_init(&out);
    hidden_filter_reply(kind, reply, strlen(reply), PREFIX, &out);
    cr_assert(out.len == strlen(want) && memcmp(out.data, want, out.len) == 0,
              "got '%.*s', want '%s'", (int)out.len, out.data, want);
    buf_free(&out);
}

Test(hidden_filter, a_key_is_hidden_only_under_the_whole_prefix)
{
    cr_assert(
        hidden_filter_key("cellgate:{login:10.1.2.3}#0:gcra", 32, PREFIX));
    cr_assert(hidden_filter_key("cellgate:", 9, PREFIX));
    cr_assert_not(hidden_filter_key("cellgate", 8, PREFIX));
    cr_assert_not(hidden_filter_key("cellgatex:a", 11, PREFIX));
    cr_assert_not(hidden_filter_key("user:cellgate:a", 15, PREFIX));
    cr_assert_not(hidden_filter_key("Cellgate:a", 10, PREFIX));
    cr_assert_not(hidden_filter_key(NULL, 0, PREFIX));
    cr_assert_not(hidden_filter_key("cellgate:a", 10, NULL));
}

Test(hidden_filter, the_commands_that_name_keys_are_known_in_any_case)
{
    struct resp_cmd *c;

    c = cmd_of("KeYs", "*", NULL);
    cr_assert_eq(hidden_filter_kind(c), HIDDEN_KEYS);
    resp_cmd_free(c);
    c = cmd_of("scan", "0", "MATCH", "x*", "TYPE", "string", NULL);
    cr_assert_eq(hidden_filter_kind(c), HIDDEN_SCAN);
    resp_cmd_free(c);
    c = cmd_of("RANDOMKEY", NULL);
    cr_assert_eq(hidden_filter_kind(c), HIDDEN_RANDOMKEY);
    resp_cmd_free(c);
    c = cmd_of("cluster", "GetKeysInSlot", "12", "10", NULL);
    cr_assert_eq(hidden_filter_kind(c), HIDDEN_KEYS);
    resp_cmd_free(c);
    c = cmd_of("client", "TRACKING", "on", "bcast", NULL);
    cr_assert_eq(hidden_filter_kind(c), HIDDEN_NONE);
    resp_cmd_free(c);
    c = cmd_of("cluster", "countkeysinslot", "12", NULL);
    cr_assert_eq(hidden_filter_kind(c), HIDDEN_NONE);
    resp_cmd_free(c);
    c = cmd_of("get", "keys", NULL);
    cr_assert_eq(hidden_filter_kind(c), HIDDEN_NONE);
    resp_cmd_free(c);
}

Test(hidden_filter, keys_loses_exactly_the_limiter_keys_in_either_protocol)
{
    filtered_is(HIDDEN_KEYS,
                "*4\r\n$4\r\nuser\r\n$22\r\ncellgate:login:1.2.3.4\r\n"
                "$10\r\ncellgatex:\r\n$9\r\ncellgate:\r\n",
                "*2\r\n$4\r\nuser\r\n$10\r\ncellgatex:\r\n");
    filtered_is(HIDDEN_KEYS, "*1\r\n$10\r\ncellgate:a\r\n", "*0\r\n");
    filtered_is(HIDDEN_KEYS, "*0\r\n", "*0\r\n");
    /* A RESP3 set keeps its type. */
    filtered_is(HIDDEN_KEYS, "~2\r\n$1\r\na\r\n$10\r\ncellgate:a\r\n",
                "~1\r\n$1\r\na\r\n");
}

Test(hidden_filter, scan_keeps_its_cursor_and_loses_the_limiter_keys)
{
    filtered_is(HIDDEN_SCAN,
                "*2\r\n$3\r\n176\r\n*3\r\n$10\r\ncellgate:a\r\n$1\r\nb\r\n"
                "$10\r\ncellgate:c\r\n",
                "*2\r\n$3\r\n176\r\n*1\r\n$1\r\nb\r\n");
    /* A page of limiter keys only is an empty page, not the end. */
    filtered_is(HIDDEN_SCAN, "*2\r\n$2\r\n12\r\n*1\r\n$10\r\ncellgate:a\r\n",
                "*2\r\n$2\r\n12\r\n*0\r\n");
    filtered_is(HIDDEN_SCAN, "*2\r\n$1\r\n0\r\n*1\r\n$1\r\nz\r\n",
                "*2\r\n$1\r\n0\r\n*1\r\n$1\r\nz\r\n");
}

Test(hidden_filter, errors_and_other_shapes_pass_as_they_are)
{
    filtered_is(HIDDEN_SCAN, "-ERR invalid cursor\r\n",
                "-ERR invalid cursor\r\n");
    filtered_is(HIDDEN_KEYS, "-NOPERM no\r\n", "-NOPERM no\r\n");
    filtered_is(HIDDEN_SCAN, "*1\r\n$10\r\ncellgate:a\r\n",
                "*1\r\n$10\r\ncellgate:a\r\n");
    filtered_is(HIDDEN_KEYS, "*-1\r\n", "*-1\r\n");
}

Test(hidden_filter, randomkey_draws_again_only_on_a_limiter_key)
{
    static const char limiter[] = "$10\r\ncellgate:a\r\n";
    static const char user[] = "$4\r\nuser\r\n";

    cr_assert(hidden_filter_drawn(limiter, strlen(limiter), PREFIX));
    cr_assert_not(hidden_filter_drawn(user, strlen(user), PREFIX));
    cr_assert_not(hidden_filter_drawn("$-1\r\n", 5, PREFIX));
    cr_assert_not(hidden_filter_drawn("_\r\n", 3, PREFIX));
    cr_assert_not(hidden_filter_drawn("-ERR x\r\n", 8, PREFIX));
}

Test(hidden_filter, keys_scan_and_randomkey_are_refused_inside_multi_only)
{
    cr_assert_eq(refusal(cmd_of("keys", "*", NULL), 1), HIDDEN_IN_MULTI);
    cr_assert_eq(refusal(cmd_of("SCAN", "0", NULL), 1), HIDDEN_IN_MULTI);
    cr_assert_eq(refusal(cmd_of("randomkey", NULL), 1), HIDDEN_IN_MULTI);
    cr_assert_eq(refusal(cmd_of("keys", "*", NULL), 0), HIDDEN_ALLOWED);
    cr_assert_eq(refusal(cmd_of("scan", "0", NULL), 0), HIDDEN_ALLOWED);
    cr_assert_eq(refusal(cmd_of("get", "a", NULL), 1), HIDDEN_ALLOWED);
}

/* Filters the invalidation `frame` and checks what the client gets:
 * `want` ("" for nothing), or the frame itself when want is NULL. */
static void invalidation_is(const char *frame, const char *want,
                            enum hidden_push how)
{
    struct buf out;
    enum hidden_push r;

    buf_init(&out);
    r = hidden_filter_invalidation(frame, strlen(frame), PREFIX, &out);
    cr_assert_eq(r, how, "'%s': %d, want %d", frame, r, how);
    if (how == HIDDEN_PUSH_TRIMMED) {
        cr_assert(out.len == strlen(want) &&
                      memcmp(out.data, want, out.len) == 0,
                  "got '%.*s', want '%s'", (int)out.len, out.data, want);
    } else {
        cr_assert_eq(out.len, 0, "'%s' appended %zu bytes", frame, out.len);
    }
    buf_free(&out);
}

#define PUSH2 ">2\r\n$10\r\ninvalidate\r\n"
#define MSG2  "*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n"
#define MSG3  ">3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n"

Test(hidden_filter, invalidations_lose_the_limiter_keys_in_every_shape)
{
    static const char *const heads[] = { PUSH2, MSG2, MSG3 };
    char in[256], want[256];
    size_t i;

    for (i = 0; i < sizeof(heads) / sizeof(heads[0]); i++) {
        snprintf(in, sizeof(in),
                 "%s*3\r\n$10\r\ncellgate:x\r\n$1\r\na\r\n$12\r\ncellgate:{y}"
                 "\r\n",
                 heads[i]);
        snprintf(want, sizeof(want), "%s*1\r\n$1\r\na\r\n", heads[i]);
        invalidation_is(in, want, HIDDEN_PUSH_TRIMMED);
        snprintf(in, sizeof(in),
                 "%s*2\r\n$10\r\ncellgate:x\r\n$9\r\ncellgate:"
                 "\r\n",
                 heads[i]);
        invalidation_is(in, NULL, HIDDEN_PUSH_DROPPED);
        /* None of the limiter's, a flush (null), an empty list. */
        snprintf(in, sizeof(in), "%s*2\r\n$1\r\na\r\n$8\r\ncellgate\r\n",
                 heads[i]);
        invalidation_is(in, NULL, HIDDEN_PUSH_AS_IS);
        snprintf(in, sizeof(in), "%s*-1\r\n", heads[i]);
        invalidation_is(in, NULL, HIDDEN_PUSH_AS_IS);
        snprintf(in, sizeof(in), "%s_\r\n", heads[i]);
        invalidation_is(in, NULL, HIDDEN_PUSH_AS_IS);
        snprintf(in, sizeof(in), "%s*0\r\n", heads[i]);
        invalidation_is(in, NULL, HIDDEN_PUSH_AS_IS);
        /* Cut short, or more behind it: not one frame, left alone. */
        snprintf(in, sizeof(in), "%s*1\r\n$10\r\ncellgate:x\r\n", heads[i]);
        in[strlen(in) - 3] = '\0';
        invalidation_is(in, NULL, HIDDEN_PUSH_AS_IS);
        snprintf(in, sizeof(in), "%s*1\r\n$10\r\ncellgate:x\r\n+OK\r\n",
                 heads[i]);
        invalidation_is(in, NULL, HIDDEN_PUSH_AS_IS);
    }
    /* Other pushes and messages, whatever they carry. */
    invalidation_is(">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$10\r\ncellgate:x\r\n",
                    NULL, HIDDEN_PUSH_AS_IS);
    invalidation_is("*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidatx\r\n*1"
                    "\r\n$10\r\ncellgate:x\r\n",
                    NULL, HIDDEN_PUSH_AS_IS);
    invalidation_is(">2\r\n$21\r\ntracking-redir-broken\r\n:12\r\n", NULL,
                    HIDDEN_PUSH_AS_IS);
    invalidation_is("$10\r\ncellgate:x\r\n", NULL, HIDDEN_PUSH_AS_IS);
}

Test(hidden_filter, tracking_is_never_refused)
{
    /* BCAST with no PREFIX, or with one overlapping key_prefix: Redis's
     * broadcasts of the limiter's keys are filtered instead. */
    cr_assert_eq(refusal(cmd_of("client", "tracking", "on", "bcast", NULL), 0),
                 HIDDEN_ALLOWED);
    cr_assert_eq(
        refusal(cmd_of("client", "tracking", "on", "bcast", "prefix", "", NULL),
                1),
        HIDDEN_ALLOWED);
}

/* A merge of `kind` whose parts replied the NULL-ended texts. */
static struct merge *merge_of(enum merge_kind kind, const char *hide, ...)
{
    const char *p[8];
    unsigned n = 0;
    struct merge *mg;
    va_list ap;

    va_start(ap, hide);
    while (n < 8 && (p[n] = va_arg(ap, const char *)) != NULL) {
        n++;
    }
    va_end(ap);
    mg = merge_new(kind, n);
    mg->hide_prefix = hide;
    for (unsigned i = 0; i < n; i++) {
        cr_assert_eq(buf_append(&mg->parts[i], p[i], strlen(p[i])), BUF_OK);
    }
    return mg;
}

static void merged_is(struct merge *mg, const char *want)
{
    struct buf out;

    buf_init(&out);
    merge_build(mg, &out, RESP_PROTO2);
    cr_assert(out.len == strlen(want) && memcmp(out.data, want, out.len) == 0,
              "got '%.*s', want '%s'", (int)out.len, out.data, want);
    buf_free(&out);
    merge_free(mg);
}

Test(hidden_filter,
     a_clusters_keys_and_scan_lose_the_limiter_keys_of_every_node)
{
    merged_is(
        merge_of(MERGE_CONCAT, PREFIX, "*2\r\n$1\r\na\r\n$10\r\ncellgate:x\r\n",
                 "*1\r\n$10\r\ncellgate:y\r\n", "*1\r\n$1\r\nb\r\n", NULL),
        "*2\r\n$1\r\na\r\n$1\r\nb\r\n");
    /* An admin's (no prefix) are all there. */
    merged_is(merge_of(MERGE_CONCAT, NULL, "*1\r\n$10\r\ncellgate:x\r\n",
                       "*1\r\n$1\r\nb\r\n", NULL),
              "*2\r\n$10\r\ncellgate:x\r\n$1\r\nb\r\n");
    {
        struct merge *mg = merge_of(
            MERGE_SCAN, PREFIX,
            "*2\r\n$1\r\n0\r\n*2\r\n$10\r\ncellgate:x\r\n$1\r\nc\r\n", NULL);
        mg->scan_node = 0;
        mg->nmasters = 2;
        merged_is(mg, "*2\r\n$1\r\n1\r\n*1\r\n$1\r\nc\r\n");
    }
}
