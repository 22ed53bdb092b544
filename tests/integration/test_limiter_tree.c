/* LIMITER CHECK, PEEK, RESET, RULES and RELOAD over limits.yaml through the
 * real binary, in its three modes: single Redis, embedded (no Redis) and
 * cluster (3 masters).
 *
 * The tree of most tests is the example of docs/limiter.md "LIMITER and the
 * limits tree" (user -> "*" -> trade) plus a level above a wildcard (global ->
 * "*"), an exact child next to a wildcard (user:vip), a node with two limits
 * (api) and a limit whose algorithm this build lacks (tb). Expected replies
 * follow docs/ARCHITECTURE.md "CL.THROTTLE, exactly". They assume that the
 * calls on one path run back to back, all within half a second of the first
 * (the shortest emission interval is trade's 1.5 s), as redis-cell's own
 * reference values do; where it helps, each level is also compared with
 * CL.THROTTLE on a mirror key called in the same step. Nothing waits for time
 * to pass and nothing asserts how fast anything is. Stored state is read
 * straight from the node that holds it. The proxy sends a refund before the
 * reply that made it necessary, on the connection that the same client's next
 * call to that node uses, so a PEEK through the proxy orders every direct read
 * after the refund. */
#include "tests/support/px_test.h"

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conf/limits.h"
#include "tests/integration/cluster_fixture.h"
#include "tests/integration/fixture.h"
#include "tests/integration/limiter_support.h"
#include "tests/integration/lstate.h"

PX_TEST_SUITE(it_limiter_tree);

/* The tree of most tests. Levels (limit = max_burst + 1, EI = period /
 * count): user:* 16 per 2 s; user:*:trade 6 per 1.5 s; user:vip 100 per
 * 0.6 s; global 3 per 6 s, shared by every global:<id>; global:* 11 per
 * 60 s; api: 5 per 1 s and 2 per 60 s at once. */
static const char tree_yaml[] =
    "user:\n"
    "  children:\n"
    "    \"*\":\n"
    "      limits: [15, 30, 60]\n"
    "      children:\n"
    "        trade:\n"
    "          limits: [5, 10, 15]\n"
    "    vip:\n"
    "      limits: [99, 100, 60]\n"
    "global:\n"
    "  limits: [2, 1, 6]\n"
    "  children:\n"
    "    \"*\":\n"
    "      limits: [10, 1, 60]\n"
    "api:\n"
    "  limits:\n"
    "    - {algorithm: gcra, max_burst: 4, count: 1, period: 1}\n"
    "    - {max_burst: 1, count: 1, period: 60s}\n"
    "tb:\n"
    "  limits:\n"
    "    - {algorithm: token_bucket, capacity: 5, refill_per_sec: 1}\n";

/* LIMITER RULES of tree_yaml: depth first, children in byte order. */
static const char tree_rules[] =
    "api  gcra(max_burst=4,count=1,period=1s) "
    "gcra(max_burst=1,count=1,period=60s)\n"
    "global  gcra(max_burst=2,count=1,period=6s)\n"
    "global:*  gcra(max_burst=10,count=1,period=60s)\n"
    "tb  token_bucket(capacity=5,refill_per_sec=1)\n"
    "user:*  gcra(max_burst=15,count=30,period=60s)\n"
    "user:*:trade  gcra(max_burst=5,count=10,period=15s)\n"
    "user:vip  gcra(max_burst=99,count=100,period=60s)\n";

/* The tree after a RELOAD: trade allows 2 per 15 s, user:* 4 per 60 s. */
static const char tree2_yaml[] = "user:\n"
                                 "  children:\n"
                                 "    \"*\":\n"
                                 "      limits: [3, 4, 60]\n"
                                 "      children:\n"
                                 "        trade:\n"
                                 "          limits: [1, 2, 15]\n";

static const char tree2_rules[] =
    "user:*  gcra(max_burst=3,count=4,period=60s)\n"
    "user:*:trade  gcra(max_burst=1,count=2,period=15s)\n";

/* Broken files, and where their errors are (line, and the column where
 * the offending YAML node starts). */
static const char bad_syntax_yaml[] = "user:\n"
                                      "  children: [unclosed\n";
static const char bad_type_yaml[] = "user:\n"
                                    "  children:\n"
                                    "    \"*\":\n"
                                    "      limits: [15, thirty, 60]\n"
                                    "      children:\n"
                                    "        trade:\n"
                                    "          limits: \"x\"\n";
#define BAD_TYPE_LINE1 4  /* count: "thirty" */
#define BAD_TYPE_COL1  20 /* column of "thirty" */
#define BAD_TYPE_LINE2 7  /* limits: a scalar */

#define NS ((int64_t)1000000000) /* nanoseconds per second */

#define ADMIN_PW        "s3cret" /* admin_password */
#define E_NOPERM        "NOPERM LIMITER RESET needs AUTH admin"
#define E_NOPERM_RELOAD "NOPERM LIMITER RELOAD needs AUTH admin"
#define E_NOT_INT       "ERR value is not an integer or out of range"
#define E_SYNTAX        "ERR syntax error"
#define E_ARITY         "ERR wrong number of arguments for 'limiter' command"
#define E_NO_LIMITS     "ERR no limits for path "
#define E_BRACES        "ERR limiter path may not contain '{' or '}'"
#define E_EMPTY_SEG     "ERR limiter path has an empty segment"

#define KEY_MAX        160  /* room for every key and path the tests build */
#define SIGHUP_WAIT_MS 5000 /* bound of the wait for a SIGHUP reload */
#define SIGHUP_STEP_MS 20   /* ms between two probes of that wait */

/* Paths the proxy reads: static, because px_proxy_start borrows its
 * argv for restarts. */
static char limits_path[PX_PATH_MAX];
static char yaml_extra[PX_PATH_MAX + 64];
static const char *limits_args[] = { "--limits", limits_path, NULL };

/* ---------------- Modes and setup ---------------- */

/* Writes text as limits.yaml (again: the file RELOAD and SIGHUP read). */
static void write_limits(const char *text)
{
    px_write_file(limits_path, sizeof(limits_path), "limits.yaml", text);
}

/* Writes tree_yaml and the proxy.yaml lines naming it, plus `more`. */
static void prepare_tree(const char *more)
{
    write_limits(tree_yaml);
    snprintf(yaml_extra, sizeof(yaml_extra), "limits_file: %s\n%s", limits_path,
             more != NULL ? more : "");
}

static void init_single(void)
{
    prepare_tree(NULL);
    px_redis_start(&px_env()->redis, NULL);
    px_proxy_start_for(&px_env()->proxy, &px_env()->redis, yaml_extra);
}

static void init_single_admin(void)
{
    prepare_tree("admin_password: " ADMIN_PW "\n");
    px_redis_start(&px_env()->redis, NULL);
    px_proxy_start_for(&px_env()->proxy, &px_env()->redis, yaml_extra);
}

/* Embedded, with the file named by the --limits flag. */
static void init_embedded(void)
{
    write_limits(tree_yaml);
    px_proxy_start(&px_env()->proxy, NULL, limits_args);
}

/* Embedded without any limits file. */
static void init_embedded_bare(void)
{
    px_proxy_start(&px_env()->proxy, NULL, NULL);
}

static void init_cluster(void)
{
    prepare_tree(NULL);
    px_cluster_init();
    px_cluster_proxy_start(&px_env()->proxy, px_cluster(), yaml_extra);
}

/* ---------------- Replies ---------------- */

/* Asserts the first four fields (not reset_after) of a reply. */
static void check_four(redisReply *r, const char *what, long long limited,
                       long long limit, long long remaining, long long retry)
{
    struct px_five f = px_take_five(r, what);

    cr_assert(f.limited == limited && f.limit == limit &&
                  f.remaining == remaining && f.retry == retry,
              "%s: got [%lld, %lld, %lld, %lld, _], want [%lld, %lld, %lld, "
              "%lld, _]",
              what, f.limited, f.limit, f.remaining, f.retry, limited, limit,
              remaining, retry);
}

static void assert_same_five(struct px_five a, struct px_five b,
                             const char *what)
{
    cr_assert(a.limited == b.limited && a.limit == b.limit &&
                  a.remaining == b.remaining && a.retry == b.retry &&
                  a.reset == b.reset,
              "%s: [%lld, %lld, %lld, %lld, %lld] then [%lld, %lld, %lld, "
              "%lld, %lld]",
              what, a.limited, a.limit, a.remaining, a.retry, a.reset,
              b.limited, b.limit, b.remaining, b.retry, b.reset);
}

/* ---------------- Mirrors: each level as one CL.THROTTLE key ----------------
 *
 * A mirror is a plain key with one level's parameters. A step calls LIMITER
 * CHECK and then every mirror: with the check's cost when the step is
 * admitted (every level consumes) and, when it is refused, with the cost on
 * the refusing levels (which consume nothing) and quantity 0 on the others
 * (which must not consume either). The check's reply must then be the
 * aggregate of the mirrors' replies (the rule of docs/limiter.md "LIMITER and
 * the limits tree"). */

/* One level's CL.THROTTLE twin. */
struct mirror {
    char key[KEY_MAX]; /* the plain key */
    long long burst;   /* the level's max_burst */
    long long count;   /* its count */
    long long period;  /* its period, seconds */
};

/* Names mirror m "mirror:<id>:<level>" with the level's GCRA limit. */
static void mirror_set(struct mirror *m, const char *id, const char *level,
                       long long burst, long long count, long long period)
{
    snprintf(m->key, sizeof(m->key), "mirror:%s:%s", id, level);
    m->burst = burst;
    m->count = count;
    m->period = period;
}

/* The aggregate of level replies: limited if any is; limit and remaining
 * of the least remaining (*tie set when two levels share it: then either
 * limit is acceptable); retry the largest among limited levels, else -1;
 * reset the largest. */
static struct px_five aggregate(const struct px_five *lv, size_t n, int *tie)
{
    struct px_five a = lv[0];

    *tie = 0;
    a.limited = 0;
    a.retry = -1;
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && lv[i].remaining == a.remaining) {
            *tie = 1;
        } else if (lv[i].remaining < a.remaining) {
            a.remaining = lv[i].remaining;
            a.limit = lv[i].limit;
            *tie = 0;
        }
        if (lv[i].limited) {
            a.retry =
                a.limited && a.retry > lv[i].retry ? a.retry : lv[i].retry;
            a.limited = 1;
        }
        if (lv[i].reset > a.reset) {
            a.reset = lv[i].reset;
        }
    }
    return a;
}

/* One step: LIMITER CHECK <path> COST <cost>, then the mirrors as above.
 * refusing: bit i set when level i must refuse (0: the step is admitted).
 * Asserts each mirror refused exactly when told, and the check's reply
 * equals the mirrors' aggregate. Returns the check's reply. */
static struct px_five mirror_step(redisContext *c, const char *path,
                                  long long cost, const struct mirror *m,
                                  size_t n, unsigned refusing, const char *what)
{
    struct px_five got, lv[4], want;
    int tie;

    cr_assert_leq(n, 4);
    got =
        px_take_five(px_cmd(c, "LIMITER CHECK %s COST %lld", path, cost), what);
    for (size_t i = 0; i < n; i++) {
        int refuse = (refusing >> i) & 1u;
        long long q = refusing == 0 || refuse ? cost : 0;
        lv[i] = px_take_five(px_cmd(c, "CL.THROTTLE %s %lld %lld %lld %lld",
                                    m[i].key, m[i].burst, m[i].count,
                                    m[i].period, q),
                             m[i].key);
        cr_assert_eq(lv[i].limited, refuse,
                     "%s: mirror %s limited %lld, the step expects %d", what,
                     m[i].key, lv[i].limited, refuse);
    }
    want = aggregate(lv, n, &tie);
    cr_assert(got.limited == want.limited && got.remaining == want.remaining &&
                  got.retry == want.retry && got.reset == want.reset &&
                  (got.limit == want.limit || tie),
              "%s: LIMITER CHECK %s COST %lld gave [%lld, %lld, %lld, %lld, "
              "%lld], the levels as CL.THROTTLE say [%lld, %lld, %lld, %lld, "
              "%lld]%s",
              what, path, cost, got.limited, got.limit, got.remaining,
              got.retry, got.reset, want.limited, want.limit, want.remaining,
              want.retry, want.reset, tie ? " (limit: either tied level)" : "");
    if (tie) {
        int found = 0;
        for (size_t i = 0; i < n; i++) {
            found |=
                lv[i].remaining == got.remaining && lv[i].limit == got.limit;
        }
        cr_assert(found, "%s: limit %lld is no tied level's", what, got.limit);
    }
    return got;
}

/* ---------------- Stored values ---------------- */

/* The TAT of key on its node, asserted to carry an expiry, or 0 in
 * embedded mode. */
static int64_t tat_of(const char *key)
{
    redisContext *d = px_direct_for(key, strlen(key));
    redisReply *r;
    int64_t tat;

    if (d == NULL) {
        return 0;
    }
    tat = px_get_tat(d, key, strlen(key));
    r = lstate_cmd(d, "PTTL %s", key);
    cr_assert(r->type == REDIS_REPLY_INTEGER && r->integer > 0,
              "%s has no expiry", key);
    freeReplyObject(r);
    redisFree(d);
    return tat;
}

/* Number of keys under "cellgate:" on every master, or -1 (embedded). */
static long long count_limiter_keys(void)
{
    struct px_cluster *cl = px_cluster();
    long long n = 0;
    redisContext *d;

    if (px_mode_now() == PX_MODE_EMBEDDED) {
        return -1;
    }
    for (int m = 0; m < (px_mode_now() == PX_MODE_CLUSTER ? cl->nmasters : 1);
         m++) {
        d = px_mode_now() == PX_MODE_CLUSTER
                ? px_cluster_connect(cl, m)
                : px_redis_connect(&px_env()->redis, NULL);
        /* (The states kept in an identity's state string count as their
         * keys: its records "<L>:<field>=<value>;".) */
        redisReply *r = px_cmd(d, "KEYS cellgate:*");

        cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
        for (size_t i = 0; i < r->elements; i++) {
            const char *key = r->element[i]->str;
            redisReply *t = px_cmd(d, "TYPE %s", key);

            if (strcmp(t->str, "string") == 0 && key[strlen(key) - 1] == '}') {
                redisReply *g = px_cmd(d, "GET %s", key);
                const char *p = g->str, *end = g->str + g->len;

                cr_assert_eq(g->type, REDIS_REPLY_STRING);
                while (p < end) {
                    char *colon;
                    unsigned long l = strtoul(p, &colon, 10);

                    cr_assert(colon < end && *colon == ':' &&
                                  l < (size_t)(end - colon - 1),
                              "%s: %s", key, g->str);
                    p = memchr(colon + 1 + l, ';',
                               (size_t)(end - colon - 1 - l));
                    cr_assert_not_null(p, "%s: %s", key, g->str);
                    p++;
                    n++;
                }
                freeReplyObject(g);
            } else {
                n++;
            }
            freeReplyObject(t);
        }
        freeReplyObject(r);
        redisFree(d);
    }
    return n;
}

/* ---------------- Shared bodies ---------------- */

/* The example of docs/limiter.md "LIMITER and the limits tree": user:<a>:trade
 * counts at both levels; the 7th trade check within the burst is refused and
 * leaves the user level as it was; user:<a> still works; user:<b> is
 * independent. */
static void design_tree(redisContext *c, const char *a, const char *b)
{
    char trade[KEY_MAX], user[KEY_MAX], ktrade[KEY_MAX], kuser[KEY_MAX];
    struct px_five before, after;
    int64_t tat_user, tat_trade;

    snprintf(trade, sizeof(trade), "user:%s:trade", a);
    snprintf(user, sizeof(user), "user:%s", a);
    snprintf(kuser, sizeof(kuser), "cellgate:{user:%s}#0:gcra", a);
    snprintf(ktrade, sizeof(ktrade), "cellgate:{user:%s}:trade#0:gcra", a);

    /* Six admitted: trade has the least left (6 - i); reset_after is the
     * user level's (2 s per call against trade's 1.5 s). */
    for (int i = 1; i <= 6; i++) {
        char what[64];
        snprintf(what, sizeof(what), "trade check %d", i);
        px_check_five(px_cmd(c, "LIMITER CHECK %s", trade), what, 0, 6, 6 - i,
                      -1, 2 * i);
    }
    /* The user level alone: 16 - 6 left. */
    before =
        px_take_five(px_cmd(c, "LIMITER PEEK %s COST 0", user), "peek before");
    px_check_five(px_cmd(c, "LIMITER PEEK %s COST 0", user), "peek user level",
                  0, 16, 10, -1, 12);
    tat_user = tat_of(kuser);
    tat_trade = tat_of(ktrade);

    /* The 7th: trade refuses (1.5 s to wait); nothing is consumed. */
    check_four(px_cmd(c, "LIMITER CHECK %s", trade), "trade check 7", 1, 6, 0,
               2);
    after =
        px_take_five(px_cmd(c, "LIMITER PEEK %s COST 0", user), "peek after");
    assert_same_five(before, after, "PEEK user level around the refusal");
    cr_assert_eq(tat_of(kuser), tat_user, "the refused check moved %s", kuser);
    cr_assert_eq(tat_of(ktrade), tat_trade, "the refused check moved %s",
                 ktrade);
    check_four(px_cmd(c, "LIMITER PEEK %s", trade), "trade peek 8", 1, 6, 0, 2);
    check_four(px_cmd(c, "LIMITER CHECK %s", trade), "trade check 8", 1, 6, 0,
               2);

    /* user:<a> itself still has room: 10 left, then 9. */
    px_check_five(px_cmd(c, "LIMITER CHECK %s", user), "user check", 0, 16, 9,
                  -1, 14);
    px_check_five(px_cmd(c, "LIMITER PEEK %s COST 0", trade), "trade peek", 0,
                  6, 0, -1, 14);

    /* user:<b> has its own keys at both levels. */
    snprintf(trade, sizeof(trade), "user:%s:trade", b);
    snprintf(user, sizeof(user), "user:%s", b);
    px_check_five(px_cmd(c, "LIMITER CHECK %s", trade), "other trade", 0, 6, 5,
                  -1, 2);
    px_check_five(px_cmd(c, "LIMITER CHECK %s", user), "other user", 0, 16, 14,
                  -1, 4);
    px_check_five(px_cmd(c, "LIMITER PEEK user:%s COST 0", a),
                  "first user unchanged", 0, 16, 9, -1, 14);
}

/* Admitted steps and steps every level refuses, against the mirrors:
 * limit/remaining of the least remaining, retry the largest of the
 * refusing levels, reset the largest. */
static void aggregate_admitted(redisContext *c, const char *id)
{
    struct mirror m[2];
    char trade[KEY_MAX], user[KEY_MAX];

    mirror_set(&m[0], id, "user", 15, 30, 60);
    mirror_set(&m[1], id, "trade", 5, 10, 15);
    snprintf(trade, sizeof(trade), "user:%s:trade", id);
    snprintf(user, sizeof(user), "user:%s", id);

    for (int i = 0; i < 3; i++) {
        mirror_step(c, trade, 1, m, 2, 0, "trade, cost 1");
    }
    /* A check of user:<id> touches the user level only. */
    px_check_five(px_cmd(c, "LIMITER CHECK %s COST 5", user), "user, cost 5", 0,
                  16, 8, -1, 16);
    px_check_five(px_cmd(c, "CL.THROTTLE %s 15 30 60 5", m[0].key),
                  "mirror user, cost 5", 0, 16, 8, -1, 16);
    /* Trade 1 left, user 6 left; reset 20 s (user) against trade's 7.5. */
    struct px_five f = mirror_step(c, trade, 2, m, 2, 0, "trade, cost 2");
    cr_assert(f.limit == 6 && f.remaining == 1 && f.reset == 20,
              "trade, cost 2: [%lld, %lld, %lld, %lld, %lld]", f.limited,
              f.limit, f.remaining, f.retry, f.reset);

    /* Exhaust both levels, then a check both refuse: trade would wait
     * 4.5 s more (5), user 6 s (6): retry_after is the largest. */
    mirror_step(c, trade, 1, m, 2, 0, "trade, last one");
    px_check_five(px_cmd(c, "LIMITER CHECK %s COST 5", user), "user, to zero",
                  0, 16, 0, -1, 32);
    px_check_five(px_cmd(c, "CL.THROTTLE %s 15 30 60 5", m[0].key),
                  "mirror user, to zero", 0, 16, 0, -1, 32);
    f = mirror_step(c, trade, 3, m, 2, 3, "both refuse");
    cr_assert(f.limited == 1 && f.remaining == 0 && f.retry == 6 &&
                  f.reset == 32,
              "both refuse: [%lld, %lld, %lld, %lld, %lld]", f.limited, f.limit,
              f.remaining, f.retry, f.reset);
}

/* A refused check consumes nothing, so its reply describes the state it
 * left, as a refused CL.THROTTLE does: the levels that would have admitted
 * count as they are (a PEEK), not as if they had consumed. */
static void refused_reports_state(redisContext *c, const char *id1,
                                  const char *id2)
{
    struct mirror m[2];
    char trade[KEY_MAX], user[KEY_MAX];
    struct px_five f, p;

    mirror_set(&m[0], id1, "user", 15, 30, 60);
    mirror_set(&m[1], id1, "trade", 5, 10, 15);
    snprintf(trade, sizeof(trade), "user:%s:trade", id1);
    for (int i = 0; i < 6; i++) {
        mirror_step(c, trade, 1, m, 2, 0, "trade, within the burst");
    }
    /* Trade refuses; user has 10 left and its keys expire in 12 s. */
    f = mirror_step(c, trade, 1, m, 2, 2, "trade refuses");
    p = px_take_five(px_cmd(c, "LIMITER PEEK %s COST 0", trade), "peek after");
    cr_assert(f.reset == p.reset,
              "refused reply: reset_after %lld, but the state it left "
              "resets in %lld (PEEK)",
              f.reset, p.reset);
    /* A PEEK of the same cost answers what that check answered. */
    p = px_take_five(px_cmd(c, "LIMITER PEEK %s", trade), "peek, cost 1");
    assert_same_five(f, p, "refused CHECK, then PEEK");

    /* Trade has 3 left, user 4: a cost of 4 is refused by trade. The
     * reply's least remaining is trade's 3 (user keeps its 4). */
    snprintf(m[0].key, sizeof(m[0].key), "mirror:%s:user", id2);
    snprintf(m[1].key, sizeof(m[1].key), "mirror:%s:trade", id2);
    snprintf(trade, sizeof(trade), "user:%s:trade", id2);
    snprintf(user, sizeof(user), "user:%s", id2);
    for (int i = 0; i < 3; i++) {
        mirror_step(c, trade, 1, m, 2, 0, "trade, three");
    }
    px_check_five(px_cmd(c, "LIMITER CHECK %s COST 9", user), "user, cost 9", 0,
                  16, 4, -1, 24);
    px_check_five(px_cmd(c, "CL.THROTTLE %s 15 30 60 9", m[0].key),
                  "mirror user, cost 9", 0, 16, 4, -1, 24);
    f = mirror_step(c, trade, 4, m, 2, 2, "cost 4, trade refuses");
    cr_assert(f.limit == 6 && f.remaining == 3 && f.retry == 2 && f.reset == 24,
              "cost 4: [%lld, %lld, %lld, %lld, %lld]", f.limited, f.limit,
              f.remaining, f.retry, f.reset);
}

/* COST n consumes n at every level; a cost over a level's limit can never
 * pass (retry -1) and consumes nothing; PEEK consumes nothing; RESET
 * deletes every key of the path and replies how many. */
static void cost_peek_reset(redisContext *c, const char *id)
{
    char trade[KEY_MAX], user[KEY_MAX], kuser[KEY_MAX], ktrade[KEY_MAX];
    int64_t tu, tt;

    snprintf(trade, sizeof(trade), "user:%s:trade", id);
    snprintf(user, sizeof(user), "user:%s", id);
    snprintf(kuser, sizeof(kuser), "cellgate:{user:%s}#0:gcra", id);
    snprintf(ktrade, sizeof(ktrade), "cellgate:{user:%s}:trade#0:gcra", id);

    /* PEEK on a new path: what a CHECK would say (COST 0: the state, full),
     * and nothing written. */
    px_check_five(px_cmd(c, "LIMITER PEEK %s COST 0", trade), "peek new", 0, 6,
                  6, -1, 0);
    px_check_five(px_cmd(c, "LIMITER PEEK %s", trade), "peek new, cost 1", 0, 6,
                  5, -1, 2);
    check_four(px_cmd(c, "LIMITER PEEK %s COST 7", trade), "peek new, cost 7",
               1, 6, 6, -1);
    px_check_absent(kuser, strlen(kuser), "peek new");
    px_check_absent(ktrade, strlen(ktrade), "peek new");
    /* A cost of 7 is more than trade's 6: never, and nothing consumed. */
    check_four(px_cmd(c, "LIMITER CHECK %s COST 7", trade), "cost 7, new", 1, 6,
               6, -1);
    px_check_absent(kuser, strlen(kuser), "cost 7 on a new path");
    px_check_absent(ktrade, strlen(ktrade), "cost 7 on a new path");
    /* COST 3: trade 3 left (4.5 s -> 5), user 13 (6 s). */
    px_check_five(px_cmd(c, "LIMITER CHECK %s COST 3", trade), "cost 3", 0, 6,
                  3, -1, 6);
    tu = tat_of(kuser);
    tt = tat_of(ktrade);
    if (tu != 0) {
        /* COST 3 moved each TAT by 3 emission intervals from the same
         * instant: 6 s at the user level, 4.5 s at trade. */
        cr_assert_eq(tu - tt, (int64_t)(NS * 3 / 2),
                     "user TAT - trade TAT = %lld ns, want 1.5 s",
                     (long long)(tu - tt));
    }
    check_four(px_cmd(c, "LIMITER CHECK %s COST 7", trade), "cost 7", 1, 6, 3,
               -1);
    /* PEEK, twice: the same answer, nothing moved. */
    px_check_five(px_cmd(c, "LIMITER PEEK %s COST 0", trade), "peek 1", 0, 6, 3,
                  -1, 6);
    px_check_five(px_cmd(c, "LIMITER PEEK %s COST 0", trade), "peek 2", 0, 6, 3,
                  -1, 6);
    px_check_five(px_cmd(c, "LIMITER PEEK %s COST 0", user), "peek user", 0, 16,
                  13, -1, 6);
    cr_assert_eq(tat_of(kuser), tu, "PEEK or a refusal moved %s", kuser);
    cr_assert_eq(tat_of(ktrade), tt, "PEEK or a refusal moved %s", ktrade);
    /* COST 0 is a check that takes nothing. */
    px_check_five(px_cmd(c, "LIMITER CHECK %s COST 0", trade), "cost 0", 0, 6,
                  3, -1, 6);
    /* COST 3 again: exactly the rest of trade. */
    px_check_five(px_cmd(c, "LIMITER CHECK %s cost 3", trade), "cost 3 again",
                  0, 6, 0, -1, 12);

    /* RESET the path: both keys go; then a fresh start. */
    px_check_int(px_cmd_admin(c, "LIMITER RESET %s", trade), 2);
    px_check_absent(kuser, strlen(kuser), "after RESET");
    px_check_absent(ktrade, strlen(ktrade), "after RESET");
    px_check_five(px_cmd(c, "LIMITER PEEK %s COST 0", trade),
                  "peek after reset", 0, 6, 6, -1, 0);
    px_check_five(px_cmd(c, "LIMITER CHECK %s", trade), "check after reset", 0,
                  6, 5, -1, 2);
    /* RESET of the user level alone leaves trade. */
    px_check_int(px_cmd_admin(c, "LIMITER RESET %s", user), 1);
    px_check_absent(kuser, strlen(kuser), "after RESET of the user level");
    px_check_five(px_cmd(c, "LIMITER PEEK %s COST 0", user),
                  "user after its reset", 0, 16, 16, -1, 0);
    px_check_five(px_cmd(c, "LIMITER PEEK %s COST 0", trade), "trade kept", 0,
                  6, 5, -1, 2);
    px_check_int(px_cmd_admin(c, "LIMITER RESET %s", trade), 1);
    px_check_int(px_cmd_admin(c, "LIMITER RESET %s", trade), 0);
    px_check_int(px_cmd_admin(c, "limiter reset %s", trade), 0);
    px_check_five(px_cmd(c, "LIMITER CHECK %s COST 6", trade), "all of it", 0,
                  6, 0, -1, 12);
    px_check_int(px_cmd_admin(c, "LIMITER RESET %s", trade), 2);
}

/* A level above the wildcard: global (3 per 6 s) is shared by every
 * global:<id> (11 per 60 s each). Once global refuses, the identity level
 * of the refused check is left as it was, also when it lives on another
 * node and was checked first (refund). ids: a and c on other masters than
 * {global} in cluster mode. */
static void global_level(redisContext *c, const char *a, const char *b,
                         const char *cc)
{
    char ka[KEY_MAX], kb[KEY_MAX], kc[KEY_MAX];
    const char *kg = "cellgate:{global}#0:gcra";
    int64_t tg, ta;

    snprintf(ka, sizeof(ka), "cellgate:{global:%s}#0:gcra", a);
    snprintf(kb, sizeof(kb), "cellgate:{global:%s}#0:gcra", b);
    snprintf(kc, sizeof(kc), "cellgate:{global:%s}#0:gcra", cc);

    /* Global's 3 are shared: a, b, a. reset_after is the identity
     * level's 60 s per call, remaining global's. */
    px_check_five(px_cmd(c, "LIMITER CHECK global:%s", a), "global a 1", 0, 3,
                  2, -1, 60);
    px_check_five(px_cmd(c, "LIMITER CHECK global:%s", b), "global b 1", 0, 3,
                  1, -1, 60);
    px_check_five(px_cmd(c, "LIMITER CHECK global:%s", a), "global a 2", 0, 3,
                  0, -1, 120);
    px_check_five(px_cmd(c, "LIMITER PEEK global:%s COST 0", a), "peek a", 0, 3,
                  0, -1, 120);
    tg = tat_of(kg);
    ta = tat_of(ka);

    /* Global refuses (6 s to wait). a's own level would admit: it must
     * not keep the 60 s this check would have cost. */
    check_four(px_cmd(c, "LIMITER CHECK global:%s", a), "global a 3", 1, 3, 0,
               6);
    px_check_five(px_cmd(c, "LIMITER PEEK global:%s COST 0", a), "peek a after",
                  0, 3, 0, -1, 120);
    cr_assert_eq(tat_of(ka), ta, "the refused check consumed at %s", ka);
    cr_assert_eq(tat_of(kg), tg, "the refused check moved %s", kg);

    /* A new identity: refused, and its level is still untouched. */
    check_four(px_cmd(c, "LIMITER CHECK global:%s", cc), "global c 1", 1, 3, 0,
               6);
    px_check_five(px_cmd(c, "LIMITER PEEK global:%s COST 0", cc), "peek c", 0,
                  3, 0, -1, 18);
    px_check_absent(kc, strlen(kc), "identity level of a refused check");
    check_four(px_cmd(c, "LIMITER CHECK global:%s COST 2", b), "global b 2", 1,
               3, 0, 12);
    px_check_five(px_cmd(c, "LIMITER PEEK global:%s COST 0", b), "peek b", 0, 3,
                  0, -1, 60);

    /* RESET global:<a> deletes the shared level and a's: 2 keys, maybe on
     * two nodes. b keeps its own level. */
    px_check_int(px_cmd_admin(c, "LIMITER RESET global:%s", a), 2);
    px_check_absent(kg, strlen(kg), "after RESET");
    px_check_absent(ka, strlen(ka), "after RESET");
    px_check_five(px_cmd(c, "LIMITER CHECK global:%s", b), "global b after", 0,
                  3, 2, -1, 120);
    px_check_int(px_cmd_admin(c, "LIMITER RESET global:%s", b), 2);
    px_check_int(px_cmd_admin(c, "LIMITER RESET global:%s", cc), 0);
}

/* Resolution: an exact child beats "*"; segments past the tree count
 * against the deepest level found; a node with two limits needs both. */
static void resolution(redisContext *c)
{
    /* user:vip is its own node (100), not user:* (16). */
    px_check_five(px_cmd(c, "LIMITER CHECK user:vip"), "vip", 0, 100, 99, -1,
                  1);
    px_check_five(px_cmd(c, "LIMITER CHECK user:vip:trade"), "vip deeper", 0,
                  100, 98, -1, 2);
    /* user:r1:other: only the user level. */
    px_check_five(px_cmd(c, "LIMITER CHECK user:r1:other"), "other", 0, 16, 15,
                  -1, 2);
    px_check_five(px_cmd(c, "LIMITER CHECK user:r1:other:x:y"), "deeper", 0, 16,
                  14, -1, 4);
    px_check_five(px_cmd(c, "LIMITER PEEK user:r1 COST 0"), "same level", 0, 16,
                  14, -1, 4);
    /* api: 5 per 1 s and 2 per 60 s; the second limit decides. */
    px_check_five(px_cmd(c, "LIMITER CHECK api"), "api 1", 0, 2, 1, -1, 60);
    px_check_five(px_cmd(c, "LIMITER CHECK api"), "api 2", 0, 2, 0, -1, 120);
    check_four(px_cmd(c, "LIMITER CHECK api"), "api 3", 1, 2, 0, 60);
    px_check_int(px_cmd_admin(c, "LIMITER RESET api"), 2);
    px_check_int(px_cmd_admin(c, "LIMITER RESET user:vip"), 1);
    px_check_int(px_cmd_admin(c, "LIMITER RESET user:r1:other"), 1);
}

/* Every error text, and none of them writes anything. */
static void error_texts(redisContext *c)
{
    long long keys = count_limiter_keys();
    char path[LIMITS_MAX_PATH_BYTES + 8];
    size_t n;

    /* Paths. */
    px_check_error(px_cmd(c, "LIMITER CHECK %b", "", (size_t)0),
                   "ERR empty limiter path");
    px_check_error(px_cmd(c, "LIMITER CHECK user::x"), E_EMPTY_SEG);
    px_check_error(px_cmd(c, "LIMITER CHECK :user"), E_EMPTY_SEG);
    px_check_error(px_cmd(c, "LIMITER CHECK user:x:"), E_EMPTY_SEG);
    px_check_error(px_cmd(c, "LIMITER CHECK user:{x}"), E_BRACES);
    px_check_error(px_cmd(c, "LIMITER PEEK user:a}b"), E_BRACES);
    px_check_error(px_cmd(c, "LIMITER CHECK {user:x}:trade"), E_BRACES);
    px_check_error(px_cmd(c, "LIMITER CHECK nope"), E_NO_LIMITS "'nope'");
    /* A path the tree knows but that meets no limits is not limited: the
     * reply says so with limit 0 (redis-cell's limit is never 0). */
    px_check_five(px_cmd(c, "LIMITER CHECK user"), "user", 0, 0, 0, -1, 0);
    px_check_int(px_cmd_admin(c, "LIMITER RESET user"), 0);
    px_check_error(px_cmd(c, "LIMITER PEEK nope:x"), E_NO_LIMITS "'nope:x'");
    px_check_error(px_cmd_admin(c, "LIMITER RESET nope"), E_NO_LIMITS "'nope'");

    /* 1024 bytes is the longest path; 1025 is refused. */
    n = (size_t)snprintf(path, sizeof(path), "user:");
    while (n < LIMITS_MAX_PATH_BYTES) {
        path[n++] = 'x';
    }
    path[n] = '\0';
    px_check_five(px_cmd(c, "LIMITER CHECK %s", path), "1024-byte path", 0, 16,
                  15, -1, 2);
    px_check_int(px_cmd_admin(c, "LIMITER RESET %s", path), 1);
    path[n++] = 'x';
    path[n] = '\0';
    px_check_error(px_cmd(c, "LIMITER CHECK %s", path),
                   "ERR limiter path longer than 1024 bytes");
    /* 32 segments is the deepest path; 33 are refused. */
    n = (size_t)snprintf(path, sizeof(path), "user:s");
    for (int i = 2; i < LIMITS_MAX_DEPTH; i++) {
        n += (size_t)snprintf(path + n, sizeof(path) - n, ":s");
    }
    px_check_five(px_cmd(c, "LIMITER CHECK %s", path), "32 segments", 0, 16, 15,
                  -1, 2);
    px_check_int(px_cmd_admin(c, "LIMITER RESET %s", path), 1);
    snprintf(path + n, sizeof(path) - n, ":s");
    px_check_error(px_cmd(c, "LIMITER CHECK %s", path),
                   "ERR limiter path has more than 32 segments");

    /* Options. */
    px_check_error(px_cmd(c, "LIMITER CHECK user:e COST x"), E_NOT_INT);
    px_check_error(px_cmd(c, "LIMITER CHECK user:e COST 1.5"), E_NOT_INT);
    px_check_error(px_cmd(c, "LIMITER CHECK user:e COST -1"), E_NOT_INT);
    px_check_error(px_cmd(c, "LIMITER CHECK user:e COST %b", "", (size_t)0),
                   E_NOT_INT);
    px_check_error(px_cmd(c, "LIMITER CHECK user:e COST 99999999999999999999"),
                   E_NOT_INT);
    px_check_error(px_cmd(c, "LIMITER CHECK user:e COST"), E_SYNTAX);
    px_check_error(px_cmd(c, "LIMITER CHECK user:e FOO"), E_SYNTAX);
    px_check_error(px_cmd(c, "LIMITER CHECK user:e COST 1 FOO 2"), E_SYNTAX);
    px_check_error(px_cmd(c, "LIMITER PEEK user:e FOO"), E_SYNTAX);
    px_check_error(px_cmd_admin(c, "LIMITER RESET user:e FOO"), E_SYNTAX);
    px_check_error(px_cmd(c, "LIMITER CHECK"), E_ARITY);
    px_check_error(px_cmd(c, "LIMITER PEEK"), E_ARITY);
    px_check_error(px_cmd(c, "LIMITER"), E_ARITY);

    /* Nothing was written, and the connection still works. */
    cr_assert_eq(count_limiter_keys(), keys, "an error wrote a key");
    px_check_five(px_cmd(c, "LIMITER PEEK user:e COST 0"), "after the errors",
                  0, 16, 16, -1, 0);
    px_check_absent("cellgate:{user:e}#0:gcra",
                    strlen("cellgate:{user:e}#0:gcra"), "after the errors");
    /* Every algorithm runs: tb is a token bucket of 5 refilled at 1/s. */
    px_check_five(px_cmd(c, "LIMITER CHECK tb"), "tb", 0, 5, 4, -1, 1);
    px_check_five(px_cmd(c, "LIMITER PEEK tb:x COST 0"), "tb:x", 0, 5, 4, -1,
                  1);
}

/* The global part of refused_reports_state: global refuses after three
 * checks of global:<id>; the identity level (60 s per call, on another
 * node in cluster mode) counts as it is, not as the check would have left
 * it. */
static void refused_reports_state_global(redisContext *c, const char *id)
{
    struct mirror m[2];
    char path[KEY_MAX];
    struct px_five f, p;

    mirror_set(&m[0], id, "global", 2, 1, 6);
    mirror_set(&m[1], id, "ident", 10, 1, 60);
    snprintf(path, sizeof(path), "global:%s", id);
    for (int i = 0; i < 3; i++) {
        mirror_step(c, path, 1, m, 2, 0, "global, within the burst");
    }
    f = mirror_step(c, path, 1, m, 2, 1, "global refuses");
    p = px_take_five(px_cmd(c, "LIMITER PEEK %s COST 0", path), "peek after");
    cr_assert(f.reset == p.reset && f.reset == 180,
              "refused reply: reset_after %lld, PEEK %lld, want 180", f.reset,
              p.reset);
    px_check_int(px_cmd_admin(c, "LIMITER RESET %s", path), 2);
}

/* A key the tests expect, and the hash tag it must carry. */
struct expected_key {
    char key[KEY_MAX]; /* the documented name */
    char tag[KEY_MAX]; /* the text between its braces */
};

/* Sets k to "cellgate:{<tag>}<rest>". */
static void expect_key(struct expected_key *k, const char *tag,
                       const char *rest)
{
    int n = snprintf(k->key, sizeof(k->key), "cellgate:{%s}%s", tag, rest);

    /* Every name the tests build fits; one that did not would be a test
     * bug, not a cut key. */
    cr_assert(n > 0 && (size_t)n < sizeof(k->key), "key too long: %s", tag);
    snprintf(k->tag, sizeof(k->tag), "%s", tag);
}

/* Asserts that the limiter keys on the store are exactly the documented
 * names, each with a TAT and an expiry, each on the master that owns its
 * tag's slot (cluster); then RESET removes all of them. id: the
 * global:<id> identity (on another master than {global} in cluster mode). */
static void documented_keys(redisContext *c, const char *id)
{
    struct px_cluster *cl = px_cluster();
    struct expected_key ek[7];
    char gpath[KEY_MAX];
    size_t n = 0;

    snprintf(gpath, sizeof(gpath), "global:%s", id);
    expect_key(&ek[n++], "user:alex", "#0:gcra");
    expect_key(&ek[n++], "user:alex", ":trade#0:gcra");
    expect_key(&ek[n++], "global", "#0:gcra");
    expect_key(&ek[n++], gpath, "#0:gcra");
    expect_key(&ek[n++], "api", "#0:gcra");
    expect_key(&ek[n++], "api", "#1:gcra");
    expect_key(&ek[n++], "user:vip", "#0:gcra");
    cr_assert_str_eq(ek[1].key, "cellgate:{user:alex}:trade#0:gcra");

    cr_assert_eq(count_limiter_keys(), 0, "limiter keys before any check");
    px_take_five(px_cmd(c, "LIMITER CHECK user:alex:trade"), "user:alex:trade");
    px_take_five(px_cmd(c, "LIMITER CHECK %s", gpath), gpath);
    px_take_five(px_cmd(c, "LIMITER CHECK api"), "api");
    px_take_five(px_cmd(c, "LIMITER CHECK user:vip"), "user:vip");
    cr_assert_eq(count_limiter_keys(), (long long)n,
                 "limiter keys: %lld, want %zu", count_limiter_keys(), n);

    for (size_t i = 0; i < n; i++) {
        redisContext *d = px_direct_for(ek[i].tag, strlen(ek[i].tag));
        long long ks, ts;
        redisReply *r;

        tat_of(ek[i].key);
        px_check_int(lstate_cmd(d, "EXISTS %s", ek[i].key), 1);
        if (px_mode_now() == PX_MODE_CLUSTER) {
            /* Redis itself hashes the key to its tag's slot. */
            r = px_cmd(d, "CLUSTER KEYSLOT %s", ek[i].key);
            cr_assert_eq(r->type, REDIS_REPLY_INTEGER);
            ks = r->integer;
            freeReplyObject(r);
            r = px_cmd(d, "CLUSTER KEYSLOT %s", ek[i].tag);
            cr_assert_eq(r->type, REDIS_REPLY_INTEGER);
            ts = r->integer;
            freeReplyObject(r);
            cr_assert_eq(ks, ts, "%s: slot %lld, its tag's %lld", ek[i].key, ks,
                         ts);
        }
        redisFree(d);
    }
    if (px_mode_now() == PX_MODE_CLUSTER) {
        /* The shared level and the identity level live on two masters. */
        cr_assert_neq(
            px_cluster_master_of_key(cl, ek[2].tag, strlen(ek[2].tag)),
            px_cluster_master_of_key(cl, ek[3].tag, strlen(ek[3].tag)),
            "{global} and {%s} share a master", ek[3].tag);
    }
    px_check_int(px_cmd_admin(c, "LIMITER RESET user:alex:trade"), 2);
    px_check_int(px_cmd_admin(c, "LIMITER RESET %s", gpath), 2);
    px_check_int(px_cmd_admin(c, "LIMITER RESET api"), 2);
    px_check_int(px_cmd_admin(c, "LIMITER RESET user:vip"), 1);
    cr_assert_eq(count_limiter_keys(), 0, "keys left after RESET");
}

/* ---------------- Files and the log ---------------- */

/* LIMITER RULES (an array of lines), as text (the caller frees it). */
static char *rules_of(redisContext *c)
{
    return px_lines_text(px_cmd(c, "LIMITER RULES"));
}

static void check_rules(redisContext *c, const char *want, const char *what)
{
    char *got = rules_of(c);

    cr_assert_str_eq(got, want, "%s", what);
    free(got);
}

/* Asserts r is an error "ERR <limits_path>:<line>:<col>: ..." that names
 * each of lines[0..n-1] (0: any line). Frees r. */
static void check_file_error(redisReply *r, const int *lines, size_t n)
{
    char prefix[PX_PATH_MAX + 8];

    cr_assert_eq(r->type, REDIS_REPLY_ERROR, "not an error: type %d", r->type);
    snprintf(prefix, sizeof(prefix), "ERR %s:", limits_path);
    cr_assert_eq(strncmp(r->str, prefix, strlen(prefix)), 0,
                 "\"%s\" does not start with \"%s\"", r->str, prefix);
    for (size_t i = 0; i < n; i++) {
        px_check_location(r->str, limits_path, lines[i]);
    }
    freeReplyObject(r);
}

/* ---------------- Single Redis ---------------- */

Test(it_limiter_tree, design_example_counts_at_both_levels_refusal_takes_none,
     .init = init_single, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);

    design_tree(c, "alex", "bob");
    redisFree(c);
}

Test(it_limiter_tree, reply_aggregates_the_levels_as_cl_throttle_sees_them,
     .init = init_single, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);

    aggregate_admitted(c, "carol");
    redisFree(c);
}

Test(it_limiter_tree, refused_check_reports_the_state_it_left_in_single_mode,
     .init = init_single, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);

    refused_reports_state(c, "dave", "erin");
    refused_reports_state_global(c, "g1");
    redisFree(c);
}

Test(it_limiter_tree, cost_peek_and_reset_in_single_mode, .init = init_single,
     .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);

    cost_peek_reset(c, "fay");
    redisFree(c);
}

Test(it_limiter_tree, level_above_wildcard_is_shared_and_refunded_in_single,
     .init = init_single, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);

    global_level(c, "a", "b", "c");
    redisFree(c);
}

Test(it_limiter_tree, exact_child_deeper_paths_and_two_limits_in_single_mode,
     .init = init_single, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);

    resolution(c);
    redisFree(c);
}

Test(it_limiter_tree, error_texts_are_exact_and_write_nothing_in_single_mode,
     .init = init_single, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);

    error_texts(c);
    redisFree(c);
}

Test(it_limiter_tree, keys_are_the_documented_names_in_single_mode,
     .init = init_single, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);

    documented_keys(c, "a");
    redisFree(c);
}

Test(it_limiter_tree, reset_and_reload_need_auth_admin_when_configured,
     .init = init_single_admin, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    redisContext *c2 = px_connect(px_env()->proxy.port);
    redisReply *r;

    /* CHECK, PEEK and RULES are for everyone. */
    px_check_five(px_cmd(c, "LIMITER CHECK user:alex:trade"), "check", 0, 6, 5,
                  -1, 2);
    check_rules(c, tree_rules, "RULES without admin");
    px_check_error(px_cmd(c, "LIMITER RESET user:alex:trade"), E_NOPERM);
    px_check_error(px_cmd(c, "limiter reset user:alex:trade"), E_NOPERM);
    px_check_error(px_cmd(c, "LIMITER RELOAD"), E_NOPERM_RELOAD);
    px_check_five(px_cmd(c, "LIMITER PEEK user:alex:trade COST 0"), "kept", 0,
                  6, 5, -1, 2);
    cr_assert_eq(count_limiter_keys(), 2);
    /* A wrong password changes nothing. */
    r = px_cmd(c, "AUTH admin wrong");
    cr_assert_eq(r->type, REDIS_REPLY_ERROR, "AUTH admin wrong: type %d",
                 r->type);
    freeReplyObject(r);
    px_check_error(px_cmd(c, "LIMITER RESET user:alex:trade"), E_NOPERM);
    /* The admin may. */
    px_check_status(px_cmd(c, "AUTH admin " ADMIN_PW), "OK");
    px_check_int(px_cmd(c, "LIMITER RESET user:alex:trade"), 2);
    cr_assert_eq(count_limiter_keys(), 0);
    write_limits(tree2_yaml);
    px_check_status(px_cmd(c, "LIMITER RELOAD"), "OK");
    check_rules(c, tree2_rules, "RULES after the admin's RELOAD");
    /* Per connection: the other client is still refused. */
    px_check_error(px_cmd(c2, "LIMITER RESET user:alex:trade"), E_NOPERM);
    px_check_error(px_cmd(c2, "LIMITER RELOAD"), E_NOPERM_RELOAD);
    px_check_five(px_cmd(c2, "LIMITER CHECK user:alex:trade"), "new rules", 0,
                  2, 1, -1, 15);
    redisFree(c2);
    redisFree(c);
}

/* ---------------- Embedded ---------------- */

Test(it_limiter_tree, every_behaviour_holds_in_embedded_mode,
     .init = init_embedded, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);

    design_tree(c, "alex", "bob");
    aggregate_admitted(c, "carol");
    cost_peek_reset(c, "fay");
    global_level(c, "a", "b", "c");
    resolution(c);
    error_texts(c);
    redisFree(c);
}

/* LIMITER RULES answers one bulk string per line of tree_rules (redis-cli
 * shows them one numbered line each), the same array in RESP2 and RESP3. */
static const char tree_rules_resp[] =
    "*7\r\n"
    "$77\r\napi  gcra(max_burst=4,count=1,period=1s) "
    "gcra(max_burst=1,count=1,period=60s)\r\n"
    "$43\r\nglobal  gcra(max_burst=2,count=1,period=6s)\r\n"
    "$47\r\nglobal:*  gcra(max_burst=10,count=1,period=60s)\r\n"
    "$45\r\ntb  token_bucket(capacity=5,refill_per_sec=1)\r\n"
    "$46\r\nuser:*  gcra(max_burst=15,count=30,period=60s)\r\n"
    "$51\r\nuser:*:trade  gcra(max_burst=5,count=10,period=15s)\r\n"
    "$49\r\nuser:vip  gcra(max_burst=99,count=100,period=60s)\r\n";

Test(it_limiter_tree, rules_are_an_array_of_lines_in_resp2_and_resp3,
     .init = init_embedded, .fini = px_env_fini, .timeout = 60)
{
    static const char reqs[] =
        "LIMITER RULES\r\nHELLO 3\r\nLIMITER RULES\r\nQUIT\r\n";
    static const char quit_ok[] = "+OK\r\n";
    size_t wl = sizeof(tree_rules_resp) - 1, ql = sizeof(quit_ok) - 1;
    char got[8192];
    int fd = px_raw_connect(px_env()->proxy.port, 0);
    size_t n;
    int closed;

    cr_assert_eq(px_raw_send(fd, reqs, sizeof(reqs) - 1), 0);
    n = px_raw_read_to_close(fd, got, sizeof(got), 10000, &closed);
    cr_assert(closed, "QUIT did not close: '%.*s'", (int)n, got);
    close(fd);
    /* RESP2 first, then (after HELLO's map) RESP3, then QUIT's +OK. */
    cr_assert(n > 2 * wl + ql, "short answer: '%.*s'", (int)n, got);
    cr_assert(memcmp(got, tree_rules_resp, wl) == 0, "RESP2: '%.*s'", (int)n,
              got);
    cr_assert(memcmp(got + n - wl - ql, tree_rules_resp, wl) == 0 &&
                  memcmp(got + n - ql, quit_ok, ql) == 0,
              "RESP3: '%.*s'", (int)n, got);
}

Test(it_limiter_tree, refused_check_reports_the_state_it_left_in_embedded_mode,
     .init = init_embedded, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);

    refused_reports_state(c, "dave", "erin");
    refused_reports_state_global(c, "g1");
    redisFree(c);
}

Test(it_limiter_tree, rules_and_reload_change_answers_bad_files_keep_old_rules,
     .init = init_embedded, .fini = px_env_fini, .timeout = 60)
{
    static const int type_lines[] = { BAD_TYPE_LINE1, BAD_TYPE_LINE2 };
    static const int any_line[] = { 0 };
    redisContext *c = px_connect(px_env()->proxy.port);
    char loc[PX_PATH_MAX + 32];
    redisReply *r;

    check_rules(c, tree_rules, "RULES of the first file");
    px_check_five(px_cmd(c, "LIMITER CHECK user:alex:trade"), "old rules", 0, 6,
                  5, -1, 2);
    px_check_status(px_cmd_admin(c, "LIMITER RELOAD"), "OK");
    check_rules(c, tree_rules, "RULES after reloading the same file");

    /* New rules: trade 2 per 15 s, user:* 4 per 60 s. Keys carry over:
     * alex's levels continue from their state (trade 1.5 s, user 2 s). */
    write_limits(tree2_yaml);
    px_check_status(px_cmd_admin(c, "LIMITER RELOAD"), "OK");
    check_rules(c, tree2_rules, "RULES after RELOAD");
    px_check_five(px_cmd(c, "LIMITER CHECK user:zed:trade"), "new rules", 0, 2,
                  1, -1, 15);
    px_check_five(px_cmd(c, "LIMITER CHECK user:alex:trade"), "carried over", 0,
                  2, 0, -1, 17);
    px_check_error(px_cmd(c, "LIMITER CHECK global:a"),
                   E_NO_LIMITS "'global:a'");

    /* A YAML syntax error: refused with its location, old rules stay. */
    write_limits(bad_syntax_yaml);
    check_file_error(px_cmd_admin(c, "LIMITER RELOAD"), any_line, 1);
    check_rules(c, tree2_rules, "RULES after a refused syntax error");
    px_check_five(px_cmd(c, "LIMITER CHECK user:zed:trade"), "kept rules", 0, 2,
                  0, -1, 30);

    /* Wrong types: every error, each with its location. */
    write_limits(bad_type_yaml);
    r = px_cmd_admin(c, "LIMITER RELOAD");
    snprintf(loc, sizeof(loc), "%s:%d:%d:", limits_path, BAD_TYPE_LINE1,
             BAD_TYPE_COL1);
    cr_assert(r->type == REDIS_REPLY_ERROR && strstr(r->str, loc) != NULL,
              "RELOAD of a wrong type: \"%s\" lacks \"%s\"",
              r->str != NULL ? r->str : "", loc);
    check_file_error(r, type_lines, 2);
    check_rules(c, tree2_rules, "RULES after a refused wrong type");
    check_four(px_cmd(c, "LIMITER CHECK user:zed:trade"), "kept rules 2", 1, 2,
               0, 8);

    /* A file that is gone. */
    cr_assert_eq(remove(limits_path), 0);
    r = px_cmd_admin(c, "LIMITER RELOAD");
    cr_assert(r->type == REDIS_REPLY_ERROR && strstr(r->str, limits_path),
              "RELOAD of a missing file: \"%s\"", r->str != NULL ? r->str : "");
    freeReplyObject(r);
    check_rules(c, tree2_rules, "RULES after a missing file");

    /* And back to a good file. */
    write_limits(tree_yaml);
    px_check_status(px_cmd_admin(c, "LIMITER RELOAD"), "OK");
    check_rules(c, tree_rules, "RULES after the repair");
    px_check_five(px_cmd(c, "LIMITER CHECK global:a"), "global again", 0, 3, 2,
                  -1, 60);
    px_check_status(px_cmd(c, "PING"), "PONG");
    redisFree(c);
}

/* Polls LIMITER RULES (bounded) until it is `want`. */
static void wait_rules(redisContext *c, const char *want, const char *what)
{
    long long deadline = px_now_ms() + SIGHUP_WAIT_MS;

    for (;;) {
        char *got = rules_of(c);
        int same = strcmp(got, want) == 0;
        if (!same && px_now_ms() >= deadline) {
            cr_assert_str_eq(got, want, "%s: never reloaded", what);
        }
        free(got);
        if (same) {
            return;
        }
        px_sleep_ms(SIGHUP_STEP_MS);
    }
}

/* Polls the proxy's log (bounded) until it holds `n` lines with `needle`. */
static void wait_log(const char *needle, int n)
{
    long long deadline = px_now_ms() + SIGHUP_WAIT_MS;

    for (;;) {
        char *text = px_read_file(px_env()->proxy.log, NULL);
        int count = 0;

        cr_assert_not_null(text, "cannot read %s", px_env()->proxy.log);
        for (const char *p = strstr(text, needle); p != NULL;
             p = strstr(p + 1, needle)) {
            count++;
        }
        if (count < n && px_now_ms() >= deadline) {
            cr_assert_fail("%d of %d \"%s\" in the log: \"%s\"", count, n,
                           needle, text);
        }
        free(text);
        if (count >= n) {
            return;
        }
        px_sleep_ms(SIGHUP_STEP_MS);
    }
}

Test(it_limiter_tree, sighup_reloads_the_file_and_keeps_old_rules_on_errors,
     .init = init_embedded, .fini = px_env_fini, .timeout = 60)
{
    struct px_child *p = &px_env()->proxy;
    redisContext *c = px_connect(p->port);
    char *log;

    check_rules(c, tree_rules, "RULES at start");
    write_limits(tree2_yaml);
    cr_assert_eq(kill(p->pid, SIGHUP), 0);
    wait_rules(c, tree2_rules, "SIGHUP with a new file");
    px_check_five(px_cmd(c, "LIMITER CHECK user:zed:trade"), "new rules", 0, 2,
                  1, -1, 15);

    /* A broken file: refused (the log says so), the rules stay. */
    write_limits(bad_type_yaml);
    cr_assert_eq(kill(p->pid, SIGHUP), 0);
    wait_log("refused", 1);
    log = px_read_file(p->log, NULL);
    cr_assert_not_null(log, "cannot read %s", p->log);
    px_check_location(log, limits_path, BAD_TYPE_LINE1);
    free(log);
    cr_assert(px_child_alive(p), "the proxy died on a bad SIGHUP reload");
    check_rules(c, tree2_rules, "RULES after a refused SIGHUP");
    px_check_five(px_cmd(c, "LIMITER CHECK user:zed:trade"), "kept rules", 0, 2,
                  0, -1, 30);

    /* Still reloading afterwards. */
    write_limits(tree_yaml);
    cr_assert_eq(kill(p->pid, SIGHUP), 0);
    wait_rules(c, tree_rules, "SIGHUP after the repair");
    px_check_five(px_cmd(c, "LIMITER CHECK user:alex:trade"), "first rules", 0,
                  6, 5, -1, 2);
    redisFree(c);
}

Test(it_limiter_tree, without_a_limits_file_every_subcommand_says_so,
     .init = init_embedded_bare, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    redisReply *r;

    px_check_error(px_cmd(c, "LIMITER CHECK user:alex"),
                   E_NO_LIMITS "'user:alex'");
    px_check_error(px_cmd(c, "LIMITER PEEK user:alex:trade"),
                   E_NO_LIMITS "'user:alex:trade'");
    px_check_error(px_cmd_admin(c, "LIMITER RESET user:alex"),
                   E_NO_LIMITS "'user:alex'");
    /* Path errors come first all the same. */
    px_check_error(px_cmd(c, "LIMITER CHECK a::b"), E_EMPTY_SEG);
    r = px_cmd(c, "LIMITER RULES");
    cr_assert(r->type == REDIS_REPLY_ERROR && strncmp(r->str, "ERR ", 4) == 0,
              "LIMITER RULES without a file: type %d \"%s\"", r->type,
              r->str != NULL ? r->str : "");
    freeReplyObject(r);
    r = px_cmd_admin(c, "LIMITER RELOAD");
    cr_assert(r->type == REDIS_REPLY_ERROR && strncmp(r->str, "ERR ", 4) == 0,
              "LIMITER RELOAD without a file: type %d \"%s\"", r->type,
              r->str != NULL ? r->str : "");
    freeReplyObject(r);
    /* CL.THROTTLE needs no file. */
    px_check_five(px_cmd(c, "CL.THROTTLE k 15 30 60"), "CL.THROTTLE", 0, 16, 15,
                  -1, 2);
    redisFree(c);
}

/* ---------------- The command line ---------------- */

Test(it_limiter_tree, broken_limits_file_at_start_exits_1_with_its_location,
     .fini = px_env_fini, .timeout = 60)
{
    char listen[64], conf[PX_PATH_MAX], yaml[PX_PATH_MAX + 96];
    struct px_run res;

    snprintf(listen, sizeof(listen), "127.0.0.1:%d", px_free_port());
    /* --limits: a wrong type, both errors with their locations. */
    write_limits(bad_type_yaml);
    {
        const char *argv[] = { PX_CELLGATE_BIN, "--listen",  listen,
                               "--limits",      limits_path, NULL };
        px_run(&res, argv);
    }
    cr_assert_eq(res.status, 1, "exit %d, stderr: %s", res.status, res.err);
    px_check_location(res.err, limits_path, BAD_TYPE_LINE1);
    px_check_location(res.err, limits_path, BAD_TYPE_LINE2);
    px_run_free(&res);

    /* limits_file: in proxy.yaml, a YAML syntax error. */
    write_limits(bad_syntax_yaml);
    snprintf(yaml, sizeof(yaml), "listen: %s\nlimits_file: %s\n", listen,
             limits_path);
    px_write_file(conf, sizeof(conf), "proxy.yaml", yaml);
    {
        const char *argv[] = { PX_CELLGATE_BIN, "--config", conf, NULL };
        px_run(&res, argv);
    }
    cr_assert_eq(res.status, 1, "exit %d, stderr: %s", res.status, res.err);
    px_check_location(res.err, limits_path, 0);
    px_run_free(&res);

    /* A file that does not exist. */
    cr_assert_eq(remove(limits_path), 0);
    {
        const char *argv[] = { PX_CELLGATE_BIN, "--listen",  listen,
                               "--limits",      limits_path, NULL };
        px_run(&res, argv);
    }
    cr_assert_eq(res.status, 1, "exit %d, stderr: %s", res.status, res.err);
    cr_assert_not_null(strstr(res.err, limits_path), "stderr: %s", res.err);
    px_run_free(&res);
}

Test(it_limiter_tree, check_config_lists_every_limits_error_or_exits_0,
     .fini = px_env_fini, .timeout = 60)
{
    char conf[PX_PATH_MAX], yaml[PX_PATH_MAX + 32];
    struct px_run res;

    write_limits(bad_type_yaml);
    {
        const char *argv[] = { PX_CELLGATE_BIN, "--check-config", "--limits",
                               limits_path, NULL };
        px_run(&res, argv);
    }
    cr_assert_eq(res.status, 1, "exit %d, stderr: %s", res.status, res.err);
    px_check_location(res.err, limits_path, BAD_TYPE_LINE1);
    px_check_location(res.err, limits_path, BAD_TYPE_LINE2);
    cr_assert_null(strstr(res.out, "OK"), "stdout: %s", res.out);
    px_run_free(&res);

    /* The same file named by proxy.yaml. */
    snprintf(yaml, sizeof(yaml), "limits_file: %s\n", limits_path);
    px_write_file(conf, sizeof(conf), "proxy.yaml", yaml);
    {
        const char *argv[] = { PX_CELLGATE_BIN, "--config", conf,
                               "--check-config", NULL };
        px_run(&res, argv);
    }
    cr_assert_eq(res.status, 1, "exit %d, stderr: %s", res.status, res.err);
    px_check_location(res.err, limits_path, BAD_TYPE_LINE1);
    px_check_location(res.err, limits_path, BAD_TYPE_LINE2);
    px_run_free(&res);

    write_limits(bad_syntax_yaml);
    {
        const char *argv[] = { PX_CELLGATE_BIN, "--check-config", "--limits",
                               limits_path, NULL };
        px_run(&res, argv);
    }
    cr_assert_eq(res.status, 1, "exit %d, stderr: %s", res.status, res.err);
    px_check_location(res.err, limits_path, 0);
    px_run_free(&res);

    write_limits(tree_yaml);
    {
        const char *argv[] = { PX_CELLGATE_BIN, "--check-config", "--limits",
                               limits_path, NULL };
        px_run(&res, argv);
    }
    cr_assert_eq(res.status, 0, "exit %d, stderr: %s", res.status, res.err);
    px_run_free(&res);
    {
        const char *argv[] = { PX_CELLGATE_BIN, "--config", conf,
                               "--check-config", NULL };
        px_run(&res, argv);
    }
    cr_assert_eq(res.status, 0, "exit %d, stderr: %s", res.status, res.err);
    px_run_free(&res);
}

/* ---------------- Cluster ---------------- */

Test(it_limiter_tree, every_behaviour_holds_across_cluster_slots,
     .init = init_cluster, .fini = px_cluster_fini, .timeout = 120)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    char a[32], b[32], cc[32];

    /* Identities whose global:<id> slot is on another master than
     * {global}, so a check spans two nodes. */
    px_ident_off("global:", "a", "global", a, sizeof(a));
    px_ident_off("global:", "b", NULL, b, sizeof(b));
    px_ident_off("global:", "c", "global", cc, sizeof(cc));
    documented_keys(c, a);
    design_tree(c, "alex", "bob");
    aggregate_admitted(c, "carol");
    cost_peek_reset(c, "fay");
    global_level(c, a, b, cc);
    resolution(c);
    error_texts(c);
    redisFree(c);
}

Test(it_limiter_tree, refused_check_reports_the_state_it_left_in_cluster_mode,
     .init = init_cluster, .fini = px_cluster_fini, .timeout = 120)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    char g[32];

    px_ident_off("global:", "g", "global", g, sizeof(g));
    refused_reports_state(c, "dave", "erin");
    refused_reports_state_global(c, g);
    redisFree(c);
}
