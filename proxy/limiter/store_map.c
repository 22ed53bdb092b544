/* The embedded store's bounded table (see store_map.h).
 *
 *   index: key -> node (an hmap)                   lookup by key
 *   heap: heap[0] expires first; node->hidx is its slot
 *
 * Why only expired entries: an expired entry reads as missing already, so
 * dropping it changes no reply; a live entry dropped would read as missing
 * from then on, a fresh state (a full bucket, an empty window) before its
 * time, and a key refused for a day would be admitted again by anyone
 * able to send max_keys new keys. So no order of use is kept either.
 *
 * Bytes: every entry is charged store_map_entry_bytes when it is set and
 * the same amount is taken off when it is dropped (the node keeps its
 * val_bytes), so `bytes` returns to 0 when the map is empty. */
#include "proxy/limiter/store_map.h"

#include <string.h>

#include "proxy/core/hmap.h"
#include "proxy/core/util.h"

/* First heap size. */
#define STORE_MAP_MIN_HEAP 64

/* One entry: owned by the map (store_map_drop frees it), the value of its
 * key in map->index and placed in map->heap. */
struct store_map_node {
    int64_t expire_at_ns; /* wall clock when it is gone */
    size_t hidx;          /* its slot in map->heap */
    size_t val_bytes;     /* charged for val (store_map_entry_bytes) */
    void *val;            /* owned through map->free_val */
    size_t len;           /* key bytes */
    char key[];           /* the key, copied: an entry found
                             through the heap leaves the index by
                             it */
};

void store_map_init(struct store_map *m, size_t max_keys, size_t max_bytes,
                    store_map_free_fn *free_val)
{
    memset(m, 0, sizeof(*m));
    m->max_keys = max_keys;
    m->max_bytes = max_bytes;
    m->free_val = free_val;
    hmap_init(&m->index);
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
        m->bytes -=
            store_map_entry_bytes(m->heap[i]->len, m->heap[i]->val_bytes);
        store_map_free_val(m, m->heap[i]->val);
        px_free(m->heap[i]);
    }
    PX_ASSERT(m->bytes == 0); /* every entry's charge, and no other */
    px_free(m->heap);
    hmap_free(&m->index, NULL);
    store_map_init(m, m->max_keys, m->max_bytes, m->free_val);
}

size_t store_map_entry_bytes(size_t klen, size_t val_bytes)
{
    return sizeof(struct store_map_node) + klen + 5 * sizeof(void *) + klen +
           sizeof(struct store_map_node *) + val_bytes;
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

    size_t b = store_map_entry_bytes(n->len, n->val_bytes);

    hmap_del(&m->index, n->key, n->len);
    m->count--;
    m->bytes -= b;
    m->freed_bytes += b;
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
    return n->val;
}

/* Whether `new_keys` more entries and `grow` more bytes stay within the
 * bounds. */
static int store_map_fits(const struct store_map *m, size_t new_keys,
                          int64_t grow)
{
    int64_t bytes = (int64_t)m->bytes + grow;

    return (m->max_keys == 0 || m->count + new_keys <= m->max_keys) &&
           (m->max_bytes == 0 || bytes <= (int64_t)m->max_bytes);
}

int store_map_room(struct store_map *m, size_t new_keys, int64_t grow,
                   int64_t now)
{
    while (!store_map_fits(m, new_keys, grow)) {
        if (m->count == 0 || m->heap[0]->expire_at_ns > now) {
            return 0;
        }
        m->evicted_expired++;
        store_map_drop(m, m->heap[0]);
    }
    return 1;
}

size_t store_map_val_bytes(const struct store_map *m, const char *key,
                           size_t len)
{
    const struct store_map_node *n = hmap_get(&m->index, key, len);

    return n != NULL ? n->val_bytes : 0;
}

void store_map_set(struct store_map *m, const char *key, size_t len, void *val,
                   size_t val_bytes, int64_t expire_at_ns)
{
    struct store_map_node *n = hmap_get(&m->index, key, len);

    if (n != NULL) {
        if (n->val != val) {
            store_map_free_val(m, n->val);
            n->val = val;
        }
        m->bytes = m->bytes - n->val_bytes + val_bytes;
        if (val_bytes < n->val_bytes) {
            m->freed_bytes += n->val_bytes - val_bytes;
        }
        n->val_bytes = val_bytes;
        n->expire_at_ns = expire_at_ns;
        store_map_heap_fix(m, n);
        return;
    }
    if (m->count >= m->heap_cap) {
        m->heap_cap = m->heap_cap ? m->heap_cap * 2 : STORE_MAP_MIN_HEAP;
        m->heap = px_realloc(m->heap, m->heap_cap * sizeof(*m->heap));
    }
    n = px_malloc(sizeof(*n) + len);
    n->expire_at_ns = expire_at_ns;
    n->val = val;
    n->val_bytes = val_bytes;
    n->len = len;
    memcpy(n->key, key, len);
    m->bytes += store_map_entry_bytes(len, val_bytes);
    hmap_put(&m->index, key, len, n);
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
