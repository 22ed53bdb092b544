/* GCRA's Lua twins against the C model algorithms/gcra.c, on a real
 * redis-server, through the shared driver of twin_walk.h: limiter.lua's
 * gcra is the descriptor (GC: a stored TAT, read with GET; the cost is
 * folded into INC; its entry is the TAT it read, of which the proxy
 * computes the five integers), with its walk and tables of reference
 * values at the test's clock. algorithms/gcra.lua, CL.THROTTLE's script,
 * decides at the node's TIME, which no test clock can step: it is the
 * walk's own step (gc_own), half the walk's operations, on the same key;
 * the reference tables are replayed through it (lua_gcra_replay), and
 * the tests after the walk call it directly. Every gcra.lua call is
 * checked against the model by lua_gcra_check() (lua_gcra.h). The walk
 * prints its seed; PX_LUA_TWIN_SEED replays it. */
#include "tests/integration/fixture.h"
#include "tests/integration/lua_gcra.h"
#include "tests/integration/lua_twin.h"
#include "tests/integration/twin_walk.h"
#include "tests/support/px_test.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "algorithms/gcra.h"
#include "algorithms/rl.h"
#include "algorithms/scripts.h"

PX_TEST_SUITE(it_gcra_lua);

#define S     RL_NS_PER_SEC
#define MS    RL_NS_PER_MS
#define P(cf) ((struct gcra_params *)(cf)->p)

_Static_assert(sizeof(struct gcra_params) <= TWIN_PARAMS_BYTES, "params");

static const struct twin_algo GC;

#define E_WRONGTYPE TWIN_E_WRONGTYPE
#define E_TAT_RANGE                                                            \
    "Cell error: Store error: Stored TAT out of range: 64-bit nanoseconds "    \
    "would overflow"
#define E_NEG_Q "Cell error: Store error: Negative quantities are not supported"

#define INT64_DIGITS 24 /* room for an int64 in decimal, sign and NUL */

/* .init: only a redis-server, the script runs there directly. */
static void it_init(void)
{
    px_redis_start(&px_env()->redis, NULL);
}

/* Nanoseconds of wall-clock time, for bounds on expiries only. */
static int64_t wall_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * S + ts.tv_nsec;
}

/* ---------------- Loading ---------------- */

Test(it_gcra_lua, script_load_returns_the_embedded_sha1, .init = it_init,
     .fini = px_env_fini, .timeout = 60)
{
    const struct scripts_lua *s = scripts_gcra();
    redisContext *c = lua_gcra_connect();

    cr_assert_eq(scripts_find("gcra"), s);
    cr_assert_null(scripts_find("no_such_script"));
    cr_assert_str_eq(s->name, "gcra");
    cr_assert_eq(strlen(s->body), s->len);
    cr_assert_eq(strlen(s->sha1), SCRIPTS_SHA1_LEN);
    redisReply *r = px_cmd(c, "SCRIPT EXISTS %s", s->sha1);
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    cr_assert_eq(r->element[0]->integer, 1);
    freeReplyObject(r);
    redisFree(c);
}

Test(it_gcra_lua, script_flush_makes_evalsha_fail_with_noscript,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = lua_gcra_connect();
    struct gcra_params p = lua_gcra_params(4, 1, 1, 1);
    const struct scripts_lua *s = scripts_gcra();

    px_check_status(px_cmd(c, "SCRIPT FLUSH"), "OK");
    px_check_error_prefix(lua_gcra_send(c, "k", 1, &p, LUA_GCRA_CHECK),
                          "NOSCRIPT ");
    /* Nothing ran: the key was not written. */
    px_check_int(px_cmd(c, "EXISTS k"), 0);
    /* The proxy's fallback: EVAL with the body, then EVALSHA works again. */
    redisReply *r = px_cmd(c, "EVAL %b 1 k 1 0 5 0", s->body, s->len);
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    freeReplyObject(r);
    px_check_int(px_cmd(c, "EXISTS k"), 1);
    lua_gcra_check(c, "k", 1, &p, LUA_GCRA_CHECK, NULL, "after EVAL");
    redisFree(c);
}

/* ---------------- The descriptor: limiter.lua's gcra ---------------- */

/* The walk's state: the stored TAT, as its text and its value. */
struct gc_state {
    int64_t tat;
    char raw[INT64_DIGITS + 8];
};

static int gc_parse(const redisReply *r, void *st, const char *ctx)
{
    struct gc_state *g = st;

    if (r->type == REDIS_REPLY_NIL) {
        return 0;
    }
    cr_assert_eq(r->type, REDIS_REPLY_STRING, "%s: GET type %d", ctx, r->type);
    cr_assert_lt(r->len, sizeof(g->raw), "%s: a long TAT", ctx);
    memset(g, 0, sizeof(*g));
    memcpy(g->raw, r->str, r->len);
    cr_assert_eq(gcra_parse_int64(r->str, r->len, &g->tat), GCRA_OK,
                 "%s: TAT '%s'", ctx, g->raw);
    return 1;
}

static void gc_same(const void *a, const void *b, const char *ctx)
{
    const struct gc_state *x = a, *y = b;

    cr_assert(x->tat == y->tat && strcmp(x->raw, y->raw) == 0,
              "%s: stored '%s', model '%s'", ctx, x->raw, y->raw);
}

/* The limit's own params are those of quantity 1; a call's are Q's. */
static const char *gc_conf(struct twin_conf *cf, const int64_t n[3])
{
    const char *err = NULL;

    return gcra_params_init(P(cf), n[0], n[1], n[2], 1, &err) == GCRA_OK ? NULL
                                                                         : err;
}

/* limiter.lua takes gcra's cost folded into INC, as the proxy sends it. */
static void gc_args(const struct twin_conf *cf, int64_t cost,
                    char buf[4][TWIN_DIGITS], const char *v[4])
{
    struct gcra_params p = lua_gcra_params(cf->n[0], cf->n[1], cf->n[2], cost);
    struct gcra_script_args a;

    gcra_script_args(&p, &a);
    for (int i = 0; i < 4; i++) {
        snprintf(buf[i], TWIN_DIGITS, "%s", a.v[i]);
        v[i] = buf[i];
    }
}

static void gc_decide(const struct twin_conf *cf, const void *st, int64_t now,
                      int64_t cost, struct twin_result *r, void *next)
{
    const struct gc_state *g = st;
    struct gc_state *n = next;
    struct gcra_params p = lua_gcra_params(cf->n[0], cf->n[1], cf->n[2], cost);
    struct gcra_result x;
    const char *err = NULL;

    cr_assert_eq(gcra_decide(&p, g != NULL, g != NULL ? g->tat : 0, now * 1000,
                             &x, &err),
                 GCRA_OK, "model: %s", err);
    r->d = x.d;
    r->write = x.write != GCRA_WRITE_NONE;
    r->have_next = x.write == GCRA_WRITE_SET;
    r->expiry_ms = x.expiry_ms;
    if (r->have_next) {
        n->tat = x.new_tat_ns;
        snprintf(n->raw, sizeof(n->raw), "%" PRId64, x.new_tat_ns);
    }
}

/* LIMITER ADJUST: gcra_adjust() on the TAT, the limit's params of
 * quantity 1 (what the proxy sends for ADJUST). */
static void gc_adjust(const struct twin_conf *cf, const void *st, int64_t now,
                      int64_t delta, struct twin_result *r, void *next)
{
    const struct gc_state *g = st;
    struct gc_state *n = next;
    struct gcra_result x;
    const char *err = NULL;

    cr_assert_eq(gcra_adjust(P(cf), g != NULL, g != NULL ? g->tat : 0,
                             now * 1000, delta, &x, &err),
                 GCRA_OK, "model: %s", err);
    r->d = x.d;
    r->write = x.write != GCRA_WRITE_NONE;
    r->have_next = x.write == GCRA_WRITE_SET;
    r->expiry_ms = x.expiry_ms;
    if (r->have_next) {
        n->tat = x.new_tat_ns;
        snprintf(n->raw, sizeof(n->raw), "%" PRId64, x.new_tat_ns);
    }
}

/* A delta: 0, the largest giving back (to fresh), or a few bursts' worth
 * of either sign. A debt stays far below the TAT's cap (INT64_MAX - EI,
 * the unit tests' edge): the walk's clock runs up to 2^53 us, 2.2e17 ns
 * below INT64_MAX, and its later checks of a few EIs must still compute
 * (past the cap they answer the range error, as any TAT that far). */
static int64_t gc_rnd_delta(uint64_t *s, const struct twin_conf *cf)
{
    int64_t burst = cf->n[0] > 0 ? cf->n[0] : 0;
    int64_t room =
        (INT64_MAX - TWIN_US_MAX * 1000) / 16 / P(cf)->ei_ns - 2 * (burst + 3);
    int64_t d;

    switch (lua_twin_rnd_in(s, 0, 9)) {
    case 0:
        return 0;
    case 1:
        return -TWIN_US_MAX;
    default:
        d = lua_twin_rnd_in(s, 1, 2 * burst + 5);
        break;
    }
    if (lua_twin_rnd_in(s, 0, 1)) {
        return -d;
    }
    return d <= room ? d : room > 0 ? room : 0;
}

/* floor(ns / 1000), also for the -1 s of "allowed". */
static int64_t gc_floor_us(int64_t ns)
{
    return ns / 1000 - (ns % 1000 < 0);
}

/* The five integers from the TAT the script read, as the proxy computes
 * them (gcra_decide_from_script, which also asserts the flag). */
static void gc_from_raw(const struct twin_conf *cf, const redisReply *raw,
                        int64_t cost, struct lua_twin_out *o, const char *ctx)
{
    struct gcra_params p = lua_gcra_params(cf->n[0], cf->n[1], cf->n[2], cost);
    struct gcra_script_reply sr = {
        .limited = o->limited,
        .now_s = o->now_us / 1000000,
        .now_us = o->now_us % 1000000,
        .tat = raw->type == REDIS_REPLY_STRING ? raw->str : NULL,
        .tat_len = raw->type == REDIS_REPLY_STRING ? raw->len : 0,
    };
    struct gcra_result x;
    const char *err = NULL;

    cr_assert_eq(gcra_decide_from_script(&p, &sr, &x, &err), GCRA_OK, "%s: %s",
                 ctx, err);
    o->limit = x.d.limit;
    o->remaining = x.d.remaining;
    o->retry_us = gc_floor_us(x.d.retry_after_ns);
    o->reset_us = gc_floor_us(x.d.reset_after_ns);
}

/* Random parameters: mostly ordinary rates, sometimes sub-millisecond
 * emission intervals (expiries of 0 ms), long periods or a negative
 * burst; a change redraws one of the three. */
static void gc_rnd_conf(uint64_t *s, struct twin_conf *cf,
                        const struct twin_conf *old)
{
    int64_t n[3], which = lua_twin_rnd_in(s, 0, 2);

    n[0] = lua_twin_rnd_in(s, 0, 9) == 0 ? lua_twin_rnd_in(s, -3, -1)
                                         : lua_twin_rnd_in(s, 0, 30);
    switch (lua_twin_rnd_in(s, 0, 5)) {
    case 0:
    case 2:
        n[1] = lua_twin_rnd_in(s, 1000, 5000000); /* EI 200 ns .. 1 ms */
        n[2] = 1;
        break;
    case 1:
        n[1] = lua_twin_rnd_in(s, 1, 3);
        n[2] = lua_twin_rnd_in(s, 3600, 86400 * 30); /* up to 30 days */
        break;
    default:
        n[1] = lua_twin_rnd_in(s, 1, 1000);
        n[2] = lua_twin_rnd_in(s, 1, 120);
        break;
    }
    for (int i = 0; old != NULL && i < 3; i++) {
        n[i] = i == which ? n[i] : old->n[i];
    }
    twin_conf_set(&GC, cf, n[0], n[1], n[2]);
}

static int64_t gc_rnd_cost(uint64_t *s, const struct twin_conf *cf)
{
    return lua_twin_rnd_in(s, 0, (cf->n[0] > 0 ? cf->n[0] : 0) + 3);
}

static int64_t gc_unit(const struct twin_conf *cf)
{
    int64_t span = P(cf)->dvt_ns > 0 ? P(cf)->dvt_ns : P(cf)->ei_ns;

    return span >= 1000 ? span / 1000 : 1;
}

/* The TAT (where the key decides like none), or where one more fits. */
static int64_t gc_edge(uint64_t *s, const struct twin_key *k, int64_t now)
{
    const struct gc_state *g = k->st;
    int64_t t;

    (void)now;
    if (!k->have) {
        return -1;
    }
    t = lua_twin_rnd_in(s, 0, 1)
            ? g->tat
            : g->tat - P(&k->cf)->dvt_ns + P(&k->cf)->ei_ns;
    t = t / 1000 + lua_twin_rnd_in(s, -1, 1);
    return t >= 0 && t <= TWIN_US_MAX ? t : -1;
}

/* A valid TAT in an unusual form or place: signed, zero-padded, tiny,
 * around now, around the wall clock (gcra.lua's now), or the stored one
 * moved back (time passing for gcra.lua). */
static int gc_plant(uint64_t *s, struct twin_key *k, int64_t now)
{
    const struct gc_state *g = k->st;
    int64_t ns = now * 1000,
            span = P(&k->cf)->dvt_ns > 0 ? P(&k->cf)->dvt_ns : S;
    char v[INT64_DIGITS + 8];

    switch (lua_twin_rnd_in(s, 0, 7)) {
    case 0:
        snprintf(v, sizeof(v), "-1");
        break;
    case 1:
        snprintf(v, sizeof(v), "+000%" PRId64,
                 ns + lua_twin_rnd_in(s, 0, 10 * S));
        break;
    case 2:
        snprintf(v, sizeof(v), "%d", (int)lua_twin_rnd_in(s, 0, 1000));
        break;
    case 3:
        snprintf(v, sizeof(v), "-%" PRId64, lua_twin_rnd_in(s, 1, 5 * S));
        break;
    case 4:
        snprintf(v, sizeof(v), "%" PRId64, ns + lua_twin_rnd_in(s, 0, 100 * S));
        break;
    case 5:
        snprintf(v, sizeof(v), "%" PRId64,
                 wall_ns() + lua_twin_rnd_in(s, -100 * S, 100 * S));
        break;
    case 6:
        if (k->have && g->tat > INT64_MIN + 2 * span) {
            snprintf(v, sizeof(v), "%" PRId64,
                     g->tat - lua_twin_rnd_in(s, 0, 2 * span));
            break;
        }
        /* fall through */
    default:
        snprintf(v, sizeof(v), "%" PRId64, ns - lua_twin_rnd_in(s, 0, 100 * S));
        break;
    }
    twin_plant(k, "SET %%s %s", v);
    return 1;
}

/* A refund takes INC back from the TAT the check stored: what is left
 * ahead of now (the TAT before the check, when it was ahead) stays with
 * its expiry, a whole ms or more; anything less goes. */
static int gc_after_refund(struct twin_key *k, const void *pre, int pre_have,
                           int64_t now, int64_t cost,
                           const struct lua_twin_txn *tx, const char *ctx)
{
    const struct gc_state *g = pre, *got = k->st;
    int64_t left = pre_have && g->tat > now * 1000 ? g->tat - now * 1000 : 0;
    int64_t ms = left / MS;

    (void)cost;
    if (ms == 0) {
        cr_assert(!k->have, "%s: the refund left '%s'", ctx, got->raw);
        /* Gone: a TAT before the check less than 1 ms ahead, or behind
         * now, which a refusal would have reported: compare no more. */
        return !pre_have;
    }
    if (!k->have) {
        cr_assert(lua_twin_expired(tx, ms, ctx), "%s: the refund took it", ctx);
        return 0;
    }
    cr_assert_eq(got->tat, g->tat, "%s: TAT after the refund", ctx);
    cr_assert(tx->pttl <= ms && tx->pttl >= ms - tx->elapsed_ms,
              "%s: PTTL %lld after the refund, expiry %" PRId64 " ms", ctx,
              tx->pttl, ms);
    return 1;
}

/* ---------------- The own step: gcra.lua at the node's clock ----------------
 */

/* p with one of the four numbers the script gets changed and the other
 * three kept (`which`: INC's seconds, INC's nanoseconds, DVT's seconds,
 * DVT's nanoseconds): the library keeps the limits it parsed from call
 * to call, keyed by those four strings, so a call right after p's with
 * such a twin must be decided by the twin's own numbers. */
static struct gcra_params twin_params(uint64_t *st, struct gcra_params p,
                                      int which)
{
    int64_t *d = which < 2 ? &p.inc_ns : &p.dvt_ns;
    int64_t sec = *d / S, frac = *d % S;

    if (*d < 0) {
        return p; /* a negative DVT (burst < 0): left as it is */
    }
    if (which % 2 == 0) {
        sec += lua_twin_rnd_in(st, 1, 2);
    } else {
        int64_t f = lua_twin_rnd_in(st, 0, S - 1);
        frac = f != frac ? f : (frac + 1) % S;
    }
    *d = sec * S + frac;
    return p;
}

/* The own step's counts (GC.own_tally). */
enum { GC_RUNS, GC_CHECK, GC_TWINS, GC_LIMITED, GC_SETS, GC_DELS, GC_BINARY };

/* One gcra.lua call checked, counted. */
static void gc_own_call(struct twin_key *k, const char *key, size_t keylen,
                        const struct gcra_params *p, enum lua_gcra_form mode,
                        struct lua_gcra_stored *seen, const char *ctx)
{
    struct gcra_result r =
        lua_gcra_check(k->c, key, keylen, p, mode, seen, ctx);

    k->own[mode == LUA_GCRA_CHECK ? GC_CHECK : GC_RUNS]++;
    k->own[GC_LIMITED] += r.d.limited;
    k->own[GC_SETS] += r.write == GCRA_WRITE_SET;
    k->own[GC_DELS] += r.write == GCRA_WRITE_DEL;
}

/* gcra.lua on the walk's key (a quarter of the time on a binary key of
 * its own, which no model follows: each call is checked against the
 * value it read), half the calls in mode "runs", whose decisions take a
 * faster path in the script: the model must not tell. A third are
 * followed by a twin (twin_params), both through the library, where its
 * memo lives. The walk's key held what the walk's model says; it is left
 * persistent, and the model takes what it holds. */
static void gc_own(uint64_t *s, struct twin_key *k, const char *ctx)
{
    struct gcra_params p = lua_gcra_params(k->cf.n[0], k->cf.n[1], k->cf.n[2],
                                           gc_rnd_cost(s, &k->cf));
    int twin = lua_twin_rnd_in(s, 0, 2) == 0;
    enum lua_gcra_form mode = twin                       ? LUA_GCRA_RUNS_FN
                              : lua_twin_rnd_in(s, 0, 1) ? LUA_GCRA_RUNS
                                                         : LUA_GCRA_CHECK;
    const struct gc_state *g = k->st;
    struct lua_gcra_stored seen;
    char key[sizeof(k->name) + 4] = "\xff";
    size_t keylen = strlen(k->name);
    int binary = lua_twin_rnd_in(s, 0, 3) == 0;

    memcpy(key + binary * 3, k->name, keylen);
    if (binary) {
        memcpy(key, "\xff\x00\x80", 3); /* not UTF-8, a NUL inside */
        keylen += 3;
        k->own[GC_BINARY]++;
    }
    gc_own_call(k, key, keylen, &p, mode, &seen, ctx);
    cr_assert(binary || (seen.have == k->have &&
                         (!seen.have || strcmp(seen.val, g->raw) == 0)),
              "%s: gcra.lua read '%s', the model holds '%s'", ctx,
              seen.have ? seen.val : "nil", k->have ? g->raw : "nil");
    if (twin) {
        /* Its twin at once: one of the four strings differs. */
        struct gcra_params pt =
            twin_params(s, p, (int)lua_twin_rnd_in(s, 0, 3));

        gc_own_call(k, key, keylen, &pt, mode, &seen, ctx);
        k->own[GC_TWINS]++;
    }
    freeReplyObject(px_cmd(k->c, "PERSIST %s", k->name));
    twin_reread(k, ctx);
}

static const struct twin_algo GC = {
    .name = "gcra",
    .plain_key = 1,
    .read_fmt = "GET %s",
    .nparams = 3,
    .state_size = sizeof(struct gc_state),
    .parse = gc_parse,
    .expect_same = gc_same,
    .conf = gc_conf,
    .decide = gc_decide,
    .state_error = NULL, /* any value but a TAT is WRONGTYPE */
    .rnd_conf = gc_rnd_conf,
    .rnd_cost = gc_rnd_cost,
    .unit_us = gc_unit,
    .rnd_edge = gc_edge,
    .plant = gc_plant,
    .after_refund = gc_after_refund,
    .args = gc_args,
    .from_raw = gc_from_raw,
    .expired_differs = 1,
    .own_step = gc_own,
    .own_pct = 50,
    .adjust = gc_adjust,
    .rnd_delta = gc_rnd_delta,
    .own_tally = { "gcra.lua calls in mode runs",
                   "gcra.lua calls in mode check", "twins",
                   "refusals by gcra.lua", "SETs by gcra.lua",
                   "DELs by gcra.lua", "own steps on a binary key" },
    .sequences = 40,
};

/* ---------------- Reference values ---------------- */

#define AT(ms) (TWIN_T0 + (ms)*1000)

/* docs/ARCHITECTURE.md's burst-4 table, through limiter.lua's gcra at
 * the test's clock (exact durations, and the integers the proxy
 * replies), then through gcra.lua (lua_gcra_replay). */
Test(it_gcra_lua, burst_4_table_through_the_script_matches_design,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
#define ROW(ms, q, l, rem, reset, retry, ints)                                 \
    TWIN_CALL("check", AT(ms), q,                                              \
              "limited " #l " remaining " #rem " reset_ns " #reset             \
              " retry_ns " #retry " ints " ints)
    static const struct twin_row rows[] = {
        TWIN_SET(4, 1, 1),
        ROW(0, 6, 1, 5, 0, -1000000000, "1,5,5,-1,0"),
        ROW(0, 1, 0, 4, 1000000000, -1000000000, "0,5,4,-1,1"),
        ROW(0, 1, 0, 3, 2000000000, -1000000000, "0,5,3,-1,2"),
        ROW(0, 1, 0, 2, 3000000000, -1000000000, "0,5,2,-1,3"),
        ROW(0, 1, 0, 1, 4000000000, -1000000000, "0,5,1,-1,4"),
        ROW(0, 1, 0, 0, 5000000000, -1000000000, "0,5,0,-1,5"),
        ROW(0, 1, 1, 0, 5000000000, 1000000000, "1,5,0,1,5"),
        ROW(3000, 1, 0, 2, 3000000000, -1000000000, "0,5,2,-1,3"),
        ROW(3100, 1, 0, 1, 3900000000, -1000000000, "0,5,1,-1,4"),
        ROW(4000, 1, 0, 1, 4000000000, -1000000000, "0,5,1,-1,4"),
        ROW(8000, 1, 0, 4, 1000000000, -1000000000, "0,5,4,-1,1"),
        ROW(9500, 1, 0, 4, 1000000000, -1000000000, "0,5,4,-1,1"),
        ROW(9500, 0, 0, 4, 1000000000, -1000000000, "0,5,4,-1,1"),
        ROW(9500, 2, 0, 2, 3000000000, -1000000000, "0,5,2,-1,3"),
        ROW(9500, 5, 1, 2, 3000000000, 3000000000, "1,5,2,3,3"),
    };
#undef ROW

    TWIN_ROWS(&GC, rows);
    lua_gcra_replay(rows, sizeof(rows) / sizeof(*rows));
}

Test(it_gcra_lua, user123_reference_values_through_the_script, .init = it_init,
     .fini = px_env_fini, .timeout = 60)
{
    static const struct twin_row rows[] = {
        TWIN_SET(15, 30, 60),
        TWIN_CALL("check", AT(0), 1, "ints 0,16,15,-1,2"),
        TWIN_CMD("DEL %s"),
        TWIN_SET(0, 1, 2),
        TWIN_CALL("check", AT(0), 1, "ints 0,1,0,-1,2"),
        TWIN_CALL("check", AT(0), 1, "ints 1,1,0,2,2"),
        TWIN_CALL("check", AT(2000), 1, "ints 0,1,0,-1,2"),
    };

    TWIN_ROWS(&GC, rows);
    lua_gcra_replay(rows, sizeof(rows) / sizeof(*rows));
}

/* LIMITER ADJUST's edges through limiter.lua against gcra_adjust: a debt
 * past the end of 64-bit time saturates at INT64_MAX - EI (and a further
 * charge stays there), the largest giving back ends at fresh (the key
 * goes), and a charge on no key starts from now. */
Test(it_gcra_lua, adjust_saturates_and_gives_back_to_fresh_as_the_model,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    static const struct twin_row rows[] = {
        TWIN_SET(4, 1, 1),
        TWIN_CALL("adjust", AT(0), INT64_C(9007199254740991),
                  "limited 1 remaining 0 exists 1"),
        TWIN_CALL("adjust", AT(0), 5, "limited 1 exists 1"),
        TWIN_CALL("adjust", AT(0), -INT64_C(9007199254740991),
                  "limited 0 exists 0 ints 0,5,4,-1,1"),
        TWIN_CALL("adjust", AT(1000), 3,
                  "limited 0 remaining 1 exists 1 ints 0,5,1,-1,4"),
        TWIN_CALL("adjust", AT(1000), 0, "ints 0,5,1,-1,4"),
        TWIN_CALL("check", AT(1000), 1, "ints 0,5,1,-1,4"),
        TWIN_CALL("check", AT(1000), 1, "ints 0,5,0,-1,5"),
        TWIN_CALL("check", AT(1000), 1, "limited 1"),
        TWIN_CALL("adjust", AT(1000), -2, "ints 0,5,1,-1,4"),
    };

    TWIN_ROWS(&GC, rows);
}

/* ---------------- The walk ---------------- */

Test(it_gcra_lua, randomized_sequences_match_the_c_model, .init = it_init,
     .fini = px_env_fini, .timeout = 120)
{
    redisFree(lua_gcra_connect());
    twin_walk(&GC, "it_gcra_lua");
}

/* ---------------- Keys that hold no TAT, and bad input ---------------- */

Test(it_gcra_lua, hash_key_gives_exact_wrongtype_and_is_not_written,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = lua_gcra_connect();
    struct gcra_params p = lua_gcra_params(4, 1, 1, 1);

    px_check_int(px_cmd(c, "HSET h f v"), 1);
    px_check_error(lua_gcra_send(c, "h", 1, &p, LUA_GCRA_CHECK), E_WRONGTYPE);
    /* In a batch: flag -1 for the key, nothing read, nothing written. */
    const redisReply *raw;
    redisReply *r = lua_gcra_send(c, "h", 1, &p, LUA_GCRA_RUNS);
    cr_assert_eq(lua_gcra_runs_flag(r, &raw, "runs"), -1);
    cr_assert_eq(raw->type, REDIS_REPLY_INTEGER); /* the code, no TAT */
    freeReplyObject(r);
    px_check_status(px_cmd(c, "TYPE h"), "hash");
    px_check_int(px_cmd(c, "HLEN h"), 1);
    px_check_str(px_cmd(c, "HGET h f"), "v");
    px_check_int(px_cmd(c, "PTTL h"), -1);
    redisFree(c);
}

Test(it_gcra_lua, strings_that_are_no_tat_give_wrongtype_and_stay,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    static const char *const bad[] = {
        "abc",
        "",
        " 12",
        "12 ",
        "1.5",
        "1e9",
        "0x10",
        "+",
        "-",
        "+-1",
        "9223372036854775808",
        "-9223372036854775809",
        "1\xff",
        /* 19 characters, as a stored TAT: the script's fast path must
         * not take them for one. */
        "1764000000 23456789",
        "176400000012345678 ",
        "1764000000-23456789",
        "9999999999999999999",
    };
    redisContext *c = lua_gcra_connect();
    struct gcra_params p = lua_gcra_params(4, 1, 1, 1);

    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        px_check_status(px_cmd(c, "SET s %s", bad[i]), "OK");
        redisReply *r = lua_gcra_send(c, "s", 1, &p, LUA_GCRA_CHECK);
        cr_assert_eq(r->type, REDIS_REPLY_ERROR, "\"%s\" accepted", bad[i]);
        cr_assert_str_eq(r->str, E_WRONGTYPE, "\"%s\"", bad[i]);
        freeReplyObject(r);
        px_check_str(px_cmd(c, "GET s"), bad[i]);
        px_check_int(px_cmd(c, "PTTL s"), -1);
        /* In a batch: flag -1 (and no TAT reported), the value kept. */
        const redisReply *raw;
        r = lua_gcra_send(c, "s", 1, &p, LUA_GCRA_RUNS);
        cr_assert_eq(lua_gcra_runs_flag(r, &raw, bad[i]), -1,
                     "\"%s\" in a batch", bad[i]);
        cr_assert_eq(raw->type, REDIS_REPLY_INTEGER);
        freeReplyObject(r);
        px_check_str(px_cmd(c, "GET s"), bad[i]);
        px_check_int(px_cmd(c, "PTTL s"), -1);
    }
    redisFree(c);
}

Test(it_gcra_lua, binary_key_is_limited_like_any_other, .init = it_init,
     .fini = px_env_fini, .timeout = 60)
{
    static const char key[] = "\xff\xfe\x00gcra\x80{\xc0}";
    const size_t keylen = sizeof(key) - 1;
    redisContext *c = lua_gcra_connect();
    struct gcra_params p = lua_gcra_params(1, 1, 60, 1);
    static const int64_t r1[5] = { 0, 2, 1, -1, 60 };
    static const int64_t r2[5] = { 0, 2, 0, -1, 120 };
    struct gcra_result r;

    r = lua_gcra_check(c, key, keylen, &p, LUA_GCRA_CHECK, NULL, "first");
    lua_gcra_expect_ints(&r, r1, "first");
    r = lua_gcra_check(c, key, keylen, &p, LUA_GCRA_CHECK, NULL, "second");
    lua_gcra_expect_ints(&r, r2, "second");
    r = lua_gcra_check(c, key, keylen, &p, LUA_GCRA_CHECK, NULL, "third");
    cr_assert_eq(r.d.limited, 1);
    /* Only the binary key exists, under its exact bytes. */
    px_check_int(px_cmd(c, "DBSIZE"), 1);
    px_check_int(px_cmd(c, "EXISTS %b", key, keylen), 1);
    redisFree(c);
}

Test(it_gcra_lua, negative_quantity_is_refused_and_writes_nothing,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = lua_gcra_connect();
    const char *argv[6] = { "CL.THROTTLE", "q", "4", "1", "1", "-1" };
    size_t lens[6] = { 11, 1, 1, 1, 1, 2 };
    char err[GCRA_ERRBUF_LEN];
    struct gcra_params p;

    /* The proxy refuses it before any script call... */
    cr_assert_eq(gcra_parse_throttle(&p, 6, argv, lens, err, sizeof(err)),
                 GCRA_EARGS);
    cr_assert_str_eq(err, E_NEG_Q);
    /* ...and the script refuses a negative increment from anyone else. */
    px_check_status(px_cmd(c, "SET q 1700000000000000000 PX 5000"), "OK");
    px_check_error(px_cmd(c, "EVALSHA %s 1 q -1 0 5 0", scripts_gcra()->sha1),
                   E_NEG_Q);
    px_check_error(
        px_cmd(c, "EVALSHA %s 1 fresh -1 0 5 0", scripts_gcra()->sha1),
        E_NEG_Q);
    px_check_str(px_cmd(c, "GET q"), "1700000000000000000");
    px_check_int(px_cmd(c, "EXISTS fresh"), 0);
    redisFree(c);
}

Test(it_gcra_lua, tat_that_would_overflow_gives_the_range_error,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = lua_gcra_connect();
    struct gcra_params p = lua_gcra_params(4, 1, 1, 1);
    struct gcra_result r;
    const char *err = NULL;

    px_check_status(px_cmd(c, "SET big 9223372036854775807"), "OK");
    px_check_error(lua_gcra_send(c, "big", 3, &p, LUA_GCRA_CHECK), E_TAT_RANGE);
    px_check_str(px_cmd(c, "GET big"), "9223372036854775807");
    /* In a batch, flag -2, for INT64_MAX and for the largest TAT past
     * which INC does not fit (INC is 1 s here). */
    static const char *const over[] = { "9223372036854775807",
                                        "9223372035854775808" };
    for (int i = 0; i < 2; i++) {
        const redisReply *raw;
        px_check_status(px_cmd(c, "SET big %s", over[i]), "OK");
        redisReply *e = lua_gcra_send(c, "big", 3, &p, LUA_GCRA_RUNS);
        cr_assert_eq(lua_gcra_runs_flag(e, &raw, over[i]), -2, "%s", over[i]);
        freeReplyObject(e);
        px_check_str(px_cmd(c, "GET big"), over[i]);
    }
    /* The model agrees. */
    cr_assert_eq(gcra_decide(&p, 1, INT64_MAX, wall_ns(), &r, &err),
                 GCRA_ERANGE);
    cr_assert_str_eq(err, E_TAT_RANGE);
    /* The largest TAT that still fits is decided, and refused. */
    px_check_status(px_cmd(c, "SET big 9223372035854775807"), "OK");
    r = lua_gcra_check(c, "big", 3, &p, LUA_GCRA_CHECK, NULL, "largest");
    cr_assert_eq(r.d.limited, 1);
    r = lua_gcra_check(c, "big", 3, &p, LUA_GCRA_RUNS, NULL, "largest, runs");
    cr_assert_eq(r.d.limited, 1);
    redisFree(c);
}

Test(it_gcra_lua, expiry_under_one_ms_deletes_the_key, .init = it_init,
     .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = lua_gcra_connect();
    struct gcra_params p = lua_gcra_params(0, 4000, 1, 1); /* EI 250 us */
    struct gcra_result r;

    px_check_status(px_cmd(c, "SET d 5"), "OK"); /* a TAT long past */
    r = lua_gcra_check(c, "d", 1, &p, LUA_GCRA_CHECK, NULL, "sub-ms");
    cr_assert_eq(r.d.limited, 0);
    cr_assert_eq(r.write, GCRA_WRITE_DEL);
    px_check_int(px_cmd(c, "EXISTS d"), 0);
    px_check_status(px_cmd(c, "SET d 5"), "OK");
    r = lua_gcra_check(c, "d", 1, &p, LUA_GCRA_RUNS, NULL, "sub-ms, runs");
    cr_assert_eq(r.write, GCRA_WRITE_DEL);
    px_check_int(px_cmd(c, "EXISTS d"), 0);
    redisFree(c);
}

/* ---------------- Mode "runs": the proxy's batches ---------------- */

/* Asserts a "runs" reply's flags and which keys had a TAT, as
 * lua_twin_runs_text() writes them. Borrows r. */
static void expect_runs(const redisReply *r, size_t n, const char *want,
                        const char *ctx)
{
    char got[128];

    cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s: reply type %d \"%s\"", ctx,
                 r->type, r->type == REDIS_REPLY_ERROR ? r->str : "");
    cr_assert_eq(r->elements, 3 + n + (n + 47) / 48, "%s: elements", ctx);
    lua_twin_runs_text(r, n, got, sizeof(got));
    cr_assert_str_eq(got, want, "%s", ctx);
}

Test(it_gcra_lua, runs_decide_each_key_in_turn_under_its_own_limit,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = lua_gcra_connect();
    const char *sha = scripts_gcra()->sha1;
    redisReply *r;

    /* Run 1: a b a under burst 1 (INC 2 s, DVT 4 s); run 2: a c under
     * burst 0 (DVT 2 s). The second a admits from the first one's TAT,
     * the third is refused by it. */
    r = px_cmd(c, "EVALSHA %s 5 a b a a c runs 2 3 2 0 4 0 2 2 0 2 0", sha);
    expect_runs(r, 5, "-0 -0 +0 +1 -0 ", "declared");
    /* a holds now + 4 s exactly, by the node's clock the reply gave. */
    char want[2 * INT64_DIGITS];
    snprintf(want, sizeof(want), "%lld%09lld", r->element[1]->integer + 4,
             r->element[2]->integer * 1000);
    freeReplyObject(r);
    px_check_str(px_cmd(c, "GET a"), want);

    /* The same batch with its keys after the runs (none declared: a
     * cluster batch of several slots) decides the same on fresh keys. */
    r = px_cmd(c, "EVALSHA %s 0 runs 2 3 2 0 4 0 2 2 0 2 0 x y x x z", sha);
    expect_runs(r, 5, "-0 -0 +0 +1 -0 ", "undeclared");
    freeReplyObject(r);
    px_check_int(px_cmd(c, "DBSIZE"), 6);
    redisFree(c);
}

Test(it_gcra_lua, malformed_runs_are_refused_whole_and_write_nothing,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    static const char *const bad[] = {
        "1 k runs",                   /* no R */
        "1 k runs 0",                 /* no run */
        "1 k runs x 1 2 0 4 0",       /* R not a number */
        "1 k runs 2 1 2 0 4 0",       /* fewer runs than R */
        "1 k runs 1 0 2 0 4 0",       /* a run of no key */
        "1 k runs 1 2 2 0 4 0",       /* counts beyond the keys */
        "2 k l runs 1 1 2 0 4 0",     /* keys beyond the counts */
        "1 k runs 1 1 2 0 4",         /* a short run */
        "1 k runs 1 1 2 0 4 0 extra", /* arguments left over */
        "1 k runs 1 1 2 x 4 0",       /* a number that is none */
        "1 k runs 1 1 2 1000000000 4 0",
        "0 runs 1 2 2 0 4 0 k", /* undeclared: a key short */
    };
    redisContext *c = lua_gcra_connect();
    const char *sha = scripts_gcra()->sha1;

    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "EVALSHA %s %s", sha, bad[i]);
        redisReply *r = px_cmd(c, cmd);
        cr_assert_eq(r->type, REDIS_REPLY_ERROR, "\"%s\" accepted", bad[i]);
        cr_assert_str_eq(r->str,
                         "ERR gcra script arguments are inc_s inc_ns dvt_s "
                         "dvt_ns",
                         "\"%s\"", bad[i]);
        freeReplyObject(r);
    }
    /* A negative INC has redis-cell's error, and nothing is written. */
    px_check_error(
        px_cmd(c, "EVALSHA %s 2 k l runs 2 1 2 0 4 0 1 -2 0 4 0", sha),
        E_NEG_Q);
    px_check_int(px_cmd(c, "DBSIZE"), 0);
    redisFree(c);
}
