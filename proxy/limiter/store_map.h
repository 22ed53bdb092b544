/* The embedded store's table: byte-string keys -> the caller's values,
 * each with the wall-clock time it expires, at most `max_keys` of them.
 *
 * Full, a new key takes the place of the entry that matters least: an
 * expired one first (the one that expired earliest), else the least
 * recently used. Each entry is in three places: the index (lookup),
 * the recency list (a get or set moves it to the front) and a min-heap on
 * the expiry time (the earliest expiry on top), so finding the victim,
 * and expiring everything past due, costs O(log n) per entry, never a
 * scan. Pure: no loop, no clock (every call is given `now`), so the
 * eviction order is unit-tested (tests/unit/test_store_map.c). */
#ifndef PX_PROXY_LIMITER_STORE_MAP_H
#define PX_PROXY_LIMITER_STORE_MAP_H

#include <stddef.h>
#include <stdint.h>

#include "proxy/core/hmap.h"
#include "proxy/core/queue.h"

struct store_map_node;

/* Frees a value the map drops (evicted, expired, replaced, deleted). */
typedef void store_map_free_fn(void *val);

struct store_map {
    struct hmap index;            /* key -> struct store_map_node
                                     (owned) */
    size_t count;                 /* entries */
    size_t max_keys;              /* most entries; 0: no bound */
    struct queue lru;             /* entries, most recently used first */
    struct store_map_node **heap; /* owned: the count entries, a
                                     min-heap on expire_at_ns */
    size_t heap_cap;              /* slots of heap */
    store_map_free_fn *free_val;  /* frees values the map drops */
    uint64_t evicted_expired;     /* full: an expired entry made room */
    uint64_t evicted_lru;         /* full: a live entry made room */
};

/* An empty map of at most max_keys entries (0: no bound) whose dropped
 * values go to free_val (NULL: the caller's). */
void store_map_init(struct store_map *m, size_t max_keys,
                    store_map_free_fn *free_val);

/* Frees every entry and value. */
void store_map_free(struct store_map *m);

/* The value of key while it lives at `now` (now < its expiry), made the
 * most recently used; an expired entry is dropped and NULL returned. */
void *store_map_get(struct store_map *m, const char *key, size_t len,
                    int64_t now);

/* Sets key to `val` (taken), expiring at `expire_at_ns`, most recently
 * used. An old value other than `val` is freed. A new key in a full map
 * first evicts one entry: the earliest expired (at `now`), else the least
 * recently used. */
void store_map_set(struct store_map *m, const char *key, size_t len, void *val,
                   int64_t expire_at_ns, int64_t now);

/* Drops key (freeing its value). 1 when it was there, else 0. */
int store_map_del(struct store_map *m, const char *key, size_t len);

/* Drops up to `budget` entries expired at `now`, earliest first. Returns
 * how many. */
size_t store_map_expire(struct store_map *m, int64_t now, size_t budget);

#endif /* PX_PROXY_LIMITER_STORE_MAP_H */
