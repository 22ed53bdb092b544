/* limiter.lua with several gcra levels against the C model, on a real
 * redis-server: randomized groups of one to three levels (a level per
 * identity, one shared by every identity, a strict one per identity) in
 * random orders, random costs, CHECKs and PEEKs, at an explicit clock that
 * starts at the wall clock and steps forward.
 *
 * On Redis 7 a check whose levels are all gcra writes an absent key while
 * reading it (SET ... NX GET) and deletes it again when another level
 * refuses or fails. The test makes both happen often: the shared level is
 * strict, so new identities meet it exhausted, and two identities carry a
 * broken strict level (a hash: WRONGTYPE; "abc": not a TAT), so a group
 * that wrote its other levels first must fail with nothing written.
 *
 * The model is the C twin (gcra_decide) under the rule of limiter.lua's
 * header: a group is limited when a level refuses, and writes every
 * level's decision only when none refuses. After every call each reply
 * entry (the stored TAT before the call), each key's value, and whether it
 * has an expiry (the keys a call writes are read with PTTL in the same
 * MULTI, then made persistent so the simulated clock owns time) must be
 * the model's. Half the calls go as the single-group form, half as a
 * batch of mode "shapes", whose checks of gcra levels take a fast path of
 * their own (and hand anything unusual to the general one), so both are
 * held to the model on the same keys. */
#include "tests/integration/fixture.h"
#include "tests/integration/lstate.h"
#include "tests/integration/lua_twin.h"
#include "tests/support/px_test.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "algorithms/gcra.h"

PX_TEST_SUITE(it_lua_levels);

#define NID    6 /* identities u0 .. u5; u4 and u5 have a broken level 2 */
#define NLEVEL 3
#define NKEY   (2 * NID + 1)
#define STEPS  500

/* Level i's max_burst, count and period (s). */
static const int64_t lv_burst[NLEVEL] = { 3, 4, 0 };
static const int64_t lv_count[NLEVEL] = { 4, 2, 1 };
static const int64_t lv_period[NLEVEL] = { 2, 4, 1 };

/* The group orders: indexes of the levels, -1 ended. */
static const int orders[][NLEVEL + 1] = {
    { 0, -1 },       { 1, -1 },    { 2, -1 },
    { 0, 1, -1 },    { 1, 0, -1 }, { 0, 1, 2, -1 },
    { 2, 1, 0, -1 }, { 0, 2, -1 }, { 1, 2, 0, -1 },
};
#define NORDER (sizeof(orders) / sizeof(orders[0]))

struct model {
    char name[NKEY][40]; /* key k's name */
    int have[NKEY];      /* the key holds a TAT */
    int64_t tat[NKEY];
    int broken[NKEY]; /* a hash or "abc": every group on it fails */
};

/* Key index of level lv for identity id. */
static int key_of(int lv, int id)
{
    return lv == 1 ? 2 * NID : lv == 0 ? id : NID + id;
}

static void model_init(struct model *m)
{
    memset(m, 0, sizeof(*m));
    for (int id = 0; id < NID; id++) {
        snprintf(m->name[id], sizeof(m->name[id]), "{t}:u%d#0:gcra", id);
        snprintf(m->name[NID + id], sizeof(m->name[NID + id]),
                 "{t}:u%d:x#1:gcra", id);
    }
    snprintf(m->name[2 * NID], sizeof(m->name[2 * NID]), "{t}#1:gcra");
    m->broken[key_of(2, 4)] = 1;
    m->broken[key_of(2, 5)] = 1;
}

static void params_of(int lv, int64_t cost, struct gcra_params *p)
{
    const char *err = NULL;

    cr_assert_eq(gcra_params_init(p, lv_burst[lv], lv_count[lv], lv_period[lv],
                                  cost, &err),
                 GCRA_OK, "%s", err ? err : "");
}

/* What the model says of one group: failed (a broken level), limited, and
 * for each key whether the call writes it (1 SET, 2 DEL) and the value. */
struct want {
    int failed, limited;
    int write[NKEY];
    int64_t tat[NKEY];
    int64_t expiry_ms[NKEY];
};

static void model_call(struct model *m, const int *order, int id, int check,
                       int64_t now_us, int64_t cost, struct want *w)
{
    memset(w, 0, sizeof(*w));
    for (int i = 0; order[i] >= 0; i++) {
        if (m->broken[key_of(order[i], id)]) {
            w->failed = 1;
            return;
        }
    }
    for (int i = 0; order[i] >= 0; i++) {
        int k = key_of(order[i], id);
        struct gcra_params p;
        struct gcra_result r;
        const char *err = NULL;

        params_of(order[i], cost, &p);
        cr_assert_eq(
            gcra_decide(&p, m->have[k], m->tat[k], now_us * 1000, &r, &err),
            GCRA_OK, "%s", err ? err : "");
        w->limited |= r.d.limited != 0;
        w->write[k] = r.write == GCRA_WRITE_SET   ? 1
                      : r.write == GCRA_WRITE_DEL ? 2
                                                  : 0;
        w->tat[k] = r.new_tat_ns;
        w->expiry_ms[k] = r.expiry_ms;
    }
    if (w->limited || !check) {
        memset(w->write, 0, sizeof(w->write));
    }
}

static void it_init(void)
{
    px_redis_start(&px_env()->redis, NULL);
}

static int64_t wall_us(void)
{
    struct timeval tv;

    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000000 + tv.tv_usec;
}

/* One call in MULTI, followed by PTTL and PERSIST of every key: the
 * script's single-group form, or (shapes) a batch of mode "shapes" of this
 * one group, whose checks of gcra levels take their own fast path. Override
 * fields: none, "u:*", or "u:*" and "u:*:x", all unset, as the proxy sends
 * them. Returns EXEC's reply: [script, PTTL x NKEY, PERSIST x NKEY]. */
static redisReply *script_call(redisContext *c, const struct model *m,
                               const int *order, int id, const char *mode,
                               int64_t now_us, int64_t cost, int fields,
                               int shapes)
{
    const char *v[64];
    size_t len[64];
    char nk[16], now[24], cs[24], nlv[16];
    struct gcra_script_args a[NLEVEL];
    int n = 0, nl = 0;

    while (order[nl] >= 0) {
        nl++;
    }
    n += lua_twin_limiter_head(v);
    snprintf(nk, sizeof(nk), "%d", nl + 1);
    v[n++] = nk;
    for (int i = 0; i < nl; i++) {
        v[n++] = m->name[key_of(order[i], id)];
    }
    v[n++] = "{t}#overrides";
    snprintf(now, sizeof(now), "%" PRId64, now_us);
    snprintf(cs, sizeof(cs), "%" PRId64, cost);
    if (shapes) {
        snprintf(nlv, sizeof(nlv), "%d", nl);
        v[n++] = "shapes";
        v[n++] = now;
        v[n++] = "1";
        v[n++] = mode;
        v[n++] = cs;
        v[n++] = nlv;
    } else {
        v[n++] = mode;
        v[n++] = now;
        v[n++] = cs;
    }
    for (int i = 0; i < nl; i++) {
        struct gcra_params p;

        params_of(order[i], cost, &p);
        gcra_script_args(&p, &a[i]);
        v[n++] = "gcra";
        for (int j = 0; j < GCRA_SCRIPT_NARGS; j++) {
            v[n++] = a[i].v[j];
        }
        v[n++] = "";
    }
    /* m: the shape's last word in a shapes batch, then G, and the group
     * (of the one shape, so it names none) is its override pairs. */
    v[n++] = fields == 2 ? "2" : fields == 1 ? "1" : "0";
    if (shapes) {
        v[n++] = "1"; /* G */
    }
    if (fields >= 1) {
        v[n++] = "u:*";
        v[n++] = "";
    }
    if (fields == 2) {
        v[n++] = "u:*:x";
        v[n++] = "";
    }
    for (int i = 0; i < n; i++) {
        len[i] = strlen(v[i]);
    }

    void *rp;

    redisAppendCommand(c, "MULTI");
    redisAppendCommandArgv(c, n, v, len);
    for (int k = 0; k < NKEY; k++) {
        lstate_append(c, "PTTL %s", m->name[k]);
    }
    for (int k = 0; k < NKEY; k++) {
        lstate_append(c, "PERSIST %s", m->name[k]);
    }
    redisAppendCommand(c, "EXEC");
    for (int i = 0; i < 2 * NKEY + 2; i++) {
        cr_assert_eq(redisGetReply(c, &rp), REDIS_OK, "%s", c->errstr);
        freeReplyObject(rp);
    }
    cr_assert_eq(redisGetReply(c, &rp), REDIS_OK, "%s", c->errstr);
    cr_assert_eq(((redisReply *)rp)->type, REDIS_REPLY_ARRAY);
    cr_assert_eq(((redisReply *)rp)->elements, 1 + 2 * NKEY);
    return rp;
}

/* Asserts every key holds the model's TAT (or nothing), the broken ones
 * untouched. */
static void expect_keys(redisContext *c, const struct model *m, const char *ctx)
{
    for (int k = 0; k < NKEY; k++) {
        redisReply *r = lstate_cmd(c, "TYPE %s", m->name[k]);
        /* (A gcra level's state is a record of its identity's state
         * string: the key planted as a hash is a record holding "f=v", no
         * TAT.) */
        const char *want = m->broken[k] || m->have[k] ? "string" : "none";

        cr_assert_str_eq(r->str, want, "%s: %s is a %s", ctx, m->name[k],
                         r->str);
        freeReplyObject(r);
        if (m->have[k] && !m->broken[k]) {
            r = lstate_cmd(c, "GET %s", m->name[k]);
            cr_assert_eq(strtoll(r->str, NULL, 10), m->tat[k],
                         "%s: %s holds %s, want %" PRId64, ctx, m->name[k],
                         r->str, m->tat[k]);
            freeReplyObject(r);
        }
    }
}

Test(it_lua_levels, gcra_levels_match_the_c_model, .init = it_init,
     .fini = px_env_fini, .timeout = 180)
{
    uint64_t seed = lua_twin_seed("it_lua_levels", "PX_LEVELS_SEED");
    redisContext *c = lua_twin_connect();
    struct model m;
    int64_t now = wall_us();
    long calls = 0, limited = 0, failed = 0, undone = 0, fresh = 0;
    long overrides = 0;

    model_init(&m);
    freeReplyObject(lstate_cmd(c, "HSET %s f v", m.name[key_of(2, 5)]));
    freeReplyObject(lstate_cmd(c, "SET %s abc", m.name[key_of(2, 4)]));

    for (int step = 0; step < STEPS; step++) {
        const int *order = orders[lua_twin_rnd_in(&seed, 0, NORDER - 1)];
        int id = (int)lua_twin_rnd_in(&seed, 0, NID - 1);
        int check = lua_twin_rnd_in(&seed, 0, 4) != 0;
        int64_t cost = lua_twin_rnd_in(&seed, 0, 5) == 0
                           ? lua_twin_rnd_in(&seed, 0, 6)
                           : 1;
        int fields = (int)lua_twin_rnd_in(&seed, 0, 2);
        int shapes = (int)lua_twin_rnd_in(&seed, 0, 1);
        /* Now and then an override the call does not expect: field 1
         * ("u:*") or 2 ("u:*:x") holds "9" while the call expects "". */
        int ov = lua_twin_rnd_in(&seed, 0, 7) == 0
                     ? (int)lua_twin_rnd_in(&seed, 1, 2)
                     : 0;
        int overridden = ov != 0 && ov <= fields;
        char ctx[128];
        struct want w;
        redisReply *exec, *r;
        int64_t before[NKEY];
        int had[NKEY];

        /* An identity's own keys are forgotten (as if they expired), so
         * absent keys keep coming. */
        if (lua_twin_rnd_in(&seed, 0, 2) == 0) {
            int gone = (int)lua_twin_rnd_in(&seed, 0, NID - 1);

            for (int lv = 0; lv < NLEVEL; lv += 2) {
                int k = key_of(lv, gone);

                if (!m.broken[k]) {
                    freeReplyObject(lstate_cmd(c, "DEL %s", m.name[k]));
                    m.have[k] = 0;
                }
            }
        }
        /* Now and then a long pause, so every key is in the past. */
        now += lua_twin_rnd_in(&seed, 0, 9) == 0
                   ? 5000000
                   : lua_twin_rnd_in(&seed, 0, 700000);
        snprintf(ctx, sizeof(ctx),
                 "step %d (%s %s u%d cost %" PRId64 " levels %d%d%d)", step,
                 shapes ? "shapes" : "single", check ? "check" : "peek", id,
                 cost, order[0], order[1], order[1] >= 0 ? order[2] : -1);
        memcpy(before, m.tat, sizeof(before));
        memcpy(had, m.have, sizeof(had));
        model_call(&m, order, id, check, now, cost, &w);
        if (overridden) {
            /* The override is read first: nothing is decided or written. */
            memset(&w, 0, sizeof(w));
        }
        if (ov != 0) {
            freeReplyObject(px_cmd(c, "HSET {t}#overrides %s 9",
                                   ov == 1 ? "u:*" : "u:*:x"));
        }
        int64_t t0 = wall_us();
        exec = script_call(c, &m, order, id, check ? "check" : "peek", now,
                           cost, fields, shapes);
        int64_t took_ms = (wall_us() - t0) / 1000 + 1;
        r = exec->element[0];
        calls++;
        if (ov != 0) {
            freeReplyObject(px_cmd(c, "DEL {t}#overrides"));
        }

        /* The group's part of the reply: all of it in the single form;
         * after the batch's {0, now_s, now_us} in a shapes batch, with its
         * entries inline instead of one table each. */
        redisReply **g = &r;
        size_t ng = 1;
        int nl = 0;

        while (order[nl] >= 0) {
            nl++;
        }
        if (shapes) {
            cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s: %s", ctx,
                         r->type == REDIS_REPLY_ERROR ? r->str : "");
            cr_assert_geq(r->elements, 4, "%s", ctx);
            cr_assert_eq(r->element[0]->integer, 0, "%s", ctx);
            g = r->element + 3;
            ng = r->elements - 3;
        }
        if (overridden) {
            /* {"override", what each expected field holds}. */
            cr_assert_eq(ng, 1, "%s", ctx);
            cr_assert_eq(g[0]->type, REDIS_REPLY_ARRAY, "%s: not refused", ctx);
            cr_assert_eq(g[0]->elements, (size_t)(1 + fields), "%s", ctx);
            cr_assert_str_eq(g[0]->element[0]->str, "override", "%s", ctx);
            for (int j = 1; j <= fields; j++) {
                cr_assert_str_eq(g[0]->element[j]->str, j == ov ? "9" : "",
                                 "%s: field %d", ctx, j);
            }
            overrides++;
        } else if (w.failed) {
            cr_assert_eq(ng, 1, "%s", ctx);
            cr_assert_eq(g[0]->type, REDIS_REPLY_ERROR, "%s: no error", ctx);
            failed++;
        } else {
            const redisReply *lim = shapes ? g[0] : r;

            cr_assert_eq(g[0]->type,
                         shapes ? REDIS_REPLY_INTEGER : REDIS_REPLY_ARRAY,
                         "%s: %s", ctx,
                         g[0]->type == REDIS_REPLY_ERROR ? g[0]->str : "");
            if (shapes) {
                cr_assert_eq(ng, (size_t)(1 + nl), "%s", ctx);
            } else {
                cr_assert_eq(r->elements, (size_t)(3 + nl), "%s", ctx);
                lim = r->element[0];
            }
            cr_assert_eq(lim->integer, w.limited, "%s: limited", ctx);
            for (int i = 0; i < nl; i++) {
                int k = key_of(order[i], id);
                const redisReply *e = shapes ? g[1 + i] : r->element[3 + i];

                if (!shapes) {
                    cr_assert_eq(e->type, REDIS_REPLY_ARRAY, "%s", ctx);
                    e = e->element[0];
                }
                if (!had[k]) {
                    cr_assert_eq(e->type, REDIS_REPLY_NIL,
                                 "%s: level %d read a TAT", ctx, order[i]);
                    fresh++;
                    undone += check && w.limited;
                } else {
                    cr_assert_eq(e->type, REDIS_REPLY_STRING, "%s", ctx);
                    cr_assert_eq(strtoll(e->str, NULL, 10), before[k],
                                 "%s: level %d read %s", ctx, order[i], e->str);
                }
            }
            limited += w.limited;
        }
        /* The keys written now have an expiry, the model's minus at most
         * the wall time of the call; the others none (persisted) or no
         * key. */
        for (int k = 0; k < NKEY; k++) {
            long long pttl = exec->element[1 + k]->integer;

            if (w.write[k] == 1) {
                cr_assert(pttl <= w.expiry_ms[k] &&
                              pttl >= w.expiry_ms[k] - took_ms,
                          "%s: %s PTTL %lld, want %" PRId64, ctx, m.name[k],
                          pttl, w.expiry_ms[k]);
                m.have[k] = 1;
                m.tat[k] = w.tat[k];
            } else if (w.write[k] == 2) {
                cr_assert_eq(pttl, -2, "%s: %s not deleted", ctx, m.name[k]);
                m.have[k] = 0;
            } else {
                cr_assert_eq(pttl, m.have[k] || m.broken[k] ? -1 : -2,
                             "%s: %s PTTL %lld, untouched", ctx, m.name[k],
                             pttl);
            }
        }
        freeReplyObject(exec);
        expect_keys(c, &m, ctx);
    }
    printf("it_lua_levels: %ld calls, %ld limited, %ld failed, %ld "
           "overridden, %ld absent keys read (%ld in refused checks)\n",
           calls, limited, failed, overrides, fresh, undone);
    cr_assert_gt(limited, 0);
    cr_assert_gt(failed, 0);
    cr_assert_gt(undone, 0);
    cr_assert_gt(overrides, 0);
    redisFree(c);
}
