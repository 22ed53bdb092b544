/* The shared driver of the Lua twins' differential tests (see the
 * header). The model side is a `struct twin_algo`; everything that talks
 * to Redis, draws times and tallies is here, once. */
#include "tests/integration/twin_walk.h"

#include "tests/integration/lstate.h"

#include "tests/integration/fixture.h"

#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TWIN_SEED_ENV "PX_LUA_TWIN_SEED"

/* ---------------- The key and its model ---------------- */

void twin_key_init(struct twin_key *k, const struct twin_algo *a,
                   redisContext *c, const char *name)
{
    memset(k, 0, sizeof(*k));
    k->a = a;
    k->c = c;
    snprintf(k->name, sizeof(k->name), "%s", name);
    k->st = calloc(1, a->state_size);
    k->next = calloc(1, a->state_size);
    k->pre = calloc(1, a->state_size);
    cr_assert(k->st && k->next && k->pre);
    k->ttl = -2;
}

void twin_key_free(struct twin_key *k)
{
    free(k->st);
    free(k->next);
    free(k->pre);
    k->st = k->next = k->pre = NULL;
}

/* Sets cf to n[0..2] through the algorithm; returns its error text. */
static const char *twin_conf_try(const struct twin_algo *a,
                                 struct twin_conf *cf, const int64_t n[3])
{
    for (int i = 0; i < 3; i++) {
        cf->n[i] = n[i];
        snprintf(cf->s[i], TWIN_DIGITS, "%" PRId64, n[i]);
        cf->v[i] = i < a->nparams ? cf->s[i] : NULL;
    }
    cf->v[3] = NULL;
    return a->conf(cf, n);
}

void twin_conf_set(const struct twin_algo *a, struct twin_conf *cf, int64_t x,
                   int64_t y, int64_t z)
{
    const int64_t n[3] = { x, y, z };
    const char *err = twin_conf_try(a, cf, n);

    cr_assert_null(err, "%s params %" PRId64 " %" PRId64 " %" PRId64 ": %s",
                   a->name, x, y, z, err);
}

void twin_set(struct twin_key *k, int64_t x, int64_t y, int64_t z)
{
    twin_conf_set(k->a, &k->cf, x, y, z);
    k->deadline_valid = 0;
}

const struct twin_result *twin_model(struct twin_key *k, const void *st,
                                     int64_t now, int64_t cost)
{
    memset(&k->r, 0, sizeof(k->r));
    k->a->decide(&k->cf, st, now, cost, &k->r, k->next);
    return &k->r;
}

/* The model's decision for k's own state. */
static const struct twin_result *twin_model_own(struct twin_key *k, int64_t now,
                                                int64_t cost)
{
    return twin_model(k, k->have ? k->st : NULL, now, cost);
}

/* The script's parameter strings for a call of cost (see args). */
static const char *const *twin_args(const struct twin_key *k, int64_t cost,
                                    char buf[4][TWIN_DIGITS], const char *v[4])
{
    if (k->a->args == NULL) {
        return k->cf.v;
    }
    k->a->args(&k->cf, cost, buf, v);
    return v;
}

/* Asserts what a read shows equals the model's state. */
static void twin_expect_state(struct twin_key *k, const redisReply *r,
                              const char *ctx)
{
    int have = k->a->parse(r, k->next, ctx);

    cr_assert_eq(have, k->have, "%s: key exists %d, model %d", ctx, have,
                 k->have);
    if (have) {
        k->a->expect_same(k->next, k->st, ctx);
    }
}

void twin_reread(struct twin_key *k, const char *ctx)
{
    redisReply *r = lstate_cmd(k->c, k->a->read_fmt, k->name);

    k->have = k->a->parse(r, k->st, ctx);
    freeReplyObject(r);
    k->ttl_at = px_now_ms();
    k->ttl = lua_twin_pttl(k->c, k->name);
    k->deadline_valid = 0;
}

/* Runs `cmd` split at spaces, "%s" the key's name and "''" an empty
 * argument (what a format cannot say). */
static void twin_cmd_words(struct twin_key *k, const char *cmd)
{
    char buf[512], *save = NULL, *w, hash[64];
    const char *argv[16], *field;
    int argc = 0;

    if (lstate_split(k->name, hash, sizeof(hash), &field)) {
        /* Planted in the identity's state string (lstate.h), "%s" its
         * name. */
        char text[512];
        size_t used = 0;

        snprintf(buf, sizeof(buf), "%s", cmd);
        for (w = strtok_r(buf, " ", &save); w != NULL;
             w = strtok_r(NULL, " ", &save)) {
            used += (size_t)snprintf(text + used, sizeof(text) - used, "%s%s",
                                     used > 0 ? " " : "",
                                     strcmp(w, "%s") == 0 ? k->name : w);
            cr_assert_lt(used, sizeof(text));
        }
        freeReplyObject(lstate_cmd(k->c, "%s", text));
        return;
    }
    snprintf(buf, sizeof(buf), "%s", cmd);
    for (w = strtok_r(buf, " ", &save); w != NULL && argc < 16;
         w = strtok_r(NULL, " ", &save)) {
        argv[argc++] = strcmp(w, "%s") == 0   ? k->name
                       : strcmp(w, "''") == 0 ? ""
                                              : w;
    }
    freeReplyObject(redisCommandArgv(k->c, argc, argv, NULL));
}

void twin_plant(struct twin_key *k, const char *fmt, ...)
{
    va_list ap;
    char cmd[512];

    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    twin_cmd_words(k, cmd);
    twin_reread(k, cmd);
}

/* Puts back a TTL the transaction's PERSIST took (rows only). */
static void twin_keep_ttl(struct twin_key *k, long long pttl)
{
    k->ttl = pttl > 0 ? -1 : pttl;
    if (k->keep_ttl && pttl > 0) {
        k->ttl_at = px_now_ms();
        px_check_int(lstate_cmd(k->c, "PEXPIRE %s %lld", k->name, pttl), 1);
        k->ttl = pttl;
    }
}

/* Asserts the twin's undo token is the model's. */
static void twin_expect_undo(const struct twin_key *k, const char *got,
                             const char *ctx)
{
    if (k->r.undo_digits) {
        cr_assert(got[0] != '\0' && strspn(got, "0123456789") == strlen(got),
                  "%s: undo '%s'", ctx, got);
        return;
    }
    cr_assert_str_eq(got, k->r.undo, "%s: undo token", ctx);
}

/* twin_step() of mode "check", "peek" or "adjust" (cost the delta: the
 * model's adjust, the parameters of a call of cost 1, the entry as a
 * peek of cost 1 gives it). */
static const struct twin_result *twin_step_as(struct twin_key *k,
                                              const char *mode, int64_t now,
                                              int64_t cost, const char *ctx)
{
    int adjust = strcmp(mode, "adjust") == 0;
    int check = adjust || strcmp(mode, "check") == 0;
    int64_t cost_args = adjust ? 1 : cost; /* the parameters' cost */
    long long ttl = k->ttl;
    struct lua_twin_txn tx;
    char buf[4][TWIN_DIGITS];
    const char *v[4];

    if (adjust) {
        memset(&k->r, 0, sizeof(k->r));
        k->a->adjust(&k->cf, k->have ? k->st : NULL, now, cost, &k->r, k->next);
    } else {
        twin_model_own(k, now, cost);
    }
    lua_twin_call_multi(k->c, mode, k->name, k->a->name,
                        twin_args(k, cost_args, buf, v), now, cost, NULL,
                        k->a->read_fmt, &tx, ctx);
    cr_assert(!tx.failed, "%s: %s: %s", ctx, mode, tx.err);
    cr_assert_eq(tx.out.now_us, now, "%s: the script's clock", ctx);
    if (tx.entry->elements == 1) {
        cr_assert_not_null(k->a->from_raw, "%s: an entry of one element", ctx);
        k->a->from_raw(&k->cf, tx.entry->element[0], cost_args, &tx.out, ctx);
    } else {
        k->text[0] = tx.entry->element[3]->type == REDIS_REPLY_STRING;
        k->text[1] = tx.entry->element[4]->type == REDIS_REPLY_STRING;
    }
    lua_twin_expect(&tx.out, &k->r.d, ctx);
    twin_expect_undo(k, tx.out.undo, ctx);
    k->out = tx.out;
    if (check && k->r.write) {
        memcpy(k->st, k->next, k->a->state_size);
        k->have = k->r.have_next;
        k->deadline_valid = 1;
        k->deadline_us = now + k->r.expiry_ms * 1000;
        if (k->have && lua_twin_expired(&tx, k->r.expiry_ms, ctx)) {
            k->have = 0; /* real time took it: gone on both sides */
            k->gone++;
        } else if (k->have) {
            cr_assert(tx.pttl <= k->r.expiry_ms &&
                          tx.pttl >= k->r.expiry_ms - tx.elapsed_ms,
                      "%s: PTTL %lld, expiry %" PRId64 " ms, %lld ms elapsed",
                      ctx, tx.pttl, k->r.expiry_ms, tx.elapsed_ms);
        }
    } else if (ttl < 0) {
        cr_assert_eq(tx.pttl, k->have ? -1 : -2, "%s: PTTL after no write",
                     ctx);
    } else {
        cr_assert(
            tx.pttl <= ttl && tx.pttl >= ttl - (px_now_ms() - k->ttl_at) - 1,
            "%s: PTTL %lld after no write, %lld before", ctx, tx.pttl, ttl);
    }
    twin_expect_state(k, tx.state, ctx);
    twin_keep_ttl(k, tx.pttl);
    freeReplyObject(tx.exec);
    return &k->r;
}

const struct twin_result *twin_step(struct twin_key *k, const char *mode,
                                    int64_t now, int64_t cost, const char *ctx)
{
    return twin_step_as(k, mode, now, cost, ctx);
}

const struct twin_result *twin_adjust(struct twin_key *k, int64_t now,
                                      int64_t delta, const char *ctx)
{
    cr_assert_not_null(k->a->adjust, "%s: %s has no adjust", ctx, k->a->name);
    return twin_step_as(k, "adjust", now, delta, ctx);
}

/* A delta for the walk: the algorithm's draw, or a cost of either sign
 * (0 now and then: it must write nothing). */
static int64_t twin_rnd_delta(struct twin_key *k, uint64_t *s)
{
    int64_t d;

    if (k->a->rnd_delta != NULL) {
        return k->a->rnd_delta(s, &k->cf);
    }
    if (lua_twin_rnd_in(s, 0, 9) == 0) {
        return 0;
    }
    d = k->a->rnd_cost(s, &k->cf);
    return lua_twin_rnd_in(s, 0, 1) ? d : -d;
}

/* The refund in MULTI; the model takes what it left. */
static void twin_refund_tx(struct twin_key *k, int64_t now, int64_t cost,
                           const char *undo, struct lua_twin_txn *tx,
                           const char *ctx)
{
    char buf[4][TWIN_DIGITS];
    const char *v[4];

    lua_twin_call_multi(
        k->c, "refund", k->name, k->a->name, twin_args(k, cost, buf, v), now,
        cost, undo != NULL ? undo : k->out.undo, k->a->read_fmt, tx, ctx);
    cr_assert(!tx->failed, "%s: refund: %s", ctx, tx->err);
    k->have = k->a->parse(tx->state, k->st, ctx);
    k->deadline_valid = 0;
}

void twin_refund(struct twin_key *k, int64_t now, int64_t cost,
                 const char *undo, const char *ctx)
{
    struct lua_twin_txn tx;

    twin_refund_tx(k, now, cost, undo, &tx, ctx);
    twin_keep_ttl(k, tx.pttl);
    freeReplyObject(tx.exec);
}

int twin_hash(const redisReply *r, const char *const *names, int n, int64_t *v,
              const char *ctx)
{
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s: HGETALL", ctx);
    if (r->elements == 0) {
        return 0;
    }
    cr_assert_eq(r->elements, 2 * (size_t)n, "%s: %zu fields", ctx,
                 r->elements / 2);
    for (int i = 0; i < n; i++) {
        size_t j = 0;

        while (j < r->elements && strcmp(r->element[j]->str, names[i]) != 0) {
            j += 2;
        }
        cr_assert_lt(j, r->elements, "%s: no field %s", ctx, names[i]);
        cr_assert(lua_twin_dec(r->element[j + 1]->str, &v[i]), "%s: %s = '%s'",
                  ctx, names[i], r->element[j + 1]->str);
    }
    return 1;
}

/* ---------------- The random walk ---------------- */

/* What a walk reached. */
struct twin_tally {
    long checks, limited, writes, peeks, refunds, expiries, changes, plants;
    long adjusts, adjust_writes; /* ADJUST steps, and those that wrote */
    long waits, reserved;        /* checks with WAIT, and reservations */
    long owns;                   /* the algorithm's own steps */
};

/* Peek, check, refund, peek at one now: when the check took something,
 * the refund restores the decisions: the twin's two peeks agree, and
 * the model decides alike from the state before the check and the one
 * the refund left, now and at later >= now; the algorithm asserts the
 * rest. Returns 1 when a refund ran. */
int twin_refund_cycle(struct twin_key *k, int64_t now, int64_t cost,
                      int64_t later, const char *ctx)
{
    int pre_have = k->have;
    struct lua_twin_out before, after;
    struct lua_twin_txn tx;

    memcpy(k->pre, k->st, k->a->state_size);
    twin_step(k, "peek", now, cost, ctx);
    before = k->out;
    twin_step(k, "check", now, cost, ctx);
    if (k->r.d.limited || cost == 0 || !k->r.write || !k->have) {
        return 0; /* refused, nothing taken, or real time took the key */
    }
    twin_refund_tx(k, now, cost, NULL, &tx, ctx);
    if (!k->a->after_refund(k, pre_have ? k->pre : NULL, pre_have, now, cost,
                            &tx, ctx)) {
        k->have = 0;
        k->ttl = -2;
        freeReplyObject(tx.exec);
        return 1;
    }
    k->ttl = tx.pttl > 0 ? -1 : tx.pttl; /* PERSIST took an expiry */
    freeReplyObject(tx.exec);
    twin_step(k, "peek", now, cost, ctx);
    after = k->out;
    cr_assert(before.limited == after.limited &&
                  before.remaining == after.remaining &&
                  before.retry_us == after.retry_us &&
                  before.reset_us == after.reset_us,
              "%s: peek after refund [%d %" PRId64 " %" PRId64 " %" PRId64
              "], before check [%d %" PRId64 " %" PRId64 " %" PRId64 "]",
              ctx, after.limited, after.remaining, after.retry_us,
              after.reset_us, before.limited, before.remaining, before.retry_us,
              before.reset_us);
    for (int q = 0; q <= 1; q++) {
        int64_t when = q == 0 ? now : later;
        struct rl_decision a =
            twin_model(k, pre_have ? k->pre : NULL, when, cost)->d;
        struct rl_decision b = twin_model_own(k, when, cost)->d;

        lua_twin_expect_same_decision(&a, &b, ctx);
    }
    return 1;
}

/* Past the model's expiry the state must decide like no key, now and
 * later, for several costs; then the key goes (or stays, still alike). */
static int twin_expire(struct twin_key *k, uint64_t *s, int64_t now,
                       int64_t unit, const char *ctx)
{
    int64_t costs[3] = { 0, 1, k->a->rnd_cost(s, &k->cf) };
    int64_t later[3] = { 0, 1, lua_twin_rnd_in(s, 1, unit) };

    if (!k->have || !k->deadline_valid || now < k->deadline_us) {
        return 0;
    }
    for (int i = 0; i < 3 && !k->a->expired_differs; i++) {
        for (int j = 0; j < 3; j++) {
            int64_t t = now > TWIN_US_MAX - later[j] ? now : now + later[j];
            struct rl_decision a = twin_model_own(k, t, costs[i])->d;
            struct rl_decision b = twin_model(k, NULL, t, costs[i])->d;

            lua_twin_expect_same_decision(&a, &b, ctx);
        }
    }
    if (lua_twin_rnd_in(s, 0, 1)) {
        px_check_int(lstate_cmd(k->c, "DEL %s", k->name), 1);
        k->have = 0;
        k->ttl = -2;
    }
    return 1;
}

/* The next time: the same, a little later, an edge of the algorithm's,
 * the last retry or reset (or 1 us off them), much later, years later,
 * or back. */
static int64_t twin_rnd_time(struct twin_key *k, uint64_t *s, int64_t now,
                             int64_t unit)
{
    int64_t t = now, edge;

    switch (lua_twin_rnd_in(s, 0, 11)) {
    case 0:
        break;
    case 1:
        t = now + lua_twin_rnd_in(s, 1, 1000);
        break;
    case 2:
    case 3:
    case 4:
        edge = k->a->rnd_edge(s, k, now);
        t = edge >= 0 ? edge : now;
        break;
    case 5:
        edge = lua_twin_rnd_in(s, 0, 1) ? k->r.d.retry_after_ns
                                        : k->r.d.reset_after_ns;
        if (edge > 0 && edge < INT64_MAX / 2) {
            t = now + edge / 1000 + lua_twin_rnd_in(s, -1, 1);
        }
        break;
    case 6:
        t = now + lua_twin_rnd_in(s, unit, 20 * unit);
        break;
    case 7:
        t = now + lua_twin_rnd_in(s, 1, lua_twin_rnd_in(s, 0, 3) ? 400 : 4000) *
                      TWIN_DAY_US;
        break;
    case 8:
        t = now - lua_twin_rnd_in(s, 1,
                                  lua_twin_rnd_in(s, 0, 1) ? 2 * unit
                                                           : 100 * TWIN_SEC);
        break;
    default:
        t = now + lua_twin_rnd_in(
                      s, 0, unit < 6 * TWIN_SEC ? unit / 2 + 1 : 3 * TWIN_SEC);
        break;
    }
    return t < 0 ? 0 : t > TWIN_US_MAX ? TWIN_US_MAX : t;
}

/* A sequence's first time: near 0, near the script's end, or realistic. */
static int64_t twin_rnd_start(uint64_t *s)
{
    switch (lua_twin_rnd_in(s, 0, 3)) {
    case 0:
        return lua_twin_rnd_in(s, 0, 5 * TWIN_SEC);
    case 1:
        return TWIN_US_MAX - lua_twin_rnd_in(s, 0, INT64_C(1) << 40);
    default:
        return TWIN_T0 + lua_twin_rnd_in(s, 0, INT64_C(1) << 40);
    }
}

static void twin_sequence(struct twin_key *k, uint64_t *s, int seq,
                          unsigned long long seed, struct twin_tally *n)
{
    int64_t now = twin_rnd_start(s);

    /* A limit key of the state-string form, when its algorithm keeps its
     * state in the identity's string (lstate.h): the walk covers the
     * emulation of the commands the algorithms send, on that string's
     * record. CL.THROTTLE's keys are the client's own. */
    if (k->a->plain_key) {
        snprintf(k->name, sizeof(k->name), "%.8s:%d", k->a->name, seq);
    } else {
        snprintf(k->name, sizeof(k->name), "{tw}%.8s:%d#0:%s", k->a->name, seq,
                 k->a->name);
    }
    k->have = 0;
    k->ttl = -2;
    k->a->rnd_conf(s, &k->cf, NULL);
    k->deadline_valid = 0;
    memset(&k->r, 0, sizeof(k->r));
    for (int op = 0; op < TWIN_OPS; op++) {
        int64_t unit = k->a->unit_us(&k->cf);
        int64_t kind = lua_twin_rnd_in(s, 0, 99), cost;
        char ctx[TWIN_CTX];

        now = twin_rnd_time(k, s, now, unit);
        cost = k->a->rnd_cost(s, &k->cf);
        snprintf(ctx, sizeof(ctx),
                 "%s: " TWIN_SEED_ENV "=%llu seq %d op %d: params %s %s %s "
                 "now %" PRId64 " cost %" PRId64,
                 k->a->name, seed, seq, op, k->cf.s[0], k->cf.s[1], k->cf.s[2],
                 now, cost);
        n->expiries += twin_expire(k, s, now, unit, ctx);
        if (k->a->own_step != NULL &&
            lua_twin_rnd_in(s, 0, 99) < k->a->own_pct) {
            k->a->own_step(s, k, ctx);
            k->deadline_valid = 0;
            n->owns++;
        } else if (k->a->adjust != NULL && kind < 12) {
            twin_adjust(k, now, twin_rnd_delta(k, s), ctx);
            n->adjusts++;
            n->adjust_writes += k->r.write;
        } else if (k->a->waits && kind < 26) {
            /* A WAIT at the request's retry, give or take 1 us: due
             * exactly at the wait reserves, 1 ns beyond refuses. A cost
             * admitted at once becomes the limit's (mostly refused). */
            int64_t retry = twin_model_own(k, now, cost)->d.retry_after_ns;
            int64_t wait;

            if (!k->r.d.limited) {
                cost = k->r.d.limit;
                retry = twin_model_own(k, now, cost)->d.retry_after_ns;
            }
            wait = retry > 0 && retry < INT64_MAX / 2
                       ? (retry + 999) / 1000 + lua_twin_rnd_in(s, -1, 1)
                       : lua_twin_rnd_in(s, 1, 3 * unit);

            lua_twin_set_wait(wait > 0 ? wait : 1);
            twin_step(k, "check", now, cost, ctx);
            lua_twin_set_wait(0);
            n->waits++;
            n->reserved += k->r.d.limited && k->r.write;
        } else if (kind < 55) {
            twin_step(k, "check", now, cost, ctx);
            n->checks++;
            n->limited += k->r.d.limited;
            n->writes += k->r.write;
        } else if (kind < 68) {
            twin_step(k, "peek", now, cost, ctx);
            n->peeks++;
        } else if (kind < 83) {
            int64_t later = now + lua_twin_rnd_in(s, 0, 3 * unit);

            n->refunds += twin_refund_cycle(
                k, now, cost, later <= TWIN_US_MAX ? later : now, ctx);
        } else if (kind < 90) {
            /* Same key, other limits: the script keeps the last
             * parameters it parsed, and must see a change in any one. */
            struct twin_conf old = k->cf;

            k->a->rnd_conf(s, &k->cf, &old);
            k->deadline_valid = 0;
            n->changes++;
        } else if (k->a->plant != NULL) {
            int planted = k->a->plant(s, k, now);

            n->plants += planted;
            if (planted) {
                k->ttl = k->have ? -1 : -2;
                k->deadline_valid = 0;
            }
        }
    }
}

void twin_walk(const struct twin_algo *a, const char *suite)
{
    redisContext *c = lua_twin_connect();
    uint64_t seed = lua_twin_seed(suite, TWIN_SEED_ENV), s = seed | 1;
    struct twin_tally n = { 0 };
    struct twin_key k;

    twin_key_init(&k, a, c, "walk");
    for (int seq = 0; seq < (a->sequences ? a->sequences : TWIN_SEQUENCES);
         seq++) {
        twin_sequence(&k, &s, seq, (unsigned long long)seed, &n);
    }
    fprintf(stderr,
            "%s: %ld checks (%ld limited, %ld writes), %ld peeks, %ld "
            "refunds, %ld expiries, %ld changes, %ld plants, %ld own steps, "
            "%ld gone in real time\n",
            suite, n.checks, n.limited, n.writes, n.peeks, n.refunds,
            n.expiries, n.changes, n.plants, n.owns, k.gone);
    cr_assert_gt(n.limited, 0, "%s: no check was refused", suite);
    cr_assert_gt(n.checks - n.limited, 0, "%s: no check admitted", suite);
    cr_assert_gt(n.writes, 0, "%s: no check wrote", suite);
    cr_assert_gt(n.peeks, 0, "%s: no peek", suite);
    cr_assert_gt(n.refunds, 0, "%s: no refund", suite);
    cr_assert(a->plant == NULL || n.plants > 0, "%s: nothing planted", suite);
    if (a->waits) {
        fprintf(stderr, "%s: %ld checks with WAIT (%ld reserved)\n", suite,
                n.waits, n.reserved);
        cr_assert_gt(n.reserved, 0, "%s: no reservation", suite);
    }
    if (a->adjust != NULL) {
        fprintf(stderr, "%s: %ld adjusts (%ld wrote)\n", suite, n.adjusts,
                n.adjust_writes);
        cr_assert_gt(n.adjust_writes, 0, "%s: no adjust wrote", suite);
    }
    cr_assert(a->own_step == NULL || n.owns > 0, "%s: no own step", suite);
    for (int i = 0; i < TWIN_OWN_TALLIES && a->own_tally[i] != NULL; i++) {
        fprintf(stderr, "%s: own step: %ld %s\n", suite, k.own[i],
                a->own_tally[i]);
        cr_assert_gt(k.own[i], 0, "%s: no %s", suite, a->own_tally[i]);
    }
    twin_key_free(&k);
    redisFree(c);
}

/* ---------------- Tables ---------------- */

/* The value of a hash field, a zset member's score, or the number of
 * zset entries at a score, as text ("nil" for none). */
static void twin_probe(struct twin_key *k, const char *what, char *buf,
                       size_t size)
{
    const char *arg = strchr(what, ':') + 1;
    redisReply *r;

    if (strncmp(what, "field:", 6) == 0) {
        r = lstate_cmd(k->c, "HGET %s %s", k->name, arg);
    } else if (strncmp(what, "score:", 6) == 0) {
        r = lstate_cmd(k->c, "ZSCORE %s %s", k->name, arg);
    } else {
        cr_assert(strncmp(what, "zcount:", 7) == 0, "no probe %s", what);
        r = lstate_cmd(k->c, "ZCOUNT %s %s %s", k->name, arg, arg);
    }
    if (r->type == REDIS_REPLY_NIL) {
        snprintf(buf, size, "nil");
    } else if (r->type == REDIS_REPLY_INTEGER) {
        snprintf(buf, size, "%lld", r->integer);
    } else {
        cr_assert_eq(r->type, REDIS_REPLY_STRING, "%s: reply type", what);
        snprintf(buf, size, "%s", r->str);
    }
    freeReplyObject(r);
}

/* Asserts each "name value" pair of want (see the header). */
static void twin_expect_want(struct twin_key *k, const char *want,
                             const char *ctx)
{
    char buf[512], *save = NULL, *name, *val;

    snprintf(buf, sizeof(buf), "%s", want != NULL ? want : "");
    for (name = strtok_r(buf, " ", &save); name != NULL;
         name = strtok_r(NULL, " ", &save)) {
        char got[TWIN_DIGITS * 2];
        int64_t v = 0, g = 0;

        val = strtok_r(NULL, " ", &save);
        cr_assert_not_null(val, "%s: '%s' without a value", ctx, name);
        if (strcmp(name, "mark") == 0) {
            k->mark = k->out;
            continue;
        }
        if (strcmp(name, "same") == 0) {
            cr_assert(k->out.limited == k->mark.limited &&
                          k->out.remaining == k->mark.remaining &&
                          k->out.retry_us == k->mark.retry_us &&
                          k->out.reset_us == k->mark.reset_us,
                      "%s: the entry differs from the marked one", ctx);
            continue;
        }
        if (strcmp(name, "ints") == 0) {
            int64_t ints[5];
            char txt[6 * TWIN_DIGITS];

            rl_reply_ints(&k->r.d, ints);
            snprintf(txt, sizeof(txt),
                     "%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64,
                     ints[0], ints[1], ints[2], ints[3], ints[4]);
            cr_assert_str_eq(txt, val, "%s: ints", ctx);
            continue;
        }
        if (strcmp(name, "undo") == 0) {
            cr_assert_str_eq(k->out.undo, strcmp(val, "-") == 0 ? "" : val,
                             "%s: undo", ctx);
            continue;
        }
        if (strchr(name, ':') != NULL) {
            twin_probe(k, name, got, sizeof(got));
            cr_assert_str_eq(got, val, "%s: %s is %s, want %s", ctx, name, got,
                             val);
            continue;
        }
        v = strtoll(val, NULL, 10);
        if (strcmp(name, "limited") == 0) {
            g = k->out.limited;
        } else if (strcmp(name, "remaining") == 0) {
            g = k->out.remaining;
        } else if (strcmp(name, "retry_us") == 0) {
            g = k->out.retry_us;
        } else if (strcmp(name, "reset_us") == 0) {
            g = k->out.reset_us;
        } else if (strcmp(name, "retry_ns") == 0) {
            g = k->r.d.retry_after_ns;
        } else if (strcmp(name, "reset_ns") == 0) {
            g = k->r.d.reset_after_ns;
        } else if (strcmp(name, "expiry_ms") == 0) {
            g = k->r.expiry_ms;
        } else if (strcmp(name, "retry_text") == 0) {
            g = k->text[0];
        } else if (strcmp(name, "reset_text") == 0) {
            g = k->text[1];
        } else if (strcmp(name, "zcard") == 0) {
            redisReply *r = lstate_cmd(k->c, "ZCARD %s", k->name);

            g = r->integer;
            freeReplyObject(r);
        } else if (strcmp(name, "exists") == 0) {
            g = k->have;
        } else if (strcmp(name, "pttl_min") == 0) {
            cr_assert_geq(k->ttl, v, "%s: PTTL", ctx);
            continue;
        } else if (strcmp(name, "pttl_max") == 0) {
            cr_assert_leq(k->ttl, v, "%s: PTTL", ctx);
            continue;
        } else {
            cr_assert_fail("%s: no expectation '%s'", ctx, name);
        }
        cr_assert_eq(g, v, "%s: %s %" PRId64 ", want %" PRId64, ctx, name, g,
                     v);
    }
}

void twin_rows(struct twin_key *k, const struct twin_row *rows, size_t n)
{
    k->keep_ttl = 1;
    for (size_t i = 0; i < n; i++) {
        const struct twin_row *w = &rows[i];
        char ctx[TWIN_CTX];

        snprintf(ctx, sizeof(ctx), "%s row %zu: %s", k->a->name, i, w->op);
        if (strcmp(w->op, "check") == 0 || strcmp(w->op, "peek") == 0) {
            twin_step(k, w->op, w->now_us, w->cost, ctx);
        } else if (strcmp(w->op, "refund") == 0) {
            twin_refund(k, w->now_us, w->cost, w->undo, ctx);
        } else if (strcmp(w->op, "adjust") == 0) {
            twin_adjust(k, w->now_us, w->cost, ctx);
        } else if (strcmp(w->op, "params") == 0) {
            twin_set(k, w->n[0], w->n[1], w->n[2]);
        } else {
            twin_cmd_words(k, w->op);
            twin_reread(k, ctx);
        }
        twin_expect_want(k, w->want, ctx);
    }
    k->keep_ttl = 0;
}

void twin_bad_params(struct twin_key *k, const struct twin_bad *rows, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const struct twin_bad *b = &rows[i];
        const char *v[4] = { b->p[0], b->p[1], b->p[2], NULL };
        char err[TWIN_ERR], want[TWIN_ERR];
        struct lua_twin_out o;
        int64_t num[3] = { 0, 0, 0 };
        int decimal = 1;

        snprintf(want, sizeof(want), "ERR %s", b->err);
        for (int j = 0; j < 3; j++) {
            decimal &= b->p[j] == NULL || lua_twin_dec(b->p[j], &num[j]);
        }
        if (decimal) {
            struct twin_conf cf;
            const char *cerr = twin_conf_try(k->a, &cf, num);

            cr_assert_not_null(cerr, "case %zu: the model accepts it", i);
            cr_assert_str_eq(cerr, b->err, "case %zu: the model's text", i);
        }
        for (int mode = 0; mode < 2; mode++) {
            cr_assert_eq(lua_twin_call(k->c, mode ? "peek" : "check", k->name,
                                       k->a->name, v, TWIN_T0, 1, NULL, &o, err,
                                       sizeof(err)),
                         -1, "case %zu: no error", i);
            cr_assert_str_eq(err, want, "case %zu", i);
        }
        /* A refund with them does nothing, without an error. */
        cr_assert_eq(lua_twin_call(k->c, "refund", k->name, k->a->name, v,
                                   TWIN_T0, 1, "1", &o, err, sizeof(err)),
                     0, "case %zu: %s", i, err);
        px_check_int(lstate_cmd(k->c, "EXISTS %s", k->name), 0);
    }
}

/* Asserts check and peek at costs 1 and 0 fail with `want` and leave
 * the key as DUMP showed it, without a TTL. */
static void twin_expect_refused(struct twin_key *k, const char *want,
                                const char *ctx)
{
    redisReply *d0 = lstate_cmd(k->c, "DUMP %s", k->name), *d1;
    char err[TWIN_ERR], buf[4][TWIN_DIGITS];
    const char *v[4];
    struct lua_twin_out o;

    for (int i = 0; i < 4; i++) {
        cr_assert_eq(lua_twin_call(k->c, i % 2 ? "peek" : "check", k->name,
                                   k->a->name,
                                   twin_args(k, i / 2 ? 0 : 1, buf, v), TWIN_T0,
                                   i / 2 ? 0 : 1, NULL, &o, err, sizeof(err)),
                     -1, "%s: no error", ctx);
        cr_assert_str_eq(err, want, "%s", ctx);
    }
    d1 = lstate_cmd(k->c, "DUMP %s", k->name);
    cr_assert(d0->type == REDIS_REPLY_STRING && d0->len == d1->len &&
                  memcmp(d0->str, d1->str, d0->len) == 0,
              "%s: the key changed", ctx);
    px_check_int(lstate_cmd(k->c, "PTTL %s", k->name), -1);
    freeReplyObject(d0);
    freeReplyObject(d1);
}

void twin_bad_states(struct twin_key *k, const char *other,
                     const char *const *rows, size_t n)
{
    char want[TWIN_ERR];

    px_check_status(lstate_cmd(k->c, "SET %s 1", k->name), "OK");
    twin_expect_refused(k, TWIN_E_WRONGTYPE, "a string");
    freeReplyObject(lstate_cmd(k->c, "DEL %s", k->name));
    twin_cmd_words(k, other);
    twin_expect_refused(k, TWIN_E_WRONGTYPE, other);
    snprintf(want, sizeof(want), "ERR %s", k->a->state_error);
    for (size_t i = 0; i < n; i++) {
        freeReplyObject(lstate_cmd(k->c, "DEL %s", k->name));
        twin_cmd_words(k, rows[i]);
        twin_expect_refused(k, want, rows[i]);
    }
}

redisContext *twin_run_rows(const struct twin_algo *a,
                            const struct twin_row *rows, size_t n)
{
    redisContext *c = lua_twin_connect();
    struct twin_key k;

    twin_key_init(&k, a, c, "k");
    twin_rows(&k, rows, n);
    twin_key_free(&k);
    return c;
}

void twin_run_bad_params(const struct twin_algo *a, const struct twin_bad *rows,
                         size_t n)
{
    redisContext *c = lua_twin_connect();
    struct twin_key k;

    twin_key_init(&k, a, c, "k");
    twin_bad_params(&k, rows, n);
    twin_key_free(&k);
    redisFree(c);
}

void twin_run_bad_states(const struct twin_algo *a, int64_t x, int64_t y,
                         int64_t z, const char *other, const char *const *rows,
                         size_t n)
{
    redisContext *c = lua_twin_connect();
    struct twin_key k;

    twin_key_init(&k, a, c, "k");
    twin_set(&k, x, y, z);
    twin_bad_states(&k, other, rows, n);
    twin_key_free(&k);
    redisFree(c);
}
