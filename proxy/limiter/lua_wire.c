/* The wire of the limiter's batched script calls (see lua_wire.h).
 *
 *   gcra.lua "runs" (a run: `count` consecutive calls of one limit):
 *     <head> n k1..kn runs R <count inc_s inc_ns dvt_s dvt_ns>...
 *     --> [0, now_s, now_us, per call: its TAT... then its flag...]
 *
 *   limiter.lua "shapes", per group its keys, the override hash last:
 *     <head> nk <keys...> shapes '' S <mode cost n (algo p1 p2 p3 p4 tag)...
 *       m|keys>... G ([shape] (path known)...)...
 *     --> [0, now_s, now_us, per group: limited entry... | ["override",
 *          value...] | a reset's count | -error]
 *     tag: a refund's undo token; a check's shadow level ("" for a real
 *     level); "keys": no pairs, the levels' paths are read from their
 *     keys (a group that assumes no run-time override)
 *     concurrency's p3 and p4: the call's ID ("" for none) and "release"
 *     for LIMITER RELEASE (sent as a check of those limits alone), else ""
 *     cost: "<cost>", or for a check with WAIT whose group has a bucket
 *     "<cost>:<wait_us>" (the buckets reserve in the script; gcra has
 *     its wait folded into DVT, lua_wire_params)
 *
 *   keys of several slots on one node ("spread"): 0 keys declared, the
 *   keys after the arguments.
 *
 * A group's words are made when it is queued, in one buffer of its own
 * (a length, then the bytes, per word), and copied into the call only by
 * pointer: a batch of groups from one tree node shares one block of
 * words, so the call carries it once. The reply of a "shapes" call is
 * flat; lua_wire_next gives each decided group the shape mode "each"
 * gives it, so one decoder reads both. */
#include "proxy/limiter/lua_wire.h"

#include <stdio.h>
#include <string.h>

#include "conf/conf.h"
#include "proxy/core/util.h"

/* Bytes of words reserved for a group when it is queued: its keys,
 * arguments and override pairs, each with its length. */
#define LUA_WIRE_GROUP_WORDS_BYTES 512

/* ---------------- Encoding: a group's words ---------------- */

int lua_wire_override_key(const char *prefix, const struct limits_level *lev,
                          char *out, size_t outlen)
{
    /* Made for every check: pieces copied, no format string. */
    static const char tail[] = "}#overrides";
    size_t plen = strlen(prefix);
    size_t n = plen + 1 + lev->tag_len + sizeof(tail) - 1;

    if (n >= outlen) {
        return -1;
    }
    memcpy(out, prefix, plen);
    out[plen] = '{';
    memcpy(out + plen + 1, lev->tag, lev->tag_len);
    memcpy(out + plen + 1 + lev->tag_len, tail, sizeof(tail));
    return (int)n;
}

const struct limits_level *lua_wire_group_level(const struct store_check *c,
                                                unsigned g)
{
    size_t l;

    for (l = 0; l < c->lv->n; l++) {
        if (c->lv->level[l].group == g) {
            return &c->lv->level[l];
        }
    }
    PX_ASSERT(0);
    return NULL;
}

int lua_wire_group_sends(const struct store_check *c, unsigned i, unsigned g,
                         int refund)
{
    return c->lim[i].group == g && !(refund && c->lim[i].shadow_limited);
}

/* The four parameters of limit x as limiter.lua takes them: gcra's split
 * INC and DVT, else the documented parameters in stored units ("" when
 * unused; an infinite rate as "inf"). Returns the words, kept in `m`
 * until the next call. */
static const struct lua_wire_params *
lua_wire_params(struct lua_wire_params *m, const struct store_check *c,
                const struct store_limit *x)
{
    struct gcra_params wp;
    int64_t v[LIMITS_MAX_PARAMS];
    size_t nv, k;

    if (x->algo == LIMITS_GCRA) {
        /* A shadow level reserves nothing for WAIT: it never delays. */
        store_write_params(&x->p, x->shadow ? 0 : c->wait_ns, &wp);
        v[0] = wp.inc_ns;
        v[1] = wp.dvt_ns;
        nv = 2;
    } else {
        nv = limits_params(&x->lim, v);
    }
    if (m->nv == nv && m->algo == x->algo &&
        memcmp(m->v, v, nv * sizeof(v[0])) == 0) {
        return m;
    }
    memset(m, 0, sizeof(*m));
    if (x->algo == LIMITS_GCRA) {
        struct gcra_script_args sa;
        gcra_script_args(&wp, &sa);
        for (k = 0; k < 4; k++) {
            memcpy(m->out[k], sa.v[k], sa.len[k]);
            m->len[k] = sa.len[k];
        }
    } else {
        for (k = 0; k < nv && k < 4; k++) {
            if (v[k] == LIMITS_RATE_INF) {
                memcpy(m->out[k], "inf", 4);
                m->len[k] = 3;
            } else {
                m->len[k] = (size_t)resp_fmt_ll(m->out[k], (long long)v[k]);
            }
        }
    }
    m->algo = x->algo;
    memcpy(m->v, v, nv * sizeof(v[0]));
    m->nv = nv;
    return m;
}

/* One word of a group: its length, then its bytes, written at once into
 * the room the group reserved (a group has a dozen words or more). */
static void lua_wire_word(struct lua_wire_group *q, const char *p, size_t len)
{
    char *at;

    PX_CHECK_OOM(buf_reserve(&q->words, sizeof(len) + len));
    at = buf_tail(&q->words);
    memcpy(at, &len, sizeof(len));
    if (len > 0) {
        memcpy(at + sizeof(len), p, len);
    }
    buf_commit(&q->words, sizeof(len) + len);
    q->nw++;
}

/* The word of `q` at byte *at (moves *at to the next one). */
static const char *lua_wire_word_at(const struct lua_wire_group *q, size_t *at,
                                    size_t *len)
{
    const char *p = q->words.data + *at + sizeof(*len);

    memcpy(len, q->words.data + *at, sizeof(*len));
    *at += sizeof(*len) + *len;
    return p;
}

/* Whether group g of `c` may name its override fields by its keys
 * (limiter.lua's "keys" in place of its pairs): this proxy assumes no
 * run-time override at any of its levels, and every level sends a key,
 * from which the script reads the level's path back. Such a group spares
 * Redis two words a level (the path and the assumed ""), which it parses
 * whether or not an override hash exists; the script makes the paths only
 * when one does. */
static int lua_wire_by_keys(const struct store_check *c, unsigned g,
                            lua_wire_known_fn *known, void *arg)
{
    size_t l;
    unsigned i;

    for (l = 0; l < c->lv->n; l++) {
        const struct limits_level *lev = &c->lv->level[l];
        int sent = 0;
        if (lev->group != g) {
            continue;
        }
        if (known(arg, lev->path, lev->path_len) != NULL) {
            return 0;
        }
        for (i = 0; i < c->n && !sent; i++) {
            sent = c->lim[i].level == l;
        }
        if (!sent) {
            return 0;
        }
    }
    return 1;
}

/* concurrency's third and fourth parameters, from the call: the token
 * (ID, RELEASE's) and whether it is a RELEASE. */
static void lua_wire_conc_word(struct lua_wire_group *q,
                               const struct store_check *c, int k)
{
    if (k == 2) {
        lua_wire_word(q, c->id != NULL ? c->id : "", c->id_len);
    } else if (c->op == STORE_RELEASE) {
        lua_wire_word(q, "release", 7);
    } else {
        lua_wire_word(q, "", 0);
    }
}

/* A group's cost word: "<cost>", or "<cost>:<wait_us>" for a check with
 * WAIT whose group holds a real token_bucket or leaky_bucket limit (the
 * script reserves for those; a group of gcra alone keeps the plain word,
 * so it stays on the script's fast path). */
static void lua_wire_cost(struct lua_wire_group *q, const struct store_check *c,
                          unsigned g, enum lua_wire_mode mode, int64_t cost)
{
    char num[2 * RESP_FMT_LL_MAX + 2];
    size_t len = resp_fmt_ll(num, (long long)cost);
    unsigned i;

    for (i = 0; i < c->n && mode == LUA_WIRE_CHECK && c->wait_ns > 0; i++) {
        const struct store_limit *x = &c->lim[i];
        if (x->group == g && !x->shadow &&
            (x->algo == LIMITS_TOKEN_BUCKET ||
             x->algo == LIMITS_LEAKY_BUCKET)) {
            num[len++] = ':';
            len += resp_fmt_ll(num + len,
                               (long long)(c->wait_ns / (RL_NS_PER_MS / 1000)));
            break;
        }
    }
    lua_wire_word(q, num, len);
}

void lua_wire_group_encode(struct lua_wire_group *q, struct store_check *c,
                           unsigned g, enum lua_wire_mode mode,
                           const char *ovkey, size_t ovlen,
                           lua_wire_known_fn *known, void *arg,
                           struct lua_wire_params *memo)
{
    static const char *const modes[] = { "check",  "peek",   "refund",
                                         "adjust", "adjust", "reset" };
    int refund = mode == LUA_WIRE_REFUND;
    /* Nobody reads the answer of a refund or an unadjust, nor do they
     * verify overrides (they undo what was written); a RESET deletes the
     * states of the keys it names, whatever the overrides (it has always
     * deleted them so), so it sends no pairs either. */
    int unread = refund || mode == LUA_WIRE_UNADJUST;
    int verify = !unread && mode != LUA_WIRE_RESET;
    int64_t cost = mode == LUA_WIRE_ADJUST     ? c->delta
                   : mode == LUA_WIRE_UNADJUST ? -c->delta
                                               : c->cost;
    const struct lua_wire_params *args;
    char num[RESP_FMT_LL_MAX + 1];
    unsigned i, npath = 0;
    int k, by_keys;
    size_t l;

    memset(q, 0, sizeof(*q));
    q->c = unread ? NULL : c;
    q->g = g;
    q->reset = mode == LUA_WIRE_RESET;
    q->new_only = c->st != NULL && c->st->conf != NULL &&
                  !c->st->conf->state.read_old_keys;
    buf_init(&q->words);
    /* Room for a usual group's words at once, not grown word by word. */
    PX_CHECK_OOM(buf_reserve(&q->words, LUA_WIRE_GROUP_WORDS_BYTES));
    for (i = 0; i < c->n; i++) {
        if (lua_wire_group_sends(c, i, g, refund)) {
            lua_wire_word(q, c->lim[i].key, c->lim[i].klen);
            if (mode == LUA_WIRE_UNADJUST) {
                q->flat += c->lim[i].algo == LIMITS_GCRA ? 1 : 6;
            }
        }
    }
    q->flat += q->flat > 0; /* its `limited` */
    q->route_at = q->words.len;
    lua_wire_word(q, ovkey, ovlen);
    q->nk = q->nw;
    lua_wire_word(q, modes[mode], strlen(modes[mode]));
    lua_wire_cost(q, c, g, mode, cost);
    lua_wire_word(q, num, resp_fmt_ll(num, (long long)q->nk - 1));
    for (i = 0; i < c->n; i++) {
        /* A gcra level that keeps a key of its own says so: the
         * scripts would take its key for a record of the state string. */
        const char *algo = c->lim[i].own_key ? LUA_WIRE_GCRA_OWN_KEY
                                             : limits_algo_name(c->lim[i].algo);
        /* The last value: a refund's undo token; a check's shadow level
         * ("" for a real limit, else a name its level's limits share). */
        const char *undo = refund ? c->lim[i].undo : "";
        char level[RESP_FMT_LL_MAX + 1];
        if (!lua_wire_group_sends(c, i, g, refund)) {
            continue;
        }
        if (!refund && c->lim[i].shadow) {
            resp_fmt_ll(level, (long long)c->lim[i].level + 1);
            undo = level;
        }
        args = lua_wire_params(memo, c, &c->lim[i]);
        lua_wire_word(q, algo, strlen(algo));
        for (k = 0; k < 4; k++) {
            if (c->lim[i].algo == LIMITS_CONCURRENCY && k >= 2) {
                lua_wire_conc_word(q, c, k);
                continue;
            }
            lua_wire_word(q, args->out[k], args->len[k]);
        }
        lua_wire_word(q, undo, strlen(undo));
    }
    by_keys = verify && lua_wire_by_keys(c, g, known, arg);
    /* Refunds undo what was written; only checks verify overrides. */
    for (l = 0; l < c->lv->n && verify && !by_keys; l++) {
        npath += c->lv->level[l].group == g;
    }
    if (by_keys) {
        lua_wire_word(q, "keys", 4);
    } else {
        lua_wire_word(q, num, resp_fmt_ll(num, (long long)npath));
    }
    for (l = 0; l < c->lv->n && verify && !by_keys; l++) {
        const struct limits_level *lev = &c->lv->level[l];
        const char *text;
        if (lev->group != g) {
            continue;
        }
        text = known(arg, lev->path, lev->path_len);
        lua_wire_word(q, lev->path, lev->path_len);
        lua_wire_word(q, text != NULL ? text : "",
                      text != NULL ? strlen(text) : 0);
    }
}

void lua_wire_group_free(struct lua_wire_group *q)
{
    buf_free(&q->words);
}

const char *lua_wire_group_route(const struct lua_wire_group *q, size_t *len)
{
    size_t at = q->route_at;

    return lua_wire_word_at(q, &at, len);
}

/* ---------------- Encoding: a script call ---------------- */

/* Starts `a` with room for `cap` words and `nnum` numbers (never moved:
 * the words point into them), and the head: how it is sent. */
static void lua_wire_argv_init(struct lua_wire_argv *a, unsigned cap,
                               unsigned nnum, const char *const head[2],
                               const size_t headlen[2])
{
    memset(a, 0, sizeof(*a));
    /* Filled in order, read up to n: not zeroed (a batch holds hundreds). */
    a->v = px_mallocarray(cap, sizeof(*a->v));
    a->len = px_mallocarray(cap, sizeof(*a->len));
    a->num = px_mallocarray(nnum, sizeof(*a->num));
    a->cap = cap;
    a->v[0] = head[0];
    a->len[0] = headlen[0];
    a->v[1] = head[1];
    a->len[1] = headlen[1];
    a->n = 2;
    a->nnum = 0;
}

static void lua_wire_add(struct lua_wire_argv *a, const char *p, size_t len)
{
    PX_ASSERT(a->n < a->cap);
    a->v[a->n] = p;
    a->len[a->n++] = len;
}

/* Adds `x` in decimal, formatted into a's own numbers. */
static void lua_wire_add_num(struct lua_wire_argv *a, unsigned long long x)
{
    char *at = a->num[a->nnum++];

    lua_wire_add(a, at, (size_t)snprintf(at, RESP_FMT_LL_MAX + 1, "%llu", x));
}

void lua_wire_argv_free(struct lua_wire_argv *a)
{
    px_free(a->v);
    px_free(a->len);
    px_free(a->num);
    px_free(a->sa);
    memset(a, 0, sizeof(*a));
}

/* Whether calls x and y send the same four script arguments: those are
 * INC and DVT, split (gcra_script_args). */
static int lua_wire_same_run(const struct lua_wire_throttle *x,
                             const struct lua_wire_throttle *y)
{
    return x->p->inc_ns == y->p->inc_ns && x->p->dvt_ns == y->p->dvt_ns;
}

void lua_wire_runs(struct lua_wire_argv *a, const char *const head[2],
                   const size_t headlen[2],
                   const struct lua_wire_throttle *calls, unsigned n,
                   int spread)
{
    unsigned i, j, r, runs = 0;
    int k;

    for (i = 0; i < n; i++) {
        runs += i == 0 || !lua_wire_same_run(&calls[i - 1], &calls[i]);
    }
    lua_wire_argv_init(a, 5 + n + 5 * runs, runs + 2, head, headlen);
    a->sa = px_calloc(runs, sizeof(*a->sa));
    lua_wire_add_num(a, spread ? 0 : n);
    for (i = 0; i < n && !spread; i++) {
        lua_wire_add(a, calls[i].key, calls[i].klen);
    }
    lua_wire_add(a, "runs", 4);
    lua_wire_add_num(a, runs);
    for (i = 0, r = 0; i < n; i = j, r++) {
        for (j = i + 1; j < n && lua_wire_same_run(&calls[i], &calls[j]); j++) {
        }
        gcra_script_args(calls[i].p, &a->sa[r]);
        lua_wire_add_num(a, j - i);
        for (k = 0; k < GCRA_SCRIPT_NARGS; k++) {
            lua_wire_add(a, a->sa[r].v[k], a->sa[r].len[k]);
        }
    }
    for (i = 0; i < n && spread; i++) {
        lua_wire_add(a, calls[i].key, calls[i].klen);
    }
}

/* Adds the keys of every group. */
static void lua_wire_add_keys(struct lua_wire_argv *a,
                              const struct lua_wire_group *const *groups,
                              unsigned n)
{
    unsigned i, j;

    for (i = 0; i < n; i++) {
        const struct lua_wire_group *q = groups[i];
        size_t at = 0, len;
        for (j = 0; j < q->nk; j++) {
            const char *p = lua_wire_word_at(q, &at, &len);
            lua_wire_add(a, p, len);
        }
    }
}

/* Where group q's arguments start in its words (after its keys). */
static size_t lua_wire_args_at(const struct lua_wire_group *q)
{
    size_t at = 0, len;
    unsigned j;

    for (j = 0; j < q->nk; j++) {
        lua_wire_word_at(q, &at, &len);
    }
    return at;
}

/* Where group q's override pairs start in its words: after its args_at,
 * the mode, cost, n, 6 words a level (n = its keys but the override hash)
 * and m. What comes before them is the group's shape. */
static size_t lua_wire_pairs_at(const struct lua_wire_group *q, size_t args_at)
{
    size_t at = args_at, len;
    unsigned j;

    for (j = 0; j < 4 + 6 * (q->nk - 1); j++) {
        lua_wire_word_at(q, &at, &len);
    }
    return at;
}

/* Adds the words of q from byte `from` to byte `to`. */
static void lua_wire_add_words(struct lua_wire_argv *a,
                               const struct lua_wire_group *q, size_t from,
                               size_t to)
{
    size_t len;

    while (from < to) {
        const char *word = lua_wire_word_at(q, &from, &len);
        lua_wire_add(a, word, len);
    }
}

void lua_wire_shapes(struct lua_wire_argv *a, const char *const head[2],
                     const size_t headlen[2],
                     const struct lua_wire_group *const *groups, unsigned n,
                     int spread)
{
    size_t at[LUA_WIRE_BATCH_MAX], pairs[LUA_WIRE_BATCH_MAX];
    unsigned shape[LUA_WIRE_BATCH_MAX]; /* group -> its first group */
    unsigned idx[LUA_WIRE_BATCH_MAX];   /* a first group's shape, 1.. */
    unsigned i, j, nk = 0, nw = 0, ns = 0;

    PX_ASSERT(n >= 1 && n <= LUA_WIRE_BATCH_MAX);
    for (i = 0; i < n; i++) {
        const struct lua_wire_group *q = groups[i];
        nk += q->nk;
        nw += q->nw;
        at[i] = lua_wire_args_at(q);
        pairs[i] = lua_wire_pairs_at(q, at[i]);
        shape[i] = i;
        for (j = 0; j < i; j++) {
            const struct lua_wire_group *r = groups[j];
            size_t len = pairs[i] - at[i];
            if (shape[j] == j && pairs[j] - at[j] == len &&
                memcmp(q->words.data + at[i], r->words.data + at[j], len) ==
                    0) {
                shape[i] = j;
                break;
            }
        }
        if (shape[i] == i) {
            /* Its number among the shapes, for the groups that share it. */
            idx[i] = ++ns;
        }
    }
    lua_wire_argv_init(a, 7 + nw + n, 3 + ns, head, headlen);
    lua_wire_add_num(a, spread ? 0 : nk);
    if (!spread) {
        lua_wire_add_keys(a, groups, n);
    }
    lua_wire_add(a, "shapes", 6);
    /* now: the node's TIME; "!" when absent states are not looked up at
     * their old keys (limiter_read_old_keys no). */
    lua_wire_add(a, "!", groups[0]->new_only);
    lua_wire_add_num(a, ns);
    for (i = 0; i < n; i++) {
        if (shape[i] == i) {
            lua_wire_add_words(a, groups[i], at[i], pairs[i]);
        }
    }
    lua_wire_add_num(a, n);
    /* The shapes' numbers, formatted once each, when there is a choice. */
    for (i = 0; i < n && ns > 1; i++) {
        if (shape[i] == i) {
            unsigned k = a->nnum++;
            snprintf(a->num[k], RESP_FMT_LL_MAX + 1, "%u", idx[i]);
            idx[i] = k; /* now where its number is */
        }
    }
    for (i = 0; i < n; i++) {
        const struct lua_wire_group *q = groups[i];
        if (ns > 1) {
            const char *x = a->num[idx[shape[i]]];
            lua_wire_add(a, x, strlen(x));
        }
        lua_wire_add_words(a, q, pairs[i], q->words.len);
    }
    if (spread) {
        lua_wire_add_keys(a, groups, n);
    }
}

/* ---------------- Decoding: a "runs" reply ---------------- */

int lua_wire_runs_shaped(const struct resp_value *v, unsigned n)
{
    size_t words = ((size_t)n + LUA_WIRE_RUNS_BITS - 1) / LUA_WIRE_RUNS_BITS;
    size_t i;

    if (v->type != '*' || v->n < 3 || v->elem[1].type != ':' ||
        v->elem[2].type != ':' || v->n != 3 + (size_t)n + words) {
        return 0;
    }
    for (i = 3; i < 3 + (size_t)n; i++) {
        const struct resp_value *e = &v->elem[i];
        if (e->type == ':' && (e->integer < -3 || e->integer > -1)) {
            return 0;
        }
    }
    for (i = 3 + (size_t)n; i < v->n; i++) {
        if (v->elem[i].type != ':' || v->elem[i].integer < 0 ||
            v->elem[i].integer >= (int64_t)1 << LUA_WIRE_RUNS_BITS) {
            return 0;
        }
    }
    return 1;
}

int lua_wire_runs_item(const struct resp_value *v, unsigned n, unsigned i,
                       struct gcra_script_reply *sr, const char **err)
{
    static const char wrongtype[] =
        "WRONGTYPE Operation against a key holding the wrong kind of value";
    const struct resp_value *raw = &v->elem[3 + i];
    const struct resp_value *bits = &v->elem[3 + n + i / LUA_WIRE_RUNS_BITS];

    if (raw->type == ':') {
        if (raw->integer == -1) {
            *err = wrongtype;
        } else if (raw->integer == -2) {
            *err = GCRA_ERR_TAT_RANGE;
        } else {
            *err = GCRA_ERR_SCRIPT; /* -3 with its key declared */
        }
        return -1;
    }
    sr->limited = (bits->integer >> (i % LUA_WIRE_RUNS_BITS)) & 1;
    sr->now_s = v->elem[1].integer;
    sr->now_us = v->elem[2].integer;
    sr->tat = raw->null ? NULL : raw->str;
    sr->tat_len = raw->null ? 0 : raw->len;
    return 0;
}

int lua_wire_runs_elsewhere(const struct resp_value *v, unsigned n, unsigned i)
{
    const struct resp_value *raw = &v->elem[3 + i];

    (void)n;
    return raw->type == ':' && raw->integer == -3;
}

/* ---------------- Decoding: a "shapes" reply ---------------- */

/* How many elements of a "shapes" reply group q's answer takes, `e`
 * being the first (lua_wire_shapes_shaped). */
static size_t lua_wire_flat_len(const struct lua_wire_group *q,
                                const struct resp_value *e)
{
    size_t n = 1;
    unsigned i;

    if (e->type != ':' || q->c == NULL || q->reset) {
        return e->type == ':' && q->flat > 0 ? q->flat : 1;
    }
    for (i = 0; i < q->c->n; i++) {
        if (q->c->lim[i].group == q->g) {
            n += q->c->lim[i].algo == LIMITS_GCRA ? 1 : 6;
        }
    }
    return n;
}

int lua_wire_shapes_shaped(const struct resp_value *v,
                           const struct lua_wire_group *const *groups,
                           unsigned n)
{
    size_t i, at = 3;

    if (v->type != '*' || v->n < 3 || v->elem[1].type != ':' ||
        v->elem[2].type != ':') {
        return 0;
    }
    for (i = 0; i < n && at < v->n; i++) {
        at += lua_wire_flat_len(groups[i], &v->elem[at]);
    }
    return i == n && at == v->n;
}

void lua_wire_cursor_init(struct lua_wire_cursor *cur,
                          const struct resp_value *v)
{
    memset(cur, 0, sizeof(*cur));
    cur->v = v;
    cur->at = 3;
    cur->g.elem = cur->small;
}

/* Drops the last decided group's elements. */
static void lua_wire_cursor_drop(struct lua_wire_cursor *cur)
{
    if (cur->g.elem != cur->small) {
        px_free(cur->g.elem);
    }
    cur->g.elem = cur->small;
}

const struct resp_value *lua_wire_next(struct lua_wire_cursor *cur,
                                       const struct lua_wire_group *q)
{
    const struct resp_value *v = cur->v;
    struct resp_value *g = &cur->g;
    size_t at = cur->at, p = at + 1, k = 3;
    unsigned i;

    lua_wire_cursor_drop(cur);
    if (q->c == NULL || q->reset || v->elem[at].type != ':') {
        cur->at += lua_wire_flat_len(q, &v->elem[at]);
        return &v->elem[at];
    }
    /* Decided (of any number of limits): {limited, now_s, now_us}, then
     * per limit its entry as a table of the reply's elements. */
    cur->at += lua_wire_flat_len(q, &v->elem[at]);
    memset(g, 0, sizeof(*g));
    g->type = '*';
    g->n = 3;
    for (i = 0; i < q->c->n; i++) {
        g->n += q->c->lim[i].group == q->g;
    }
    g->elem = g->n <= LUA_WIRE_FLAT_SMALL
                  ? memset(cur->small, 0, g->n * sizeof(*cur->small))
                  : px_calloc(g->n, sizeof(*g->elem));
    g->elem[0] = v->elem[at];
    g->elem[1] = v->elem[1];
    g->elem[2] = v->elem[2];
    for (i = 0; i < q->c->n; i++) {
        struct resp_value *e = &g->elem[k];
        if (q->c->lim[i].group != q->g) {
            continue;
        }
        k++;
        e->type = '*';
        e->n = q->c->lim[i].algo == LIMITS_GCRA ? 1 : 6;
        e->elem = &v->elem[p];
        p += e->n;
    }
    return g;
}

void lua_wire_cursor_end(struct lua_wire_cursor *cur)
{
    lua_wire_cursor_drop(cur);
}

/* Keeps the first error of a call, as a RESP error line. */
static void lua_wire_check_error(struct store_check *c, const char *text)
{
    if (c->err.len == 0) {
        PX_CHECK_OOM(buf_append(&c->err, "-", 1));
        PX_CHECK_OOM(buf_append_str(&c->err, text));
        PX_CHECK_OOM(buf_append(&c->err, "\r\n", 2));
    }
}

/* A reply element as an int64: an integer, or a decimal bulk string (the
 * script sends durations past 2^53 us as text). 0, or -1. */
static int lua_wire_elem_int(const struct resp_value *e, int64_t *out)
{
    if (e->type == ':') {
        *out = e->integer;
        return 0;
    }
    if (e->type == '$' && !e->null) {
        return gcra_parse_int64(e->str, e->len, out) == GCRA_OK ? 0 : -1;
    }
    return -1;
}

/* Microseconds of the script as nanoseconds, saturating. */
static int64_t lua_wire_us_to_ns(int64_t us)
{
    if (us > INT64_MAX / 1000) {
        return INT64_MAX;
    }
    return us < INT64_MIN / 1000 ? INT64_MIN : us * 1000;
}

/* One limit's entry of a check/peek reply into c->res[i] and c->peek[i].
 * 0, or -1 when malformed (c->err is set). */
static int lua_wire_entry(struct store_check *c, unsigned i,
                          const struct resp_value *e,
                          const struct gcra_script_reply *sr)
{
    struct store_limit *x = &c->lim[i];
    const char *err = NULL;
    int64_t f[5];
    unsigned j;

    if (e->type != '*' || e->null) {
        lua_wire_check_error(c, GCRA_ERR_SCRIPT);
        return -1;
    }
    if (x->algo == LIMITS_GCRA) {
        struct gcra_script_reply r = *sr;
        struct gcra_result res, pk;
        struct gcra_params pp;
        if (e->n != 1) {
            lua_wire_check_error(c, GCRA_ERR_SCRIPT);
            return -1;
        }
        r.tat = e->elem[0].null ? NULL : e->elem[0].str;
        r.tat_len = e->elem[0].null ? 0 : e->elem[0].len;
        gcra_params_peek(&x->p, &pp);
        if (gcra_decide_stored(&x->p, &r, &res, &err) != GCRA_OK ||
            gcra_decide_stored(&pp, &r, &pk, &err) != GCRA_OK) {
            lua_wire_check_error(c, err);
            return -1;
        }
        c->res[i] = res.d;
        c->peek[i] = pk.d;
        return 0;
    }
    if (e->n != 6 || e->elem[5].type != '$' || e->elem[5].null ||
        e->elem[5].len >= STORE_UNDO_MAX) {
        lua_wire_check_error(c, GCRA_ERR_SCRIPT);
        return -1;
    }
    for (j = 0; j < 5; j++) {
        if (lua_wire_elem_int(&e->elem[j], &f[j]) != 0) {
            lua_wire_check_error(c, GCRA_ERR_SCRIPT);
            return -1;
        }
    }
    c->res[i].limited = f[0] != 0;
    c->res[i].limit = f[1];
    c->res[i].remaining = f[2];
    c->res[i].retry_after_ns = lua_wire_us_to_ns(f[3]);
    c->res[i].reset_after_ns = lua_wire_us_to_ns(f[4]);
    memcpy(x->undo, e->elem[5].str, e->elem[5].len);
    x->undo[e->elem[5].len] = '\0';
    c->peek[i] = c->res[i]; /* with its cost back if taken: the caller */
    return 0;
}

enum lua_wire_answer lua_wire_group_decode(struct store_check *c, unsigned g,
                                           const struct resp_value *v)
{
    struct gcra_script_reply sr;
    unsigned i, k = 0;

    if (v->type == '-') {
        return LUA_WIRE_ERROR;
    }
    if (c->op == STORE_RESET) {
        /* Mode "reset": how many records and keys it deleted. */
        if (v->type != ':' || v->integer < 0) {
            lua_wire_check_error(c, GCRA_ERR_SCRIPT);
            return LUA_WIRE_MALFORMED;
        }
        c->deleted += v->integer;
        return LUA_WIRE_DECIDED;
    }
    if (v->type == '*' && v->n >= 1 && v->elem[0].type == '$' &&
        resp_value_is(&v->elem[0], "override")) {
        return LUA_WIRE_OVERRIDE;
    }
    if (v->type != '*' || v->n < 3 || v->elem[0].type != ':' ||
        v->elem[1].type != ':' || v->elem[2].type != ':') {
        lua_wire_check_error(c, GCRA_ERR_SCRIPT);
        return LUA_WIRE_MALFORMED;
    }
    sr.limited = v->elem[0].integer;
    sr.now_s = v->elem[1].integer;
    sr.now_us = v->elem[2].integer;
    /* An ADJUST's group applied its change, whatever it shows. */
    c->admitted[g] =
        (c->op == STORE_CHECK && sr.limited == 0) || c->op == STORE_ADJUST;
    for (i = 0; i < c->n; i++) {
        if (c->lim[i].group != g) {
            continue;
        }
        if (3 + k >= v->n) {
            lua_wire_check_error(c, GCRA_ERR_SCRIPT);
            return LUA_WIRE_MALFORMED;
        }
        if (lua_wire_entry(c, i, &v->elem[3 + k++], &sr) != 0) {
            return LUA_WIRE_MALFORMED;
        }
    }
    /* The script's `limited` is its real limits' alone; a limit of a
     * shadow level that refused took nothing either. */
    store_shadow_mark(c);
    for (i = 0; i < c->n; i++) {
        struct store_limit *x = &c->lim[i];
        struct rl_decision *r = &c->res[i];
        if (x->group != g || x->algo == LIMITS_GCRA || sr.limited != 0 ||
            x->shadow_limited || c->cost == 0) {
            continue;
        }
        if (x->algo == LIMITS_CONCURRENCY) {
            /* One slot whatever the cost, and none when it renewed. */
            c->peek[i].remaining +=
                strcmp(x->undo, "n") == 0 && r->remaining < r->limit;
            continue;
        }
        /* Taken in this group (by a check, refunded if another slot
         * refuses; what a check would take, for a peek): the state
         * without this request has its cost back. */
        c->peek[i].remaining = r->remaining > r->limit - c->cost
                                   ? r->limit
                                   : r->remaining + c->cost;
    }
    return LUA_WIRE_DECIDED;
}
