/* LIMITER's states in their identity's state string, as the refusal cache
 * reads them (docs/limiter.md, "State"): a limit key
 * "<prefix>{<tag>}<rest>#<i>:<algorithm>" of gcra or a hash state names
 * the record "<rest>#<i>:<algorithm>" (its field) of the string
 * "<prefix>{<tag>}", whose value is the records one after another, each
 * "<L>:<field>=<value>;" (L the field's bytes in decimal). A record's
 * value is "<expire_at_ms>|<payload>": the payload a TAT (gcra) or
 * "<name>=<value>" pairs joined by ",". Pure functions: the cache's I/O
 * (refusal.c) calls them. */
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

/* The next "<name>=<value>" pair of a hash state's payload from *p (which
 * moves past it and its ","), `end` the payload's end: 1 and the pair; 0
 * at the end; -1 when malformed. */
int refusal_field_pair(const char **p, const char *end, const char **name,
                       size_t *nlen, const char **val, size_t *vlen);

/* A decimal as the scripts write a field (no sign, no leading zero, at
 * most 2^53 - 1), or -1 for anything else. */
int64_t refusal_field_int(const char *s, size_t len);

/* A hash state's payload as the nf fields named in `fields` (the values
 * into f, as refusal_field_int reads them): 1 when every one is there and
 * well formed, else 0. Other names are ignored. */
int refusal_field_hash(const char *pl, size_t plen, const char *const *fields,
                       unsigned nf, int64_t *f);

/* A sliding window's payload (slot start -> count, and "total", left
 * out) as slots: 2 values a slot into `slots` (NULL: only counted).
 * Returns the number of slots, or 0 when it is malformed, empty, or holds
 * more than max. */
size_t refusal_field_slots(const char *pl, size_t plen, int64_t *slots,
                           size_t max);

#endif
