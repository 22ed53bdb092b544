/* GCRA as redis-cell's CL.THROTTLE computes it (see gcra.h and
 * docs/ARCHITECTURE.md "CL.THROTTLE, exactly").
 *
 * Flow: the limiter handler parses the request with gcra_parse_throttle()
 * (or builds the parameters from limits.yaml with gcra_params_init()), then
 * either decides in process with gcra_decide() (embedded store) or calls
 * algorithms/gcra.lua with gcra_script_args() and turns the reply into the
 * five integers with gcra_decide_from_script(). Both paths end in
 * gcra_decide(), so the script and the embedded store cannot drift apart
 * without the differential test noticing.
 *
 * Every duration is an int64 of nanoseconds. Arithmetic that can overflow
 * is checked and reported, never wrapped (UBSan is on, and redis-cell
 * panics there). */
#include "algorithms/gcra.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* Nanoseconds per microsecond: redis-cell divides whole microseconds. */
#define GCRA_NS_PER_US INT64_C(1000)

/* Microseconds per second, the range of TIME's second element. */
#define GCRA_US_PER_SEC INT64_C(1000000)

/* 2^63 as a double: the first value a double-to-int64 cast cannot hold. */
#define GCRA_TWO_POW_63 9223372036854775808.0

/* redis-cell reads a stored -1 as "no TAT" (its own missing-key marker). */
#define GCRA_TAT_NONE INT64_C(-1)

/* Arguments of CL.THROTTLE including its name: without and with quantity. */
#define GCRA_ARGC_MIN 5
#define GCRA_ARGC_MAX 6

/* ---------------- Arguments ---------------- */

int gcra_parse_int64(const char *s, size_t len, int64_t *out)
{
    size_t i = 0;
    int neg = 0;
    uint64_t v = 0;
    /* The magnitude of INT64_MIN, one more than INT64_MAX. */
    const uint64_t max_neg = (uint64_t)INT64_MAX + 1;

    if (len > 0 && (s[0] == '+' || s[0] == '-')) {
        neg = s[0] == '-';
        i = 1;
    }
    if (i == len) {
        return GCRA_EARGS;
    }
    for (; i < len; i++) {
        unsigned d = (unsigned)((unsigned char)s[i] - '0');
        if (d > 9) {
            return GCRA_EARGS;
        }
        if (v > (max_neg - d) / 10) {
            return GCRA_EARGS;
        }
        v = v * 10 + d;
    }
    if (neg) {
        /* -(v - 1) - 1 reaches INT64_MIN without overflowing. */
        *out = v == 0 ? 0 : -(int64_t)(v - 1) - 1;
    } else if (v > (uint64_t)INT64_MAX) {
        return GCRA_EARGS;
    } else {
        *out = (int64_t)v;
    }
    return GCRA_OK;
}

/* trunc(x) as Rust's `x as i64` computes it: NaN gives 0, and values out
 * of range saturate, where a C cast would be undefined. */
static int64_t gcra_saturate(double x)
{
    if (x != x) {
        return 0;
    }
    if (x >= GCRA_TWO_POW_63) {
        return INT64_MAX;
    }
    if (x <= -GCRA_TWO_POW_63) {
        return INT64_MIN;
    }
    return (int64_t)x;
}

/* The checks and derived values common to both initialisers; `period_ns`
 * is the period already in nanoseconds (count and period non-zero). */
static int gcra_params_derive(struct gcra_params *p, int64_t period_ns,
                              const char **err)
{
    /* |period_ns / count| <= |period_ns|, so this never saturates. */
    p->ei_ns = gcra_saturate((double)period_ns / (double)p->count);
    if (p->ei_ns == 0) {
        *err = GCRA_ERR_ZERO_RATE;
        return GCRA_EARGS;
    }
    if (p->ei_ns < 0) {
        *err = GCRA_ERR_NEG_RATE;
        return GCRA_EARGS;
    }
    if (p->quantity < 0) {
        *err = GCRA_ERR_NEG_QUANTITY;
        return GCRA_EARGS;
    }
    if (__builtin_add_overflow(p->max_burst, 1, &p->limit) ||
        __builtin_mul_overflow(p->ei_ns, p->limit, &p->dvt_ns) ||
        __builtin_mul_overflow(p->ei_ns, p->quantity, &p->inc_ns)) {
        *err = GCRA_ERR_RANGE;
        return GCRA_ERANGE;
    }
    return GCRA_OK;
}

int gcra_params_init(struct gcra_params *p, int64_t max_burst, int64_t count,
                     int64_t period_s, int64_t quantity, const char **err)
{
    int64_t period_ns;

    memset(p, 0, sizeof(*p));
    p->max_burst = max_burst;
    p->count = count;
    p->period_s = period_s;
    p->quantity = quantity;

    /* redis-cell returns a zero rate for a zero count or period before it
     * looks at the period's nanoseconds. */
    if (count == 0 || period_s == 0) {
        *err = GCRA_ERR_ZERO_RATE;
        return GCRA_EARGS;
    }
    if (__builtin_mul_overflow(period_s, RL_NS_PER_SEC, &period_ns)) {
        *err = GCRA_ERR_RANGE;
        return GCRA_ERANGE;
    }
    return gcra_params_derive(p, period_ns, err);
}

int gcra_params_init_ns(struct gcra_params *p, int64_t max_burst, int64_t count,
                        int64_t period_ns, int64_t quantity, const char **err)
{
    memset(p, 0, sizeof(*p));
    p->max_burst = max_burst;
    p->count = count;
    p->period_s = period_ns / RL_NS_PER_SEC;
    p->quantity = quantity;
    if (count == 0 || period_ns == 0) {
        *err = GCRA_ERR_ZERO_RATE;
        return GCRA_EARGS;
    }
    return gcra_params_derive(p, period_ns, err);
}

int gcra_parse_throttle(struct gcra_params *p, int argc,
                        const char *const *argv, const size_t *lens,
                        char *errbuf, size_t errlen)
{
    /* B, C, P and Q, in the order redis-cell parses them. */
    int64_t v[4] = { 0, 0, 0, 1 };
    const char *err = NULL;
    int rc;

    if (argc < GCRA_ARGC_MIN || argc > GCRA_ARGC_MAX) {
        snprintf(errbuf, errlen, "%s", GCRA_ERR_USAGE);
        return GCRA_EARGS;
    }
    for (int i = 2; i < argc; i++) {
        if (gcra_parse_int64(argv[i], lens[i], &v[i - 2]) != GCRA_OK) {
            int n = lens[i] > GCRA_ERRBUF_LEN ? GCRA_ERRBUF_LEN : (int)lens[i];
            snprintf(errbuf, errlen, "%s%.*s", GCRA_ERR_NOT_INT, n, argv[i]);
            return GCRA_EARGS;
        }
    }
    rc = gcra_params_init(p, v[0], v[1], v[2], v[3], &err);
    if (rc != GCRA_OK) {
        snprintf(errbuf, errlen, "%s", err);
    }
    return rc;
}

/* ---------------- The decision ---------------- */

/* GCRA rule, step 7: what is left, computed in doubles over whole microseconds
 * exactly as redis-cell does. A sub-microsecond EI divides by zero there;
 * the results of that (inf or NaN, saturated) are spelled out here. */
static int64_t gcra_remaining(const struct gcra_params *p, int64_t next_ns)
{
    int64_t next_us, ei_us;

    if (next_ns <= -p->ei_ns) {
        return 0;
    }
    next_us = next_ns / GCRA_NS_PER_US;
    ei_us = p->ei_ns / GCRA_NS_PER_US;
    if (ei_us == 0) {
        if (next_us == 0) {
            return 0;
        }
        return next_us > 0 ? INT64_MAX : INT64_MIN;
    }
    return gcra_saturate((double)next_us / (double)ei_us);
}

int gcra_decide(const struct gcra_params *p, int have_tat, int64_t tat_ns,
                int64_t now_ns, struct gcra_result *out, const char **err)
{
    int64_t tat = now_ns, base, new_tat, ttl, diff = 0, next;
    int limited;

    assert(now_ns >= 0 && p->ei_ns > 0 && p->inc_ns >= 0);
    memset(out, 0, sizeof(*out));
    if (have_tat && tat_ns != GCRA_TAT_NONE) {
        tat = tat_ns;
    }
    base = tat > now_ns ? tat : now_ns;
    if (__builtin_add_overflow(base, p->inc_ns, &new_tat)) {
        goto range;
    }
    /* diff = now - (new_tat - DVT). now - new_tat is in [-INT64_MAX, 0], so
     * adding a DVT >= 0 cannot overflow; a negative DVT makes diff < 0. */
    if (p->dvt_ns < 0) {
        limited = 1;
    } else {
        diff = (now_ns - new_tat) + p->dvt_ns;
        limited = diff < 0;
    }

    out->d.limited = limited;
    out->d.limit = p->limit;
    out->d.retry_after_ns = -RL_NS_PER_SEC;
    if (limited) {
        /* INC <= DVT implies DVT >= 0, so diff was computed. */
        if (p->inc_ns <= p->dvt_ns) {
            out->d.retry_after_ns = -diff;
        }
        if (__builtin_sub_overflow(tat, now_ns, &ttl)) {
            goto range;
        }
        out->write = GCRA_WRITE_NONE;
    } else {
        ttl = new_tat - now_ns;
        out->new_tat_ns = new_tat;
        out->expiry_ms = ttl / RL_NS_PER_MS;
        if (out->expiry_ms > 0) {
            out->write = GCRA_WRITE_SET;
        } else {
            out->write = have_tat ? GCRA_WRITE_DEL : GCRA_WRITE_NONE;
        }
    }
    if (__builtin_sub_overflow(p->dvt_ns, ttl, &next)) {
        goto range;
    }
    out->d.remaining = gcra_remaining(p, next);
    out->d.reset_after_ns = ttl;
    return GCRA_OK;

range:
    memset(out, 0, sizeof(*out));
    *err = GCRA_ERR_TAT_RANGE;
    return GCRA_ERANGE;
}

/* ---------------- LIMITER ADJUST ---------------- */

int gcra_adjust(const struct gcra_params *p, int have_tat, int64_t tat_ns,
                int64_t now_ns, int64_t delta, struct gcra_result *out,
                const char **err)
{
    struct gcra_params one = *p;
    int64_t tat = now_ns, next = 0, prod, cap;
    enum gcra_write write = GCRA_WRITE_NONE;
    int keep = have_tat; /* the key exists after the change */

    one.quantity = 1;
    one.inc_ns = one.ei_ns;
    if (have_tat && tat_ns != GCRA_TAT_NONE) {
        tat = tat_ns;
    }
    /* The peek validates the TAT before anything is decided. */
    if (gcra_decide(&one, have_tat, tat_ns, now_ns, out, err) != GCRA_OK) {
        return GCRA_ERANGE;
    }
    if (delta > 0) {
        int64_t base = tat > now_ns ? tat : now_ns;

        /* The peek of cost 1 passed, so base + EI fits. */
        cap = INT64_MAX - one.ei_ns;
        if (__builtin_mul_overflow(delta, one.ei_ns, &prod) ||
            __builtin_add_overflow(base, prod, &next) || next > cap) {
            next = cap > base ? cap : base;
        }
        write = GCRA_WRITE_SET;
    } else if (delta < 0 && tat > now_ns) {
        /* |delta| <= 2^53 - 1: its negation fits. */
        if (__builtin_mul_overflow(-delta, one.ei_ns, &prod) ||
            tat - now_ns <= prod) {
            next = now_ns;
        } else {
            next = tat - prod;
        }
        write = GCRA_WRITE_SET;
    }
    if (write == GCRA_WRITE_SET) {
        int64_t expiry_ms = (next - now_ns) / RL_NS_PER_MS;

        if (expiry_ms <= 0) {
            write = have_tat ? GCRA_WRITE_DEL : GCRA_WRITE_NONE;
            keep = 0;
        } else {
            keep = 1;
        }
        if (gcra_decide(&one, keep, next, now_ns, out, err) != GCRA_OK) {
            return GCRA_ERANGE;
        }
        out->write = write;
        out->new_tat_ns = next;
        out->expiry_ms = write == GCRA_WRITE_SET ? expiry_ms : 0;
        return GCRA_OK;
    }
    /* Nothing changes: the peek of cost 1 as it is. */
    out->write = GCRA_WRITE_NONE;
    out->new_tat_ns = 0;
    out->expiry_ms = 0;
    return GCRA_OK;
}

/* ---------------- The Lua script's side ---------------- */

/* Writes d as "s ns" with s = floor(d / 1e9) and 0 <= ns < 1e9. */
/* Writes v in decimal and a NUL at dst (GCRA_SCRIPT_ARG_MAX bytes): made
 * for every check, so without snprintf's format parsing. */
static void gcra_put_i64(char *dst, int64_t v)
{
    char tmp[GCRA_SCRIPT_ARG_MAX];
    char *p = tmp + sizeof(tmp);
    /* As unsigned, so that INT64_MIN negates. */
    uint64_t m = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;

    *--p = '\0';
    do {
        *--p = (char)('0' + m % 10);
        m /= 10;
    } while (m != 0);
    if (v < 0) {
        *--p = '-';
    }
    memcpy(dst, p, (size_t)(tmp + sizeof(tmp) - p));
}

static void gcra_split(int64_t d, char *s, char *ns)
{
    int64_t sec = d / RL_NS_PER_SEC;
    int64_t rem = d % RL_NS_PER_SEC;

    if (rem < 0) {
        rem += RL_NS_PER_SEC;
        sec--;
    }
    gcra_put_i64(s, sec);
    gcra_put_i64(ns, rem);
}

void gcra_script_args(const struct gcra_params *p, struct gcra_script_args *out)
{
    gcra_split(p->inc_ns, out->v[0], out->v[1]);
    gcra_split(p->dvt_ns, out->v[2], out->v[3]);
    for (int i = 0; i < GCRA_SCRIPT_NARGS; i++) {
        out->len[i] = strlen(out->v[i]);
    }
}

void gcra_params_peek(const struct gcra_params *p, struct gcra_params *out)
{
    *out = *p;
    out->quantity = 0;
    out->inc_ns = 0;
}

int gcra_decide_stored(const struct gcra_params *p,
                       const struct gcra_script_reply *r,
                       struct gcra_result *out, const char **err)
{
    int64_t now_ns, tat = 0;

    memset(out, 0, sizeof(*out));
    if (r->now_s < 0 || r->now_us < 0 || r->now_us >= GCRA_US_PER_SEC ||
        __builtin_mul_overflow(r->now_s, RL_NS_PER_SEC, &now_ns) ||
        __builtin_add_overflow(now_ns, r->now_us * GCRA_NS_PER_US, &now_ns)) {
        *err = GCRA_ERR_SCRIPT;
        return GCRA_ESCRIPT;
    }
    if (r->tat != NULL && gcra_parse_int64(r->tat, r->tat_len, &tat) != 0) {
        *err = GCRA_ERR_SCRIPT;
        return GCRA_ESCRIPT;
    }
    return gcra_decide(p, r->tat != NULL, tat, now_ns, out, err);
}

int gcra_decide_from_script(const struct gcra_params *p,
                            const struct gcra_script_reply *r,
                            struct gcra_result *out, const char **err)
{
    int rc;

    if (r->limited != 0 && r->limited != 1) {
        memset(out, 0, sizeof(*out));
        *err = GCRA_ERR_SCRIPT;
        return GCRA_ESCRIPT;
    }
    rc = gcra_decide_stored(p, r, out, err);
    if (rc != GCRA_OK) {
        return rc;
    }
    if (out->d.limited != (int)r->limited) {
        memset(out, 0, sizeof(*out));
        *err = GCRA_ERR_MISMATCH;
        return GCRA_ESCRIPT;
    }
    return GCRA_OK;
}
