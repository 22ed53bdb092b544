/* The request head parser (see http_req.h). One pass over the bytes, in
 * the order of the grammar:
 *
 *   method SP target SP "HTTP/" D "." D CRLF
 *   ( field-name ":" field-value CRLF )*
 *   CRLF
 *
 * Running out of bytes anywhere is HTTP_REQ_MORE; a byte the grammar does
 * not allow where it stands is HTTP_REQ_BAD. */
#include "parser/http_req.h"

#include <string.h>

/* RFC 9110 tchar: the characters of a token. */
static int http_req_tchar(unsigned char ch)
{
    if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
        (ch >= '0' && ch <= '9')) {
        return 1;
    }
    return ch != '\0' && strchr("!#$%&'*+-.^_`|~", ch) != NULL;
}

/* A byte of a field value: visible ASCII, obs-text, space or tab. */
static int http_req_vchar(unsigned char ch)
{
    return (ch >= 0x21 && ch != 0x7f) || ch == ' ' || ch == '\t';
}

/* Reads a token ending in `end` from *i. HTTP_REQ_DONE with *i past `end`,
 * or MORE / BAD. */
static enum http_req_status http_req_token(const unsigned char *p, size_t len,
                                           size_t *i, char end)
{
    size_t start = *i;

    for (; *i < len; (*i)++) {
        if (p[*i] == (unsigned char)end && *i > start) {
            (*i)++;
            return HTTP_REQ_DONE;
        }
        if (!http_req_tchar(p[*i])) {
            return HTTP_REQ_BAD;
        }
    }
    return HTTP_REQ_MORE;
}

/* Expects CR LF at *i. */
static enum http_req_status http_req_crlf(const unsigned char *p, size_t len,
                                          size_t *i)
{
    if (*i >= len) {
        return HTTP_REQ_MORE;
    }
    if (p[*i] != '\r') {
        return HTTP_REQ_BAD;
    }
    if (*i + 1 >= len) {
        return HTTP_REQ_MORE;
    }
    if (p[*i + 1] != '\n') {
        return HTTP_REQ_BAD;
    }
    *i += 2;
    return HTTP_REQ_DONE;
}

enum http_req_status http_req_parse(const char *text, size_t len,
                                    struct http_req *out)
{
    static const char version[] = "HTTP/D.D";
    const unsigned char *p = (const unsigned char *)text;
    enum http_req_status st;
    size_t i = 0, start, k;
    struct http_req r;

    memset(&r, 0, sizeof(r));
    /* method SP */
    st = http_req_token(p, len, &i, ' ');
    if (st != HTTP_REQ_DONE) {
        return st;
    }
    r.method = text;
    r.method_len = i - 1;
    /* target SP */
    for (start = i; i < len && p[i] != ' '; i++) {
        if (p[i] < 0x21 || p[i] > 0x7e) {
            return HTTP_REQ_BAD;
        }
    }
    if (i >= len) {
        return HTTP_REQ_MORE;
    }
    if (i == start) {
        return HTTP_REQ_BAD;
    }
    r.target = text + start;
    r.target_len = i - start;
    i++;
    /* HTTP/D.D CRLF */
    for (k = 0; k < sizeof(version) - 1; k++, i++) {
        if (i >= len) {
            return HTTP_REQ_MORE;
        }
        if (version[k] == 'D' ? p[i] < '0' || p[i] > '9' : p[i] != version[k]) {
            return HTTP_REQ_BAD;
        }
    }
    r.major = p[i - 3] - '0';
    r.minor = p[i - 1] - '0';
    st = http_req_crlf(p, len, &i);
    if (st != HTTP_REQ_DONE) {
        return st;
    }
    /* Header fields, then the blank line. */
    for (;;) {
        if (i < len && p[i] == '\r') {
            st = http_req_crlf(p, len, &i);
            if (st != HTTP_REQ_DONE) {
                return st;
            }
            break;
        }
        st = http_req_token(p, len, &i, ':');
        if (st != HTTP_REQ_DONE) {
            return st;
        }
        for (; i < len && p[i] != '\r'; i++) {
            if (!http_req_vchar(p[i])) {
                return HTTP_REQ_BAD;
            }
        }
        st = http_req_crlf(p, len, &i);
        if (st != HTTP_REQ_DONE) {
            return st;
        }
    }
    r.head_len = i;
    *out = r;
    return HTTP_REQ_DONE;
}

int http_req_path_is(const char *target, size_t len, const char *path)
{
    size_t n = strlen(path);

    return len >= n && memcmp(target, path, n) == 0 &&
           (len == n || target[n] == '?');
}
