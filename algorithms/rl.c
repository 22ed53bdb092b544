/* Reply-shape helpers shared by every algorithm (see rl.h). */
#include "algorithms/rl.h"

#include <stddef.h>

int64_t rl_seconds(int64_t ns)
{
    int64_t s = ns / RL_NS_PER_SEC;
    int64_t frac = ns % RL_NS_PER_SEC;

    /* redis-cell rounds a positive remainder of at least 1 ms up; C's `%`
     * keeps the sign of `ns`, so -1 s (no remainder) stays -1. */
    if (frac >= RL_NS_PER_MS) {
        s++;
    }
    return s;
}

void rl_reply_ints(const struct rl_decision *d, int64_t out[5])
{
    out[0] = d->limited ? 1 : 0;
    out[1] = d->limit;
    out[2] = d->remaining;
    out[3] = rl_seconds(d->retry_after_ns);
    out[4] = rl_seconds(d->reset_after_ns);
}

int64_t rl_ms(int64_t ns)
{
    if (ns < 0) {
        return -1;
    }
    /* No overflow: INT64_MAX / 1e6 + 1 is far from the top. */
    return ns / RL_NS_PER_MS + (ns % RL_NS_PER_MS != 0 ? 1 : 0);
}

void rl_reply_ints_ms(const struct rl_decision *d, int64_t out[5])
{
    rl_reply_ints(d, out);
    out[3] = rl_ms(d->retry_after_ns);
    out[4] = rl_ms(d->reset_after_ns);
}

int64_t rl_add_sat(int64_t a, int64_t b)
{
    int64_t s;

    if (__builtin_add_overflow(a, b, &s)) {
        return INT64_MAX;
    }
    return s;
}

int64_t rl_ceil_ms(int64_t ns)
{
    return ns / RL_NS_PER_MS + (ns % RL_NS_PER_MS != 0 ? 1 : 0);
}

/* hi:lo = a * b, from four 32-bit partial products (no compiler extension,
 * no wrap). */
static void rl_mul_wide(uint64_t a, uint64_t b, uint64_t *hi, uint64_t *lo)
{
    const uint64_t mask = UINT64_C(0xffffffff);
    uint64_t a0 = a & mask, a1 = a >> 32;
    uint64_t b0 = b & mask, b1 = b >> 32;
    uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
    /* At most 3 * (2^32 - 1): no carry out of 64 bits. */
    uint64_t mid = (p00 >> 32) + (p01 & mask) + (p10 & mask);

    *lo = (mid << 32) | (p00 & mask);
    *hi = p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
}

int64_t rl_muladd_div(int64_t a, int64_t b, int64_t c, int64_t d, int64_t *rem)
{
    uint64_t hi, lo, r, q = 0;
    uint64_t ud = (uint64_t)d;

    rl_mul_wide((uint64_t)a, (uint64_t)b, &hi, &lo);
    lo += (uint64_t)c;
    if (lo < (uint64_t)c) {
        hi++;
    }
    if (rem != NULL) {
        *rem = 0;
    }
    if (hi >= ud) {
        return INT64_MAX; /* the quotient needs more than 64 bits */
    }
    if (hi == 0) {
        /* The sum fits 64 bits (most calls): the machine divides it. */
        q = lo / ud;
        r = lo % ud;
    } else {
        /* Long division, one bit at a time. r < d <= 2^63 - 1, so r << 1
         * fits. */
        r = hi;
        for (int i = 63; i >= 0; i--) {
            r = (r << 1) | ((lo >> i) & 1);
            q <<= 1;
            if (r >= ud) {
                r -= ud;
                q |= 1;
            }
        }
    }
    if (q > (uint64_t)INT64_MAX) {
        return INT64_MAX;
    }
    if (rem != NULL) {
        *rem = (int64_t)r;
    }
    return (int64_t)q;
}
