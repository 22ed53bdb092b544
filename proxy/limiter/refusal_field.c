/* The parsing of LIMITER's state strings for the refusal cache (see
 * refusal_field.h). The scripts' encoding (algorithms/lua/hstate.lua) is
 * the reference: these functions accept exactly what it writes and refuse
 * the rest, which the cache then leaves to Redis. */
#include "proxy/limiter/refusal_field.h"

#include <string.h>

/* The largest integer a script writes: 2^53 - 1. */
#define REFUSAL_FIELD_MAX INT64_C(9007199254740991)

/* The algorithms kept in the state string, as their keys end: gcra's
 * levels (the hash states keep their own keys: emulating their commands on
 * a string cost Redis two to three times the commands themselves). */
static const char *const refusal_field_algos[] = {
    "gcra",
};

size_t refusal_field_hash_len(const char *key, size_t klen)
{
    const char *open = memchr(key, '{', klen), *close, *colon = NULL,
               *end = key + klen, *p;
    size_t i, alen;

    if (open == NULL) {
        return 0;
    }
    close = memchr(open + 1, '}', (size_t)(end - open - 1));
    if (close == NULL || close == open + 1) {
        return 0;
    }
    for (p = end; p > close + 1; p--) {
        if (p[-1] == ':') {
            colon = p - 1;
            break;
        }
    }
    if (colon == NULL) {
        return 0;
    }
    /* "#<digits>" just before the colon. */
    for (p = colon; p > close + 1 && p[-1] >= '0' && p[-1] <= '9'; p--) {
    }
    if (p == colon || p == close + 1 || p[-1] != '#') {
        return 0;
    }
    alen = (size_t)(end - colon - 1);
    for (i = 0; i < sizeof(refusal_field_algos) / sizeof(*refusal_field_algos);
         i++) {
        if (strlen(refusal_field_algos[i]) == alen &&
            memcmp(refusal_field_algos[i], colon + 1, alen) == 0) {
            return (size_t)(close + 1 - key);
        }
    }
    return 0;
}

int refusal_field_record(const char *s, size_t len, const char *field,
                         size_t flen, const char **val, size_t *vlen)
{
    const char *p = s, *end = s + len, *digits, *f, *semi;
    size_t l;
    int found = 0;

    /* Every record is checked, not only those up to the one sought: a
     * string that is not all records was not written by the scripts, and
     * what it seems to hold is no state. */
    while (p < end) {
        /* L: 1 to 9 digits, no leading zero, then ':'. */
        for (digits = p, l = 0; p < end && *p >= '0' && *p <= '9'; p++) {
            l = l * 10 + (size_t)(*p - '0');
        }
        if (p == digits || p - digits > 9 ||
            (*digits == '0' && p > digits + 1) || p == end || *p != ':' ||
            l > (size_t)(end - p - 1)) {
            return -1;
        }
        f = p + 1;
        p = f + l;
        if (p == end || *p != '=') {
            return -1;
        }
        semi = memchr(p + 1, ';', (size_t)(end - p - 1));
        if (semi == NULL) {
            return -1;
        }
        if (l == flen && memcmp(f, field, flen) == 0) {
            if (found) {
                return -1;
            }
            found = 1;
            *val = p + 1;
            *vlen = (size_t)(semi - p - 1);
        }
        p = semi + 1;
    }
    return found;
}

int64_t refusal_field_int(const char *s, size_t len)
{
    int64_t x = 0;
    size_t i;

    if (len == 0 || len > 18 || (len > 1 && s[0] == '0')) {
        return -1;
    }
    for (i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return -1;
        }
        x = x * 10 + (s[i] - '0');
    }
    return x <= REFUSAL_FIELD_MAX ? x : -1;
}

int refusal_field_value(const char *v, size_t len, int64_t *expire_ms,
                        const char **payload, size_t *plen)
{
    const char *bar = memchr(v, '|', len);
    int64_t x;

    if (bar == NULL) {
        /* A gcra TAT alone (decimal ns, as the scripts write it on the
         * node's clock) expires at its own ms: its digits but the last
         * six. */
        size_t i;
        if (len <= 6) {
            return 0;
        }
        for (i = len - 6; i < len; i++) {
            if (v[i] < '0' || v[i] > '9') {
                return 0;
            }
        }
        x = refusal_field_int(v, len - 6);
        if (x < 0) {
            return 0;
        }
        *expire_ms = x;
        *payload = v;
        *plen = len;
        return 1;
    }
    x = refusal_field_int(v, (size_t)(bar - v));
    if (x < 0) {
        return 0;
    }
    *expire_ms = x;
    *payload = bar + 1;
    *plen = len - (size_t)(bar + 1 - v);
    return 1;
}
