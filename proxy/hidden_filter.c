/* The limiter's key names kept from ordinary clients (see hidden_filter.h).
 *
 *   KEYS / CLUSTER GETKEYSINSLOT   *n of keys       -> *m, limiter keys left
 * out SCAN                           [cursor, *n]     -> same cursor, *m
 *   RANDOMKEY                      a limiter key    -> drawn again (hidden.c)
 *   inside MULTI                   refused: EXEC's reply mixes every
 *                                  queued command's, and a refusal is
 *                                  simpler to trust than a filter of it
 *   CLIENT TRACKING on BCAST       refused with no PREFIX, or a PREFIX
 *                                  that overlaps key_prefix
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
    if (resp_cmd_arg_is(cmd, 0, "client") &&
        resp_cmd_arg_is(cmd, 1, "tracking")) {
        return HIDDEN_TRACKING;
    }
    return HIDDEN_NONE;
}

/* 1 when one of p and the prefix starts the other: broadcasting keys
 * under p would broadcast some limiter keys (all of them when p is a
 * prefix of key_prefix, the empty p included). */
static int hidden_filter_overlaps(const char *p, size_t len, const char *prefix)
{
    size_t plen = strlen(prefix), n = len < plen ? len : plen;

    return memcmp(p, prefix, n) == 0;
}

/* CLIENT TRACKING on [REDIRECT id] [PREFIX p]... [BCAST] [OPTIN] [OPTOUT]
 * [NOLOOP]: without BCAST Redis tracks only the keys the client read,
 * which cannot be the limiter's (route_decide refuses them). */
static enum hidden_refusal hidden_filter_tracking(const struct resp_cmd *cmd,
                                                  const char *prefix, int *arg)
{
    int i, bcast = 0, nprefix = 0, overlap = -1;
    size_t len;
    const char *p;

    if (!resp_cmd_arg_is(cmd, 2, "on")) {
        return HIDDEN_ALLOWED;
    }
    for (i = 3; i < cmd->argc; i++) {
        if (resp_cmd_arg_is(cmd, i, "bcast")) {
            bcast = 1;
        } else if (resp_cmd_arg_is(cmd, i, "redirect")) {
            i++;
        } else if (resp_cmd_arg_is(cmd, i, "prefix") && i + 1 < cmd->argc) {
            i++;
            nprefix++;
            p = resp_cmd_arg(cmd, i, &len);
            if (overlap < 0 && hidden_filter_overlaps(p, len, prefix)) {
                overlap = i;
            }
        }
    }
    if (!bcast) {
        return HIDDEN_ALLOWED;
    }
    if (nprefix == 0) {
        return HIDDEN_BCAST_ALL;
    }
    if (overlap >= 0) {
        *arg = overlap;
        return HIDDEN_BCAST_PREFIX;
    }
    return HIDDEN_ALLOWED;
}

enum hidden_refusal hidden_filter_refusal(const struct resp_cmd *cmd,
                                          int in_multi, const char *prefix,
                                          int *arg)
{
    switch (hidden_filter_kind(cmd)) {
    case HIDDEN_NONE:
        return HIDDEN_ALLOWED;
    case HIDDEN_TRACKING:
        return hidden_filter_tracking(cmd, prefix, arg);
    case HIDDEN_KEYS:
    case HIDDEN_SCAN:
    case HIDDEN_RANDOMKEY:
        break;
    }
    return in_multi ? HIDDEN_IN_MULTI : HIDDEN_ALLOWED;
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
