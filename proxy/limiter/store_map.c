/* The embedded store's bounded table (see store_map.h).
 *
 *   index: key -> node (an hmap)                   lookup by key
 *   lru:  head (most recent) <-> ... <-> tail       the LRU victim: tail
 *   heap: heap[0] expires first; node->hidx is its slot
 *
 * Why expired first, then least recently used: an expired entry reads as
 * missing already, so dropping it changes no reply; a live entry dropped
 * reads as missing from then on, a fresh state (a full bucket, an empty
 * window), which is what its key would be after it expired, and the key
 * least recently used is the one least likely to be asked for again
 * before then. A key in use keeps moving to the front, so it stays while
 * fewer than max_keys other keys pass it. */
#include "proxy/limiter/store_map.h"

#include <string.h>

#include "proxy/core/hmap.h"
#include "proxy/core/util.h"

/* First heap size. */
#define STORE_MAP_MIN_HEAP 64

/* One entry: owned by the map (store_map_drop frees it), the value of its
 * key in map->index, linked in map->lru and placed in map->heap. */
struct store_map_node {
    struct queue lru;     /* link in map->lru */
    int64_t expire_at_ns; /* wall clock when it is gone */
    size_t hidx;          /* its slot in map->heap */
    void *val;            /* owned through map->free_val */
    size_t len;           /* key bytes */
    char key[];           /* the key, copied: an entry found
                             through the heap or the LRU leaves the
                             index by it */
};

void store_map_init(struct store_map *m, size_t max_keys,
                    store_map_free_fn *free_val)
{
    memset(m, 0, sizeof(*m));
    m->max_keys = max_keys;
    m->free_val = free_val;
    hmap_init(&m->index);
    queue_init(&m->lru);
}

static void store_map_free_val(struct store_map *m, void *val)
{
    if (m->free_val != NULL) {
        m->free_val(val);
    }
}

void store_map_free(struct store_map *m)
{
    size_t i;

    for (i = 0; i < m->count; i++) {
        store_map_free_val(m, m->heap[i]->val);
        px_free(m->heap[i]);
    }
    px_free(m->heap);
    hmap_free(&m->index, NULL);
    store_map_init(m, m->max_keys, m->free_val);
}

/* ---------------- The heap on expiry ---------------- */

static void store_map_heap_place(struct store_map *m, size_t i,
                                 struct store_map_node *n)
{
    m->heap[i] = n;
    n->hidx = i;
}

static void store_map_sift_up(struct store_map *m, size_t i)
{
    struct store_map_node *n = m->heap[i];

    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (m->heap[parent]->expire_at_ns <= n->expire_at_ns) {
            break;
        }
        store_map_heap_place(m, i, m->heap[parent]);
        i = parent;
    }
    store_map_heap_place(m, i, n);
}

static void store_map_sift_down(struct store_map *m, size_t i)
{
    struct store_map_node *n = m->heap[i];
    size_t nn = m->count;

    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= nn) {
            break;
        }
        if (child + 1 < nn &&
            m->heap[child + 1]->expire_at_ns < m->heap[child]->expire_at_ns) {
            child++;
        }
        if (m->heap[child]->expire_at_ns >= n->expire_at_ns) {
            break;
        }
        store_map_heap_place(m, i, m->heap[child]);
        i = child;
    }
    store_map_heap_place(m, i, n);
}

/* Puts n back in order after its expiry changed. */
static void store_map_heap_fix(struct store_map *m, struct store_map_node *n)
{
    size_t i = n->hidx;

    if (i > 0 && m->heap[(i - 1) / 2]->expire_at_ns > n->expire_at_ns) {
        store_map_sift_up(m, i);
    } else {
        store_map_sift_down(m, i);
    }
}

/* ---------------- Dropping an entry ---------------- */

/* Unlinks node n from everything and frees it and its value. */
static void store_map_drop(struct store_map *m, struct store_map_node *n)
{
    size_t i = n->hidx;

    hmap_del(&m->index, n->key, n->len);
    queue_remove(&n->lru);
    m->count--;
    if (i < m->count) {
        store_map_heap_place(m, i, m->heap[m->count]);
        store_map_heap_fix(m, m->heap[i]);
    }
    store_map_free_val(m, n->val);
    px_free(n);
}

/* ---------------- The interface ---------------- */

void *store_map_get(struct store_map *m, const char *key, size_t len,
                    int64_t now)
{
    struct store_map_node *n = hmap_get(&m->index, key, len);

    if (n == NULL) {
        return NULL;
    }
    if (n->expire_at_ns <= now) {
        store_map_drop(m, n);
        return NULL;
    }
    queue_remove(&n->lru);
    queue_insert_head(&m->lru, &n->lru);
    return n->val;
}

/* Full: makes room for one entry. */
static void store_map_evict(struct store_map *m, int64_t now)
{
    if (m->heap[0]->expire_at_ns <= now) {
        m->evicted_expired++;
        store_map_drop(m, m->heap[0]);
        return;
    }
    m->evicted_lru++;
    store_map_drop(
        m, container_of(queue_tail(&m->lru), struct store_map_node, lru));
}

void store_map_set(struct store_map *m, const char *key, size_t len, void *val,
                   int64_t expire_at_ns, int64_t now)
{
    struct store_map_node *n = hmap_get(&m->index, key, len);

    if (n != NULL) {
        if (n->val != val) {
            store_map_free_val(m, n->val);
            n->val = val;
        }
        n->expire_at_ns = expire_at_ns;
        store_map_heap_fix(m, n);
        queue_remove(&n->lru);
        queue_insert_head(&m->lru, &n->lru);
        return;
    }
    if (m->max_keys > 0 && m->count >= m->max_keys) {
        store_map_evict(m, now);
    }
    if (m->count >= m->heap_cap) {
        m->heap_cap = m->heap_cap ? m->heap_cap * 2 : STORE_MAP_MIN_HEAP;
        m->heap = px_realloc(m->heap, m->heap_cap * sizeof(*m->heap));
    }
    n = px_malloc(sizeof(*n) + len);
    n->expire_at_ns = expire_at_ns;
    n->val = val;
    n->len = len;
    memcpy(n->key, key, len);
    hmap_put(&m->index, key, len, n);
    queue_insert_head(&m->lru, &n->lru);
    store_map_heap_place(m, m->count, n);
    m->count++;
    store_map_sift_up(m, n->hidx);
}

int store_map_del(struct store_map *m, const char *key, size_t len)
{
    struct store_map_node *n = hmap_get(&m->index, key, len);

    if (n == NULL) {
        return 0;
    }
    store_map_drop(m, n);
    return 1;
}

size_t store_map_expire(struct store_map *m, int64_t now, size_t budget)
{
    size_t n = 0;

    while (n < budget && m->count > 0 && m->heap[0]->expire_at_ns <= now) {
        store_map_drop(m, m->heap[0]);
        n++;
    }
    return n;
}
