/* The Redis store's use of the refusal cache (see refusal_store.h).
 *
 * A refusal of GCRA, a bucket, a fixed window, a sliding counter or a
 * sliding window writes nothing, and with no write the state only frees
 * capacity as time passes; so a refusal decided from the state a node
 * read, at an upper bound of the node's clock, is one the node would
 * make too, and a reply that is the same at both ends of the span of the
 * node's clock is the very reply the node would give (refusal_span.h;
 * otherwise the node decides). The cache holds that state (refusal.c keeps
 * it true: Redis's
 * invalidations, this proxy's own writes); this file decides a call from
 * it with the algorithms of algorithms/, and tells it what each decided
 * call read or wrote. */
#include "proxy/limiter/refusal_store.h"

#include <string.h>

#include "proxy/core/util.h"
#include "proxy/limiter/limiter_reply.h"
#include "proxy/limiter/refusal_span.h"
#include "proxy/limiter/store_fields.h"

void refusal_store_free(struct refusal_store *rfs)
{
    px_free(rfs->sw_next);
    rfs->sw_next = NULL;
    rfs->sw_cap = 0;
}

/* A refused GCRA decision read `raw` (NULL: no key) at `key`, at the
 * node's time `node_now` of a call sent at `sent_ns`: the refusal cache
 * remembers it (nothing, when raw is no TAT). */
static void refusal_store_learn_tat(struct refusal_store *rfs, const char *key,
                                    size_t klen, const char *raw, size_t rawlen,
                                    int64_t node_now, uint64_t sent_ns,
                                    int limiter)
{
    int64_t tat = -1;

    if (raw != NULL && gcra_parse_int64(raw, rawlen, &tat) != GCRA_OK) {
        return;
    }
    /* A LIMITER level's TAT is a record of the identity's state string
     * (limiter), unless its level keeps keys of its own; a CL.THROTTLE key
     * is the client's own. */
    (limiter ? refusal_learn_limiter
             : refusal_learn)(&rfs->cache, key, klen, raw, rawlen,
                              raw != NULL && tat != -1, tat, node_now, sent_ns);
}

void refusal_store_throttled(struct refusal_store *rfs, unsigned db,
                             const char *key, size_t klen,
                             const struct gcra_script_reply *sr,
                             uint64_t sent_ns)
{
    /* A refusal is remembered with the state it read; an admission wrote
     * the key, which this proxy then forgets (the tracker is told too, but
     * later). */
    if (db != 0) {
        return; /* the cache holds db 0's keys */
    }
    if (!sr->limited) {
        refusal_forget(&rfs->cache, key, klen);
        return;
    }
    refusal_store_learn_tat(rfs, key, klen, sr->tat, sr->tat_len,
                            sr->now_s * 1000000000 + sr->now_us * 1000, sent_ns,
                            0);
}

int refusal_store_throttle(struct refusal_store *rfs,
                           const struct gcra_params *p, const char *key,
                           size_t klen, uint64_t now_local,
                           struct gcra_result *res)
{
    struct refusal_span span;
    int64_t tat;
    int have;

    return refusal_lookup(&rfs->cache, key, klen, now_local, &have, &tat,
                          &span) &&
           refusal_span_gcra(p, have, tat, &span, res);
}

/* The algorithms whose refusals the cache answers: a refusal leaves
 * their state as it was (a GCRA TAT, a hash of a few integers), and with
 * no write the state only frees capacity as time passes (a TAT falls
 * behind the clock, a bucket refills or drains, a fixed window ends, a
 * sliding counter's previous window weighs less), so a refusal holds for
 * every earlier time; so do a sliding window's slots, which age out of
 * the window. A sliding log is written by a refusal. A concurrency level
 * is not either: a RELEASE (here or on another proxy) frees a slot at any
 * time, so a check of a path with one always reaches its store. */
static int refusal_store_algo_cacheable(enum limits_algo a)
{
    return a == LIMITS_GCRA || a == LIMITS_SLIDING_WINDOW ||
           store_fields_algo(a);
}

int refusal_store_group_cacheable(const struct store_check *c, unsigned g,
                                  lua_wire_known_fn *known, void *arg)
{
    unsigned i;
    size_t l;

    if (c->op == STORE_RESET || c->op == STORE_ADJUST || c->wait_ns != 0) {
        return 0;
    }
    /* A shadow level's refusal is not the check's: a cached refusal of
     * its group could answer "limited" for a check it never refuses. */
    for (i = 0; i < c->n; i++) {
        if (c->lim[i].group == g &&
            (!refusal_store_algo_cacheable(c->lim[i].algo) ||
             c->lim[i].shadow)) {
            return 0;
        }
    }
    for (l = 0; l < c->lv->n; l++) {
        const struct limits_level *lev = &c->lv->level[l];
        if (lev->group == g && known(arg, lev->path, lev->path_len) != NULL) {
            return 0;
        }
    }
    return 1;
}

/* Limit x (gcra) decided from the cache for the local time `now_local`:
 * its decision with the cost in *res, without it in *peek; 0, or -1 when
 * the key is not cached or either differs at the two ends of the span of
 * the node's clock (refusal_span.h). */
static int refusal_store_cached_gcra(struct refusal_store *rfs,
                                     const struct store_limit *x,
                                     uint64_t now_local,
                                     enum refusal_span_show show,
                                     struct rl_decision *res,
                                     struct rl_decision *peek)
{
    struct gcra_result r[2], pk[2];
    struct refusal_span span;
    struct gcra_params pp;
    const char *err;
    int64_t tat;
    int have;

    if (!refusal_lookup(&rfs->cache, x->key, x->klen, now_local, &have, &tat,
                        &span)) {
        return -1;
    }
    gcra_params_peek(&x->p, &pp);
    if (gcra_decide(&x->p, have, tat, span.lo_ns, &r[0], &err) != GCRA_OK ||
        gcra_decide(&x->p, have, tat, span.hi_ns, &r[1], &err) != GCRA_OK ||
        gcra_decide(&pp, have, tat, span.lo_ns, &pk[0], &err) != GCRA_OK ||
        gcra_decide(&pp, have, tat, span.hi_ns, &pk[1], &err) != GCRA_OK ||
        !refusal_span_same(&r[0].d, &r[1].d, show) ||
        !refusal_span_same(&pk[0].d, &pk[1].d, show)) {
        return -1;
    }
    *res = r[1].d;
    *peek = pk[1].d;
    return 0;
}

/* Limit x (a sliding window) decided from the cache for the local time
 * `now_local`, with `cost`: its decision in *out; 0, or -1 when the key is
 * not cached or the decision differs at the two ends of the span of the
 * node's clock. */
static int refusal_store_cached_slots(struct refusal_store *rfs,
                                      const struct store_limit *x,
                                      uint64_t now_local, int64_t cost,
                                      enum refusal_span_show show,
                                      struct rl_decision *out)
{
    struct sliding_window_slot slots[REFUSAL_SLOTS_MAX];
    struct sliding_window_params p;
    struct sliding_window_result r[2];
    struct refusal_span span;
    const int64_t *v;
    const char *err;
    size_t n, i;
    int have, end;

    if (!refusal_lookup_slots(&rfs->cache, x->key, x->klen, now_local, &have,
                              &v, &n, &span) ||
        sliding_window_params_init(
            &p, x->lim.u.sliding_window.max, x->lim.u.sliding_window.window_ms,
            x->lim.u.sliding_window.resolution_ms, &err) != SLIDING_WINDOW_OK) {
        return -1;
    }
    for (i = 0; i < n; i++) {
        if (v[2 * i] > INT64_MAX / 1000) {
            return -1;
        }
        slots[i].start_ns = v[2 * i] * 1000;
        slots[i].count = v[2 * i + 1];
    }
    if (rfs->sw_cap < (size_t)p.nslots) {
        rfs->sw_cap = (size_t)p.nslots;
        rfs->sw_next =
            px_realloc(rfs->sw_next, rfs->sw_cap * sizeof(*rfs->sw_next));
    }
    for (end = 0; end < 2; end++) {
        if (sliding_window_decide(&p, have ? slots : NULL, have ? n : 0,
                                  end ? span.hi_ns : span.lo_ns, cost,
                                  rfs->sw_next, rfs->sw_cap, &r[end],
                                  &err) != SLIDING_WINDOW_OK) {
            return -1;
        }
    }
    if (!refusal_span_same(&r[0].d, &r[1].d, show)) {
        return -1;
    }
    *out = r[1].d;
    return 0;
}

/* Limit x (an algorithm of store_fields_algo) decided from the cache for
 * the local time `now_local`, with `cost`: its decision in *out; 0, or -1
 * when the key is not cached or the decision differs at the two ends of
 * the span of the node's clock. */
static int refusal_store_cached_fields(struct refusal_store *rfs,
                                       const struct store_limit *x,
                                       uint64_t now_local, int64_t cost,
                                       enum refusal_span_show show,
                                       struct rl_decision *out)
{
    struct store_fields_result r[2];
    struct refusal_span span;
    int64_t v[REFUSAL_FIELDS_MAX];
    union store_fields st;
    const char *err;
    int have;

    if (!refusal_lookup_hash(&rfs->cache, x->key, x->klen,
                             store_fields_names(x->algo), now_local, &have, v,
                             &span) ||
        (have && store_fields_from_hash(x->algo, v, &st) != 0) ||
        store_fields_decide(&x->lim, have ? &st : NULL, span.lo_ns, cost, &r[0],
                            &err) != 0 ||
        store_fields_decide(&x->lim, have ? &st : NULL, span.hi_ns, cost, &r[1],
                            &err) != 0 ||
        !refusal_span_same(&r[0].d, &r[1].d, show)) {
        return -1;
    }
    *out = r[1].d;
    return 0;
}

/* Limit x (any cached algorithm but gcra, whose decision gives two
 * results) decided from the cache: as refusal_store_cached_fields. */
static int refusal_store_cached_hash(struct refusal_store *rfs,
                                     const struct store_limit *x,
                                     uint64_t now_local, int64_t cost,
                                     enum refusal_span_show show,
                                     struct rl_decision *out)
{
    return x->algo == LIMITS_SLIDING_WINDOW
               ? refusal_store_cached_slots(rfs, x, now_local, cost, show, out)
               : refusal_store_cached_fields(rfs, x, now_local, cost, show,
                                             out);
}

/* How the reply to `c` shows its durations: the span's two ends must
 * give the same reply as shown (refusal_span.h): whole seconds, as
 * CL.THROTTLE does, or milliseconds (LIMITER ... MS). */
static enum refusal_span_show refusal_store_show(const struct store_check *c)
{
    return (c->reply_form & LIMITER_REPLY_MS) != 0 ? REFUSAL_SPAN_MS
                                                   : REFUSAL_SPAN_SECONDS;
}

int refusal_store_refused(struct refusal_store *rfs, struct store_check *c,
                          const char *prefix, uint64_t now_local,
                          lua_wire_known_fn *known, void *arg)
{
    char ovkey[STORE_KEY_MAX];
    unsigned char glim[LIMITS_MAX_DEPTH];
    enum refusal_span_show show = refusal_store_show(c);
    struct refusal_span span;
    int have, limited = 0, ovlen;
    int64_t tat;
    unsigned g, i;

    if (refusal_count(&rfs->cache) == 0 || c->n == 0 ||
        c->ngroups > LIMITS_MAX_DEPTH) {
        return 0;
    }
    for (g = 0; g < c->ngroups; g++) {
        if (!refusal_store_group_cacheable(c, g, known, arg)) {
            return 0;
        }
        ovlen = lua_wire_override_key(prefix, lua_wire_group_level(c, g), ovkey,
                                      sizeof(ovkey));
        PX_ASSERT(ovlen > 0 && (size_t)ovlen < sizeof(ovkey));
        if (!refusal_lookup(&rfs->cache, ovkey, (size_t)ovlen, now_local, &have,
                            &tat, &span) ||
            have) {
            return 0;
        }
        glim[g] = 0;
    }
    for (i = 0; i < c->n; i++) {
        const struct store_limit *x = &c->lim[i];
        int rc = x->algo == LIMITS_GCRA
                     ? refusal_store_cached_gcra(rfs, x, now_local, show,
                                                 &c->res[i], &c->peek[i])
                     : refusal_store_cached_hash(rfs, x, now_local, c->cost,
                                                 show, &c->res[i]);
        if (rc != 0) {
            return 0;
        }
        glim[x->group] |= c->res[i].limited;
        limited |= c->res[i].limited;
    }
    if (!limited) {
        return 0;
    }
    /* Another algorithm's entry in a node's reply: in a group that refused,
     * the state without this request where this level admitted; in one
     * that admitted, the decision, and the state with its cost back. */
    for (i = 0; i < c->n; i++) {
        struct store_limit *x = &c->lim[i];
        struct rl_decision *r = &c->res[i];
        if (x->algo == LIMITS_GCRA) {
            continue;
        }
        if (glim[x->group] && !r->limited &&
            refusal_store_cached_hash(rfs, x, now_local, 0, show, r) != 0) {
            return 0;
        }
        c->peek[i] = *r;
        if (!glim[x->group] && c->cost > 0) {
            c->peek[i].remaining = r->remaining > r->limit - c->cost
                                       ? r->limit
                                       : r->remaining + c->cost;
        }
    }
    return 1;
}

void refusal_store_forget_group(struct refusal_store *rfs,
                                const struct store_check *c, unsigned g)
{
    unsigned i;

    for (i = 0; i < c->n; i++) {
        if (c->lim[i].group == g) {
            refusal_forget(&rfs->cache, c->lim[i].key, c->lim[i].klen);
        }
    }
}

void refusal_store_group_learn(struct refusal_store *rfs,
                               const struct lua_wire_group *q, int cacheable,
                               const struct resp_value *v, uint64_t sent_ns)
{
    /* A refusal of a cacheable group wrote nothing, so every key it read
     * (a TAT as the script read it, a hash state as the tracker will) and
     * its absent override hash are remembered; a check it admitted wrote
     * its keys, which this proxy forgets. */
    const struct store_check *c = q->c;
    int64_t node_now;
    unsigned i, k = 0;
    const char *ovkey;
    size_t ovlen;

    if (v->type != '*' || v->n < 3 || v->elem[0].type != ':' ||
        v->elem[1].type != ':' || v->elem[2].type != ':') {
        return;
    }
    if (c->op == STORE_ADJUST) {
        /* Its reply shows the state after it, which a giving back made
         * more admissible. */
        if (c->delta < 0) {
            refusal_store_forget_group(rfs, c, q->g);
        }
        return;
    }
    if (v->elem[0].integer == 0) {
        if (c->op == STORE_CHECK) {
            refusal_store_forget_group(rfs, c, q->g);
        }
        return;
    }
    if (!cacheable) {
        return;
    }
    node_now = v->elem[1].integer * 1000000000 + v->elem[2].integer * 1000;
    for (i = 0; i < c->n; i++) {
        const struct resp_value *e;
        if (c->lim[i].group != q->g) {
            continue;
        }
        if (3 + k >= v->n) {
            return;
        }
        e = &v->elem[3 + k++];
        if (e->type != '*') {
            return;
        }
        if (c->lim[i].algo == LIMITS_SLIDING_WINDOW) {
            /* Its entry is a decision, not the state: the tracker reads
             * the slots. */
            refusal_learn_slots(&rfs->cache, c->lim[i].key, c->lim[i].klen,
                                node_now, sent_ns);
            continue;
        }
        if (c->lim[i].algo != LIMITS_GCRA) {
            /* Its entry is a decision, not the state: the tracker reads
             * the hash. */
            refusal_learn_hash(&rfs->cache, c->lim[i].key, c->lim[i].klen,
                               store_fields_names(c->lim[i].algo), node_now,
                               sent_ns);
            continue;
        }
        if (e->n != 1) {
            return;
        }
        refusal_store_learn_tat(rfs, c->lim[i].key, c->lim[i].klen,
                                e->elem[0].null ? NULL : e->elem[0].str,
                                e->elem[0].null ? 0 : e->elem[0].len, node_now,
                                sent_ns, !c->lim[i].own_key);
    }
    /* No override for the identity: its hash did not exist, which the
     * tracker confirms and watches like any key. */
    ovkey = lua_wire_group_route(q, &ovlen);
    refusal_learn(&rfs->cache, ovkey, ovlen, NULL, 0, 0, 0, node_now, sent_ns);
}
