/* Embedded limiter store (see store_local.h).
 *
 * An entry is the stored value of one key (a GCRA TAT) and the wall-clock
 * time it expires, mirroring Redis's SET ... PX. Expired entries read as
 * missing; the cron frees them a few buckets at a time, so memory follows
 * the identities active within their periods, never the ones seen once. */
#include "proxy/store_local.h"

#include <time.h>

#include "algorithms/gcra.h"
#include "proxy/util.h"

/* Buckets the cron sweeps per tick (100 ms): a million entries are
 * visited in well under a minute without a pause worth noticing. */
#define STORE_LOCAL_SWEEP_BUCKETS 2048

struct store_entry {
    int64_t tat_ns;       /* the stored TAT */
    int64_t expire_at_ns; /* wall clock when Redis would have dropped it */
};

int64_t store_local_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * INT64_C(1000000000) + (int64_t)ts.tv_nsec;
}

static void store_entry_free(void *val)
{
    px_free(val);
}

void store_local_init(struct store_local *st)
{
    hmap_init(&st->map);
    st->sweep_cursor = 0;
}

void store_local_free(struct store_local *st)
{
    hmap_free(&st->map, store_entry_free);
}

int store_local_gcra(struct store_local *st, const char *key, size_t len,
                     const struct gcra_params *p, struct gcra_result *out,
                     const char **err)
{
    return store_local_gcra_all(st, 1, &key, &len, p, NULL, 1, out, NULL, err);
}

/* The live entry of key, dropping it when expired. */
static struct store_entry *store_local_live(struct store_local *st,
                                            const char *key, size_t len,
                                            int64_t now)
{
    struct store_entry *e = hmap_get(&st->map, key, len);

    if (e != NULL && e->expire_at_ns <= now) {
        px_free(hmap_del(&st->map, key, len));
        e = NULL;
    }
    return e;
}

/* Applies a decision's write to key. */
static void store_local_apply(struct store_local *st, const char *key,
                              size_t len, const struct gcra_result *r,
                              int64_t now)
{
    struct store_entry *e = hmap_get(&st->map, key, len);

    if (r->write == GCRA_WRITE_SET) {
        if (e == NULL) {
            e = px_malloc(sizeof(*e));
            hmap_put(&st->map, key, len, e);
        }
        e->tat_ns = r->new_tat_ns;
        e->expire_at_ns = now + r->expiry_ms * INT64_C(1000000);
    } else if (r->write == GCRA_WRITE_DEL && e != NULL) {
        px_free(hmap_del(&st->map, key, len));
    }
}

int store_local_gcra_all(struct store_local *st, unsigned n,
                         const char *const *keys, const size_t *lens,
                         const struct gcra_params *p,
                         const struct gcra_params *p_write, int commit,
                         struct gcra_result *out, struct gcra_result *peek,
                         const char **err)
{
    int64_t now = store_local_now_ns();
    struct gcra_result *w = px_calloc(n, sizeof(*w));
    int limited = 0, rc = GCRA_OK;
    unsigned i;

    for (i = 0; i < n && rc == GCRA_OK; i++) {
        struct store_entry *e = store_local_live(st, keys[i], lens[i], now);
        int have = e != NULL;
        int64_t tat = have ? e->tat_ns : 0;
        rc = gcra_decide(&p[i], have, tat, now, &out[i], err);
        if (rc == GCRA_OK && peek != NULL) {
            struct gcra_params pp;
            gcra_params_peek(&p[i], &pp);
            rc = gcra_decide(&pp, have, tat, now, &peek[i], err);
        }
        if (rc == GCRA_OK && p_write != NULL) {
            rc = gcra_decide(&p_write[i], have, tat, now, &w[i], err);
        } else if (rc == GCRA_OK) {
            w[i] = out[i];
        }
        if (rc == GCRA_OK) {
            limited |= w[i].d.limited;
        }
    }
    if (rc == GCRA_OK && commit && !limited) {
        for (i = 0; i < n; i++) {
            store_local_apply(st, keys[i], lens[i], &w[i], now);
        }
    }
    px_free(w);
    return rc;
}

int store_local_del(struct store_local *st, const char *key, size_t len)
{
    struct store_entry *e =
        store_local_live(st, key, len, store_local_now_ns());

    if (e == NULL) {
        return 0;
    }
    px_free(hmap_del(&st->map, key, len));
    return 1;
}

static int store_local_expired(void *val, void *arg)
{
    struct store_entry *e = val;
    const int64_t *now = arg;

    if (e->expire_at_ns > *now) {
        return 0;
    }
    px_free(e);
    return 1;
}

void store_local_cron(struct store_local *st)
{
    int64_t now = store_local_now_ns();

    hmap_sweep(&st->map, &st->sweep_cursor, STORE_LOCAL_SWEEP_BUCKETS,
               store_local_expired, &now);
}
