/* Giving freed memory back to the system.
 *
 * glibc keeps what a program frees for its next allocations; after a
 * flood of entries with large keys expires, the proxy would hold that
 * memory (its RSS) long after its tables shrank. malloc_trim(0) returns
 * the free pages, but it walks the heap, so it runs from the cron, and
 * only when many bytes were freed since the last one (STORE_TRIM_BYTES),
 * never per request. The owner keeps a monotonic count of the bytes it
 * freed (its accounting) and passes it in; store_trim_due is the pure
 * decision (tests/unit/test_store_trim.c). */
#ifndef PX_PROXY_LIMITER_STORE_TRIM_H
#define PX_PROXY_LIMITER_STORE_TRIM_H

#include <stdint.h>

/* Bytes freed since the last trim that make the next one due: 8 MB. */
#define STORE_TRIM_BYTES (UINT64_C(8) << 20)

/* One owner's trims. Zeroed: none yet. */
struct store_trim {
    uint64_t freed_at; /* the owner's freed count at the last trim */
    uint64_t trims;    /* malloc_trim calls made */
};

/* Whether `freed` (the owner's count of bytes freed, ever) is at least
 * `threshold` past the count at the last trim. */
int store_trim_due(const struct store_trim *t, uint64_t freed,
                   uint64_t threshold);

/* Gives the free memory back when store_trim_due (STORE_TRIM_BYTES);
 * 1 when it did. */
int store_trim_maybe(struct store_trim *t, uint64_t freed);

#endif /* PX_PROXY_LIMITER_STORE_TRIM_H */
