/* Small chained hash map: byte-string keys -> void * values. Used by the
 * embedded limiter store. Keys are copied; values are the caller's (a free
 * function given at hmap_free/hmap_del releases them). */
#ifndef PX_PROXY_HMAP_H
#define PX_PROXY_HMAP_H

#include <stddef.h>
#include <stdint.h>

struct hmap_entry;

struct hmap {
    struct hmap_entry **buckets; /* owned array of chains */
    size_t nbuckets;             /* power of two, or 0 before first put */
    size_t count;                /* entries */
};

typedef void hmap_free_fn(void *val);

void hmap_init(struct hmap *m);

/* Frees every entry (values through free_val, which may be NULL). */
void hmap_free(struct hmap *m, hmap_free_fn *free_val);

/* The value of key, or NULL. */
void *hmap_get(const struct hmap *m, const char *key, size_t len);

/* Stores val under key (replacing and returning any old value, which the
 * caller frees; NULL when the key is new). */
void *hmap_put(struct hmap *m, const char *key, size_t len, void *val);

/* Removes key; returns its value (the caller frees it) or NULL. */
void *hmap_del(struct hmap *m, const char *key, size_t len);

/* Visits up to `budget` buckets from *cursor (0 to start; it wraps to 0
 * after the last), calling `drop` on each value: when it returns 1 the
 * entry is removed (and the value freed by `drop` itself). Lets the owner
 * expire idle entries a little at a time. */
void hmap_sweep(struct hmap *m, size_t *cursor, size_t budget,
                int (*drop)(void *val, void *arg), void *arg);

#endif /* PX_PROXY_HMAP_H */
