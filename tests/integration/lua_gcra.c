/* gcra.lua's calls, checked against the C model (see the header). */
#include "tests/integration/lua_gcra.h"

#include "tests/integration/fixture.h"
#include "tests/integration/lua_twin.h"

#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/rl.h"
#include "algorithms/scripts.h"

/* EVALSHA sha 1 key, three more in mode "runs", then the four numbers. */
#define LUA_GCRA_ARGC (4 + 3 + GCRA_SCRIPT_NARGS)

redisContext *lua_gcra_connect(void)
{
    redisContext *c = px_redis_connect(&px_env()->redis, NULL);
    const struct scripts_lua *s = scripts_gcra();

    px_check_str(px_cmd(c, "SCRIPT LOAD %b", s->body, s->len), s->sha1);
    lua_twin_load_library(c);
    return c;
}

struct gcra_params lua_gcra_params(int64_t b, int64_t count, int64_t period_s,
                                   int64_t q)
{
    struct gcra_params p;
    const char *err = NULL;

    cr_assert_eq(gcra_params_init(&p, b, count, period_s, q, &err), GCRA_OK,
                 "%s", err);
    return p;
}

/* Fills argv/lens (borrowing key and *a) for p on key, FCALL when
 * `function`; returns argc. */
static int lua_gcra_argv(const struct gcra_params *p, const char *key,
                         size_t keylen, enum lua_gcra_form form, int function,
                         struct gcra_script_args *a, const char **argv,
                         size_t *lens)
{
    static const char *const runs[3] = { "runs", "1", "1" };
    int at = lua_twin_head(argv, "gcra", function || form == LUA_GCRA_RUNS_FN);

    gcra_script_args(p, a);
    argv[at++] = "1";
    argv[at++] = key;
    for (int i = 0; form != LUA_GCRA_CHECK && i < 3; i++) {
        argv[at++] = runs[i];
    }
    for (int i = 0; i < at; i++) {
        lens[i] = argv[i] == key ? keylen : strlen(argv[i]);
    }
    for (int i = 0; i < GCRA_SCRIPT_NARGS; i++, at++) {
        argv[at] = a->v[i];
        lens[at] = a->len[i];
    }
    return at;
}

redisReply *lua_gcra_send(redisContext *c, const char *key, size_t keylen,
                          const struct gcra_params *p, enum lua_gcra_form form)
{
    struct gcra_script_args a;
    const char *argv[LUA_GCRA_ARGC];
    size_t lens[LUA_GCRA_ARGC];
    int argc = lua_gcra_argv(p, key, keylen, form, 0, &a, argv, lens);
    redisReply *r = redisCommandArgv(c, argc, argv, lens);

    cr_assert_not_null(r, "gcra.lua: %s", c->errstr);
    return r;
}

long long lua_gcra_runs_flag(const redisReply *r, const redisReply **raw,
                             const char *ctx)
{
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s: reply type %d \"%s\"", ctx,
                 r->type, r->type == REDIS_REPLY_ERROR ? r->str : "");
    cr_assert_eq(r->elements, 5, "%s: elements", ctx);
    cr_assert_eq(r->element[0]->integer, 0, "%s: element 1", ctx);
    cr_assert_eq(r->element[4]->type, REDIS_REPLY_INTEGER, "%s: bits", ctx);
    *raw = r->element[3];
    /* A key not decided has its code in place of its TAT. */
    if (r->element[3]->type == REDIS_REPLY_INTEGER) {
        return r->element[3]->integer;
    }
    return r->element[4]->integer & 1;
}

/* Extracts the script's raw reply; asserts its shape. Borrows r. */
static void lua_gcra_reply(const redisReply *r, enum lua_gcra_form form,
                           struct gcra_script_reply *sr, const char *ctx)
{
    const redisReply *raw = NULL;

    cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s: reply type %d \"%s\"", ctx,
                 r->type, r->type == REDIS_REPLY_ERROR ? r->str : "");
    if (form != LUA_GCRA_CHECK) {
        /* {0, now_s, now_us, raw, flag}: the decision is the flag. */
        sr->limited = lua_gcra_runs_flag(r, &raw, ctx);
        cr_assert(sr->limited == 0 || sr->limited == 1, "%s: flag %lld", ctx,
                  (long long)sr->limited);
    } else {
        cr_assert_eq(r->elements, GCRA_SCRIPT_NREPLY, "%s: elements", ctx);
        sr->limited = r->element[0]->integer;
    }
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(r->element[i]->type, REDIS_REPLY_INTEGER, "%s: el %d", ctx,
                     i);
    }
    sr->now_s = r->element[1]->integer;
    sr->now_us = r->element[2]->integer;
    raw = r->element[3];
    sr->tat = NULL;
    sr->tat_len = 0;
    if (raw->type != REDIS_REPLY_NIL) {
        cr_assert_eq(raw->type, REDIS_REPLY_STRING, "%s: el 3", ctx);
        sr->tat = raw->str;
        sr->tat_len = raw->len;
    }
}

/* A GET's reply as a stored value. */
static void lua_gcra_stored_of(const redisReply *r, struct lua_gcra_stored *st)
{
    memset(st, 0, sizeof(*st));
    if (r->type == REDIS_REPLY_STRING) {
        cr_assert_lt(r->len, sizeof(st->val), "test values are short");
        st->have = 1;
        st->len = r->len;
        memcpy(st->val, r->str, r->len);
    } else {
        cr_assert_eq(r->type, REDIS_REPLY_NIL, "GET type %d", r->type);
    }
}

/* Asserts the key holds what the model wrote (or left): `after` its
 * value, pttl its PTTL, `elapsed` ms at most since the script ran. */
static void lua_gcra_expect_store(const struct gcra_result *res,
                                  const struct lua_gcra_stored *before,
                                  const struct lua_gcra_stored *after,
                                  long long pttl, long long elapsed,
                                  const char *ctx)
{
    if (res->write == GCRA_WRITE_SET) {
        char want[24];

        snprintf(want, sizeof(want), "%" PRId64, res->new_tat_ns);
        if (!after->have) {
            /* Expired meanwhile: only possible when that much time went. */
            cr_assert_geq(elapsed, res->expiry_ms, "%s: key gone early", ctx);
            return;
        }
        cr_assert_str_eq(after->val, want, "%s: stored TAT", ctx);
        cr_assert_leq(pttl, res->expiry_ms, "%s: PTTL %lld > %lld", ctx, pttl,
                      (long long)res->expiry_ms);
        cr_assert_geq(pttl, res->expiry_ms - elapsed,
                      "%s: PTTL %lld, expiry %lld, %lld ms elapsed", ctx, pttl,
                      (long long)res->expiry_ms, elapsed);
    } else if (res->write == GCRA_WRITE_DEL || !before->have) {
        cr_assert(!after->have, "%s: key should be gone", ctx);
    } else if (after->have) {
        /* Untouched (it may only have expired on its own). */
        cr_assert(after->len == before->len &&
                      memcmp(after->val, before->val, after->len) == 0,
                  "%s: key changed by a refusal", ctx);
    }
}

struct gcra_result lua_gcra_check(redisContext *c, const char *key,
                                  size_t keylen, const struct gcra_params *p,
                                  enum lua_gcra_form form,
                                  struct lua_gcra_stored *seen, const char *ctx)
{
    struct lua_gcra_stored before, after;
    struct gcra_script_args a;
    const char *argv[LUA_GCRA_ARGC];
    size_t lens[LUA_GCRA_ARGC];
    int argc = lua_gcra_argv(p, key, keylen, form, lua_twin_function_form(), &a,
                             argv, lens);
    struct gcra_script_reply sr;
    struct gcra_result got, want;
    const char *err = NULL;
    int64_t tat = 0, ints_got[5], ints_want[5];
    long long t0 = px_now_ms(), elapsed;
    redisReply *r;

    /* GET, the script, GET and PTTL in one transaction: `before` is
     * exactly the value the script read, even if the key expires around
     * the call. */
    redisAppendCommand(c, "MULTI");
    redisAppendCommand(c, "GET %b", key, keylen);
    redisAppendCommandArgv(c, argc, argv, lens);
    redisAppendCommand(c, "GET %b", key, keylen);
    redisAppendCommand(c, "PTTL %b", key, keylen);
    redisAppendCommand(c, "EXEC");
    px_check_status(px_next(c), "OK");
    for (int i = 0; i < 4; i++) {
        px_check_status(px_next(c), "QUEUED");
    }
    r = px_next(c);
    elapsed = px_now_ms() - t0 + 1;
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 4, "%s: EXEC",
              ctx);
    lua_gcra_stored_of(r->element[0], &before);
    lua_gcra_reply(r->element[1], form, &sr, ctx);
    lua_gcra_stored_of(r->element[2], &after);
    cr_assert_eq(r->element[3]->type, REDIS_REPLY_INTEGER, "%s: PTTL", ctx);

    /* The script reports exactly the value that was stored. */
    cr_assert_eq(sr.tat != NULL, before.have, "%s: TAT presence", ctx);
    if (before.have) {
        cr_assert(sr.tat_len == before.len &&
                      memcmp(sr.tat, before.val, before.len) == 0,
                  "%s: reported TAT differs", ctx);
        cr_assert_eq(gcra_parse_int64(before.val, before.len, &tat), GCRA_OK);
    }
    cr_assert_eq(gcra_decide_from_script(p, &sr, &got, &err), GCRA_OK,
                 "%s: %s (script limited=%lld)", ctx, err,
                 (long long)sr.limited);
    /* The same model called directly on the same inputs. */
    cr_assert_eq(gcra_decide(p, before.have, tat,
                             sr.now_s * RL_NS_PER_SEC + sr.now_us * 1000, &want,
                             &err),
                 GCRA_OK, "%s: %s", ctx, err);
    cr_assert_eq(sr.limited, want.d.limited, "%s: limited", ctx);
    rl_reply_ints(&got.d, ints_got);
    rl_reply_ints(&want.d, ints_want);
    cr_assert_arr_eq(ints_got, ints_want, sizeof(ints_got), "%s: five integers",
                     ctx);
    lua_gcra_expect_store(&want, &before, &after, r->element[3]->integer,
                          elapsed, ctx);
    freeReplyObject(r);
    if (seen != NULL) {
        *seen = before;
    }
    return want;
}

void lua_gcra_expect_ints(const struct gcra_result *r, const int64_t want[5],
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

/* The value of `name` in a row's want; 0 when it has none. */
static int lua_gcra_want(const char *want, const char *name, char *buf,
                         size_t size)
{
    char key[32];
    const char *at;

    snprintf(key, sizeof(key), "%s ", name);
    at = strstr(want, key);
    if (at == NULL) {
        return 0;
    }
    at += strlen(key);
    snprintf(buf, size, "%.*s", (int)strcspn(at, " "), at);
    return 1;
}

/* Asserts a duration of the row's (want's `name`), less at most the
 * real time that passed (real_ns) unless it is -1 s. */
static void lua_gcra_want_ns(const char *want, const char *name, int64_t got,
                             int64_t real_ns, const char *ctx)
{
    char v[32];
    int64_t ref;

    if (!lua_gcra_want(want, name, v, sizeof(v))) {
        return;
    }
    ref = strtoll(v, NULL, 10);
    cr_assert(ref < 0 ? got == ref : got <= ref && got >= ref - real_ns,
              "%s: %s %" PRId64 ", want %" PRId64, ctx, name, got, ref);
}

void lua_gcra_replay(const struct twin_row *rows, size_t n)
{
    redisContext *c = lua_gcra_connect();
    long long start = px_now_ms();
    int64_t at = -1, cf[3] = { 0, 0, 0 };

    freeReplyObject(px_cmd(c, "DEL k")); /* limiter.lua's rows used it */
    for (size_t i = 0; i < n; i++) {
        const struct twin_row *w = &rows[i];
        char ctx[48], want[64], got[64];
        int64_t tat, ints[5], real_ns;

        snprintf(ctx, sizeof(ctx), "gcra.lua row %zu", i);
        if (strcmp(w->op, "params") == 0) {
            memcpy(cf, w->n, sizeof(cf));
            continue;
        }
        if (strcmp(w->op, "check") != 0) {
            freeReplyObject(px_cmd(c, w->op, "k"));
            continue;
        }
        redisReply *v = px_cmd(c, "GET k");
        if (at >= 0 && v->type == REDIS_REPLY_STRING &&
            gcra_parse_int64(v->str, v->len, &tat) == GCRA_OK) {
            px_check_status(px_cmd(c, "SET k %" PRId64 " KEEPTTL",
                                   tat - (w->now_us - at) * 1000),
                            "OK");
        }
        freeReplyObject(v);
        at = w->now_us;
        struct gcra_params p = lua_gcra_params(cf[0], cf[1], cf[2], w->cost);
        struct gcra_result r =
            lua_gcra_check(c, "k", 1, &p, LUA_GCRA_CHECK, NULL, ctx);
        real_ns = (px_now_ms() - start + 1) * RL_NS_PER_MS;
        cr_assert_lt(real_ns, 900 * RL_NS_PER_MS, "too slow to compare");
        rl_reply_ints(&r.d, ints);
        snprintf(got, sizeof(got),
                 "%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64,
                 ints[0], ints[1], ints[2], ints[3], ints[4]);
        cr_assert(lua_gcra_want(w->want, "ints", want, sizeof(want)));
        cr_assert_str_eq(got, want, "%s: ints %s, want %s", ctx, got, want);
        cr_assert(!lua_gcra_want(w->want, "limited", want, sizeof(want)) ||
                      r.d.limited == atoi(want),
                  "%s: limited", ctx);
        cr_assert(!lua_gcra_want(w->want, "remaining", want, sizeof(want)) ||
                      r.d.remaining == strtoll(want, NULL, 10),
                  "%s: remaining", ctx);
        lua_gcra_want_ns(w->want, "reset_ns", r.d.reset_after_ns, real_ns, ctx);
        lua_gcra_want_ns(w->want, "retry_ns", r.d.retry_after_ns, real_ns, ctx);
    }
    redisFree(c);
}
