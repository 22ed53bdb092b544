/* LIMITER's states in their identity's state string, as the refusal cache
 * reads them (docs/limiter.md, "State"): a gcra limit key
 * "<prefix>{<tag>}<rest>#<i>:gcra" names the record "<rest>#<i>:gcra" (its
 * field) of the string "<prefix>{<tag>}", whose value is the records one
 * after another, each "<L>:<field>=<value>;" (L the field's bytes in
 * decimal). A record's value is a TAT alone or "<expire_at_ms>|<TAT>".
 * (The other algorithms keep keys of their own, and so does a gcra level
 * below a second "*", which the cache reads as a key: store_limit's
 * own_key.) Pure functions: the cache's I/O (refusal.c) calls them. */
#ifndef PX_PROXY_LIMITER_REFUSAL_FIELD_H
#define PX_PROXY_LIMITER_REFUSAL_FIELD_H

#include <stddef.h>
#include <stdint.h>

/* The length of the state string a limit key of `klen` bytes lives in (the
 * key's name up to its hash tag's closing brace; the rest is the field), or 0
 * when the key is of no such form (no non-empty tag, no "#<i>:<algorithm>"
 * of an algorithm kept in the string: sliding_log and concurrency keep keys
 * of their own). */
size_t refusal_field_hash_len(const char *key, size_t klen);

/* Finds the record of `field` (flen bytes) in a state string's value
 * (len bytes): 1 and the record's value at *val (*vlen bytes, inside s);
 * 0 when the string holds no record of it; -1 when the string is not a
 * sequence of well-formed records (or names the field twice). */
int refusal_field_record(const char *s, size_t len, const char *field,
                         size_t flen, const char **val, size_t *vlen);

/* Splits a record's value, "<expire_at_ms>|<payload>" or a gcra TAT alone
 * (which expires at its ms: its digits but the last six): 1 and its expiry
 * (*expire_ms, Unix ms; 0: never) and payload; 0 when it is of no such
 * form. */
int refusal_field_value(const char *v, size_t len, int64_t *expire_ms,
                        const char **payload, size_t *plen);

/* A decimal as the scripts write a field (no sign, no leading zero, at
 * most 2^53 - 1), or -1 for anything else. */
int64_t refusal_field_int(const char *s, size_t len);

#endif
