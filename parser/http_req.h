/* The head of an HTTP/1.x request (RFC 9112): request line and header
 * fields up to the blank line, for the metrics endpoint.
 *
 * Stateless: the caller keeps the bytes received so far in one bounded
 * buffer and parses the whole of it again after each read. A head is a few
 * hundred bytes, so re-reading is cheaper than keeping state, and a
 * request split anywhere parses exactly as it does in one piece. Bytes are
 * checked as they come: a prefix that no valid head can start with is
 * refused at once, so garbage never waits for the buffer to fill.
 *
 * Strict on purpose (a scraper sends the simplest request there is): lines
 * end in CRLF, never a bare LF; no line folding; the method is a token;
 * the target is visible ASCII; the version is "HTTP/" digit "." digit.
 * Header fields are checked for shape and otherwise ignored. Leaf layer:
 * libc only; allocates nothing. */
#ifndef PX_PARSER_HTTP_REQ_H
#define PX_PARSER_HTTP_REQ_H

#include <stddef.h>

enum http_req_status {
    HTTP_REQ_BAD = -1, /* no valid head starts with these bytes */
    HTTP_REQ_MORE = 0, /* a valid start: the head is not complete yet */
    HTTP_REQ_DONE = 1, /* a complete head in the first head_len bytes */
};

/* A parsed head; pointers borrow the caller's buffer. */
struct http_req {
    const char *method; /* e.g. "GET", method_len bytes */
    size_t method_len;
    const char *target; /* e.g. "/metrics", target_len bytes */
    size_t target_len;
    int major; /* HTTP/<major>.<minor> */
    int minor;
    size_t head_len; /* bytes up to and including the blank line */
};

/* Parses the `len` bytes at `p`. `out` is filled on HTTP_REQ_DONE (bytes
 * after head_len, a body or a next request, are not looked at). */
enum http_req_status http_req_parse(const char *p, size_t len,
                                    struct http_req *out);

/* True when `target` (len bytes) names `path`, with or without a query
 * ("/metrics", "/metrics?x=1"). */
int http_req_path_is(const char *target, size_t len, const char *path);

#endif /* PX_PARSER_HTTP_REQ_H */
