/* LIMITER's direct path on the identity's state string
 * (algorithms/limiter.lua): a "shapes" batch of gcra levels on keys of the
 * string form is decided on the string itself, without the emulation of
 * the per-level keys (hstate.lua), which mode "each" still takes. So the
 * same groups, from the same planted states, must answer and leave every
 * level's state alike in both modes: fresh identities, TATs ahead of now
 * and past, a record past its expire_at, a refusal by the second level, a
 * record that never expires ("0|"), and a malformed value (the general
 * path's error). */
#include "tests/integration/fixture.h"
#include "tests/integration/lcall.h"
#include "tests/integration/lstate.h"
#include "tests/integration/lua_twin.h"
#include "tests/integration/replies.h"
#include "tests/support/px_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

PX_TEST_SUITE(it_lua_hash);

/* Burst 2, one a second (INC 1 s, DVT 3 s); one per 2 s, no burst. */
#define GCRA_B2 "1", "0", "3", "0"
#define GCRA_2S "2", "0", "2", "0"

#define STR(id) "cellgate:{u:" id "}"
#define K1(id)  STR(id) "#0:gcra"
#define K2(id)  STR(id) ":x#0:gcra"

/* A check of identity id's two levels, or its first alone, assuming no
 * override. */
#define TWO(id)                                                                \
    {                                                                          \
        .mode = "check", .cost = "1", .n = 2,                                  \
        .l = { { K1(id), "gcra", { GCRA_B2 }, NULL },                          \
               { K2(id), "gcra", { GCRA_2S }, NULL } },                        \
        .ovr = STR(id) "#overrides", .m = 2,                                   \
        .path = { "u:" id, "u:" id ":x" }, .known = {                          \
            "",                                                                \
            ""                                                                 \
        }                                                                      \
    }
#define ONE(id)                                                                \
    {                                                                          \
        .mode = "check", .cost = "1", .n = 1,                                  \
        .l = { { K1(id), "gcra", { GCRA_B2 }, NULL } },                        \
        .ovr = STR(id) "#overrides", .m = 1, .path = { "u:" id }, .known = {   \
            ""                                                                 \
        }                                                                      \
    }

/* a fresh (three times), b a TAT ahead, c both past, d its first record
 * expired, e refused by its second, f a first record that never expires,
 * g a malformed first record (plant). */
static const struct lcall_grp TWOS[] = { TWO("a"), TWO("a"), TWO("b"),
                                         TWO("c"), TWO("d"), TWO("e"),
                                         TWO("f"), TWO("g"), TWO("a") };
static const struct lcall_grp ONES[] = {
    ONE("a"), ONE("a"), ONE("a"), ONE("b"),
    ONE("c"), ONE("d"), ONE("f"), ONE("g")
};
#define NTWOS (int)(sizeof(TWOS) / sizeof(*TWOS))
#define NONES (int)(sizeof(ONES) / sizeof(*ONES))

static const char *const KEYS[] = { K1("a"), K2("a"), K1("b"), K2("b"),
                                    K1("c"), K2("c"), K1("d"), K2("d"),
                                    K1("e"), K2("e"), K1("f"), K2("f") };
#define NKEYS (int)(sizeof(KEYS) / sizeof(*KEYS))

/* LCALL_NOW plus half a second, plus a second, less a second (ns). */
#define TAT_AHEAD    "1700000000500000000"
#define TAT_AHEAD_1S "1700000001000000000"
#define TAT_PAST     "1699999999000000000"

static void plant(redisContext *c)
{
    px_check_status(px_cmd(c, "FLUSHALL"), "OK");
    freeReplyObject(lstate_cmd(c, "SET %s %s PX 60000", K1("b"), TAT_AHEAD));
    freeReplyObject(lstate_cmd(c, "SET %s %s PX 60000", K1("c"), TAT_PAST));
    freeReplyObject(lstate_cmd(c, "SET %s %s PX 60000", K2("c"), TAT_PAST));
    /* (Records "<L>:<field>=<value>;" of the state string.) */
    px_check_status(px_cmd(c,
                           "SET " STR("d") " 7:#0:gcra=1000000000000|%s; PX "
                                           "60000",
                           TAT_AHEAD),
                    "OK");
    freeReplyObject(lstate_cmd(c, "SET %s %s PX 60000", K2("e"), TAT_AHEAD_1S));
    px_check_status(px_cmd(c, "SET " STR("f") " 7:#0:gcra=0|%s;", TAT_AHEAD),
                    "OK");
    px_check_status(px_cmd(c, "SET " STR("g") " 7:#0:gcra=abc;"), "OK");
}

/* The elements a group's reply r in mode "each" takes in a flat "shapes"
 * reply: a decided group's limited and its TATs; anything else whole. */
static int flatten(const redisReply *r, const redisReply **out)
{
    int n = 0;

    if (r->type != REDIS_REPLY_ARRAY ||
        r->element[0]->type != REDIS_REPLY_INTEGER) {
        out[n++] = r;
        return n;
    }
    out[n++] = r->element[0];
    for (size_t i = 3; i < r->elements; i++) {
        for (size_t j = 0; j < r->element[i]->elements; j++) {
            out[n++] = r->element[i]->element[j];
        }
    }
    return n;
}

/* Decides g[0..ng-1] in mode "each" and as one "shapes" batch, each from
 * plant's states, and asserts that both answer and write alike; returns
 * the shapes reply (the caller frees it). */
static redisReply *expect_direct_as_each(redisContext *c,
                                         const struct lcall_grp *g, int ng)
{
    static struct lcall_args blocks[LCALL_GROUPS_MAX];
    static struct replies_state s1[NKEYS], s2[NKEYS];
    const redisReply *want[LCALL_ARGV_MAX];
    redisReply *each, *shapes;
    struct lcall_args a;
    long long t0 = px_now_ms();
    int nwant = 3;

    plant(c);
    lcall_each(&a, g, ng, LCALL_RUN, 0, 1);
    each = lcall_run(c, &a);
    for (int k = 0; k < NKEYS; k++) {
        replies_state_read(c, KEYS[k], &s1[k]);
    }
    plant(c);
    cr_assert_eq(lcall_shapes(&a, blocks, g, ng, 0, 1), 1);
    shapes = lcall_run(c, &a);
    for (int k = 0; k < NKEYS; k++) {
        replies_state_read(c, KEYS[k], &s2[k]);
    }
    replies_expect_array(each, "each");
    replies_expect_array(shapes, "shapes");
    for (int i = 0; i < 3; i++) {
        want[i] = each->element[i];
    }
    for (int x = 0; x < ng; x++) {
        nwant += flatten(each->element[3 + x], want + nwant);
    }
    cr_assert_eq(shapes->elements, (size_t)nwant, "%zu elements",
                 shapes->elements);
    for (int i = 0; i < nwant; i++) {
        char at[32];
        snprintf(at, sizeof(at), "element %d", i);
        replies_expect_eq(want[i], shapes->element[i], at);
    }
    for (int k = 0; k < NKEYS; k++) {
        replies_state_expect_eq(&s1[k], &s2[k], px_now_ms() - t0 + 5, KEYS[k]);
    }
    freeReplyObject(each);
    return shapes;
}

static void it_init(void)
{
    px_redis_start(&px_env()->redis, NULL);
}

Test(it_lua_hash, direct_batches_decide_as_the_emulation, .init = it_init,
     .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = lua_twin_connect();
    redisReply *r, *x;
    long long top = 0;

    lua_twin_load_library(c);
    r = expect_direct_as_each(c, TWOS, NTWOS);
    /* What the comparison alone would not catch, both wrong alike (3
     * elements a group): a fresh, admitted; a again, refused by its
     * second level; b admitted from its TAT; e refused; g an error. */
    cr_assert_eq(r->element[3]->integer, 0);
    cr_assert_eq(r->element[4]->type, REDIS_REPLY_NIL);
    cr_assert_eq(r->element[6]->integer, 1);
    cr_assert_eq(r->element[9]->integer, 0);
    cr_assert_str_eq(r->element[10]->str, TAT_AHEAD);
    cr_assert_eq(r->element[18]->integer, 1);
    cr_assert_eq(r->element[24]->type, REDIS_REPLY_ERROR);
    freeReplyObject(r);
    /* The string expires with its latest record: b's. */
    for (int i = 0; i < 2; i++) {
        x = lstate_cmd(c, "PEXPIRETIME %s", i ? K2("b") : K1("b"));
        cr_assert_eq(x->type, REDIS_REPLY_INTEGER);
        top = x->integer > top ? x->integer : top;
        freeReplyObject(x);
    }
    x = px_cmd(c, "PEXPIRETIME " STR("b"));
    cr_assert(x->type == REDIS_REPLY_INTEGER && x->integer == top,
              "the string expires at %lld, its latest record at %lld",
              x->type == REDIS_REPLY_INTEGER ? x->integer : 0, top);
    freeReplyObject(x);

    r = expect_direct_as_each(c, ONES, NONES);
    /* a: admitted three times (DVT 3 s), from nothing, then its TATs;
     * b from its TAT. */
    cr_assert_eq(r->element[3]->integer, 0);
    cr_assert_eq(r->element[4]->type, REDIS_REPLY_NIL);
    cr_assert_eq(r->element[5]->integer, 0);
    cr_assert_eq(r->element[7]->integer, 0);
    cr_assert_eq(r->element[8]->type, REDIS_REPLY_STRING);
    cr_assert_str_eq(r->element[10]->str, TAT_AHEAD);
    freeReplyObject(r);
    redisFree(c);
}
