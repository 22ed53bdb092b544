/* RESP encoders: append one reply or command to a buf. Each returns BUF_OK
 * or BUF_ENOMEM and may move `b->data`.
 *
 * Most types are spelled the same in RESP2 and RESP3. Those that differ take
 * the protocol of the client the reply is for (RESP_PROTO2 or RESP_PROTO3),
 * so a handler writes one reply and each client gets its own spelling. */
#ifndef PX_PARSER_RESP_ENC_H
#define PX_PARSER_RESP_ENC_H

#include <stddef.h>

struct buf;

int resp_enc_simple(struct buf *b, const char *s);         /* +s */
int resp_enc_error(struct buf *b, const char *msg);        /* -msg */
int resp_enc_int(struct buf *b, long long v);              /* :v */
int resp_enc_bulk(struct buf *b, const char *p, size_t n); /* $n */
int resp_enc_nil(struct buf *b);                           /* $-1 */
int resp_enc_array_header(struct buf *b, long long n);     /* *n */

/* Longest decimal resp_fmt_ll writes: a sign and 19 digits. */
#define RESP_FMT_LL_MAX 20

/* Writes v in decimal at dst (RESP_FMT_LL_MAX + 1 bytes of room), NUL
 * after it, and returns its length: snprintf's "%lld" without the cost of
 * a format string, for numbers made per request. */
size_t resp_fmt_ll(char *dst, long long v);

/* Bytes resp_put_ints may write for n integers: the header and n lines of
 * a sign, 19 digits and CRLF at most. */
#define RESP_PUT_INTS_SIZE(n) (24 * ((size_t)(n) + 1))

/* Writes the array of the n integers v[0..n) (`*n` and n lines `:v`) at
 * dst, which has RESP_PUT_INTS_SIZE(n) bytes of room, and returns the bytes
 * written. For a reply kept on the stack instead of in a buf. */
size_t resp_put_ints(char *dst, const long long *v, int n);

/* Protocol versions, as HELLO names them. */
#define RESP_PROTO2 2
#define RESP_PROTO3 3

/* A null: `$-1` in RESP2, `_` in RESP3. */
int resp_enc_null(struct buf *b, int proto);

/* The header of a map of `npairs` pairs (keys and values follow): `%n` in
 * RESP3, an array of 2n elements in RESP2. */
int resp_enc_map_header(struct buf *b, long long npairs, int proto);

/* The header of a set of `n` elements: `~n` in RESP3, `*n` in RESP2. */
int resp_enc_set_header(struct buf *b, long long n, int proto);

/* Text in a format named by three characters (`txt`, `mkd`): a verbatim
 * string `=<n+4>\r\n<fmt>:<text>` in RESP3 (what Redis sends for INFO), a
 * plain bulk string in RESP2. */
int resp_enc_verbatim(struct buf *b, const char *fmt, const char *p, size_t n,
                      int proto);
/* Text of lines as an array of bulk strings, one per line, without the
 * '\n's: a text ending in '\n' has no empty last element, one without
 * keeps its last line. For a multi-line answer (LIMITER RULES) that
 * redis-cli then shows one numbered line at a time. */
int resp_enc_lines(struct buf *b, const char *text, size_t len);
/* A command: an array of bulk strings. */
int resp_enc_argv(struct buf *b, int argc, const char *const *argv,
                  const size_t *lens);

#endif /* PX_PARSER_RESP_ENC_H */
