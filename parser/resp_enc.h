/* RESP2 encoders: append one reply or command to a buf. Each returns BUF_OK
 * or BUF_ENOMEM and may move `b->data`. */
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
/* A command: an array of bulk strings. */
int resp_enc_argv(struct buf *b, int argc, const char *const *argv,
                  const size_t *lens);

#endif /* PX_PARSER_RESP_ENC_H */
