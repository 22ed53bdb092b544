/* The embedded store's table: byte-string keys -> the caller's values,
 * each with the wall-clock time it expires, at most `max_keys` of them
 * and at most `max_bytes` bytes, keys included.
 *
 * Room is made only from expired entries (the earliest expired first):
 * an entry's expiry is the instant its state becomes equal to no state,
 * so dropping it changes no decision. A live entry is never evicted:
 * forgetting a limited key would admit it again at once (a flood of new
 * identities could otherwise buy any key a fresh allowance). When no
 * expired entry is left, store_map_room says no and the caller refuses
 * the new key. Each entry is in two places: the index (lookup) and a
 * min-heap on the expiry time (the earliest expiry on top), so finding
 * the victim, and expiring everything past due, costs O(log n) per
 * entry, never a scan. Pure: no loop, no clock (every call is given `now`), so
 * the eviction order and the byte count are unit-tested
 * (tests/unit/test_store_map.c). */
#ifndef PX_PROXY_LIMITER_STORE_MAP_H
#define PX_PROXY_LIMITER_STORE_MAP_H

#include <stddef.h>
#include <stdint.h>

#include "proxy/core/hmap.h"

struct store_map_node;

/* Frees a value the map drops (evicted, expired, replaced, deleted). */
typedef void store_map_free_fn(void *val);

struct store_map {
    struct hmap index;            /* key -> struct store_map_node
                                     (owned) */
    size_t count;                 /* entries */
    size_t max_keys;              /* most entries; 0: no bound */
    size_t bytes;                 /* charged now: every entry's
                                     store_map_entry_bytes */
    size_t max_bytes;             /* most bytes; 0: no bound */
    struct store_map_node **heap; /* owned: the count entries, a
                                     min-heap on expire_at_ns */
    size_t heap_cap;              /* slots of heap */
    store_map_free_fn *free_val;  /* frees values the map drops */
    uint64_t evicted_expired;     /* full: an expired entry made room */
    uint64_t freed_bytes;         /* bytes of dropped entries, ever (the
                                     caller's cue to give memory back) */
};

/* An empty map of at most max_keys entries and max_bytes bytes (0: no
 * bound) whose dropped values go to free_val (NULL: the caller's). */
void store_map_init(struct store_map *m, size_t max_keys, size_t max_bytes,
                    store_map_free_fn *free_val);

/* What one entry is charged: its node with the key, the index's copy of
 * the key and its link (5 words), its heap slot, and `val_bytes` (what
 * the caller allocated for the value). */
size_t store_map_entry_bytes(size_t klen, size_t val_bytes);

/* Makes room for `new_keys` more entries and `grow` more bytes (the sum
 * of what the writes to come change, negative when they shrink), dropping
 * expired entries at `now`, earliest first, and nothing live. 1 when the
 * writes fit then, else 0 (nothing live was touched). */
int store_map_room(struct store_map *m, size_t new_keys, int64_t grow,
                   int64_t now);

/* The bytes charged for key's value (its val_bytes), 0 when absent. */
size_t store_map_val_bytes(const struct store_map *m, const char *key,
                           size_t len);

/* Frees every entry and value. */
void store_map_free(struct store_map *m);

/* The value of key while it lives at `now` (now < its expiry); an expired
 * entry is dropped and NULL returned. */
void *store_map_get(struct store_map *m, const char *key, size_t len,
                    int64_t now);

/* Sets key to `val` (taken, charged `val_bytes`), expiring at
 * `expire_at_ns`. An old value other than `val` is
 * freed. Never evicts: the caller asked store_map_room first (a set
 * beyond the bounds is held, and counted in `bytes`). */
void store_map_set(struct store_map *m, const char *key, size_t len, void *val,
                   size_t val_bytes, int64_t expire_at_ns);

/* Drops key (freeing its value). 1 when it was there, else 0. */
int store_map_del(struct store_map *m, const char *key, size_t len);

/* Drops up to `budget` entries expired at `now`, earliest first. Returns
 * how many. */
size_t store_map_expire(struct store_map *m, int64_t now, size_t budget);

#endif /* PX_PROXY_LIMITER_STORE_MAP_H */
