/* algorithms/lua/leaky_bucket.lua (through limiter.lua) against the C
 * model algorithms/leaky_bucket.c, on a real redis-server.
 *
 * The test keeps the model's state itself: every check's reply must equal
 * leaky_bucket_decide() fed with that state at the same now (the script's
 * explicit clock, us * 1000 ns), and afterwards the HASH must hold exactly
 * the model's next state (in us) when the model writes, or be untouched.
 * Each check runs in MULTI with PTTL, HGETALL and PERSIST: the reads see
 * exactly what the script left (PTTL within the model's expiry minus the
 * wall time the transaction took), and the key never expires in wall
 * time, since the test's clock is simulated. A simulated expiry deletes
 * the key on both sides once the test's clock has passed it.
 *
 * Randomized sequences print their seed; PX_LUA_TWIN_SEED replays one. */
#include "tests/integration/fixture.h"
#include "tests/integration/lua_twin.h"
#include "tests/support/px_test.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/leaky_bucket.h"
#include "algorithms/rl.h"
#include "algorithms/scripts.h"

PX_TEST_SUITE(it_lua_leaky_bucket);

#define ALGO       "leaky_bucket"
#define SEED_ENV   "PX_LUA_TWIN_SEED"
#define MAX_N      LEAKY_BUCKET_MAX_COUNT
#define MAX_DRIP   LEAKY_BUCKET_MAX_DRIP_MS
#define US_MAX     INT64_C(9007199254740991) /* the script's latest time */
#define SAT_US     INT64_C(9223372036854775) /* floor(INT64_MAX ns / 1000) */
#define SAT_MS     INT64_C(9223372036855)    /* its expiry, ceil(... / 1e6) */
#define T0         INT64_C(1700000000000000) /* a realistic now, in us */
#define DAY_US     INT64_C(86400000000)
#define SEQUENCES  12 /* randomized sequences per run */
#define OPS        30 /* operations in each */
#define DIGITS     24 /* an int64 in decimal, sign and NUL */
#define ERR_BYTES  256
#define CTX_BYTES  160
#define READ_STATE "HGETALL %s"

#define E_WRONGTYPE                                                            \
    "WRONGTYPE Operation against a key holding the wrong kind of value"

static void it_init(void)
{
    px_redis_start(&px_env()->redis, NULL);
}

/* ---------------- Parameters and the model ---------------- */

/* One limit's parameters, as numbers, as the script's strings, and as the
 * model's. */
struct conf {
    int64_t size, drip_ms, drip_size;
    char s[3][DIGITS];
    const char *v[4]; /* the four parameter strings of the script */
    struct leaky_bucket_params p;
};

static void conf_set(struct conf *cf, int64_t size, int64_t drip_ms,
                     int64_t drip_size)
{
    const char *err = NULL;

    cf->size = size;
    cf->drip_ms = drip_ms;
    cf->drip_size = drip_size;
    snprintf(cf->s[0], DIGITS, "%" PRId64, size);
    snprintf(cf->s[1], DIGITS, "%" PRId64, drip_ms);
    snprintf(cf->s[2], DIGITS, "%" PRId64, drip_size);
    cf->v[0] = cf->s[0];
    cf->v[1] = cf->s[1];
    cf->v[2] = cf->s[2];
    cf->v[3] = NULL;
    cr_assert_eq(
        leaky_bucket_params_init(&cf->p, size, drip_ms, drip_size, &err),
        LEAKY_BUCKET_OK, "params: %s", err);
}

/* The state the test carries for the key (what Redis must hold). */
struct model {
    int have;                     /* the key exists */
    struct leaky_bucket_state st; /* its fields, ns */
    int64_t deadline_us;          /* the expiry of the last write */
};

static struct leaky_bucket_result model_at(const struct conf *cf,
                                           const struct model *m, int64_t now,
                                           int64_t cost, const char *ctx)
{
    struct leaky_bucket_result r;
    const char *err = NULL;

    cr_assert_eq(leaky_bucket_decide(&cf->p, m->have ? &m->st : NULL,
                                     now * 1000, cost, &r, &err),
                 LEAKY_BUCKET_OK, "%s: model: %s", ctx, err);
    return r;
}

/* ---------------- Script calls ---------------- */

/* A peek (or any mode) through lua_twin_call; asserts it succeeded. */
static void call_plain(redisContext *c, const char *mode, const char *key,
                       const struct conf *cf, int64_t now, int64_t cost,
                       const char *undo, struct lua_twin_out *o,
                       const char *ctx)
{
    char err[ERR_BYTES];

    cr_assert_eq(lua_twin_call(c, mode, key, ALGO, cf->v, now, cost, undo, o,
                               err, sizeof(err)),
                 0, "%s: %s %s", ctx, mode, err);
    cr_assert_eq(o->now_us, now, "%s: the script's clock", ctx);
}

/* ---------------- The stored state ---------------- */

/* An HGETALL reply as the model's state: returns whether the key exists;
 * asserts it holds exactly level and ts, decimal integers. */
static int parse_state(const redisReply *r, struct leaky_bucket_state *st,
                       const char *ctx)
{
    int seen = 0;

    memset(st, 0, sizeof(*st));
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s: HGETALL", ctx);
    if (r->elements == 0) {
        return 0;
    }
    cr_assert_eq(r->elements, 4, "%s: fields of the HASH", ctx);
    for (size_t i = 0; i < r->elements; i += 2) {
        const char *f = r->element[i]->str;
        int64_t v = lua_twin_reply_int(r->element[i + 1], ctx);

        if (strcmp(f, "level") == 0) {
            st->level = v;
            seen |= 1;
        } else if (strcmp(f, "ts") == 0) {
            st->ts_ns = v * 1000;
            seen |= 2;
        }
    }
    cr_assert_eq(seen, 3, "%s: level and ts", ctx);
    return 1;
}

/* Reads the key into a state. */
static int read_state(redisContext *c, const char *key,
                      struct leaky_bucket_state *st, const char *ctx)
{
    redisReply *r = px_cmd(c, "HGETALL %s", key);
    int have = parse_state(r, st, ctx);

    freeReplyObject(r);
    return have;
}

/* Asserts the HGETALL reply equals the model's state. */
static void expect_state(const redisReply *r, const struct model *m,
                         const char *ctx)
{
    struct leaky_bucket_state st;
    int have = parse_state(r, &st, ctx);

    cr_assert_eq(have, m->have, "%s: key exists %d, model %d", ctx, have,
                 m->have);
    if (have) {
        cr_assert(st.level == m->st.level && st.ts_ns == m->st.ts_ns,
                  "%s: stored level %" PRId64 " ts %" PRId64
                  " ns, model %" PRId64 " %" PRId64,
                  ctx, st.level, st.ts_ns, m->st.level, m->st.ts_ns);
    }
}

/* ---------------- One checked call ---------------- */

/* Tallies of a randomized run: which branches it reached. */
struct tally {
    long calls, limited, writes, peeks, refunds, expiries, changes;
};

/* A check compared with the model as the file header says; updates the
 * model. Returns the model's result; the twin's entry is in *o. */
static struct leaky_bucket_result check(redisContext *c, const char *key,
                                        const struct conf *cf, struct model *m,
                                        int64_t now, int64_t cost,
                                        struct lua_twin_out *o, const char *ctx)
{
    struct leaky_bucket_result want = model_at(cf, m, now, cost, ctx);
    struct lua_twin_txn k;
    char tok[DIGITS];

    lua_twin_call_multi(c, "check", key, ALGO, cf->v, now, cost, NULL,
                        READ_STATE, &k, ctx);
    cr_assert(!k.failed, "%s: %s", ctx, k.err);
    cr_assert_eq(k.out.now_us, now, "%s: the script's clock", ctx);
    lua_twin_expect(&k.out, &want.d, ctx);
    if (want.write == LEAKY_BUCKET_WRITE_SET) {
        m->have = 1;
        m->st = want.next;
        m->deadline_us = now + want.expiry_ms * 1000;
        if (lua_twin_expired(&k, want.expiry_ms, ctx)) {
            m->have = 0; /* real time took it: gone on both sides */
        } else {
            cr_assert(k.pttl <= want.expiry_ms &&
                          k.pttl >= want.expiry_ms - k.elapsed_ms,
                      "%s: PTTL %lld, expiry %" PRId64 " ms, %lld ms elapsed",
                      ctx, k.pttl, want.expiry_ms, k.elapsed_ms);
        }
        snprintf(tok, sizeof(tok), "%" PRId64, want.next.ts_ns / 1000);
        cr_assert_str_eq(k.out.undo, tok, "%s: undo token", ctx);
    } else {
        cr_assert_eq(k.pttl, m->have ? -1 : -2, "%s: PTTL after no write", ctx);
        cr_assert_str_eq(k.out.undo, "", "%s: undo without a write", ctx);
    }
    expect_state(k.state, m, ctx);
    *o = k.out;
    freeReplyObject(k.exec);
    return want;
}

/* A peek: the model's decision, and nothing written (the state and its
 * absent TTL unchanged). */
static void peek(redisContext *c, const char *key, const struct conf *cf,
                 const struct model *m, int64_t now, int64_t cost,
                 const char *ctx)
{
    struct leaky_bucket_result want = model_at(cf, m, now, cost, ctx);
    struct lua_twin_out o;
    struct model back = *m;

    call_plain(c, "peek", key, cf, now, cost, NULL, &o, ctx);
    lua_twin_expect(&o, &want.d, ctx);
    cr_assert_eq(lua_twin_pttl(c, key), m->have ? -1 : -2, "%s: peek TTL", ctx);
    back.have = read_state(c, key, &back.st, ctx);
    cr_assert(back.have == m->have &&
                  (!m->have || (back.st.level == m->st.level &&
                                back.st.ts_ns == m->st.ts_ns)),
              "%s: peek wrote", ctx);
}

/* Peek, check, refund, peek at one now: when the check admitted, the
 * refund must restore its decisions (the twin's two peeks agree, and the
 * model decides alike from the state before the check and from the state
 * the refund left, now and later). The model then carries the refunded
 * state. Returns 1 when a refund ran. */
static int refund_cycle(redisContext *c, const char *key, const struct conf *cf,
                        struct model *m, int64_t now, int64_t cost,
                        int64_t later, const char *ctx)
{
    struct model pre = *m;
    struct lua_twin_out before, after, o;
    struct leaky_bucket_result r;
    struct lua_twin_txn k;

    call_plain(c, "peek", key, cf, now, cost, NULL, &before, ctx);
    r = check(c, key, cf, m, now, cost, &o, ctx);
    if (r.d.limited || cost == 0 ||
        (r.write == LEAKY_BUCKET_WRITE_SET && !m->have)) {
        return 0; /* refused, nothing taken, or real time took the key */
    }
    lua_twin_call_multi(c, "refund", key, ALGO, cf->v, now, cost, o.undo,
                        READ_STATE, &k, ctx);
    cr_assert(!k.failed, "%s: refund: %s", ctx, k.err);
    m->have = parse_state(k.state, &m->st, ctx);
    if (m->have) {
        /* The refund leaves the expiry of the bucket it left. */
        struct leaky_bucket_result z = model_at(cf, m, now, 0, ctx);
        int64_t ms = rl_ceil_ms(z.d.reset_after_ns);

        cr_assert(k.pttl <= ms && k.pttl >= ms - k.elapsed_ms,
                  "%s: PTTL %lld after refund, expiry %" PRId64, ctx, k.pttl,
                  ms);
    } else {
        cr_assert_eq(k.pttl, -2, "%s: PTTL of a deleted key", ctx);
    }
    freeReplyObject(k.exec);

    call_plain(c, "peek", key, cf, now, cost, NULL, &after, ctx);
    cr_assert(before.limited == after.limited &&
                  before.remaining == after.remaining &&
                  before.retry_us == after.retry_us &&
                  before.reset_us == after.reset_us,
              "%s: peek after refund [%d %" PRId64 " %" PRId64 " %" PRId64
              "], before check [%d %" PRId64 " %" PRId64 " %" PRId64 "]",
              ctx, after.limited, after.remaining, after.retry_us,
              after.reset_us, before.limited, before.remaining, before.retry_us,
              before.reset_us);
    r = model_at(cf, m, now, cost, ctx);
    lua_twin_expect(&after, &r.d, ctx);
    for (int64_t q = 0; q <= 1; q++) {
        int64_t when = q == 0 ? now : later;
        struct leaky_bucket_result a = model_at(cf, &pre, when, cost, ctx);
        struct leaky_bucket_result b = model_at(cf, m, when, cost, ctx);

        lua_twin_expect_same_decision(&a.d, &b.d, ctx);
    }
    return 1;
}

/* ---------------- Randomized sequences ---------------- */

/* Random parameters: small, ordinary and the maxima. */
static void rnd_conf(uint64_t *rs, struct conf *cf)
{
    static const int64_t sizes[] = { 1, 2, 3, 5, 10, 1000, MAX_N, 0 };
    static const int64_t drips[] = { 1, 2, 10, 1000, 60000, MAX_DRIP, 0 };
    int64_t size = lua_twin_pick(rs, sizes, sizeof(sizes) / sizeof(*sizes));
    int64_t drip = lua_twin_pick(rs, drips, sizeof(drips) / sizeof(*drips));
    int64_t ds;

    if (size == 0) {
        size = lua_twin_rnd_in(rs, 1, lua_twin_rnd_in(rs, 0, 1) ? 100 : MAX_N);
    }
    if (drip == 0) {
        drip =
            lua_twin_rnd_in(rs, 1, lua_twin_rnd_in(rs, 0, 1) ? 5000 : MAX_DRIP);
    }
    switch (lua_twin_rnd_in(rs, 0, 5)) {
    case 0:
        ds = size;
        break;
    case 1:
        ds = MAX_N;
        break;
    case 2:
        ds = lua_twin_rnd_in(rs, 1, MAX_N);
        break;
    default:
        ds = lua_twin_rnd_in(rs, 1, 3);
        break;
    }
    conf_set(cf, size, drip, ds);
}

/* A cost: 0, 1, exactly the size, above it, or anything up to it. */
static int64_t rnd_cost(uint64_t *rs, const struct conf *cf)
{
    switch (lua_twin_rnd_in(rs, 0, 9)) {
    case 0:
        return 0;
    case 1:
        return cf->size;
    case 2:
        return cf->size < MAX_N ? cf->size + 1 : MAX_N;
    case 3:
        return lua_twin_rnd_in(rs, 1, cf->size);
    default:
        return lua_twin_rnd_in(rs, 1, cf->size < 3 ? cf->size : 3);
    }
}

/* The next time: the same, a little later, exactly on a drip boundary of
 * the stored phase (or 1 us before), much later, years later, or back. */
static int64_t rnd_time(uint64_t *rs, int64_t now, int64_t unit, int64_t anchor)
{
    int64_t t = now;

    switch (lua_twin_rnd_in(rs, 0, 9)) {
    case 0:
        break;
    case 1:
    case 2: {
        int64_t k = lua_twin_rnd_in(rs, 1, 3);
        int64_t b = anchor <= now ? anchor + ((now - anchor) / unit + k) * unit
                                  : anchor + (k - 1) * unit;
        t = b - lua_twin_rnd_in(rs, 0, 1);
        break;
    }
    case 3:
        t = now + lua_twin_rnd_in(rs, unit, 20 * unit);
        break;
    case 4:
        t = now + lua_twin_rnd_in(rs, 1, 400) * DAY_US;
        break;
    case 5:
        t = now - lua_twin_rnd_in(rs, 1, 2 * unit);
        break;
    default:
        t = now + lua_twin_rnd_in(rs, 0, unit / 2 + 1);
        break;
    }
    if (t < 0 || t > US_MAX) {
        return now;
    }
    return t;
}

Test(it_lua_leaky_bucket, randomized_sequences_match_the_c_model,
     .init = it_init, .fini = px_env_fini, .timeout = 120)
{
    redisContext *c = lua_twin_connect();
    uint64_t seed = lua_twin_seed("it_lua_" ALGO, SEED_ENV), rs = seed | 1;
    struct tally n = { 0 };

    for (int seq = 0; seq < SEQUENCES; seq++) {
        static const int64_t starts[] = { T0, 5000000, US_MAX - DAY_US };
        struct model m = { 0 };
        struct conf cf;
        struct lua_twin_out o;
        char key[32];
        int64_t now =
            lua_twin_pick(&rs, starts, 3) + lua_twin_rnd_in(&rs, 0, 1000000);

        snprintf(key, sizeof(key), "lb:%d", seq);
        rnd_conf(&rs, &cf);
        for (int op = 0; op < OPS; op++) {
            char ctx[CTX_BYTES];
            int64_t kind = lua_twin_rnd_in(&rs, 0, 99),
                    cost = rnd_cost(&rs, &cf);
            int64_t unit = cf.drip_ms * 1000;

            now = rnd_time(&rs, now, unit, m.have ? m.st.ts_ns / 1000 : now);
            snprintf(ctx, sizeof(ctx),
                     SEED_ENV "=%llu seq %d op %d: size %s drip_ms %s "
                              "drip_size %s now %" PRId64 " cost %" PRId64,
                     (unsigned long long)seed, seq, op, cf.s[0], cf.s[1],
                     cf.s[2], now, cost);
            if (kind < 65) {
                struct leaky_bucket_result r =
                    check(c, key, &cf, &m, now, cost, &o, ctx);
                n.calls++;
                n.limited += r.d.limited;
                n.writes += r.write == LEAKY_BUCKET_WRITE_SET;
            } else if (kind < 77) {
                peek(c, key, &cf, &m, now, cost, ctx);
                n.peeks++;
            } else if (kind < 87) {
                /* Equal decisions from then on; before now, the drain
                 * the check stored differs. */
                int64_t later = now + lua_twin_rnd_in(&rs, 0, 3 * unit);

                n.refunds += refund_cycle(c, key, &cf, &m, now, cost,
                                          later <= US_MAX ? later : now, ctx);
            } else if (kind < 93) {
                /* Same key, other limits: the expiry written under the old
                 * ones no longer says when the bucket is empty. Half the
                 * time only drip_size changes: the script keeps the last
                 * parameters it parsed, and must see a change in any one. */
                if (lua_twin_rnd_in(&rs, 0, 1)) {
                    rnd_conf(&rs, &cf);
                } else {
                    conf_set(&cf, cf.size, cf.drip_ms,
                             cf.drip_size == 1 ? 2 : 1);
                }
                m.deadline_us = INT64_MAX;
                n.changes++;
            } else if (m.have && now >= m.deadline_us) {
                /* The key would have expired by now: gone on both sides,
                 * and the model must not care. */
                struct model none = { 0 };
                struct leaky_bucket_result a = model_at(&cf, &m, now, 1, ctx);
                struct leaky_bucket_result b =
                    model_at(&cf, &none, now, 1, ctx);

                lua_twin_expect_same_decision(&a.d, &b.d, ctx);
                px_check_int(px_cmd(c, "DEL %s", key), 1);
                m.have = 0;
                n.expiries++;
            }
        }
    }
    fprintf(stderr,
            "it_lua_" ALGO ": %ld checks (%ld limited, %ld writes), %ld "
            "peeks, %ld refunds, %ld expiries, %ld changes\n",
            n.calls, n.limited, n.writes, n.peeks, n.refunds, n.expiries,
            n.changes);
    cr_assert_gt(n.limited, 0);
    cr_assert_gt(n.calls - n.limited, 0);
    cr_assert_gt(n.writes, 0);
    cr_assert_gt(n.peeks, 0);
    cr_assert_gt(n.refunds, 0);
    redisFree(c);
}

/* ---------------- Large numbers ---------------- */

/* Replaces the key with a HASH of the given fields (us) and returns the
 * model's state for it. */
static struct model plant(redisContext *c, const char *key, int64_t level,
                          int64_t ts_us)
{
    struct model m = { .have = 1, .st = { level, ts_us * 1000 } };

    freeReplyObject(px_cmd(c, "DEL %s", key));
    px_check_int(
        px_cmd(c, "HSET %s level %" PRId64 " ts %" PRId64, key, level, ts_us),
        2);
    return m;
}

/* The reply type of the entry's reset (4) or retry (3) element. */
static int entry_type(const struct lua_twin_txn *k, size_t i)
{
    return k->entry->element[i]->type;
}

Test(it_lua_leaky_bucket, durations_past_2_53_us_are_exact_text_then_saturate,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = lua_twin_connect();
    struct conf cf;
    struct model m;
    struct lua_twin_out o;
    struct lua_twin_txn k;
    struct leaky_bucket_result r;

    /* 9007199254741 drips of 1 ms, 8 us into the phase: exactly 2^53 us,
     * then 1 us less. */
    conf_set(&cf, MAX_N, 1, 1);
    m = plant(c, "k", INT64_C(9007199254741), T0);
    r = check(c, "k", &cf, &m, T0 + 8, 0, &o, "2^53");
    cr_assert_eq(o.reset_us, INT64_C(9007199254740992));
    lua_twin_call_multi(c, "peek", "k", ALGO, cf.v, T0 + 8, 0, NULL, READ_STATE,
                        &k, "2^53 type");
    cr_assert_eq(entry_type(&k, 4), REDIS_REPLY_STRING);
    cr_assert_str_eq(k.entry->element[4]->str, "9007199254740992");
    freeReplyObject(k.exec);
    lua_twin_call_multi(c, "peek", "k", ALGO, cf.v, T0 + 9, 0, NULL, READ_STATE,
                        &k, "2^53 - 1 type");
    cr_assert_eq(entry_type(&k, 4), REDIS_REPLY_INTEGER);
    cr_assert_eq(k.entry->element[4]->integer, INT64_C(9007199254740991));
    freeReplyObject(k.exec);
    /* A refused cost of the whole size waits for every drip: past 2^53. */
    r = check(c, "k", &cf, &m, T0 + 8, MAX_N, &o, "2^53 retry");
    cr_assert(r.d.limited);
    cr_assert_eq(o.retry_us, INT64_C(9007199254740992));

    /* The longest drip and 2^53 - 1 of them: the C model saturates at
     * INT64_MAX ns, the twin sends its floor in us, and the expiry is the
     * saturated one. */
    conf_set(&cf, MAX_N, MAX_DRIP, 1);
    freeReplyObject(px_cmd(c, "DEL %s", "k"));
    m.have = 0;
    r = check(c, "k", &cf, &m, T0, MAX_N, &o, "saturated reset");
    cr_assert_eq(r.d.reset_after_ns, INT64_MAX);
    cr_assert_eq(r.expiry_ms, SAT_MS);
    cr_assert_eq(o.reset_us, SAT_US);
    r = check(c, "k", &cf, &m, T0 + 5, 1, &o, "one drip");
    cr_assert_eq(o.retry_us, MAX_DRIP * 1000 - 5);
    lua_twin_call_multi(c, "peek", "k", ALGO, cf.v, T0 + 5, MAX_N, NULL,
                        READ_STATE, &k, "saturated");
    cr_assert_eq(entry_type(&k, 3), REDIS_REPLY_STRING);
    cr_assert_str_eq(k.entry->element[3]->str, "9223372036854775");
    cr_assert_str_eq(k.entry->element[4]->str, "9223372036854775");
    freeReplyObject(k.exec);
    r = model_at(&cf, &m, T0 + 5, MAX_N, "saturated retry");
    cr_assert_eq(r.d.retry_after_ns, INT64_MAX);

    /* The exact edge: 9223372036854 drips of 1 ms are 9223372036854 ms,
     * and INT64_MAX ns leaves 775 us more. 775 us of phase ahead of now
     * fit; 776 us saturate (one us less, in the floor); with one drip
     * more, the product alone saturates, even with the phase behind. */
    conf_set(&cf, MAX_N, 1, 1);
    m = plant(c, "k", INT64_C(9223372036854), T0 + 775);
    r = check(c, "k", &cf, &m, T0, 0, &o, "edge fits");
    cr_assert_eq(r.d.reset_after_ns, INT64_C(9223372036854775000));
    cr_assert_eq(o.reset_us, SAT_US);
    m = plant(c, "k", INT64_C(9223372036854), T0 + 776);
    r = check(c, "k", &cf, &m, T0, 0, &o, "edge saturates");
    cr_assert_eq(r.d.reset_after_ns, INT64_MAX);
    cr_assert_eq(o.reset_us, SAT_US);
    m = plant(c, "k", INT64_C(9223372036855), T0 - 500);
    r = check(c, "k", &cf, &m, T0, 0, &o, "product saturates");
    cr_assert_eq(r.d.reset_after_ns, INT64_MAX);
    cr_assert_eq(o.reset_us, SAT_US);

    /* Near the end of the script's clock: ts - now + k * drip passes
     * INT64_MAX ns only through the sum. */
    conf_set(&cf, 1000, MAX_DRIP, 1);
    m = plant(c, "k", 29, US_MAX - 1);
    r = check(c, "k", &cf, &m, 0, 0, &o, "clock far behind");
    cr_assert_eq(r.d.reset_after_ns, INT64_MAX);
    cr_assert_eq(o.reset_us, SAT_US);
    r = check(c, "k", &cf, &m, US_MAX, 0, &o, "clock at the end");
    cr_assert_eq(o.reset_us, 29 * MAX_DRIP * 1000 - 1);
    redisFree(c);
}

/* ---------------- Peeks and refunds ---------------- */

Test(it_lua_leaky_bucket, peek_writes_nothing, .init = it_init,
     .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = lua_twin_connect();
    struct conf cf;
    struct model m = { 0 };
    struct lua_twin_out o;
    long long ttl;
    struct leaky_bucket_state st;

    conf_set(&cf, 3, 1000, 1);
    /* A missing key stays missing, whatever the cost. */
    for (int64_t cost = 0; cost <= 4; cost++) {
        peek(c, "k", &cf, &m, T0, cost, "peek missing");
    }
    /* A stored bucket, with its TTL: untouched by peeks that would pass,
     * be refused, or drain it. */
    call_plain(c, "check", "k", &cf, T0, 2, NULL, &o, "fill");
    ttl = lua_twin_pttl(c, "k");
    cr_assert(ttl > 0 && ttl <= 2000, "PTTL %lld", ttl);
    for (int64_t cost = 0; cost <= 4; cost++) {
        call_plain(c, "peek", "k", &cf, T0 + 1500000, cost, NULL, &o, "peek");
        cr_assert(read_state(c, "k", &st, "peek"));
        cr_assert(st.level == 2 && st.ts_ns == T0 * 1000, "peek wrote");
        cr_assert_leq(lua_twin_pttl(c, "k"), ttl, "peek set a TTL");
    }
    redisFree(c);
}

/* A refund through lua_twin_call; asserts it succeeded. */
static void refund(redisContext *c, const char *key, const struct conf *cf,
                   int64_t now, int64_t cost, const char *undo)
{
    struct lua_twin_out o;

    call_plain(c, "refund", key, cf, now, cost, undo, &o, "refund");
}

Test(it_lua_leaky_bucket, refund_restores_then_is_a_no_op_once_moved_on,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = lua_twin_connect();
    struct conf cf;
    struct model m = { 0 };
    struct lua_twin_out o, first;
    struct leaky_bucket_state st;

    conf_set(&cf, 5, 1000, 1);
    /* The whole bucket back: the key goes. */
    check(c, "k", &cf, &m, T0, 2, &o, "check 2");
    refund(c, "k", &cf, T0 + 300000, 2, o.undo);
    px_check_int(px_cmd(c, "EXISTS k"), 0);

    /* Part of it back, after a drip fell: 3 + 1 - 1 drip - 1 = 2 left. */
    m.have = 0;
    check(c, "k", &cf, &m, T0, 3, &o, "check 3");
    cr_assert_str_eq(o.undo, "1700000000000000");
    check(c, "k", &cf, &m, T0 + 1000000, 1, &first, "check 1 later");
    refund(c, "k", &cf, T0 + 1500000, 1, first.undo);
    cr_assert(read_state(c, "k", &st, "partial"));
    cr_assert(st.level == 2 && st.ts_ns == (T0 + 1000000) * 1000,
              "level %" PRId64 " ts %" PRId64, st.level, st.ts_ns);
    /* An older token of the same phase still counts. */
    refund(c, "k", &cf, T0 + 1500000, 1, o.undo);
    cr_assert(read_state(c, "k", &st, "same phase"));
    cr_assert_eq(st.level, 1);
    cr_assert_leq(lua_twin_pttl(c, "k"), 500);

    /* The bucket emptied and restarted in another phase: a no-op. */
    freeReplyObject(px_cmd(c, "DEL %s", "k"));
    m.have = 0;
    check(c, "k", &cf, &m, T0, 2, &o, "old bucket");
    check(c, "k", &cf, &m, T0 + 10500000, 1, &first, "new bucket");
    refund(c, "k", &cf, T0 + 10600000, 2, o.undo);
    cr_assert(read_state(c, "k", &st, "moved on"));
    cr_assert(st.level == 1 && st.ts_ns == (T0 + 10500000) * 1000);
    /* Cost 0, an empty or malformed token: no-ops. */
    refund(c, "k", &cf, T0 + 10600000, 0, first.undo);
    refund(c, "k", &cf, T0 + 10600000, 1, "");
    refund(c, "k", &cf, T0 + 10600000, 1, "x");
    cr_assert(read_state(c, "k", &st, "no-ops"));
    cr_assert_eq(st.level, 1);
    /* An expired key stays missing. */
    freeReplyObject(px_cmd(c, "DEL %s", "k"));
    refund(c, "k", &cf, T0 + 10600000, 1, first.undo);
    px_check_int(px_cmd(c, "EXISTS k"), 0);
    /* A key of another type is left alone, without an error. */
    px_check_status(px_cmd(c, "SET k v"), "OK");
    refund(c, "k", &cf, T0 + 10600000, 1, first.undo);
    px_check_str(px_cmd(c, "GET k"), "v");
    redisFree(c);
}

/* ---------------- Errors ---------------- */

/* Bad parameters and the C model's text for them. */
struct bad_case {
    const char *p[3];
    const char *err;
};

static const struct bad_case BAD[] = {
    { { "0", "1000", "1" }, LEAKY_BUCKET_ERR_SIZE },
    { { "-1", "1000", "1" }, LEAKY_BUCKET_ERR_SIZE },
    { { "9007199254740992", "1000", "1" }, LEAKY_BUCKET_ERR_SIZE },
    { { "", "1000", "1" }, LEAKY_BUCKET_ERR_SIZE },
    { { "1.5", "1000", "1" }, LEAKY_BUCKET_ERR_SIZE },
    { { "0", "0", "0" }, LEAKY_BUCKET_ERR_SIZE },
    { { "10", "0", "1" }, LEAKY_BUCKET_ERR_DRIP_MS },
    { { "10", "315360000001", "1" }, LEAKY_BUCKET_ERR_DRIP_MS },
    { { "10", "1e3", "1" }, LEAKY_BUCKET_ERR_DRIP_MS },
    { { "10", "1000", "0" }, LEAKY_BUCKET_ERR_DRIP_SIZE },
    { { "10", "1000", "9007199254740992" }, LEAKY_BUCKET_ERR_DRIP_SIZE },
    { { "10", "1000", "" }, LEAKY_BUCKET_ERR_DRIP_SIZE },
};

Test(it_lua_leaky_bucket, bad_parameters_give_the_c_model_errors,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = lua_twin_connect();

    for (size_t i = 0; i < sizeof(BAD) / sizeof(*BAD); i++) {
        const struct bad_case *b = &BAD[i];
        const char *v[4] = { b->p[0], b->p[1], b->p[2], NULL };
        char err[ERR_BYTES], want[ERR_BYTES];
        struct lua_twin_out o;
        int64_t n[3];

        snprintf(want, sizeof(want), "ERR %s", b->err);
        if (lua_twin_dec(b->p[0], &n[0]) && lua_twin_dec(b->p[1], &n[1]) &&
            lua_twin_dec(b->p[2], &n[2])) {
            struct leaky_bucket_params p;
            const char *cerr = NULL;

            cr_assert_eq(leaky_bucket_params_init(&p, n[0], n[1], n[2], &cerr),
                         LEAKY_BUCKET_EARGS, "case %zu", i);
            cr_assert_str_eq(cerr, b->err, "case %zu: the model's text", i);
        }
        for (int mode = 0; mode < 2; mode++) {
            cr_assert_eq(lua_twin_call(c, mode ? "peek" : "check", "k", ALGO, v,
                                       T0, 1, NULL, &o, err, sizeof(err)),
                         -1, "case %zu: no error", i);
            cr_assert_str_eq(err, want, "case %zu", i);
        }
        /* A refund with them does nothing, without an error. */
        cr_assert_eq(lua_twin_call(c, "refund", "k", ALGO, v, T0, 1, "1", &o,
                                   err, sizeof(err)),
                     0, "case %zu: %s", i, err);
        px_check_int(px_cmd(c, "EXISTS k"), 0);
    }
    redisFree(c);
}

Test(it_lua_leaky_bucket, wrong_type_and_malformed_state_are_errors,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    static const char *const fields[][4] = {
        { "level", "-1", "ts", "5" },
        { "level", "3", "ts", "-5" },
        { "level", "abc", "ts", "5" },
        { "level", "3", "ts", "5.5" },
        { "level", "9007199254740992", "ts", "5" },
        { "level", "3", "other", "5" },
    };
    redisContext *c = lua_twin_connect();
    struct conf cf;
    struct lua_twin_out o;
    char err[ERR_BYTES];
    struct leaky_bucket_state bad = { -1, 5000 };
    struct leaky_bucket_result r;
    const char *cerr = NULL;

    conf_set(&cf, 5, 1000, 1);
    px_check_status(px_cmd(c, "SET k v"), "OK");
    for (int mode = 0; mode < 2; mode++) {
        cr_assert_eq(lua_twin_call(c, mode ? "peek" : "check", "k", ALGO, cf.v,
                                   T0, 1, NULL, &o, err, sizeof(err)),
                     -1);
        cr_assert_str_eq(err, E_WRONGTYPE);
    }
    px_check_str(px_cmd(c, "GET k"), "v");
    px_check_int(px_cmd(c, "ZADD z 1 m"), 1);
    cr_assert_eq(lua_twin_call(c, "check", "z", ALGO, cf.v, T0, 1, NULL, &o,
                               err, sizeof(err)),
                 -1);
    cr_assert_str_eq(err, E_WRONGTYPE);

    /* The model refuses a negative field with the same text. */
    cr_assert_eq(leaky_bucket_decide(&cf.p, &bad, T0 * 1000, 1, &r, &cerr),
                 LEAKY_BUCKET_ESTATE);
    for (size_t i = 0; i < sizeof(fields) / sizeof(*fields); i++) {
        char want[ERR_BYTES];

        snprintf(want, sizeof(want), "ERR %s", cerr);
        freeReplyObject(px_cmd(c, "DEL %s", "h"));
        px_check_int(px_cmd(c, "HSET h %s %s %s %s", fields[i][0], fields[i][1],
                            fields[i][2], fields[i][3]),
                     2);
        for (int mode = 0; mode < 2; mode++) {
            cr_assert_eq(lua_twin_call(c, mode ? "peek" : "check", "h", ALGO,
                                       cf.v, T0, 1, NULL, &o, err, sizeof(err)),
                         -1, "case %zu", i);
            cr_assert_str_eq(err, want, "case %zu", i);
        }
        /* Nothing written: the fields are as planted, with no TTL. */
        px_check_str(px_cmd(c, "HGET h %s", fields[i][0]), fields[i][1]);
        px_check_str(px_cmd(c, "HGET h %s", fields[i][2]), fields[i][3]);
        px_check_int(px_cmd(c, "PTTL h"), -1);
    }
    redisFree(c);
}
