/* Glob-style matching as Redis does it for PSUBSCRIBE patterns and KEYS:
 * `*` any run of bytes, `?` any one byte, `[abc]`, `[^abc]`, `[a-z]`
 * classes, and `\x` for a literal x. Leaf layer: bytes in, yes or no. */
#ifndef PX_PARSER_GLOB_H
#define PX_PARSER_GLOB_H

#include <stddef.h>

/* 1 when str[0..slen) matches pat[0..plen), else 0. Linear in practice:
 * a `*` is never retried from more than one place. */
int glob_match(const char *pat, size_t plen, const char *str, size_t slen);

#endif /* PX_PARSER_GLOB_H */
