/* The embedded store's bounded table: a full table makes room from
 * expired entries only (the earliest first) and never from a live one, so
 * a new key is refused when every entry lives; bytes are charged on set
 * and given back on drop, to 0; expiry drops entries earliest first;
 * every dropped value is freed once. Checked case by case, then against a
 * plain model over many random operations. */
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

/* Each value is charged this much. */
#define VAL_BYTES 100

/* What the store does: asks for room for a new key, then sets it. 1 when
 * set, 0 when refused (no room). */
static int set(struct store_map *m, const char *k, int x, int64_t exp,
               int64_t now)
{
    int is_new = store_map_val_bytes(m, k, strlen(k)) == 0;

    if (is_new &&
        !store_map_room(
            m, 1, (int64_t)store_map_entry_bytes(strlen(k), VAL_BYTES), now)) {
        return 0;
    }
    store_map_set(m, k, strlen(k), val(x), VAL_BYTES, exp);
    return 1;
}

static int has(struct store_map *m, const char *k, int64_t now)
{
    return store_map_get(m, k, strlen(k), now) != NULL;
}

Test(store_map, a_full_map_evicts_an_expired_entry_before_any_live_one)
{
    struct store_map m;

    freed = 0;
    store_map_init(&m, 3, 0, free_val);
    set(&m, "old-live", 1, 1000, 0); /* least recently used, live */
    set(&m, "expiring", 2, 50, 0);   /* expired at 100 */
    set(&m, "new-live", 3, 1000, 0);
    cr_assert(has(&m, "old-live", 10));
    cr_assert(has(&m, "new-live", 20));
    cr_assert(has(&m, "expiring", 30)); /* the most recent; old-live is
                                           the least */
    /* At 100 "expiring" has expired: it goes, although the LRU order
     * would pick old-live. */
    cr_assert(set(&m, "fourth", 4, 1000, 100));
    cr_assert_eq(m.count, 3);
    cr_assert_eq(m.evicted_expired, 1);
    cr_assert(has(&m, "old-live", 100));
    cr_assert(has(&m, "new-live", 100));
    cr_assert(has(&m, "fourth", 100));
    cr_assert_eq(freed, 1);
    store_map_free(&m);
    cr_assert_eq(freed, 4);
}

Test(store_map, with_nothing_expired_a_new_key_is_refused_and_none_goes)
{
    struct store_map m;

    freed = 0;
    store_map_init(&m, 3, 0, free_val);
    cr_assert(set(&m, "a", 1, 1000, 0));
    cr_assert(set(&m, "limited", 2, 1000, 0)); /* a key refused for long */
    cr_assert(set(&m, "c", 3, 1000, 0));
    /* Every entry lives: no room, and the limited key stays. */
    cr_assert_not(set(&m, "d", 4, 1000, 2));
    cr_assert_not(set(&m, "e", 5, 1000, 500));
    cr_assert_eq(m.evicted_expired, 0);
    cr_assert_eq(m.count, 3);
    cr_assert(has(&m, "limited", 999));
    /* A set of an existing key needs no room. */
    cr_assert(set(&m, "c", 33, 2000, 4));
    cr_assert_eq(*(int *)store_map_get(&m, "c", 1, 6), 33);
    /* At 1000 a and limited expired: the new key takes the place of one. */
    cr_assert(set(&m, "d", 4, 3000, 1000));
    cr_assert_eq(m.evicted_expired, 1);
    cr_assert_eq(m.count, 3);
    store_map_free(&m);
    cr_assert_eq(freed, 5); /* a limited c(old) c(new) d */
}

Test(store_map, bytes_are_charged_on_set_and_given_back_to_zero)
{
    struct store_map m;
    size_t one = store_map_entry_bytes(3, VAL_BYTES);
    size_t huge = store_map_entry_bytes(1 << 20, VAL_BYTES);

    freed = 0;
    /* Room for two small entries, not three. */
    store_map_init(&m, 0, 2 * one + one / 2, free_val);
    cr_assert_gt(huge, (size_t)(1 << 20) * 2, "keys are counted (twice)");
    cr_assert(set(&m, "k01", 1, 1000, 0));
    cr_assert_eq(m.bytes, one);
    cr_assert(set(&m, "k02", 2, 500, 0));
    cr_assert_eq(m.bytes, 2 * one);
    cr_assert_not(set(&m, "k03", 3, 1000, 10), "past max_bytes");
    cr_assert_eq(m.bytes, 2 * one);
    /* A value that grows is charged its new size. */
    store_map_set(&m, "k01", 3, val(11), VAL_BYTES + 50, 1000);
    cr_assert_eq(m.bytes, 2 * one + 50);
    store_map_set(&m, "k01", 3, val(12), VAL_BYTES, 1000);
    cr_assert_eq(m.bytes, 2 * one);
    cr_assert_eq(m.freed_bytes, 50);
    /* k02 expired at 500: it makes room by bytes. */
    cr_assert(set(&m, "k03", 3, 1000, 500));
    cr_assert_eq(m.evicted_expired, 1);
    cr_assert_eq(m.bytes, 2 * one);
    cr_assert_eq(store_map_del(&m, "k01", 3), 1);
    cr_assert_eq(store_map_expire(&m, 1000, 10), 1);
    cr_assert_eq(m.bytes, 0, "every charge given back");
    cr_assert_eq(m.freed_bytes, 50 + 3 * one);
    store_map_free(&m);
    cr_assert_eq(m.bytes, 0);
}

Test(store_map, the_earliest_expired_goes_first)
{
    struct store_map m;

    freed = 0;
    store_map_init(&m, 4, 0, free_val);
    set(&m, "x30", 1, 30, 0);
    set(&m, "x10", 2, 10, 0);
    set(&m, "x20", 3, 20, 0);
    set(&m, "live", 4, 1000, 0);
    cr_assert(set(&m, "n1", 5, 1000, 100));
    cr_assert_eq(m.evicted_expired, 1);
    /* x10 went: x20 and x30 are still held (expired, but not looked at). */
    cr_assert_eq(m.count, 4);
    cr_assert(set(&m, "n2", 6, 1000, 100));
    cr_assert(set(&m, "n3", 7, 1000, 100));
    cr_assert_not(set(&m, "n4", 8, 1000, 100), "only live entries left");
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
    store_map_init(&m, 0, 0, free_val);
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
    cr_assert_eq(m.bytes, 0);
}

Test(store_map, expire_drops_earliest_first_within_its_budget)
{
    struct store_map m;
    char k[16];
    int i;

    freed = 0;
    store_map_init(&m, 0, 0, free_val);
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
};

static int model_count(const struct model_entry *e)
{
    int i, count = 0;

    for (i = 0; i < MODEL_KEYS; i++) {
        count += e[i].present;
    }
    return count;
}

/* The bytes the model's entries are charged. */
static size_t model_bytes(const struct model_entry *e)
{
    size_t b = 0;
    int i;

    for (i = 0; i < MODEL_KEYS; i++) {
        if (e[i].present) {
            b += store_map_entry_bytes(i < 10 ? 4 : 5, VAL_BYTES);
        }
    }
    return b;
}

/* The victim the documented order picks: the earliest expired; -1 when
 * the model is not full, -2 when it is and nothing expired (the new key
 * is refused). */
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
    return best >= 0 ? best : -2;
}

Test(store_map, random_operations_match_the_model)
{
    struct model_entry e[MODEL_KEYS];
    struct store_map m;
    int64_t now = 0;
    char k[16];
    int step, i;

    memset(e, 0, sizeof(e));
    freed = 0;
    srand(7);
    store_map_init(&m, MODEL_CAP, 0, free_val);
    for (step = 0; step < 20000; step++) {
        int x = rand() % MODEL_KEYS, op = rand() % 4;
        snprintf(k, sizeof(k), "key%d", x);
        now += (rand() % 3) * 1000;
        if (op == 0) {
            int live = e[x].present && e[x].exp > now;
            cr_assert_eq(store_map_get(&m, k, strlen(k), now) != NULL, live,
                         "step %d get %s", step, k);
            if (!live) {
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
            int v = e[x].present ? -1 : model_victim(e, now);
            if (v >= 0) {
                e[v].present = 0;
            }
            cr_assert_eq(set(&m, k, x, exp, now), v != -2, "step %d set %s",
                         step, k);
            if (v != -2) {
                e[x].present = 1;
                e[x].exp = exp;
            }
        }
        cr_assert_eq(m.count, (size_t)model_count(e), "step %d", step);
        cr_assert_eq(m.bytes, model_bytes(e), "step %d", step);
    }
    /* Every key the model holds is held (unexpired ones read back). */
    for (i = 0; i < MODEL_KEYS; i++) {
        snprintf(k, sizeof(k), "key%d", i);
        cr_assert_eq(store_map_get(&m, k, strlen(k), now) != NULL,
                     e[i].present && e[i].exp > now, "end: %s", k);
    }
    store_map_free(&m);
    cr_assert_eq(m.bytes, 0);
}
