/* algorithms/gcra.lua against the C model, on a real redis-server.
 *
 * Every script call is checked the same way (call_and_check): the script's
 * own decision must equal gcra_decide() fed with the TAT that was stored
 * before the call and the `now` the script reports, and afterwards the key
 * must hold exactly what the model says to write (value, and a PTTL that is
 * the model's expiry minus at most the wall time the check took; a key
 * only vanishes when that much time has passed).
 *
 * Time is never slept: elapsed time is simulated by shifting the stored
 * TAT back (SET ... KEEPTTL), which the model sees exactly, since it is fed
 * the stored value. Randomized sequences print their seed; set
 * PX_GCRA_SEED to replay one. */
#include "tests/integration/fixture.h"
#include "tests/integration/lua_twin.h"
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

#define S  RL_NS_PER_SEC
#define MS RL_NS_PER_MS

#define E_WRONGTYPE                                                            \
    "WRONGTYPE Operation against a key holding the wrong kind of value"
#define E_TAT_RANGE                                                            \
    "Cell error: Store error: Stored TAT out of range: 64-bit nanoseconds "    \
    "would overflow"
#define E_NEG_Q "Cell error: Store error: Negative quantities are not supported"

#define SEQUENCES     60 /* randomized sequences per run */
#define OPS_PER_SEQ   30 /* operations in each */
#define MAX_KEY_BYTES 12 /* random key length */
#define INT64_DIGITS  24 /* room for an int64 in decimal, sign and NUL */

/* .init: only a redis-server, the script runs there directly. */
static void it_init(void)
{
    px_redis_start(&px_env()->redis, NULL);
}

/* A connection to the test's redis with the script and the FUNCTION
 * library loaded; asserts the sha Redis computes is the one embedded at
 * build time. */
static redisContext *connect_loaded(void)
{
    redisContext *c = px_redis_connect(&px_env()->redis, NULL);
    const struct scripts_lua *s = scripts_gcra();
    redisReply *r = px_cmd(c, "SCRIPT LOAD %b", s->body, s->len);

    px_check_str(r, s->sha1);
    lua_twin_load_library(c); /* CALL_RUNS_FN's, whatever the form */
    return c;
}

/* Nanoseconds of wall-clock time, for bounds on expiries only. */
static int64_t wall_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * S + ts.tv_nsec;
}

/* ---------------- The key, as the test sees it ---------------- */

/* A key's string value (copied), or have == 0. */
struct stored {
    int have;
    char val[64];
    size_t len;
};

static void read_key(redisContext *c, const char *key, size_t keylen,
                     struct stored *st)
{
    redisReply *r = px_cmd(c, "GET %b", key, keylen);

    memset(st, 0, sizeof(*st));
    if (r->type == REDIS_REPLY_STRING) {
        cr_assert_lt(r->len, sizeof(st->val), "test values are short");
        st->have = 1;
        st->len = r->len;
        memcpy(st->val, r->str, r->len);
    } else {
        cr_assert_eq(r->type, REDIS_REPLY_NIL, "GET type %d", r->type);
    }
    freeReplyObject(r);
}

/* Moves the stored TAT back by x_ns, keeping the expiry: to the model this
 * is the same as x_ns passing. Does nothing to a missing key or when the
 * result would not fit. */
static void shift_back(redisContext *c, const char *key, size_t keylen,
                       int64_t x_ns)
{
    struct stored st;
    int64_t tat, moved;
    char buf[INT64_DIGITS];

    read_key(c, key, keylen, &st);
    if (!st.have || gcra_parse_int64(st.val, st.len, &tat) != GCRA_OK ||
        __builtin_sub_overflow(tat, x_ns, &moved)) {
        return;
    }
    snprintf(buf, sizeof(buf), "%" PRId64, moved);
    px_check_status(px_cmd(c, "SET %b %s KEEPTTL", key, keylen, buf), "OK");
}

/* ---------------- One checked call ---------------- */

/* Arguments of EVALSHA for p on key, as the proxy will send them; three
 * more in mode "runs" (a batch of one call, as the proxy batches
 * CL.THROTTLE: "runs" 1 1 before the four numbers). */
#define EVALSHA_ARGC (4 + GCRA_SCRIPT_NARGS)
#define RUNS_ARGC    (EVALSHA_ARGC + 3)

/* The modes a call is made in: check (the default) or "runs"; "runs"
 * through the FUNCTION library whatever PX_LUA_FORM says (its memo of
 * parsed limits lives from call to call only there). */
enum call_mode { CALL_CHECK, CALL_RUNS, CALL_RUNS_FN };

/* Fills argv/lens (borrowing key, sha and *a) for p on key; returns argc. */
static int evalsha_argv(const struct gcra_params *p, const char *key,
                        size_t keylen, enum call_mode mode,
                        struct gcra_script_args *a, const char **argv,
                        size_t *lens)
{
    int at = 4;

    gcra_script_args(p, a);
    argv[0] = "EVALSHA";
    argv[1] = scripts_gcra()->sha1;
    argv[2] = "1";
    argv[3] = key;
    for (int i = 0; i < 3; i++) {
        lens[i] = strlen(argv[i]);
    }
    lens[3] = keylen;
    if (mode != CALL_CHECK) {
        static const char *const runs[3] = { "runs", "1", "1" };
        for (int i = 0; i < 3; i++, at++) {
            argv[at] = runs[i];
            lens[at] = strlen(runs[i]);
        }
    }
    for (int i = 0; i < GCRA_SCRIPT_NARGS; i++, at++) {
        argv[at] = a->v[i];
        lens[at] = a->len[i];
    }
    return at;
}

/* Sends EVALSHA for p on key; returns the raw reply (caller frees). */
static redisReply *evalsha_mode(redisContext *c, const char *key, size_t keylen,
                                const struct gcra_params *p,
                                enum call_mode mode)
{
    struct gcra_script_args a;
    const char *argv[RUNS_ARGC];
    size_t lens[RUNS_ARGC];
    int argc = evalsha_argv(p, key, keylen, mode, &a, argv, lens);
    redisReply *r = redisCommandArgv(c, argc, argv, lens);
    cr_assert_not_null(r, "EVALSHA: %s", c->errstr);
    return r;
}

static redisReply *evalsha(redisContext *c, const char *key, size_t keylen,
                           const struct gcra_params *p)
{
    return evalsha_mode(c, key, keylen, p, CALL_CHECK);
}

/* The flag of a one-key "runs" call that decided nothing (asserting the
 * shape: {0, now_s, now_us, raw, flag}); raw is left in *raw (borrowed). */
static long long runs_flag(const redisReply *r, const redisReply **raw,
                           const char *ctx)
{
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s: reply type %d \"%s\"", ctx,
                 r->type, r->type == REDIS_REPLY_ERROR ? r->str : "");
    cr_assert_eq(r->elements, 5, "%s: elements", ctx);
    cr_assert_eq(r->element[0]->integer, 0, "%s: element 1", ctx);
    cr_assert_eq(r->element[4]->type, REDIS_REPLY_INTEGER, "%s: flag", ctx);
    *raw = r->element[3];
    return r->element[4]->integer;
}

/* Extracts the script's raw reply; asserts its shape. Borrows r. */
static void script_reply(const redisReply *r, enum call_mode mode,
                         struct gcra_script_reply *sr, const char *ctx)
{
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s: reply type %d \"%s\"", ctx,
                 r->type, r->type == REDIS_REPLY_ERROR ? r->str : "");
    if (mode != CALL_CHECK) {
        /* {0, now_s, now_us, raw, flag}: the decision is the flag. */
        const redisReply *raw;
        long long flag = runs_flag(r, &raw, ctx);
        cr_assert(flag == 0 || flag == 1, "%s: flag %lld", ctx, flag);
    } else {
        cr_assert_eq(r->elements, GCRA_SCRIPT_NREPLY, "%s: elements", ctx);
    }
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(r->element[i]->type, REDIS_REPLY_INTEGER, "%s: el %d", ctx,
                     i);
    }
    sr->limited =
        mode != CALL_CHECK ? r->element[4]->integer : r->element[0]->integer;
    sr->now_s = r->element[1]->integer;
    sr->now_us = r->element[2]->integer;
    if (r->element[3]->type == REDIS_REPLY_NIL) {
        sr->tat = NULL;
        sr->tat_len = 0;
    } else {
        cr_assert_eq(r->element[3]->type, REDIS_REPLY_STRING, "%s: el 3", ctx);
        sr->tat = r->element[3]->str;
        sr->tat_len = r->element[3]->len;
    }
}

/* Asserts the key holds what the model wrote (or left), t0 being the
 * monotonic ms before the call. */
static void check_store_after(redisContext *c, const char *key, size_t keylen,
                              const struct gcra_result *res,
                              const struct stored *before, long long t0,
                              const char *ctx)
{
    redisReply *val, *pttl;
    long long elapsed;

    redisAppendCommand(c, "GET %b", key, keylen);
    redisAppendCommand(c, "PTTL %b", key, keylen);
    val = px_next(c);
    pttl = px_next(c);
    elapsed = px_now_ms() - t0 + 1;
    cr_assert_eq(pttl->type, REDIS_REPLY_INTEGER, "%s: PTTL", ctx);

    if (res->write == GCRA_WRITE_SET) {
        char want[INT64_DIGITS];
        snprintf(want, sizeof(want), "%" PRId64, res->new_tat_ns);
        if (val->type == REDIS_REPLY_NIL) {
            /* Expired meanwhile: only possible when that much time went. */
            cr_assert_geq(elapsed, res->expiry_ms, "%s: key gone early", ctx);
        } else {
            cr_assert_str_eq(val->str, want, "%s: stored TAT", ctx);
            cr_assert_leq(pttl->integer, res->expiry_ms, "%s: PTTL %lld > %lld",
                          ctx, pttl->integer, (long long)res->expiry_ms);
            cr_assert_geq(pttl->integer, res->expiry_ms - elapsed,
                          "%s: PTTL %lld, expiry %lld, %lld ms elapsed", ctx,
                          pttl->integer, (long long)res->expiry_ms, elapsed);
        }
    } else if (res->write == GCRA_WRITE_DEL || !before->have) {
        cr_assert_eq(val->type, REDIS_REPLY_NIL, "%s: key should be gone", ctx);
    } else if (val->type == REDIS_REPLY_STRING) {
        /* Untouched (it may only have expired on its own). */
        cr_assert(val->len == before->len &&
                      memcmp(val->str, before->val, val->len) == 0,
                  "%s: key changed by a refusal", ctx);
    }
    freeReplyObject(val);
    freeReplyObject(pttl);
}

/* One script call in mode, checked against the model as the file header
 * says. Returns the model's result. */
static struct gcra_result call_and_check_mode(redisContext *c, const char *key,
                                              size_t keylen,
                                              const struct gcra_params *p,
                                              enum call_mode mode,
                                              const char *ctx)
{
    struct stored before;
    struct gcra_script_args a;
    const char *argv[RUNS_ARGC];
    size_t lens[RUNS_ARGC];
    int argc;
    struct gcra_script_reply sr;
    struct gcra_result got, want;
    const char *err = NULL;
    int64_t tat = 0, now, ints_got[5], ints_want[5];
    long long t0;
    redisReply *r;
    int rc;

    /* GET and the script in one transaction: `before` is exactly the
     * value the script read, even if the key expires around the call. */
    t0 = px_now_ms();
    argc = evalsha_argv(p, key, keylen, mode, &a, argv, lens);
    if (lua_twin_function_form() || mode == CALL_RUNS_FN) {
        argv[0] = "FCALL";
        argv[1] = LUA_TWIN_FN_PREFIX "gcra";
        lens[0] = strlen(argv[0]);
        lens[1] = strlen(argv[1]);
    }
    redisAppendCommand(c, "MULTI");
    redisAppendCommand(c, "GET %b", key, keylen);
    redisAppendCommandArgv(c, argc, argv, lens);
    redisAppendCommand(c, "EXEC");
    px_check_status(px_next(c), "OK");
    px_check_status(px_next(c), "QUEUED");
    px_check_status(px_next(c), "QUEUED");
    r = px_next(c);
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s: EXEC", ctx);
    cr_assert_eq(r->elements, 2, "%s: EXEC", ctx);
    memset(&before, 0, sizeof(before));
    if (r->element[0]->type == REDIS_REPLY_STRING) {
        cr_assert_lt(r->element[0]->len, sizeof(before.val));
        before.have = 1;
        before.len = r->element[0]->len;
        memcpy(before.val, r->element[0]->str, before.len);
    }
    script_reply(r->element[1], mode, &sr, ctx);

    /* The script reports exactly the value that was stored. */
    cr_assert_eq(sr.tat != NULL, before.have, "%s: TAT presence", ctx);
    if (before.have) {
        cr_assert(sr.tat_len == before.len &&
                      memcmp(sr.tat, before.val, before.len) == 0,
                  "%s: reported TAT differs", ctx);
        cr_assert_eq(gcra_parse_int64(before.val, before.len, &tat), GCRA_OK);
    }
    rc = gcra_decide_from_script(p, &sr, &got, &err);
    cr_assert_eq(rc, GCRA_OK, "%s: %s (script limited=%lld)", ctx, err,
                 (long long)sr.limited);
    /* The same model called directly on the same inputs. */
    now = sr.now_s * S + sr.now_us * 1000;
    rc = gcra_decide(p, before.have, tat, now, &want, &err);
    cr_assert_eq(rc, GCRA_OK, "%s: %s", ctx, err);
    cr_assert_eq(sr.limited, want.d.limited, "%s: limited", ctx);
    rl_reply_ints(&got.d, ints_got);
    rl_reply_ints(&want.d, ints_want);
    cr_assert_arr_eq(ints_got, ints_want, sizeof(ints_got), "%s: five integers",
                     ctx);
    freeReplyObject(r);

    check_store_after(c, key, keylen, &want, &before, t0, ctx);
    return want;
}

static struct gcra_result call_and_check(redisContext *c, const char *key,
                                         size_t keylen,
                                         const struct gcra_params *p,
                                         const char *ctx)
{
    return call_and_check_mode(c, key, keylen, p, CALL_CHECK, ctx);
}

/* Parameters; asserts they are valid. */
static struct gcra_params mk(int64_t b, int64_t cnt, int64_t per, int64_t q)
{
    struct gcra_params p;
    const char *err = NULL;

    cr_assert_eq(gcra_params_init(&p, b, cnt, per, q, &err), GCRA_OK, "%s",
                 err);
    return p;
}

/* Asserts the rounded reply. */
static void check_ints(const struct gcra_result *r, const int64_t want[5],
                       const char *ctx)
{
    int64_t out[5];

    rl_reply_ints(&r->d, out);
    cr_assert(memcmp(out, want, sizeof(out)) == 0,
              "%s: [%lld, %lld, %lld, %lld, %lld], expected [%lld, %lld, "
              "%lld, %lld, %lld]",
              ctx, (long long)out[0], (long long)out[1], (long long)out[2],
              (long long)out[3], (long long)out[4], (long long)want[0],
              (long long)want[1], (long long)want[2], (long long)want[3],
              (long long)want[4]);
}

/* ---------------- Loading ---------------- */

Test(it_gcra_lua, script_load_returns_the_embedded_sha1, .init = it_init,
     .fini = px_env_fini, .timeout = 60)
{
    const struct scripts_lua *s = scripts_gcra();
    redisContext *c = connect_loaded();

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
    redisContext *c = connect_loaded();
    struct gcra_params p = mk(4, 1, 1, 1);
    const struct scripts_lua *s = scripts_gcra();

    px_check_status(px_cmd(c, "SCRIPT FLUSH"), "OK");
    px_check_error_prefix(evalsha(c, "k", 1, &p), "NOSCRIPT ");
    /* Nothing ran: the key was not written. */
    px_check_int(px_cmd(c, "EXISTS k"), 0);
    /* The proxy's fallback: EVAL with the body, then EVALSHA works again. */
    redisReply *r = px_cmd(c, "EVAL %b 1 k 1 0 5 0", s->body, s->len);
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    freeReplyObject(r);
    px_check_int(px_cmd(c, "EXISTS k"), 1);
    call_and_check(c, "k", 1, &p, "after EVAL");
    redisFree(c);
}

/* ---------------- Reference values ---------------- */

/* docs/ARCHITECTURE.md's burst-4 table through the script. The clock is not
 * stepped: before each row the stored TAT moves back by the time the row adds.
 */
struct burst_row {
    int64_t at_ms;
    int64_t q;
    int limited;
    int64_t remaining;
    int64_t reset_ns;
    int64_t retry_ns;
    int64_t reply[5];
};

static const struct burst_row BURST[] = {
    { 0, 6, 1, 5, 0, -S, { 1, 5, 5, -1, 0 } },
    { 0, 1, 0, 4, 1 * S, -S, { 0, 5, 4, -1, 1 } },
    { 0, 1, 0, 3, 2 * S, -S, { 0, 5, 3, -1, 2 } },
    { 0, 1, 0, 2, 3 * S, -S, { 0, 5, 2, -1, 3 } },
    { 0, 1, 0, 1, 4 * S, -S, { 0, 5, 1, -1, 4 } },
    { 0, 1, 0, 0, 5 * S, -S, { 0, 5, 0, -1, 5 } },
    { 0, 1, 1, 0, 5 * S, 1 * S, { 1, 5, 0, 1, 5 } },
    { 3000, 1, 0, 2, 3000 * MS, -S, { 0, 5, 2, -1, 3 } },
    { 3100, 1, 0, 1, 3900 * MS, -S, { 0, 5, 1, -1, 4 } },
    { 4000, 1, 0, 1, 4000 * MS, -S, { 0, 5, 1, -1, 4 } },
    { 8000, 1, 0, 4, 1000 * MS, -S, { 0, 5, 4, -1, 1 } },
    { 9500, 1, 0, 4, 1000 * MS, -S, { 0, 5, 4, -1, 1 } },
    { 9500, 0, 0, 4, 1 * S, -S, { 0, 5, 4, -1, 1 } },
    { 9500, 2, 0, 2, 3 * S, -S, { 0, 5, 2, -1, 3 } },
    { 9500, 5, 1, 2, 3 * S, 3 * S, { 1, 5, 2, 3, 3 } },
};

Test(it_gcra_lua, burst_4_table_through_the_script_matches_design,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = connect_loaded();
    int64_t at_ms = 0;
    long long start = px_now_ms();

    for (size_t i = 0; i < sizeof(BURST) / sizeof(*BURST); i++) {
        const struct burst_row *br = &BURST[i];
        struct gcra_params p = mk(4, 1, 1, br->q);
        char ctx[32];

        snprintf(ctx, sizeof(ctx), "row %zu", i);
        shift_back(c, "foo", 3, (br->at_ms - at_ms) * MS);
        at_ms = br->at_ms;
        struct gcra_result r = call_and_check(c, "foo", 3, &p, ctx);
        /* Real time passed too, but less than the rounding hides. */
        int64_t real_ns = (px_now_ms() - start + 1) * MS;
        cr_assert_lt(real_ns, 900 * MS, "too slow to compare");
        cr_assert_eq(r.d.limited, br->limited, "%s limited", ctx);
        cr_assert_eq(r.d.remaining, br->remaining, "%s remaining", ctx);
        cr_assert(r.d.reset_after_ns <= br->reset_ns &&
                      r.d.reset_after_ns >= br->reset_ns - real_ns,
                  "%s reset %lld", ctx, (long long)r.d.reset_after_ns);
        if (br->retry_ns < 0) {
            cr_assert_eq(r.d.retry_after_ns, br->retry_ns, "%s retry", ctx);
        } else {
            cr_assert(r.d.retry_after_ns <= br->retry_ns &&
                          r.d.retry_after_ns >= br->retry_ns - real_ns,
                      "%s retry %lld", ctx, (long long)r.d.retry_after_ns);
        }
        check_ints(&r, br->reply, ctx);
    }
    redisFree(c);
}

Test(it_gcra_lua, user123_reference_values_through_the_script, .init = it_init,
     .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = connect_loaded();
    struct gcra_params a = mk(15, 30, 60, 1);
    struct gcra_params b = mk(0, 1, 2, 1);
    static const int64_t first[5] = { 0, 16, 15, -1, 2 };
    static const int64_t allow[5] = { 0, 1, 0, -1, 2 };
    static const int64_t deny[5] = { 1, 1, 0, 2, 2 };
    struct gcra_result r;

    r = call_and_check(c, "user123", 7, &a, "15 30 60");
    check_ints(&r, first, "15 30 60");
    px_check_int(px_cmd(c, "DEL user123"), 1);
    r = call_and_check(c, "user123", 7, &b, "0 1 2 first");
    check_ints(&r, allow, "0 1 2 first");
    r = call_and_check(c, "user123", 7, &b, "0 1 2 again");
    check_ints(&r, deny, "0 1 2 again");
    shift_back(c, "user123", 7, 2 * S);
    r = call_and_check(c, "user123", 7, &b, "0 1 2 after 2 s");
    check_ints(&r, allow, "0 1 2 after 2 s");
    redisFree(c);
}

/* ---------------- Randomized sequences ---------------- */

/* Random parameters: mostly ordinary rates, sometimes sub-millisecond
 * emission intervals (expiries of 0 ms) or long periods. */
static struct gcra_params rnd_params(uint64_t *st, int64_t *b)
{
    int64_t cnt, per;

    *b = lua_twin_rnd_in(st, 0, 9) == 0 ? lua_twin_rnd_in(st, -3, -1)
                                        : lua_twin_rnd_in(st, 0, 30);
    switch (lua_twin_rnd_in(st, 0, 5)) {
    case 0:
        cnt = lua_twin_rnd_in(st, 1000, 5000000); /* EI 200 ns .. 1 ms */
        per = 1;
        break;
    case 1:
        cnt = lua_twin_rnd_in(st, 1, 3);
        per = lua_twin_rnd_in(st, 3600,
                              86400 * 30); /* up to 30 days per request */
        break;
    default:
        cnt = lua_twin_rnd_in(st, 1, 1000);
        per = lua_twin_rnd_in(st, 1, 120);
        break;
    }
    return mk(*b, cnt, per, 1);
}

/* Overwrites the key with a valid TAT in an unusual form or place. */
static void plant_value(redisContext *c, uint64_t *st, const char *key,
                        size_t keylen)
{
    char v[INT64_DIGITS + 8];
    int64_t now = wall_ns();

    switch (lua_twin_rnd_in(st, 0, 5)) {
    case 0:
        snprintf(v, sizeof(v), "-1");
        break;
    case 1:
        snprintf(v, sizeof(v), "+000%" PRId64,
                 now + lua_twin_rnd_in(st, 0, 10 * S));
        break;
    case 2:
        snprintf(v, sizeof(v), "%d", (int)lua_twin_rnd_in(st, 0, 1000));
        break;
    case 3:
        snprintf(v, sizeof(v), "-%" PRId64, lua_twin_rnd_in(st, 1, 5 * S));
        break;
    case 4:
        snprintf(v, sizeof(v), "%" PRId64,
                 now + lua_twin_rnd_in(st, 0, 100 * S));
        break;
    default:
        snprintf(v, sizeof(v), "%" PRId64,
                 now - lua_twin_rnd_in(st, 0, 100 * S));
        break;
    }
    if (lua_twin_rnd_in(st, 0, 1)) {
        px_check_status(px_cmd(c, "SET %b %s", key, keylen, v), "OK");
    } else {
        px_check_status(px_cmd(c, "SET %b %s PX %d", key, keylen, v,
                               (int)lua_twin_rnd_in(st, 1000, 60000)),
                        "OK");
    }
}

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

Test(it_gcra_lua, randomized_sequences_match_the_c_model, .init = it_init,
     .fini = px_env_fini, .timeout = 120)
{
    redisContext *c = connect_loaded();
    uint64_t seed = lua_twin_seed("it_gcra_lua", "PX_GCRA_SEED"), st = seed | 1;
    long calls = 0, limited = 0, sets = 0, dels = 0, runs = 0, twins = 0;

    for (int seq = 0; seq < SEQUENCES; seq++) {
        char key[MAX_KEY_BYTES + 16];
        size_t keylen;
        int64_t b;
        struct gcra_params p = rnd_params(&st, &b);

        if (lua_twin_rnd_in(&st, 0, 2) == 0) { /* binary, not UTF-8 */
            keylen = (size_t)lua_twin_rnd_in(&st, 1, MAX_KEY_BYTES);
            for (size_t i = 0; i < keylen; i++) {
                key[i] = (char)lua_twin_rnd_in(&st, 0, 255);
            }
        } else {
            keylen = (size_t)snprintf(key, sizeof(key), "gcra:%d", seq);
        }
        for (int op = 0; op < OPS_PER_SEQ; op++) {
            char ctx[96];
            int64_t kind = lua_twin_rnd_in(&st, 0, 99);

            snprintf(ctx, sizeof(ctx), "seed %llu seq %d op %d",
                     (unsigned long long)seed, seq, op);
            if (kind < 60) {
                int64_t q = lua_twin_rnd_in(&st, 0, (b > 0 ? b : 0) + 3);
                struct gcra_params pq = mk(p.max_burst, p.count, p.period_s, q);
                /* Half the calls in mode "runs", whose decisions take a
                 * faster path in the script: the model must not tell. A
                 * third are followed by a twin (twin_params), both through
                 * the library, where its memo lives. */
                int twin = lua_twin_rnd_in(&st, 0, 2) == 0;
                enum call_mode mode = twin ? CALL_RUNS_FN
                                      : lua_twin_rnd_in(&st, 0, 1) ? CALL_RUNS
                                                                   : CALL_CHECK;
                struct gcra_result r =
                    call_and_check_mode(c, key, keylen, &pq, mode, ctx);
                calls++;
                runs += mode != CALL_CHECK;
                limited += r.d.limited;
                sets += r.write == GCRA_WRITE_SET;
                dels += r.write == GCRA_WRITE_DEL;
                if (twin) {
                    /* Its twin at once: one of the four strings differs. */
                    struct gcra_params pt =
                        twin_params(&st, pq, (int)lua_twin_rnd_in(&st, 0, 3));
                    r = call_and_check_mode(c, key, keylen, &pt, mode, ctx);
                    calls++;
                    twins++;
                    runs += 1;
                    limited += r.d.limited;
                    sets += r.write == GCRA_WRITE_SET;
                    dels += r.write == GCRA_WRITE_DEL;
                }
            } else if (kind < 85) {
                int64_t span = p.dvt_ns > 0 ? p.dvt_ns : S;
                shift_back(c, key, keylen, lua_twin_rnd_in(&st, 0, 2 * span));
            } else if (kind < 90) {
                p = rnd_params(&st, &b); /* same key, other limits */
            } else if (kind < 96) {
                plant_value(c, &st, key, keylen);
            } else {
                redisReply *r = px_cmd(c, "DEL %b", key, keylen);
                freeReplyObject(r);
            }
        }
    }
    fprintf(stderr,
            "it_gcra_lua: %ld calls (%ld runs, %ld twins), %ld limited, %ld "
            "SET, %ld DEL\n",
            calls, runs, twins, limited, sets, dels);
    /* The sequences reached every branch. */
    cr_assert_gt(limited, 0);
    cr_assert_gt(calls - limited, 0);
    cr_assert_gt(sets, 0);
    cr_assert_gt(dels, 0);
    cr_assert_gt(runs, 0);
    cr_assert_gt(calls - runs, 0);
    cr_assert_gt(twins, 0);
    redisFree(c);
}

/* ---------------- Keys that hold no TAT, and bad input ---------------- */

Test(it_gcra_lua, hash_key_gives_exact_wrongtype_and_is_not_written,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = connect_loaded();
    struct gcra_params p = mk(4, 1, 1, 1);

    px_check_int(px_cmd(c, "HSET h f v"), 1);
    px_check_error(evalsha(c, "h", 1, &p), E_WRONGTYPE);
    /* In a batch: flag -1 for the key, nothing read, nothing written. */
    const redisReply *raw;
    redisReply *r = evalsha_mode(c, "h", 1, &p, CALL_RUNS);
    cr_assert_eq(runs_flag(r, &raw, "runs"), -1);
    cr_assert_eq(raw->type, REDIS_REPLY_NIL);
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
    redisContext *c = connect_loaded();
    struct gcra_params p = mk(4, 1, 1, 1);

    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        px_check_status(px_cmd(c, "SET s %s", bad[i]), "OK");
        redisReply *r = evalsha(c, "s", 1, &p);
        cr_assert_eq(r->type, REDIS_REPLY_ERROR, "\"%s\" accepted", bad[i]);
        cr_assert_str_eq(r->str, E_WRONGTYPE, "\"%s\"", bad[i]);
        freeReplyObject(r);
        px_check_str(px_cmd(c, "GET s"), bad[i]);
        px_check_int(px_cmd(c, "PTTL s"), -1);
        /* In a batch: flag -1 (and no TAT reported), the value kept. */
        const redisReply *raw;
        r = evalsha_mode(c, "s", 1, &p, CALL_RUNS);
        cr_assert_eq(runs_flag(r, &raw, bad[i]), -1, "\"%s\" in a batch",
                     bad[i]);
        cr_assert_eq(raw->type, REDIS_REPLY_NIL);
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
    redisContext *c = connect_loaded();
    struct gcra_params p = mk(1, 1, 60, 1);
    static const int64_t r1[5] = { 0, 2, 1, -1, 60 };
    static const int64_t r2[5] = { 0, 2, 0, -1, 120 };
    struct gcra_result r;

    r = call_and_check(c, key, keylen, &p, "first");
    check_ints(&r, r1, "first");
    r = call_and_check(c, key, keylen, &p, "second");
    check_ints(&r, r2, "second");
    r = call_and_check(c, key, keylen, &p, "third");
    cr_assert_eq(r.d.limited, 1);
    /* Only the binary key exists, under its exact bytes. */
    px_check_int(px_cmd(c, "DBSIZE"), 1);
    px_check_int(px_cmd(c, "EXISTS %b", key, keylen), 1);
    redisFree(c);
}

Test(it_gcra_lua, negative_quantity_is_refused_and_writes_nothing,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = connect_loaded();
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
    redisContext *c = connect_loaded();
    struct gcra_params p = mk(4, 1, 1, 1);
    struct gcra_result r;
    const char *err = NULL;

    px_check_status(px_cmd(c, "SET big 9223372036854775807"), "OK");
    px_check_error(evalsha(c, "big", 3, &p), E_TAT_RANGE);
    px_check_str(px_cmd(c, "GET big"), "9223372036854775807");
    /* In a batch, flag -2, for INT64_MAX and for the largest TAT past
     * which INC does not fit (INC is 1 s here). */
    static const char *const over[] = { "9223372036854775807",
                                        "9223372035854775808" };
    for (int i = 0; i < 2; i++) {
        const redisReply *raw;
        px_check_status(px_cmd(c, "SET big %s", over[i]), "OK");
        redisReply *e = evalsha_mode(c, "big", 3, &p, CALL_RUNS);
        cr_assert_eq(runs_flag(e, &raw, over[i]), -2, "%s", over[i]);
        freeReplyObject(e);
        px_check_str(px_cmd(c, "GET big"), over[i]);
    }
    /* The model agrees. */
    cr_assert_eq(gcra_decide(&p, 1, INT64_MAX, wall_ns(), &r, &err),
                 GCRA_ERANGE);
    cr_assert_str_eq(err, E_TAT_RANGE);
    /* The largest TAT that still fits is decided, and refused. */
    px_check_status(px_cmd(c, "SET big 9223372035854775807"), "OK");
    r = call_and_check(c, "big", 3, &p, "largest");
    cr_assert_eq(r.d.limited, 1);
    r = call_and_check_mode(c, "big", 3, &p, CALL_RUNS, "largest, runs");
    cr_assert_eq(r.d.limited, 1);
    redisFree(c);
}

Test(it_gcra_lua, expiry_under_one_ms_deletes_the_key, .init = it_init,
     .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = connect_loaded();
    struct gcra_params p = mk(0, 4000, 1, 1); /* EI 250 us */
    struct gcra_result r;

    px_check_status(px_cmd(c, "SET d 5"), "OK"); /* a TAT long past */
    r = call_and_check(c, "d", 1, &p, "sub-ms");
    cr_assert_eq(r.d.limited, 0);
    cr_assert_eq(r.write, GCRA_WRITE_DEL);
    px_check_int(px_cmd(c, "EXISTS d"), 0);
    px_check_status(px_cmd(c, "SET d 5"), "OK");
    r = call_and_check_mode(c, "d", 1, &p, CALL_RUNS, "sub-ms, runs");
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
    cr_assert_eq(r->elements, 3 + 2 * n, "%s: elements", ctx);
    lua_twin_runs_text(r, n, got, sizeof(got));
    cr_assert_str_eq(got, want, "%s", ctx);
}

Test(it_gcra_lua, runs_decide_each_key_in_turn_under_its_own_limit,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = connect_loaded();
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
    redisContext *c = connect_loaded();
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
