/* The refusal cache (see refusal.h): entries in an LRU, one tracker
 * connection per node that holds cached keys. */
#include "proxy/limiter/refusal.h"

#include <string.h>
#include <uv.h>

#include "parser/resp.h"
#include "parser/resp_enc.h"
#include "parser/resp_value.h"
#include "parser/slot.h"
#include "proxy/core/cluster.h"
#include "proxy/core/log.h"
#include "proxy/core/req.h"
#include "proxy/core/upstream.h"
#include "proxy/core/util.h"
#include "proxy/limiter/refusal_field.h"

/* Nanoseconds per microsecond: TIME's resolution. */
#define REFUSAL_NS_PER_US 1000
/* Nanoseconds per millisecond: PEXPIRETIME's. */
#define REFUSAL_NS_PER_MS 1000000

/* A node's tracker: a private RESP3 connection with CLIENT TRACKING on,
 * which read every key of its entries. Owned by rf->trackers. */
struct refusal_tracker {
    struct refusal *rf;  /* borrowed: its cache */
    struct upstream *up; /* owned (given back closed) */
    char name[300];      /* the node's "host:port" */
};

/* What a cached key holds. */
enum refusal_kind {
    REFUSAL_TAT,   /* a GCRA TAT (a string), checked against the bytes
                      the script read */
    REFUSAL_HASH,  /* a hash of a few integer fields (a fixed window, a
                      bucket, a sliding counter), as the tracker reads it */
    REFUSAL_SLOTS, /* a sliding window's hash of slots, as the tracker
                      reads it */
};

/* The LIMITER entries whose states are records of one identity's string
 * (refusal_field.h): Redis tracks the string, so its invalidation names
 * it and forgets them all. Owned by rf->hashes; freed with its last
 * entry. */
struct refusal_hash {
    struct queue entries; /* struct refusal_entry, by hlink */
};

/* One cached key. Owned by rf->entries, linked in rf->lru. */
struct refusal_entry {
    struct queue lru;              /* link in rf->lru */
    struct refusal_tracker *t;     /* borrowed: the tracker of its node */
    char *key;                     /* owned */
    size_t klen;                   /* bytes of key */
    enum refusal_kind kind;        /* what the key holds */
    char *raw;                     /* owned, REFUSAL_TAT: the bytes the script
                                      read; NULL: no key */
    size_t rawlen;                 /* bytes of raw */
    int have;                      /* the key exists (and holds a TAT) */
    int64_t tat_ns;                /* REFUSAL_TAT: that TAT */
    const char *const *fields;     /* REFUSAL_HASH: the names read (static,
                                      NULL-terminated; the caller's); NULL
                                      for the other kinds */
    unsigned nf;                   /* REFUSAL_HASH: how many */
    int64_t f[REFUSAL_FIELDS_MAX]; /* REFUSAL_HASH: their values */
    int64_t *slots;                /* owned, REFUSAL_SLOTS: 2 a slot, its
                                      start (us) and count, as stored */
    size_t nslots;                 /* REFUSAL_SLOTS: slots in it */
    struct refusal_span_clock clk; /* node time minus local time, its
                                      bounds (refusal_span.h) */
    int64_t expire_ns;             /* when the key expires (INT64_MAX: never):
                                      from then on it holds nothing */
    size_t bytes;                  /* charged to rf->bytes
                                      (refusal_entry_bytes and its raw and
                                      slots) */
    size_t hlen;                   /* > 0: a LIMITER state kept in a string:
                                      key's first hlen bytes name it, the
                                      rest its record's field */
    struct refusal_hash *hash; /* hlen > 0: borrowed, its string's entries */
    struct queue hlink;        /* hlen > 0: link in hash->entries */
    int64_t field_ns;          /* hlen > 0: the record's own expiry (its
                                  value's; INT64_MAX: none or no record) */
    unsigned seen : 1;         /* the tracker's read confirmed the state */
    unsigned active : 1;       /* and its PEXPIRETIME gave the expiry */
};

/* What an entry of a `klen`-byte key is charged before its raw or slots:
 * the entry, its key, and the index's entry with its copy of the key (5
 * words). */
static size_t refusal_entry_bytes(size_t klen)
{
    return sizeof(struct refusal_entry) + 2 * (klen + 1) + 5 * sizeof(void *);
}

static void refusal_entry_free(void *p)
{
    struct refusal_entry *e = p;
    struct refusal *rf = e->t->rf;

    rf->bytes -= e->bytes;
    rf->freed_bytes += e->bytes;
    queue_remove(&e->lru);
    if (e->hash != NULL) {
        queue_remove(&e->hlink);
        if (queue_empty(&e->hash->entries)) {
            hmap_del(&rf->hashes, e->key, e->hlen);
            px_free(e->hash);
        }
    }
    px_free(e->key);
    px_free(e->raw);
    px_free(e->slots);
    px_free(e);
}

/* Forgets entry `e`. */
static void refusal_drop(struct refusal *rf, struct refusal_entry *e)
{
    hmap_del(&rf->entries, e->key, e->klen);
    refusal_entry_free(e);
}

/* Forgets every entry of tracker `t` (NULL: every entry). */
static void refusal_drop_all(struct refusal *rf, struct refusal_tracker *t)
{
    struct queue *q = queue_head(&rf->lru);

    while (q != &rf->lru) {
        struct refusal_entry *e = container_of(q, struct refusal_entry, lru);
        q = q->next;
        if (t == NULL || e->t == t) {
            refusal_drop(rf, e);
        }
    }
}

/* Drops the least recently used entries but `keep` until `need` more
 * bytes fit rf->max_bytes. 1 when they fit, else 0 (need alone is past
 * the bound, or only `keep` is left). */
static int refusal_room(struct refusal *rf, size_t need,
                        const struct refusal_entry *keep)
{
    while (rf->bytes + need > rf->max_bytes) {
        struct queue *q = queue_tail(&rf->lru);
        struct refusal_entry *e = container_of(q, struct refusal_entry, lru);
        if (q == &rf->lru || e == keep) {
            return 0;
        }
        refusal_drop(rf, e);
    }
    return 1;
}

/* Charges `more` bytes to entry `e` (its raw or slots), making room from
 * the others; 0 when they do not fit (the caller drops e). */
static int refusal_charge(struct refusal *rf, struct refusal_entry *e,
                          size_t more)
{
    if (!refusal_room(rf, more, e)) {
        rf->skipped++;
        return 0;
    }
    e->bytes += more;
    rf->bytes += more;
    return 1;
}

/* ---------------- Trackers ---------------- */

/* An invalidation push: ["invalidate", [key...]] or ["invalidate", null]
 * (a flush). Anything else on the tracker is not ours to read. */
static void refusal_tracker_push(struct upstream *up, const char *p, size_t n)
{
    struct refusal_tracker *t = (void *)up->owner;
    struct refusal *rf;
    struct resp_value v;
    size_t used, i;

    if (t == NULL || resp_value_parse(p, n, &v, &used) != RESP_OK) {
        return; /* closing with the cache */
    }
    rf = t->rf;
    if (v.type == '>' && v.n == 2 && resp_value_is(&v.elem[0], "invalidate")) {
        const struct resp_value *keys = &v.elem[1];
        if (keys->null || keys->type != '*') {
            rf->invalidations += rf->entries.count;
            refusal_drop_all(rf, t);
        } else {
            for (i = 0; i < keys->n; i++) {
                struct refusal_entry *e = hmap_get(
                    &rf->entries, keys->elem[i].str, keys->elem[i].len);
                struct refusal_hash *h;
                if (e != NULL) {
                    rf->invalidations++;
                    refusal_drop(rf, e);
                }
                /* An identity's string: every state of it (the last one
                 * dropped frees h). */
                while ((h = hmap_get(&rf->hashes, keys->elem[i].str,
                                     keys->elem[i].len)) != NULL) {
                    rf->invalidations++;
                    refusal_drop(rf, container_of(queue_head(&h->entries),
                                                  struct refusal_entry, hlink));
                }
            }
        }
    }
    resp_value_free(&v);
}

/* The tracker is closed: nothing tells us about its keys any more. */
static void refusal_tracker_gone(struct upstream *up, int failed)
{
    struct refusal_tracker *t = (void *)up->owner;
    struct refusal *rf;

    PX_UNUSED(failed);
    if (t == NULL) {
        return; /* closed with the cache */
    }
    rf = t->rf;
    refusal_drop_all(rf, t);
    hmap_del(&rf->trackers, t->name, strlen(t->name));
    px_free(t);
}

static const struct upstream_ops refusal_tracker_ops = {
    .push = refusal_tracker_push,
    .gone = refusal_tracker_gone,
};

/* The tracker of the node that owns `key`, made when there is none; NULL
 * when no node serves the key. */
static struct refusal_tracker *refusal_tracker_for(struct refusal *rf,
                                                   const char *key, size_t klen)
{
    struct cluster *cl = rf->cl;
    struct node *node = cluster_sharded(cl)
                            ? cluster_node_for_slot(cl, slot_for_key(key, klen))
                            : cl->single;
    static const char *const on[] = { "CLIENT", "TRACKING", "on" };
    struct refusal_tracker *t;
    size_t nlen;

    if (node == NULL) {
        return NULL;
    }
    nlen = strlen(node->name);
    t = hmap_get(&rf->trackers, node->name, nlen);
    if (t != NULL) {
        return t;
    }
    t = px_calloc(1, sizeof(*t));
    t->rf = rf;
    snprintf(t->name, sizeof(t->name), "%s", node->name);
    t->up =
        cluster_limiter_private(cl, node, RESP_PROTO3, &refusal_tracker_ops);
    /* `owner` is opaque to the core; the tracker is this one's. */
    t->up->owner = (void *)t;
    /* Redis keeps naming it in its tracking table: never pooled again. */
    t->up->tracked = 1;
    hmap_put(&rf->trackers, t->name, nlen, t);
    upstream_send(t->up, req_own_argv(3, on, NULL, NULL));
    return t;
}

/* The entry a read the tracker sent for `part` is for: the entry of its
 * key, when it waits for the state (seen 0) or for the expiry (seen 1);
 * else NULL (forgotten meanwhile, or active already).
 *
 * A reply may meet a newer entry of the same key than the one that sent
 * the read (forgotten and learnt again meanwhile). That is harmless: the
 * read registered the key with the tracking, so any write after it is
 * pushed and forgets whatever entry the key has then. */
static struct refusal_entry *
refusal_reading_key(struct refusal *rf, const char *key, size_t klen, int seen)
{
    struct refusal_entry *e = hmap_get(&rf->entries, key, klen);

    return e == NULL || e->active || e->seen != seen ? NULL : e;
}

static struct refusal_entry *refusal_reading(struct refusal *rf,
                                             const struct req *part, int seen)
{
    const char *key;
    size_t klen;

    key = resp_cmd_arg(part->cmd, 1, &klen);
    return refusal_reading_key(rf, key, klen, seen);
}

/* The tracker's GET of a TAT: the entry answers from now on when the key
 * still holds what the script read. */
static void refusal_on_get(struct req *part, const char *frame, size_t len)
{
    struct refusal *rf = part->ctx;
    struct refusal_entry *e = refusal_reading(rf, part, 0);
    struct resp_value v;
    size_t used;
    int same = 0;

    if (e == NULL) {
        return;
    }
    if (resp_value_parse(frame, len, &v, &used) == RESP_OK) {
        if (v.null) {
            same = e->raw == NULL;
        } else if (v.type == '$') {
            same = e->raw != NULL && v.len == e->rawlen &&
                   memcmp(v.str, e->raw, v.len) == 0;
        }
        resp_value_free(&v);
    }
    if (same) {
        e->seen = 1;
    } else {
        refusal_drop(rf, e);
    }
}

/* A field of a hash state as the scripts write it (or a number of TIME):
 * a decimal without a sign or a leading zero, at most 2^53 - 1 (the
 * scripts' integers are Lua doubles, and they refuse a larger field as
 * malformed); -1 for anything else, which the cache leaves to Redis. */
static int64_t refusal_field(const struct resp_value *f)
{
    return f->type != '$' || f->null ? -1 : refusal_field_int(f->str, f->len);
}

/* The tracker's HMGET of a hash state (its entry's fields): from now on
 * every write of the key is pushed, so what this read shows is the state
 * until then, whatever the script saw before. A hash that is not such a
 * state (a field missing, a wrong type) is not cached. */
static void refusal_on_hmget(struct req *part, const char *frame, size_t len)
{
    struct refusal *rf = part->ctx;
    struct refusal_entry *e = refusal_reading(rf, part, 0);
    struct resp_value v;
    size_t used, i, nnull = 0, nok = 0;

    if (e == NULL) {
        return;
    }
    if (resp_value_parse(frame, len, &v, &used) == RESP_OK) {
        if (v.type == '*' && v.n == e->nf) {
            for (i = 0; i < v.n; i++) {
                nnull += v.elem[i].null;
                e->f[i] = refusal_field(&v.elem[i]);
                nok += e->f[i] >= 0;
            }
        }
        resp_value_free(&v);
    }
    if (e->nf > 0 && (nnull == e->nf || nok == e->nf)) {
        e->have = nok == e->nf;
        e->seen = 1;
    } else {
        refusal_drop(rf, e);
    }
}

/* The tracker's HGETALL of a sliding window (a map of slot starts to
 * counts, and "total", which the scripts never read): held as it shows, as
 * refusal_on_hmget holds a hash. A field or count that is no plain decimal,
 * or more than REFUSAL_SLOTS_MAX slots, is not cached. */
static void refusal_on_hgetall(struct req *part, const char *frame, size_t len)
{
    struct refusal *rf = part->ctx;
    struct refusal_entry *e = refusal_reading(rf, part, 0);
    struct resp_value v;
    size_t used, i;
    int ok = 0;

    if (e == NULL) {
        return;
    }
    if (resp_value_parse(frame, len, &v, &used) == RESP_OK) {
        ok = (v.type == '%' || v.type == '*') && v.n % 2 == 0 &&
             v.n <= 2 * (REFUSAL_SLOTS_MAX + 1);
        /* Redis keeps no empty hash: no fields is no key. */
        e->have = v.n > 0;
        ok = ok && (v.n == 0 || refusal_charge(rf, e, v.n * sizeof(*e->slots)));
        e->slots = ok && v.n > 0 ? px_malloc(v.n * sizeof(*e->slots)) : NULL;
        for (i = 0; ok && i < v.n; i += 2) {
            if (resp_value_is(&v.elem[i], "total")) {
                continue;
            }
            e->slots[2 * e->nslots] = refusal_field(&v.elem[i]);
            e->slots[2 * e->nslots + 1] = refusal_field(&v.elem[i + 1]);
            ok = e->slots[2 * e->nslots] >= 0 &&
                 e->slots[2 * e->nslots + 1] >= 0 &&
                 e->nslots < REFUSAL_SLOTS_MAX;
            e->nslots++;
        }
        resp_value_free(&v);
    }
    if (ok) {
        e->seen = 1;
    } else {
        refusal_drop(rf, e);
    }
}

/* The tracker's PEXPIRETIME of a key whose state it read: when the state
 * goes. A limiter key expires about when its state stops mattering, but
 * Redis rounds the expiry to its millisecond clock, so the key can go a
 * little before the instant the model would stop refusing; from then on
 * Redis sees no key, and neither may the cache. Where PEXPIRETIME is
 * missing (before Redis 7.0) the entry is forgotten: no refusal is then
 * answered by the cache. */
static void refusal_on_expiretime(struct req *part, const char *frame,
                                  size_t len)
{
    struct refusal *rf = part->ctx;
    struct refusal_entry *e = refusal_reading(rf, part, 1);
    struct resp_value v;
    size_t used;
    int exists, ok = 0;

    if (e == NULL) {
        return;
    }
    exists = e->kind == REFUSAL_TAT ? e->raw != NULL : e->have;
    if (resp_value_parse(frame, len, &v, &used) == RESP_OK) {
        if (v.type == ':' && v.integer == -2) {
            ok = !exists;
            e->expire_ns = INT64_MAX;
        } else if (v.type == ':' && v.integer >= -1) {
            ok = exists;
            e->expire_ns =
                v.integer == -1 || v.integer > INT64_MAX / REFUSAL_NS_PER_MS
                    ? INT64_MAX
                    : v.integer * REFUSAL_NS_PER_MS;
        }
        resp_value_free(&v);
    }
    if (ok) {
        e->active = 1;
    } else {
        refusal_drop(rf, e);
    }
}

/* Narrows e's bounds on the node's clock with those of a call sent at
 * `sent_ns` that read `node_now_ns`, whose reply is being read now (the
 * node decided before: now is a bound on the receive time). */
static void refusal_tighten(struct refusal_entry *e, int64_t node_now_ns,
                            uint64_t sent_ns)
{
    struct refusal_span_clock more;

    refusal_span_clock_of_call(node_now_ns, sent_ns, uv_hrtime(), &more);
    refusal_span_clock_tighten(&e->clk, &more);
}

/* A TIME the tracker sent for the entry of `key`. Owned by its request
 * (freed by its reply). */
struct refusal_clock {
    struct refusal *rf; /* borrowed */
    uint64_t sent_ns;   /* local time it was queued */
    size_t klen;        /* bytes of key */
    char key[];         /* the entry's key */
};

/* The tracker's TIME: a connection nothing else queues on reads the clock
 * within a round trip of sending, so its bound on the node's clock is
 * usually far tighter than the one of a batched call that waited behind
 * others (a loose bound lets cached fields run ahead of Redis's). */
static void refusal_on_time(struct req *part, const char *frame, size_t len)
{
    struct refusal_clock *ck = part->ctx;
    struct refusal_entry *e;
    struct resp_value v;
    size_t used;

    if (resp_value_parse(frame, len, &v, &used) == RESP_OK) {
        int64_t sec =
            v.type == '*' && v.n == 2 ? refusal_field(&v.elem[0]) : -1;
        int64_t usec = sec >= 0 ? refusal_field(&v.elem[1]) : -1;
        e = hmap_get(&ck->rf->entries, ck->key, ck->klen);
        if (usec >= 0 && e != NULL) {
            refusal_tighten(
                e, sec * 1000000 * REFUSAL_NS_PER_US + usec * REFUSAL_NS_PER_US,
                ck->sent_ns);
        }
        resp_value_free(&v);
    }
    px_free(ck);
}

/* A context naming entry e's key, for a read of the tracker. */
static struct refusal_clock *refusal_clock_new(struct refusal *rf,
                                               const struct refusal_entry *e)
{
    struct refusal_clock *ck = px_malloc(sizeof(*ck) + e->klen);

    ck->rf = rf;
    ck->sent_ns = uv_hrtime();
    ck->klen = e->klen;
    memcpy(ck->key, e->key, e->klen);
    return ck;
}

/* Sends the tracker's reads of entry e: `argv` (the state of its key),
 * TIME, then PEXPIRETIME of the key (whose reply makes it active). */
static void refusal_read(struct refusal *rf, struct refusal_entry *e, int argc,
                         const char **argv, size_t *lens,
                         req_reply_fn *on_state)
{
    static const char *const time[1] = { "TIME" };
    const char *xargv[2] = { "PEXPIRETIME", e->key };
    size_t xlens[2] = { 11, e->klen };

    upstream_send(e->t->up,
                  req_own(resp_cmd_new(argc, argv, lens), on_state, rf));
    upstream_send(e->t->up, req_own_argv(1, time, refusal_on_time,
                                         refusal_clock_new(rf, e)));
    upstream_send(e->t->up, req_own(resp_cmd_new(2, xargv, xlens),
                                    refusal_on_expiretime, rf));
}

/* ---------------- LIMITER states in a string ---------------- */

/* The state string the tracker's GET showed (v) as entry e's state (the
 * record of its field), held as the reads of a key of its own hold it
 * (refusal_on_get, _hmget, _hgetall), with the record's own expiry; 0
 * when it is no state the cache holds. */
static int refusal_field_state(struct refusal_entry *e,
                               const struct resp_value *v)
{
    const char *rec = NULL, *pl;
    size_t reclen = 0, plen;
    int64_t ms;
    int found;

    e->field_ns = INT64_MAX;
    found = v->null ? 0
            : v->type != '$'
                ? -1
                : refusal_field_record(v->str, v->len, e->key + e->hlen,
                                       e->klen - e->hlen, &rec, &reclen);
    if (found == 0) {
        e->have = 0;
        return e->raw == NULL;
    }
    if (found < 0 || !refusal_field_value(rec, reclen, &ms, &pl, &plen)) {
        return 0;
    }
    if (ms > 0) {
        e->field_ns = ms <= INT64_MAX / REFUSAL_NS_PER_MS
                          ? ms * REFUSAL_NS_PER_MS
                          : INT64_MAX;
    }
    e->have = 1;
    return e->raw != NULL && plen == e->rawlen && memcmp(pl, e->raw, plen) == 0;
}

/* The tracker's GET of a LIMITER state's string: from now on every write
 * of it is pushed, so what it shows is the state until then. */
static void refusal_on_field(struct req *part, const char *frame, size_t len)
{
    struct refusal_clock *ck = part->ctx;
    struct refusal *rf = ck->rf;
    struct refusal_entry *e = refusal_reading_key(rf, ck->key, ck->klen, 0);
    struct resp_value v;
    size_t used;
    int ok = 0;

    if (e != NULL) {
        if (resp_value_parse(frame, len, &v, &used) == RESP_OK) {
            ok = refusal_field_state(e, &v);
            resp_value_free(&v);
        }
        if (ok) {
            e->seen = 1;
        } else {
            refusal_drop(rf, e);
        }
    }
    px_free(ck);
}

/* The tracker's PEXPIRETIME of a LIMITER state's string: the state goes
 * at its record's own expiry or the string's, whichever comes first (the
 * scripts keep the string as long as its records; anyone else may
 * not). */
static void refusal_on_hash_expiretime(struct req *part, const char *frame,
                                       size_t len)
{
    struct refusal_clock *ck = part->ctx;
    struct refusal *rf = ck->rf;
    struct refusal_entry *e = refusal_reading_key(rf, ck->key, ck->klen, 1);
    struct resp_value v;
    size_t used;
    int exists, ok = 0;

    if (e != NULL) {
        exists = e->raw != NULL;
        if (resp_value_parse(frame, len, &v, &used) == RESP_OK) {
            if (v.type == ':' && v.integer == -2) {
                ok = !exists;
                e->expire_ns = INT64_MAX;
            } else if (v.type == ':' && v.integer >= -1) {
                ok = 1;
                e->expire_ns =
                    v.integer == -1 || v.integer > INT64_MAX / REFUSAL_NS_PER_MS
                        ? INT64_MAX
                        : v.integer * REFUSAL_NS_PER_MS;
                if (e->field_ns < e->expire_ns) {
                    e->expire_ns = e->field_ns;
                }
            }
            resp_value_free(&v);
        }
        if (ok) {
            e->active = 1;
        } else {
            refusal_drop(rf, e);
        }
    }
    px_free(ck);
}

/* The tracker's reads of a LIMITER state's entry e: GET of its string
 * (whose record of e's field is the state), TIME, PEXPIRETIME of the
 * string. */
static void refusal_read_field(struct refusal *rf, struct refusal_entry *e)
{
    static const char *const time[1] = { "TIME" };
    const char *argv[2] = { "GET", e->key };
    size_t lens[2] = { 3, e->hlen };
    const char *xargv[2] = { "PEXPIRETIME", e->key };
    size_t xlens[2] = { 11, e->hlen };

    upstream_send(e->t->up,
                  req_own(resp_cmd_new(2, argv, lens), refusal_on_field,
                          refusal_clock_new(rf, e)));
    upstream_send(e->t->up, req_own_argv(1, time, refusal_on_time,
                                         refusal_clock_new(rf, e)));
    upstream_send(e->t->up, req_own(resp_cmd_new(2, xargv, xlens),
                                    refusal_on_hash_expiretime,
                                    refusal_clock_new(rf, e)));
}

/* ---------------- The cache ---------------- */

void refusal_init(struct refusal *rf, struct cluster *cl, size_t max,
                  size_t max_bytes)
{
    memset(rf, 0, sizeof(*rf));
    rf->cl = cl;
    rf->max = max;
    rf->max_bytes = max_bytes;
    hmap_init(&rf->entries);
    hmap_init(&rf->trackers);
    hmap_init(&rf->hashes);
    queue_init(&rf->lru);
}

static void refusal_tracker_close(void *p)
{
    struct refusal_tracker *t = p;

    /* Its callbacks must not touch the maps being freed. */
    t->up->owner = NULL;
    cluster_private_put(t->rf->cl, t->up, 1);
    px_free(t);
}

void refusal_node_gone(struct refusal *rf, const char *name)
{
    struct refusal_tracker *t = hmap_get(&rf->trackers, name, strlen(name));

    if (t != NULL) {
        /* Its gone callback forgets its keys and frees it. */
        upstream_destroy(t->up, "connection closed: the node is gone");
    }
}

void refusal_free(struct refusal *rf)
{
    hmap_free(&rf->entries, refusal_entry_free);
    PX_ASSERT(rf->bytes == 0);        /* every charge was given back */
    PX_ASSERT(rf->hashes.count == 0); /* freed with their last entries */
    hmap_free(&rf->hashes, NULL);
    hmap_free(&rf->trackers, refusal_tracker_close);
}

/* The active entry of `key` holding `kind`, made the most recently used,
 * and the span of the node's time now; NULL when there is none. */
static struct refusal_entry *refusal_find(struct refusal *rf, const char *key,
                                          size_t klen, enum refusal_kind kind,
                                          uint64_t now_local_ns,
                                          struct refusal_span *span)
{
    struct refusal_entry *e;

    if (rf->entries.count == 0) {
        return NULL;
    }
    e = hmap_get(&rf->entries, key, klen);
    if (e == NULL || !e->active || e->kind != kind) {
        return NULL;
    }
    if (!refusal_span_now(&e->clk, now_local_ns, span) ||
        span->hi_ns >= e->expire_ns) {
        return NULL; /* the key may be gone: Redis decides */
    }
    queue_remove(&e->lru);
    queue_insert_head(&rf->lru, &e->lru);
    return e;
}

int refusal_lookup(struct refusal *rf, const char *key, size_t klen,
                   uint64_t now_local_ns, int *have_tat, int64_t *tat_ns,
                   struct refusal_span *span)
{
    struct refusal_entry *e =
        refusal_find(rf, key, klen, REFUSAL_TAT, now_local_ns, span);

    if (e == NULL) {
        return 0;
    }
    *have_tat = e->have;
    *tat_ns = e->tat_ns;
    return 1;
}

int refusal_lookup_slots(struct refusal *rf, const char *key, size_t klen,
                         uint64_t now_local_ns, int *have,
                         const int64_t **slots, size_t *n,
                         struct refusal_span *span)
{
    struct refusal_entry *e =
        refusal_find(rf, key, klen, REFUSAL_SLOTS, now_local_ns, span);

    if (e == NULL) {
        return 0;
    }
    *have = e->have;
    *slots = e->slots;
    *n = e->nslots;
    return 1;
}

int refusal_lookup_hash(struct refusal *rf, const char *key, size_t klen,
                        const char *const *fields, uint64_t now_local_ns,
                        int *have, int64_t v[REFUSAL_FIELDS_MAX],
                        struct refusal_span *span)
{
    struct refusal_entry *e =
        refusal_find(rf, key, klen, REFUSAL_HASH, now_local_ns, span);

    if (e == NULL || e->fields != fields) {
        return 0;
    }
    *have = e->have;
    memcpy(v, e->f, sizeof(e->f));
    return 1;
}

/* A new, pending entry for `key` in place of any it had (NULL when the
 * cache is off, no node serves the key, or it cannot fit
 * refusal_cache_max_bytes), the least recently used ones making room. */
static struct refusal_entry *
refusal_entry_new(struct refusal *rf, const char *key, size_t klen, size_t hlen,
                  enum refusal_kind kind, int64_t node_now_ns, uint64_t sent_ns)
{
    struct refusal_tracker *t;
    struct refusal_entry *e;
    size_t bytes;

    if (rf->max == 0) {
        return NULL;
    }
    e = hmap_get(&rf->entries, key, klen);
    if (e != NULL) {
        refusal_drop(rf, e);
    }
    t = refusal_tracker_for(rf, key, klen);
    if (t == NULL) {
        return NULL;
    }
    if (rf->entries.count >= rf->max) {
        refusal_drop(
            rf, container_of(queue_tail(&rf->lru), struct refusal_entry, lru));
    }
    /* A LIMITER record's entry is charged its string's index too (once per
     * entry: an upper bound). */
    bytes =
        refusal_entry_bytes(klen) +
        (hlen > 0 ? sizeof(struct refusal_hash) + refusal_entry_bytes(hlen) -
                        sizeof(struct refusal_entry)
                  : 0);
    if (!refusal_room(rf, bytes, NULL)) {
        rf->skipped++;
        return NULL;
    }
    e = px_calloc(1, sizeof(*e));
    e->bytes = bytes;
    rf->bytes += e->bytes;
    e->t = t;
    e->key = px_strndup(key, klen);
    e->klen = klen;
    e->kind = kind;
    e->clk.lo_ns = INT64_MIN;
    e->clk.hi_ns = INT64_MAX;
    refusal_tighten(e, node_now_ns, sent_ns);
    hmap_put(&rf->entries, e->key, klen, e);
    queue_insert_head(&rf->lru, &e->lru);
    e->hlen = hlen;
    e->field_ns = INT64_MAX;
    if (hlen > 0) {
        e->hash = hmap_get(&rf->hashes, key, hlen);
        if (e->hash == NULL) {
            e->hash = px_calloc(1, sizeof(*e->hash));
            queue_init(&e->hash->entries);
            hmap_put(&rf->hashes, key, hlen, e->hash);
        }
        queue_insert_tail(&e->hash->entries, &e->hlink);
    }
    return e;
}

/* refusal_learn of a key of its own (hlen 0) or of a LIMITER field. */
static void refusal_learn_at(struct refusal *rf, const char *key, size_t klen,
                             size_t hlen, const char *raw, size_t rawlen,
                             int have_tat, int64_t tat_ns, int64_t node_now_ns,
                             uint64_t sent_ns)
{
    static const char *const get = "GET";
    struct refusal_entry *e;
    const char *argv[2];
    size_t lens[2];

    e = hmap_get(&rf->entries, key, klen);
    if (e != NULL && e->kind == REFUSAL_TAT && e->hlen == hlen &&
        (e->raw == NULL) == (raw == NULL) &&
        (raw == NULL ||
         (e->rawlen == rawlen && memcmp(e->raw, raw, rawlen) == 0))) {
        /* The same state, seen again: another bound on the clock. */
        refusal_tighten(e, node_now_ns, sent_ns);
        return;
    }
    e = refusal_entry_new(rf, key, klen, hlen, REFUSAL_TAT, node_now_ns,
                          sent_ns);
    if (e == NULL) {
        return;
    }
    if (raw != NULL && !refusal_charge(rf, e, rawlen + 1)) {
        refusal_drop(rf, e);
        return;
    }
    e->raw = raw != NULL ? px_strndup(raw, rawlen) : NULL;
    e->rawlen = rawlen;
    e->have = have_tat;
    e->tat_ns = tat_ns;
    if (hlen > 0) {
        refusal_read_field(rf, e);
        return;
    }
    argv[0] = get;
    argv[1] = key;
    lens[0] = 3;
    lens[1] = klen;
    refusal_read(rf, e, 2, argv, lens, refusal_on_get);
}

void refusal_learn(struct refusal *rf, const char *key, size_t klen,
                   const char *raw, size_t rawlen, int have_tat, int64_t tat_ns,
                   int64_t node_now_ns, uint64_t sent_ns)
{
    refusal_learn_at(rf, key, klen, 0, raw, rawlen, have_tat, tat_ns,
                     node_now_ns, sent_ns);
}

void refusal_learn_limiter(struct refusal *rf, const char *key, size_t klen,
                           const char *raw, size_t rawlen, int have_tat,
                           int64_t tat_ns, int64_t node_now_ns,
                           uint64_t sent_ns)
{
    refusal_learn_at(rf, key, klen, refusal_field_hash_len(key, klen), raw,
                     rawlen, have_tat, tat_ns, node_now_ns, sent_ns);
}

/* The entry to read for `key` holding `kind` (as `fields`, for a hash
 * state, a key of its own: only gcra levels live in state strings): NULL
 * when the key is cached so already, or being read (whatever
 * changed it since is pushed: the call only gives another bound on the
 * clock), or when none can be made; else a new, pending one. */
static struct refusal_entry *
refusal_entry_to_read(struct refusal *rf, const char *key, size_t klen,
                      enum refusal_kind kind, const char *const *fields,
                      int64_t node_now_ns, uint64_t sent_ns)
{
    struct refusal_entry *e = hmap_get(&rf->entries, key, klen);

    if (e != NULL && e->kind == kind && e->fields == fields && e->hlen == 0) {
        refusal_tighten(e, node_now_ns, sent_ns);
        return NULL;
    }
    e = refusal_entry_new(rf, key, klen, 0, kind, node_now_ns, sent_ns);
    if (e != NULL) {
        e->fields = fields;
    }
    return e;
}

void refusal_learn_hash(struct refusal *rf, const char *key, size_t klen,
                        const char *const *fields, int64_t node_now_ns,
                        uint64_t sent_ns)
{
    const char *argv[2 + REFUSAL_FIELDS_MAX] = { "HMGET", key };
    size_t lens[2 + REFUSAL_FIELDS_MAX] = { 5, klen };
    struct refusal_entry *e = refusal_entry_to_read(
        rf, key, klen, REFUSAL_HASH, fields, node_now_ns, sent_ns);
    unsigned n = 0;

    if (e == NULL) {
        return;
    }
    for (; n < REFUSAL_FIELDS_MAX && fields[n] != NULL; n++) {
        argv[2 + n] = fields[n];
        lens[2 + n] = strlen(fields[n]);
    }
    e->nf = n;
    refusal_read(rf, e, (int)(2 + n), argv, lens, refusal_on_hmget);
}

void refusal_learn_slots(struct refusal *rf, const char *key, size_t klen,
                         int64_t node_now_ns, uint64_t sent_ns)
{
    const char *argv[2] = { "HGETALL", key };
    size_t lens[2] = { 7, klen };
    struct refusal_entry *e = refusal_entry_to_read(
        rf, key, klen, REFUSAL_SLOTS, NULL, node_now_ns, sent_ns);

    if (e != NULL) {
        refusal_read(rf, e, 2, argv, lens, refusal_on_hgetall);
    }
}

void refusal_forget(struct refusal *rf, const char *key, size_t klen)
{
    struct refusal_entry *e;

    if (rf->entries.count == 0) {
        return;
    }
    e = hmap_get(&rf->entries, key, klen);
    if (e != NULL) {
        refusal_drop(rf, e);
    }
}

void refusal_forget_all(struct refusal *rf)
{
    refusal_drop_all(rf, NULL);
}

void refusal_cron(struct refusal *rf)
{
    store_trim_maybe(&rf->trim, rf->freed_bytes);
}

size_t refusal_count(const struct refusal *rf)
{
    return rf->entries.count;
}
