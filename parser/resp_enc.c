/* RESP encoders (RESP2, and RESP3 where it spells a type differently).
 *
 * Each encoder first computes the exact size of what it writes, reserves it
 * once, then fills it in. So an encoder either appends the whole item or, on
 * BUF_ENOMEM, nothing at all: a caller never has to undo half a reply.
 * Numbers are converted by hand (no locale, no snprintf on the hot path). */
#include "parser/resp_enc.h"

#include <stdint.h>
#include <string.h>

#include "parser/buf.h"

/* Longest decimal long long: 19 digits and a sign. */
#define ENC_NUM_MAX 20

/* Writes the decimal digits of `m` ending just before `end` and returns where
 * they start. `end` must have ENC_NUM_MAX bytes of room before it. */
static char *enc_udigits(char *end, unsigned long long m)
{
    char *p = end;

    do {
        *--p = (char)('0' + m % 10);
        m /= 10;
    } while (m != 0);
    return p;
}

/* Number of decimal digits of `n`. */
static size_t enc_ndigits(unsigned long long n)
{
    size_t d = 1;

    while (n >= 10) {
        n /= 10;
        d++;
    }
    return d;
}

/* Writes v in decimal at dst (ENC_NUM_MAX bytes of room), the digits
 * straight in their place, and returns the byte after it. */
static char *enc_put_num(char *dst, long long v)
{
    /* As unsigned, so that LLONG_MIN negates. */
    unsigned long long m =
        v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;

    if (v < 0) {
        *dst++ = '-';
    }
    dst += enc_ndigits(m);
    (void)enc_udigits(dst, m);
    return dst;
}

/* Writes `<type><v>\r\n` at dst (ENC_NUM_MAX + 3 bytes of room) and returns
 * the byte after it. */
static char *enc_put_line_num(char *dst, char type, long long v)
{
    *dst++ = type;
    dst = enc_put_num(dst, v);
    *dst++ = '\r';
    *dst++ = '\n';
    return dst;
}

/* Appends `<type><v>\r\n`, or returns BUF_ENOMEM having appended nothing. */
static int enc_line_num(struct buf *b, char type, long long v)
{
    char *end;

    if (buf_reserve(b, ENC_NUM_MAX + 3) != BUF_OK) {
        return BUF_ENOMEM;
    }
    end = enc_put_line_num(buf_tail(b), type, v);
    buf_commit(b, (size_t)(end - buf_tail(b)));
    return BUF_OK;
}

/* Appends `<type><s>\r\n`. */
static int enc_line_str(struct buf *b, char type, const char *s)
{
    size_t n = strlen(s);
    char *p;

    if (n > SIZE_MAX - 3 || buf_reserve(b, n + 3) != BUF_OK) {
        return BUF_ENOMEM;
    }
    p = buf_tail(b);
    p[0] = type;
    memcpy(p + 1, s, n);
    p[n + 1] = '\r';
    p[n + 2] = '\n';
    buf_commit(b, n + 3);
    return BUF_OK;
}

/* Bytes of a bulk string of `n` payload bytes: `$<n>\r\n<payload>\r\n`, or
 * 0 if that overflows size_t. */
static size_t enc_bulk_size(size_t n)
{
    size_t head = 1 + enc_ndigits(n) + 2;

    if (n > SIZE_MAX - head - 2) {
        return 0;
    }
    return head + n + 2;
}

/* Writes a bulk string into `dst`, which has enc_bulk_size(n) bytes of room,
 * and returns the byte after it. */
static char *enc_put_bulk(char *dst, const char *p, size_t n)
{
    *dst++ = '$';
    dst += enc_ndigits(n);
    (void)enc_udigits(dst, n);
    *dst++ = '\r';
    *dst++ = '\n';
    if (n > 0) {
        memcpy(dst, p, n);
    }
    dst += n;
    *dst++ = '\r';
    *dst++ = '\n';
    return dst;
}

int resp_enc_simple(struct buf *b, const char *s)
{
    return enc_line_str(b, '+', s);
}

int resp_enc_error(struct buf *b, const char *msg)
{
    return enc_line_str(b, '-', msg);
}

int resp_enc_int(struct buf *b, long long v)
{
    return enc_line_num(b, ':', v);
}

int resp_enc_bulk(struct buf *b, const char *p, size_t n)
{
    size_t size = enc_bulk_size(n);
    char *end;

    if (size == 0 || buf_reserve(b, size) != BUF_OK) {
        return BUF_ENOMEM;
    }
    end = enc_put_bulk(buf_tail(b), p, n);
    buf_commit(b, (size_t)(end - buf_tail(b)));
    return BUF_OK;
}

size_t resp_fmt_ll(char *dst, long long v)
{
    char *end = enc_put_num(dst, v);

    *end = '\0';
    return (size_t)(end - dst);
}

size_t resp_put_ints(char *dst, const long long *v, int n)
{
    char *p = enc_put_line_num(dst, '*', n);
    int k;

    for (k = 0; k < n; k++) {
        p = enc_put_line_num(p, ':', v[k]);
    }
    return (size_t)(p - dst);
}

int resp_enc_nil(struct buf *b)
{
    return buf_append(b, "$-1\r\n", 5);
}

int resp_enc_array_header(struct buf *b, long long n)
{
    return enc_line_num(b, '*', n);
}

int resp_enc_null(struct buf *b, int proto)
{
    if (proto == RESP_PROTO3) {
        return buf_append(b, "_\r\n", 3);
    }
    return resp_enc_nil(b);
}

int resp_enc_map_header(struct buf *b, long long npairs, int proto)
{
    if (proto == RESP_PROTO3) {
        return enc_line_num(b, '%', npairs);
    }
    return enc_line_num(b, '*', npairs * 2);
}

int resp_enc_set_header(struct buf *b, long long n, int proto)
{
    return enc_line_num(b, proto == RESP_PROTO3 ? '~' : '*', n);
}

/* Bytes of the format prefix of a verbatim string: "txt:". */
#define ENC_VERBATIM_FMT 3

int resp_enc_verbatim(struct buf *b, const char *fmt, const char *p, size_t n,
                      int proto)
{
    size_t size;

    if (proto != RESP_PROTO3) {
        return resp_enc_bulk(b, p, n);
    }
    if (strlen(fmt) != ENC_VERBATIM_FMT ||
        n > SIZE_MAX - ENC_NUM_MAX - 8 - ENC_VERBATIM_FMT) {
        return BUF_ENOMEM;
    }
    size = n + ENC_VERBATIM_FMT + 1;
    /* Reserve everything first: on ENOMEM nothing is appended. */
    if (buf_reserve(b, 1 + ENC_NUM_MAX + 2 + size + 2) != BUF_OK) {
        return BUF_ENOMEM;
    }
    (void)enc_line_num(b, '=', (long long)size);
    (void)buf_append(b, fmt, ENC_VERBATIM_FMT);
    (void)buf_append(b, ":", 1);
    (void)buf_append(b, p, n);
    (void)buf_append(b, "\r\n", 2);
    return BUF_OK;
}

int resp_enc_argv(struct buf *b, int argc, const char *const *argv,
                  const size_t *lens)
{
    size_t total = 1 + ENC_NUM_MAX + 2; /* upper bound of the array header */
    char *p;
    int i;

    for (i = 0; i < argc; i++) {
        size_t s = enc_bulk_size(lens[i]);

        if (s == 0 || s > SIZE_MAX - total) {
            return BUF_ENOMEM;
        }
        total += s;
    }
    if (buf_reserve(b, total) != BUF_OK) {
        return BUF_ENOMEM;
    }
    /* Cannot fail now: the header fits in the room reserved above. */
    (void)resp_enc_array_header(b, argc);
    p = buf_tail(b);
    for (i = 0; i < argc; i++) {
        p = enc_put_bulk(p, argv[i], lens[i]);
    }
    buf_commit(b, (size_t)(p - buf_tail(b)));
    return BUF_OK;
}

int resp_enc_lines(struct buf *b, const char *text, size_t len)
{
    const char *p, *nl, *end = text + len;
    long long n = 0;

    for (p = text; p < end; p = nl + 1) {
        nl = memchr(p, '\n', (size_t)(end - p));
        n++;
        if (nl == NULL) {
            break;
        }
    }
    if (resp_enc_array_header(b, n) != BUF_OK) {
        return BUF_ENOMEM;
    }
    for (p = text; p < end; p = nl + 1) {
        nl = memchr(p, '\n', (size_t)(end - p));
        if (resp_enc_bulk(b, p,
                          nl != NULL ? (size_t)(nl - p) : (size_t)(end - p)) !=
            BUF_OK) {
            return BUF_ENOMEM;
        }
        if (nl == NULL) {
            break;
        }
    }
    return BUF_OK;
}
