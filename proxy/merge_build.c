/* Merging parts' replies (see merge_build.h).
 *
 *   parts[0] parts[1] ... parts[n-1]    raw replies, in part order
 *        \       |          /
 *         parse each (resp_value) -> the first error, or a wrong type,
 *         |                          is the reply
 *         combine by kind: BY_KEY (back in key order), SUM, ALL_OK,
 *         CONCAT, SAME, AND, SCAN (cursor rewritten), INFO (sections),
 *         ANY_OK, NUMSUB; KEYS and SCAN of an ordinary client leave the
 *         limiter's keys out (hide_prefix)
 *
 * What the merge copies from the parts (MGET's values, KEYS's names) is
 * already spelled in the client's protocol, since parts travel in it; what
 * it writes itself is spelled for it too. */
#include "proxy/merge_build.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "parser/resp.h"
#include "parser/resp_enc.h"
#include "parser/resp_value.h"
#include "proxy/core/util.h"
#include "proxy/hidden_filter.h"

/* A RESP3 verbatim string starts with its format and a colon: "txt:". */
#define MERGE_VERBATIM_FMT 4

static const char merge_bad_reply[] =
    "-ERR cellgate got an unexpected reply from a node\r\n";

void merge_free(struct merge *mg)
{
    unsigned i;

    if (mg == NULL) {
        return;
    }
    for (i = 0; i < mg->nparts; i++) {
        buf_free(&mg->parts[i]);
    }
    px_free(mg->parts);
    px_free(mg->key_part);
    px_free(mg->names);
    buf_free(&mg->proxy_info);
    px_free(mg);
}

struct merge *merge_new(enum merge_kind kind, unsigned nparts)
{
    struct merge *mg = px_calloc(1, sizeof(*mg));
    unsigned i;

    mg->kind = kind;
    mg->nparts = nparts;
    buf_init(&mg->proxy_info);
    mg->parts = px_calloc(nparts, sizeof(*mg->parts));
    for (i = 0; i < nparts; i++) {
        buf_init(&mg->parts[i]);
    }
    return mg;
}

/* ---------------- Merging ---------------- */

/* Parses every part. Returns the index of the first part that is an error
 * or not of type `type`, or -1 when all parsed as `type`. */
static int merge_parse_all(struct merge *mg, struct resp_value *v, char type)
{
    unsigned i;
    size_t used;
    int bad = -1;

    for (i = 0; i < mg->nparts; i++) {
        v[i].elem = NULL;
        v[i].n = 0;
        if (resp_value_parse(mg->parts[i].data, mg->parts[i].len, &v[i],
                             &used) != RESP_OK) {
            memset(&v[i], 0, sizeof(v[i]));
            v[i].type = '?';
        }
        if (bad < 0 && v[i].type != type) {
            bad = (int)i;
        }
    }
    return bad;
}

/* The reply for the first bad part: its error, or a generic one. */
static void merge_reply_bad(struct buf *out, const struct merge *mg,
                            const struct resp_value *v, int bad)
{
    if (v[bad].type == '-') {
        PX_CHECK_OOM(buf_append(out, mg->parts[bad].data, mg->parts[bad].len));
    } else {
        PX_CHECK_OOM(buf_append_str(out, merge_bad_reply));
    }
}

/* MGET: element j of part p is the value of the j-th key of that part. */
static void merge_by_key(struct merge *mg, struct resp_value *v,
                         struct buf *out)
{
    unsigned *next = px_calloc(mg->nparts, sizeof(*next));
    unsigned i;

    PX_CHECK_OOM(resp_enc_array_header(out, mg->nkeys));
    for (i = 0; i < mg->nkeys; i++) {
        unsigned p = mg->key_part[i];
        const struct resp_value *e;
        if (next[p] >= v[p].n) {
            buf_clear(out);
            PX_CHECK_OOM(buf_append_str(out, merge_bad_reply));
            break;
        }
        e = &v[p].elem[next[p]++];
        PX_CHECK_OOM(buf_append(out, e->raw, e->raw_len));
    }
    px_free(next);
}

static void merge_scan(struct merge *mg, struct resp_value *v, struct buf *out)
{
    const struct resp_value *cur;
    unsigned long long c = 0, next;
    char num[32];
    size_t k;
    int n;

    if (v[0].n != 2 || v[0].elem[0].str == NULL || v[0].elem[1].type != '*') {
        PX_CHECK_OOM(buf_append_str(out, merge_bad_reply));
        return;
    }
    cur = &v[0].elem[0];
    for (k = 0; k < cur->len && cur->str[k] >= '0' && cur->str[k] <= '9'; k++) {
        c = c * 10 + (unsigned long long)(cur->str[k] - '0');
    }
    if (c > (UINT64_MAX - MERGE_SCAN_NODES) / MERGE_SCAN_NODES) {
        PX_CHECK_OOM(buf_append_str(out, merge_bad_reply));
        return;
    }
    if (c != 0) {
        next = c * MERGE_SCAN_NODES + mg->scan_node;
    } else if (mg->scan_node + 1 < mg->nmasters) {
        next = mg->scan_node + 1; /* this master is done: the next one */
    } else {
        next = 0; /* every master walked */
    }
    n = snprintf(num, sizeof(num), "%llu", next);
    PX_CHECK_OOM(resp_enc_array_header(out, 2));
    PX_CHECK_OOM(resp_enc_bulk(out, num, (size_t)n));
    hidden_filter_list(&v[0].elem[1], mg->hide_prefix, out);
}

/* PUBSUB NUMSUB: every node counts its own subscribers of each channel;
 * the channels are the same, in the same order, in every part. */
static void merge_numsub(struct merge *mg, struct resp_value *v,
                         struct buf *out)
{
    size_t j;
    unsigned i;

    PX_CHECK_OOM(resp_enc_array_header(out, (long long)v[0].n));
    for (j = 0; j < v[0].n; j++) {
        long long sum = 0;
        if (j % 2 == 0) {
            PX_CHECK_OOM(
                buf_append(out, v[0].elem[j].raw, v[0].elem[j].raw_len));
            continue;
        }
        for (i = 0; i < mg->nparts; i++) {
            if (j < v[i].n) {
                sum += v[i].elem[j].integer;
            }
        }
        PX_CHECK_OOM(resp_enc_int(out, sum));
    }
}

/* INFO: a "# Proxy" section of cellgate's own, then every node's INFO
 * under a "# Node host:port" header, as one bulk string. */
static void merge_info(struct merge *mg, struct resp_value *v, struct buf *out,
                       int proto)
{
    struct buf text;
    char line[256];
    unsigned i;

    buf_init(&text);
    if (mg->info_proxy) {
        PX_CHECK_OOM(
            buf_append(&text, mg->proxy_info.data, mg->proxy_info.len));
    }
    for (i = 0; i < mg->nparts; i++) {
        const char *p = v[i].str;
        size_t n = v[i].len;
        if (v[i].type == '=' && n >= MERGE_VERBATIM_FMT) {
            p += MERGE_VERBATIM_FMT; /* "txt:" */
            n -= MERGE_VERBATIM_FMT;
        }
        /* A blank line between sections, none before the first. */
        snprintf(line, sizeof(line), "%s# Node %s\r\n",
                 text.len > 0 ? "\r\n" : "", mg->names[i]);
        PX_CHECK_OOM(buf_append_str(&text, line));
        PX_CHECK_OOM(buf_append(&text, p, n));
    }
    PX_CHECK_OOM(resp_enc_verbatim(out, "txt", text.data, text.len, proto));
    buf_free(&text);
}

/* Builds the root's reply from its parts' replies, in protocol `proto`. */
void merge_build(struct merge *mg, struct buf *out, int proto)
{
    static const char type_of[MERGE_KINDS] = {
        [MERGE_BY_KEY] = '*', [MERGE_SUM] = ':',  [MERGE_ALL_OK] = '+',
        [MERGE_CONCAT] = '*', [MERGE_SAME] = '$', [MERGE_AND] = '*',
        [MERGE_SCAN] = '*',   [MERGE_INFO] = '$', [MERGE_ANY_OK] = '+',
        [MERGE_NUMSUB] = '*',
    };
    struct resp_value *v = px_calloc(mg->nparts, sizeof(*v));
    char type = type_of[mg->kind];
    unsigned i;
    size_t j;
    int bad;

    if (mg->kind == MERGE_INFO && proto == RESP_PROTO3) {
        type = '='; /* INFO is a verbatim string in RESP3 */
    }
    if (mg->kind == MERGE_ANY_OK) {
        for (i = 0; i < mg->nparts; i++) {
            if (mg->parts[i].len > 0 && mg->parts[i].data[0] == '+') {
                PX_CHECK_OOM(
                    buf_append(out, mg->parts[i].data, mg->parts[i].len));
                px_free(v);
                return;
            }
        }
        PX_CHECK_OOM(buf_append(out, mg->parts[0].data, mg->parts[0].len));
        px_free(v);
        return;
    }
    bad = merge_parse_all(mg, v, type);

    if (bad >= 0) {
        merge_reply_bad(out, mg, v, bad);
        goto out;
    }
    switch (mg->kind) {
    case MERGE_BY_KEY:
        merge_by_key(mg, v, out);
        break;
    case MERGE_SUM: {
        long long sum = 0;
        for (i = 0; i < mg->nparts; i++) {
            sum += v[i].integer;
        }
        PX_CHECK_OOM(resp_enc_int(out, sum));
        break;
    }
    case MERGE_ALL_OK:
    case MERGE_SAME:
        PX_CHECK_OOM(buf_append(out, mg->parts[0].data, mg->parts[0].len));
        break;
    case MERGE_CONCAT: {
        size_t total = 0;
        for (i = 0; i < mg->nparts; i++) {
            for (j = 0; j < v[i].n; j++) {
                total += !hidden_filter_key(v[i].elem[j].str, v[i].elem[j].len,
                                            mg->hide_prefix);
            }
        }
        PX_CHECK_OOM(resp_enc_array_header(out, (long long)total));
        for (i = 0; i < mg->nparts; i++) {
            for (j = 0; j < v[i].n; j++) {
                const struct resp_value *e = &v[i].elem[j];
                if (!hidden_filter_key(e->str, e->len, mg->hide_prefix)) {
                    PX_CHECK_OOM(buf_append(out, e->raw, e->raw_len));
                }
            }
        }
        break;
    }
    case MERGE_AND:
        PX_CHECK_OOM(resp_enc_array_header(out, (long long)v[0].n));
        for (j = 0; j < v[0].n; j++) {
            long long all = 1;
            for (i = 0; i < mg->nparts; i++) {
                if (j >= v[i].n || v[i].elem[j].integer == 0) {
                    all = 0;
                }
            }
            PX_CHECK_OOM(resp_enc_int(out, all));
        }
        break;
    case MERGE_SCAN:
        merge_scan(mg, v, out);
        break;
    case MERGE_INFO:
        merge_info(mg, v, out, proto);
        break;
    case MERGE_ANY_OK:
        break; /* built above */
    case MERGE_NUMSUB:
        merge_numsub(mg, v, out);
        break;
    }
out:
    for (i = 0; i < mg->nparts; i++) {
        resp_value_free(&v[i]);
    }
    px_free(v);
}
