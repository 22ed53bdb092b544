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
    int64_t now = store_local_now_ns();
    struct store_entry *e = hmap_get(&st->map, key, len);
    int rc;

    if (e != NULL && e->expire_at_ns <= now) {
        px_free(hmap_del(&st->map, key, len));
        e = NULL;
    }
    rc = gcra_decide(p, e != NULL, e != NULL ? e->tat_ns : 0, now, out, err);
    if (rc != GCRA_OK) {
        return rc;
    }
    if (out->write == GCRA_WRITE_SET) {
        if (e == NULL) {
            e = px_malloc(sizeof(*e));
            hmap_put(&st->map, key, len, e);
        }
        e->tat_ns = out->new_tat_ns;
        e->expire_at_ns = now + out->expiry_ms * INT64_C(1000000);
    } else if (out->write == GCRA_WRITE_DEL && e != NULL) {
        px_free(hmap_del(&st->map, key, len));
    }
    return GCRA_OK;
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
