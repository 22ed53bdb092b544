/* Project-wide helpers for proxy/: the allocation wrappers (abort on OOM, so
 * call sites never test for NULL), container_of, ARRAY_SIZE, PX_ASSERT and
 * PX_UNUSED. Leaf layers do not use this header. */
#ifndef PX_PROXY_UTIL_H
#define PX_PROXY_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/core/log.h" /* px_oom, px_assert_fail */

#define PX_OK  0
#define PX_ERR -1

#define PX_UNUSED(x)  ((void)(x))
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Cast through void * so clang's -Wcast-align accepts it
 * (docs/ARCHITECTURE.md "Warnings"). */
#define container_of(p, type, m)                                               \
    ((type *)(void *)((char *)(p)-offsetof(type, m)))

/* Aborts through px_assert_fail (log.h) when e is false. Invariants only,
 * never input validation. Always on. */
#define PX_ASSERT(e)                                                           \
    do {                                                                       \
        if (!(e)) {                                                            \
            px_assert_fail(#e, __FILE__, __LINE__);                            \
        }                                                                      \
    } while (0)

static inline void *px_malloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL) {
        px_oom(n);
    }
    return p;
}

/* n elements of `size` bytes, not zeroed; n * size checked for overflow
 * (for arrays that are filled before they are read). */
static inline void *px_mallocarray(size_t n, size_t size)
{
    if (size != 0 && n > SIZE_MAX / size) {
        px_oom(SIZE_MAX);
    }
    return px_malloc(n * size);
}

/* Zeroed, as calloc. (Spelling it malloc + memset gains nothing: GCC
 * turns that pair back into calloc, and in batches glibc's malloc
 * reaches _int_malloc as often as calloc does.) */
static inline void *px_calloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (p == NULL) {
        px_oom(size != 0 && n > SIZE_MAX / size ? SIZE_MAX : n * size);
    }
    return p;
}

static inline void *px_realloc(void *old, size_t n)
{
    void *p = realloc(old, n ? n : 1);
    if (p == NULL) {
        px_oom(n);
    }
    return p;
}

static inline char *px_strndup(const char *s, size_t n)
{
    char *p = px_malloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

static inline void px_free(void *p)
{
    free(p);
}

/* ASCII case-insensitive compare of n bytes (strncasecmp is not C11 and
 * depends on the locale). `lower` must be lower case. */
static inline int strncasecmp_ascii(const char *p, const char *lower, size_t n)
{
    size_t k;

    for (k = 0; k < n; k++) {
        char ch = p[k];
        if (ch >= 'A' && ch <= 'Z') {
            ch = (char)(ch - 'A' + 'a');
        }
        if (ch != lower[k]) {
            return 1;
        }
    }
    return 0;
}

/* Aborts when a leaf-layer buffer operation reported ENOMEM (rc != 0). */
#define PX_CHECK_OOM(rc)                                                       \
    do {                                                                       \
        if ((rc) != 0) {                                                       \
            px_oom(0);                                                         \
        }                                                                      \
    } while (0)

#endif /* PX_PROXY_UTIL_H */
