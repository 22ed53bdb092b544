/* limiter.lua with shadow levels against the C model, on a real
 * redis-server: one group of fixed windows (a real limit and two shadow
 * levels, one of two limits), randomized costs and an explicit clock
 * stepping across windows; CHECKs and PEEKs.
 *
 * The model is the C twin (fixed_window_decide) under the shadow rule of
 * limiter.lua's header: the call is limited when a real limit refuses; a
 * limit takes its cost when every real limit and every limit of its own
 * shadow level admit; a limit that admitted but takes nothing shows its
 * state at cost 0. Every reply entry (limited, limit, remaining) and every
 * stored window (start, count) must be the model's. */
#include "tests/integration/fixture.h"
#include "tests/integration/lstate.h"
#include "tests/integration/lua_twin.h"
#include "tests/support/px_test.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/fixed_window.h"

PX_TEST_SUITE(it_lua_shadow);

#define NLIM  4
#define STEPS 400

/* The group: its keys, maxima, windows (ms) and shadow names ("" real). */
static const char *const keys[NLIM] = { "{t}#0:fixed_window",
                                        "{t}:a#0:fixed_window",
                                        "{t}:a#1:fixed_window",
                                        "{t}:b#0:fixed_window" };
static const int64_t maxes[NLIM] = { 6, 3, 4, 2 };
static const int64_t windows[NLIM] = { 10000, 10000, 7000, 10000 };
static const char *const shadows[NLIM] = { "", "2", "2", "3" };

static void it_init(void)
{
    px_redis_start(&px_env()->redis, NULL);
}

/* The model's state of each key. */
struct model {
    int have[NLIM];
    struct fixed_window_state st[NLIM];
};

/* What the model says of one call. */
struct want {
    int limited;             /* the call's: a real limit refused */
    int lim[NLIM];           /* each limit's own decision */
    int64_t remaining[NLIM]; /* each entry's remaining */
};

static void model_call(struct model *m, int check, int64_t now_us, int64_t cost,
                       struct want *w)
{
    struct fixed_window_result r[NLIM], z;
    struct fixed_window_params p;
    const char *err = NULL;
    int refused2 = 0, refused3 = 0;

    memset(w, 0, sizeof(*w));
    for (int i = 0; i < NLIM; i++) {
        cr_assert_eq(fixed_window_params_init(&p, maxes[i], windows[i], &err),
                     0);
        cr_assert_eq(fixed_window_decide(&p, m->have[i] ? &m->st[i] : NULL,
                                         now_us * 1000, cost, &r[i], &err),
                     0, "%s", err);
        w->lim[i] = r[i].d.limited;
        w->remaining[i] = r[i].d.remaining;
        if (r[i].d.limited) {
            if (shadows[i][0] == '\0') {
                w->limited = 1;
            } else if (strcmp(shadows[i], "2") == 0) {
                refused2 = 1;
            } else {
                refused3 = 1;
            }
        }
    }
    for (int i = 0; i < NLIM; i++) {
        int own = strcmp(shadows[i], "2") == 0   ? refused2
                  : strcmp(shadows[i], "3") == 0 ? refused3
                                                 : 0;
        int take = !w->limited && !own;
        if (!take && !r[i].d.limited && cost > 0) {
            cr_assert_eq(
                fixed_window_params_init(&p, maxes[i], windows[i], &err), 0);
            cr_assert_eq(fixed_window_decide(&p, m->have[i] ? &m->st[i] : NULL,
                                             now_us * 1000, 0, &z, &err),
                         0);
            w->remaining[i] = z.d.remaining;
        }
        if (check && take && r[i].write == FIXED_WINDOW_WRITE_SET) {
            m->have[i] = 1;
            m->st[i] = r[i].next;
        }
    }
}

/* One call of the script's single-group form, in MULTI with a PERSIST of
 * every key (the clock is simulated: a key's real expiry may be a
 * millisecond away). Returns the script's reply, taken out of EXEC's. */
static redisReply *script_call(redisContext *c, const char *mode,
                               int64_t now_us, int64_t cost)
{
    const char *v[64];
    size_t len[64];
    char nk[8], now[24], cs[24], mx[NLIM][24], win[NLIM][24];
    int n = 0;

    n += lua_twin_limiter_head(v);
    snprintf(nk, sizeof(nk), "%d", NLIM + 1);
    v[n++] = nk;
    for (int i = 0; i < NLIM; i++) {
        v[n++] = keys[i];
    }
    v[n++] = "{t}#overrides";
    v[n++] = mode;
    snprintf(now, sizeof(now), "%" PRId64, now_us);
    v[n++] = now;
    snprintf(cs, sizeof(cs), "%" PRId64, cost);
    v[n++] = cs;
    for (int i = 0; i < NLIM; i++) {
        snprintf(mx[i], sizeof(mx[i]), "%" PRId64, maxes[i]);
        snprintf(win[i], sizeof(win[i]), "%" PRId64, windows[i]);
        v[n++] = "fixed_window";
        v[n++] = mx[i];
        v[n++] = win[i];
        v[n++] = "";
        v[n++] = "";
        v[n++] = shadows[i];
    }
    v[n++] = "0";
    for (int i = 0; i < n; i++) {
        len[i] = strlen(v[i]);
    }
    redisReply *exec, *r;
    void *rp;

    redisAppendCommand(c, "MULTI");
    redisAppendCommandArgv(c, n, v, len);
    for (int i = 0; i < NLIM; i++) {
        lstate_append(c, "PERSIST %s", keys[i]);
    }
    redisAppendCommand(c, "EXEC");
    for (int i = 0; i < NLIM + 2; i++) {
        cr_assert_eq(redisGetReply(c, &rp), REDIS_OK, "%s", c->errstr);
        freeReplyObject(rp);
    }
    cr_assert_eq(redisGetReply(c, &rp), REDIS_OK, "%s", c->errstr);
    exec = rp;
    cr_assert_eq(exec->type, REDIS_REPLY_ARRAY);
    r = exec->element[0];
    exec->element[0] = NULL;
    freeReplyObject(exec);
    return r;
}

/* Asserts the stored window of key i is the model's. */
static void expect_state(redisContext *c, const struct model *m, int i,
                         const char *ctx)
{
    redisReply *r = lstate_cmd(c, "HMGET %s start count", keys[i]);

    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    if (!m->have[i]) {
        cr_assert_eq(r->element[0]->type, REDIS_REPLY_NIL, "%s: key %d set",
                     ctx, i);
    } else {
        cr_assert_eq(r->element[0]->type, REDIS_REPLY_STRING,
                     "%s: key %d missing", ctx, i);
        cr_assert_eq(strtoll(r->element[0]->str, NULL, 10),
                     m->st[i].start_ns / 1000, "%s: key %d start", ctx, i);
        cr_assert_eq(strtoll(r->element[1]->str, NULL, 10), m->st[i].count,
                     "%s: key %d count", ctx, i);
    }
    freeReplyObject(r);
}

Test(it_lua_shadow, shadow_levels_match_the_c_model, .init = it_init,
     .fini = px_env_fini, .timeout = 120)
{
    uint64_t seed = lua_twin_seed("it_lua_shadow", "PX_SHADOW_SEED");
    redisContext *c = lua_twin_connect();
    struct model m = { 0 };
    /* A window start: every key's windows start on it. */
    int64_t now =
        INT64_C(1700000000000000) - INT64_C(1700000000000000) % 70000000;
    long limited = 0, shadow_only = 0;

    for (int step = 0; step < STEPS; step++) {
        int check = lua_twin_rnd_in(&seed, 0, 3) != 0;
        int64_t cost = lua_twin_rnd_in(&seed, 0, 3);
        char ctx[96];
        struct want w;
        redisReply *r;

        now += lua_twin_rnd_in(&seed, 0, 1500000);
        snprintf(ctx, sizeof(ctx), "step %d (%s cost %" PRId64 ")", step,
                 check ? "check" : "peek", cost);
        model_call(&m, check, now, cost, &w);
        r = script_call(c, check ? "check" : "peek", now, cost);
        cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s: %s", ctx,
                     r->type == REDIS_REPLY_ERROR ? r->str : "");
        cr_assert_eq(r->elements, 3 + NLIM, "%s", ctx);
        cr_assert_eq(r->element[0]->integer, w.limited, "%s: limited", ctx);
        for (int i = 0; i < NLIM; i++) {
            const redisReply *e = r->element[3 + i];
            cr_assert_eq(e->type, REDIS_REPLY_ARRAY, "%s", ctx);
            cr_assert_eq(e->element[0]->integer, w.lim[i], "%s: %d limited",
                         ctx, i);
            cr_assert_eq(e->element[1]->integer, maxes[i], "%s: %d limit", ctx,
                         i);
            cr_assert_eq(e->element[2]->integer, w.remaining[i],
                         "%s: %d remaining %lld, want %" PRId64, ctx, i,
                         e->element[2]->integer, w.remaining[i]);
            shadow_only += !w.limited && w.lim[i] && shadows[i][0] != '\0';
        }
        limited += w.limited;
        freeReplyObject(r);
        for (int i = 0; i < NLIM; i++) {
            expect_state(c, &m, i, ctx);
        }
    }
    printf("it_lua_shadow: %ld limited, %ld shadow refusals of admitted "
           "calls\n",
           limited, shadow_only);
    cr_assert_gt(limited, 0);
    cr_assert_gt(shadow_only, 0);
    redisFree(c);
}
