/* The limiter's key names kept from ordinary clients (see hidden_filter.h).
 *
 *   KEYS, CLUSTER GETKEYSINSLOT    *n of keys       -> *m, limiter keys out
 *   SCAN                           [cursor, *n]     -> same cursor, *m
 *   RANDOMKEY                      a limiter key    -> drawn again (hidden.c)
 *   inside MULTI                   refused: EXEC's reply mixes every
 *                                  queued command's, and a refusal is
 *                                  simpler to trust than a filter of it
 *   an invalidation (push or       its limiter keys left out; dropped
 *   message of a BCAST tracker)    when they were all it named
 *
 * A SCAN page may come back shorter, even empty, with a cursor that is
 * not 0: Redis's own SCAN may do that too (MATCH, TYPE), so clients
 * iterate to cursor 0 anyway. Keys are compared by their name only, so
 * the filter is the same for every MATCH, COUNT and TYPE. */
#include "proxy/hidden_filter.h"

#include <stdio.h>
#include <string.h>

#include "parser/resp.h"
#include "parser/resp_enc.h"
#include "parser/resp_value.h"
#include "proxy/core/util.h"

int hidden_filter_key(const char *key, size_t len, const char *prefix)
{
    size_t plen;

    if (key == NULL || prefix == NULL) {
        return 0;
    }
    plen = strlen(prefix);
    return len >= plen && memcmp(key, prefix, plen) == 0;
}

enum hidden_kind hidden_filter_kind(const struct resp_cmd *cmd)
{
    if (cmd->argc < 1) {
        return HIDDEN_NONE;
    }
    if (resp_cmd_arg_is(cmd, 0, "keys")) {
        return HIDDEN_KEYS;
    }
    if (resp_cmd_arg_is(cmd, 0, "scan")) {
        return HIDDEN_SCAN;
    }
    if (resp_cmd_arg_is(cmd, 0, "randomkey")) {
        return HIDDEN_RANDOMKEY;
    }
    if (resp_cmd_arg_is(cmd, 0, "cluster") &&
        resp_cmd_arg_is(cmd, 1, "getkeysinslot")) {
        return HIDDEN_KEYS;
    }
    return HIDDEN_NONE;
}

enum hidden_refusal hidden_filter_refusal(const struct resp_cmd *cmd,
                                          int in_multi)
{
    return in_multi && hidden_filter_kind(cmd) != HIDDEN_NONE ? HIDDEN_IN_MULTI
                                                              : HIDDEN_ALLOWED;
}

void hidden_filter_list(const struct resp_value *v, const char *prefix,
                        struct buf *out)
{
    char head[32];
    size_t i, kept = 0;
    int n;

    for (i = 0; i < v->n; i++) {
        kept += !hidden_filter_key(v->elem[i].str, v->elem[i].len, prefix);
    }
    n = snprintf(head, sizeof(head), "%c%zu\r\n", v->type, kept);
    PX_CHECK_OOM(buf_append(out, head, (size_t)n));
    for (i = 0; i < v->n; i++) {
        if (!hidden_filter_key(v->elem[i].str, v->elem[i].len, prefix)) {
            PX_CHECK_OOM(buf_append(out, v->elem[i].raw, v->elem[i].raw_len));
        }
    }
}

/* An array (or a RESP3 set) of elements, not a null one. */
static int hidden_filter_is_list(const struct resp_value *v)
{
    return (v->type == '*' || v->type == '~') && !v->null;
}

void hidden_filter_reply(enum hidden_kind kind, const char *frame, size_t len,
                         const char *prefix, struct buf *out)
{
    struct resp_value v;
    size_t used;

    if (resp_value_parse(frame, len, &v, &used) != RESP_OK) {
        PX_CHECK_OOM(buf_append(out, frame, len));
        return;
    }
    if (kind == HIDDEN_KEYS && hidden_filter_is_list(&v)) {
        hidden_filter_list(&v, prefix, out);
    } else if (kind == HIDDEN_SCAN && v.type == '*' && v.n == 2 &&
               hidden_filter_is_list(&v.elem[1])) {
        PX_CHECK_OOM(resp_enc_array_header(out, 2));
        PX_CHECK_OOM(buf_append(out, v.elem[0].raw, v.elem[0].raw_len));
        hidden_filter_list(&v.elem[1], prefix, out);
    } else {
        PX_CHECK_OOM(buf_append(out, frame, len));
    }
    resp_value_free(&v);
}

/* The bytes an invalidation starts with, up to its list of keys: a RESP3
 * push (the tracking client's own, or a RESP3 redirect target's), the
 * message a RESP2 redirect target subscribed to __redis__:invalidate
 * reads, and that message as a RESP3 subscriber would get it (only a
 * PUBLISH to the channel sends one, but its keys may be anything). */
static const char *const hidden_inval_heads[] = {
    ">2\r\n$10\r\ninvalidate\r\n",
    "*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n",
    ">3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n",
};

enum hidden_push hidden_filter_invalidation(const char *frame, size_t len,
                                            const char *prefix, struct buf *out)
{
    struct resp_value v;
    size_t i, head = 0, used, kept = 0;
    enum hidden_push r = HIDDEN_PUSH_AS_IS;

    for (i = 0; i < ARRAY_SIZE(hidden_inval_heads) && head == 0; i++) {
        size_t hlen = strlen(hidden_inval_heads[i]);
        if (len > hlen && memcmp(frame, hidden_inval_heads[i], hlen) == 0) {
            head = hlen;
        }
    }
    /* The keys, an array that ends the frame (a flush's null one names
     * none). */
    if (head == 0 || prefix == NULL ||
        resp_value_parse(frame + head, len - head, &v, &used) != RESP_OK) {
        return HIDDEN_PUSH_AS_IS;
    }
    if (head + used == len && hidden_filter_is_list(&v)) {
        for (i = 0; i < v.n; i++) {
            kept += !hidden_filter_key(v.elem[i].str, v.elem[i].len, prefix);
        }
        if (kept == 0 && v.n > 0) {
            r = HIDDEN_PUSH_DROPPED;
        } else if (kept < v.n) {
            PX_CHECK_OOM(buf_append(out, frame, head));
            hidden_filter_list(&v, prefix, out);
            r = HIDDEN_PUSH_TRIMMED;
        }
    }
    resp_value_free(&v);
    return r;
}

int hidden_filter_drawn(const char *frame, size_t len, const char *prefix)
{
    struct resp_value v;
    size_t used;
    int drawn;

    if (len == 0 || frame[0] != '$' ||
        resp_value_parse(frame, len, &v, &used) != RESP_OK) {
        return 0;
    }
    drawn = !v.null && hidden_filter_key(v.str, v.len, prefix);
    resp_value_free(&v);
    return drawn;
}
