/* The embedded store's bounded table: a full table evicts an expired entry
 * first (the earliest), else the least recently used; gets and sets make
 * an entry the most recent; expiry drops entries earliest first; every
 * dropped value is freed once. Checked case by case, then against a plain
 * model over many random operations. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/limiter/store_map.h"

/* Values are heap ints whose frees are counted. */
static int freed;

static void free_val(void *v)
{
    freed++;
    free(v);
}

static int *val(int x)
{
    int *p = malloc(sizeof(*p));

    cr_assert_not_null(p);
    *p = x;
    return p;
}

static void set(struct store_map *m, const char *k, int x, int64_t exp,
                int64_t now)
{
    store_map_set(m, k, strlen(k), val(x), exp, now);
}

static int has(struct store_map *m, const char *k, int64_t now)
{
    return store_map_get(m, k, strlen(k), now) != NULL;
}

Test(store_map, a_full_map_evicts_an_expired_entry_before_any_live_one)
{
    struct store_map m;

    freed = 0;
    store_map_init(&m, 3, free_val);
    set(&m, "old-live", 1, 1000, 0); /* least recently used, live */
    set(&m, "expiring", 2, 50, 0);   /* expired at 100 */
    set(&m, "new-live", 3, 1000, 0);
    cr_assert(has(&m, "old-live", 10));
    cr_assert(has(&m, "new-live", 20));
    cr_assert(has(&m, "expiring", 30)); /* the most recent; old-live is
                                           the least */
    /* At 100 "expiring" has expired: it goes, although the LRU order
     * would pick old-live. */
    set(&m, "fourth", 4, 1000, 100);
    cr_assert_eq(m.count, 3);
    cr_assert_eq(m.evicted_expired, 1);
    cr_assert_eq(m.evicted_lru, 0);
    cr_assert(has(&m, "old-live", 100));
    cr_assert(has(&m, "new-live", 100));
    cr_assert(has(&m, "fourth", 100));
    cr_assert_eq(freed, 1);
    store_map_free(&m);
    cr_assert_eq(freed, 4);
}

Test(store_map, with_nothing_expired_the_least_recently_used_goes)
{
    struct store_map m;

    freed = 0;
    store_map_init(&m, 3, free_val);
    set(&m, "a", 1, 1000, 0);
    set(&m, "b", 2, 1000, 0);
    set(&m, "c", 3, 1000, 0);
    cr_assert(has(&m, "a", 1)); /* a is used again: b is now the LRU */
    set(&m, "d", 4, 1000, 2);
    cr_assert_eq(m.evicted_lru, 1);
    cr_assert_eq(m.evicted_expired, 0);
    cr_assert_not(has(&m, "b", 3));
    cr_assert(has(&m, "a", 3));
    /* A set of an existing key is a use too, and evicts nothing. */
    set(&m, "c", 33, 1000, 4);
    cr_assert_eq(m.evicted_lru, 1);
    set(&m, "e", 5, 1000, 5); /* order now: c a ... d is the LRU */
    cr_assert_not(has(&m, "d", 6));
    cr_assert(has(&m, "c", 6));
    cr_assert_eq(*(int *)store_map_get(&m, "c", 1, 6), 33);
    cr_assert_eq(m.evicted_lru, 2);
    store_map_free(&m);
    cr_assert_eq(freed, 6); /* a b c(old) c(new) d e */
}

Test(store_map, the_earliest_expired_goes_first)
{
    struct store_map m;

    freed = 0;
    store_map_init(&m, 4, free_val);
    set(&m, "x30", 1, 30, 0);
    set(&m, "x10", 2, 10, 0);
    set(&m, "x20", 3, 20, 0);
    set(&m, "live", 4, 1000, 0);
    set(&m, "n1", 5, 1000, 100);
    cr_assert_eq(m.evicted_expired, 1);
    /* x10 went: x20 and x30 are still held (expired, but not looked at). */
    cr_assert_eq(m.count, 4);
    set(&m, "n2", 6, 1000, 100);
    set(&m, "n3", 7, 1000, 100);
    cr_assert_eq(m.evicted_expired, 3);
    cr_assert(has(&m, "live", 100));
    cr_assert(has(&m, "n1", 100) && has(&m, "n2", 100) && has(&m, "n3", 100));
    store_map_free(&m);
    cr_assert_eq(freed, 7);
}

Test(store_map, an_expired_entry_reads_as_missing_and_is_dropped)
{
    struct store_map m;

    freed = 0;
    store_map_init(&m, 0, free_val);
    set(&m, "k", 1, 100, 0);
    cr_assert(has(&m, "k", 99));
    cr_assert_not(has(&m, "k", 100));
    cr_assert_eq(m.count, 0);
    cr_assert_eq(freed, 1);
    cr_assert_eq(store_map_del(&m, "k", 1), 0);
    set(&m, "k", 2, 200, 100);
    cr_assert_eq(store_map_del(&m, "k", 1), 1);
    cr_assert_eq(freed, 2);
    store_map_free(&m);
}

Test(store_map, expire_drops_earliest_first_within_its_budget)
{
    struct store_map m;
    char k[16];
    int i;

    freed = 0;
    store_map_init(&m, 0, free_val);
    for (i = 0; i < 100; i++) {
        snprintf(k, sizeof(k), "k%d", i);
        /* Expiries 0..990, inserted out of order. */
        set(&m, k, i, (int64_t)((i * 37) % 100) * 10, 0);
    }
    /* A set moves an expiry later: k0 (expiring at 0) now lives. */
    set(&m, "k0", 0, 5000, 0);
    cr_assert_eq(store_map_expire(&m, 500, 10), 10);
    cr_assert_eq(store_map_expire(&m, 500, 1000), 40);
    cr_assert_eq(store_map_expire(&m, 500, 1000), 0);
    cr_assert_eq(m.count, 50);
    for (i = 0; i < 100; i++) {
        int64_t exp = i == 0 ? 5000 : (int64_t)((i * 37) % 100) * 10;
        snprintf(k, sizeof(k), "k%d", i);
        cr_assert_eq(store_map_get(&m, k, strlen(k), 0) != NULL, exp > 500,
                     "%s expiring at %lld", k, (long long)exp);
    }
    store_map_free(&m);
    cr_assert_eq(freed, 101);
}

/* ---------------- Against a plain model ---------------- */

#define MODEL_KEYS 64
#define MODEL_CAP  16

struct model_entry {
    int present;
    int64_t exp;
    uint64_t used; /* last use, larger = more recent */
};

static int model_count(const struct model_entry *e)
{
    int i, count = 0;

    for (i = 0; i < MODEL_KEYS; i++) {
        count += e[i].present;
    }
    return count;
}

/* The victim the documented order picks: the earliest expired, else the
 * least recently used. -1 when the model is not full. */
static int model_victim(const struct model_entry *e, int64_t now)
{
    int i, best = -1;

    if (model_count(e) < MODEL_CAP) {
        return -1;
    }
    for (i = 0; i < MODEL_KEYS; i++) {
        if (e[i].present && e[i].exp <= now &&
            (best < 0 || e[i].exp < e[best].exp)) {
            best = i;
        }
    }
    if (best >= 0) {
        return best;
    }
    for (i = 0; i < MODEL_KEYS; i++) {
        if (e[i].present && (best < 0 || e[i].used < e[best].used)) {
            best = i;
        }
    }
    return best;
}

Test(store_map, random_operations_match_the_model)
{
    struct model_entry e[MODEL_KEYS];
    struct store_map m;
    uint64_t clock = 0;
    int64_t now = 0;
    char k[16];
    int step, i;

    memset(e, 0, sizeof(e));
    freed = 0;
    srand(7);
    store_map_init(&m, MODEL_CAP, free_val);
    for (step = 0; step < 20000; step++) {
        int x = rand() % MODEL_KEYS, op = rand() % 4;
        snprintf(k, sizeof(k), "key%d", x);
        now += (rand() % 3) * 1000;
        if (op == 0) {
            int live = e[x].present && e[x].exp > now;
            cr_assert_eq(store_map_get(&m, k, strlen(k), now) != NULL, live,
                         "step %d get %s", step, k);
            if (live) {
                e[x].used = ++clock;
            } else {
                e[x].present = 0;
            }
        } else if (op == 1) {
            cr_assert_eq(store_map_del(&m, k, strlen(k)), e[x].present,
                         "step %d del %s", step, k);
            e[x].present = 0;
        } else {
            /* Expiry ties would leave the victim to the heap's order:
             * the key's number in the last digits keeps them unique
             * (now is whole thousands). */
            int64_t exp = now + (1 + rand() % 60) * 1000 + x;
            if (!e[x].present) {
                int v = model_victim(e, now);
                if (v >= 0) {
                    e[v].present = 0;
                }
            }
            store_map_set(&m, k, strlen(k), val(x), exp, now);
            e[x].present = 1;
            e[x].exp = exp;
            e[x].used = ++clock;
        }
        cr_assert_eq(m.count, (size_t)model_count(e), "step %d", step);
    }
    /* Every key the model holds is held (unexpired ones read back). */
    for (i = 0; i < MODEL_KEYS; i++) {
        snprintf(k, sizeof(k), "key%d", i);
        cr_assert_eq(store_map_get(&m, k, strlen(k), now) != NULL,
                     e[i].present && e[i].exp > now, "end: %s", k);
    }
    store_map_free(&m);
}
