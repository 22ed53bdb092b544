/* Embedded limiter store (see store_local.h).
 *
 * An entry is the stored state of one key and the wall-clock time it
 * expires, mirroring Redis's PEXPIRE: a GCRA TAT (CL.THROTTLE and gcra
 * limits), a bucket, a window, or the list of a sliding window's slots or
 * a sliding log's timestamps. Each entry says which algorithm wrote it, so
 * a key never feeds one model another's state (Redis would answer
 * WRONGTYPE or a malformed state; we answer WRONGTYPE). Expired entries
 * read as missing; the cron frees them earliest first, so memory follows
 * the identities active within their windows, never the ones seen once.
 * The table (store_map.c) holds at most embedded_max_keys entries and
 * embedded_max_bytes bytes: a new key in a full table evicts an expired
 * entry, never a live one (whose state may still refuse); with every
 * entry live the check is answered as by a store that is down
 * (store_down_policy), its writes not made, and counted. An entry's
 * expiry is when its state equals no state: each model's expiry is its
 * reset_after rounded up to the millisecond, and GCRA's (whose script
 * rounds down, as redis-cell does) is rounded up here too.
 *
 * At the end, store_local_ops: the same store behind the limiter's store
 * interface (store.h), its struct store_local allocated by the init op as
 * the store's `impl`. Every call decides and completes at once, so it
 * never holds a request nor counts one in req->owed. No libuv here, and
 * no limiter: this file sees only store.h, never the commands. */
#include "proxy/limiter/store_local.h"

#include <string.h>
#include <time.h>

#include "algorithms/concurrency.h"
#include "algorithms/gcra.h"
#include "algorithms/sliding_log.h"
#include "algorithms/sliding_window.h"
#include "conf/conf.h"
#include "proxy/core/util.h"
#include "proxy/limiter/store.h"
#include "proxy/limiter/store_fields.h"
#include "proxy/limiter/store_map.h"
#include "proxy/limiter/store_trim.h"

/* Expired entries the cron drops per tick (100 ms), earliest first: up to
 * 50,000 a second, each O(log n), a few milliseconds a tick at most. A
 * full store evicts expired entries itself, so the cron need not keep up
 * with a flood. */
#define STORE_LOCAL_EXPIRE_BUDGET 5000

#define STORE_LOCAL_OVERRIDE_FULL                                              \
    "ERR run-time overrides past limiter_override_max_bytes: raise it or "     \
    "delete some"

#define STORE_LOCAL_WRONGTYPE                                                  \
    "WRONGTYPE Operation against a key holding the wrong kind of value"

/* The state of one key (its expiry is the map's: store_map.h). */
struct store_entry {
    enum limits_algo algo; /* the model that wrote it */
    union {
        int64_t tat_ns;       /* gcra */
        union store_fields f; /* store_fields_algo's */
    } u;
    size_t n;          /* entries of list */
    void *list;        /* owned: sliding_window slots, sliding_log
                          timestamps, concurrency holders (their tokens
                          after them in the same block) */
    size_t list_bytes; /* allocated for list (charged to the map) */
};

/* A decision's write, held until every limit of the check has decided. */
struct store_pending {
    int write;               /* 0 none, 1 set, 2 delete, 3 set also when
                                the check is refused (sliding_log) */
    int64_t expiry_ms;       /* of a set */
    struct store_entry next; /* the state to set (list owned until set) */
    int reserved;            /* a WAIT reservation: limited, yet it takes
                                its cost (the check does not refuse) */
};

int64_t store_local_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * INT64_C(1000000000) + (int64_t)ts.tv_nsec;
}

static void store_entry_free(void *val)
{
    struct store_entry *e = val;

    if (e != NULL) {
        px_free(e->list);
        px_free(e);
    }
}

/* What an entry's value is charged: the entry and its list. */
static size_t store_entry_bytes(const struct store_entry *e)
{
    return sizeof(*e) + e->list_bytes;
}

void store_local_init(struct store_local *st, size_t max_keys, size_t max_bytes,
                      size_t override_max)
{
    memset(st, 0, sizeof(*st));
    store_map_init(&st->map, max_keys, max_bytes, store_entry_free);
    hmap_init(&st->overrides);
    st->override_max = override_max;
}

void store_local_free(struct store_local *st)
{
    store_map_free(&st->map);
    hmap_free(&st->overrides, px_free);
    st->override_bytes = 0;
}

/* The live entry of key (dropped when expired), now the most recently
 * used. */
static struct store_entry *store_local_live(struct store_local *st,
                                            const char *key, size_t len,
                                            int64_t now)
{
    return store_map_get(&st->map, key, len, now);
}

/* Applies a pending write to key (taking the list it carries). */
static void store_local_apply(struct store_local *st, const char *key,
                              size_t len, struct store_pending *w, int64_t now)
{
    if (w->write == 1 || w->write == 3) {
        /* A key written earlier in this check may have been evicted by
         * another's write since it was read: look it up again. */
        struct store_entry *e = store_map_get(&st->map, key, len, now);
        if (e == NULL) {
            e = px_calloc(1, sizeof(*e));
        }
        px_free(e->list);
        *e = w->next;
        w->next.list = NULL;
        store_map_set(&st->map, key, len, e, store_entry_bytes(e),
                      now + w->expiry_ms * RL_NS_PER_MS);
    } else if (w->write == 2) {
        store_map_del(&st->map, key, len);
    }
}

/* Whether the writes w[0..n) to keys[i] (those set) fit the map at now,
 * after dropping expired entries as needed (store_map_room). */
static int store_local_room(struct store_local *st, unsigned n,
                            const struct store_local_limit *l,
                            const struct store_pending *w, int64_t now)
{
    size_t new_keys = 0;
    int64_t grow = 0;
    unsigned i;

    for (i = 0; i < n; i++) {
        size_t old;
        if (w[i].write != 1 && w[i].write != 3) {
            continue;
        }
        old = store_map_val_bytes(&st->map, l[i].key, l[i].klen);
        grow += (int64_t)store_map_entry_bytes(l[i].klen,
                                               store_entry_bytes(&w[i].next));
        if (old == 0) {
            new_keys++;
        } else {
            grow -= (int64_t)store_map_entry_bytes(l[i].klen, old);
        }
    }
    if (new_keys == 0 && grow <= 0) {
        return 1;
    }
    return store_map_room(&st->map, new_keys, grow, now);
}

/* A gcra decision at `now` as a pending write. Its expiry is rounded up:
 * the entry must not go while its TAT is still ahead of the clock (the
 * map evicts expired entries). */
static void store_local_gcra_pending(const struct gcra_result *r, int64_t now,
                                     struct store_pending *w)
{
    memset(w, 0, sizeof(*w));
    w->next.algo = LIMITS_GCRA;
    if (r->write == GCRA_WRITE_SET) {
        w->write = 1;
        w->expiry_ms = r->new_tat_ns > now ? rl_ceil_ms(r->new_tat_ns - now)
                                           : r->expiry_ms;
        w->next.u.tat_ns = r->new_tat_ns;
    } else if (r->write == GCRA_WRITE_DEL) {
        w->write = 2;
    }
}

int store_local_gcra(struct store_local *st, const char *key, size_t len,
                     const struct gcra_params *p, struct gcra_result *out,
                     const char **err)
{
    int64_t now = store_local_now_ns();
    struct store_entry *e = store_local_live(st, key, len, now);
    struct store_pending w;
    int rc;

    if (e != NULL && e->algo != LIMITS_GCRA) {
        *err = STORE_LOCAL_WRONGTYPE;
        return GCRA_EARGS;
    }
    rc = gcra_decide(p, e != NULL, e != NULL ? e->u.tat_ns : 0, now, out, err);
    if (rc == GCRA_OK && !out->d.limited) {
        struct store_local_limit l = { .key = key, .klen = len };
        store_local_gcra_pending(out, now, &w);
        if (!store_local_room(st, 1, &l, &w, now)) {
            st->full_refused++;
            *err = STORE_LOCAL_FULL_TEXT;
            return STORE_LOCAL_EFULL;
        }
        store_local_apply(st, key, len, &w, now);
    }
    return rc;
}

/* ---------------- The other algorithms ---------------- */

/* Takes a model's decision: its five integers into *d, and into *w whether
 * to set the key (`write`, as struct store_pending says) and for how long.
 * The state to set is the caller's to put in w->next. Returns 0. */
static int store_local_take(const struct rl_decision *rd, int write,
                            int64_t expiry_ms, struct rl_decision *d,
                            struct store_pending *w)
{
    *d = *rd;
    w->write = write;
    w->expiry_ms = expiry_ms;
    return 0;
}

/* concurrency's holders next[0..n) as one block to own: the array, then
 * every token's bytes, each holder pointing at its own. */
static void *store_local_holders(const struct concurrency_holder *next,
                                 size_t n, size_t *bytes)
{
    struct concurrency_holder *h;
    size_t i, at = n * sizeof(*h);
    char *block;

    for (i = 0, *bytes = at; i < n; i++) {
        *bytes += next[i].len;
    }
    block = px_malloc(*bytes > 0 ? *bytes : 1);
    h = (struct concurrency_holder *)(void *)block;
    for (i = 0; i < n; i++) {
        memcpy(block + at, next[i].token, next[i].len);
        h[i] = next[i];
        h[i].token = block + at;
        at += next[i].len;
    }
    return block;
}

/* concurrency's decision (release: a RELEASE) for token id on entry e,
 * into *d and *w as store_local_decide's; *took from the model. */
static int store_local_concurrency(const struct limits_limit *lim,
                                   const struct store_entry *e, int64_t now,
                                   int64_t cost, const char *id, size_t idlen,
                                   int release, struct rl_decision *d,
                                   struct store_pending *w, int *took,
                                   const char **err)
{
    struct concurrency_params p;
    struct concurrency_result r;
    struct concurrency_holder *next;
    size_t n = e ? e->n : 0;
    int rc;

    if (concurrency_params_init(&p, lim->u.concurrency.max,
                                lim->u.concurrency.lease_ms,
                                err) != CONCURRENCY_OK) {
        return -1;
    }
    next = px_mallocarray(n + 1, sizeof(*next));
    rc = release ? concurrency_release(&p, e ? e->list : NULL, n, id, idlen,
                                       now, next, n + 1, &r, err)
                 : concurrency_decide(&p, e ? e->list : NULL, n, id, idlen, now,
                                      cost, next, n + 1, &r, err);
    if (rc == CONCURRENCY_OK && r.write == CONCURRENCY_WRITE_SET) {
        w->next.list = store_local_holders(next, r.next_n, &w->next.list_bytes);
        w->next.n = r.next_n;
    }
    px_free(next);
    if (rc != CONCURRENCY_OK) {
        return -1;
    }
    *took = r.took;
    return store_local_take(&r.d,
                            r.write == CONCURRENCY_WRITE_SET   ? 1
                            : r.write == CONCURRENCY_WRITE_DEL ? 2
                                                               : 0,
                            r.expiry_ms, d, w);
}

/* The two list algorithms' steps, a check's (decide, of `amount` = its
 * cost) or LIMITER ADJUST's (of `amount` = a delta of either sign): both
 * make the next list into a buffer of the model's bound (N slots, max
 * entries) that *w then owns, so an adjust never grows an entry past what
 * a check could. They fill their model's result; 0, or -1 with *err. */
static int store_local_window_run(const struct limits_limit *lim,
                                  const struct store_entry *e, int64_t now,
                                  int64_t amount, int adjust,
                                  struct store_pending *w,
                                  struct sliding_window_result *r,
                                  const char **err)
{
    struct sliding_window_params p;
    struct sliding_window_slot *next;
    int rc;

    if (sliding_window_params_init(
            &p, lim->u.sliding_window.max, lim->u.sliding_window.window_ms,
            lim->u.sliding_window.resolution_ms, err) != SLIDING_WINDOW_OK) {
        return -1;
    }
    next = px_malloc((size_t)p.nslots * sizeof(*next));
    rc = adjust
             ? sliding_window_adjust(&p, e ? e->list : NULL, e ? e->n : 0, now,
                                     amount, next, (size_t)p.nslots, r, err)
             : sliding_window_decide(&p, e ? e->list : NULL, e ? e->n : 0, now,
                                     amount, next, (size_t)p.nslots, r, err);
    if (rc != SLIDING_WINDOW_OK) {
        px_free(next);
        return -1;
    }
    w->next.n = r->next_n;
    w->next.list = next;
    w->next.list_bytes = (size_t)p.nslots * sizeof(*next);
    return 0;
}

static int store_local_log_run(const struct limits_limit *lim,
                               const struct store_entry *e, int64_t now,
                               int64_t amount, int adjust,
                               struct store_pending *w,
                               struct sliding_log_result *r, const char **err)
{
    struct sliding_log_params p;
    int64_t *next;
    int rc;

    if (sliding_log_params_init(
            &p, lim->u.sliding_log.max, lim->u.sliding_log.window_ms,
            lim->u.sliding_log.min_interval_ms, err) != SLIDING_LOG_OK) {
        return -1;
    }
    next = px_malloc((size_t)p.max * sizeof(*next));
    rc = adjust ? sliding_log_adjust(&p, e ? e->list : NULL, e ? e->n : 0, now,
                                     amount, next, (size_t)p.max, r, err)
                : sliding_log_decide(&p, e ? e->list : NULL, e ? e->n : 0, now,
                                     amount, next, (size_t)p.max, r, err);
    if (rc != SLIDING_LOG_OK) {
        px_free(next);
        return -1;
    }
    w->next.n = r->next_n;
    w->next.list = next;
    w->next.list_bytes = (size_t)p.max * sizeof(*next);
    return 0;
}

/* Decides one non-gcra limit from entry e (NULL: missing) at now with
 * cost (and a WAIT of wait_ns: the buckets reserve; concurrency's token
 * id) into *d, and what to write into *w. 0, or -1 with *err. */
static int store_local_decide(const struct limits_limit *lim,
                              const struct store_entry *e, int64_t now,
                              int64_t cost, int64_t wait_ns, const char *id,
                              size_t idlen, struct rl_decision *d,
                              struct store_pending *w, const char **err)
{
    int took;

    memset(w, 0, sizeof(*w));
    w->next.algo = lim->algo;
    if (e != NULL && e->algo != lim->algo) {
        *err = STORE_LOCAL_WRONGTYPE;
        return -1;
    }
    if (store_fields_algo(lim->algo)) {
        struct store_fields_result r;
        if (store_fields_decide_wait(lim, e ? &e->u.f : NULL, now, cost,
                                     wait_ns, &r, err) != 0) {
            return -1;
        }
        w->next.u.f = r.next;
        w->reserved = r.d.limited && r.write;
        return store_local_take(&r.d, r.write, r.expiry_ms, d, w);
    }
    switch (lim->algo) {
    case LIMITS_SLIDING_WINDOW: {
        struct sliding_window_result r;
        if (store_local_window_run(lim, e, now, cost, 0, w, &r, err) != 0) {
            return -1;
        }
        return store_local_take(&r.d, r.write == SLIDING_WINDOW_WRITE_SET,
                                r.expiry_ms, d, w);
    }
    case LIMITS_SLIDING_LOG: {
        struct sliding_log_result r;
        if (store_local_log_run(lim, e, now, cost, 0, w, &r, err) != 0) {
            return -1;
        }
        /* The log keeps refused attempts: write 3 = "also when refused". */
        return store_local_take(
            &r.d, r.write == SLIDING_LOG_WRITE_SET ? (r.d.limited ? 3 : 1) : 0,
            r.expiry_ms, d, w);
    }
    case LIMITS_CONCURRENCY:
        return store_local_concurrency(lim, e, now, cost, id, idlen, 0, d, w,
                                       &took, err);
    default: /* gcra is the caller's */
        break;
    }
    *err = "unknown algorithm";
    return -1;
}

/* LIMITER ADJUST of a sliding_window or sliding_log limit by delta (any
 * sign) from entry e (NULL: missing) at now, as a pending write into *w
 * (1 set, 2 delete: every count given back, 0 none: nothing changed);
 * nothing written yet. store_local_adjust's per-limit step calls it for
 * these two algorithms. 0, or -1 with *err. */
static int store_local_adjust_list(const struct limits_limit *lim,
                                   const struct store_entry *e, int64_t now,
                                   int64_t delta, struct store_pending *w,
                                   const char **err)
{
    memset(w, 0, sizeof(*w));
    w->next.algo = lim->algo;
    if (e != NULL && e->algo != lim->algo) {
        *err = STORE_LOCAL_WRONGTYPE;
        return -1;
    }
    if (lim->algo == LIMITS_SLIDING_WINDOW) {
        struct sliding_window_result r;
        if (store_local_window_run(lim, e, now, delta, 1, w, &r, err) != 0) {
            return -1;
        }
        w->write = r.write == SLIDING_WINDOW_WRITE_SET   ? 1
                   : r.write == SLIDING_WINDOW_WRITE_DEL ? 2
                                                         : 0;
        w->expiry_ms = r.expiry_ms;
        return 0;
    }
    if (lim->algo == LIMITS_SLIDING_LOG) {
        struct sliding_log_result r;
        if (store_local_log_run(lim, e, now, delta, 1, w, &r, err) != 0) {
            return -1;
        }
        w->write = r.write == SLIDING_LOG_WRITE_SET   ? 1
                   : r.write == SLIDING_LOG_WRITE_DEL ? 2
                                                      : 0;
        w->expiry_ms = r.expiry_ms;
        return 0;
    }
    *err = "unknown algorithm";
    return -1;
}

/* Counts one limit's refusal: a real limit's refuses the check, a shadow
 * limit's only its own level. */
static void store_local_refused(const struct store_local_limit *l, int refused,
                                int *limited, uint64_t *shadow_refused)
{
    if (!refused) {
        return;
    }
    if (l->shadow) {
        *shadow_refused |= UINT64_C(1) << l->level;
    } else {
        *limited = 1;
    }
}

/* Whether limit l takes its cost: every real limit admitted and, for a
 * shadow limit, every limit of its level too. */
static int store_local_takes(const struct store_local_limit *l, int limited,
                             uint64_t shadow_refused)
{
    return !limited && (!l->shadow || (shadow_refused >> l->level & 1) == 0);
}

int store_local_check(struct store_local *st, unsigned n,
                      const struct store_local_limit *l, int64_t cost,
                      int commit, struct rl_decision *out,
                      struct rl_decision *peek, const char **err)
{
    int64_t now = store_local_now_ns();
    struct store_pending *w = px_calloc(n, sizeof(*w));
    int limited = 0, rc = 0;
    uint64_t shadow_refused = 0; /* bit l: shadow level l refused */
    unsigned i;

    for (i = 0; i < n && rc == 0; i++) {
        struct store_entry *e = store_local_live(st, l[i].key, l[i].klen, now);
        if (l[i].algo == LIMITS_GCRA) {
            struct gcra_result r, pk, wr;
            struct gcra_params pp;
            int have = e != NULL;
            if (have && e->algo != LIMITS_GCRA) {
                *err = STORE_LOCAL_WRONGTYPE;
                rc = -1;
                break;
            }
            gcra_params_peek(l[i].p, &pp);
            if (gcra_decide(l[i].p, have, have ? e->u.tat_ns : 0, now, &r,
                            err) != GCRA_OK ||
                gcra_decide(&pp, have, have ? e->u.tat_ns : 0, now, &pk, err) !=
                    GCRA_OK ||
                gcra_decide(l[i].p_write, have, have ? e->u.tat_ns : 0, now,
                            &wr, err) != GCRA_OK) {
                rc = -1;
                break;
            }
            out[i] = r.d;
            peek[i] = pk.d;
            store_local_gcra_pending(&wr, now, &w[i]);
            store_local_refused(&l[i], wr.d.limited, &limited, &shadow_refused);
            continue;
        }
        if (store_local_decide(l[i].lim, e, now, cost, l[i].wait_ns, l[i].id,
                               l[i].id_len, &out[i], &w[i], err) != 0) {
            rc = -1;
            break;
        }
        peek[i] = out[i];
        store_local_refused(&l[i], out[i].limited && !w[i].reserved, &limited,
                            &shadow_refused);
    }
    /* A limit that admitted but takes nothing (the check refused, or its
     * shadow level did) reports its state without the cost: decided again
     * with cost 0, only then (a sliding log's decision copies up to `max`
     * entries); a WAIT reservation not taken, as the refusal it is without
     * the wait. */
    for (i = 0; i < n && rc == 0 && cost > 0; i++) {
        struct store_pending pw;
        if (l[i].algo == LIMITS_GCRA || (out[i].limited && !w[i].reserved) ||
            store_local_takes(&l[i], limited, shadow_refused)) {
            continue;
        }
        rc = store_local_decide(
            l[i].lim, store_local_live(st, l[i].key, l[i].klen, now), now,
            w[i].reserved ? cost : 0, 0, l[i].id, l[i].id_len,
            w[i].reserved ? &out[i] : &peek[i], &pw, err);
        if (w[i].reserved) {
            peek[i] = out[i];
        }
        px_free(pw.next.list);
    }
    if (rc == 0 && commit) {
        for (i = 0; i < n; i++) {
            /* Only the writes to be made are weighed. */
            if (!store_local_takes(&l[i], limited, shadow_refused) &&
                w[i].write != 3) {
                w[i].write = 0;
            }
        }
        if (!store_local_room(st, n, l, w, now)) {
            st->full_refused++;
            *err = STORE_LOCAL_FULL_TEXT;
            rc = STORE_LOCAL_EFULL;
        }
    }
    if (rc == 0 && commit) {
        for (i = 0; i < n; i++) {
            if (store_local_takes(&l[i], limited, shadow_refused) ||
                w[i].write == 3) {
                store_local_apply(st, l[i].key, l[i].klen, &w[i], now);
            }
        }
    }
    for (i = 0; i < n; i++) {
        px_free(w[i].next.list);
    }
    px_free(w);
    return rc;
}

/* ---------------- LIMITER ADJUST ---------------- */

/* The change of one limit by delta at now as a pending write (nothing
 * written yet). 0, or -1 with *err. */
static int store_local_adjust_one(struct store_local *st,
                                  const struct store_local_limit *l,
                                  int64_t now, int64_t delta,
                                  struct store_pending *w, const char **err)
{
    struct store_entry *e = store_local_live(st, l->key, l->klen, now);

    memset(w, 0, sizeof(*w));
    if (e != NULL && e->algo != l->algo) {
        *err = STORE_LOCAL_WRONGTYPE;
        return -1;
    }
    if (l->algo == LIMITS_GCRA) {
        struct gcra_result r;
        if (gcra_adjust(l->p, e != NULL, e != NULL ? e->u.tat_ns : 0, now,
                        delta, &r, err) != GCRA_OK) {
            return -1;
        }
        store_local_gcra_pending(&r, now, w);
        return 0;
    }
    if (store_fields_algo(l->algo)) {
        struct store_fields_result r;
        if (store_fields_adjust(l->lim, e != NULL ? &e->u.f : NULL, now, delta,
                                &r, err) != 0) {
            return -1;
        }
        w->next.algo = l->algo;
        w->next.u.f = r.next;
        w->write = r.write;
        w->expiry_ms = r.expiry_ms;
        return 0;
    }
    switch (l->algo) {
    case LIMITS_SLIDING_WINDOW:
    case LIMITS_SLIDING_LOG:
        return store_local_adjust_list(l->lim, e, now, delta, w, err);
    default:
        break;
    }
    *err = "unknown algorithm";
    return -1;
}

int store_local_adjust(struct store_local *st, unsigned n,
                       const struct store_local_limit *l, int64_t delta,
                       struct rl_decision *out, struct rl_decision *peek,
                       const char **err)
{
    int64_t now = store_local_now_ns();
    struct store_pending *w = px_calloc(n, sizeof(*w));
    int rc = 0;
    unsigned i;

    for (i = 0; i < n && rc == 0; i++) {
        rc = store_local_adjust_one(st, &l[i], now, delta, &w[i], err);
    }
    if (rc == 0 && !store_local_room(st, n, l, w, now)) {
        st->full_refused++;
        *err = STORE_LOCAL_FULL_TEXT;
        rc = STORE_LOCAL_EFULL;
    }
    for (i = 0; i < n && rc == 0; i++) {
        store_local_apply(st, l[i].key, l[i].klen, &w[i], now);
    }
    for (i = 0; i < n; i++) {
        px_free(w[i].next.list);
    }
    px_free(w);
    if (rc != 0) {
        return rc;
    }
    /* The reply: a peek of cost 1 on what is now stored. */
    return store_local_check(st, n, l, 1, 0, out, peek, err);
}

/* ---------------- Overrides, keys ---------------- */

const char *store_local_override_get(struct store_local *st, const char *path,
                                     size_t len)
{
    return hmap_get(&st->overrides, path, len);
}

size_t store_local_override_bytes(size_t plen, size_t tlen)
{
    return 5 * sizeof(void *) + plen + tlen + 1;
}

int store_local_override_set(struct store_local *st, const char *path,
                             size_t len, const char *text, size_t tlen)
{
    char *old = hmap_get(&st->overrides, path, len);
    size_t was = old != NULL ? store_local_override_bytes(len, strlen(old)) : 0;

    if (text != NULL && st->override_max > 0 &&
        st->override_bytes - was + store_local_override_bytes(len, tlen) >
            st->override_max) {
        st->override_refused++;
        return -1;
    }
    hmap_del(&st->overrides, path, len);
    px_free(old);
    st->override_bytes -= was;
    st->override_freed += was;
    if (text != NULL) {
        hmap_put(&st->overrides, path, len, px_strndup(text, tlen));
        st->override_bytes += store_local_override_bytes(len, tlen);
    }
    return old != NULL;
}

int store_local_release(struct store_local *st,
                        const struct store_local_limit *l, const char **err)
{
    int64_t now = store_local_now_ns();
    struct store_entry *e = store_local_live(st, l->key, l->klen, now);
    struct store_pending w;
    struct rl_decision d;
    int took = 0;

    memset(&w, 0, sizeof(w));
    w.next.algo = LIMITS_CONCURRENCY;
    if (e != NULL && e->algo != LIMITS_CONCURRENCY) {
        *err = STORE_LOCAL_WRONGTYPE;
        return -1;
    }
    if (store_local_concurrency(l->lim, e, now, 0, l->id, l->id_len, 1, &d, &w,
                                &took, err) != 0) {
        return -1;
    }
    /* Fewer holders than before: the entry only shrinks, no room needed. */
    store_local_apply(st, l->key, l->klen, &w, now);
    px_free(w.next.list);
    return took;
}

int store_local_del(struct store_local *st, const char *key, size_t len)
{
    if (store_local_live(st, key, len, store_local_now_ns()) == NULL) {
        return 0;
    }
    return store_map_del(&st->map, key, len);
}

void store_local_cron(struct store_local *st)
{
    store_map_expire(&st->map, store_local_now_ns(), STORE_LOCAL_EXPIRE_BUDGET);
    store_trim_maybe(&st->trim, st->map.freed_bytes + st->override_freed);
}

/* ---------------- The store interface (store.h) ---------------- */

static void store_local_init_op(struct store *st)
{
    struct store_local *local = px_calloc(1, sizeof(*local));

    store_local_init(local, st->conf->embedded_max_keys,
                     st->conf->embedded_max_bytes,
                     st->conf->limiter_override_max_bytes);
    st->impl = local;
}

static void store_local_free_op(struct store *st)
{
    struct store_local *local = st->impl;

    if (local != NULL) {
        store_local_free(local);
        px_free(local);
        st->impl = NULL;
    }
}

static int store_local_ready(struct store *st, struct req *req,
                             void (*resume)(struct req *req))
{
    PX_UNUSED(st);
    PX_UNUSED(req);
    PX_UNUSED(resume);
    return 1;
}

static void store_local_throttle(struct store *st, struct req *req,
                                 const struct gcra_params *p, const char *key,
                                 size_t klen, unsigned db, store_done_fn *done)
{
    struct store_reply r = { .kind = STORE_REPLY_INTS };
    struct gcra_result res;
    const char *err = NULL;
    int rc = store_local_gcra(st->impl, key, klen, p, &res, &err);

    /* Embedded mode refuses SELECT n (no upstream): one key space. */
    PX_UNUSED(db);
    if (rc == STORE_LOCAL_EFULL && st->conf->store_down == CONF_FAIL_OPEN) {
        /* As a store that is down: admitted undecided, counted. */
        r.v[1] = p->limit;
        r.v[3] = -1;
        r.fail_open = 1;
        st->fail_open++;
    } else if (rc != GCRA_OK) {
        r.kind = STORE_REPLY_ERROR;
        r.text = err;
    } else {
        rl_reply_ints(&res.d, r.v);
    }
    done(st, req, &r);
}

/* RELEASE of limit i of c: its undo "1" when the token held a slot
 * there. 0, or -1 with c->err_text set. */
static int store_local_release_one(struct store *st, struct store_check *c,
                                   const struct store_local_limit *sl,
                                   unsigned i, const char **err)
{
    int held = store_local_release(st->impl, &sl[i], err);

    if (held < 0) {
        c->err_text = *err;
        return -1;
    }
    c->lim[i].undo[0] = held ? '1' : '0';
    c->lim[i].undo[1] = '\0';
    return 0;
}

/* Every limit decided at one instant, all written only when all admit
 * (CHECK), none written otherwise. */
static void store_local_check_op(struct store *st, struct store_check *c,
                                 store_check_done_fn *done)
{
    struct store_local_limit *sl;
    struct gcra_params *wp;
    const char *err = NULL;
    unsigned i;
    int rc;

    c->done = done;
    if (c->op == STORE_RESET) {
        for (i = 0; i < c->n; i++) {
            c->deleted +=
                store_local_del(st->impl, c->lim[i].key, c->lim[i].klen);
        }
        done(c);
        return;
    }
    if (c->n == 0) {
        done(c);
        return;
    }
    sl = px_calloc(c->n, sizeof(*sl));
    wp = px_calloc(c->n, sizeof(*wp));
    for (i = 0; i < c->n; i++) {
        /* A shadow level reserves nothing for WAIT: it never delays. */
        store_write_params(&c->lim[i].p, c->lim[i].shadow ? 0 : c->wait_ns,
                           &wp[i]);
        sl[i].algo = c->lim[i].algo;
        sl[i].lim = &c->lim[i].lim;
        sl[i].p = &c->lim[i].p;
        sl[i].p_write = &wp[i];
        sl[i].wait_ns = c->lim[i].shadow ? 0 : c->wait_ns;
        sl[i].key = c->lim[i].key;
        sl[i].klen = c->lim[i].klen;
        sl[i].level = c->lim[i].level;
        sl[i].shadow = c->lim[i].shadow;
        sl[i].id = c->id;
        sl[i].id_len = c->id_len;
    }
    if (c->op == STORE_RELEASE) {
        /* Each concurrency limit frees the token's slot; the count of
         * those where it held one is the reply. */
        for (i = 0;
             i < c->n && store_local_release_one(st, c, sl, i, &err) == 0;
             i++) {
        }
        px_free(sl);
        px_free(wp);
        done(c);
        return;
    }
    if (c->op == STORE_ADJUST) {
        rc = store_local_adjust(st->impl, c->n, sl, c->delta, c->res, c->peek,
                                &err);
    } else {
        rc = store_local_check(st->impl, c->n, sl, c->cost,
                               c->op == STORE_CHECK, c->res, c->peek, &err);
    }
    /* An ADJUST is no decision to admit: a full store is its error. */
    if (rc == STORE_LOCAL_EFULL && st->conf->store_down == CONF_FAIL_OPEN &&
        c->op != STORE_ADJUST) {
        /* As a store that is down: every limit admitted undecided, nothing
         * written, counted once a call. */
        for (i = 0; i < c->n; i++) {
            store_fail_open_limit(c, i);
        }
        st->fail_open++;
    } else if (rc != 0) {
        c->err_text = err;
    } else {
        store_shadow_mark(c);
    }
    px_free(sl);
    px_free(wp);
    done(c);
}

static const char *store_local_override_known(struct store *st,
                                              const char *path, size_t len)
{
    return store_local_override_get(st->impl, path, len);
}

static void store_local_override(struct store *st, struct req *req,
                                 enum store_override_op op,
                                 const struct limits_level *lev,
                                 const char *path, size_t plen,
                                 const char *text, size_t tlen,
                                 store_done_fn *done)
{
    struct store_reply r = { .kind = STORE_REPLY_OK };

    PX_UNUSED(lev);
    if (op == STORE_OVERRIDE_GET) {
        r.kind = STORE_REPLY_BULK;
        r.text = store_local_override_get(st->impl, path, plen);
        r.len = r.text != NULL ? strlen(r.text) : 0;
    } else if (op == STORE_OVERRIDE_DEL) {
        r.kind = STORE_REPLY_INT;
        r.n = store_local_override_set(st->impl, path, plen, NULL, 0);
    } else if (store_local_override_set(st->impl, path, plen, text, tlen) < 0) {
        r.kind = STORE_REPLY_ERROR;
        r.text = STORE_LOCAL_OVERRIDE_FULL;
    }
    done(st, req, &r);
}

static void store_local_cron_op(struct store *st)
{
    store_local_cron(st->impl);
}

static void store_local_stats(struct store *st, struct store_stats *out)
{
    const struct store_local *local = st->impl;

    out->embedded_keys = local->map.count;
    out->embedded_evicted_expired = local->map.evicted_expired;
    out->embedded_bytes = local->map.bytes;
    out->embedded_full_refused = local->full_refused;
    out->override_bytes = local->override_bytes;
    out->override_refused = local->override_refused;
}

const struct store_ops store_local_ops = {
    .init = store_local_init_op,
    .free = store_local_free_op,
    .ready = store_local_ready,
    .throttle = store_local_throttle,
    .check = store_local_check_op,
    .refund = NULL, /* a check refused anywhere writes nothing */
    .override_known = store_local_override_known,
    .override = store_local_override,
    .flush = NULL, /* decided at once: nothing queued */
    .cron = store_local_cron_op,
    .stop = NULL,
    .stats = store_local_stats,
};
