/* Growable byte buffer: the one byte container of the project.
 *
 * A buf owns `data` (NULL while empty and never grown). Every function that
 * may grow it says so: it may move `b->data`, so do not keep pointers into it
 * across such a call. Leaf layer: allocation failure returns BUF_ENOMEM and
 * leaves the buffer unchanged. */
#ifndef PX_PARSER_BUF_H
#define PX_PARSER_BUF_H

#include <stddef.h>

#define BUF_OK     0
#define BUF_ENOMEM -2

struct buf {
    char *data; /* owned; NULL until the first reserve */
    size_t len; /* bytes in use, from data[0] */
    size_t cap; /* bytes allocated */
};

/* An empty buffer. Allocates nothing. */
void buf_init(struct buf *b);

/* Frees the storage and leaves an empty buffer. Accepts an empty buffer. */
void buf_free(struct buf *b);

/* Ensures room for `n` more bytes after `len`. May move `b->data`. */
int buf_reserve(struct buf *b, size_t n);

/* Appends `n` bytes. May move `b->data`. */
int buf_append(struct buf *b, const void *p, size_t n);

/* Appends a NUL-terminated string, without the NUL. May move `b->data`. */
int buf_append_str(struct buf *b, const char *s);

/* Marks `n` bytes written into the reserved tail as used. */
void buf_commit(struct buf *b, size_t n);

/* Drops the first `n` bytes (n <= len), moving the rest to the front. */
void buf_consume(struct buf *b, size_t n);

/* Empties the buffer but keeps its storage. */
void buf_clear(struct buf *b);

/* Swaps the contents of two buffers (used by the write queue). */
void buf_swap(struct buf *a, struct buf *b);

/* Free space after `len`. */
static inline size_t buf_avail(const struct buf *b)
{
    return b->cap - b->len;
}

/* Start of the free tail. */
static inline char *buf_tail(struct buf *b)
{
    return b->data + b->len;
}

#endif /* PX_PARSER_BUF_H */
