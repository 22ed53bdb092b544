/* The refusal cache: limiter refusals answered without Redis, exactly.
 *
 * A GCRA decision depends on the key's stored TAT and the node's clock
 * only. When a call is refused, the proxy learns the TAT the script read;
 * as long as nobody writes the key, every later call on it is decided by
 * the same rule from that TAT and the current time, and a call that rule
 * refuses needs no round trip. The algorithms that keep a hash of a few
 * integers are the same where a refusal writes nothing and their state
 * only frees capacity as time passes: a fixed window (until it ends), a
 * token bucket (it refills), a leaky bucket (it drains), a sliding counter
 * (the previous window weighs less, then the windows roll over), a
 * sliding window (its slots age out of the window). Each
 * admits at a later instant what it admits at an earlier one, so a call
 * the model refuses at some instant it refuses at every earlier one.
 * "Nobody writes the key" is Redis's to say: each node with cached keys
 * has one private RESP3 connection of the cache (the tracker) with CLIENT
 * TRACKING on, which reads every cached key once (GET, HMGET of a hash
 * state or HGETALL of a sliding window, then PEXPIRETIME) and then receives an
 * invalidation push whenever any client writes, deletes, expires or flushes it.
 * A TAT entry answers only after its GET showed the very TAT the script decided
 * on; a hash entry holds what its HMGET showed. Either way no write can fall
 * between the state the entry holds and the tracking. An entry never
 * answers past its key's expiry: Redis rounds it to milliseconds, so a
 * key can go shortly before its state would stop refusing, and the push
 * of an expiry comes late. Losing a tracker forgets its node's entries.
 *
 *   refused reply --> refusal_learn[_hash|_slots] (pending)
 *       --read on the tracker (state, TIME, PEXPIRETIME)--> active
 *                                         other bytes, an error: forgotten
 *   a call --> refusal_lookup[_hash|_slots]: active entry --> the model at
 *       both ends of the span of the node's time (refusal_span.h) -->
 *       refused with the same reply at both: the reply, no Redis
 *   invalidation push, tracker lost, LRU past refusal_cache_size --> gone
 *
 * The clock: the node answered at some instant between sending and
 * receiving, so its clock now lies in a span as wide as that round trip
 * (refusal_span.h). A GCRA refusal at a later time is one at every earlier
 * time, and so is a refusal of the hash states (above; a clock before a
 * window's start still counts in it); the reply's other fields move with
 * time, so the cache answers only when the reply is the same at both ends
 * of the span, which makes it Redis's at every instant between. Every
 * call and read that gives bounds narrows the span (the intersection
 * holds): the learning call, a later one that saw the same state, and a
 * TIME the tracker reads with the state, which nothing queues ahead of, so
 * the span stays about one quick round trip wide even when the calls wait
 * in batches. Memory: at
 * most refusal_cache_size entries and refusal_cache_max_bytes bytes, keys
 * included (the least recently used go first; an entry that alone does
 * not fit is not cached: Redis decides its calls). */
#ifndef PX_PROXY_LIMITER_REFUSAL_H
#define PX_PROXY_LIMITER_REFUSAL_H

#include <stddef.h>
#include <stdint.h>

#include "proxy/core/hmap.h"
#include "proxy/core/queue.h"
#include "proxy/limiter/refusal_span.h"
#include "proxy/limiter/store_trim.h"

struct cluster;

/* The cache: a struct store_redis member. */
struct refusal {
    struct cluster *cl;     /* borrowed: where the keys live */
    size_t max;             /* entries at most; 0: the cache is off */
    size_t max_bytes;       /* bytes at most (every entry's charge) */
    size_t bytes;           /* charged now */
    uint64_t freed_bytes;   /* charges given back, ever */
    uint64_t skipped;       /* refusals not cached: past max_bytes alone */
    struct store_trim trim; /* when freed memory went back last */
    struct hmap entries;    /* key -> struct refusal_entry (owned) */
    struct queue lru;       /* entries, most recently used first */
    struct hmap trackers;   /* node name -> struct refusal_tracker */
    struct hmap hashes;     /* identity string -> its LIMITER entries
                               (an invalidation names it: refusal.c) */
    uint64_t hits;          /* calls answered from the cache */
    uint64_t invalidations; /* entries Redis told us to forget */
};

/* Sets up `rf` holding at most `max` keys (0: off) and `max_bytes` bytes
 * of `cl`'s nodes. */
void refusal_init(struct refusal *rf, struct cluster *cl, size_t max,
                  size_t max_bytes);

/* Forgets everything and closes the trackers. */
void refusal_free(struct refusal *rf);

/* The state cached for `key`, when its entry is active: have_tat (0: the
 * key did not exist), its TAT (ns), and the span of the node's time at
 * local time `now_local_ns`. 1 when found, else 0. */
int refusal_lookup(struct refusal *rf, const char *key, size_t klen,
                   uint64_t now_local_ns, int *have_tat, int64_t *tat_ns,
                   struct refusal_span *span);

/* A call sent at local time `sent_ns` (its reply read now) found `key` holding
 * `raw` (NULL: no key) and was refused at the node's time `node_now_ns`:
 * remember it (active once the tracker's GET confirms `raw`). */
void refusal_learn(struct refusal *rf, const char *key, size_t klen,
                   const char *raw, size_t rawlen, int have_tat, int64_t tat_ns,
                   int64_t node_now_ns, uint64_t sent_ns);

/* refusal_learn of a LIMITER gcra level's key: its state is a record of
 * the identity's string (refusal_field.h), read there and forgotten at
 * any invalidation of the string. */
void refusal_learn_limiter(struct refusal *rf, const char *key, size_t klen,
                           const char *raw, size_t rawlen, int have_tat,
                           int64_t tat_ns, int64_t node_now_ns,
                           uint64_t sent_ns);

/* Most fields a hash state has. */
#define REFUSAL_FIELDS_MAX 3

/* The hash state cached for `key` as `fields` (the same static,
 * NULL-terminated array of names it was learnt with), when its entry is
 * active: have (0: the key did not exist), the fields' values in v (as
 * stored: integers >= 0), and the span of the node's time now. 1 when
 * found, else 0. */
int refusal_lookup_hash(struct refusal *rf, const char *key, size_t klen,
                        const char *const *fields, uint64_t now_local_ns,
                        int *have, int64_t v[REFUSAL_FIELDS_MAX],
                        struct refusal_span *span);

/* A call sent at local time `sent_ns` (its reply read now) was refused at the
 * node's time `node_now_ns` with the hash state `key` unchanged: remember its
 * `fields` (1 to REFUSAL_FIELDS_MAX names, NULL-terminated, static),
 * active once the tracker's HMGET reads them (GET of the identity's
 * string, for a key of that form, and its record: refusal_field.h). */
void refusal_learn_hash(struct refusal *rf, const char *key, size_t klen,
                        const char *const *fields, int64_t node_now_ns,
                        uint64_t sent_ns);

/* Most slots a cached sliding window holds: one with more goes to Redis,
 * so an entry stays under about a kilobyte. */
#define REFUSAL_SLOTS_MAX 64

/* The sliding window cached for `key`, when its entry is active: have (0:
 * the key did not exist), its n slots in *slots (borrowed until the cache
 * changes: 2 values a slot, its start in microseconds and its count, as
 * stored; "total" left out) and the span of the node's time now. 1 when
 * found, else 0. */
int refusal_lookup_slots(struct refusal *rf, const char *key, size_t klen,
                         uint64_t now_local_ns, int *have,
                         const int64_t **slots, size_t *n,
                         struct refusal_span *span);

/* A call sent at local time `sent_ns` (its reply read now) was refused at the
 * node's time `node_now_ns` with the sliding window `key` unchanged: remember
 * its slots (active once the tracker's HGETALL reads them). */
void refusal_learn_slots(struct refusal *rf, const char *key, size_t klen,
                         int64_t node_now_ns, uint64_t sent_ns);

/* Forgets `key` (this proxy wrote it, or a client's command on its way
 * may). */
void refusal_forget(struct refusal *rf, const char *key, size_t klen);

/* Forgets the keys of node `name` ("host:port") and closes its tracker:
 * it is no longer where they live (Sentinel named a new master), so what
 * it says of them tells nothing. */
void refusal_node_gone(struct refusal *rf, const char *name);

/* Forgets every key (a client's FLUSHALL on its way). */
void refusal_forget_all(struct refusal *rf);

/* Periodic work: gives freed memory back after many entries went
 * (store_trim). */
void refusal_cron(struct refusal *rf);

/* Keys cached now. */
size_t refusal_count(const struct refusal *rf);

#endif /* PX_PROXY_LIMITER_REFUSAL_H */
