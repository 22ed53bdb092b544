/* algorithms/lua/concurrency.lua (through limiter.lua) against the C model
 * algorithms/concurrency.c, on a real redis-server at an explicit clock: a
 * random walk of CHECKs (costs 0, 1 and more), PEEKs with and without a
 * token, RELEASEs and refunds over a handful of tokens, each step's entry
 * equal to the model's decision and the ZSET's live members equal to the
 * model's holders. A direct differential test rather than a twin_walk
 * descriptor: the walk's steps carry no token. The seed is printed;
 * PX_LUA_TWIN_SEED replays it. */
#include "tests/integration/fixture.h"
#include "tests/integration/lua_twin.h"
#include "tests/integration/twin_walk.h"
#include "tests/support/px_test.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/concurrency.h"

PX_TEST_SUITE(it_lua_concurrency);

#define STEPS 600
#define CAP   8 /* holders: at most max (3) and a new one */

static const char *const tokens[] = { "a", "b", "c", "d", "e" };
#define NTOK (sizeof(tokens) / sizeof(tokens[0]))

/* The key as the model holds it (tokens point at `tokens`). */
struct cc_mem {
    struct concurrency_holder h[CAP];
    size_t n;
};

static void it_init(void)
{
    px_redis_start(&px_env()->redis, NULL);
}

/* Applies a model result's write to m. */
static void apply(struct cc_mem *m, const struct concurrency_result *r,
                  const struct concurrency_holder *next)
{
    if (r->write == CONCURRENCY_WRITE_SET) {
        memcpy(m->h, next, r->next_n * sizeof(*next));
        m->n = r->next_n;
    } else if (r->write == CONCURRENCY_WRITE_DEL) {
        m->n = 0;
    }
}

/* Asserts the live members of the ZSET `st` (ZRANGE WITHSCORES read
 * right after the script) at now_us, those scored after it, are the
 * model's holders with their lease ends. */
static void expect_set(const redisReply *st, const struct cc_mem *m,
                       int64_t now_us, const char *ctx)
{
    size_t live = 0, seen = 0, i, j;

    cr_assert_eq(st->type, REDIS_REPLY_ARRAY, "%s", ctx);
    for (i = 0; i < m->n; i++) {
        live += m->h[i].until_ns > now_us * 1000;
    }
    for (j = 0; j < st->elements; j += 2) {
        int64_t score = strtoll(st->element[j + 1]->str, NULL, 10);
        int found = 0;
        if (score <= now_us) {
            continue; /* expired: left until a write drops it */
        }
        seen++;
        for (i = 0; i < m->n && !found; i++) {
            found =
                m->h[i].len == st->element[j]->len &&
                memcmp(m->h[i].token, st->element[j]->str, m->h[i].len) == 0 &&
                m->h[i].until_ns / 1000 == score;
        }
        cr_assert(found, "%s: member %s %s not in the model", ctx,
                  st->element[j]->str, st->element[j + 1]->str);
    }
    cr_assert_eq(seen, live, "%s: %zu live members, model %zu", ctx, seen,
                 live);
}

/* Runs the script in MULTI with the set's read and PERSIST (the walk's
 * clock is not the wall's, which must not expire the key): 0 with *o, or
 * -1 with err. Then *m becomes `base` with the model's write r (NULL:
 * none) applied, and the set must hold it. */
static int call(redisContext *c, const char *mode, const char *const pa[4],
                int64_t now, int64_t cost, const char *undo,
                struct lua_twin_out *o, char *err, size_t errlen,
                struct cc_mem base, const struct concurrency_result *r,
                const struct concurrency_holder *next, struct cc_mem *m,
                const char *ctx)
{
    struct lua_twin_txn tx;

    lua_twin_call_multi(c, mode, "k", "concurrency", pa, now, cost, undo,
                        "ZRANGE %s 0 -1 WITHSCORES", &tx, ctx);
    if (tx.failed) {
        snprintf(err, errlen, "%s", tx.err);
        freeReplyObject(tx.exec);
        return -1;
    }
    *o = tx.out;
    *m = base;
    if (r != NULL) {
        apply(m, r, next);
    }
    if (r != NULL && r->took != 0 && strcmp(pa[3], "release") != 0) {
        /* A take or renewal sets the TTL to the last lease end. */
        cr_assert(tx.pttl > 0 && tx.pttl <= r->expiry_ms,
                  "%s: pttl %lld, model %" PRId64, ctx, tx.pttl, r->expiry_ms);
    }
    expect_set(tx.state, m, now, ctx);
    freeReplyObject(tx.exec);
    return 0;
}

Test(it_lua_concurrency, random_checks_and_releases_match_the_c_model,
     .init = it_init, .fini = px_env_fini, .timeout = 120)
{
    /* Leases the wall clock cannot end inside one transaction. */
    static const int64_t leases[] = { 200, 1000, 5000, 60000 };
    uint64_t s = lua_twin_seed("it_lua_concurrency", "PX_LUA_TWIN_SEED");
    redisContext *c = lua_twin_connect();
    struct cc_mem m = { 0 };
    struct concurrency_params p;
    int64_t now = TWIN_T0, max = 2, lease = 200;
    char smax[24], slease[24], ctx[160], err[256];
    int tally[4] = { 0 };
    const char *e = NULL;

    for (int step = 0; step < STEPS; step++) {
        struct concurrency_holder next[CAP];
        struct concurrency_result r;
        struct lua_twin_out o;
        const char *tok = tokens[lua_twin_rnd_in(&s, 0, NTOK - 1)];
        const char *pa[4];
        int op = (int)lua_twin_rnd_in(&s, 0, 9), rc;
        int64_t cost =
            lua_twin_rnd_in(&s, 0, 4) == 0 ? 0 : lua_twin_rnd_in(&s, 1, 3);

        if (step % 150 == 0) {
            /* New parameters on the same key (max may drop under its
             * holders, a lease shrink under live ones). */
            max = lua_twin_rnd_in(&s, 1, 3);
            lease = leases[lua_twin_rnd_in(&s, 0, 3)];
        }
        now += lua_twin_rnd_in(&s, 0, lease * 700);
        cr_assert_eq(concurrency_params_init(&p, max, lease, &e),
                     CONCURRENCY_OK);
        snprintf(smax, sizeof(smax), "%" PRId64, max);
        snprintf(slease, sizeof(slease), "%" PRId64, lease);
        pa[0] = smax;
        pa[1] = slease;
        pa[2] = tok;
        pa[3] = "";
        snprintf(ctx, sizeof(ctx),
                 "step %d op %d tok %s cost %" PRId64 " max %" PRId64
                 " lease %" PRId64,
                 step, op, tok, cost, max, lease);
        if (op <= 5) { /* CHECK, sometimes refunded */
            struct cc_mem pre = m;
            cr_assert_eq(concurrency_decide(&p, m.h, m.n, tok, 1, now * 1000,
                                            cost, next, CAP, &r, &e),
                         CONCURRENCY_OK);
            rc = call(c, "check", pa, now, cost, NULL, &o, err, sizeof(err),
                      pre, &r, next, &m, ctx);
            cr_assert_eq(rc, 0, "%s: %s", ctx, err);
            lua_twin_expect(&o, &r.d, ctx);
            cr_assert_str_eq(o.undo,
                             r.took == 1 ? "n"
                             : r.took    ? o.undo
                                         : "",
                             "%s: undo", ctx);
            tally[r.d.limited]++;
            if (r.took != 0 && op == 0) {
                /* Another slot refused: the refund gives back this one. */
                char undo[LUA_TWIN_UNDO_BYTES];
                memcpy(undo, o.undo, sizeof(undo));
                rc = call(c, "refund", pa, now, cost, undo, &o, err,
                          sizeof(err), pre, NULL, NULL, &m, ctx);
                cr_assert_eq(rc, 0, "%s: refund: %s", ctx, err);
                tally[3]++;
            }
        } else if (op <= 7) { /* PEEK, with or without ID */
            int anon = op == 7;
            pa[2] = anon ? "" : tok;
            cr_assert_eq(concurrency_decide(&p, m.h, m.n, anon ? NULL : tok,
                                            anon ? 0 : 1, now * 1000, cost,
                                            next, CAP, &r, &e),
                         CONCURRENCY_OK);
            rc = call(c, "peek", pa, now, cost, NULL, &o, err, sizeof(err), m,
                      NULL, NULL, &m, ctx);
            cr_assert_eq(rc, 0, "%s: %s", ctx, err);
            lua_twin_expect(&o, &r.d, ctx);
        } else { /* RELEASE */
            pa[3] = "release";
            cr_assert_eq(concurrency_release(&p, m.h, m.n, tok, 1, now * 1000,
                                             next, CAP, &r, &e),
                         CONCURRENCY_OK);
            rc = call(c, "check", pa, now, 1, NULL, &o, err, sizeof(err), m, &r,
                      next, &m, ctx);
            cr_assert_eq(rc, 0, "%s: %s", ctx, err);
            lua_twin_expect(&o, &r.d, ctx);
            cr_assert_str_eq(o.undo, r.took ? "1" : "0", "%s: held", ctx);
            tally[2] += r.took;
        }
    }
    /* The walk reached what it is for. */
    cr_assert(tally[0] > 0 && tally[1] > 0 && tally[2] > 0 && tally[3] > 0,
              "admitted %d refused %d released %d refunded %d", tally[0],
              tally[1], tally[2], tally[3]);
    redisFree(c);
}

Test(it_lua_concurrency, bad_tokens_and_states_are_the_models_errors,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = lua_twin_connect();
    const char *pa[4] = { "2", "1000", "", "release" };
    struct lua_twin_out o;
    char err[256], big[CONCURRENCY_MAX_TOKEN + 2];

    cr_assert_eq(lua_twin_call(c, "check", "k", "concurrency", pa, TWIN_T0, 1,
                               NULL, &o, err, sizeof(err)),
                 -1);
    cr_assert_str_eq(err, "ERR " CONCURRENCY_ERR_TOKEN);
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    pa[2] = big;
    pa[3] = "";
    cr_assert_eq(lua_twin_call(c, "check", "k", "concurrency", pa, TWIN_T0, 1,
                               NULL, &o, err, sizeof(err)),
                 -1);
    cr_assert_str_eq(err, "ERR " CONCURRENCY_ERR_TOKEN);
    pa[2] = "a";
    pa[0] = "100001";
    cr_assert_eq(lua_twin_call(c, "check", "k", "concurrency", pa, TWIN_T0, 1,
                               NULL, &o, err, sizeof(err)),
                 -1);
    cr_assert_str_eq(err, "ERR " CONCURRENCY_ERR_MAX);
    pa[0] = "2";
    pa[1] = "86400001";
    cr_assert_eq(lua_twin_call(c, "check", "k", "concurrency", pa, TWIN_T0, 1,
                               NULL, &o, err, sizeof(err)),
                 -1);
    cr_assert_str_eq(err, "ERR " CONCURRENCY_ERR_LEASE);
    pa[1] = "1000";
    freeReplyObject(px_cmd(c, "ZADD k 1700000000000000.5 x"));
    cr_assert_eq(lua_twin_call(c, "check", "k", "concurrency", pa, TWIN_T0, 1,
                               NULL, &o, err, sizeof(err)),
                 -1);
    cr_assert_str_eq(err, "ERR " CONCURRENCY_ERR_STATE);
    freeReplyObject(px_cmd(c, "DEL k"));
    freeReplyObject(px_cmd(c, "SET k v"));
    cr_assert_eq(lua_twin_call(c, "check", "k", "concurrency", pa, TWIN_T0, 1,
                               NULL, &o, err, sizeof(err)),
                 -1);
    cr_assert_str_eq(err, TWIN_E_WRONGTYPE);
    redisFree(c);
}
