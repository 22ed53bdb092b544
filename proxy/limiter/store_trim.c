/* Giving freed memory back (see store_trim.h). Elsewhere than glibc the
 * decision stands and nothing is called: other allocators return memory
 * their own way. */
#include "proxy/limiter/store_trim.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

int store_trim_due(const struct store_trim *t, uint64_t freed,
                   uint64_t threshold)
{
    return freed >= t->freed_at && freed - t->freed_at >= threshold;
}

int store_trim_maybe(struct store_trim *t, uint64_t freed)
{
    if (!store_trim_due(t, freed, STORE_TRIM_BYTES)) {
        return 0;
    }
    t->freed_at = freed;
    t->trims++;
#if defined(__GLIBC__)
    malloc_trim(0);
#endif
    return 1;
}
