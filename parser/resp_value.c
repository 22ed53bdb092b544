/* Parser of one complete reply into a tree of spans (see resp_value.h).
 *
 * Recursive descent with a depth cap. Element arrays are sized from the
 * declared count only after checking that the remaining bytes could hold that
 * many elements (each takes at least 3 bytes), so a hostile count cannot make
 * it allocate more than the input justifies.
 *
 * It reads the bytes as the reply framer (resp_framer.c) frames them, so a
 * frame the proxy forwards is the value it parses: a line ends at its first
 * CRLF (a bare LF or CR is content, as hiredis reads it), a length is "-1"
 * (for `$` and `*` only) or 1 to 19 digits within the framer's limits, and a
 * blob's payload is followed by CRLF. It is stricter than the framer only on
 * what the framer need not look at: the digits of an integer, the byte of a
 * boolean, nesting deeper than RV_MAX_DEPTH; and it reads no attributes
 * (`|`). tests/fuzz/fuzz_reply_diff.c checks the two agree. */
#include "parser/resp_value.h"

#include <stdlib.h>
#include <string.h>

#include "parser/resp.h"

/* Deepest nesting parsed; the framer accepts the same. */
#define RV_MAX_DEPTH 128

/* The framer's limits (resp_framer.c): longest length, largest blob, most
 * elements of one aggregate (a map's keys and values). */
#define RV_MAX_DIGITS   19
#define RV_MAX_BLOB     (0x7fffffffffffffffULL - 2)
#define RV_MAX_ELEMENTS 0xffffffffULL

/* The smallest encoded value, "_\r\n" or ":0\r\n" minus one: 3 bytes. */
#define RV_MIN_VALUE_BYTES 3

/* Finds the CRLF ending the line that starts at p[i]. Returns the offset of
 * the '\r', or (size_t)-1 when incomplete. */
static size_t rv_line_end(const char *p, size_t n, size_t i)
{
    const char *cr;

    while (i < n) {
        cr = memchr(p + i, '\r', n - i);
        if (cr == NULL) {
            return (size_t)-1;
        }
        i = (size_t)(cr - p);
        if (i + 1 >= n) {
            return (size_t)-1;
        }
        if (p[i + 1] == '\n') {
            return i;
        }
        i++;
    }
    return (size_t)-1;
}

/* Parses a signed decimal in p[0..n). 0 on success. */
static int rv_ll(const char *p, size_t n, long long *out)
{
    unsigned long long v = 0;
    size_t i = 0;
    int neg = 0;

    if (n > 0 && (p[0] == '-' || p[0] == '+')) {
        neg = p[0] == '-';
        i = 1;
    }
    if (i == n) {
        return -1;
    }
    for (; i < n; i++) {
        if (p[i] < '0' || p[i] > '9' || v > (~0ULL >> 1) / 10) {
            return -1;
        }
        v = v * 10 + (unsigned long long)(p[i] - '0');
    }
    if (v > (unsigned long long)(~0ULL >> 1) + (unsigned long long)neg) {
        return -1;
    }
    *out = neg ? (long long)(0 - v) : (long long)v;
    return 0;
}

/* Parses the length line p[0..n) of a value of type `type` as the framer
 * does: "-1" (null, `$` and `*` only) or 1 to RV_MAX_DIGITS digits, at most
 * RV_MAX_BLOB for a blob and RV_MAX_ELEMENTS elements for an aggregate (a
 * map's pairs count twice). `*count` receives the bytes or elements, `*null`
 * whether it is -1. 0 on success. */
static int rv_length(const char *p, size_t n, char type,
                     unsigned long long *count, int *null)
{
    unsigned long long v = 0;
    size_t i;
    int blob = type == '$' || type == '!' || type == '=';

    *null = 0;
    if (n == 2 && p[0] == '-' && p[1] == '1') {
        *null = 1;
        return type == '$' || type == '*' ? 0 : -1;
    }
    if (n == 0 || n > RV_MAX_DIGITS) {
        return -1;
    }
    for (i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') {
            return -1;
        }
        v = v * 10 + (unsigned long long)(p[i] - '0');
    }
    if (blob ? v > RV_MAX_BLOB : v > RV_MAX_ELEMENTS) {
        return -1;
    }
    *count = type == '%' ? v * 2 : v;
    return 0;
}

static int rv_parse(const char *p, size_t n, struct resp_value *v, size_t *used,
                    int depth);

/* Parses `count` elements starting at p[*pos]. */
static int rv_elements(const char *p, size_t n, size_t *pos,
                       struct resp_value *v, size_t count, int depth)
{
    size_t k, u;
    int rc;

    if (count > (n - *pos) / RV_MIN_VALUE_BYTES + 1) {
        /* Not even the bytes for that many elements have arrived. */
        return RESP_AGAIN;
    }
    v->elem = calloc(count ? count : 1, sizeof(*v->elem));
    if (v->elem == NULL) {
        return RESP_ENOMEM;
    }
    for (k = 0; k < count; k++) {
        rc = rv_parse(p + *pos, n - *pos, &v->elem[k], &u, depth + 1);
        if (rc != RESP_OK) {
            v->n = k;
            resp_value_free(v);
            return rc;
        }
        *pos += u;
    }
    v->n = count;
    return RESP_OK;
}

static int rv_parse(const char *p, size_t n, struct resp_value *v, size_t *used,
                    int depth)
{
    size_t cr, pos;
    unsigned long long count = 0;
    int rc;

    memset(v, 0, sizeof(*v));
    if (depth > RV_MAX_DEPTH) {
        return RESP_EPROTO;
    }
    if (n == 0) {
        return RESP_AGAIN;
    }
    cr = rv_line_end(p, n, 1);
    if (cr == (size_t)-1) {
        return RESP_AGAIN;
    }
    v->type = p[0];
    v->raw = p;
    pos = cr + 2;
    switch (p[0]) {
    case '+':
    case '-':
    case ',':
    case '(':
        v->str = p + 1;
        v->len = cr - 1;
        break;
    case ':':
        if (rv_ll(p + 1, cr - 1, &v->integer) != 0) {
            return RESP_EPROTO;
        }
        break;
    case '#':
        if (cr != 2 || (p[1] != 't' && p[1] != 'f')) {
            return RESP_EPROTO;
        }
        v->integer = p[1] == 't';
        break;
    case '_':
        v->null = 1;
        break;
    case '$':
    case '!':
    case '=':
        if (rv_length(p + 1, cr - 1, p[0], &count, &v->null) != 0) {
            return RESP_EPROTO;
        }
        if (v->null) {
            break;
        }
        if (count > n - pos || n - pos - (size_t)count < 2) {
            return RESP_AGAIN;
        }
        if (p[pos + (size_t)count] != '\r' ||
            p[pos + (size_t)count + 1] != '\n') {
            return RESP_EPROTO;
        }
        v->str = p + pos;
        v->len = (size_t)count;
        pos += (size_t)count + 2;
        break;
    case '*':
    case '~':
    case '>':
    case '%':
        if (rv_length(p + 1, cr - 1, p[0], &count, &v->null) != 0) {
            return RESP_EPROTO;
        }
        if (v->null) {
            break;
        }
        rc = rv_elements(p, n, &pos, v, (size_t)count, depth);
        if (rc != RESP_OK) {
            return rc;
        }
        break;
    default:
        return RESP_EPROTO;
    }
    v->raw_len = pos;
    *used = pos;
    return RESP_OK;
}

int resp_value_parse(const char *p, size_t n, struct resp_value *out,
                     size_t *used)
{
    return rv_parse(p, n, out, used, 0);
}

void resp_value_free(struct resp_value *v)
{
    size_t k;

    if (v->elem == NULL) {
        return;
    }
    for (k = 0; k < v->n; k++) {
        resp_value_free(&v->elem[k]);
    }
    free(v->elem);
    v->elem = NULL;
    v->n = 0;
}

int resp_value_is(const struct resp_value *v, const char *word)
{
    return v->str != NULL && resp_word_is(v->str, v->len, word);
}
