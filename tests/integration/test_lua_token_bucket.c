/* algorithms/lua/token_bucket.lua (through limiter.lua) against the C model
 * algorithms/token_bucket.c, on a real redis-server, through the shared
 * driver of twin_walk.h: the descriptor, the walk, and tables of edges.
 * The state is a HASH of tokens, frac (1e-15 tokens) and ts (us). Also
 * here: the exact integers of algorithms/lua/xint.lua, which the bucket's
 * refill needs. */
#include "tests/integration/fixture.h"
#include "tests/integration/twin_walk.h"
#include "tests/support/px_test.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "algorithms/token_bucket.h"

PX_TEST_SUITE(it_lua_token_bucket);

#define M     INT64_C(1000000) /* one token per second, in millionths */
#define ONE   TOKEN_BUCKET_FRAC_ONE
#define CAP   TOKEN_BUCKET_MAX_CAPACITY
#define INF   TOKEN_BUCKET_RATE_INF
#define P(cf) ((struct token_bucket_params *)(cf)->p)

_Static_assert(sizeof(struct token_bucket_params) <= TWIN_PARAMS_BYTES,
               "params");

static const struct twin_algo TB;

static void it_init(void)
{
    px_redis_start(&px_env()->redis, NULL);
}

/* ---------------- The descriptor ---------------- */

static int tb_parse(const redisReply *r, void *st, const char *ctx)
{
    static const char *const names[3] = { "tokens", "frac", "ts" };
    struct token_bucket_state *s = st;
    int64_t v[3];

    if (!twin_hash(r, names, 3, v, ctx)) {
        return 0;
    }
    s->tokens = v[0];
    s->frac = v[1];
    s->ts_ns = v[2] * 1000;
    return 1;
}

static void tb_same(const void *a, const void *b, const char *ctx)
{
    const struct token_bucket_state *x = a, *y = b;

    cr_assert(x->tokens == y->tokens && x->frac == y->frac &&
                  x->ts_ns == y->ts_ns,
              "%s: stored %" PRId64 " %" PRId64 " %" PRId64 ", model %" PRId64
              " %" PRId64 " %" PRId64,
              ctx, x->tokens, x->frac, x->ts_ns, y->tokens, y->frac, y->ts_ns);
}

static const char *tb_conf(struct twin_conf *cf, const int64_t n[3])
{
    const char *err = NULL;

    if (n[1] == INF) {
        snprintf(cf->s[1], sizeof(cf->s[1]), "inf");
    }
    return token_bucket_params_init(P(cf), n[0], n[1], &err) == TOKEN_BUCKET_OK
               ? NULL
               : err;
}

static void tb_decide(const struct twin_conf *cf, const void *st, int64_t now,
                      int64_t cost, struct twin_result *r, void *next)
{
    struct token_bucket_result x;
    const char *err = NULL;

    cr_assert_eq(token_bucket_decide_wait(P(cf), st, now * 1000, cost,
                                          lua_twin_wait() * 1000, &x, &err),
                 TOKEN_BUCKET_OK, "model: %s", err);
    cr_assert_eq(x.next.ts_ns % 1000, 0, "ts off the us grid");
    r->d = x.d;
    r->write = x.write == TOKEN_BUCKET_WRITE_SET;
    r->have_next = 1;
    r->expiry_ms = x.expiry_ms;
    /* The undo token is the instant the bucket is full again: the stored
     * ts plus the wait until full, rounded up; any decimal when that wait
     * saturated. */
    if (r->write && x.d.reset_after_ns == INT64_MAX) {
        r->undo_digits = 1;
    } else if (r->write) {
        int64_t gap = x.next.ts_ns - now * 1000;

        gap = gap > 0 ? gap : 0;
        snprintf(r->undo, sizeof(r->undo), "%" PRId64,
                 x.next.ts_ns / 1000 + (x.d.reset_after_ns - gap + 999) / 1000);
    }
    memcpy(next, &x.next, sizeof(x.next));
}

/* LIMITER ADJUST through the model (the hook's contract: twin_walk.h). */
static void tb_adjust(const struct twin_conf *cf, const void *st, int64_t now,
                      int64_t delta, struct twin_result *r, void *next)
{
    struct token_bucket_result x;
    const char *err = NULL;

    cr_assert_eq(token_bucket_adjust(P(cf), st, now * 1000, delta, &x, &err),
                 TOKEN_BUCKET_OK, "model: %s", err);
    r->d = x.d;
    r->write = x.write == TOKEN_BUCKET_WRITE_SET;
    r->have_next = r->write || st != NULL;
    r->expiry_ms = x.expiry_ms;
    memcpy(next, &x.next, sizeof(x.next));
}

/* Parameters from tiny to the conf maxima, now and then unlimited. */
static void tb_rnd_conf(uint64_t *s, struct twin_conf *cf,
                        const struct twin_conf *old)
{
    int64_t cap, rate;

    (void)old;
    switch (lua_twin_rnd_in(s, 0, 5)) {
    case 0:
        cap = 1;
        break;
    case 1:
        cap = CAP - lua_twin_rnd_in(s, 0, 1);
        break;
    case 2:
        cap = lua_twin_rnd_in(s, 1, INT64_C(1) << lua_twin_rnd_in(s, 20, 52));
        break;
    default:
        cap = lua_twin_rnd_in(s, 1, 50);
        break;
    }
    switch (lua_twin_rnd_in(s, 0, 7)) {
    case 0:
        rate = lua_twin_rnd_in(s, 1, 10); /* a token every ~10^5 s and slower */
        break;
    case 1:
        rate = TOKEN_BUCKET_MAX_RATE_MICRO - lua_twin_rnd_in(s, 0, 1);
        break;
    case 2:
        rate = lua_twin_rnd_in(s, 1, TOKEN_BUCKET_MAX_RATE_MICRO);
        break;
    case 3:
        rate = lua_twin_rnd_in(s, 0, 19) == 0 ? INF : 7 * M;
        break;
    default:
        rate = lua_twin_rnd_in(s, 1, 100) *
               (lua_twin_rnd_in(s, 0, 1) ? M : M / 10 + 7);
        break;
    }
    twin_conf_set(&TB, cf, cap, rate, 0);
}

static int64_t tb_rnd_cost(uint64_t *s, const struct twin_conf *cf)
{
    return lua_twin_rnd_cost(s, P(cf)->capacity);
}

/* No grid of its own: steps of seconds. */
static int64_t tb_unit(const struct twin_conf *cf)
{
    (void)cf;
    return 3 * TWIN_SEC;
}

/* Where the stored bucket is full again (or 1 us off). */
static int64_t tb_edge(uint64_t *s, const struct twin_key *k, int64_t now)
{
    int64_t edge = k->r.d.reset_after_ns;

    if (edge <= 0 || edge >= INT64_MAX / 2) {
        return -1;
    }
    return now + edge / 1000 + lua_twin_rnd_in(s, -1, 1);
}

/* A valid state in an unusual place: above capacity, a refill point in
 * the future or far in the past. */
static int tb_plant(uint64_t *s, struct twin_key *k, int64_t now)
{
    int64_t ts = lua_twin_rnd_in(s, 0, 2) == 0
                     ? now + lua_twin_rnd_in(s, 0, 100 * TWIN_SEC)
                     : lua_twin_rnd_in(s, 0, now);
    int64_t cap = P(&k->cf)->capacity, top = cap < CAP ? cap + 1 : CAP;
    int64_t tokens =
        lua_twin_rnd_in(s, 0, lua_twin_rnd_in(s, 0, 3) == 0 ? top : top - 1);
    int64_t deep = cap - TOKEN_BUCKET_MAX_CAPACITY; /* the deepest debt */

    if (lua_twin_rnd_in(s, 0, 3) == 0 && deep < 0) {
        /* A debt (LIMITER ADJUST, a WAIT reservation, a warm-up bucket
         * RELOADed as a plain one). */
        tokens = -lua_twin_rnd_in(s, 1, -deep < cap ? -deep : cap);
    }
    int64_t frac =
        lua_twin_rnd_in(s, 0, 3) == 0 ? 0 : lua_twin_rnd_in(s, 0, ONE - 1);

    freeReplyObject(px_cmd(k->c, "DEL %s", k->name));
    twin_plant(k, "HSET %%s tokens %" PRId64 " frac %" PRId64 " ts %" PRId64,
               tokens, frac, ts > TWIN_US_MAX ? TWIN_US_MAX : ts);
    return 1;
}

/* The refund leaves the state of before the check refilled to now (no
 * key when that is full), expiring when it is full. */
static int tb_after_refund(struct twin_key *k, const void *pre, int pre_have,
                           int64_t now, int64_t cost,
                           const struct lua_twin_txn *tx, const char *ctx)
{
    struct token_bucket_state want;
    int64_t expiry_ms;
    int full;

    (void)pre_have;
    (void)cost;
    twin_model(k, pre, now, 0);
    memcpy(&want, k->next, sizeof(want));
    full = want.tokens >= P(&k->cf)->capacity;
    expiry_ms = full ? rl_ceil_ms(want.ts_ns - now * 1000)
                     : rl_ceil_ms(k->r.d.reset_after_ns);
    if (!k->have) {
        /* Deleted as full, or gone in real time at its expiry. */
        return expiry_ms == 0 || !lua_twin_expired(tx, expiry_ms, ctx);
    }
    cr_assert(expiry_ms > 0, "%s: a full bucket stays", ctx);
    tb_same(k->st, &want, ctx);
    cr_assert(tx->pttl <= expiry_ms && tx->pttl >= expiry_ms - tx->elapsed_ms,
              "%s: PTTL %lld after the refund, expiry %" PRId64 " ms", ctx,
              tx->pttl, expiry_ms);
    return 1;
}

static const struct twin_algo TB = {
    .name = "token_bucket",
    .read_fmt = "HGETALL %s",
    .nparams = 2,
    .state_size = sizeof(struct token_bucket_state),
    .parse = tb_parse,
    .expect_same = tb_same,
    .conf = tb_conf,
    .decide = tb_decide,
    .state_error = TOKEN_BUCKET_ERR_STATE,
    .rnd_conf = tb_rnd_conf,
    .rnd_cost = tb_rnd_cost,
    .unit_us = tb_unit,
    .rnd_edge = tb_edge,
    .plant = tb_plant,
    .after_refund = tb_after_refund,
    .adjust = tb_adjust,
    .waits = 1,
};

/* ---------------- The walk and the tables ---------------- */

Test(it_lua_token_bucket, randomized_sequences_match_the_c_model,
     .init = it_init, .fini = px_env_fini, .timeout = 120)
{
    twin_walk(&TB, "it_lua_token_bucket");
}

Test(it_lua_token_bucket, peek_and_refusal_write_nothing, .init = it_init,
     .fini = px_env_fini, .timeout = 60)
{
    static const struct twin_row rows[] = {
        TWIN_SET(5, M, 0),
        /* No key: a peek and a refused check create none. */
        TWIN_CALL("peek", TWIN_T0, 3, "remaining 2"),
        TWIN_CALL("check", TWIN_T0, 6, "limited 1 exists 0"),
        /* A stored bucket with an expiry of our own: neither touches it
         * (a peek names what a check would do). */
        TWIN_CMD("HSET %s tokens 1 frac 5 ts 1700000000000000"),
        TWIN_CMD("PEXPIRE %s 900000"),
        TWIN_CALL("peek", TWIN_T0 + 1, 1, "limited 0 remaining 0"),
        TWIN_CALL("check", TWIN_T0 + 1, 4,
                  "limited 1 undo - field:tokens 1 field:frac 5 "
                  "pttl_min 800000"),
        /* Unlimited: admitted, nothing written either. */
        TWIN_SET(5, INF, 0),
        TWIN_CALL("check", TWIN_T0 + 1, 99,
                  "limited 0 remaining 5 field:tokens 1 pttl_min 800000"),
    };
    TWIN_ROWS(&TB, rows);
}

Test(it_lua_token_bucket, refund_gives_the_tokens_back, .init = it_init,
     .fini = px_env_fini, .timeout = 60)
{
    static const struct twin_row rows[] = {
        TWIN_SET(10, 1500000, 0), /* 1.5 tokens/s */
        /* From a full bucket: the refund leaves a full one, no key. */
        TWIN_CALL("peek", TWIN_T0, 4, "remaining 6 mark 1"),
        TWIN_CALL("check", TWIN_T0, 4, "remaining 6"),
        TWIN_REFUND(TWIN_T0, 4, NULL, "exists 0"),
        TWIN_CALL("peek", TWIN_T0, 4, "same 1"),
        /* From a partial bucket, later: the level comes back with its
         * fraction, and the key expires when that level is full again. */
        TWIN_CALL("check", TWIN_T0, 7, NULL),
        TWIN_CALL("peek", TWIN_T0 + 1234567, 2, "mark 1"),
        TWIN_CALL("check", TWIN_T0 + 1234567, 2, NULL),
        TWIN_REFUND(TWIN_T0 + 1234567, 2, NULL, NULL),
        TWIN_CALL("peek", TWIN_T0 + 1234567, 2, "same 1"),
        /* 4.85 tokens: full in 3.43 s, when the key expires. */
        TWIN_CALL("peek", TWIN_T0 + 1234567, 0,
                  "reset_us 3432099 pttl_max 3433 pttl_min 3333"),
        /* A second later, 1.5 tokens more. */
        TWIN_CALL("peek", TWIN_T0 + 2234567, 1, "remaining 5"),
        /* Full, but refilled up to a time ahead of the clock: the refund
         * keeps that time (it still differs from no key) until the clock
         * reaches it. */
        TWIN_CMD("DEL %s"),
        TWIN_CMD("HSET %s tokens 10 frac 0 ts 1700000002500000"),
        TWIN_CALL("peek", TWIN_T0, 3, "mark 1"),
        TWIN_CALL("check", TWIN_T0, 3, NULL),
        TWIN_REFUND(TWIN_T0, 3, NULL,
                    "field:tokens 10 field:ts 1700000002500000 pttl_max 2500 "
                    "pttl_min 2400"),
        TWIN_CALL("peek", TWIN_T0, 3, "same 1"),
    };
    TWIN_ROWS(&TB, rows);
}

Test(it_lua_token_bucket, refund_is_a_noop_once_the_state_moved_on,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
#define LATER (TWIN_T0 + 3 * TWIN_SEC)
    static const struct twin_row rows[] = {
        TWIN_SET(3, M, 0), /* 1 token/s */
        /* The check empties the bucket: full again 3 s later. */
        TWIN_CALL("check", TWIN_T0, 3, "undo 1700000003000000"),
        /* The key expired (Redis dropped it): nothing to give back. */
        TWIN_CMD("DEL %s"),
        TWIN_REFUND(TWIN_T0, 3, NULL, "exists 0"),
        /* A new key written at the full instant or later is not ours. */
        TWIN_CALL("check", LATER, 2, "undo 1700000005000000"),
        TWIN_REFUND(LATER, 3, "1700000003000000", "field:tokens 1"),
        /* A token that is no instant, or a cost of 0: no-ops. */
        TWIN_REFUND(LATER, 2, "", NULL),
        TWIN_REFUND(LATER, 2, "12x", NULL),
        TWIN_REFUND(LATER, 0, "1700000005000000", "field:tokens 1"),
    };
    static const struct twin_row ours[] = {
        /* Our own token still works while the state is the one we
         * wrote; a refund never creates the key. */
        TWIN_SET(3, M, 0),
        TWIN_REFUND(LATER, 2, "1700000005000000", "exists 0"),
        TWIN_REFUND(LATER, 2, "1700000005000000", "exists 0"),
    };
    const char *bad[4] = { "0", "1000000", NULL, NULL };
    redisContext *c = twin_run_rows(&TB, rows, sizeof(rows) / sizeof(*rows));
    redisReply *h;

    /* Bad parameters: a no-op too. */
    lua_twin_ok(c, "refund", "k", "token_bucket", bad, LATER, 2,
                "1700000005000000");
    px_check_str(px_cmd(c, "HGET k tokens"), "1");
    TWIN_ROWS(&TB, ours);
    /* Nor does it touch another type. */
    px_check_int(px_cmd(c, "RPUSH k a"), 1);
    bad[0] = "3";
    lua_twin_ok(c, "refund", "k", "token_bucket", bad, LATER, 2,
                "1700000005000000");
    h = px_cmd(c, "LRANGE k 0 -1");
    cr_assert_eq(h->elements, 1);
    freeReplyObject(h);
    redisFree(c);
}

Test(it_lua_token_bucket, huge_durations_come_back_exact_or_saturated,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    static const struct twin_row rows[] = {
        /* 9100 tokens at a millionth of a token per second: 9.1e15 us,
         * past 2^53 and below the int64 ns limit. */
        TWIN_SET(9101, 1, 0),
        TWIN_CALL("check", TWIN_T0, 9100, "reset_ns 9100000000000000000"),
        TWIN_CMD("DEL %s"),
        TWIN_CALL("peek", TWIN_T0, 0, "reset_us 0"), /* no key: full */
        /* The largest bucket at the slowest rate saturates. */
        TWIN_SET(CAP, 1, 0),
        TWIN_CALL("check", TWIN_US_MAX - 5, CAP,
                  "reset_ns 9223372036854775807 expiry_ms 9223372036855"),
        TWIN_CALL("check", TWIN_US_MAX, 1,
                  "limited 1 retry_ns 999999999995000"),
        /* A clock far behind a stored ts: the gap counts, and saturates
         * with a long enough wait. */
        TWIN_SET(300, 1, 0),
        TWIN_CMD("DEL %s"),
        TWIN_CMD("HSET %s tokens 0 frac 0 ts 9007199254740991"),
        TWIN_CALL("check", 0, 1, "retry_ns 9008199254740991000"),
        TWIN_CALL("check", 0, 300, "retry_ns 9223372036854775807"),
    };
    TWIN_ROWS(&TB, rows);
}

Test(it_lua_token_bucket, bad_parameters_give_the_c_model_errors,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
#define E_CAP  TOKEN_BUCKET_ERR_CAPACITY
#define E_RATE TOKEN_BUCKET_ERR_RATE
    static const struct twin_bad bad[] = {
        { { "0", "1000000" }, E_CAP },
        { { "-1", "1000000" }, E_CAP },
        { { "9007199254740992", "1000000" }, E_CAP },
        { { "1.5", "1000000" }, E_CAP },
        { { "", "1000000" }, E_CAP },
        { { "x", "1000000" }, E_CAP },
        { { "0", "0" }, E_CAP }, /* both bad: capacity is checked first */
        { { "x", "0" }, E_CAP },
        { { "5", "0" }, E_RATE },
        { { "5", "-5" }, E_RATE },
        { { "5", "1000000000000001" }, E_RATE },
        { { "5", "INF" }, E_RATE },
        { { "5", "" }, E_RATE },
        { { "5", "1e6" }, E_RATE },
    };
    /* The limits themselves are fine. */
    static const struct twin_row fine[] = {
        TWIN_SET(CAP, TOKEN_BUCKET_MAX_RATE_MICRO, 0),
        TWIN_CALL("peek", TWIN_T0, 1, "exists 0"),
    };
    redisContext *c;

    twin_run_bad_params(&TB, bad, sizeof(bad) / sizeof(*bad));
    c = twin_run_rows(&TB, fine, 2);
    px_check_int(px_cmd(c, "DBSIZE"), 0);
    redisFree(c);
}

Test(it_lua_token_bucket, wrong_type_and_malformed_state_give_errors,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    static const char *const bad[] = {
        "HSET %s tokens -9007199254740992 frac 0 ts 5", /* below -(2^53-1) */
        "HSET %s tokens 1 frac -1 ts 5",
        "HSET %s tokens 1 frac 1000000000000000 ts 5",
        "HSET %s tokens 1 frac 0 ts -5",
        "HSET %s tokens x frac 0 ts 5",
        "HSET %s tokens 1 frac 0.5 ts 5",
        "HSET %s tokens 1 frac 0 ts 9007199254740992",
        "HSET %s tokens 1 frac 0 ts ''",
        "HSET %s tokens 1 frac 0", /* a field missing */
    };
    redisContext *c = lua_twin_connect();
    struct twin_key k;

    twin_key_init(&k, &TB, c, "k");
    twin_set(&k, 5, INF, 0); /* even when nothing limits */
    twin_bad_states(&k, "ZADD %s 1 a", NULL, 0);
    twin_set(&k, 5, M, 0);
    twin_bad_states(&k, "ZADD %s 1 a", bad, sizeof(bad) / sizeof(*bad));
    twin_key_free(&k);
    redisFree(c);
}

/* ---------------- The exact integers of algorithms/lua/xint.lua -------- */
/* A number of `bits` random bits (0 .. 53). */
static int64_t rnd_bits(uint64_t *s, int bits)
{
    return bits == 0 ? 0 : (int64_t)(lua_twin_rnd(s) >> (64 - bits));
}

Test(it_lua_token_bucket, xint_part_divides_like_rl_muladd_div, .init = it_init,
     .fini = px_env_fini, .timeout = 60)
{
    enum { N = 500 };
    static const char driver[] =
        "local out = {}\n"
        "for i = 1, #ARGV, 4 do\n"
        "  local x = xint_add(xint_mul(xint_of(tonumber(ARGV[i])),\n"
        "    xint_of(tonumber(ARGV[i + 1]))), xint_of(tonumber(ARGV[i + 2])))\n"
        "  local q, r = xint_divmod(x, tonumber(ARGV[i + 3]))\n"
        "  out[#out + 1] = xint_str(q)\n"
        "  out[#out + 1] = lib_str(r)\n"
        "end\n"
        "return out\n";
    redisContext *c = px_redis_connect(&px_env()->redis, NULL);
    char *lib = px_read_file(PX_SOURCE_DIR "/algorithms/lua/lib.lua", NULL);
    char *xint = px_read_file(PX_SOURCE_DIR "/algorithms/lua/xint.lua", NULL);
    static int64_t v[N][4];
    static char txt[N][4][TWIN_DIGITS];
    static const char *argv[3 + 4 * N];
    uint64_t s = (uint64_t)time(NULL) | 1;
    size_t len;
    char *script;
    redisReply *r;

    cr_assert(lib != NULL && xint != NULL);
    len = strlen(lib) + strlen(xint) + sizeof(driver) + 2;
    script = malloc(len);
    cr_assert_not_null(script);
    snprintf(script, len, "%s\n%s\n%s", lib, xint, driver);
    for (int i = 0; i < N; i++) {
        int64_t q = rnd_bits(&s, (int)lua_twin_rnd_in(&s, 0, 53));
        int64_t d = rnd_bits(&s, (int)lua_twin_rnd_in(&s, 1, 53)) | 1;

        if (i % 5 < 2) {
            /* q * d + c for c at 0, d - 1 or d: quotient limbs on the
             * edge of a floating-point estimate. */
            v[i][0] = q;
            v[i][1] = d;
            v[i][2] = (i % 5 == 0) ? 0 : d - (lua_twin_rnd_in(&s, 0, 1));
        } else {
            v[i][0] = rnd_bits(&s, (int)lua_twin_rnd_in(&s, 0, 53));
            v[i][1] = rnd_bits(&s, (int)lua_twin_rnd_in(&s, 0, 53));
            v[i][2] = rnd_bits(&s, (int)lua_twin_rnd_in(&s, 0, 53));
        }
        v[i][3] = i % 7 == 0 ? TWIN_US_MAX - lua_twin_rnd_in(&s, 0, 1)
                             : (i % 11 == 0 ? lua_twin_rnd_in(&s, 1, 3) : d);
        for (int k = 0; k < 4; k++) {
            snprintf(txt[i][k], TWIN_DIGITS, "%" PRId64, v[i][k]);
            argv[3 + 4 * i + k] = txt[i][k];
        }
    }
    argv[0] = "EVAL";
    argv[1] = script;
    argv[2] = "0";
    r = redisCommandArgv(c, 3 + 4 * N, argv, NULL);
    cr_assert_not_null(r);
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s",
                 r->type == REDIS_REPLY_ERROR ? r->str : "");
    cr_assert_eq(r->elements, 2 * N);
    for (int i = 0; i < N; i++) {
        int64_t rem,
            q = rl_muladd_div(v[i][0], v[i][1], v[i][2], v[i][3], &rem);
        const char *lq = r->element[2 * i]->str;
        char want[TWIN_DIGITS];

        if (q == INT64_MAX) {
            /* Saturated: the exact quotient is at least that. */
            cr_assert(strlen(lq) > 19 ||
                          (strlen(lq) == 19 &&
                           strcmp(lq, "9223372036854775807") >= 0),
                      "%s * %s + %s / %s: %s", txt[i][0], txt[i][1], txt[i][2],
                      txt[i][3], lq);
            continue;
        }
        snprintf(want, sizeof(want), "%" PRId64, q);
        cr_assert_str_eq(lq, want, "%s * %s + %s / %s", txt[i][0], txt[i][1],
                         txt[i][2], txt[i][3]);
        snprintf(want, sizeof(want), "%" PRId64, rem);
        cr_assert_str_eq(r->element[2 * i + 1]->str, want,
                         "remainder of %s * "
                         "%s + %s / %s",
                         txt[i][0], txt[i][1], txt[i][2], txt[i][3]);
    }
    freeReplyObject(r);
    free(script);
    free(lib);
    free(xint);
    redisFree(c);
}
