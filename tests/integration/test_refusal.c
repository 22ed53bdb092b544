/* The refusal cache: CL.THROTTLE refusals answered by the proxy itself must
 * be the answers Redis would give.
 *
 * No test here asserts timing. Each call is bracketed by reads of Redis's
 * TIME and of the key's state (a TAT, or the hash of a bucket, a counter or
 * a sliding window's slots) on a direct connection, and its reply must be the C
 * model's decision for that state at some instant of the bracket: a refusal at
 * the bracket's start (refusals only get rarer as time passes), an admission at
 * its end, and every reply field between the model's values at the two ends. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/gcra.h"
#include "algorithms/leaky_bucket.h"
#include "algorithms/rl.h"
#include "algorithms/sliding_counter.h"
#include "algorithms/sliding_window.h"
#include "algorithms/token_bucket.h"
#include "tests/integration/fixture.h"
#include "tests/integration/limiter_support.h"
#include "tests/integration/lstate.h"

#define NS ((int64_t)1000000000)

/* Polls that wait for the proxy to read a message of Redis: many, short. */
#define POLLS   2000
#define POLL_MS 1

/* The peer proxy of the two-proxy tests. */
static struct px_child second;

static void fini_second(void)
{
    if (second.pid > 0) {
        px_proxy_stop(&second, SIGKILL);
    }
    px_env_fini();
}

static void init_two(void)
{
    px_env_init();
    px_path(second.log, sizeof(second.log), "cellgate-second.stderr");
    px_proxy_start_for(&second, &px_env()->redis, NULL);
}

/* Redis's TIME in nanoseconds. */
static int64_t redis_now(redisContext *d)
{
    redisReply *r = px_cmd(d, "TIME");
    int64_t ns;

    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    ns = atoll(r->element[0]->str) * NS + atoll(r->element[1]->str) * 1000;
    freeReplyObject(r);
    return ns;
}

/* The TAT stored at `key` (have = 0: none). */
static int64_t stored_tat(redisContext *d, const char *key, int *have)
{
    redisReply *r = lstate_cmd(d, "GET %s", key);
    int64_t tat = 0;

    *have = r->type == REDIS_REPLY_STRING;
    if (*have) {
        tat = atoll(r->str);
    }
    freeReplyObject(r);
    return tat;
}

/* The five integers of a CL.THROTTLE reply. */
static void five(redisReply *r, long long v[5], const char *ctx)
{
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 5,
              "%s: not five integers (%s)", ctx,
              r->type == REDIS_REPLY_ERROR ? r->str : "");
    for (int i = 0; i < 5; i++) {
        v[i] = r->element[i]->integer;
    }
    freeReplyObject(r);
}

/* The model's five integers for p on a key holding (have, tat) at now. */
static void model(const struct gcra_params *p, int have, int64_t tat,
                  int64_t now, long long out[5])
{
    struct gcra_result res;
    const char *err;
    int64_t v[5];

    cr_assert_eq(gcra_decide(p, have, tat, now, &res, &err), GCRA_OK);
    rl_reply_ints(&res.d, v);
    for (int i = 0; i < 5; i++) {
        out[i] = v[i];
    }
}

/* Sends `cmd` through `c` until the cache answers it (refused each time);
 * returns the last reply Redis made, in v. */
static void until_cached(redisContext *c, const char *cmd, long long v[5])
{
    long long hits = px_info_int(c, "limiter_refusal_cache_hits");
    int i;

    for (i = 0; i < POLLS; i++) {
        long long w[5];
        five(px_cmd(c, cmd), w, "learning");
        cr_assert_eq(w[0], 1, "%s: admitted while learning", cmd);
        if (px_info_int(c, "limiter_refusal_cache_hits") != hits) {
            return;
        }
        memcpy(v, w, sizeof(w));
        px_sleep_ms(POLL_MS);
    }
    cr_assert_fail("%s: the cache never answered", cmd);
}

/* After `n` refused calls through `c` that began with `hits` cache hits
 * and `calls` FCALLs on Redis (`d`): most were answered by the cache, and
 * every one it did not answer reached Redis. The cache answers only when
 * its reply is the same at every instant the node's clock may be at, so a
 * call near a rounding edge of a wait (one a second) goes to Redis, which
 * refuses it the same way: a few may, never most. */
static void mostly_cached(redisContext *c, redisContext *d, long long hits,
                          long long calls, int n, const char *what)
{
    long long h = px_info_int(c, "limiter_refusal_cache_hits") - hits;
    long long f = px_cmdstat_calls(d, "fcall") - calls;

    cr_assert(h <= n && 2 * h >= n,
              "%s: the cache answered %lld of %d refusals", what, h, n);
    cr_assert(f >= n - h && (h < n || f == 0),
              "%s: %lld cached refusals, %lld calls of Redis for %d", what, h,
              f, n);
}

/* Sends `n` commands of `cmds` (the last a call Redis refuses) through
 * `c` in one pipeline until the cache answers that call; fails when it
 * never does. Its five integers in v. */
static void cached_after(redisContext *c, const char *const *cmds, int n,
                         long long v[5], const char *what)
{
    int i, k;

    for (i = 0; i < POLLS; i++) {
        long long hits = px_info_int(c, "limiter_refusal_cache_hits");
        for (k = 0; k < n; k++) {
            redisAppendCommand(c, cmds[k]);
        }
        px_flush(c);
        for (k = 0; k < n - 1; k++) {
            freeReplyObject(px_next(c));
        }
        five(px_next(c), v, what);
        cr_assert_eq(v[0], 1, "%s: admitted", what);
        if (px_info_int(c, "limiter_refusal_cache_hits") != hits) {
            return;
        }
        /* At a rounding edge (see mostly_cached): Redis answered. */
        px_sleep_ms(POLL_MS);
    }
    cr_assert_fail("%s: the cache forgot the refusal", what);
}

/* One call through `c`, checked against Redis's state around it (see the
 * top). With `lag_ok` (another proxy writes the key too), a refusal's
 * fields may come from a state older than Redis's (the invalidation of the
 * other proxy's write is still on its way): more remaining, shorter
 * waits, never a different decision. Returns the reply's limited flag. */
static int bracketed_call(redisContext *c, redisContext *d, const char *key,
                          long long b, long long cnt, long long per,
                          long long q, int lag_ok, const char *ctx)
{
    struct gcra_params p;
    long long got[5], m0[5], m1[5];
    int have0, have1;
    int64_t t0, t1, tat0, tat1;
    const char *err = "";

    cr_assert_eq(gcra_params_init(&p, b, cnt, per, q, &err), GCRA_OK, "%s",
                 err);
    tat0 = stored_tat(d, key, &have0);
    t0 = redis_now(d);
    five(px_cmd(c, "CL.THROTTLE %s %lld %lld %lld %lld", key, b, cnt, per, q),
         got, ctx);
    t1 = redis_now(d);
    tat1 = stored_tat(d, key, &have1);
    model(&p, have0, tat0, t0, m0);
    model(&p, have0, tat0, t1, m1);
    if (got[0] == 1) {
        cr_assert(have1 == have0 && tat1 == tat0,
                  "%s: a refused call wrote the key", ctx);
        cr_assert_eq(m0[0], 1,
                     "%s: refused, but Redis admits it at the "
                     "start of the call",
                     ctx);
    } else {
        cr_assert_eq(m1[0], 0,
                     "%s: admitted, but Redis refuses it at the "
                     "end of the call",
                     ctx);
    }
    for (int i = 1; i < 5; i++) {
        long long lo = m0[i] < m1[i] ? m0[i] : m1[i];
        long long hi = m0[i] < m1[i] ? m1[i] : m0[i];
        if (got[0] == 0 && m0[0] == 1) {
            /* Admitted in the bracket after a refusal at its start: the
             * fields are those of the admitting instant, whose bounds
             * the end gives for the falling ones. */
            lo = lo < 0 ? lo : 0;
        }
        if (lag_ok && got[0] == 1) {
            if (i == 2) {
                hi = m0[1]; /* remaining: up to the limit */
            } else if (i > 2) {
                lo = -1; /* waits: down to none */
            }
        }
        cr_assert(got[i] >= lo && got[i] <= hi,
                  "%s: field %d is %lld, Redis says %lld..%lld", ctx, i, got[i],
                  lo, hi);
    }
    return (int)got[0];
}

Test(it_refusal, a_hot_key_is_refused_without_calling_redis,
     .init = px_env_init, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    redisContext *d = px_redis_connect(&px_env()->redis, NULL);
    long long calls, hits, v[5];
    int i;

    five(px_cmd(c, "CL.THROTTLE hot 0 1 3600"), v, "first");
    cr_assert_eq(v[0], 0);
    /* Refused until the tracker confirmed the state, then from the cache. */
    until_cached(c, "CL.THROTTLE hot 0 1 3600", v);
    cr_assert_eq(px_info_int(c, "limiter_refusal_cache_keys"), 1);
    calls = px_cmdstat_calls(d, "fcall");
    hits = px_info_int(c, "limiter_refusal_cache_hits");
    for (i = 0; i < 100; i++) {
        five(px_cmd(c, "CL.THROTTLE hot 0 1 3600"), v, "cached");
        cr_assert(v[0] == 1 && v[1] == 1 && v[2] == 0 && v[3] > 3500 &&
                      v[3] <= 3600 && v[4] == v[3],
                  "cached refusal %lld %lld %lld %lld %lld", v[0], v[1], v[2],
                  v[3], v[4]);
    }
    mostly_cached(c, d, hits, calls, 100, "hot");
    /* Other parameters on the same key: refused from the same state when
     * the model refuses them, sent to Redis when it admits them. */
    calls = px_cmdstat_calls(d, "fcall");
    five(px_cmd(c, "CL.THROTTLE hot 5 1 3600"), v, "bigger burst");
    cr_assert_eq(v[0], 0, "a burst of 6 admits a second call");
    cr_assert_eq(px_cmdstat_calls(d, "fcall"), calls + 1);
    redisFree(d);
    redisFree(c);
}

/* Every way Redis's copy can change under the cache: each must reach the
 * proxy, after which the call goes to Redis again. */
Test(it_refusal, writes_deletes_and_flushes_reach_the_cache,
     .init = px_env_init, .fini = px_env_fini, .timeout = 60)
{
    static const char *const writes[] = {
        "DEL hot", "SET hot 0", "FLUSHALL", "UNLINK hot", "EXPIRE hot 0",
    };
    redisContext *c = px_connect(px_env()->proxy.port);
    redisContext *d = px_redis_connect(&px_env()->redis, NULL);
    long long v[5], inval = 0;

    for (size_t w = 0; w < sizeof(writes) / sizeof(writes[0]); w++) {
        freeReplyObject(px_cmd(d, "FLUSHALL"));
        five(px_cmd(c, "CL.THROTTLE hot 0 1 3600"), v, "first");
        cr_assert_eq(v[0], 0, "%s: the first call is refused", writes[w]);
        until_cached(c, "CL.THROTTLE hot 0 1 3600", v);
        freeReplyObject(px_cmd(d, writes[w]));
        px_wait_refusal_invalidation(c, inval, writes[w]);
        inval = px_info_int(c, "limiter_refusal_cache_invalidations");
        cr_assert_eq(px_info_int(c, "limiter_refusal_cache_keys"), 0);
        five(px_cmd(c, "CL.THROTTLE hot 0 1 3600"), v, "after");
        cr_assert_eq(v[0], 0, "%s: the key was reset, the call admits",
                     writes[w]);
    }
    redisFree(d);
    redisFree(c);
}

/* A client's own write, pipelined right before its next call: Redis's
 * invalidation of the key comes later, on another connection, so the
 * proxy forgets the refusal as the write leaves; the call goes to Redis,
 * which admits it. A read leaves the cached refusal in place. */
Test(it_refusal, a_clients_own_write_reaches_its_next_call_at_once,
     .init = px_env_init, .fini = px_env_fini, .timeout = 60)
{
    static const char *const writes[][3] = {
        { "DEL hot", NULL, NULL },
        { "SET hot 0", NULL, NULL },
        { "UNLINK hot", NULL, NULL },
        { "PEXPIRE hot 0", NULL, NULL },
        { "GETDEL hot", NULL, NULL },
        { "EVAL %s 1 hot", NULL, NULL }, /* del_script */
        { "MULTI", "DEL hot", "EXEC" },
    };
    static const char del_script[] = "return redis.call('DEL', KEYS[1])";
    static const char *const reads[] = { "GET hot", "PTTL hot",
                                         "CL.THROTTLE hot 0 1 3600" };
    static const char *const bad_evals[] = { "EVAL return notanumber",
                                             "EVAL return notanumber",
                                             "EVAL return notanumber",
                                             "CL.THROTTLE hot 0 1 3600" };
    redisContext *c = px_connect(px_env()->proxy.port);
    redisContext *d = px_redis_connect(&px_env()->redis, NULL);
    long long v[5];
    size_t w, k;

    for (w = 0; w < sizeof(writes) / sizeof(writes[0]); w++) {
        freeReplyObject(px_cmd(d, "FLUSHALL"));
        five(px_cmd(c, "CL.THROTTLE hot 0 1 3600"), v, "first");
        cr_assert_eq(v[0], 0, "%s: the first call is admitted", writes[w][0]);
        until_cached(c, "CL.THROTTLE hot 0 1 3600", v);
        /* Reads keep it: a call right after them is answered from the
         * cache (one that made it forget would leave every such call to
         * Redis). */
        cached_after(c, reads, 3, v, "after reads");
        /* So do commands whose keys cannot be found (Redis refuses this
         * numkeys): one client must not empty the cache with them. */
        for (k = 0; k < 3; k++) {
            px_check_error_prefix(px_cmd(c, "EVAL %s notanumber", del_script),
                                  "ERR ");
        }
        cached_after(c, bad_evals, 4, v, "after bad EVALs");
        for (k = 0; k < 3 && writes[w][k] != NULL; k++) {
            redisAppendCommand(c, writes[w][k], del_script);
        }
        redisAppendCommand(c, "CL.THROTTLE hot 0 1 3600");
        px_flush(c);
        for (k = 0; k < 3 && writes[w][k] != NULL; k++) {
            redisReply *r = px_next(c);
            cr_assert_neq(r->type, REDIS_REPLY_ERROR, "%s: %s", writes[w][k],
                          r->str);
            freeReplyObject(r);
        }
        five(px_next(c), v, "after the write");
        cr_assert_eq(v[0], 0,
                     "%s: the client's own write reset the key, its next "
                     "call admits",
                     writes[w][0]);
    }
    redisFree(d);
    redisFree(c);
}

/* One proxy, one key, random costs and pauses, across the instants at
 * which refusals end: every reply, field by field, is one Redis gives at
 * some instant of its call (this proxy is the only writer, and it forgets
 * what it admits). */
Test(it_refusal, one_proxy_answers_exactly_what_redis_answers,
     .init = px_env_init, .fini = px_env_fini, .timeout = 120)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    redisContext *d = px_redis_connect(&px_env()->redis, NULL);
    int refused = 0, admitted_after_refusal = 0, last = 0;
    char ctx[64];

    srand(11);
    for (int i = 0; i < 300; i++) {
        long long q = (rand() % 4 == 0) ? 2 : 1;
        snprintf(ctx, sizeof(ctx), "call %d q %lld", i, q);
        int lim = bracketed_call(c, d, "alone", 2, 10, 1, q, 0, ctx);
        refused += lim;
        admitted_after_refusal += last == 1 && lim == 0;
        last = lim;
        if (rand() % 3 == 0) {
            px_sleep_ms(rand() % 40);
        }
    }
    cr_assert_gt(refused, 0);
    cr_assert_gt(admitted_after_refusal, 0, "no refusal ever ended");
    cr_assert_gt(px_info_int(c, "limiter_refusal_cache_hits"), 0,
                 "the cache never answered");
    redisFree(d);
    redisFree(c);
}

/* Two proxies on one key, random costs, random pauses, across the instants
 * at which refusals end: every decision is Redis's at some instant of its
 * call, and the fields of a refusal lag at most to an older state. */
Test(it_refusal, two_proxies_answer_what_redis_answers, .init = init_two,
     .fini = fini_second, .timeout = 120)
{
    redisContext *p[2] = { px_connect(px_env()->proxy.port),
                           px_connect(second.port) };
    redisContext *d = px_redis_connect(&px_env()->redis, NULL);
    int refused = 0, admitted_after_refusal = 0, last = 0;
    char ctx[64];

    srand(20261124);
    for (int i = 0; i < 400; i++) {
        int who = rand() % 2;
        long long q = (rand() % 4 == 0) ? 2 : 1;
        snprintf(ctx, sizeof(ctx), "call %d via %d q %lld", i, who, q);
        /* 10 per second, a burst of 3: refusals last up to 200 ms. */
        int lim = bracketed_call(p[who], d, "shared", 2, 10, 1, q, 1, ctx);
        refused += lim;
        admitted_after_refusal += last == 1 && lim == 0;
        last = lim;
        if (rand() % 3 == 0) {
            px_sleep_ms(rand() % 40);
        }
    }
    cr_assert_gt(refused, 0);
    cr_assert_gt(admitted_after_refusal, 0, "no refusal ever ended");
    cr_assert_gt(px_info_int(p[0], "limiter_refusal_cache_hits") +
                     px_info_int(p[1], "limiter_refusal_cache_hits"),
                 0, "the cache never answered");
    px_proxy_stop_clean(&second, SIGTERM);
    redisFree(d);
    redisFree(p[0]);
    redisFree(p[1]);
}

/* Two proxies hammering one key with pipelines: the admitted calls never
 * exceed the burst plus what the elapsed time (Redis's clock) allows. */
Test(it_refusal, two_proxies_never_admit_more_than_the_limit, .init = init_two,
     .fini = fini_second, .timeout = 120)
{
    redisContext *p[2] = { px_connect(px_env()->proxy.port),
                           px_connect(second.port) };
    redisContext *d = px_redis_connect(&px_env()->redis, NULL);
    long long admitted = 0, v[5];
    int64_t t0, t1;

    t0 = redis_now(d);
    for (int round = 0; round < 20; round++) {
        for (int k = 0; k < 2; k++) {
            for (int i = 0; i < 100; i++) {
                redisAppendCommand(p[k], "CL.THROTTLE busy 4 20 1");
            }
        }
        for (int k = 0; k < 2; k++) {
            for (int i = 0; i < 100; i++) {
                five(px_next(p[k]), v, "busy");
                admitted += v[0] == 0;
            }
        }
        px_sleep_ms(10);
    }
    t1 = redis_now(d);
    /* Burst 5, then one per 50 ms of Redis time. */
    long long most = 5 + (t1 - t0) / (50 * 1000000) + 1;
    cr_assert_leq(admitted, most, "admitted %lld of at most %lld", admitted,
                  most);
    cr_assert_gt(admitted, 5);
    cr_assert_gt(px_info_int(p[0], "limiter_refusal_cache_hits") +
                     px_info_int(p[1], "limiter_refusal_cache_hits"),
                 0);
    px_proxy_stop_clean(&second, SIGTERM);
    redisFree(d);
    redisFree(p[0]);
    redisFree(p[1]);
}

/* refusal_cache_size: 0 turns the cache off. */
static void init_off(void)
{
    px_env_prepare();
    px_redis_start(&px_env()->redis, NULL);
    px_proxy_start_for(&px_env()->proxy, &px_env()->redis,
                       "refusal_cache_size: 0\n");
}

Test(it_refusal, size_zero_turns_it_off, .init = init_off, .fini = px_env_fini,
     .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    redisContext *d = px_redis_connect(&px_env()->redis, NULL);
    long long v[5];

    long long calls = 0;

    for (int i = 0; i < 50; i++) {
        five(px_cmd(c, "CL.THROTTLE hot 0 1 3600"), v, "off");
        cr_assert_eq(v[0], i == 0 ? 0 : 1);
        if (i == 0) {
            calls = px_cmdstat_calls(d, "fcall");
        }
    }
    cr_assert_eq(px_info_int(c, "limiter_refusal_cache_hits"), 0);
    cr_assert_eq(px_cmdstat_calls(d, "fcall"), calls + 49,
                 "every call went to Redis");
    redisReply *r = px_cmd(d, "CLIENT LIST");
    cr_assert_null(strstr(r->str, "flags=t"), "a tracking connection: %s",
                   r->str);
    freeReplyObject(r);
    redisFree(d);
    redisFree(c);
}

/* ---------------- LIMITER CHECK and PEEK ---------------- */

/* user:<id>: 6 an hour; user:<id>:trade: 1 an hour, both GCRA, one hash
 * tag; fw:<id>: 1 per fixed window of 3650 days (aligned to the epoch:
 * none ends during a test); mix:<id>: 5 per such window, with
 * mix:<id>:t: 1 an hour (GCRA) under it;
 * fast:<id>: 3 per window of 200 ms (windows end during a test); sw:<id>:
 * a sliding window of 1 an hour in slots of a minute (a refusal outlasts
 * a test).
 * Slow ones, whose refusals outlast a test: tb:<id>: a token bucket of 1
 * refilled every 1000 s; lb:<id>: a leaky bucket of 1 dripping every hour;
 * sc:<id>: a sliding counter of 1 per 3650 days; tbmix:<id>: a token
 * bucket of 5 (as tb) with tbmix:<id>:t: 1 an hour (GCRA) under it;
 * lbmix:<id>: 6 an hour (GCRA) with lbmix:<id>:t: a leaky bucket (as lb)
 * under it. Fast ones, whose refusals end during a test: tbf:<id>: a
 * token bucket of 3 refilled at 10 a second; lbf:<id>: a leaky bucket of 3
 * dripping 1 every 100 ms; scf:<id>: a sliding counter of 3 per 300 ms;
 * swf:<id>: a sliding window of 3 per 300 ms in slots of 100 ms; swfine:<id>:
 * the same in slots of 20 ms.
 * Sliding windows on paths with other algorithms: tbsw:<id>: a token
 * bucket (as tb) with tbsw:<id>:t: a sliding window of 100 an hour under
 * it; swgcra:<id>: a sliding window of 5 an hour (slots of a minute) with
 * swgcra:<id>:t: 1 an hour (GCRA) under it; gcrasw:<id>: 6 an hour (GCRA)
 * with gcrasw:<id>:t: a sliding window (as sw) under it. swmany:<id>: a
 * sliding window of 65 an hour in slots of a second, whose hash can hold
 * more slots than the cache keeps (REFUSAL_SLOTS_MAX, 64).
 * Left to Redis: sl:<id>: a sliding log of 1 an hour (its refusals
 * write). */
static const char limits_yaml[] = "user:\n"
                                  "  children:\n"
                                  "    \"*\":\n"
                                  "      limits: [5, 1, 3600]\n"
                                  "      children:\n"
                                  "        trade:\n"
                                  "          limits: [0, 1, 3600]\n"
                                  "fw:\n"
                                  "  children:\n"
                                  "    \"*\":\n"
                                  "      limits:\n"
                                  "        - algorithm: fixed_window\n"
                                  "          max: 1\n"
                                  "          window: 3650d\n"
                                  "mix:\n"
                                  "  children:\n"
                                  "    \"*\":\n"
                                  "      limits:\n"
                                  "        - algorithm: fixed_window\n"
                                  "          max: 5\n"
                                  "          window: 3650d\n"
                                  "      children:\n"
                                  "        t:\n"
                                  "          limits: [0, 1, 3600]\n"
                                  "ten:\n"
                                  "  children:\n"
                                  "    \"*\":\n"
                                  "      children:\n"
                                  "        u:\n"
                                  "          children:\n"
                                  "            \"*\":\n"
                                  "              limits: [0, 1, 3600]\n"
                                  "fast:\n"
                                  "  children:\n"
                                  "    \"*\":\n"
                                  "      limits:\n"
                                  "        - algorithm: fixed_window\n"
                                  "          max: 3\n"
                                  "          window: 200ms\n"
                                  "sw:\n"
                                  "  children:\n"
                                  "    \"*\":\n"
                                  "      limits:\n"
                                  "        - algorithm: sliding_window\n"
                                  "          max: 1\n"
                                  "          window: 1h\n"
                                  "          resolution: 1m\n"
                                  "tb:\n"
                                  "  children:\n"
                                  "    \"*\":\n"
                                  "      limits:\n"
                                  "        - algorithm: token_bucket\n"
                                  "          capacity: 1\n"
                                  "          refill_per_sec: 0.001\n"
                                  "lb:\n"
                                  "  children:\n"
                                  "    \"*\":\n"
                                  "      limits:\n"
                                  "        - algorithm: leaky_bucket\n"
                                  "          size: 1\n"
                                  "          drip_ms: 3600000\n"
                                  "sc:\n"
                                  "  children:\n"
                                  "    \"*\":\n"
                                  "      limits:\n"
                                  "        - algorithm: sliding_counter\n"
                                  "          max: 1\n"
                                  "          window: 3650d\n"
                                  "tbmix:\n"
                                  "  children:\n"
                                  "    \"*\":\n"
                                  "      limits:\n"
                                  "        - algorithm: token_bucket\n"
                                  "          capacity: 5\n"
                                  "          refill_per_sec: 0.001\n"
                                  "      children:\n"
                                  "        t:\n"
                                  "          limits: [0, 1, 3600]\n"
                                  "lbmix:\n"
                                  "  children:\n"
                                  "    \"*\":\n"
                                  "      limits: [5, 1, 3600]\n"
                                  "      children:\n"
                                  "        t:\n"
                                  "          limits:\n"
                                  "            - algorithm: leaky_bucket\n"
                                  "              size: 1\n"
                                  "              drip_ms: 3600000\n"
                                  "tbf:\n"
                                  "  children:\n"
                                  "    \"*\":\n"
                                  "      limits:\n"
                                  "        - algorithm: token_bucket\n"
                                  "          capacity: 3\n"
                                  "          refill_per_sec: 10\n"
                                  "lbf:\n"
                                  "  children:\n"
                                  "    \"*\":\n"
                                  "      limits:\n"
                                  "        - algorithm: leaky_bucket\n"
                                  "          size: 3\n"
                                  "          drip_ms: 100\n"
                                  "          drip_size: 1\n"
                                  "scf:\n"
                                  "  children:\n"
                                  "    \"*\":\n"
                                  "      limits:\n"
                                  "        - algorithm: sliding_counter\n"
                                  "          max: 3\n"
                                  "          window: 300ms\n"
                                  "sl:\n"
                                  "  children:\n"
                                  "    \"*\":\n"
                                  "      limits:\n"
                                  "        - algorithm: sliding_log\n"
                                  "          max: 1\n"
                                  "          window: 1h\n"
                                  "tbsw:\n"
                                  "  children:\n"
                                  "    \"*\":\n"
                                  "      limits:\n"
                                  "        - algorithm: token_bucket\n"
                                  "          capacity: 1\n"
                                  "          refill_per_sec: 0.001\n"
                                  "      children:\n"
                                  "        t:\n"
                                  "          limits:\n"
                                  "            - algorithm: sliding_window\n"
                                  "              max: 100\n"
                                  "              window: 1h\n"
                                  "              resolution: 1m\n"
                                  "swf:\n"
                                  "  children:\n"
                                  "    \"*\":\n"
                                  "      limits:\n"
                                  "        - algorithm: sliding_window\n"
                                  "          max: 3\n"
                                  "          window: 300ms\n"
                                  "          resolution: 100ms\n"
                                  "swfine:\n"
                                  "  children:\n"
                                  "    \"*\":\n"
                                  "      limits:\n"
                                  "        - algorithm: sliding_window\n"
                                  "          max: 3\n"
                                  "          window: 300ms\n"
                                  "          resolution: 20ms\n"
                                  "swgcra:\n"
                                  "  children:\n"
                                  "    \"*\":\n"
                                  "      limits:\n"
                                  "        - algorithm: sliding_window\n"
                                  "          max: 5\n"
                                  "          window: 1h\n"
                                  "          resolution: 1m\n"
                                  "      children:\n"
                                  "        t:\n"
                                  "          limits: [0, 1, 3600]\n"
                                  "gcrasw:\n"
                                  "  children:\n"
                                  "    \"*\":\n"
                                  "      limits: [5, 1, 3600]\n"
                                  "      children:\n"
                                  "        t:\n"
                                  "          limits:\n"
                                  "            - algorithm: sliding_window\n"
                                  "              max: 1\n"
                                  "              window: 1h\n"
                                  "              resolution: 1m\n"
                                  "swmany:\n"
                                  "  children:\n"
                                  "    \"*\":\n"
                                  "      limits:\n"
                                  "        - algorithm: sliding_window\n"
                                  "          max: 65\n"
                                  "          window: 1h\n"
                                  "          resolution: 1s\n";

static char limits_path[PX_PATH_MAX];
static char limits_conf[PX_PATH_MAX + 32];

/* Two proxies with the tree in front of one Redis. */
static void init_tree(void)
{
    px_env_prepare();
    px_write_file(limits_path, sizeof(limits_path), "limits.yaml", limits_yaml);
    snprintf(limits_conf, sizeof(limits_conf), "limits_file: %s\n",
             limits_path);
    px_redis_start(&px_env()->redis, NULL);
    px_proxy_start_for(&px_env()->proxy, &px_env()->redis, limits_conf);
    px_path(second.log, sizeof(second.log), "cellgate-second.stderr");
    px_proxy_start_for(&second, &px_env()->redis, limits_conf);
}

Test(it_refusal, a_refused_limiter_check_is_answered_without_redis,
     .init = init_tree, .fini = fini_second, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    redisContext *p2 = px_connect(second.port);
    redisContext *d = px_redis_connect(&px_env()->redis, NULL);
    long long v[5], first[5], calls, hits, inval;
    int i;

    five(px_cmd(c, "LIMITER CHECK user:alex:trade"), v, "first");
    cr_assert_eq(v[0], 0);
    until_cached(c, "LIMITER CHECK user:alex:trade", first);
    /* The user level (key + state) and the override hash (absent). */
    cr_assert_eq(px_info_int(c, "limiter_refusal_cache_keys"), 3);
    calls = px_cmdstat_calls(d, "fcall");
    hits = px_info_int(c, "limiter_refusal_cache_hits");
    for (i = 0; i < 100; i++) {
        five(px_cmd(c, i % 2 ? "LIMITER PEEK user:alex:trade"
                             : "LIMITER CHECK user:alex:trade"),
             v, "cached");
        /* Redis's refusal, its waits only ever shorter. */
        cr_assert(v[0] == 1 && v[1] == first[1] && v[2] == first[2] &&
                      v[3] <= first[3] && v[3] > first[3] - 60 &&
                      v[4] <= first[4] && v[4] > first[4] - 60,
                  "cached %lld %lld %lld %lld %lld, Redis said %lld %lld "
                  "%lld %lld %lld",
                  v[0], v[1], v[2], v[3], v[4], first[0], first[1], first[2],
                  first[3], first[4]);
    }
    mostly_cached(c, d, hits, calls, 100, "user:alex:trade");
    /* A cost the model admits goes to Redis: COST 0 on the trade level. */
    calls = px_cmdstat_calls(d, "fcall");
    five(px_cmd(c, "LIMITER CHECK user:alex:trade COST 0"), v, "cost 0");
    cr_assert_eq(v[0], 0);
    cr_assert_eq(px_cmdstat_calls(d, "fcall"), calls + 1);

    /* A RESET through the other proxy reaches this one's cache (the
     * admission above wrote the keys: cached again first). */
    until_cached(c, "LIMITER CHECK user:alex:trade", first);
    inval = px_info_int(c, "limiter_refusal_cache_invalidations");
    px_check_int(px_cmd_admin(p2, "LIMITER RESET user:alex:trade"), 2);
    px_wait_refusal_invalidation(c, inval, "LIMITER RESET");
    five(px_cmd(c, "LIMITER CHECK user:alex:trade"), v, "after reset");
    cr_assert_eq(v[0], 0, "reset, yet refused");

    /* So does an OVERRIDE: UNLIMITED through the other proxy admits here
     * at once. */
    until_cached(c, "LIMITER CHECK user:alex:trade", first);
    inval = px_info_int(c, "limiter_refusal_cache_invalidations");
    px_check_status(
        px_cmd_admin(p2, "LIMITER OVERRIDE SET user:alex:trade UNLIMITED"),
        "OK");
    px_wait_refusal_invalidation(c, inval, "LIMITER OVERRIDE");
    five(px_cmd(c, "LIMITER CHECK user:alex:trade"), v, "overridden");
    cr_assert_eq(v[0], 0, "unlimited, yet refused");
    redisFree(d);
    redisFree(p2);
    redisFree(c);
}

/* A level below a second "*" (ten:<t>:u:<u>) keeps its state at a key of
 * its own, not in the tenant's string: the cache reads it there, answers
 * its refusals, and forgets them when a RESET through the other proxy
 * deletes the key. */
Test(it_refusal, a_level_below_a_second_wildcard_is_cached_from_its_key,
     .init = init_tree, .fini = fini_second, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    redisContext *p2 = px_connect(second.port);
    redisContext *d = px_redis_connect(&px_env()->redis, NULL);
    long long v[5], first[5], calls, hits, inval;
    redisReply *r;

    five(px_cmd(c, "LIMITER CHECK ten:acme:u:ann"), v, "first");
    cr_assert_eq(v[0], 0);
    /* (px_cmd: lstate_cmd would read a record of the tenant's string.) */
    r = px_cmd(d, "GET cellgate:{ten:acme}:u:ann#0:gcra");
    cr_assert(r->type == REDIS_REPLY_STRING && r->len == 19,
              "no TAT at the level's own key");
    freeReplyObject(r);
    until_cached(c, "LIMITER CHECK ten:acme:u:ann", first);
    calls = px_cmdstat_calls(d, "fcall");
    hits = px_info_int(c, "limiter_refusal_cache_hits");
    for (int i = 0; i < 100; i++) {
        five(px_cmd(c, "LIMITER CHECK ten:acme:u:ann"), v, "cached");
        cr_assert(v[0] == 1 && v[2] == 0, "ann admitted");
    }
    mostly_cached(c, d, hits, calls, 100, "ten:acme:u:ann");
    /* Another user of the tenant has a state of its own. */
    five(px_cmd(c, "LIMITER CHECK ten:acme:u:bob"), v, "bob");
    cr_assert_eq(v[0], 0, "bob refused by ann's state");
    inval = px_info_int(c, "limiter_refusal_cache_invalidations");
    px_check_int(px_cmd_admin(p2, "LIMITER RESET ten:acme:u:ann"), 1);
    px_wait_refusal_invalidation(c, inval, "LIMITER RESET");
    five(px_cmd(c, "LIMITER CHECK ten:acme:u:ann"), v, "after reset");
    cr_assert_eq(v[0], 0, "reset, yet refused");
    redisFree(d);
    redisFree(p2);
    redisFree(c);
}

/* What the cache never answers: an identity with a run-time override, and
 * a sliding log (its refusals write a log entry). */
Test(it_refusal, overridden_identities_and_sliding_logs_go_to_redis,
     .init = init_tree, .fini = fini_second, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    redisContext *d = px_redis_connect(&px_env()->redis, NULL);
    long long v[5], calls;
    int i;

    /* A run-time override on the identity: its hash exists, so its
     * refusals are never cached. */
    px_check_status(
        px_cmd_admin(c, "LIMITER OVERRIDE SET user:bob:trade FACTOR 2"), "OK");
    five(px_cmd(c, "LIMITER CHECK user:bob:trade"), v, "bob");
    cr_assert_eq(v[0], 0);
    five(px_cmd(c, "LIMITER CHECK sl:x"), v, "sl");
    cr_assert_eq(v[0], 0);
    calls = px_cmdstat_calls(d, "fcall");
    for (i = 0; i < 50; i++) {
        five(px_cmd(c, "LIMITER CHECK user:bob:trade"), v, "bob refused");
        cr_assert_eq(v[0], 1);
        five(px_cmd(c, "LIMITER %s sl:x", i % 2 ? "PEEK" : "CHECK"), v,
             "sl refused");
        cr_assert(v[0] == 1 && v[1] == 1 && v[2] == 0);
        px_sleep_ms(POLL_MS);
    }
    cr_assert_eq(px_info_int(c, "limiter_refusal_cache_hits"), 0);
    cr_assert_eq(px_cmdstat_calls(d, "fcall"), calls + 100,
                 "every refusal went to Redis");
    redisFree(d);
    redisFree(c);
}

/* Sends `cmd` through `c` `n` times, alternating CHECK and PEEK of `path`
 * (cmd is "CHECK"), and checks each is refused with the fields of Redis's
 * refusal `first`, its waits only ever shorter, mostly without calling
 * Redis (mostly_cached). */
static void cached_refusals(redisContext *c, redisContext *d, const char *path,
                            const long long first[5], int n)
{
    long long v[5], calls = px_cmdstat_calls(d, "fcall");
    long long hits = px_info_int(c, "limiter_refusal_cache_hits");

    for (int i = 0; i < n; i++) {
        five(px_cmd(c, "LIMITER %s %s", i % 2 ? "PEEK" : "CHECK", path), v,
             path);
        cr_assert(v[0] == 1 && v[1] == first[1] && v[2] == first[2] &&
                      v[3] <= first[3] && v[3] > first[3] - 60 &&
                      v[4] <= first[4] && v[4] > first[4] - 60,
                  "%s: cached %lld %lld %lld %lld %lld, Redis said %lld %lld "
                  "%lld %lld %lld",
                  path, v[0], v[1], v[2], v[3], v[4], first[0], first[1],
                  first[2], first[3], first[4]);
    }
    mostly_cached(c, d, hits, calls, n, path);
}

Test(it_refusal, a_refused_fixed_window_is_answered_without_redis,
     .init = init_tree, .fini = fini_second, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    redisContext *p2 = px_connect(second.port);
    redisContext *d = px_redis_connect(&px_env()->redis, NULL);
    long long v[5], first[5], inval;
    int i;

    five(px_cmd(c, "LIMITER CHECK fw:ann"), v, "first");
    cr_assert_eq(v[0], 0);
    until_cached(c, "LIMITER CHECK fw:ann", first);
    /* The window (start, count) and the override hash (absent). */
    cr_assert_eq(px_info_int(c, "limiter_refusal_cache_keys"), 2);
    cr_assert(first[1] == 1 && first[2] == 0 && first[3] > 3600 &&
                  first[4] == first[3],
              "Redis's refusal: %lld %lld %lld %lld %lld", first[0], first[1],
              first[2], first[3], first[4]);
    cached_refusals(c, d, "fw:ann", first, 100);
    /* A COST over the limit never passes: Redis says so once, and the
     * cache from then on (a retry of -1). */
    five(px_cmd(c, "LIMITER CHECK fw:ann COST 2"), v, "cost 2");
    cr_assert(v[0] == 1 && v[3] == -1);

    /* A window of another identity counted meanwhile changes nothing;
     * an admission in this one (through the other proxy, after a RESET
     * there) reaches this cache. */
    five(px_cmd(c, "LIMITER CHECK fw:bob"), v, "bob");
    cr_assert_eq(v[0], 0);
    cached_refusals(c, d, "fw:ann", first, 10);
    inval = px_info_int(c, "limiter_refusal_cache_invalidations");
    px_check_int(px_cmd_admin(p2, "LIMITER RESET fw:ann"), 1);
    px_wait_refusal_invalidation(c, inval, "LIMITER RESET");
    five(px_cmd(c, "LIMITER CHECK fw:ann"), v, "after reset");
    cr_assert_eq(v[0], 0, "reset, yet refused");
    /* What this proxy admitted, Redis counted once. */
    px_check_str(px_cmd(d, "HGET cellgate:{fw:ann}#0:fixed_window count"), "1");

    /* A direct HSET of the count (a refund would do the same) reaches
     * the cache too: 0 counted, so the next check passes. */
    until_cached(c, "LIMITER CHECK fw:ann", first);
    inval = px_info_int(c, "limiter_refusal_cache_invalidations");
    px_check_int(px_cmd(d, "HSET cellgate:{fw:ann}#0:fixed_window count 0"), 0);
    px_wait_refusal_invalidation(c, inval, "HSET");
    for (i = 0; i < 2; i++) {
        five(px_cmd(c, "LIMITER CHECK fw:ann"), v, "after hset");
        cr_assert_eq(v[0], i, "call %d after the count went to 0", i);
    }

    /* A RESET through this proxy, with a check pipelined behind it: the
     * check sees the reset, though no invalidation came yet. */
    px_check_status(px_cmd(c, "AUTH admin " PX_ADMIN_PASSWORD), "OK");
    until_cached(c, "LIMITER CHECK fw:ann", first);
    redisAppendCommand(c, "LIMITER RESET fw:ann");
    redisAppendCommand(c, "LIMITER CHECK fw:ann");
    px_check_int(px_next(c), 1);
    five(px_next(c), v, "pipelined behind the reset");
    cr_assert_eq(v[0], 0, "reset in the same pipeline, yet refused");
    redisFree(d);
    redisFree(p2);
    redisFree(c);
}

Test(it_refusal, a_window_under_a_gcra_level_is_cached_as_redis_answers,
     .init = init_tree, .fini = fini_second, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    redisContext *d = px_redis_connect(&px_env()->redis, NULL);
    long long v[5], first[5];

    /* The GCRA level refuses; the window above it admits and shows 4
     * left (its state without this request). */
    five(px_cmd(c, "LIMITER CHECK mix:ann:t"), v, "first");
    cr_assert_eq(v[0], 0);
    until_cached(c, "LIMITER CHECK mix:ann:t", first);
    /* Two keys and the override hash. */
    cr_assert_eq(px_info_int(c, "limiter_refusal_cache_keys"), 3);
    cached_refusals(c, d, "mix:ann:t", first, 100);
    px_check_str(px_cmd(d, "HGET cellgate:{mix:ann}#0:fixed_window count"),
                 "1");

    /* The window level alone admits (4 left): Redis decides. */
    five(px_cmd(c, "LIMITER CHECK mix:ann"), v, "window alone");
    cr_assert(v[0] == 0 && v[2] == 3, "%lld %lld", v[0], v[2]);
    redisFree(d);
    redisFree(c);
}

/* The fixed window stored at `key`: its start (us) and count; 0 when
 * there is none. */
static int stored_window(redisContext *d, const char *key, int64_t *start_us,
                         long long *count)
{
    redisReply *r = px_cmd(d, "HMGET %s start count", key);
    int have;

    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    have = r->element[0]->type == REDIS_REPLY_STRING;
    *start_us = have ? atoll(r->element[0]->str) : 0;
    *count = have ? atoll(r->element[1]->str) : 0;
    freeReplyObject(r);
    return have;
}

/* Two proxies take turns on one 200 ms window of 3 while windows end:
 * every refusal (many from the caches) is one Redis makes, every
 * admission is counted, and no window admits more than 3. */
Test(it_refusal, two_proxies_on_windows_that_end_answer_as_redis,
     .init = init_tree, .fini = fini_second, .timeout = 120)
{
    static const char key[] = "cellgate:{fast:x}#0:fixed_window";
    const int64_t window_us = 200000;
    redisContext *px[2];
    redisContext *d = px_redis_connect(&px_env()->redis, NULL);
    int64_t starts[64];
    int counted[64], nwin = 0, after_hit = 0, i, j;
    long long hits = 0;

    px[0] = px_connect(px_env()->proxy.port);
    px[1] = px_connect(second.port);
    for (i = 0; i < 20000 && nwin < 8; i++) {
        redisContext *c = px[i % 2];
        long long h0 = px_info_int(c, "limiter_refusal_cache_hits");
        int64_t t0 = redis_now(d) / 1000, start;
        long long v[5], count;
        int peek = i % 3 == 2, have, hit;

        five(px_cmd(c, "LIMITER %s fast:x", peek ? "PEEK" : "CHECK"), v,
             "fast");
        hit = px_info_int(c, "limiter_refusal_cache_hits") != h0;
        hits += hit;
        have = stored_window(d, key, &start, &count);
        cr_assert_eq(v[1], 3);
        if (v[0] == 1) {
            /* Redis refuses only in a window holding 3 that had not
             * ended when the call was sent. A refusal just before the
             * window ends may find the key expired by the time it is
             * read: then the window is the last one that admitted. */
            if (!have && nwin > 0) {
                have = 1;
                start = starts[nwin - 1];
                count = counted[nwin - 1];
            }
            cr_assert(have && count >= 3 && t0 < start + window_us,
                      "call %d (%s) refused: window %lld holds %lld at %lld", i,
                      hit ? "cache" : "Redis", (long long)start, count,
                      (long long)t0);
            cr_assert(v[2] == 0 && v[3] >= 0 && v[3] <= 1);
            after_hit |= hit;
            continue;
        }
        cr_assert(!hit, "call %d: the cache admitted", i);
        if (peek) {
            continue;
        }
        if (!have) {
            /* The window expires as it ends: an admission just before
             * may be gone when it is read, and then its window ended
             * meanwhile (no later call can land in it). */
            int64_t t1 = redis_now(d) / 1000;
            cr_assert(t0 / window_us != t1 / window_us,
                      "call %d admitted, nothing stored", i);
            continue;
        }
        if (after_hit && count == 1) {
            after_hit = 2; /* a window opened after cached refusals */
        }
        for (j = 0; j < nwin && starts[j] != start; j++) {
        }
        if (j == nwin) {
            starts[nwin] = start;
            counted[nwin++] = 0;
        }
        counted[j]++;
        cr_assert_leq(counted[j], 3, "window %lld admitted %d",
                      (long long)start, counted[j]);
        cr_assert_eq(count, counted[j], "window %lld: Redis counted %lld",
                     (long long)start, count);
        px_sleep_ms(POLL_MS);
    }
    cr_assert_gt(hits, 0, "the caches never answered");
    cr_assert_eq(after_hit, 2, "no window opened after cached refusals");
    cr_assert_geq(nwin, 2);
    redisFree(px[1]);
    redisFree(px[0]);
    redisFree(d);
}

/* Redis's PEXPIRETIME of `key` (ms; -1 none, -2 no key). */
static long long expire_time(redisContext *d, const char *key)
{
    redisReply *r = lstate_cmd(d, "PEXPIRETIME %s", key);
    long long v;

    cr_assert_eq(r->type, REDIS_REPLY_INTEGER);
    v = r->integer;
    freeReplyObject(r);
    return v;
}

/* Sends `cmd` through `c` until it is admitted: every refusal must come
 * while Redis still had `key` (a call sent after the key expired finds
 * no key, which admits it), though nothing told the cache the key went
 * (Redis pushes an expiry only when its expiry cycle or a read finds
 * it). Returns the cache hits seen. */
static long long refused_until_expiry(redisContext *c, redisContext *d,
                                      const char *cmd, const char *key)
{
    long long exp = expire_time(d, key), hits = 0, v[5];
    int i;

    cr_assert_gt(exp, 0, "%s has no expiry", key);
    for (i = 0; i < POLLS * 5; i++) {
        long long h = px_info_int(c, "limiter_refusal_cache_hits");
        int64_t t0 = redis_now(d);
        five(px_cmd(c, cmd), v, cmd);
        if (v[0] == 0) {
            return hits;
        }
        hits += px_info_int(c, "limiter_refusal_cache_hits") != h;
        /* Redis deletes a key once its ms clock is past the expiry. */
        cr_assert_lt(t0, (exp + 1) * 1000000,
                     "%s refused %lld ms after its key expired", cmd,
                     (long long)(t0 / 1000000 - exp));
        px_sleep_ms(POLL_MS);
    }
    cr_assert_fail("%s never admitted", cmd);
    return hits;
}

Test(it_refusal, no_refusal_outlives_the_key, .init = init_tree,
     .fini = fini_second, .timeout = 60)
{
    static const char *const cmd[] = {
        "CL.THROTTLE ex 0 1 3600", "LIMITER CHECK fw:ex", "LIMITER CHECK tb:ex",
        "LIMITER CHECK lb:ex",     "LIMITER CHECK sc:ex", "LIMITER CHECK sw:ex",
    };
    static const char *const key[] = {
        "ex",
        "cellgate:{fw:ex}#0:fixed_window",
        "cellgate:{tb:ex}#0:token_bucket",
        "cellgate:{lb:ex}#0:leaky_bucket",
        "cellgate:{sc:ex}#0:sliding_counter",
        "cellgate:{sw:ex}#0:sliding_window",
    };
    redisContext *c = px_connect(px_env()->proxy.port);
    redisContext *d = px_redis_connect(&px_env()->redis, NULL);
    long long v[5], first[5], inval;

    for (size_t k = 0; k < sizeof(cmd) / sizeof(cmd[0]); k++) {
        five(px_cmd(c, cmd[k]), v, cmd[k]);
        cr_assert_eq(v[0], 0);
        until_cached(c, cmd[k], first);
        /* The key goes in 300 ms, long before its state would let a call
         * through: an expiry changed behind the cache's back is pushed
         * (PEXPIRE is a write), but the expiry itself is not, in time.
         * (300 ms leave room, on a loaded host, for learning the key again
         * and still answering from the cache before it goes.) */
        inval = px_info_int(c, "limiter_refusal_cache_invalidations");
        px_check_int(lstate_cmd(d, "PEXPIRE %s 300", key[k]), 1);
        px_wait_refusal_invalidation(c, inval, "PEXPIRE");
        until_cached(c, cmd[k], first);
        cr_assert_gt(refused_until_expiry(c, d, cmd[k], key[k]), 0,
                     "%s: the cache answered no refusal", cmd[k]);
    }
    redisFree(d);
    redisFree(c);
}

/* ---------- Token buckets, leaky buckets, sliding counters and windows --- */

/* A slow limit of the tree: one call empties it, and no refusal of it
 * ends during a test. */
struct slow_limit {
    const char *node;   /* the tree's top segment */
    const char *algo;   /* its key's suffix */
    long long wait_min; /* Redis's first refusal waits more than this (s) */
    long long wait_max; /* and at most this */
    const char *field;  /* an HSET of field to value: room for one call */
    const char *value;  /* (field NULL: the one slot's field of a sliding
                           window) */
};

/* A token comes back in 1000 s, a drip falls in an hour, and a count
 * weighs until the end of the next 3650-day window. */
static const struct slow_limit slow_limits[] = {
    { "tb", "token_bucket", 900, 1000, "tokens", "1" },
    { "lb", "leaky_bucket", 3500, 3600, "level", "0" },
    { "sc", "sliding_counter", 3650LL * 86400, 2 * 3650LL * 86400, "count",
      "0" },
};

/* A count leaves the window an hour after the start of its minute's slot;
 * a slot counting 0 is room for one call. */
static const struct slow_limit slow_window = { "sw", "sliding_window",
                                               3540, 3600,
                                               NULL, "0" };

/* The one slot field of the sliding window at `key` (its start in us),
 * into `out`. */
static void the_slot(redisContext *d, const char *key, char *out, size_t cap)
{
    redisReply *r = px_cmd(d, "HKEYS %s", key);
    size_t i, n = 0;

    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    for (i = 0; i < r->elements; i++) {
        if (strcmp(r->element[i]->str, "total") != 0) {
            snprintf(out, cap, "%s", r->element[i]->str);
            n++;
        }
    }
    cr_assert(n == 1 && r->elements == 2, "%s holds %zu slots and %zu fields",
              key, n, r->elements);
    freeReplyObject(r);
}

/* A COST over the limit never passes: refused with a retry of -1, from the
 * cache's state as well. */
static void cost_over_the_limit(redisContext *c, const char *path)
{
    long long hits = px_info_int(c, "limiter_refusal_cache_hits"), v[5];

    for (int i = 0; i < 3; i++) {
        five(px_cmd(c, "LIMITER CHECK %s COST 2", path), v, path);
        cr_assert(v[0] == 1 && v[1] == 1 && v[3] == -1,
                  "%s COST 2: %lld %lld %lld %lld %lld", path, v[0], v[1], v[2],
                  v[3], v[4]);
    }
    cr_assert_gt(px_info_int(c, "limiter_refusal_cache_hits"), hits,
                 "%s COST 2: the cache answered none", path);
}

/* Writes of the key by anyone reach the cache of `c`: a RESET through the
 * other proxy, and a direct HSET that makes room for one call. */
static void writes_reach_the_cache(redisContext *c, redisContext *p2,
                                   redisContext *d, const struct slow_limit *s,
                                   const char *path)
{
    char check[64], key[96], slot[32];
    const char *field = s->field;
    long long v[5], first[5], inval;

    snprintf(check, sizeof(check), "LIMITER CHECK %s", path);
    snprintf(key, sizeof(key), "cellgate:{%s}#0:%s", path, s->algo);
    inval = px_info_int(c, "limiter_refusal_cache_invalidations");
    px_check_int(px_cmd_admin(p2, "LIMITER RESET %s", path), 1);
    px_wait_refusal_invalidation(c, inval, "LIMITER RESET");
    five(px_cmd(c, check), v, "after reset");
    cr_assert_eq(v[0], 0, "%s: reset, yet refused", path);

    until_cached(c, check, first);
    if (field == NULL) {
        the_slot(d, key, slot, sizeof(slot));
        field = slot;
    }
    inval = px_info_int(c, "limiter_refusal_cache_invalidations");
    px_check_int(px_cmd(d, "HSET %s %s %s", key, field, s->value), 0);
    px_wait_refusal_invalidation(c, inval, "HSET");
    for (int i = 0; i < 2; i++) {
        five(px_cmd(c, check), v, "after hset");
        cr_assert_eq(v[0], i, "%s: call %d after HSET %s %s", path, i, field,
                     s->value);
    }
}

/* The slow limit `s` on the identity ann, through `c` (`p2`: the other
 * proxy): Redis's first refusal, then refusals from the cache alone, a
 * COST over the limit, and writes by others reaching the cache. */
static void slow_refusals_cached(redisContext *c, redisContext *p2,
                                 redisContext *d, const struct slow_limit *s)
{
    char path[32], check[64];
    long long v[5], first[5], keys;

    snprintf(path, sizeof(path), "%s:ann", s->node);
    snprintf(check, sizeof(check), "LIMITER CHECK %s", path);
    keys = px_info_int(c, "limiter_refusal_cache_keys");
    five(px_cmd(c, check), v, "first");
    cr_assert_eq(v[0], 0, "%s: the first call is refused", path);
    until_cached(c, check, first);
    /* The state and the override hash (absent). */
    cr_assert_eq(px_info_int(c, "limiter_refusal_cache_keys"), keys + 2,
                 "%s: cached keys", path);
    cr_assert(first[1] == 1 && first[2] == 0 && first[3] > s->wait_min &&
                  first[3] <= s->wait_max && first[4] == first[3],
              "%s: Redis's refusal: %lld %lld %lld %lld %lld", path, first[0],
              first[1], first[2], first[3], first[4]);
    cached_refusals(c, d, path, first, 100);
    cost_over_the_limit(c, path);
    writes_reach_the_cache(c, p2, d, s, path);
}

/* slow_refusals_cached for a token bucket, a leaky bucket, a sliding
 * counter and a sliding window. */
Test(it_refusal,
     refused_buckets_counters_and_sliding_windows_are_answered_without_redis,
     .init = init_tree, .fini = fini_second, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    redisContext *p2 = px_connect(second.port);
    redisContext *d = px_redis_connect(&px_env()->redis, NULL);

    for (size_t k = 0; k < sizeof(slow_limits) / sizeof(slow_limits[0]); k++) {
        slow_refusals_cached(c, p2, d, &slow_limits[k]);
    }
    /* A sliding window of 1 an hour in slots of a minute. */
    slow_refusals_cached(c, p2, d, &slow_window);
    redisFree(d);
    redisFree(p2);
    redisFree(c);
}

/* Plants at `key` what swmany's script (65 an hour in slots of 1 s)
 * would store after admissions in `n` consecutive seconds ending with
 * Redis's current one: one slot each (start: its second in us), counting 1
 * but the newest, which counts the rest of 65; the total; the expiry when
 * the newest slot leaves the window. */
static void plant_slots(redisContext *d, const char *key, int n)
{
    const char *argv[2 * 70 + 4];
    size_t lens[2 * 70 + 4];
    char words[2 * 70 + 2][24];
    int64_t now_s = redis_now(d) / NS;
    int w = 0, k = 0;
    redisReply *r;

    cr_assert(n >= 1 && n <= 65);
    argv[w++] = "HSET";
    argv[w++] = key;
    for (int i = 0; i < n; i++) {
        snprintf(words[k], sizeof(words[k]), "%lld",
                 (long long)(now_s - i) * 1000000);
        argv[w++] = words[k++];
        snprintf(words[k], sizeof(words[k]), "%d", i == 0 ? 65 - (n - 1) : 1);
        argv[w++] = words[k++];
    }
    argv[w++] = "total";
    argv[w++] = "65";
    for (int i = 0; i < w; i++) {
        lens[i] = strlen(argv[i]);
    }
    r = redisCommandArgv(d, w, argv, lens);
    cr_assert(r != NULL && r->type == REDIS_REPLY_INTEGER &&
                  r->integer == n + 1,
              "HSET of %d slots", n);
    freeReplyObject(r);
    px_check_int(
        px_cmd(d, "PEXPIREAT %s %lld", key, (long long)(now_s + 3600) * 1000),
        1);
}

/* A sliding window of 65 an hour in slots of a second, full, its hash
 * planted with the slots of 64 seconds (and the total): the cache answers
 * its refusals (CHECK and PEEK) as Redis made them. With the slots of 65
 * seconds, more than REFUSAL_SLOTS_MAX: the tracker reads it each time
 * and never caches it, so every refusal is Redis's, one FCALL each. */
Test(it_refusal, a_sliding_window_of_more_than_64_slots_goes_to_redis,
     .init = init_tree, .fini = fini_second, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    redisContext *d = px_redis_connect(&px_env()->redis, NULL);
    long long v[5], first[5], hits, calls, reads;
    int i;

    plant_slots(d, "cellgate:{swmany:s64}#0:sliding_window", 64);
    five(px_cmd(c, "LIMITER CHECK swmany:s64"), v, "64 slots");
    cr_assert(v[0] == 1 && v[1] == 65 && v[2] == 0 && v[3] > 3400 &&
                  v[3] < v[4] && v[4] <= 3600,
              "64 slots: %lld %lld %lld %lld %lld", v[0], v[1], v[2], v[3],
              v[4]);
    /* Redis's refusal, or a later one until the cache answers. */
    memcpy(first, v, sizeof(v));
    until_cached(c, "LIMITER CHECK swmany:s64", first);
    cached_refusals(c, d, "swmany:s64", first, 50);

    plant_slots(d, "cellgate:{swmany:s65}#0:sliding_window", 65);
    hits = px_info_int(c, "limiter_refusal_cache_hits");
    calls = px_cmdstat_calls(d, "fcall");
    reads = px_cmdstat_calls(d, "hgetall");
    for (i = 0; i < 200; i++) {
        five(px_cmd(c, "LIMITER %s swmany:s65", i % 2 ? "PEEK" : "CHECK"), v,
             "65 slots");
        cr_assert(v[0] == 1 && v[1] == 65 && v[2] == 0 && v[3] > 3400 &&
                      v[3] < v[4] && v[4] <= 3600,
                  "65 slots, call %d: %lld %lld %lld %lld %lld", i, v[0], v[1],
                  v[2], v[3], v[4]);
        cr_assert_eq(px_info_int(c, "limiter_refusal_cache_hits"), hits,
                     "65 slots, call %d: answered by the cache", i);
        cr_assert_eq(px_cmdstat_calls(d, "fcall"), calls + i + 1,
                     "65 slots, call %d: not Redis's", i);
        px_sleep_ms(POLL_MS);
    }
    /* The tracker did read the window, again and again: HGETALLs beyond
     * the one each script call makes (Redis counts those too). */
    reads = px_cmdstat_calls(d, "hgetall") - reads -
            (px_cmdstat_calls(d, "fcall") - calls);
    cr_assert_geq(reads, 10, "the tracker read the window %lld times", reads);
    redisFree(d);
    redisFree(c);
}

/* A path of two levels, one of which refuses, after one admitted call. */
struct mix {
    const char *path;            /* the two levels */
    const char *top;             /* the top level alone */
    const char *state;           /* a key of the path, which holds */
    const char *field;           /* in this field */
    const char *stored;          /* this after the first call */
    long long wait_min;          /* Redis's refusal waits more than this (s) */
    long long wait_max;          /* and at most this */
    long long top_limited, left; /* the top level alone, next call */
};

/* Each path of `mixes` refused from the cache as Redis answers it (its
 * two keys and the override hash cached), refusals writing nothing, and
 * the top level alone then decided as Redis does. */
static void mixes_cached(const struct mix *mixes, size_t n)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    redisContext *d = px_redis_connect(&px_env()->redis, NULL);
    char check[64];
    long long v[5], first[5], keys;

    for (size_t k = 0; k < n; k++) {
        snprintf(check, sizeof(check), "LIMITER CHECK %s", mixes[k].path);
        keys = px_info_int(c, "limiter_refusal_cache_keys");
        five(px_cmd(c, check), v, "first");
        cr_assert_eq(v[0], 0);
        until_cached(c, check, first);
        /* Two keys and the override hash. */
        cr_assert_eq(px_info_int(c, "limiter_refusal_cache_keys"), keys + 3,
                     "%s: cached keys", mixes[k].path);
        /* The refusing level has the least remaining: its fields. */
        cr_assert(
            first[1] == 1 && first[2] == 0 && first[3] > mixes[k].wait_min &&
                first[3] <= mixes[k].wait_max,
            "%s: Redis's refusal: %lld %lld %lld %lld %lld", mixes[k].path,
            first[0], first[1], first[2], first[3], first[4]);
        cached_refusals(c, d, mixes[k].path, first, 100);
        px_check_str(px_cmd(d, "HGET %s %s", mixes[k].state, mixes[k].field),
                     mixes[k].stored);
        five(px_cmd(c, "LIMITER CHECK %s", mixes[k].top), v, "top alone");
        cr_assert(v[0] == mixes[k].top_limited && v[2] == mixes[k].left,
                  "%s: %lld %lld", mixes[k].top, v[0], v[2]);
    }
    redisFree(d);
    redisFree(c);
}

/* Levels of several algorithms on one path: tbmix's bucket admits and the
 * GCRA level under it refuses; lbmix's GCRA level admits and the leaky
 * bucket under it refuses. Either refusal is cached as Redis answers it,
 * and the admitting level alone still goes to Redis. */
Test(it_refusal, buckets_under_and_over_gcra_levels_are_cached_as_redis_answers,
     .init = init_tree, .fini = fini_second, .timeout = 60)
{
    static const struct mix mixes[] = {
        { "tbmix:ann:t", "tbmix:ann", "cellgate:{tbmix:ann}#0:token_bucket",
          "tokens", "4", 3500, 3600, 0, 3 },
        { "lbmix:ann:t", "lbmix:ann", "cellgate:{lbmix:ann}:t#0:leaky_bucket",
          "level", "1", 3500, 3600, 0, 4 },
    };

    mixes_cached(mixes, sizeof(mixes) / sizeof(mixes[0]));
}

/* Sliding windows on paths with other algorithms: tbsw's bucket refuses
 * over a window that admits (the reply needs the window's slots too, as
 * the tracker read them), swgcra's window admits over a GCRA level that
 * refuses, gcrasw's GCRA level admits over a window that refuses. Each
 * refusal is cached as Redis answers it; the top level alone is then
 * refused (the empty bucket) or admitted by Redis. */
Test(it_refusal,
     sliding_windows_under_and_over_other_levels_are_cached_as_redis_answers,
     .init = init_tree, .fini = fini_second, .timeout = 60)
{
    static const struct mix mixes[] = {
        { "tbsw:ann:t", "tbsw:ann", "cellgate:{tbsw:ann}:t#0:sliding_window",
          "total", "1", 900, 1000, 1, 0 },
        { "swgcra:ann:t", "swgcra:ann",
          "cellgate:{swgcra:ann}#0:sliding_window", "total", "1", 3500, 3600, 0,
          3 },
        { "gcrasw:ann:t", "gcrasw:ann",
          "cellgate:{gcrasw:ann}:t#0:sliding_window", "total", "1", 3500, 3600,
          0, 4 },
    };

    mixes_cached(mixes, sizeof(mixes) / sizeof(mixes[0]));
}

/* Values of a state: three fields, or a sliding window's slots as (start,
 * count) pairs, oldest first, zeros after the last. */
#define HVALUES 8

/* What a model decides, its state as Redis stores it (times in us). */
struct hresult {
    struct rl_decision d;
    int64_t next[HVALUES]; /* the state after the decision */
    int64_t total;         /* a sliding window's: the sum of next's counts */
    int write;             /* 1: a check stores next */
};

struct hlimit;

/* The C model of a limit on its stored fields `st` (NULL: no key). 0, or
 * the model's error. */
typedef int (*hdecide_fn)(const struct hlimit *lim, const int64_t *st,
                          int64_t now_ns, int64_t cost, struct hresult *out);

/* A fast limit of the tree, whose state is a hash of integers. */
struct hlimit {
    const char *node;      /* the tree's top segment */
    const char *algo;      /* its key's suffix */
    const char *fields[4]; /* the hash's fields in the model's order */
    int64_t a, b, c;       /* its parameters, in the conf's units */
    hdecide_fn decide;
    int slots; /* a sliding window: fields are slot starts, and "total" */
};

static int tb_decide(const struct hlimit *lim, const int64_t *st,
                     int64_t now_ns, int64_t cost, struct hresult *out)
{
    struct token_bucket_params p;
    struct token_bucket_state s = { 0 };
    struct token_bucket_result r;
    const char *err;
    int rc = token_bucket_params_init(&p, lim->a, lim->b, &err);

    if (st != NULL) {
        s.tokens = st[0];
        s.frac = st[1];
        s.ts_ns = st[2] * 1000;
    }
    if (rc == TOKEN_BUCKET_OK) {
        rc = token_bucket_decide(&p, st != NULL ? &s : NULL, now_ns, cost, &r,
                                 &err);
    }
    if (rc == TOKEN_BUCKET_OK) {
        out->d = r.d;
        out->next[0] = r.next.tokens;
        out->next[1] = r.next.frac;
        out->next[2] = r.next.ts_ns / 1000;
        out->write = r.write == TOKEN_BUCKET_WRITE_SET;
    }
    return rc;
}

static int lb_decide(const struct hlimit *lim, const int64_t *st,
                     int64_t now_ns, int64_t cost, struct hresult *out)
{
    struct leaky_bucket_params p;
    struct leaky_bucket_state s = { 0, 0 };
    struct leaky_bucket_result r;
    const char *err;
    int rc = leaky_bucket_params_init(&p, lim->a, lim->b, lim->c, &err);

    if (st != NULL) {
        s.level = st[0];
        s.ts_ns = st[1] * 1000;
    }
    if (rc == LEAKY_BUCKET_OK) {
        rc = leaky_bucket_decide(&p, st != NULL ? &s : NULL, now_ns, cost, &r,
                                 &err);
    }
    if (rc == LEAKY_BUCKET_OK) {
        out->d = r.d;
        out->next[0] = r.next.level;
        out->next[1] = r.next.ts_ns / 1000;
        out->next[2] = 0;
        out->write = r.write == LEAKY_BUCKET_WRITE_SET;
    }
    return rc;
}

static int sc_decide(const struct hlimit *lim, const int64_t *st,
                     int64_t now_ns, int64_t cost, struct hresult *out)
{
    struct sliding_counter_params p;
    struct sliding_counter_state s = { 0, 0, 0 };
    struct sliding_counter_result r;
    const char *err;
    int rc = sliding_counter_params_init(&p, lim->a, lim->b, &err);

    if (st != NULL) {
        s.start_ns = st[0] * 1000;
        s.count = st[1];
        s.prev = st[2];
    }
    if (rc == SLIDING_COUNTER_OK) {
        rc = sliding_counter_decide(&p, st != NULL ? &s : NULL, now_ns, cost,
                                    &r, &err);
    }
    if (rc == SLIDING_COUNTER_OK) {
        out->d = r.d;
        out->next[0] = r.next.start_ns / 1000;
        out->next[1] = r.next.count;
        out->next[2] = r.next.prev;
        out->write = r.write == SLIDING_COUNTER_WRITE_SET;
    }
    return rc;
}

static int sw_decide(const struct hlimit *lim, const int64_t *st,
                     int64_t now_ns, int64_t cost, struct hresult *out)
{
    /* Room for any window's slots (the model's scratch). */
    static struct sliding_window_slot next[SLIDING_WINDOW_MAX_SLOTS];
    struct sliding_window_params p;
    struct sliding_window_slot in[HVALUES / 2];
    struct sliding_window_result r;
    const char *err;
    size_t n = 0, i;
    int rc = sliding_window_params_init(&p, lim->a, lim->b, lim->c, &err);

    /* A key holds at least "total": no slots is no NULL. */
    for (i = 0; st != NULL && i < HVALUES / 2 && st[2 * i + 1] > 0; i++) {
        in[n].start_ns = st[2 * i] * 1000;
        in[n++].count = st[2 * i + 1];
    }
    if (rc == SLIDING_WINDOW_OK) {
        rc = sliding_window_decide(&p, st != NULL ? in : NULL, n, now_ns, cost,
                                   next, SLIDING_WINDOW_MAX_SLOTS, &r, &err);
    }
    if (rc == SLIDING_WINDOW_OK) {
        cr_assert_leq(r.next_n, HVALUES / 2, "%zu slots", r.next_n);
        out->d = r.d;
        for (i = 0; i < r.next_n; i++) {
            out->next[2 * i] = next[i].start_ns / 1000;
            out->next[2 * i + 1] = next[i].count;
        }
        out->total = r.total;
        out->write = r.write == SLIDING_WINDOW_WRITE_SET;
    }
    return rc;
}

/* 3 at once, then: 10 tokens a second; a drip of 1 every 100 ms; 3 per
 * sliding 300 ms. Refusals last up to a few hundred ms. */
static const struct hlimit fast_limits[] = {
    { .node = "tbf",
      .algo = "token_bucket",
      .fields = { "tokens", "frac", "ts", NULL },
      .a = 3,        /* capacity */
      .b = 10000000, /* refill_per_sec, in millionths */
      .decide = tb_decide },
    { .node = "lbf",
      .algo = "leaky_bucket",
      .fields = { "level", "ts", NULL },
      .a = 3,   /* size */
      .b = 100, /* drip_ms */
      .c = 1,   /* drip_size */
      .decide = lb_decide },
    { .node = "scf",
      .algo = "sliding_counter",
      .fields = { "start", "count", "prev", NULL },
      .a = 3,   /* max */
      .b = 300, /* window_ms */
      .decide = sc_decide },
};

/* 3 per sliding 300 ms in slots of 100 ms, and of 20 ms: calls a few ms
 * apart mostly fill one slot of the first (its refusals end as the key
 * expires), several of the second (they end as the oldest slot leaves
 * the window, the key still there). */
static const struct hlimit fast_windows[] = {
    { .node = "swf",
      .algo = "sliding_window",
      .a = 3,   /* max */
      .b = 300, /* window_ms */
      .c = 100, /* resolution_ms */
      .decide = sw_decide,
      .slots = 1 },
    { .node = "swfine",
      .algo = "sliding_window",
      .a = 3,   /* max */
      .b = 300, /* window_ms */
      .c = 20,  /* resolution_ms */
      .decide = sw_decide,
      .slots = 1 },
};

/* A key's state at one instant of Redis, read in one script. */
struct hstate {
    int have;           /* 0: no key */
    int64_t v[HVALUES]; /* its fields in the model's order, as stored (a
                           sliding window's slots: see HVALUES) */
    int64_t total;      /* a sliding window's "total" */
    long long exp_ms;   /* its PEXPIRETIME */
    int64_t now_us;     /* Redis's TIME */
};

static const char snapshot_lua[] =
    "local t = redis.call('TIME') "
    "return {t[1], t[2], redis.call('PEXPIRETIME', KEYS[1]), "
    "redis.call('HGETALL', KEYS[1])}";

/* A sliding window's hash `h` into s: its slots sorted, as the scripts
 * store them (canonical decimals, counts of at least 1, a total that is
 * their sum). */
static void snapshot_slots(const char *key, const redisReply *h,
                           struct hstate *s)
{
    int64_t sum = 0;
    size_t n = 0, i, j;
    int total = 0;

    for (i = 0; i + 1 < h->elements; i += 2) {
        const char *f = h->element[i]->str;
        long long x = atoll(f), cnt = atoll(h->element[i + 1]->str);
        char canon[32];

        if (strcmp(f, "total") == 0) {
            s->total = cnt;
            total = 1;
            continue;
        }
        snprintf(canon, sizeof(canon), "%lld", x);
        cr_assert(strcmp(canon, f) == 0 && x >= 0 && cnt >= 1,
                  "%s holds a slot %s of %s", key, f, h->element[i + 1]->str);
        cr_assert_lt(n, HVALUES / 2, "%s holds more than %d slots", key,
                     HVALUES / 2);
        for (j = n; j > 0 && s->v[2 * (j - 1)] > x; j--) {
            s->v[2 * j] = s->v[2 * (j - 1)];
            s->v[2 * j + 1] = s->v[2 * (j - 1) + 1];
        }
        s->v[2 * j] = x;
        s->v[2 * j + 1] = cnt;
        sum += cnt;
        n++;
    }
    cr_assert(!s->have || (total && s->total == sum),
              "%s: total %lld, slots summing to %lld", key, (long long)s->total,
              (long long)sum);
}

static void snapshot(redisContext *d, const struct hlimit *lim, const char *key,
                     struct hstate *s)
{
    redisReply *r = px_cmd(d, "EVAL %s 1 %s", snapshot_lua, key);
    redisReply *h;
    size_t n = 0, i;

    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 4,
              "snapshot of %s: %s", key,
              r->type == REDIS_REPLY_ERROR ? r->str : "");
    memset(s, 0, sizeof(*s));
    s->now_us = atoll(r->element[0]->str) * 1000000 + atoll(r->element[1]->str);
    s->exp_ms = r->element[2]->integer;
    h = r->element[3];
    s->have = h->elements > 0;
    if (lim->slots) {
        snapshot_slots(key, h, s);
        freeReplyObject(r);
        return;
    }
    for (i = 0; i + 1 < h->elements; i += 2) {
        int f = 0;
        while (lim->fields[f] != NULL &&
               strcmp(lim->fields[f], h->element[i]->str) != 0) {
            f++;
        }
        cr_assert_not_null(lim->fields[f], "%s holds a field %s", key,
                           h->element[i]->str);
        s->v[f] = atoll(h->element[i + 1]->str);
    }
    while (lim->fields[n] != NULL) {
        n++;
    }
    cr_assert(!s->have || h->elements == 2 * n, "%s holds %zu fields", key,
              h->elements / 2);
    freeReplyObject(r);
}

/* The model's decision for `cost` on the state `s` at `us`. */
static void hdecide(const struct hlimit *lim, const struct hstate *s,
                    int64_t us, long long cost, struct hresult *out)
{
    int rc;

    memset(out, 0, sizeof(*out));
    rc = lim->decide(lim, s->have ? s->v : NULL, us * 1000, cost, out);

    if (rc != 0) {
        cr_assert_fail("%s: the model fails (%d)", lim->algo, rc);
    }
}

static void reply_of(const struct hresult *res, long long out[5])
{
    int64_t v[5];

    rl_reply_ints(&res->d, v);
    for (int i = 0; i < 5; i++) {
        out[i] = v[i];
    }
}

/* s1 is s0 untouched: the same fields and expiry, or no key once s0's
 * expiry passed (Redis deletes a key when its ms clock is past it). */
static int same_state(const struct hstate *s0, const struct hstate *s1)
{
    if (s0->have && !s1->have) {
        return s1->now_us / 1000 >= s0->exp_ms;
    }
    return s0->have == s1->have &&
           (!s0->have || (memcmp(s0->v, s1->v, sizeof(s0->v)) == 0 &&
                          s0->total == s1->total && s0->exp_ms == s1->exp_ms));
}

/* s1 holds what a check decided as `res` stored: its state, or no key
 * once that state was back to none (the key expires no sooner). */
static int stored_as(const struct hlimit *lim, const struct hresult *res,
                     const struct hstate *s1)
{
    struct hstate next;
    struct hresult later;

    if (s1->have) {
        return memcmp(res->next, s1->v, sizeof(s1->v)) == 0 &&
               (!lim->slots || res->total == s1->total);
    }
    memset(&next, 0, sizeof(next));
    next.have = 1;
    memcpy(next.v, res->next, sizeof(next.v));
    hdecide(lim, &next, s1->now_us, 0, &later);
    return later.d.reset_after_ns == 0;
}

/* The first instant of the bracket (s0, s1) at which the model on s0
 * replies `got` and, for a check it admits, stores what s1 holds; -1 when
 * there is none. Nothing but this call writes the key meanwhile. */
static int64_t redis_instant(const struct hlimit *lim, const struct hstate *s0,
                             const struct hstate *s1, long long cost, int peek,
                             const long long got[5])
{
    for (int64_t t = s0->now_us; t <= s1->now_us; t++) {
        struct hresult res;
        long long m[5];

        hdecide(lim, s0, t, cost, &res);
        reply_of(&res, m);
        if (memcmp(m, got, sizeof(m)) == 0 &&
            (peek || !res.write || stored_as(lim, &res, s1))) {
            return t;
        }
    }
    return -1;
}

/* A refusal the cache answered: one Redis makes at the bracket's start
 * (so at every later instant), its fields those of that state at a later
 * instant (the cache's clock is an upper bound) or of an older one (the
 * other proxy's write not pushed yet): no less remaining (and still less
 * than the cost), no longer waits. */
static void check_cached(const struct hlimit *lim, const struct hstate *s0,
                         long long cost, const long long got[5],
                         const char *ctx)
{
    struct hresult res;
    long long m[5];

    hdecide(lim, s0, s0->now_us, cost, &res);
    reply_of(&res, m);
    cr_assert_eq(got[0], 1, "%s: the cache admitted", ctx);
    cr_assert_eq(m[0], 1, "%s: the cache refused what Redis admits", ctx);
    cr_assert(got[1] == m[1] && got[2] >= m[2] && got[2] < cost &&
                  got[3] >= 0 && got[3] <= m[3] && got[4] >= 0 &&
                  got[4] <= m[4],
              "%s: cached %lld %lld %lld %lld %lld, Redis at the start "
              "%lld %lld %lld %lld %lld",
              ctx, got[0], got[1], got[2], got[3], got[4], m[0], m[1], m[2],
              m[3], m[4]);
}

/* The two proxies, Redis, and what they counted so far. */
struct hrun {
    const struct hlimit *lim;
    redisContext *px[2];
    redisContext *d;
    char path[32], key[64];
    long long hits[2]; /* each proxy's cache hits */
    long long fcalls;  /* Redis's FCALLs */
};

/* Whether the call through `who` was answered by its cache: then no FCALL
 * reached Redis, else one at least. */
static int answered_by_cache(struct hrun *r, int who, const char *ctx)
{
    long long hits = px_info_int(r->px[who], "limiter_refusal_cache_hits");
    long long fcalls = px_cmdstat_calls(r->d, "fcall");
    int hit = hits != r->hits[who];

    cr_assert(hits - r->hits[who] <= 1 &&
                  (hit ? fcalls == r->fcalls : fcalls > r->fcalls),
              "%s: %lld cache hits, %lld FCALLs", ctx, hits - r->hits[who],
              fcalls - r->fcalls);
    r->hits[who] = hits;
    r->fcalls = fcalls;
    return hit;
}

/* One call through proxy `who`, bracketed by snapshots of the key. A
 * refusal or a PEEK leaves the key as it was; a reply from Redis is the
 * model's at an instant of the call, a reply from the cache a refusal
 * Redis makes (check_cached). Returns the limited flag, *hit whether the
 * cache answered. */
static int hcall(struct hrun *r, int who, long long cost, int peek, int *hit,
                 const char *ctx)
{
    struct hstate s0, s1;
    long long got[5];

    snapshot(r->d, r->lim, r->key, &s0);
    five(px_cmd(r->px[who], "LIMITER %s %s COST %lld", peek ? "PEEK" : "CHECK",
                r->path, cost),
         got, ctx);
    snapshot(r->d, r->lim, r->key, &s1);
    *hit = answered_by_cache(r, who, ctx);
    if (got[0] == 1 || peek) {
        cr_assert(same_state(&s0, &s1),
                  "%s: a refusal or a PEEK changed the key (%d %lld %lld "
                  "%lld exp %lld -> %d %lld %lld %lld exp %lld)",
                  ctx, s0.have, (long long)s0.v[0], (long long)s0.v[1],
                  (long long)s0.v[2], s0.exp_ms, s1.have, (long long)s1.v[0],
                  (long long)s1.v[1], (long long)s1.v[2], s1.exp_ms);
    }
    if (*hit) {
        check_cached(r->lim, &s0, cost, got, ctx);
        return 1;
    }
    cr_assert_geq(redis_instant(r->lim, &s0, &s1, cost, peek, got), 0,
                  "%s: Redis replied %lld %lld %lld %lld %lld and holds "
                  "%d %lld %lld %lld, the model on %d %lld %lld %lld says "
                  "neither at %lld us nor up to %lld us",
                  ctx, got[0], got[1], got[2], got[3], got[4], s1.have,
                  (long long)s1.v[0], (long long)s1.v[1], (long long)s1.v[2],
                  s0.have, (long long)s0.v[0], (long long)s0.v[1],
                  (long long)s0.v[2], (long long)s0.now_us,
                  (long long)s1.now_us);
    return (int)got[0];
}

/* Two proxies take random turns on one identity of `lim`: random costs,
 * CHECK or PEEK, random pauses, across the instants at which refusals
 * end. */
static void two_proxies_on(const struct hlimit *lim, unsigned seed)
{
    struct hrun r = { .lim = lim };
    int last_hit = 0, refused = 0, after_hit = 0, hit;
    long long hits = 0;
    char ctx[96];

    r.px[0] = px_connect(px_env()->proxy.port);
    r.px[1] = px_connect(second.port);
    r.d = px_redis_connect(&px_env()->redis, NULL);
    snprintf(r.path, sizeof(r.path), "%s:x", lim->node);
    snprintf(r.key, sizeof(r.key), "cellgate:{%s}#0:%s", r.path, lim->algo);
    for (int k = 0; k < 2; k++) {
        r.hits[k] = px_info_int(r.px[k], "limiter_refusal_cache_hits");
    }
    r.fcalls = px_cmdstat_calls(r.d, "fcall");
    srand(seed);
    for (int i = 0; i < 250; i++) {
        int who = rand() % 2, peek = rand() % 4 == 0;
        long long cost = rand() % 4 == 0 ? 2 : 1;

        snprintf(ctx, sizeof(ctx), "%s call %d via %d: %s COST %lld", r.path, i,
                 who, peek ? "PEEK" : "CHECK", cost);
        int limited = hcall(&r, who, cost, peek, &hit, ctx);
        refused += limited;
        hits += hit;
        after_hit += last_hit && !limited;
        last_hit = hit;
        if (rand() % 3 == 0) {
            px_sleep_ms(rand() % 40);
        }
    }
    cr_assert_gt(refused, 0, "%s: nothing refused", r.path);
    cr_assert_gt(hits, 0, "%s: the caches never answered", r.path);
    cr_assert_gt(after_hit, 0, "%s: no admission after a cached refusal",
                 r.path);
    redisFree(r.d);
    redisFree(r.px[1]);
    redisFree(r.px[0]);
}

Test(it_refusal, two_proxies_on_buckets_and_counters_answer_as_redis,
     .init = init_tree, .fini = fini_second, .timeout = 180)
{
    for (size_t k = 0; k < sizeof(fast_limits) / sizeof(fast_limits[0]); k++) {
        two_proxies_on(&fast_limits[k], 7 + (unsigned)k);
    }
    px_proxy_stop_clean(&second, SIGTERM);
}

/* Two proxies take random turns on sliding windows of 3 per 300 ms, as on
 * the buckets and counters: Redis's replies are the model's on the slots
 * it holds, the caches' refusals the model's at the start of their
 * calls. */
Test(it_refusal, two_proxies_on_sliding_windows_answer_as_redis,
     .init = init_tree, .fini = fini_second, .timeout = 120)
{
    for (size_t k = 0; k < sizeof(fast_windows) / sizeof(fast_windows[0]);
         k++) {
        two_proxies_on(&fast_windows[k], 31 + (unsigned)k);
    }
    px_proxy_stop_clean(&second, SIGTERM);
}
