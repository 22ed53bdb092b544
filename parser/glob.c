/* Glob matching (see glob.h).
 *
 * Every pattern element but `*` matches exactly one byte, so the classic
 * greedy walk with one backtrack point is exact: on a mismatch, the last
 * `*` swallows one more byte and the walk resumes after it. Classes follow
 * Redis's rules: `^` first negates, `\` escapes inside, `a-z` is a range
 * (either way round), and a class left open runs to the end of the
 * pattern. */
#include "parser/glob.h"

/* Matches the element at pat[*pi] (not a `*`) against byte `ch`, and moves
 * *pi past it. */
static int glob_one(const char *pat, size_t plen, size_t *pi, char ch)
{
    size_t i = *pi;
    int neg = 0, hit = 0;

    if (pat[i] == '?') {
        *pi = i + 1;
        return 1;
    }
    if (pat[i] == '\\' && i + 1 < plen) {
        *pi = i + 2;
        return pat[i + 1] == ch;
    }
    if (pat[i] != '[') {
        *pi = i + 1;
        return pat[i] == ch;
    }
    i++;
    if (i < plen && pat[i] == '^') {
        neg = 1;
        i++;
    }
    while (i < plen && pat[i] != ']') {
        if (pat[i] == '\\' && i + 1 < plen) {
            hit |= pat[i + 1] == ch;
            i += 2;
        } else if (i + 2 < plen && pat[i + 1] == '-') {
            unsigned char lo = (unsigned char)pat[i];
            unsigned char hi = (unsigned char)pat[i + 2];
            unsigned char c = (unsigned char)ch;
            if (lo > hi) {
                unsigned char t = lo;
                lo = hi;
                hi = t;
            }
            hit |= c >= lo && c <= hi;
            i += 3;
        } else {
            hit |= pat[i] == ch;
            i++;
        }
    }
    *pi = i < plen ? i + 1 : plen;
    return neg ? !hit : hit;
}

int glob_match(const char *pat, size_t plen, const char *str, size_t slen)
{
    size_t pi = 0, si = 0, star_p = 0, star_s = 0;
    int star = 0;

    while (si < slen) {
        if (pi < plen && pat[pi] == '*') {
            while (pi < plen && pat[pi] == '*') {
                pi++;
            }
            if (pi == plen) {
                return 1;
            }
            star = 1;
            star_p = pi;
            star_s = si;
            continue;
        }
        if (pi < plen) {
            size_t at = pi;
            if (glob_one(pat, plen, &pi, str[si])) {
                si++;
                continue;
            }
            pi = at;
        }
        if (!star) {
            return 0;
        }
        pi = star_p;
        si = ++star_s;
    }
    while (pi < plen && pat[pi] == '*') {
        pi++;
    }
    return pi == plen;
}
