/* Growable byte buffer.
 *
 * Storage grows geometrically (doubling, starting at BUF_MIN_CAP) so that a
 * sequence of appends costs amortised O(1) per byte. Every size computation
 * is checked for overflow; a request that cannot be satisfied returns
 * BUF_ENOMEM and leaves the buffer exactly as it was. */
#include "parser/buf.h"

#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Smallest allocation: below this, reallocating costs more than it saves. */
#define BUF_MIN_CAP 64

void buf_init(struct buf *b)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
}

void buf_free(struct buf *b)
{
    free(b->data);
    buf_init(b);
}

int buf_reserve(struct buf *b, size_t n)
{
    size_t need, cap;
    char *p;

    if (n <= b->cap - b->len) {
        return BUF_OK;
    }
    if (n > SIZE_MAX - b->len) {
        return BUF_ENOMEM;
    }
    need = b->len + n;
    cap = b->cap < BUF_MIN_CAP ? BUF_MIN_CAP : b->cap;
    while (cap < need) {
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    }
    p = realloc(b->data, cap);
    if (p == NULL) {
        return BUF_ENOMEM;
    }
    b->data = p;
    b->cap = cap;
    return BUF_OK;
}

int buf_append(struct buf *b, const void *p, size_t n)
{
    if (n == 0) {
        return BUF_OK;
    }
    if (buf_reserve(b, n) != BUF_OK) {
        return BUF_ENOMEM;
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
    return BUF_OK;
}

int buf_append_str(struct buf *b, const char *s)
{
    return buf_append(b, s, strlen(s));
}

void buf_commit(struct buf *b, size_t n)
{
    assert(n <= b->cap - b->len);
    b->len += n;
}

void buf_consume(struct buf *b, size_t n)
{
    assert(n <= b->len);
    if (n == 0) {
        return;
    }
    if (n < b->len) {
        memmove(b->data, b->data + n, b->len - n);
    }
    b->len -= n;
}

void buf_clear(struct buf *b)
{
    b->len = 0;
}

void buf_swap(struct buf *a, struct buf *b)
{
    struct buf t = *a;

    *a = *b;
    *b = t;
}
