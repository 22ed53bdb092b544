/* Chained hash map (see hmap.h). FNV-1a over the key bytes; the table
 * doubles when it holds more entries than buckets, so chains stay short. */
#include "proxy/core/hmap.h"

#include <string.h>

#include "proxy/core/util.h"

/* First table size. */
#define HMAP_MIN_BUCKETS 64

struct hmap_entry {
    struct hmap_entry *next; /* owned: rest of the chain */
    uint64_t hash;           /* of the key */
    void *val;               /* the caller's */
    size_t len;              /* key bytes */
    char key[];              /* the key, copied */
};

static uint64_t hmap_hash(const char *p, size_t n)
{
    uint64_t h = UINT64_C(14695981039346656037);
    size_t k;

    for (k = 0; k < n; k++) {
        h ^= (unsigned char)p[k];
        h *= UINT64_C(1099511628211);
    }
    return h;
}

void hmap_init(struct hmap *m)
{
    m->buckets = NULL;
    m->nbuckets = 0;
    m->count = 0;
}

void hmap_free(struct hmap *m, hmap_free_fn *free_val)
{
    size_t b;

    for (b = 0; b < m->nbuckets; b++) {
        struct hmap_entry *e = m->buckets[b];
        while (e != NULL) {
            struct hmap_entry *next = e->next;
            if (free_val != NULL) {
                free_val(e->val);
            }
            px_free(e);
            e = next;
        }
    }
    px_free(m->buckets);
    hmap_init(m);
}

static struct hmap_entry **hmap_find(const struct hmap *m, const char *key,
                                     size_t len, uint64_t h)
{
    struct hmap_entry **pe;

    if (m->nbuckets == 0) {
        return NULL;
    }
    for (pe = &m->buckets[h & (m->nbuckets - 1)]; *pe != NULL;
         pe = &(*pe)->next) {
        if ((*pe)->hash == h && (*pe)->len == len &&
            memcmp((*pe)->key, key, len) == 0) {
            return pe;
        }
    }
    return NULL;
}

void *hmap_get(const struct hmap *m, const char *key, size_t len)
{
    struct hmap_entry **pe;

    if (m->count == 0) {
        return NULL; /* the usual case of some maps: no key to hash */
    }
    pe = hmap_find(m, key, len, hmap_hash(key, len));

    return pe != NULL ? (*pe)->val : NULL;
}

static void hmap_grow(struct hmap *m)
{
    size_t nb = m->nbuckets ? m->nbuckets * 2 : HMAP_MIN_BUCKETS, b;
    struct hmap_entry **nbk = px_calloc(nb, sizeof(*nbk));

    for (b = 0; b < m->nbuckets; b++) {
        struct hmap_entry *e = m->buckets[b];
        while (e != NULL) {
            struct hmap_entry *next = e->next;
            size_t i = e->hash & (nb - 1);
            e->next = nbk[i];
            nbk[i] = e;
            e = next;
        }
    }
    px_free(m->buckets);
    m->buckets = nbk;
    m->nbuckets = nb;
}

void *hmap_put(struct hmap *m, const char *key, size_t len, void *val)
{
    uint64_t h = hmap_hash(key, len);
    struct hmap_entry **pe = hmap_find(m, key, len, h), *e;
    size_t i;

    if (pe != NULL) {
        void *old = (*pe)->val;
        (*pe)->val = val;
        return old;
    }
    if (m->count >= m->nbuckets) {
        hmap_grow(m);
    }
    e = px_malloc(sizeof(*e) + len);
    e->hash = h;
    e->val = val;
    e->len = len;
    memcpy(e->key, key, len);
    i = h & (m->nbuckets - 1);
    e->next = m->buckets[i];
    m->buckets[i] = e;
    m->count++;
    return NULL;
}

void *hmap_del(struct hmap *m, const char *key, size_t len)
{
    struct hmap_entry **pe = hmap_find(m, key, len, hmap_hash(key, len));
    struct hmap_entry *e;
    void *val;

    if (pe == NULL) {
        return NULL;
    }
    e = *pe;
    *pe = e->next;
    val = e->val;
    px_free(e);
    m->count--;
    return val;
}

void hmap_sweep(struct hmap *m, size_t *cursor, size_t budget,
                int (*drop)(void *val, void *arg), void *arg)
{
    size_t n;

    for (n = 0; n < budget && m->nbuckets > 0; n++) {
        struct hmap_entry **pe;
        if (*cursor >= m->nbuckets) {
            *cursor = 0;
        }
        pe = &m->buckets[*cursor];
        while (*pe != NULL) {
            struct hmap_entry *e = *pe;
            if (drop(e->val, arg)) {
                *pe = e->next;
                px_free(e);
                m->count--;
            } else {
                pe = &e->next;
            }
        }
        (*cursor)++;
    }
}
