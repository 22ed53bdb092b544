/* LIMITER's direct path on the identity's state string
 * (algorithms/limiter.lua): a "shapes" batch of gcra levels on keys of the
 * string form is decided on the string itself, without the emulation of
 * the per-level keys (hstate.lua), which mode "each" still takes. So the
 * same groups, from the same planted states, must answer and leave every
 * level's state alike in both modes: fresh identities, TATs ahead of now
 * and past, a record past its expire_at, a refusal by the second level, a
 * record that never expires ("0|"), and a malformed value (the general
 * path's error). The direct path decides only on the node's clock (what
 * it writes expires in the node's time): the batches at LCALL_NOW hold the
 * shapes path's other ways to the emulation, and those on the node's clock
 * the direct path itself, inline (two levels) and whole (three), and with
 * a level below a second "*" that keeps a key of its own ("gcra.key"),
 * whose reads are undone when the group refuses or goes to the
 * emulation. */
#include "algorithms/scripts.h"
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

/* ---------------- On the node's clock ---------------- */

#define K3(id) STR(id) ":y#0:gcra"
#define KO(id) STR(id) ":v:1#0:gcra" /* below a second "*" */

#define THREE(id)                                                              \
    {                                                                          \
        .mode = "check", .cost = "1", .n = 3,                                  \
        .l = { { K1(id), "gcra", { GCRA_B2 }, NULL },                          \
               { K2(id), "gcra", { GCRA_2S }, NULL },                          \
               { K3(id), "gcra", { GCRA_B2 }, NULL } },                        \
        .ovr = STR(id) "#overrides", .m = 3,                                   \
        .path = { "u:" id, "u:" id ":x", "u:" id ":y" }, .known = {            \
            "",                                                                \
            "",                                                                \
            ""                                                                 \
        }                                                                      \
    }
#define MIX(id)                                                                \
    {                                                                          \
        .mode = "check", .cost = "1", .n = 2,                                  \
        .l = { { K1(id), "gcra", { GCRA_B2 }, NULL },                          \
               { KO(id), "gcra.key", { GCRA_B2 }, NULL } },                    \
        .ovr = STR(id) "#overrides", .m = 2,                                   \
        .path = { "u:" id, "u:" id ":v:1" }, .known = {                        \
            "",                                                                \
            ""                                                                 \
        }                                                                      \
    }
/* Two records and a key of its own: the direct path's function (the
 * inline one takes two levels at most). */
#define MIX3(id)                                                               \
    {                                                                          \
        .mode = "check", .cost = "1", .n = 3,                                  \
        .l = { { K1(id), "gcra", { GCRA_B2 }, NULL },                          \
               { K2(id), "gcra", { GCRA_2S }, NULL },                          \
               { KO(id), "gcra.key", { GCRA_B2 }, NULL } },                    \
        .ovr = STR(id) "#overrides", .m = 3,                                   \
        .path = { "u:" id, "u:" id ":x", "u:" id ":v:1" }, .known = {          \
            "",                                                                \
            "",                                                                \
            ""                                                                 \
        }                                                                      \
    }

/* ra fresh (twice: its second level refuses), rb its first record ahead
 * (the others past, so absent), re refused by its second level. */
static const struct lcall_grp NOW_TWOS[] = { TWO("ra"), TWO("ra"), TWO("rb"),
                                             TWO("re") };
static const struct lcall_grp NOW_THREES[] = { THREE("ra"), THREE("ra"),
                                               THREE("rb"), THREE("re") };
/* ma fresh (twice: then from both TATs), mb its record ahead and its own
 * key past, mc refused by its own key, md a malformed own key (the
 * emulation's error), me refused by its record while its own key is new
 * (written by its read, then deleted), mf admitted from its own key's TAT
 * ahead. */
static const struct lcall_grp NOW_MIXES[] = { MIX("ma"), MIX("ma"), MIX("mb"),
                                              MIX("mc"), MIX("md"), MIX("me"),
                                              MIX("mf") };
/* na fresh (twice: its second level refuses), nb its first record ahead
 * and its own key ahead, nc refused by its own key while new to the
 * string (written by its read, then deleted), nd a malformed own key. */
static const struct lcall_grp NOW_MIX3S[] = { MIX3("na"), MIX3("na"),
                                              MIX3("nb"), MIX3("nc"),
                                              MIX3("nd") };
static const char *const NOW_KEYS[] = {
    STR("ra"), STR("rb"), STR("re"), STR("ma"), KO("ma"), STR("mb"),
    KO("mb"),  STR("mc"), KO("mc"),  STR("md"), KO("md"), STR("me"),
    KO("me"),  STR("mf"), KO("mf"),  STR("na"), KO("na"), STR("nb"),
    KO("nb"),  STR("nc"), KO("nc"),  STR("nd"), KO("nd")
};
#define NNOW_KEYS (int)(sizeof(NOW_KEYS) / sizeof(*NOW_KEYS))

/* The node's clock in ns. */
static long long node_ns(redisContext *c)
{
    redisReply *r = px_cmd(c, "TIME");
    long long ns;

    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    ns = atoll(r->element[0]->str) * 1000000000LL +
         atoll(r->element[1]->str) * 1000LL;
    freeReplyObject(r);
    return ns;
}

/* The states on the node's clock T (ns), every TAT 19 digits and its
 * string or key expiring a minute after it (ahead: by half a second; past:
 * a second before T). The strings hold their levels' records in order,
 * as the direct path writes them: rb's and re's `n` (2 or 3). A refused
 * group's records are all alive (the emulation drops a record past its
 * expiry at any write, a refusal's undo too; the direct path writes
 * nothing). */
static void plant_now(redisContext *c, int n)
{
    long long t = node_ns(c), ahead = t + 500000000LL, past = t - 1000000000LL;
    long long ms = t / 1000000 + 60000;
    char y[64] = "";

    px_check_status(px_cmd(c, "FLUSHALL"), "OK");
    if (n == 3) {
        snprintf(y, sizeof(y), "9::y#0:gcra=%lld;", past);
    }
    px_check_status(px_cmd(c,
                           "SET " STR("rb") " 7:#0:gcra=%lld;9::x#0:gcra=%lld;"
                                            "%s PXAT %lld",
                           ahead, past, y, ms),
                    "OK");
    if (n == 3) {
        snprintf(y, sizeof(y), "9::y#0:gcra=%lld;", ahead);
    }
    px_check_status(px_cmd(c,
                           "SET " STR("re") " 7:#0:gcra=%lld;9::x#0:gcra=%lld;"
                                            "%s PXAT %lld",
                           ahead, t + 1000000000LL, y, ms),
                    "OK");
    px_check_status(
        px_cmd(c, "SET " STR("mb") " 7:#0:gcra=%lld; PXAT %lld", ahead, ms),
        "OK");
    px_check_status(px_cmd(c, "SET " KO("mb") " %lld PXAT %lld", past, ms),
                    "OK");
    px_check_status(
        px_cmd(c, "SET " KO("mc") " %lld PXAT %lld", t + 2500000000LL, ms),
        "OK");
    px_check_status(px_cmd(c, "SET " KO("mf") " %lld PXAT %lld", ahead, ms),
                    "OK");
    px_check_status(px_cmd(c,
                           "SET " STR("nb") " 7:#0:gcra=%lld;9::x#0:gcra=%lld;"
                                            " PXAT %lld",
                           ahead, past, ms),
                    "OK");
    px_check_status(px_cmd(c, "SET " KO("nb") " %lld PXAT %lld", ahead, ms),
                    "OK");
    px_check_status(
        px_cmd(c, "SET " KO("nc") " %lld PXAT %lld", t + 2500000000LL, ms),
        "OK");
    px_check_status(px_cmd(c, "SET " KO("nd") " abc PXAT %lld", ms), "OK");
    px_check_status(px_cmd(c, "SET " KO("md") " abc PXAT %lld", ms), "OK");
    px_check_status(px_cmd(c, "SET " STR("me") " 7:#0:gcra=%lld; PXAT %lld",
                           t + 2500000000LL, ms),
                    "OK");
}

/* Whether a and b are the same text but for runs of 19 digits (TATs),
 * which may differ by slack_ns: the two runs decide at two instants. */
static int near_text(const char *a, size_t alen, const char *b, size_t blen,
                     long long slack_ns)
{
    size_t i = 0, j = 0;

    while (i < alen && j < blen) {
        if (alen - i >= 19 && blen - j >= 19 &&
            strspn(a + i, "0123456789") >= 19 &&
            strspn(b + j, "0123456789") >= 19) {
            char x[20], y[20];
            memcpy(x, a + i, 19);
            memcpy(y, b + j, 19);
            x[19] = y[19] = '\0';
            if (llabs(atoll(x) - atoll(y)) > slack_ns) {
                return 0;
            }
            i += 19;
            j += 19;
        } else if (a[i++] != b[j++]) {
            return 0;
        }
    }
    return i == alen && j == blen;
}

/* Asserts replies a and b alike, a TAT within slack_ns. */
static void expect_near(const redisReply *a, const redisReply *b,
                        long long slack_ns, const char *ctx)
{
    char ta[512] = "", tb[512] = "";

    replies_fmt(a, ta, sizeof(ta));
    replies_fmt(b, tb, sizeof(tb));
    cr_assert(near_text(ta, strlen(ta), tb, strlen(tb), slack_ns),
              "%s: each %s, shapes %s", ctx, ta, tb);
}

/* A key's value ("" when absent) and PTTL, raw (no lstate: a key of its
 * own is no record). */
struct now_state {
    char v[256];
    long long pttl;
};

static void now_state_read(redisContext *c, const char *key,
                           struct now_state *st)
{
    redisReply *r = px_cmd(c, "GET %s", key);

    cr_assert(r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_NIL, "%s",
              key);
    snprintf(st->v, sizeof(st->v), "%s",
             r->type == REDIS_REPLY_STRING ? r->str : "");
    freeReplyObject(r);
    r = px_cmd(c, "PTTL %s", key);
    cr_assert_eq(r->type, REDIS_REPLY_INTEGER);
    st->pttl = r->integer;
    freeReplyObject(r);
}

/* Asserts every key of NOW_KEYS alike in s1 (the first run) and s2, a
 * TAT and a PTTL within slack_ms. */
static void expect_states_near(const struct now_state *s1,
                               const struct now_state *s2, long long slack_ms)
{
    for (int k = 0; k < NNOW_KEYS; k++) {
        cr_assert(near_text(s1[k].v, strlen(s1[k].v), s2[k].v, strlen(s2[k].v),
                            slack_ms * 1000000),
                  "%s: the first run wrote '%s', the second '%s'", NOW_KEYS[k],
                  s1[k].v, s2[k].v);
        cr_assert((s1[k].pttl < 0) == (s2[k].pttl < 0) &&
                      llabs(s1[k].pttl - s2[k].pttl) <= slack_ms,
                  "%s: PTTL %lld in the first run, %lld in the second",
                  NOW_KEYS[k], s1[k].pttl, s2[k].pttl);
    }
}

/* Decides g[0..ng-1] on the node's clock in mode "each" and as one
 * "shapes" batch, each from plant_now's states (n records), and asserts
 * that both
 * answer and write alike (a TAT, or an expiry, as far apart as the two
 * runs); returns the shapes reply (the caller frees it). */
static redisReply *expect_direct_as_each_now(redisContext *c,
                                             const struct lcall_grp *g, int ng,
                                             int n)
{
    static struct lcall_args blocks[LCALL_GROUPS_MAX];
    static struct now_state s1[NNOW_KEYS], s2[NNOW_KEYS];
    const redisReply *want[LCALL_ARGV_MAX];
    redisReply *each, *shapes;
    struct lcall_args a;
    long long t0 = px_now_ms(), slack_ms;
    int nwant = 3;

    plant_now(c, n);
    lcall_each(&a, g, ng, LCALL_RUN, 0, 1);
    lcall_node_clock(&a);
    each = lcall_run(c, &a);
    for (int k = 0; k < NNOW_KEYS; k++) {
        now_state_read(c, NOW_KEYS[k], &s1[k]);
    }
    plant_now(c, n);
    cr_assert_eq(lcall_shapes(&a, blocks, g, ng, 0, 1), 1);
    lcall_node_clock(&a);
    shapes = lcall_run(c, &a);
    for (int k = 0; k < NNOW_KEYS; k++) {
        now_state_read(c, NOW_KEYS[k], &s2[k]);
    }
    slack_ms = px_now_ms() - t0 + 5;
    replies_expect_array(each, "each");
    replies_expect_array(shapes, "shapes");
    for (int x = 0; x < ng; x++) {
        nwant += flatten(each->element[3 + x], want + nwant);
    }
    cr_assert_eq(shapes->elements, (size_t)nwant, "%zu elements",
                 shapes->elements);
    /* (Elements 1 and 2: each run's clock.) */
    replies_expect_eq(each->element[0], shapes->element[0], "element 0");
    for (int i = 3; i < nwant; i++) {
        char at[32];
        snprintf(at, sizeof(at), "element %d", i);
        expect_near(want[i], shapes->element[i], slack_ms * 1000000, at);
    }
    expect_states_near(s1, s2, slack_ms);
    freeReplyObject(each);
    return shapes;
}

Test(it_lua_hash, direct_path_on_the_node_clock_decides_as_the_emulation,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = lua_twin_connect();
    struct now_state st;
    redisReply *r;

    lua_twin_load_library(c);
    for (int three = 0; three < 2; three++) {
        r = expect_direct_as_each_now(c, three ? NOW_THREES : NOW_TWOS, 4,
                                      2 + three);
        /* What the comparison alone would not catch (1 + n elements a
         * group): ra fresh, admitted; ra again, refused by its second
         * level; rb admitted from its TAT; re refused. */
        int e = 3 + three;
        cr_assert_eq(r->element[3]->integer, 0);
        cr_assert_eq(r->element[4]->type, REDIS_REPLY_NIL);
        cr_assert_eq(r->element[3 + e]->integer, 1);
        cr_assert_eq(r->element[3 + 2 * e]->integer, 0);
        cr_assert_eq(r->element[4 + 2 * e]->type, REDIS_REPLY_STRING);
        cr_assert_eq(r->element[3 + 3 * e]->integer, 1);
        freeReplyObject(r);
    }
    r = expect_direct_as_each_now(c, NOW_MIXES, 7, 2);
    /* ma admitted twice, the second time from both TATs; mb admitted from
     * its record; mc refused; md an error; me refused; mf admitted from its
     * own key. */
    cr_assert_eq(r->element[3]->integer, 0);
    cr_assert_eq(r->element[6]->integer, 0);
    cr_assert_eq(r->element[7]->type, REDIS_REPLY_STRING);
    cr_assert_eq(r->element[8]->type, REDIS_REPLY_STRING);
    cr_assert_eq(r->element[9]->integer, 0);
    cr_assert_eq(r->element[10]->type, REDIS_REPLY_STRING);
    cr_assert_eq(r->element[12]->integer, 1);
    cr_assert_eq(r->element[15]->type, REDIS_REPLY_ERROR);
    cr_assert_eq(r->element[16]->integer, 1);
    cr_assert_eq(r->element[19]->integer, 0);
    cr_assert_eq(r->element[21]->type, REDIS_REPLY_STRING);
    freeReplyObject(r);
    /* ma's string holds its record alone, its own key a TAT; me's own key,
     * written by its read, went with the refusal; md's string, written by
     * its read, went when the emulation took the group. */
    now_state_read(c, STR("ma"), &st);
    cr_assert(strncmp(st.v, "7:#0:gcra=", 10) == 0 && strlen(st.v) == 30,
              "ma's string: %s", st.v);
    now_state_read(c, KO("ma"), &st);
    cr_assert(strlen(st.v) == 19 && st.pttl > 0, "ma's own key: %s", st.v);
    now_state_read(c, KO("me"), &st);
    cr_assert_str_eq(st.v, "", "me's own key kept");
    now_state_read(c, STR("md"), &st);
    cr_assert_str_eq(st.v, "", "md's string kept");
    r = expect_direct_as_each_now(c, NOW_MIX3S, 5, 2);
    /* na admitted, then refused by its second level; nb admitted; nc
     * refused; nd an error. */
    cr_assert_eq(r->element[3]->integer, 0);
    cr_assert_eq(r->element[7]->integer, 1);
    cr_assert_eq(r->element[11]->integer, 0);
    cr_assert_eq(r->element[14]->type, REDIS_REPLY_STRING);
    cr_assert_eq(r->element[15]->integer, 1);
    cr_assert_eq(r->element[19]->type, REDIS_REPLY_ERROR);
    now_state_read(c, STR("nc"), &st);
    cr_assert_str_eq(st.v, "", "nc's string kept");
    freeReplyObject(r);
    redisFree(c);
}

/* ---------------- Before Redis 7 ---------------- */

/* The limiter script with the Redis version hidden (each
 * "redis.REDIS_VERSION_NUM" read as nil), as Redis before 7.0 runs it:
 * no SET ... NX GET (7.0), and Redis 6.0 has no SET ... PXAT either, so
 * the emulation decides and writes a string's expiry as PX from the
 * call's clock. Owned by the caller. */
static char *limiter_before_7(size_t *len)
{
    static const char ver[] = "redis.REDIS_VERSION_NUM";
    const struct scripts_lua *sc = scripts_limiter();
    char *out = malloc(sc->len + 1), *w = out;
    const char *p = sc->body, *end = sc->body + sc->len, *hit;
    int n = 0;

    cr_assert_not_null(out);
    while ((hit = strstr(p, ver)) != NULL && hit < end) {
        memcpy(w, p, (size_t)(hit - p));
        w += hit - p;
        memcpy(w, "nil", 3);
        w += 3;
        p = hit + strlen(ver);
        n++;
    }
    memcpy(w, p, (size_t)(end - p));
    w += end - p;
    *w = '\0';
    *len = (size_t)(w - out);
    cr_assert_geq(n, 2, "the version is read in %d places", n);
    return out;
}

/* Decides g[0..ng-1] on the node's clock as one "shapes" batch, by the
 * library and then by the script `old` (limiter_before_7's), each from
 * plant_now's states (n records), and asserts both answer and write
 * alike. */
static void expect_before_7_alike(redisContext *c, const struct lcall_grp *g,
                                  int ng, int n, const char *old, size_t oldlen)
{
    static struct lcall_args blocks[LCALL_GROUPS_MAX];
    static struct now_state s1[NNOW_KEYS], s2[NNOW_KEYS];
    redisReply *lib, *pre;
    struct lcall_args a;
    long long t0 = px_now_ms(), slack_ms;

    plant_now(c, n);
    cr_assert_eq(lcall_shapes(&a, blocks, g, ng, 0, 1), 1);
    lcall_node_clock(&a);
    lib = lcall_run(c, &a);
    for (int k = 0; k < NNOW_KEYS; k++) {
        now_state_read(c, NOW_KEYS[k], &s1[k]);
    }
    plant_now(c, n);
    a.v[0] = "EVAL";
    a.len[0] = 4;
    a.v[1] = old;
    a.len[1] = oldlen;
    pre = lcall_run(c, &a);
    for (int k = 0; k < NNOW_KEYS; k++) {
        now_state_read(c, NOW_KEYS[k], &s2[k]);
    }
    slack_ms = px_now_ms() - t0 + 5;
    replies_expect_array(lib, "library");
    replies_expect_array(pre, "before 7");
    cr_assert_eq(lib->elements, pre->elements);
    replies_expect_eq(lib->element[0], pre->element[0], "element 0");
    for (size_t i = 3; i < lib->elements; i++) {
        char at[32];
        snprintf(at, sizeof(at), "element %zu", i);
        expect_near(lib->element[i], pre->element[i], slack_ms * 1000000, at);
    }
    expect_states_near(s1, s2, slack_ms);
    freeReplyObject(pre);
    freeReplyObject(lib);
}

Test(it_lua_hash, before_redis_7_the_scripts_decide_and_write_alike,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = lua_twin_connect();
    size_t len;
    char *old = limiter_before_7(&len);

    lua_twin_load_library(c);
    expect_before_7_alike(c, NOW_TWOS, 4, 2, old, len);
    expect_before_7_alike(c, NOW_THREES, 4, 3, old, len);
    expect_before_7_alike(c, NOW_MIXES, 7, 2, old, len);
    expect_before_7_alike(c, NOW_MIX3S, 5, 2, old, len);
    free(old);
    redisFree(c);
}
