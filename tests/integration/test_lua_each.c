/* limiter.lua's "each" mode (many groups in one call) and the FUNCTION
 * library form of the scripts, on a real redis-server.
 *
 * A batch must decide exactly as its groups called one by one: the same
 * replies (the explicit `now` makes them deterministic) and the same
 * stored state. A group that fails is an error element and writes
 * nothing; the others are still decided; a malformed batch is refused
 * whole and writes nothing. The library form (lua_twin_library, what the
 * build makes of the same sources) must answer every call as EVALSHA
 * does. With PX_LUA_FORM=function these tests call the library too. */
#include "tests/integration/fixture.h"
#include "tests/integration/lcall.h"
#include "tests/integration/lua_twin.h"
#include "tests/integration/replies.h"
#include "tests/support/px_test.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/scripts.h"

PX_TEST_SUITE(it_lua_each);

#define E_BAD "ERR limiter script arguments are malformed"
#define E_WRONGTYPE                                                            \
    "WRONGTYPE Operation against a key holding the wrong kind of value"

/* The gcra parameters for burst 0, one per 2 s: INC = DVT = 2 s. */
#define GCRA_2S "2", "0", "2", "0"

/* A group (struct lcall_grp) of one limit: mode_ at cost_ on `key` with
 * algorithm `algo` and its parameters (...), no undo token, override hash
 * ovr_ and no override to verify. */
#define GROUP1(mode_, cost_, ovr_, key, algo, ...)                             \
    {                                                                          \
        .mode = mode_, .cost = cost_, .n = 1,                                  \
        .l = { { key, algo, { __VA_ARGS__ }, NULL } }, .ovr = ovr_             \
    }

static void it_init(void)
{
    px_redis_start(&px_env()->redis, NULL);
}

/* ---------------- Calls ---------------- */

/* A connection with both scripts loaded (and the library, which the
 * library tests always need). */
static redisContext *connect_all(void)
{
    redisContext *c = lua_twin_connect();
    const struct scripts_lua *s = scripts_gcra();

    px_check_str(px_cmd(c, "SCRIPT LOAD %b", s->body, s->len), s->sha1);
    lua_twin_load_library(c);
    return c;
}

/* ---------------- Replies and state ---------------- */

/* ---------------- A batch equals its groups one by one ---------------- */

/* The override field "user:o" holds "2": a group that assumes "" gets
 * the override reply. */
static void plant(redisContext *c)
{
    px_check_status(px_cmd(c, "FLUSHALL"), "OK");
    px_check_int(px_cmd(c, "HSET ovr user:o 2"), 1);
}

/* Groups over every algorithm, modes, refusals, repeated keys, a refund
 * and an override. */
static const struct lcall_grp MIXED[] = {
    GROUP1("check", "1", "ovr", "a1", "gcra", GCRA_2S),
    { .mode = "check",
      .cost = "2",
      .n = 2,
      .l = { { "b1", "token_bucket", { "3", "1000000" }, NULL },
             { "b2", "fixed_window", { "5", "60000" }, NULL } },
      .ovr = "ovr",
      .m = 1,
      .path = { "user:b" },
      .known = { "" } },
    { .mode = "check",
      .cost = "1",
      .n = 2,
      .l = { { "c1", "sliding_log", { "2", "60000", "0" }, NULL },
             { "c2", "sliding_counter", { "10", "60000" }, NULL } },
      .ovr = "ovr",
      .m = 0,
      .path = { 0 },
      .known = { 0 } },
    GROUP1("peek", "1", "ovr", "d1", "leaky_bucket", "3", "1000", "1"),
    /* b1 has 1 token left after the second group: refused, and b2,
     * admitted on its own, shows its state without this request. */
    { .mode = "check",
      .cost = "3",
      .n = 2,
      .l = { { "b2", "fixed_window", { "5", "60000" }, NULL },
             { "b1", "token_bucket", { "3", "1000000" }, NULL } },
      .ovr = "ovr",
      .m = 0,
      .path = { 0 },
      .known = { 0 } },
    GROUP1("check", "1", "ovr", "e1", "sliding_window", "3", "60000", "1000"),
    GROUP1("check", "1", "ovr", "c1", "sliding_log", "2", "60000", "0"),
    /* The log is full: refused, and logged all the same. */
    GROUP1("check", "1", "ovr", "c1", "sliding_log", "2", "60000", "0"),
    { .mode = "check",
      .cost = "1",
      .n = 1,
      .l = { { "e2", "leaky_bucket", { "3", "1000", "1" }, NULL } },
      .ovr = "ovr",
      .m = 1,
      .path = { "user:o" },
      .known = { "" } },
    GROUP1("check", "1", "ovr", "a1", "gcra", GCRA_2S),
    /* Gives the second group's cost back to b2's window (its start is
     * LCALL_NOW's minute). */
    { .mode = "refund",
      .cost = "2",
      .n = 1,
      .l = { { "b2", "fixed_window", { "5", "60000" }, "1699999980000000" } },
      .ovr = "ovr",
      .m = 0,
      .path = { 0 },
      .known = { 0 } },
    GROUP1("check", "0", "ovr", "d1", "leaky_bucket", "3", "1000", "1"),
    /* LIMITER ADJUST: a giving back on two levels, a charge on gcra. */
    { .mode = "adjust",
      .cost = "-1",
      .n = 2,
      .l = { { "b2", "fixed_window", { "5", "60000" }, NULL },
             { "c2", "sliding_counter", { "10", "60000" }, NULL } },
      .ovr = "ovr",
      .m = 0,
      .path = { 0 },
      .known = { 0 } },
    GROUP1("adjust", "3", "ovr", "a1", "gcra", GCRA_2S),
};
#define NMIXED (int)(sizeof(MIXED) / sizeof(*MIXED))

static const char *const MIXED_KEYS[] = { "a1", "b1", "b2", "c1",
                                          "c2", "d1", "e1", "e2" };
#define NMIXED_KEYS (int)(sizeof(MIXED_KEYS) / sizeof(*MIXED_KEYS))

Test(it_lua_each, batch_equals_its_groups_one_by_one, .init = it_init,
     .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = connect_all();
    redisReply *single[NMIXED], *batch;
    struct replies_state s1[NMIXED_KEYS], s2[NMIXED_KEYS];
    struct lcall_args a;
    long long t0, t1, t2;

    cr_assert_str_eq(MIXED[10].l[0].undo, "1699999980000000");
    plant(c);
    t0 = px_now_ms();
    for (int g = 0; g < NMIXED; g++) {
        lcall_single(&a, &MIXED[g], LCALL_RUN, 0);
        single[g] = lcall_run(c, &a);
    }
    for (int k = 0; k < NMIXED_KEYS; k++) {
        replies_state_read(c, MIXED_KEYS[k], &s1[k]);
    }
    t1 = px_now_ms();

    plant(c);
    lcall_each(&a, MIXED, NMIXED, LCALL_RUN, 0, 1);
    batch = lcall_run(c, &a);
    for (int k = 0; k < NMIXED_KEYS; k++) {
        replies_state_read(c, MIXED_KEYS[k], &s2[k]);
    }
    t2 = px_now_ms();

    replies_expect_array(batch, "batch");
    cr_assert_eq(batch->elements, 3 + (size_t)NMIXED);
    cr_assert_eq(batch->element[0]->integer, 0);
    cr_assert_eq(batch->element[1]->integer, LCALL_NOW_S);
    cr_assert_eq(batch->element[2]->integer, LCALL_NOW_US);
    for (int g = 0; g < NMIXED; g++) {
        char ctx[32];
        snprintf(ctx, sizeof(ctx), "group %d", g);
        replies_expect_eq(single[g], batch->element[3 + g], ctx);
    }
    /* The sequence went where it should: refusals, the override, a full
     * log, a key that gcra refused the second time. */
    cr_assert_eq(single[4]->element[0]->integer, 1, "b1 refused");
    cr_assert_str_eq(single[8]->element[0]->str, "override");
    cr_assert_eq(single[7]->element[0]->integer, 1, "log full");
    cr_assert_eq(single[9]->element[0]->integer, 1, "gcra a1 again");
    /* The ADJUSTs were decided (a1, in debt, shows its peek refused). */
    cr_assert_eq(single[NMIXED - 2]->type, REDIS_REPLY_ARRAY, "adjust b2 c2");
    cr_assert_eq(single[NMIXED - 2]->elements, 5, "adjust b2 c2");
    cr_assert_eq(single[NMIXED - 1]->type, REDIS_REPLY_ARRAY, "adjust a1");
    cr_assert_eq(single[NMIXED - 1]->element[0]->integer, 1, "adjust a1");
    for (int k = 0; k < NMIXED_KEYS; k++) {
        replies_state_expect_eq(&s1[k], &s2[k], (t2 - t0) + (t1 - t0) + 5,
                                MIXED_KEYS[k]);
    }
    /* e2's group met the override: nothing of it was decided. */
    cr_assert_str_eq(s2[7].text, "none:");
    for (int g = 0; g < NMIXED; g++) {
        freeReplyObject(single[g]);
    }
    freeReplyObject(batch);
    redisFree(c);
}

/* A call of limiter.lua that must be refused whole: its KEYS (of k1,
 * k1#o, k2, k2#o), then its ARGV after the mode and now (NULL ends). */
struct bad_call {
    int nkeys;
    const char *argv[40];
};

/* Runs each of bad[0..n-1] in `mode` and asserts the refusal and that
 * nothing was written (the database holds "other" alone); `now_too`
 * alternates the node's clock ("") with LCALL_NOW. */
static void expect_refused_whole(redisContext *c, const char *mode,
                                 const struct bad_call *bad, size_t n,
                                 int now_too)
{
    static const char *const keys[] = { "k1", "k1#o", "k2", "k2#o" };

    for (size_t x = 0; x < n; x++) {
        struct lcall_args a;
        redisReply *r;
        char ctx[32];
        lcall_start(&a, "limiter", LCALL_RUN);
        lcall_int(&a, bad[x].nkeys);
        for (int k = 0; k < bad[x].nkeys; k++) {
            lcall_arg(&a, keys[k]);
        }
        lcall_arg(&a, mode);
        lcall_arg(&a, x % 2 || !now_too ? LCALL_NOW : "");
        for (int i = 0; bad[x].argv[i] != NULL; i++) {
            lcall_arg(&a, bad[x].argv[i]);
        }
        r = lcall_run(c, &a);
        snprintf(ctx, sizeof(ctx), "%s case %zu", mode, x);
        replies_expect_error(r, E_BAD, ctx);
        freeReplyObject(r);
        px_check_int(px_cmd(c, "DBSIZE"), 1);
    }
}

/* ---------------- Mode "shapes" ---------------- */

/* A valid group's arguments: "check 1 1 fixed_window 5 60000 '' '' '' 0". */
#define OK_GROUP                                                               \
    "check", "1", "1", "fixed_window", "5", "60000", "", "", "", "0"

/* A valid shape without its m: "check 1 1 fixed_window 5 60000 '' '' ''". */
#define OK_LEVELS "check", "1", "1", "fixed_window", "5", "60000", "", "", ""

/* A valid shape: OK_LEVELS and m = 0 (a group of it is no words). */
#define OK_SHAPE OK_LEVELS, "0"

/* The elements mode "each"'s group reply r (of group g) takes in a flat
 * "shapes" reply, into out[]: a decided group's limited and its entries
 * (one value for a one-element entry, else its elements); anything else
 * whole. Returns how many. */
static int flatten(const redisReply *r, const struct lcall_grp *g,
                   const redisReply **out)
{
    int n = 0;

    if (r->type != REDIS_REPLY_ARRAY || strcmp(g->mode, "refund") == 0 ||
        r->element[0]->type != REDIS_REPLY_INTEGER) {
        out[n++] = r;
        return n;
    }
    out[n++] = r->element[0];
    for (size_t i = 3; i < r->elements; i++) {
        const redisReply *e = r->element[i];
        for (size_t j = 0; j < e->elements; j++) {
            out[n++] = e->element[j];
        }
    }
    return n;
}

/* Decides groups g[0..ng-1] as one "each" batch and as one "shapes"
 * batch, with the keys declared and then after the arguments, each time
 * from the state plant_fn makes, and asserts that the two answer and write
 * alike: the shapes reply is the each reply flattened, and keys[] hold the
 * same. Returns the number of shapes; *last is the shapes reply with keys
 * undeclared (the caller frees it). */
static int expect_shapes_as_each(redisContext *c, const struct lcall_grp *g,
                                 int ng, const char *const *keys, int nkeys,
                                 void (*plant_fn)(redisContext *),
                                 redisReply **last)
{
    static struct lcall_args blocks[LCALL_GROUPS_MAX];
    static struct replies_state s1[LCALL_GROUPS_MAX * LCALL_LIMITS_MAX],
        s2[LCALL_GROUPS_MAX * LCALL_LIMITS_MAX];
    const redisReply *want[LCALL_ARGV_MAX];
    redisReply *each, *shapes = NULL;
    struct lcall_args a;
    long long t0, t1, t2;
    int ns = 0;

    cr_assert_leq(ng, LCALL_GROUPS_MAX);
    cr_assert_leq(nkeys, LCALL_GROUPS_MAX * LCALL_LIMITS_MAX);
    for (int declared = 1; declared >= 0; declared--) {
        const char *ctx = declared ? "declared" : "undeclared";
        int nwant = 3;

        plant_fn(c);
        t0 = px_now_ms();
        lcall_each(&a, g, ng, LCALL_RUN, 0, 1);
        each = lcall_run(c, &a);
        for (int k = 0; k < nkeys; k++) {
            replies_state_read(c, keys[k], &s1[k]);
        }
        t1 = px_now_ms();
        plant_fn(c);
        ns = lcall_shapes(&a, blocks, g, ng, 0, declared);
        shapes = lcall_run(c, &a);
        for (int k = 0; k < nkeys; k++) {
            replies_state_read(c, keys[k], &s2[k]);
        }
        t2 = px_now_ms();

        replies_expect_array(each, "each");
        replies_expect_array(shapes, "shapes");
        for (int i = 0; i < 3; i++) {
            want[i] = each->element[i];
        }
        for (int x = 0; x < ng; x++) {
            nwant += flatten(each->element[3 + x], &g[x], want + nwant);
        }
        cr_assert_eq(shapes->elements, (size_t)nwant, "%s: %zu elements", ctx,
                     shapes->elements);
        for (int i = 0; i < nwant; i++) {
            char at[48];
            snprintf(at, sizeof(at), "%s element %d", ctx, i);
            replies_expect_eq(want[i], shapes->element[i], at);
        }
        for (int k = 0; k < nkeys; k++) {
            replies_state_expect_eq(&s1[k], &s2[k], (t2 - t0) + (t1 - t0) + 5,
                                    keys[k]);
        }
        freeReplyObject(each);
        if (declared) {
            freeReplyObject(shapes);
        }
    }
    *last = shapes;
    return ns;
}

Test(it_lua_each, shapes_decide_as_each_with_a_flat_reply, .init = it_init,
     .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = connect_all();
    redisReply *shapes;

    /* Groups 0 and 9, and 6 and 7, share their blocks. */
    cr_assert_eq(expect_shapes_as_each(c, MIXED, NMIXED, MIXED_KEYS,
                                       NMIXED_KEYS, plant, &shapes),
                 NMIXED - 2);
    /* The gcra group (a1) gives one element, the TAT before it: nil then
     * the first call's. */
    cr_assert_eq(shapes->element[4]->type, REDIS_REPLY_NIL);
    freeReplyObject(shapes);
    redisFree(c);
}

/* The gcra parameters for burst 2, one per second: INC 1 s, DVT 3 s. */
#define GCRA_B2 "1", "0", "3", "0"

/* A check of one level of `algo` (its parameters `params`, a macro) on
 * `key`, override hash "o1", assuming field `path` holds `known`. */
#define LEVEL1_OF(algo, params, key, path_, known_)                            \
    {                                                                          \
        .mode = "check", .cost = "1", .n = 1,                                  \
        .l = { { key, algo, { params }, NULL } }, .ovr = "o1", .m = 1,         \
        .path = { path_ }, .known = {                                          \
            known_                                                             \
        }                                                                      \
    }

/* The same of one gcra level (GCRA_B2). */
#define LEVEL1(key, path, known) LEVEL1_OF("gcra", GCRA_B2, key, path, known)

/* Batches of one shape, one gcra level and one override pair (a path of
 * one level: what most LIMITER CHECKs are), which the library decides in
 * a loop of its own: k1 fresh (written at its read), admitted twice from
 * a TAT ahead of now, then refused; a stale override; a key of the wrong
 * type; a value that is no TAT. */
static const struct lcall_grp LEVEL1S[] = {
    LEVEL1("k1", "user:a", ""),  LEVEL1("k1", "user:a", ""),
    LEVEL1("k1", "user:a", ""),  LEVEL1("k1", "user:a", ""),
    LEVEL1("k2", "user:o", "2"), LEVEL1("kw", "user:a", ""),
    LEVEL1("ks", "user:a", ""),  LEVEL1("k2", "user:o", ""),
    LEVEL1("k2", "user:a", ""),  LEVEL1("k1", "user:a", ""),
};
#define NLEVEL1S (int)(sizeof(LEVEL1S) / sizeof(*LEVEL1S))

static const char *const LEVEL1_KEYS[] = { "k1", "k2", "kw", "ks", "o1" };

/* A check of two gcra levels (GCRA_B2, then GCRA_2S) on keys k and l,
 * override hash "o1", assuming fields user:a and user:a:x hold "" and
 * `known`. */
#define LEVEL2(k_, l_, known_)                                                 \
    {                                                                          \
        .mode = "check", .cost = "1", .n = 2,                                  \
        .l = { { k_, "gcra", { GCRA_B2 }, NULL },                              \
               { l_, "gcra", { GCRA_2S }, NULL } },                            \
        .ovr = "o1", .m = 2, .path = { "user:a", "user:a:x" }, .known = {      \
            "",                                                                \
            known_                                                             \
        }                                                                      \
    }

/* The same for two levels: both fresh; the second refuses (its fresh
 * first level is deleted again); a repeated key; a second level of the
 * wrong type or no TAT after a fresh first; a stale override; a first
 * level whose TAT is past (kt, ku: planted 1 s before LCALL_NOW), admitted with
 * a fresh second (written anew) or refused by x1 (left as it was). */
static const struct lcall_grp LEVEL2S[] = {
    LEVEL2("k1", "x1", ""),  LEVEL2("k1", "x1", ""), LEVEL2("k2", "x1", ""),
    LEVEL2("k3", "k3", ""),  LEVEL2("k4", "kw", ""), LEVEL2("k5", "ks", ""),
    LEVEL2("k6", "x2", "2"), LEVEL2("k1", "x3", ""), LEVEL2("kt", "x4", ""),
    LEVEL2("ku", "x1", ""),
};
#define NLEVEL2S (int)(sizeof(LEVEL2S) / sizeof(*LEVEL2S))

static const char *const LEVEL2_KEYS[] = { "k1", "k2", "k3", "k4", "k5",
                                           "k6", "x1", "x2", "x3", "x4",
                                           "kw", "ks", "kt", "ku", "o1" };
#define NLEVEL2_KEYS (int)(sizeof(LEVEL2_KEYS) / sizeof(*LEVEL2_KEYS))

/* kt's and ku's TAT as planted: 1 s before LCALL_NOW, in nanoseconds. */
#define PAST_TAT "1699999999000000000"

/* kw a hash, ks no TAT; with `level1_hash`, field user:o of the override
 * hash holds "2" (else no hash exists, which one EXISTS of them all
 * tells). */
static int level1_hash;

static void plant_level1(redisContext *c)
{
    px_check_status(px_cmd(c, "FLUSHALL"), "OK");
    px_check_int(px_cmd(c, "HSET kw f v"), 1);
    px_check_status(px_cmd(c, "SET ks abc"), "OK");
    px_check_status(px_cmd(c, "SET kt " PAST_TAT), "OK");
    px_check_status(px_cmd(c, "SET ku " PAST_TAT), "OK");
    if (level1_hash) {
        px_check_int(px_cmd(c, "HSET o1 user:o 2"), 1);
    }
}

Test(it_lua_each, one_level_batches_decide_as_each, .init = it_init,
     .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = connect_all();

    for (level1_hash = 0; level1_hash <= 1; level1_hash++) {
        redisReply *r;
        /* Flat: the batch's 3, then limited and the TAT read per group,
         * or one element for a group that was not decided. */
        static const int limited[] = { 0, 0, 0, 1 };
        const char *ctx = level1_hash ? "a hash" : "no hash";

        cr_assert_eq(expect_shapes_as_each(c, LEVEL1S, NLEVEL1S, LEVEL1_KEYS, 5,
                                           plant_level1, &r),
                     1);
        /* What the differential comparison alone would not catch: both
         * forms wrong alike. k1's four checks: nil, then TATs, the last
         * refused. */
        for (int i = 0; i < 4; i++) {
            cr_assert_eq(r->element[3 + 2 * i]->integer, limited[i],
                         "%s: k1 check %d", ctx, i);
            cr_assert_eq(r->element[4 + 2 * i]->type,
                         i == 0 ? REDIS_REPLY_NIL : REDIS_REPLY_STRING,
                         "%s: k1 check %d", ctx, i);
        }
        /* k2 assuming "2": decided only when the hash holds it. */
        cr_assert_eq(r->element[11]->type,
                     level1_hash ? REDIS_REPLY_INTEGER : REDIS_REPLY_ARRAY,
                     "%s", ctx);
        freeReplyObject(r);
    }
    redisFree(c);
}

/* The words of a parenthesized list: a list of parameters passed on
 * through a macro as one argument. */
#define UNPAREN(...) __VA_ARGS__

/* Batches of one shape of one level of another algorithm (`params`, a
 * parenthesized list), which the library decides in the same loop, most groups
 * through the algorithm's fused check (its `one`) and the others as LIM_one
 * does: k1 admitted twice, then refused; a stale override; a key of the wrong
 * type; a hash without the algorithm's fields; then three planted
 * states p, q, r (plant_level1_states's kp, kq, kr), p and r twice. */
#define LEVEL1_BATCH(algo, params, p, q, r)                                    \
    {                                                                          \
        LEVEL1_OF(algo, UNPAREN params, "k1", "user:a", ""),                   \
            LEVEL1_OF(algo, UNPAREN params, "k1", "user:a", ""),               \
            LEVEL1_OF(algo, UNPAREN params, "k1", "user:a", ""),               \
            LEVEL1_OF(algo, UNPAREN params, "k2", "user:o", "2"),              \
            LEVEL1_OF(algo, UNPAREN params, "ks", "user:a", ""),               \
            LEVEL1_OF(algo, UNPAREN params, "k2", "user:a", ""),               \
            LEVEL1_OF(algo, UNPAREN params, "kw", "user:a", ""),               \
            LEVEL1_OF(algo, UNPAREN params, p, "user:a", ""),                  \
            LEVEL1_OF(algo, UNPAREN params, p, "user:a", ""),                  \
            LEVEL1_OF(algo, UNPAREN params, q, "user:a", ""),                  \
            LEVEL1_OF(algo, UNPAREN params, r, "user:a", ""),                  \
            LEVEL1_OF(algo, UNPAREN params, r, "user:a", ""),                  \
    }

/* Limits of 2 (capacity, size, max) per algorithm with a fused check. */
#define TB_2 "2", "1000000"
#define LB_2 "2", "1000", "1"
#define FW_2 "2", "60000"
#define SC_2 "2", "60000"

static const struct lcall_grp LEVEL1_TB[] =
    LEVEL1_BATCH("token_bucket", (TB_2), "kp", "kq", "kr");
static const struct lcall_grp LEVEL1_LB[] =
    LEVEL1_BATCH("leaky_bucket", (LB_2), "kp", "kq", "kr");
static const struct lcall_grp LEVEL1_FW[] =
    LEVEL1_BATCH("fixed_window", (FW_2), "kp", "kq", "kr");
static const struct lcall_grp LEVEL1_SC[] =
    LEVEL1_BATCH("sliding_counter", (SC_2), "kp", "kq", "kr");
#define NLEVEL1_BATCH (int)(sizeof(LEVEL1_TB) / sizeof(*LEVEL1_TB))

static const char *const LEVEL1_STATE_KEYS[] = { "k1", "k2", "kw", "ks",
                                                 "o1", "kp", "kq", "kr" };

/* plant_level1, and three hashes that hold the fields of every one of
 * those algorithms (each reads its own) around LCALL_NOW (1700000000000000 us,
 * 20 s into a one-minute window): kp from the window before, a bucket
 * 300 ms behind; kq from the next window, a clock behind its bucket; kr
 * from this window, a full token bucket, an empty leaky one. */
static void plant_level1_states(redisContext *c)
{
    plant_level1(c);
    px_check_int(px_cmd(c, "HSET kp start 1699999920000000 count 1 prev 1 "
                           "level 1 ts 1699999999700000 tokens 1 frac 0"),
                 7);
    px_check_int(px_cmd(c, "HSET kq start 1700000040000000 count 2 prev 0 "
                           "level 2 ts 1700000001000000 tokens 0 "
                           "frac 500000000000000"),
                 7);
    px_check_int(px_cmd(c, "HSET kr start 1699999980000000 count 1 prev 3 "
                           "level 0 ts 1699999995000000 tokens 2 frac 0"),
                 7);
}

Test(it_lua_each, one_level_batches_of_another_algorithm_decide_as_each,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    static const struct lcall_grp *const batches[] = { LEVEL1_TB, LEVEL1_LB,
                                                       LEVEL1_FW, LEVEL1_SC };
    redisContext *c = connect_all();

    for (size_t b = 0; b < sizeof(batches) / sizeof(*batches); b++) {
        for (level1_hash = 0; level1_hash <= 1; level1_hash++) {
            const char *ctx = level1_hash ? "a hash" : "no hash";
            const char *algo = batches[b][0].l[0].algo;
            redisReply *r;

            cr_assert_eq(expect_shapes_as_each(c, batches[b], NLEVEL1_BATCH,
                                               LEVEL1_STATE_KEYS, 8,
                                               plant_level1_states, &r),
                         1);
            /* k1: admitted, admitted, refused (limited, then its 6
             * values). */
            cr_assert_eq(r->element[3]->integer, 0, "%s, %s", algo, ctx);
            cr_assert_eq(r->element[10]->integer, 0, "%s, %s", algo, ctx);
            cr_assert_eq(r->element[17]->integer, 1, "%s, %s", algo, ctx);
            freeReplyObject(r);
        }
    }
    redisFree(c);
}

/* sliding_window's limit of 2 in a minute of 1 s slots, its batch
 * LEVEL1_BATCH's with states of its own: k1 new (the fused check's new-key
 * write), then in use; sa one live slot 10 s before LCALL_NOW; sb a slot out of
 * the window (70 s back: the admission's write drops it) and a live one 1 s
 * back; sc a slot 5 s ahead (a clock behind it). */
#define SW_2 "2", "60000", "1000"
static const struct lcall_grp LEVEL1_SW[] =
    LEVEL1_BATCH("sliding_window", (SW_2), "sa", "sb", "sc");

static const char *const SW_STATE_KEYS[] = { "k1", "k2", "kw", "ks",
                                             "o1", "sa", "sb", "sc" };

/* Batches of one shape whose groups mostly find their key missing (new
 * identities), at cost 1 (admitted), 2 (the whole limit) and 3 (refused,
 * nothing written): the library decides the first missing key of a call
 * through the algorithm's fused check and replays that decision on the
 * others (the same reply, the same HSET and PEXPIRE on their own keys),
 * which must answer and write as the general path does for each: n1..n5
 * new, n1 and n2 again (in use by then), kp and kr planted between them. */
static const char *const NEW_KEYS[] = { "n1", "n2", "kp", "n3", "n1",
                                        "n4", "kr", "n2", "n5" };
#define NNEW_KEYS (int)(sizeof(NEW_KEYS) / sizeof(*NEW_KEYS))

static const char *const NEW_STATE_KEYS[] = { "n1", "n2", "n3", "n4",
                                              "n5", "kp", "kr" };

Test(it_lua_each, new_identities_of_a_fused_check_decide_as_each,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    static const struct lcall_grp one[] = {
        LEVEL1_OF("token_bucket", TB_2, "", "user:a", ""),
        LEVEL1_OF("leaky_bucket", LB_2, "", "user:a", ""),
        LEVEL1_OF("fixed_window", FW_2, "", "user:a", ""),
        LEVEL1_OF("sliding_counter", SC_2, "", "user:a", ""),
        LEVEL1_OF("sliding_window", SW_2, "", "user:a", ""),
    };
    static const char *const costs[] = { "1", "2", "3" };
    static struct lcall_grp batch[NNEW_KEYS];
    redisContext *c = connect_all();

    level1_hash = 0;
    for (size_t a = 0; a < sizeof(one) / sizeof(*one); a++) {
        for (size_t k = 0; k < sizeof(costs) / sizeof(*costs); k++) {
            redisReply *r;
            int written = 0;
            for (int x = 0; x < NNEW_KEYS; x++) {
                batch[x] = one[a];
                batch[x].cost = costs[k];
                batch[x].l[0].key = NEW_KEYS[x];
            }
            cr_assert_eq(expect_shapes_as_each(c, batch, NNEW_KEYS,
                                               NEW_STATE_KEYS, 7,
                                               plant_level1_states, &r),
                         1);
            freeReplyObject(r);
            /* Each run left its state: the new keys written exactly when
             * the cost fits the limit of 2. */
            for (int x = 0; x < 5; x++) {
                redisReply *e = px_cmd(c, "EXISTS %s", NEW_STATE_KEYS[x]);
                written += (int)e->integer;
                freeReplyObject(e);
            }
            cr_assert_eq(written, k < 2 ? 5 : 0, "%s at cost %s: %d written",
                         one[a].l[0].algo, costs[k], written);
        }
    }
    redisFree(c);
}

static void plant_sw_states(redisContext *c)
{
    plant_level1(c);
    px_check_int(px_cmd(c, "HSET sa 1699999990000000 1 total 1"), 2);
    px_check_int(px_cmd(c, "HSET sb 1699999930000000 1 1699999999000000 1 "
                           "total 2"),
                 3);
    px_check_int(px_cmd(c, "HSET sc 1700000005000000 1 total 1"), 2);
}

Test(it_lua_each, one_level_batches_of_sliding_window_decide_as_each,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = connect_all();

    for (level1_hash = 0; level1_hash <= 1; level1_hash++) {
        const char *ctx = level1_hash ? "a hash" : "no hash";
        redisReply *r;

        cr_assert_eq(expect_shapes_as_each(c, LEVEL1_SW, NLEVEL1_BATCH,
                                           SW_STATE_KEYS, 8, plant_sw_states,
                                           &r),
                     1);
        /* What the comparison alone would not catch: k1 admitted, admitted,
         * refused (limited, then its 6 values); sb's stale slot dropped,
         * its live one and now's kept; sc's one slot ahead counted in. */
        cr_assert_eq(r->element[3]->integer, 0, "%s", ctx);
        cr_assert_eq(r->element[10]->integer, 0, "%s", ctx);
        cr_assert_eq(r->element[17]->integer, 1, "%s", ctx);
        freeReplyObject(r);
        px_check_int(px_cmd(c, "HEXISTS sb 1699999930000000"), 0);
        px_check_str(px_cmd(c, "HGET sb 1699999999000000"), "1");
        px_check_str(px_cmd(c, "HGET sb 1700000000000000"), "1");
        px_check_str(px_cmd(c, "HGET sc 1700000005000000"), "2");
        px_check_str(px_cmd(c, "HGET k1 total"), "2");
    }
    redisFree(c);
}

Test(it_lua_each, two_level_batches_decide_as_each, .init = it_init,
     .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = connect_all();

    for (level1_hash = 0; level1_hash <= 1; level1_hash++) {
        const char *ctx = level1_hash ? "a hash" : "no hash";
        redisReply *r;

        cr_assert_eq(expect_shapes_as_each(c, LEVEL2S, NLEVEL2S, LEVEL2_KEYS,
                                           NLEVEL2_KEYS, plant_level1, &r),
                     1);
        /* The first two groups: admitted with nothing read, then refused
         * by x1 (its TAT read); the third refused by x1 too. */
        cr_assert_eq(r->element[3]->integer, 0, "%s", ctx);
        cr_assert_eq(r->element[4]->type, REDIS_REPLY_NIL, "%s", ctx);
        cr_assert_eq(r->element[6]->integer, 1, "%s", ctx);
        cr_assert_eq(r->element[8]->type, REDIS_REPLY_STRING, "%s", ctx);
        cr_assert_eq(r->element[9]->integer, 1, "%s", ctx);
        freeReplyObject(r);
        /* k2 was fresh, refused by x1: not left behind. */
        px_check_int(px_cmd(c, "EXISTS k2"), 0);
        /* kt's past TAT admitted: a TAT of now + INC (1 s), with x4's;
         * ku's refused by x1: untouched. */
        px_check_str(px_cmd(c, "GET kt"), "1700000001000000000");
        px_check_str(px_cmd(c, "GET ku"), PAST_TAT);
    }
    redisFree(c);
}

/* A batch whose groups assume overrides that are gone: nothing decided or
 * written for those, whether or not any override hash of the batch
 * exists (none: one EXISTS for the batch answers for every group; one
 * does: each group reads its own). */
static const struct lcall_grp STALE[] = {
    { .mode = "check",
      .cost = "1",
      .n = 1,
      .l = { { "a1", "gcra", { GCRA_2S }, NULL } },
      .ovr = "o1",
      .m = 1,
      .path = { "user:a" },
      .known = { "" } },
    { .mode = "check",
      .cost = "1",
      .n = 1,
      .l = { { "a2", "gcra", { GCRA_2S }, NULL } },
      .ovr = "o2",
      .m = 1,
      .path = { "user:b" },
      .known = { "2" } },
    { .mode = "check",
      .cost = "1",
      .n = 1,
      .l = { { "b1", "token_bucket", { "3", "1000000" }, NULL } },
      .ovr = "o3",
      .m = 1,
      .path = { "user:c" },
      .known = { "3" } },
    { .mode = "check",
      .cost = "1",
      .n = 2,
      .l = { { "a3", "gcra", { GCRA_2S }, NULL },
             { "a4", "gcra", { GCRA_2S }, NULL } },
      .ovr = "o4",
      .m = 2,
      .path = { "user:d", "user:d:x" },
      .known = { "", "" } },
    { .mode = "check",
      .cost = "1",
      .n = 1,
      .l = { { "b2", "token_bucket", { "3", "1000000" }, NULL } },
      .ovr = "o5",
      .m = 1,
      .path = { "user:e" },
      .known = { "" } },
};
#define NSTALE (int)(sizeof(STALE) / sizeof(*STALE))

Test(it_lua_each, a_stale_override_is_caught_with_or_without_hashes,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = connect_all();
    static struct lcall_args blocks[LCALL_GROUPS_MAX];
    struct lcall_args a;

    for (int some = 0; some <= 1; some++) {
        const char *ctx = some ? "a hash exists" : "no hash";
        redisReply *r;
        size_t e = 3;

        px_check_status(px_cmd(c, "FLUSHALL"), "OK");
        if (some) {
            /* A field none of the groups names. */
            px_check_int(px_cmd(c, "HSET o4 user:z 7"), 1);
        }
        lcall_shapes(&a, blocks, STALE, NSTALE, 0, 1);
        r = lcall_run(c, &a);
        replies_expect_array(r, ctx);
        for (int x = 0; x < NSTALE; x++) {
            const struct lcall_grp *g = &STALE[x];
            int stale = strcmp(g->known[0], "") != 0;

            cr_assert_lt(e, r->elements, "%s: group %d", ctx, x);
            if (stale) {
                const redisReply *o = r->element[e++];

                replies_expect_array(o, ctx);
                cr_assert_eq(o->elements, 2, "%s: group %d", ctx, x);
                cr_assert_str_eq(o->element[0]->str, "override", "%s", ctx);
                cr_assert_str_eq(o->element[1]->str, "", "%s", ctx);
                continue;
            }
            /* Decided and admitted: limited 0, then per gcra level its
             * TAT before (none), or token_bucket's six values. */
            cr_assert_eq(r->element[e]->type, REDIS_REPLY_INTEGER,
                         "%s: group %d", ctx, x);
            cr_assert_eq(r->element[e]->integer, 0, "%s: group %d", ctx, x);
            e += 1 + (strcmp(g->l[0].algo, "gcra") == 0 ? (size_t)g->n : 6);
        }
        cr_assert_eq(r->elements, e, "%s", ctx);
        freeReplyObject(r);
        /* Written: the admitted groups' keys, and the planted hash. */
        px_check_int(px_cmd(c, "EXISTS a1 a3 a4 b2"), 4);
        px_check_int(px_cmd(c, "EXISTS a2 b1 o1 o2 o3 o5"), 0);
        px_check_int(px_cmd(c, "DBSIZE"), 4 + some);
    }
    redisFree(c);
}

Test(it_lua_each, a_malformed_shapes_batch_is_refused_whole, .init = it_init,
     .fini = px_env_fini, .timeout = 60)
{
    /* Each line: KEYS, then ARGV after "shapes" LCALL_NOW (NULL ends); a
     * group is its shape's number (when S > 1) and its shape's m pairs. */
    static const struct bad_call bad[] = {
        { 2, { "0", OK_SHAPE, "1", NULL } },      /* S = 0 */
        { 2, { "x", OK_SHAPE, "1", NULL } },      /* S no number */
        { 2, { "2", OK_SHAPE, "1", NULL } },      /* a shape short */
        { 2, { "1", OK_SHAPE, "0", NULL } },      /* G = 0 */
        { 2, { "1", OK_SHAPE, "-1", NULL } },     /* G < 0 */
        { 2, { "1", OK_SHAPE, "2", NULL } },      /* a group short */
        { 2, { "1", OK_SHAPE, "1", "1", NULL } }, /* ARGV left */
        { 4, { "2", OK_SHAPE, OK_SHAPE, "2", "0", "1", NULL } }, /* shape 0 */
        { 4, { "2", OK_SHAPE, OK_SHAPE, "2", "1", "3", NULL } }, /* > S */
        { 4, { "2", OK_SHAPE, OK_SHAPE, "2", "1", "x", NULL } }, /* no number */
        { 4, { "2", OK_SHAPE, OK_SHAPE, "2", "1", NULL } }, /* a number short */
        { 2, { "1", OK_LEVELS, "1", NULL } },               /* no m */
        { 2, { "1", OK_LEVELS, "-1", "1", NULL } },         /* m < 0 */
        { 2, { "1", OK_LEVELS, "x", "1", NULL } },          /* m no number */
        { 2, { "1", OK_LEVELS, "1", "1", "f", NULL } },     /* a pair short */
        { 2, { "1", OK_LEVELS, "2", "1", "f", "", NULL } }, /* m past */
        { 3, { "1", OK_SHAPE, "1", NULL } },                /* a key too many */
        { 1, { "1", OK_SHAPE, "1", NULL } },                /* a key too few */
        { 2, { "1", OK_SHAPE, NULL } },                     /* no G */
        { 4, { "2", OK_SHAPE, OK_SHAPE, "1", "1", NULL } }, /* 4 keys */
        { 2,
          { "1", "check", "1", "9", "fixed_window", "5", "60000", "", "", "",
            "0", "1", NULL } }, /* n past the end */
    };
    redisContext *c = connect_all();

    px_check_status(px_cmd(c, "SET other 1"), "OK");
    expect_refused_whole(c, "shapes", bad, sizeof(bad) / sizeof(*bad), 0);
    /* Valid, undeclared, both groups decided: two shapes, of m 0 and 1,
     * then one shape of m 1 (its groups name none). */
    for (int one = 0; one <= 1; one++) {
        struct lcall_args a;
        redisReply *r;
        static const char *const two[] = { "2",  OK_LEVELS, "0",  OK_LEVELS,
                                           "1",  "2",       "1",  "2",
                                           "f",  "",        "k1", "k1#o",
                                           "k2", "k2#o",    NULL };
        static const char *const single[] = { "1",  OK_LEVELS, "1",  "2",
                                              "f",  "",        "g",  "",
                                              "k1", "k1#o",    "k2", "k2#o",
                                              NULL };
        const char *const *valid = one ? single : two;

        px_check_status(px_cmd(c, "FLUSHALL"), "OK");
        lcall_start(&a, "limiter", LCALL_RUN);
        lcall_arg(&a, "0");
        lcall_arg(&a, "shapes");
        lcall_arg(&a, LCALL_NOW);
        for (size_t i = 0; valid[i] != NULL; i++) {
            lcall_arg(&a, valid[i]);
        }
        r = lcall_run(c, &a);
        replies_expect_array(r, one ? "one shape" : "two shapes");
        cr_assert_eq(r->elements, 3 + 2 * 7, "two decided groups, flat");
        cr_assert_eq(r->element[3]->integer, 0);
        cr_assert_eq(r->element[10]->integer, 0);
        freeReplyObject(r);
        px_check_int(px_cmd(c, "DBSIZE"), 2);
    }
    redisFree(c);
}

/* ---------------- Errors ---------------- */

Test(it_lua_each, a_failed_group_writes_nothing_and_the_others_are_decided,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    static const struct lcall_grp g[] = {
        /* a string where a hash belongs */
        GROUP1("check", "1", "ovr", "w", "token_bucket", "3", "1000000"),
        GROUP1("check", "1", "ovr", "f0", "no_such_algorithm", "3", "1000000"),
        GROUP1("check", "-1", "ovr", "f0", "fixed_window", "5", "60000"),
        GROUP1("check", "1", "ovr", "f1", "fixed_window", "5", "60000"),
        /* f2 admits, w fails: nothing of the group is written */
        { .mode = "check",
          .cost = "1",
          .n = 2,
          .l = { { "f2", "fixed_window", { "5", "60000" }, NULL },
                 { "w", "gcra", { GCRA_2S }, NULL } },
          .ovr = "ovr",
          .m = 0,
          .path = { 0 },
          .known = { 0 } },
        GROUP1("check", "1", "ovr", "f3", "fixed_window", "0", "60000"),
        GROUP1("check", "1", "ovr", "f1", "fixed_window", "5", "60000"),
    };
    redisContext *c = connect_all();
    struct lcall_args a;
    redisReply *r;

    px_check_status(px_cmd(c, "SET w notahash"), "OK");
    lcall_each(&a, g, 7, LCALL_RUN, 0, 1);
    r = lcall_run(c, &a);
    replies_expect_array(r, "batch");
    cr_assert_eq(r->elements, 3 + 7);
    replies_expect_error(r->element[3], E_WRONGTYPE, "group 0");
    replies_expect_error(r->element[4], E_BAD, "group 1");
    replies_expect_error(r->element[5], E_BAD, "group 2");
    replies_expect_array(r->element[6], "group 3");
    cr_assert_eq(r->element[6]->element[0]->integer, 0);
    replies_expect_error(r->element[7], E_WRONGTYPE, "group 4");
    replies_expect_error(r->element[8],
                         "ERR fixed_window max must be between 1 and 2^53 - 1",
                         "group 5");
    /* The last group saw the fourth's write. */
    replies_expect_array(r->element[9], "group 6");
    cr_assert_eq(r->element[9]->element[3]->element[2]->integer, 3);
    freeReplyObject(r);
    px_check_str(px_cmd(c, "GET w"), "notahash");
    px_check_int(px_cmd(c, "EXISTS f0 f2 f3"), 0);
    px_check_str(px_cmd(c, "HGET f1 count"), "2");
    redisFree(c);
}

Test(it_lua_each, a_malformed_batch_is_refused_whole_and_writes_nothing,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    /* Each line: KEYS, then ARGV after "each" LCALL_NOW (NULL ends). */
    static const struct bad_call bad[] = {
        { 2, { "0", OK_GROUP, NULL } },           /* G = 0 */
        { 2, { "x", OK_GROUP, NULL } },           /* G not a number */
        { 2, { "2", OK_GROUP, NULL } },           /* fewer groups */
        { 2, { "1", OK_GROUP, "extra", NULL } },  /* ARGV left over */
        { 3, { "1", OK_GROUP, NULL } },           /* a key too many */
        { 1, { "1", OK_GROUP, NULL } },           /* a key too few */
        { 3, { "2", OK_GROUP, OK_GROUP, NULL } }, /* 3 keys, groups take 4 */
        { 2,
          { "1", "check", "1", "x", "fixed_window", "5", "60000", "", "", "",
            "0", NULL } }, /* n not a number */
        { 2,
          { "1", "check", "1", "1", "fixed_window", "5", "60000", "", "", "",
            "-1", NULL } }, /* m < 0 */
        { 2,
          { "1", "check", "1", "1", "fixed_window", "5", "60000", "", "", "",
            "1", "user:x", NULL } },     /* a pair cut short */
        { 2, { "-1", OK_GROUP, NULL } }, /* G < 0 */
    };
    redisContext *c = connect_all();

    px_check_status(px_cmd(c, "SET other 1"), "OK");
    expect_refused_whole(c, "each", bad, sizeof(bad) / sizeof(*bad), 1);
    /* A bad clock is refused whole too, and the valid batch works. */
    {
        static const struct lcall_grp g =
            GROUP1("check", "1", "k1#o", "k1", "fixed_window", "5", "60000");
        struct lcall_args a;
        redisReply *r;
        lcall_each(&a, &g, 1, LCALL_RUN, 0, 1);
        a.v[a.n - 10 - 2] = "soon"; /* the now before G and the group */
        a.len[a.n - 10 - 2] = 4;
        r = lcall_run(c, &a);
        replies_expect_error(r, E_BAD, "a bad clock");
        freeReplyObject(r);
        px_check_int(px_cmd(c, "DBSIZE"), 1);
        lcall_each(&a, &g, 1, LCALL_RUN, 0, 1);
        r = lcall_run(c, &a);
        replies_expect_array(r, "the valid batch");
        freeReplyObject(r);
        px_check_int(px_cmd(c, "DBSIZE"), 2);
    }
    redisFree(c);
}

/* ---------------- Repeated keys ---------------- */

Test(it_lua_each, a_repeated_key_sees_the_earlier_groups_write, .init = it_init,
     .fini = px_env_fini, .timeout = 60)
{
    static const struct lcall_grp fw =
        GROUP1("check", "1", "r#o", "r", "fixed_window", "2", "60000");
    static const struct lcall_grp gc =
        GROUP1("check", "1", "t#o", "t", "gcra", GCRA_2S);
    const struct lcall_grp g[5] = { fw, gc, fw, gc, fw };
    redisContext *c = connect_all();
    struct lcall_args a;
    redisReply *r;

    lcall_each(&a, g, 5, LCALL_RUN, 0, 1);
    r = lcall_run(c, &a);
    replies_expect_array(r, "batch");
    /* fixed_window max 2: remaining 1, 0, then refused */
    cr_assert_eq(r->element[3]->element[0]->integer, 0);
    cr_assert_eq(r->element[3]->element[3]->element[2]->integer, 1);
    cr_assert_eq(r->element[5]->element[0]->integer, 0);
    cr_assert_eq(r->element[5]->element[3]->element[2]->integer, 0);
    cr_assert_eq(r->element[7]->element[0]->integer, 1);
    /* gcra burst 0: the first admits on a new key, the second reads the
     * TAT it wrote (now + 2 s) and is refused. */
    cr_assert_eq(r->element[4]->element[0]->integer, 0);
    cr_assert_eq(r->element[4]->element[3]->element[0]->type, REDIS_REPLY_NIL);
    cr_assert_eq(r->element[6]->element[0]->integer, 1);
    cr_assert_str_eq(r->element[6]->element[3]->element[0]->str,
                     "1700000002000000000");
    freeReplyObject(r);
    px_check_str(px_cmd(c, "HGET r count"), "2");
    px_check_str(px_cmd(c, "GET t"), "1700000002000000000");
    redisFree(c);
}

/* ---------------- The library form answers as the scripts ---------------- */

/* gcra.lua "runs" over keys[0..n-1], one run of one limit (4 arguments). */
static void args_gcra_runs(struct lcall_args *a, const char *const *keys, int n,
                           const char *const p[4], enum lcall_form form)
{
    lcall_start(a, "gcra", form);
    lcall_int(a, n);
    for (int i = 0; i < n; i++) {
        lcall_arg(a, keys[i]);
    }
    lcall_arg(a, "runs");
    lcall_arg(a, "1");
    lcall_int(a, n);
    for (int k = 0; k < 4; k++) {
        lcall_arg(a, p[k]);
    }
}

/* The run of one form: every limiter call's reply, and of each gcra call
 * its flags and which keys had a TAT (its clock is the node's). */
struct form_run {
    redisReply *lim[2 * NMIXED + 2];
    int nlim;
    char gcra[4][64];
    struct replies_state st[NMIXED_KEYS];
};

static void run_form(redisContext *c, enum lcall_form form, struct form_run *fr)
{
    static const char *const gkeys[] = { "g1", "g2", "g1", "g1", "w", "g2" };
    static const char *const p[4] = { "1", "0", "2", "0" }; /* burst 1 */
    struct lcall_args a;

    memset(fr, 0, sizeof(*fr));
    plant(c);
    px_check_status(px_cmd(c, "SET w notatat"), "OK");
    for (int g = 0; g < NMIXED; g++) {
        lcall_single(&a, &MIXED[g], form, 0);
        fr->lim[fr->nlim++] = lcall_run(c, &a);
    }
    lcall_each(&a, MIXED, NMIXED, form, 0, 1);
    fr->lim[fr->nlim++] = lcall_run(c, &a);
    for (int x = 0; x < 4; x++) {
        args_gcra_runs(&a, gkeys, 6, p, form);
        redisReply *r = lcall_run(c, &a);
        replies_expect_array(r, "gcra runs");
        cr_assert_eq(r->elements, 3 + 6 + 1); /* 6 TATs, 1 word of bits */
        lua_twin_runs_text(r, 6, fr->gcra[x], sizeof(fr->gcra[x]));
        freeReplyObject(r);
    }
    for (int k = 0; k < NMIXED_KEYS; k++) {
        replies_state_read(c, MIXED_KEYS[k], &fr->st[k]);
    }
}

Test(it_lua_each, the_function_form_answers_as_evalsha, .init = it_init,
     .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = connect_all();
    struct form_run fs, ff;
    long long t0 = px_now_ms();

    run_form(c, LCALL_SCRIPT, &fs);
    run_form(c, LCALL_FUNCTION, &ff);
    /* The library did run: FCALL was counted. */
    redisReply *info = px_cmd(c, "INFO commandstats");
    cr_assert_not_null(strstr(info->str, "cmdstat_fcall:"));
    freeReplyObject(info);

    cr_assert_eq(fs.nlim, ff.nlim);
    for (int i = 0; i < fs.nlim; i++) {
        char ctx[32];
        snprintf(ctx, sizeof(ctx), "limiter call %d", i);
        replies_expect_eq(fs.lim[i], ff.lim[i], ctx);
        freeReplyObject(fs.lim[i]);
        freeReplyObject(ff.lim[i]);
    }
    for (int x = 0; x < 4; x++) {
        cr_assert_str_eq(fs.gcra[x], ff.gcra[x], "gcra call %d", x);
    }
    /* burst 1 on g1 (three times a call) and g2: admitted twice, then
     * refused; w is no TAT. */
    cr_assert_str_eq(fs.gcra[0], "-0 -0 +0 +1 --1 +0 ");
    for (int k = 0; k < NMIXED_KEYS; k++) {
        replies_state_expect_eq(&fs.st[k], &ff.st[k], px_now_ms() - t0 + 5,
                                MIXED_KEYS[k]);
    }
    redisFree(c);
}

/* The library is what the build will make: definitions before each
 * "--#call", every part once, one function per entry script. */
Test(it_lua_each, the_library_pastes_each_part_once, .init = it_init,
     .fini = px_env_fini, .timeout = 60)
{
    size_t len;
    char *lib = lua_twin_library(&len);
    const char *at;
    int n = 0;

    cr_assert_eq(strncmp(lib, "#!lua name=" LUA_TWIN_LIBRARY "\n", 20), 0);
    for (at = lib; (at = strstr(at, "\nlocal function gcra_decide(")) != NULL;
         at++) {
        n++;
    }
    cr_assert_eq(n, 1, "gcra part pasted %d times", n);
    cr_assert_null(strstr(lib, "--#include"));
    cr_assert_null(strstr(lib, "\n--#call\n"));
    cr_assert_not_null(strstr(lib, "local function gcra_call(KEYS, ARGV)\n"));
    cr_assert_not_null(
        strstr(lib, "local function limiter_call(KEYS, ARGV)\n"));
    free(lib);
}

/* ---------------- A write Redis refuses ---------------- */

/* A batch of three new identities of one level of `algo` (its four
 * parameters p), keys n1..n3 with override hashes o1..o3, none of which
 * exists (the fused checks run only then), each group assuming field "p"
 * empty, as a script (EVALSHA: a script that has written nothing yet may
 * not write out of memory, while a function that may write is refused
 * whole): mode "shapes" (the fused check's write) or "each" (the general
 * path's commit). */
static redisReply *run_three_new(redisContext *c, const char *algo,
                                 const char *const *p, int shapes)
{
    static const char *const keys[] = { "n1", "o1", "n2", "o2", "n3", "o3" };
    struct lcall_args a;

    lcall_start(&a, "limiter", LCALL_SCRIPT);
    lcall_int(&a, 6);
    for (int i = 0; i < 6; i++) {
        lcall_arg(&a, keys[i]);
    }
    lcall_arg(&a, shapes ? "shapes" : "each");
    lcall_arg(&a, LCALL_NOW);
    lcall_int(&a, shapes ? 1 : 3);
    for (int g = 0; g < (shapes ? 1 : 3); g++) {
        lcall_arg(&a, "check");
        lcall_arg(&a, "1");
        lcall_arg(&a, "1");
        lcall_arg(&a, algo);
        for (int k = 0; k < 4; k++) {
            lcall_arg(&a, p[k]);
        }
        lcall_arg(&a, "");
        lcall_arg(&a, "1");
        if (!shapes) {
            lcall_arg(&a, "p");
            lcall_arg(&a, "");
        }
    }
    if (shapes) {
        lcall_int(&a, 3);
        for (int g = 0; g < 3; g++) {
            lcall_arg(&a, "p");
            lcall_arg(&a, "");
        }
    }
    return lcall_run(c, &a);
}

/* Out of memory, every fused check's write (HSET) is refused: each group
 * is its error element, as the general path makes it, and nothing is
 * written; with memory, the same batch admits all three. */
Test(it_lua_each, a_refused_write_is_the_groups_error_on_either_path,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    static const struct {
        const char *algo;
        const char *p[4];
    } lv[] = {
        { "token_bucket", { TB_2, "", "" } },
        { "leaky_bucket", { LB_2, "" } },
        { "fixed_window", { FW_2, "", "" } },
        { "sliding_counter", { SC_2, "", "" } },
        { "sliding_window", { SW_2, "" } },
    };
    redisContext *c = connect_all();

    for (size_t l = 0; l < sizeof(lv) / sizeof(*lv); l++) {
        for (int shapes = 0; shapes <= 1; shapes++) {
            const char *ctx = shapes ? "shapes" : "each";
            redisReply *r;

            px_check_status(px_cmd(c, "FLUSHALL"), "OK");
            px_check_status(px_cmd(c, "CONFIG SET maxmemory 1"), "OK");
            r = run_three_new(c, lv[l].algo, lv[l].p, shapes);
            px_check_status(px_cmd(c, "CONFIG SET maxmemory 0"), "OK");
            replies_expect_array(r, ctx);
            cr_assert_eq(r->elements, 6, "%s, %s", lv[l].algo, ctx);
            for (size_t g = 3; g < 6; g++) {
                const redisReply *e = r->element[g];
                cr_assert_eq(e->type, REDIS_REPLY_ERROR, "%s, %s: group %zu",
                             lv[l].algo, ctx, g - 3);
                cr_assert_eq(strncmp(e->str, "OOM ", 4), 0, "%s, %s: %s",
                             lv[l].algo, ctx, e->str);
            }
            freeReplyObject(r);
            px_check_int(px_cmd(c, "DBSIZE"), 0);
            /* With memory: admitted (flat: limited 0, then 6 values). */
            r = run_three_new(c, lv[l].algo, lv[l].p, shapes);
            replies_expect_array(r, ctx);
            cr_assert_eq(r->elements, 3 + (shapes ? 21u : 3u), "%s, %s",
                         lv[l].algo, ctx);
            for (size_t g = 0; g < 3; g++) {
                const redisReply *e =
                    shapes ? r->element[3 + 7 * g] : r->element[3 + g];
                if (!shapes) {
                    replies_expect_array(e, ctx);
                    e = e->element[0];
                }
                cr_assert_eq(e->type, REDIS_REPLY_INTEGER, "%s, %s", lv[l].algo,
                             ctx);
                cr_assert_eq(e->integer, 0, "%s, %s", lv[l].algo, ctx);
            }
            freeReplyObject(r);
            px_check_int(px_cmd(c, "EXISTS n1 n2 n3"), 3);
        }
    }
    redisFree(c);
}
