/* lua_wire: the exact words of the batched script calls for given calls
 * and groups, and the exact per-call and per-group results of given reply
 * bytes, malformed and short replies included (never a crash). */
#include "tests/support/px_test.h"

#include <stdio.h>
#include <string.h>

#include "algorithms/gcra.h"
#include "conf/limits.h"
#include "parser/buf.h"
#include "parser/resp.h"
#include "parser/resp_value.h"
#include "proxy/core/util.h"
#include "proxy/limiter/lua_wire.h"
#include "proxy/limiter/store.h"

PX_TEST_SUITE(lua_wire);

static const char *const head[2] = { "FCALL", "fn" };
static const size_t headlen[2] = { 5, 2 };

/* The words of `a` joined by '|', into out (freed by the caller). */
static char *joined(const struct lua_wire_argv *a)
{
    struct buf b;
    unsigned i;

    buf_init(&b);
    for (i = 0; i < a->n; i++) {
        if (i > 0) {
            cr_assert_eq(buf_append(&b, "|", 1), BUF_OK);
        }
        cr_assert_eq(buf_append(&b, a->v[i], a->len[i]), BUF_OK);
    }
    cr_assert_eq(buf_append(&b, "", 1), BUF_OK);
    return b.data;
}

static void argv_is(struct lua_wire_argv *a, const char *want)
{
    char *got = joined(a);

    cr_expect_str_eq(got, want);
    px_free(got);
    lua_wire_argv_free(a);
}

static void gcra_init(struct gcra_params *p, int64_t burst, int64_t count,
                      int64_t period, int64_t cost)
{
    const char *err;

    cr_assert_eq(gcra_params_init(p, burst, count, period, cost, &err),
                 GCRA_OK);
}

/* ---------------- gcra.lua "runs" ---------------- */

Test(lua_wire, runs_send_each_run_of_one_limit_once)
{
    struct gcra_params a, b, d;
    struct lua_wire_throttle calls[5];
    struct lua_wire_argv w;

    gcra_init(&a, 15, 30, 60, 1); /* INC 2 s, DVT 32 s */
    gcra_init(&b, 0, 1, 1, 1);    /* INC 1 s, DVT 1 s */
    gcra_init(&d, 5, 30, 60, 1);  /* INC 2 s, DVT 12 s */
    calls[0] = (struct lua_wire_throttle){ &a, "k1", 2 };
    calls[1] = (struct lua_wire_throttle){ &a, "k2", 2 };
    calls[2] = (struct lua_wire_throttle){ &b, "k3", 2 };
    calls[3] = (struct lua_wire_throttle){ &a, "k4", 2 };
    calls[4] = (struct lua_wire_throttle){ &d, "k5", 2 };
    /* A run: consecutive calls of one INC and DVT. */
    lua_wire_runs(&w, head, headlen, calls, 5, 0);
    argv_is(&w, "FCALL|fn|5|k1|k2|k3|k4|k5|runs|4|2|2|0|32|0|1|1|0|1|0|1|2|0|"
                "32|0|1|2|0|12|0");
    /* Spread: no key declared, the keys after the arguments. */
    lua_wire_runs(&w, head, headlen, calls, 3, 1);
    argv_is(&w, "FCALL|fn|0|runs|2|2|2|0|32|0|1|1|0|1|0|k1|k2|k3");
    lua_wire_runs(&w, head, headlen, calls + 2, 1, 0);
    argv_is(&w, "FCALL|fn|1|k3|runs|1|1|1|0|1|0");
}

/* ---------------- limiter.lua "shapes": a check's groups ---------------- */

/* A check of n limits over `nlevels` levels (paths "p<l>", tags "t<l>",
 * level l in group groups[l]), cost 1. */
static struct store_check *check_new(unsigned n, unsigned nlevels,
                                     const unsigned *groups, unsigned ngroups)
{
    struct store_check *c = store_check_new(n, ngroups);
    static const char *const path[] = { "p0", "p1", "p2" };
    static const char *const tag[] = { "t0", "t1", "t2" };
    unsigned l;

    c->n = n;
    c->ngroups = ngroups;
    c->op = STORE_CHECK;
    c->cost = 1;
    c->lv = px_calloc(1, sizeof(*c->lv) + nlevels * sizeof(c->lv->level[0]));
    c->lv->n = nlevels;
    c->lv->ngroups = ngroups;
    for (l = 0; l < nlevels; l++) {
        c->lv->level[l].path = path[l];
        c->lv->level[l].path_len = 2;
        c->lv->level[l].tag = tag[l];
        c->lv->level[l].tag_len = 2;
        c->lv->level[l].group = groups[l];
    }
    return c;
}

static void limit_gcra(struct store_check *c, unsigned i, const char *key,
                       unsigned level, int64_t burst, int64_t count,
                       int64_t period)
{
    struct store_limit *x = &c->lim[i];

    x->algo = LIMITS_GCRA;
    x->lim.algo = LIMITS_GCRA;
    gcra_init(&x->p, burst, count, period, c->cost);
    x->key = px_strndup(key, strlen(key));
    x->klen = strlen(key);
    x->level = level;
    x->group = c->lv->level[level].group;
}

static void limit_fixed(struct store_check *c, unsigned i, const char *key,
                        unsigned level, int64_t max, int64_t window_ms)
{
    struct store_limit *x = &c->lim[i];

    x->algo = LIMITS_FIXED_WINDOW;
    x->lim.algo = LIMITS_FIXED_WINDOW;
    x->lim.u.fixed_window.max = max;
    x->lim.u.fixed_window.window_ms = window_ms;
    x->key = px_strndup(key, strlen(key));
    x->klen = strlen(key);
    x->level = level;
    x->group = c->lv->level[level].group;
}

/* The override cache of the tests: p1 assumes "o1", p2 "o2". */
static const char *known(void *arg, const char *path, size_t len)
{
    (void)arg;
    if (len == 2 && memcmp(path, "p1", 2) == 0) {
        return "o1";
    }
    return len == 2 && memcmp(path, "p2", 2) == 0 ? "o2" : NULL;
}

static void group_of(struct lua_wire_group *q, struct store_check *c,
                     unsigned g, enum lua_wire_mode mode,
                     struct lua_wire_params *memo)
{
    char ovkey[STORE_KEY_MAX];
    int ovlen = lua_wire_override_key("rl:", lua_wire_group_level(c, g), ovkey,
                                      sizeof(ovkey));

    cr_assert_gt(ovlen, 0);
    lua_wire_group_encode(q, c, g, mode, ovkey, (size_t)ovlen, known, NULL,
                          memo);
}

/* Makes the "shapes" call of groups q[0..n) and checks its words. */
static void shapes_are(struct lua_wire_group *q, unsigned n, int spread,
                       const char *want)
{
    const struct lua_wire_group *g[4];
    struct lua_wire_argv w;
    unsigned i;

    for (i = 0; i < n; i++) {
        g[i] = &q[i];
    }
    lua_wire_shapes(&w, head, headlen, g, n, spread);
    argv_is(&w, want);
}

Test(lua_wire, a_group_without_overrides_names_its_fields_by_keys)
{
    static const unsigned groups[] = { 0 };
    struct store_check *c = check_new(2, 1, groups, 1);
    struct lua_wire_params memo = { 0 };
    struct lua_wire_group q;
    size_t len;
    const char *route;

    limit_gcra(c, 0, "ka", 0, 15, 30, 60);
    limit_fixed(c, 1, "kb", 0, 10, 60000);
    group_of(&q, c, 0, LUA_WIRE_CHECK, &memo);
    cr_expect_eq(q.nk, 3);
    cr_expect_eq(q.c, c);
    route = lua_wire_group_route(&q, &len);
    cr_expect_eq(len, strlen("rl:{t0}#overrides"));
    cr_expect(memcmp(route, "rl:{t0}#overrides", len) == 0);
    shapes_are(&q, 1, 0,
               "FCALL|fn|3|ka|kb|rl:{t0}#overrides|shapes||1|check|1|2|"
               "gcra|2|0|32|0||fixed_window|10|60000||||keys|1");
    shapes_are(&q, 1, 1,
               "FCALL|fn|0|shapes||1|check|1|2|gcra|2|0|32|0||fixed_window|"
               "10|60000||||keys|1|ka|kb|rl:{t0}#overrides");
    lua_wire_group_free(&q);
    store_check_free(c);
}

/* A gcra level below a second "*" keeps a key of its own: its word tells
 * the scripts so, the other gcra level's is the record's. */
Test(lua_wire, a_gcra_level_with_a_key_of_its_own_is_named_so)
{
    static const unsigned groups[] = { 0 };
    struct store_check *c = check_new(2, 1, groups, 1);
    struct lua_wire_params memo = { 0 };
    struct lua_wire_group q;

    limit_gcra(c, 0, "ka", 0, 15, 30, 60);
    limit_gcra(c, 1, "kb", 0, 15, 30, 60);
    c->lim[1].own_key = true;
    group_of(&q, c, 0, LUA_WIRE_CHECK, &memo);
    shapes_are(&q, 1, 0,
               "FCALL|fn|3|ka|kb|rl:{t0}#overrides|shapes||1|check|1|2|"
               "gcra|2|0|32|0||gcra.key|2|0|32|0||keys|1");
    lua_wire_group_free(&q);
    store_check_free(c);
}

Test(lua_wire, a_group_names_the_overrides_it_assumes_and_its_shadow_level)
{
    static const unsigned groups[] = { 0, 0 };
    struct store_check *c = check_new(2, 2, groups, 1);
    struct lua_wire_params memo = { 0 };
    struct lua_wire_group q;

    c->cost = 3;
    limit_gcra(c, 0, "ka", 0, 15, 30, 60);
    limit_gcra(c, 1, "kb", 1, 0, 1, 1);
    c->lim[1].shadow = true;
    group_of(&q, c, 0, LUA_WIRE_PEEK, &memo);
    /* Level p1 assumes "o1": the paths go as pairs, p0's as "". */
    shapes_are(&q, 1, 0,
               "FCALL|fn|3|ka|kb|rl:{t0}#overrides|shapes||1|peek|3|2|"
               "gcra|6|0|32|0||gcra|3|0|1|0|2|2|1|p0||p1|o1");
    lua_wire_group_free(&q);
    store_check_free(c);
}

Test(lua_wire, a_refund_sends_undo_tokens_and_leaves_out_refused_shadows)
{
    static const unsigned groups[] = { 0, 0 };
    struct store_check *c = check_new(3, 2, groups, 1);
    struct lua_wire_params memo = { 0 };
    struct lua_wire_group q;

    limit_fixed(c, 0, "ka", 0, 10, 1000);
    limit_fixed(c, 1, "kb", 1, 5, 1000);
    limit_fixed(c, 2, "kc", 1, 7, 1000);
    strcpy(c->lim[0].undo, "u0");
    strcpy(c->lim[2].undo, "u2");
    c->lim[1].shadow_limited = true;
    cr_expect(lua_wire_group_sends(c, 0, 0, 1));
    cr_expect(!lua_wire_group_sends(c, 1, 0, 1));
    cr_expect(lua_wire_group_sends(c, 1, 0, 0));
    group_of(&q, c, 0, LUA_WIRE_REFUND, &memo);
    cr_expect_null(q.c);
    shapes_are(&q, 1, 0,
               "FCALL|fn|3|ka|kc|rl:{t0}#overrides|shapes||1|refund|1|2|"
               "fixed_window|10|1000|||u0|fixed_window|7|1000|||u2|0|1");
    lua_wire_group_free(&q);
    store_check_free(c);
}

Test(lua_wire, groups_of_one_shape_share_its_words_others_are_numbered)
{
    static const unsigned groups[] = { 0, 1, 2 };
    struct store_check *c = check_new(3, 3, groups, 3);
    struct lua_wire_params memo = { 0 };
    struct lua_wire_group q[3];

    limit_gcra(c, 0, "ka", 0, 15, 30, 60);
    limit_gcra(c, 1, "kb", 1, 15, 30, 60);
    limit_gcra(c, 2, "kc", 2, 0, 1, 1);
    group_of(&q[0], c, 1, LUA_WIRE_CHECK, &memo);
    group_of(&q[1], c, 2, LUA_WIRE_CHECK, &memo);
    group_of(&q[2], c, 0, LUA_WIRE_CHECK, &memo);
    /* Groups 1 and 2 assume overrides (pairs); they share a block. */
    shapes_are(&q[0], 2, 0,
               "FCALL|fn|4|kb|rl:{t1}#overrides|kc|rl:{t2}#overrides|"
               "shapes||2|check|1|1|gcra|2|0|32|0||1|check|1|1|gcra|1|0|1|"
               "0||1|2|1|p1|o1|2|p2|o2");
    lua_wire_group_free(&q[1]);
    group_of(&q[1], c, 1, LUA_WIRE_CHECK, &memo);
    shapes_are(&q[0], 2, 0,
               "FCALL|fn|4|kb|rl:{t1}#overrides|kb|rl:{t1}#overrides|"
               "shapes||1|check|1|1|gcra|2|0|32|0||1|2|p1|o1|p1|o1");
    /* Three groups, two shapes: the numbers say which. */
    shapes_are(q, 3, 1,
               "FCALL|fn|0|shapes||2|check|1|1|gcra|2|0|32|0||1|check|1|1|"
               "gcra|2|0|32|0||keys|3|1|p1|o1|1|p1|o1|2|kb|rl:{t1}#overrides|"
               "kb|rl:{t1}#overrides|ka|rl:{t0}#overrides");
    lua_wire_group_free(&q[0]);
    lua_wire_group_free(&q[1]);
    lua_wire_group_free(&q[2]);
    store_check_free(c);
}

/* ---------------- Replies ---------------- */

static void parse(const char *bytes, struct resp_value *v)
{
    size_t used;

    cr_assert_eq(resp_value_parse(bytes, strlen(bytes), v, &used), RESP_OK,
                 "%s", bytes);
}

Test(lua_wire, a_runs_reply_gives_each_call_its_state_or_its_error)
{
    struct resp_value v;
    struct gcra_script_reply sr;
    const char *err = NULL;

    /* Calls 0 (refused: bit 0) and 1 decided, 2 to 4 not (their codes
     * in place of a TAT). */
    parse("*9\r\n:1\r\n:100\r\n:5\r\n$2\r\n42\r\n$-1\r\n:-1\r\n:-2\r\n:-3"
          "\r\n:1\r\n",
          &v);
    cr_assert(lua_wire_runs_shaped(&v, 5));
    cr_expect(!lua_wire_runs_shaped(&v, 4));
    cr_assert_eq(lua_wire_runs_item(&v, 5, 0, &sr, &err), 0);
    cr_expect_eq(sr.limited, 1);
    cr_expect_eq(sr.now_s, 100);
    cr_expect_eq(sr.now_us, 5);
    cr_expect_eq(sr.tat_len, 2);
    cr_expect(memcmp(sr.tat, "42", 2) == 0);
    cr_assert_eq(lua_wire_runs_item(&v, 5, 1, &sr, &err), 0);
    cr_expect_eq(sr.limited, 0);
    cr_expect_null(sr.tat);
    cr_expect_eq(sr.tat_len, 0);
    cr_expect_eq(lua_wire_runs_item(&v, 5, 2, &sr, &err), -1);
    cr_expect_str_eq(err, "WRONGTYPE Operation against a key holding the "
                          "wrong kind of value");
    cr_expect_eq(lua_wire_runs_item(&v, 5, 3, &sr, &err), -1);
    cr_expect_str_eq(err, GCRA_ERR_TAT_RANGE);
    cr_expect_eq(lua_wire_runs_item(&v, 5, 4, &sr, &err), -1);
    cr_expect_str_eq(err, GCRA_ERR_SCRIPT);
    cr_expect(!lua_wire_runs_elsewhere(&v, 5, 3));
    cr_expect(lua_wire_runs_elsewhere(&v, 5, 4));
    resp_value_free(&v);
}

Test(lua_wire, a_runs_reply_of_another_shape_is_refused_whole)
{
    static const char *const bad[] = {
        "*4\r\n:0\r\n:1\r\n:2\r\n$1\r\n1\r\n",             /* short */
        "*6\r\n:0\r\n:1\r\n:2\r\n$1\r\n1\r\n:0\r\n:0\r\n", /* long */
        "*5\r\n:0\r\n:1\r\n:2\r\n$1\r\n1\r\n$1\r\n0\r\n",  /* text bits */
        "*5\r\n:0\r\n:1\r\n:2\r\n:-4\r\n:0\r\n",           /* no code */
        "*5\r\n:0\r\n:1\r\n:2\r\n$1\r\n1\r\n:-1\r\n",      /* bits < 0 */
        "*5\r\n:0\r\n$1\r\n1\r\n:2\r\n$1\r\n1\r\n:0\r\n",  /* text time */
        "*2\r\n:0\r\n:1\r\n",                              /* no time */
        ":0\r\n",                                          /* no array */
        "-ERR boom\r\n",                                   /* an error */
        "*-1\r\n",                                         /* nil */
    };
    struct resp_value v;
    size_t k;

    for (k = 0; k < ARRAY_SIZE(bad); k++) {
        parse(bad[k], &v);
        cr_expect(!lua_wire_runs_shaped(&v, 1), "%s", bad[k]);
        resp_value_free(&v);
    }
}

/* A check of group 0 = {gcra ka (15 30 60), fixed kb (10 per 60 s)},
 * group 1 = {fixed kc}, group 2 = {fixed kd}, and a refund of group 1:
 * the groups of one call. */
struct decided {
    struct store_check *c;
    struct lua_wire_params memo;
    struct lua_wire_group q[4];
    const struct lua_wire_group *g[4];
};

static void decided_init(struct decided *d)
{
    static const unsigned groups[] = { 0, 1, 2 };
    unsigned i;

    memset(d, 0, sizeof(*d));
    d->c = check_new(4, 3, groups, 3);
    limit_gcra(d->c, 0, "ka", 0, 15, 30, 60);
    limit_fixed(d->c, 1, "kb", 0, 10, 60000);
    limit_fixed(d->c, 2, "kc", 1, 10, 60000);
    limit_fixed(d->c, 3, "kd", 2, 10, 60000);
    group_of(&d->q[0], d->c, 0, LUA_WIRE_CHECK, &d->memo);
    group_of(&d->q[1], d->c, 1, LUA_WIRE_REFUND, &d->memo);
    group_of(&d->q[2], d->c, 1, LUA_WIRE_CHECK, &d->memo);
    group_of(&d->q[3], d->c, 2, LUA_WIRE_CHECK, &d->memo);
    for (i = 0; i < 4; i++) {
        d->g[i] = &d->q[i];
    }
}

static void decided_free(struct decided *d)
{
    unsigned i;

    for (i = 0; i < 4; i++) {
        lua_wire_group_free(&d->q[i]);
    }
    store_check_free(d->c);
}

/* The reply to `d`'s call: group 0 decided (a nil TAT; kb 0 10 8 -1
 * 60000000 "u1"), the refund's table, group 1's overrides, group 2 not
 * served here. */
#define DECIDED_REPLY                                                          \
    "*14\r\n:0\r\n:100\r\n:5\r\n"                                              \
    ":0\r\n$-1\r\n:0\r\n:10\r\n:8\r\n:-1\r\n$8\r\n60000000\r\n$2\r\nu1\r\n"    \
    "*1\r\n:1\r\n"                                                             \
    "*2\r\n$8\r\noverride\r\n$2\r\nxy\r\n"                                     \
    "-MOVED 1 127.0.0.1:1\r\n"

Test(lua_wire, a_shapes_reply_gives_each_group_its_answer)
{
    struct decided d;
    struct resp_value v;
    struct lua_wire_cursor cur;
    const struct resp_value *e;
    struct gcra_result want;
    const char *err;

    decided_init(&d);
    parse(DECIDED_REPLY, &v);
    cr_assert(lua_wire_shapes_shaped(&v, d.g, 4));
    lua_wire_cursor_init(&cur, &v);

    e = lua_wire_next(&cur, d.g[0]);
    cr_assert_eq(e->type, '*');
    cr_assert_eq(e->n, 5); /* limited, now_s, now_us, 2 entries */
    cr_assert_eq(lua_wire_group_decode(d.c, 0, e), LUA_WIRE_DECIDED);
    cr_expect_eq(d.c->err.len, 0);
    cr_expect_eq(d.c->admitted[0], 1);
    cr_assert_eq(gcra_decide(&d.c->lim[0].p, 0, 0, 100000005000, &want, &err),
                 GCRA_OK);
    cr_expect_eq(d.c->res[0].limited, want.d.limited);
    cr_expect_eq(d.c->res[0].remaining, want.d.remaining);
    cr_expect_eq(d.c->res[0].reset_after_ns, want.d.reset_after_ns);
    cr_expect_eq(d.c->res[1].limited, 0);
    cr_expect_eq(d.c->res[1].limit, 10);
    cr_expect_eq(d.c->res[1].remaining, 8);
    cr_expect_eq(d.c->res[1].retry_after_ns, -1000);
    cr_expect_eq(d.c->res[1].reset_after_ns, 60000000000LL);
    cr_expect_str_eq(d.c->lim[1].undo, "u1");
    /* Admitted: the state without this request has its cost back. */
    cr_expect_eq(d.c->peek[1].remaining, 9);

    e = lua_wire_next(&cur, d.g[1]); /* the refund's: nobody's */
    cr_expect_eq(e->type, '*');
    cr_expect_eq(e->n, 1);

    e = lua_wire_next(&cur, d.g[2]);
    cr_expect_eq(lua_wire_group_decode(d.c, 1, e), LUA_WIRE_OVERRIDE);
    cr_expect_eq(e->n, 2);
    cr_expect_eq(e->elem[1].len, 2);

    e = lua_wire_next(&cur, d.g[3]);
    cr_expect_eq(lua_wire_group_decode(d.c, 2, e), LUA_WIRE_ERROR);
    cr_expect_eq(e->raw_len, strlen("-MOVED 1 127.0.0.1:1\r\n"));
    cr_expect_eq(d.c->err.len, 0);
    lua_wire_cursor_end(&cur);
    resp_value_free(&v);
    decided_free(&d);
}

Test(lua_wire, a_shapes_reply_short_or_long_is_refused_whole)
{
    static const char *const bad[] = {
        /* group 0's fixed entry one short */
        "*13\r\n:0\r\n:100\r\n:5\r\n"
        ":0\r\n$-1\r\n:0\r\n:10\r\n:8\r\n:-1\r\n$8\r\n60000000\r\n"
        "*1\r\n:1\r\n*1\r\n:1\r\n-ERR x\r\n",
        /* one group missing */
        "*12\r\n:0\r\n:100\r\n:5\r\n"
        ":0\r\n$-1\r\n:0\r\n:10\r\n:8\r\n:-1\r\n$8\r\n60000000\r\n$2\r\nu1\r\n"
        "*1\r\n:1\r\n",
        /* one element too many */
        DECIDED_REPLY ":1\r\n",
        "*2\r\n:0\r\n:100\r\n",
        "-ERR boom\r\n",
    };
    char one[512];
    struct decided d;
    struct resp_value v;
    size_t k;

    decided_init(&d);
    for (k = 0; k < ARRAY_SIZE(bad); k++) {
        const char *bytes = bad[k];
        if (k == 2) {
            /* DECIDED_REPLY with its count one more */
            snprintf(one, sizeof(one), "*15%s", bad[k] + 3);
            bytes = one;
        }
        parse(bytes, &v);
        cr_expect(!lua_wire_shapes_shaped(&v, d.g, 4), "%zu", k);
        resp_value_free(&v);
    }
    decided_free(&d);
}

/* Group g's answer `bytes` decoded into a fresh check of `d`'s limits. */
static enum lua_wire_answer decode_alone(const char *bytes, char *err,
                                         size_t errlen)
{
    struct decided d;
    struct resp_value v;
    enum lua_wire_answer a;

    decided_init(&d);
    parse(bytes, &v);
    a = lua_wire_group_decode(d.c, 0, &v);
    snprintf(err, errlen, "%.*s", (int)d.c->err.len,
             d.c->err.len > 0 ? d.c->err.data : "");
    resp_value_free(&v);
    decided_free(&d);
    return a;
}

Test(lua_wire, a_malformed_group_answer_is_an_error_of_its_check)
{
    static const char *const bad[] = {
        ":1\r\n",                                  /* no table */
        "*2\r\n:0\r\n:100\r\n",                    /* no time */
        "*3\r\n$1\r\n0\r\n:100\r\n:5\r\n",         /* text limited */
        "*4\r\n:0\r\n:100\r\n:5\r\n*1\r\n$-1\r\n", /* one entry of two */
        /* the fixed entry's undo token missing */
        "*5\r\n:0\r\n:100\r\n:5\r\n*1\r\n$-1\r\n"
        "*6\r\n:0\r\n:10\r\n:8\r\n:-1\r\n:1\r\n:2\r\n",
        /* a fixed entry's field not a number */
        "*5\r\n:0\r\n:100\r\n:5\r\n*1\r\n$-1\r\n"
        "*6\r\n:0\r\n$2\r\nxx\r\n:8\r\n:-1\r\n:1\r\n$1\r\nu\r\n",
        /* a gcra entry of two */
        "*5\r\n:0\r\n:100\r\n:5\r\n*2\r\n$-1\r\n$-1\r\n"
        "*6\r\n:0\r\n:10\r\n:8\r\n:-1\r\n:1\r\n$1\r\nu\r\n",
        /* an entry that is no table */
        "*5\r\n:0\r\n:100\r\n:5\r\n:1\r\n"
        "*6\r\n:0\r\n:10\r\n:8\r\n:-1\r\n:1\r\n$1\r\nu\r\n",
    };
    char err[128];
    size_t k;

    for (k = 0; k < ARRAY_SIZE(bad); k++) {
        cr_expect_eq(decode_alone(bad[k], err, sizeof(err)), LUA_WIRE_MALFORMED,
                     "%zu", k);
        cr_expect_str_eq(err, "-" GCRA_ERR_SCRIPT "\r\n", "%zu", k);
    }
    /* A TAT the model cannot read: its own error. */
    cr_expect_eq(
        decode_alone("*5\r\n:0\r\n:100\r\n:5\r\n*1\r\n$3\r\nabc\r\n"
                     "*6\r\n:0\r\n:10\r\n:8\r\n:-1\r\n:1\r\n$1\r\nu\r\n",
                     err, sizeof(err)),
        LUA_WIRE_MALFORMED);
    cr_expect_str_eq(err, "-" GCRA_ERR_SCRIPT "\r\n");
}

Test(lua_wire, a_decided_group_of_many_limits_is_read_whole)
{
    static const unsigned groups[] = { 0 };
    struct store_check *c = check_new(7, 1, groups, 1);
    struct lua_wire_params memo = { 0 };
    struct lua_wire_group q;
    const struct lua_wire_group *g = &q;
    struct lua_wire_cursor cur;
    const struct resp_value *e;
    struct resp_value v;
    char bytes[1024], key[8];
    size_t at;
    unsigned i;

    for (i = 0; i < 7; i++) {
        snprintf(key, sizeof(key), "k%u", i);
        limit_fixed(c, i, key, 0, 10, 1000);
    }
    group_of(&q, c, 0, LUA_WIRE_CHECK, &memo);
    at = (size_t)snprintf(bytes, sizeof(bytes),
                          "*%u\r\n:0\r\n:1\r\n:2\r\n:0\r\n", 4 + 7 * 6);
    for (i = 0; i < 7; i++) {
        at += (size_t)snprintf(
            bytes + at, sizeof(bytes) - at,
            ":0\r\n:10\r\n:%u\r\n:-1\r\n:1000\r\n$2\r\nu%u\r\n", i, i);
    }
    parse(bytes, &v);
    cr_assert(lua_wire_shapes_shaped(&v, &g, 1));
    lua_wire_cursor_init(&cur, &v);
    e = lua_wire_next(&cur, &q);
    cr_assert_eq(e->n, 10);
    cr_assert_eq(lua_wire_group_decode(c, 0, e), LUA_WIRE_DECIDED);
    for (i = 0; i < 7; i++) {
        char want[4];
        snprintf(want, sizeof(want), "u%u", i);
        cr_expect_eq(c->res[i].remaining, i);
        cr_expect_str_eq(c->lim[i].undo, want);
    }
    lua_wire_cursor_end(&cur);
    resp_value_free(&v);
    lua_wire_group_free(&q);
    store_check_free(c);
}

/* ADJUST: the delta as the group's cost, of its sign for "adjust" and
 * the opposite for the unadjust that undoes it, whose answer nobody reads
 * but a "shapes" reply still holds whole (its limited and entries). */
Test(lua_wire, an_adjust_sends_its_delta_and_an_unadjust_is_skipped_whole)
{
    static const unsigned groups[] = { 0, 1 };
    struct store_check *c = check_new(2, 2, groups, 2);
    struct lua_wire_params memo = { 0 };
    struct lua_wire_group q[2];
    const struct lua_wire_group *g[2] = { &q[0], &q[1] };
    struct lua_wire_cursor cur;
    const struct resp_value *e;
    struct resp_value v;

    c->op = STORE_ADJUST;
    c->delta = -7;
    limit_gcra(c, 0, "ka", 0, 4, 1, 1000);
    limit_fixed(c, 1, "kb", 1, 10, 60000);
    group_of(&q[0], c, 0, LUA_WIRE_UNADJUST, &memo);
    group_of(&q[1], c, 1, LUA_WIRE_ADJUST, &memo);
    cr_expect_null(q[0].c);
    cr_expect_eq(q[0].flat, 2); /* limited, the gcra entry */
    shapes_are(q, 2, 0,
               "FCALL|fn|4|ka|rl:{t0}#overrides|kb|rl:{t1}#overrides|shapes||"
               "2|adjust|7|1|gcra|1000|0|5000|0||0|adjust|-7|1|fixed_window|"
               "10|60000||||1|2|1|2|p1|o1");
    parse("*12\r\n:0\r\n:100\r\n:5\r\n:1\r\n$3\r\n123\r\n"
          ":0\r\n:0\r\n:10\r\n:3\r\n:-1\r\n$8\r\n60000000\r\n$0\r\n\r\n",
          &v);
    cr_assert(lua_wire_shapes_shaped(&v, g, 2));
    lua_wire_cursor_init(&cur, &v);
    e = lua_wire_next(&cur, g[0]);
    cr_expect_eq(e->type, ':');
    e = lua_wire_next(&cur, g[1]);
    cr_assert_eq(e->n, 4);
    cr_assert_eq(lua_wire_group_decode(c, 1, e), LUA_WIRE_DECIDED);
    cr_expect_eq(c->admitted[1], 1, "applied, whatever it shows");
    cr_expect_eq(c->res[1].remaining, 3);
    cr_expect_eq(c->peek[1].remaining, 4); /* the peek's cost 1 back */
    lua_wire_cursor_end(&cur);
    resp_value_free(&v);
    lua_wire_group_free(&q[0]);
    lua_wire_group_free(&q[1]);
    store_check_free(c);
}

Test(lua_wire, a_reset_assumes_no_override_and_is_answered_by_its_count)
{
    static const unsigned groups[] = { 0, 1 };
    struct store_check *c = check_new(3, 2, groups, 2);
    struct lua_wire_params memo = { 0 };
    struct lua_wire_group q[2];
    const struct lua_wire_group *g[2] = { &q[0], &q[1] };
    struct lua_wire_cursor cur;
    const struct resp_value *e;
    struct resp_value v;

    c->op = STORE_RESET;
    limit_gcra(c, 0, "ka", 0, 4, 1, 1000);
    limit_fixed(c, 1, "kb", 0, 10, 60000);
    limit_fixed(c, 2, "kc", 1, 10, 60000);
    group_of(&q[0], c, 0, LUA_WIRE_RESET, &memo);
    group_of(&q[1], c, 1, LUA_WIRE_RESET, &memo);
    cr_expect_eq(q[0].c, c);
    /* No pairs, though level p1 assumes "o1": a RESET deletes the states
     * of the keys it names, whatever the overrides. */
    shapes_are(q, 2, 0,
               "FCALL|fn|5|ka|kb|rl:{t0}#overrides|kc|rl:{t1}#overrides|"
               "shapes||2|reset|1|2|gcra|1000|0|5000|0||fixed_window|10|"
               "60000||||0|reset|1|1|fixed_window|10|60000||||0|2|1|2");
    /* One integer a group, however many limits it has. */
    parse("*5\r\n:0\r\n:100\r\n:5\r\n:3\r\n:1\r\n", &v);
    cr_assert(lua_wire_shapes_shaped(&v, g, 2));
    lua_wire_cursor_init(&cur, &v);
    e = lua_wire_next(&cur, g[0]);
    cr_assert_eq(e->type, ':');
    cr_assert_eq(lua_wire_group_decode(c, 0, e), LUA_WIRE_DECIDED);
    e = lua_wire_next(&cur, g[1]);
    cr_assert_eq(lua_wire_group_decode(c, 1, e), LUA_WIRE_DECIDED);
    cr_expect_eq(c->deleted, 4);
    cr_expect_eq(c->err.len, 0);
    lua_wire_cursor_end(&cur);
    resp_value_free(&v);
    /* A table where a count belongs is the script's error. */
    parse("*1\r\n:0\r\n", &v);
    cr_expect_eq(lua_wire_group_decode(c, 0, &v), LUA_WIRE_MALFORMED);
    cr_expect_gt(c->err.len, 0);
    cr_expect_eq(c->deleted, 4);
    resp_value_free(&v);
    lua_wire_group_free(&q[0]);
    lua_wire_group_free(&q[1]);
    store_check_free(c);
}
