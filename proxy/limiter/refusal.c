/* The refusal cache (see refusal.h): entries in an LRU, one tracker
 * connection per node that holds cached keys. */
#include "proxy/limiter/refusal.h"

#include <string.h>

#include "parser/resp.h"
#include "parser/resp_enc.h"
#include "parser/resp_value.h"
#include "parser/slot.h"
#include "proxy/core/cluster.h"
#include "proxy/core/log.h"
#include "proxy/core/req.h"
#include "proxy/core/upstream.h"
#include "proxy/core/util.h"

/* Nanoseconds per microsecond: TIME's resolution. */
#define REFUSAL_NS_PER_US 1000

/* A node's tracker: a private RESP3 connection with CLIENT TRACKING on,
 * which read every key of its entries. Owned by rf->trackers. */
struct refusal_tracker {
    struct refusal *rf;  /* borrowed: its cache */
    struct upstream *up; /* owned (given back closed) */
    char name[300];      /* the node's "host:port" */
};

/* One cached key. Owned by rf->entries, linked in rf->lru. */
struct refusal_entry {
    struct queue lru;          /* link in rf->lru */
    struct refusal_tracker *t; /* borrowed: the tracker of its node */
    char *key;                 /* owned */
    size_t klen;               /* bytes of key */
    char *raw;                 /* owned: the bytes the script read; NULL:
                                  no key */
    size_t rawlen;             /* bytes of raw */
    int have_tat;              /* the key held a TAT */
    int64_t tat_ns;            /* that TAT */
    int64_t offset_ns;         /* node time minus local time, an upper
                                  bound (see refusal.h) */
    unsigned active : 1;       /* the tracker's GET confirmed raw */
};

static void refusal_entry_free(void *p)
{
    struct refusal_entry *e = p;

    queue_remove(&e->lru);
    px_free(e->key);
    px_free(e->raw);
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
                if (e != NULL) {
                    rf->invalidations++;
                    refusal_drop(rf, e);
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
    struct node *node = cl->enabled
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
    t->up = cluster_private_take(cl, node, RESP_PROTO3, &refusal_tracker_ops);
    /* `owner` is opaque to the core; the tracker is this one's. */
    t->up->owner = (void *)t;
    /* Redis keeps naming it in its tracking table: never pooled again. */
    t->up->tracked = 1;
    hmap_put(&rf->trackers, t->name, nlen, t);
    upstream_send(t->up, req_own_argv(3, on, NULL, NULL));
    return t;
}

/* The tracker's GET of a key: the entry answers from now on when the key
 * still holds what the script read. */
static void refusal_on_get(struct req *part, const char *frame, size_t len)
{
    struct refusal *rf = part->ctx;
    struct refusal_entry *e;
    struct resp_value v;
    const char *key;
    size_t klen, used;
    int same = 0;

    key = resp_cmd_arg(part->cmd, 1, &klen);
    e = hmap_get(&rf->entries, key, klen);
    if (e == NULL || e->active) {
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
        e->active = 1;
    } else {
        refusal_drop(rf, e);
    }
}

/* ---------------- The cache ---------------- */

void refusal_init(struct refusal *rf, struct cluster *cl, size_t max)
{
    memset(rf, 0, sizeof(*rf));
    rf->cl = cl;
    rf->max = max;
    hmap_init(&rf->entries);
    hmap_init(&rf->trackers);
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

void refusal_free(struct refusal *rf)
{
    hmap_free(&rf->entries, refusal_entry_free);
    hmap_free(&rf->trackers, refusal_tracker_close);
}

int refusal_lookup(struct refusal *rf, const char *key, size_t klen,
                   uint64_t now_local_ns, int *have_tat, int64_t *tat_ns,
                   int64_t *node_now_ns)
{
    struct refusal_entry *e;
    int64_t now;

    if (rf->entries.count == 0) {
        return 0;
    }
    e = hmap_get(&rf->entries, key, klen);
    if (e == NULL || !e->active) {
        return 0;
    }
    queue_remove(&e->lru);
    queue_insert_head(&rf->lru, &e->lru);
    now = (int64_t)now_local_ns + e->offset_ns;
    *have_tat = e->have_tat;
    *tat_ns = e->tat_ns;
    /* TIME's resolution, as the script sees it. */
    *node_now_ns = now - now % REFUSAL_NS_PER_US;
    return 1;
}

void refusal_learn(struct refusal *rf, const char *key, size_t klen,
                   const char *raw, size_t rawlen, int have_tat, int64_t tat_ns,
                   int64_t node_now_ns, uint64_t sent_ns)
{
    static const char *const get = "GET";
    struct refusal_entry *e;
    struct refusal_tracker *t;
    const char *argv[2];
    size_t lens[2];

    if (rf->max == 0) {
        return;
    }
    e = hmap_get(&rf->entries, key, klen);
    if (e != NULL && (e->raw == NULL) == (raw == NULL) &&
        (raw == NULL ||
         (e->rawlen == rawlen && memcmp(e->raw, raw, rawlen) == 0))) {
        /* The same state, seen again: a later, closer clock. */
        e->offset_ns = node_now_ns + REFUSAL_NS_PER_US - (int64_t)sent_ns;
        return;
    }
    if (e != NULL) {
        refusal_drop(rf, e);
    }
    t = refusal_tracker_for(rf, key, klen);
    if (t == NULL) {
        return;
    }
    if (rf->entries.count >= rf->max) {
        refusal_drop(
            rf, container_of(queue_tail(&rf->lru), struct refusal_entry, lru));
    }
    e = px_calloc(1, sizeof(*e));
    e->t = t;
    e->key = px_strndup(key, klen);
    e->klen = klen;
    e->raw = raw != NULL ? px_strndup(raw, rawlen) : NULL;
    e->rawlen = rawlen;
    e->have_tat = have_tat;
    e->tat_ns = tat_ns;
    /* The node's clock read node_now_ns at some instant after sent_ns, and
     * TIME drops up to a microsecond: node time <= local + offset. */
    e->offset_ns = node_now_ns + REFUSAL_NS_PER_US - (int64_t)sent_ns;
    hmap_put(&rf->entries, e->key, klen, e);
    queue_insert_head(&rf->lru, &e->lru);
    argv[0] = get;
    argv[1] = key;
    lens[0] = 3;
    lens[1] = klen;
    upstream_send(t->up,
                  req_own(resp_cmd_new(2, argv, lens), refusal_on_get, rf));
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

size_t refusal_count(const struct refusal *rf)
{
    return rf->entries.count;
}
