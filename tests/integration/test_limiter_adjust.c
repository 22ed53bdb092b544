/* LIMITER ADJUST <path> <delta> [MS] [HEADERS] through the real binary, in
 * its three modes (embedded, single Redis, cluster of 3 masters):
 *
 * - a positive ADJUST puts an identity in debt (never refused), so the
 *   next CHECK is refused and takes nothing; a negative one gives back,
 *   never beyond a fresh state; the reply is what PEEK (COST 1) answers
 *   right after; for gcra, fixed_window, sliding_counter, sliding_window
 *   and sliding_log;
 * - every level of the path moves, on one slot and across slots (a shared
 *   level in its own hash tag, another identity sees it);
 * - one script call is all or nothing: a WRONGTYPE level leaves the
 *   levels decided before it unwritten; across slots, the group that
 *   applied is undone;
 * - INFO limiter_adjusts counts the calls;
 * - bad input (no delta, not an integer, beyond 2^53 - 1, extra words, MS
 *   twice, an unknown path): Redis-style errors, nothing written, another
 *   client's pipelined CHECKs keep their exact replies;
 * - MS and HEADERS give PEEK's forms;
 * - the refusal cache: a CHECK pipelined right after an ADJUST that gave
 *   back is not refused from the cache.
 *
 * Rates are slow (a day's window, a token per 1000 s), so counts never
 * move while a test runs; durations are not compared. */
#include "tests/support/px_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/integration/cluster_fixture.h"
#include "tests/integration/fixture.h"
#include "tests/integration/limiter_support.h"
#include "tests/integration/lstate.h"

PX_TEST_SUITE(it_adjust);

/* Each identity node has a limit of 5: gcra (burst 4), a fixed window, a
 * sliding counter, a sliding window (of hours) and a sliding log of a day;
 * team:* has a shared level of 10 (its own hash tag, so another slot in the
 * cluster) over each member's 5. */
static const char adjust_yaml[] =
    "gc:\n"
    "  children:\n"
    "    \"*\":\n"
    "      limits: [4, 1, 1000]\n" PX_LIMITS_STAR(
        "fw", "{algorithm: fixed_window, max: 5, window: 1d}")
        PX_LIMITS_STAR("sc", "{algorithm: sliding_counter, max: 5, window: "
                             "1d}")
            PX_LIMITS_STAR("sw", "{algorithm: sliding_window, max: 5, "
                                 "window: 1d, resolution: 1h}")
                PX_LIMITS_STAR(
                    "sl",
                    "{algorithm: sliding_log, max: 5, "
                    "window: 1d}") "team:\n"
                                   "  limits:\n"
                                   "    - {algorithm: fixed_window, max: 10, "
                                   "window: 1d}\n"
                                   "  children:\n"
                                   "    \"*\":\n"
                                   "      limits: [4, 1, 1000]\n"
                                   "acct:\n"
                                   "  children:\n"
                                   "    \"*\":\n"
                                   "      limits:\n"
                                   "        - {algorithm: fixed_window, "
                                   "max: 10, window: 1d}\n"
                                   "      children:\n"
                                   "        trade:\n"
                                   "          limits: [4, 1, 1000]\n";

#define E_NOT_INT "ERR value is not an integer or out of range"
#define E_SYNTAX  "ERR syntax error"
#define E_ARGS    "ERR wrong number of arguments for 'limiter|adjust' command"

static void init_embedded(void)
{
    px_limits_start(PX_MODE_EMBEDDED, adjust_yaml, NULL);
}

static void init_single(void)
{
    px_limits_start(PX_MODE_SINGLE, adjust_yaml, NULL);
}

static void init_cluster(void)
{
    px_limits_start(PX_MODE_CLUSTER, adjust_yaml, NULL);
}

/* Asserts limited, limit and remaining of a five-integer reply. */
static void expect3(redisReply *r, const char *what, long long limited,
                    long long limit, long long remaining)
{
    struct px_five f = px_take_five(r, what);

    cr_assert(f.limited == limited && f.limit == limit &&
                  f.remaining == remaining,
              "%s: [%lld, %lld, %lld, ..], want [%lld, %lld, %lld, ..]", what,
              f.limited, f.limit, f.remaining, limited, limit, remaining);
}

/* The debt and give-back walk on <base>:<id> (a limit of 5). */
static void debt_and_back(redisContext *c, const char *base, const char *id)
{
    char path[64], what[128];

    snprintf(path, sizeof(path), "%s:%s", base, id);
    snprintf(what, sizeof(what), "%s", path);
    expect3(px_cmd(c, "LIMITER CHECK %s COST 2", path), what, 0, 5, 3);
    /* 2 + 4 = 6 > 5: charged anyway; the reply is PEEK's after it. */
    expect3(px_cmd(c, "LIMITER ADJUST %s 4", path), what, 1, 5, 0);
    expect3(px_cmd(c, "LIMITER CHECK %s", path), what, 1, 5, 0);
    /* The refused CHECK took nothing: giving back 3 leaves 3 used, and a
     * peek of cost 1 leaves 1. */
    expect3(px_cmd(c, "LIMITER ADJUST %s -3", path), what, 0, 5, 1);
    expect3(px_cmd(c, "LIMITER PEEK %s COST 2", path), what, 0, 5, 0);
    expect3(px_cmd(c, "LIMITER PEEK %s COST 3", path), what, 1, 5, 2);
    /* delta 0 writes nothing and shows the state. */
    expect3(px_cmd(c, "LIMITER ADJUST %s 0", path), what, 0, 5, 1);
    /* Never beyond fresh. */
    expect3(px_cmd(c, "LIMITER ADJUST %s -1000", path), what, 0, 5, 4);
    expect3(px_cmd(c, "LIMITER CHECK %s COST 5", path), what, 0, 5, 0);
    expect3(px_cmd(c, "LIMITER CHECK %s", path), what, 1, 5, 0);
}

static void every_algorithm(void)
{
    redisContext *c = px_connect(px_env()->proxy.port);

    debt_and_back(c, "gc", "alex");
    debt_and_back(c, "fw", "alex");
    debt_and_back(c, "sc", "alex");
    debt_and_back(c, "sw", "alex");
    /* A sliding log holds at most max entries: 2 + 4 is 5 entries, and
     * the refused check logs its attempt (still 5); 3 back leave 2, and a
     * peek of 1 leaves 2. */
    expect3(px_cmd(c, "LIMITER CHECK sl:alex COST 2"), "sl", 0, 5, 3);
    expect3(px_cmd(c, "LIMITER ADJUST sl:alex 4"), "sl", 1, 5, 0);
    expect3(px_cmd(c, "LIMITER CHECK sl:alex"), "sl", 1, 5, 0);
    expect3(px_cmd(c, "LIMITER ADJUST sl:alex -3"), "sl", 0, 5, 2);
    expect3(px_cmd(c, "LIMITER ADJUST sl:alex -1000"), "sl", 0, 5, 4);
    expect3(px_cmd(c, "LIMITER ADJUST sl:alex 0"), "sl", 0, 5, 4);
    redisFree(c);
}

/* Every level of a path moves: the shared team level (its own slot in
 * the cluster) is what another member sees. */
static void every_level(void)
{
    redisContext *c = px_connect(px_env()->proxy.port);

    expect3(px_cmd(c, "LIMITER ADJUST team:bob 7"), "team:bob", 1, 5, 0);
    /* team has 3 left: carol's PEEK of 3 fits, of 4 not. */
    expect3(px_cmd(c, "LIMITER PEEK team:carol COST 3"), "carol", 0, 10, 0);
    expect3(px_cmd(c, "LIMITER PEEK team:carol COST 4"), "carol", 1, 10, 3);
    expect3(px_cmd(c, "LIMITER ADJUST team:bob -7"), "team:bob", 0, 5, 4);
    expect3(px_cmd(c, "LIMITER PEEK team:carol COST 5"), "carol", 0, 5, 0);
    redisFree(c);
}

/* A group that fails after another applied its change: the error is the
 * reply, and the applied group takes its delta back (best effort, sent
 * before the reply). team's level is a string (WRONGTYPE); dan's gcra
 * level, in another slot, applied 3 and gives them back. */
static void failed_group_undoes_the_others(void)
{
    static const char team_key[] = "cellgate:{team}#0:fixed_window";
    redisContext *c = px_connect(px_env()->proxy.port);
    redisContext *d = px_direct_for(team_key, sizeof(team_key) - 1);
    redisReply *r;
    int i;

    px_check_status(lstate_cmd(d, "SET %s x", team_key), "OK");
    r = px_cmd(c, "LIMITER ADJUST team:dan 3");
    cr_assert_eq(r->type, REDIS_REPLY_ERROR);
    cr_assert(strncmp(r->str, "WRONGTYPE", 9) == 0, "%s", r->str);
    freeReplyObject(r);
    px_check_int(lstate_cmd(d, "DEL %s", team_key), 1);
    for (i = 0; i < 2000; i++) {
        struct px_five f =
            px_take_five(px_cmd(c, "LIMITER PEEK team:dan"), "PEEK team:dan");
        if (f.remaining == 4) {
            break;
        }
        cr_assert_eq(f.remaining, 1, "neither applied nor undone");
        px_sleep_ms(1);
    }
    cr_assert_lt(i, 2000, "dan's level kept the delta");
    redisFree(d);
    redisFree(c);
}

/* The keys of the limiter on every master (none in embedded mode). */
static long long store_keys(void)
{
    struct px_cluster *cl = px_cluster();
    int masters = px_mode_now() == PX_MODE_CLUSTER ? cl->nmasters : 1;
    long long n = 0;

    if (px_mode_now() == PX_MODE_EMBEDDED) {
        return 0;
    }
    for (int m = 0; m < masters; m++) {
        redisContext *d = px_mode_now() == PX_MODE_CLUSTER
                              ? px_cluster_connect(cl, m)
                              : px_redis_connect(&px_env()->redis, NULL);
        redisReply *keys = px_cmd(d, "KEYS cellgate:*");

        cr_assert_eq(keys->type, REDIS_REPLY_ARRAY);
        n += (long long)keys->elements;
        freeReplyObject(keys);
        redisFree(d);
    }
    return n;
}

/* `line` split at spaces: its reply (the test's commands have no
 * argument with a space). */
static void append_line(redisContext *c, const char *line)
{
    char buf[128], *save = NULL, *w;
    const char *argv[8];
    int argc = 0;

    snprintf(buf, sizeof(buf), "%s", line);
    for (w = strtok_r(buf, " ", &save); w != NULL && argc < 8;
         w = strtok_r(NULL, " ", &save)) {
        argv[argc++] = w;
    }
    cr_assert_eq(redisAppendCommandArgv(c, argc, argv, NULL), REDIS_OK);
}

static redisReply *cmd_line(redisContext *c, const char *line)
{
    append_line(c, line);
    return px_next(c);
}

/* Each bad ADJUST gets its error, pipelined between another client's
 * CHECKs of one path (5 fit, then refused), which keep their replies;
 * nothing is written. */
static void bad_input(void)
{
    static const struct {
        const char *cmd;
        const char *err;
    } bad[] = {
        { "LIMITER ADJUST fw:bad", E_ARGS },
        { "LIMITER ADJUST fw:bad abc", E_NOT_INT },
        { "LIMITER ADJUST fw:bad 1.5", E_NOT_INT },
        { "LIMITER ADJUST fw:bad 9007199254740992", E_NOT_INT },
        { "LIMITER ADJUST fw:bad -9007199254740992", E_NOT_INT },
        { "LIMITER ADJUST fw:bad 99999999999999999999", E_NOT_INT },
        { "LIMITER ADJUST fw:bad 1 FOO", E_SYNTAX },
        { "LIMITER ADJUST fw:bad 1 COST 2", E_SYNTAX },
        { "LIMITER ADJUST fw:bad 1 MS MS",
          "ERR syntax error: MS given more than once" },
        { "LIMITER ADJUST nosuch:x 1", "ERR no limits for path 'nosuch:x'" },
    };
    size_t nbad = sizeof(bad) / sizeof(bad[0]);
    redisContext *c = px_connect(px_env()->proxy.port);
    redisContext *other = px_connect(px_env()->proxy.port);
    long long before = store_keys();
    char what[64];

    for (size_t k = 0; k < nbad; k++) {
        px_check_error(cmd_line(c, bad[k].cmd), bad[k].err);
    }
    cr_assert_eq(store_keys(), before, "a bad ADJUST wrote");
    expect3(px_cmd(c, "LIMITER PEEK fw:bad"), "fw:bad", 0, 5, 4);
    /* Pipelined with another client's CHECKs. */
    for (size_t k = 0; k < nbad; k++) {
        append_line(c, bad[k].cmd);
        cr_assert_eq(redisAppendCommand(other, "LIMITER CHECK fw:good"),
                     REDIS_OK);
    }
    px_flush(c);
    px_flush(other);
    for (size_t k = 0; k < nbad; k++) {
        px_check_error(px_next(c), bad[k].err);
        snprintf(what, sizeof(what), "other client's CHECK %zu", k + 1);
        if (k < 5) {
            expect3(px_next(other), what, 0, 5, 4 - (long long)k);
        } else {
            expect3(px_next(other), what, 1, 5, 0);
        }
    }
    expect3(px_cmd(c, "LIMITER PEEK fw:bad"), "fw:bad", 0, 5, 4);
    redisFree(other);
    redisFree(c);
}

/* MS and HEADERS: PEEK's forms of the same state. */
static void ms_and_headers(void)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    long long adjusts = px_info_int(c, "limiter_adjusts");
    redisReply *a, *p;

    a = px_cmd(c, "LIMITER ADJUST gc:ms 2 HEADERS MS");
    p = px_cmd(c, "LIMITER PEEK gc:ms MS HEADERS");
    cr_assert(a->type == REDIS_REPLY_ARRAY && p->type == REDIS_REPLY_ARRAY);
    cr_assert_eq(a->elements, p->elements);
    cr_assert_gt(a->elements, 5, "no header pairs");
    for (size_t i = 0; i < 3; i++) {
        cr_assert_eq(a->element[i]->integer, p->element[i]->integer,
                     "element %zu", i);
    }
    cr_assert_eq(a->element[2]->integer, 2, "remaining after 2 and a peek");
    cr_assert_eq(px_info_int(c, "limiter_adjusts"), adjusts + 1,
                 "INFO limiter_adjusts");
    freeReplyObject(a);
    freeReplyObject(p);
    redisFree(c);
}

/* A refused identity, its refusal cached; an ADJUST giving back, then a
 * CHECK in the same pipeline: admitted (the cache forgot the keys when
 * the ADJUST left). */
static void not_refused_from_the_cache(void)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    long long hits;
    int i;

    expect3(px_cmd(c, "LIMITER CHECK gc:rf COST 5"), "gc:rf", 0, 5, 0);
    /* Until the cache answers (its tracker connects in the background). */
    hits = px_info_int(c, "limiter_refusal_cache_hits");
    for (i = 0; i < 2000; i++) {
        expect3(px_cmd(c, "LIMITER CHECK gc:rf"), "refused", 1, 5, 0);
        if (px_info_int(c, "limiter_refusal_cache_hits") != hits) {
            break;
        }
        px_sleep_ms(1);
    }
    cr_assert_lt(i, 2000, "the refusal was never cached");
    cr_assert_eq(redisAppendCommand(c, "LIMITER ADJUST gc:rf -2"), REDIS_OK);
    cr_assert_eq(redisAppendCommand(c, "LIMITER CHECK gc:rf"), REDIS_OK);
    px_flush(c);
    expect3(px_next(c), "ADJUST -2", 0, 5, 1);
    expect3(px_next(c), "CHECK after it", 0, 5, 1);
    /* A charge keeps a refusal right: refused, cached or not. */
    expect3(px_cmd(c, "LIMITER ADJUST gc:rf 3"), "ADJUST 3", 1, 5, 0);
    expect3(px_cmd(c, "LIMITER CHECK gc:rf"), "refused", 1, 5, 0);
    redisFree(c);
}

/* All or nothing in one script call: acct:zed and acct:zed:trade share a
 * hash tag, one slot; the acct level (a fixed window) keeps its own key,
 * the trade level (gcra) is a record of the identity's state string. The
 * trade record made to hold a hash state (WRONGTYPE for gcra) fails the
 * ADJUST, and the acct level, decided first, is not written: its key's
 * bytes (DUMP) are the same before and after. */
static void one_call_all_or_nothing(void)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    redisContext *d = px_redis_connect(&px_env()->redis, NULL);
    redisReply *r, *before, *after;
    char fw[128] = "", gc[128] = "", names[16][128];
    int n, found = 0;

    expect3(px_cmd(c, "LIMITER CHECK acct:zed:trade COST 2"), "acct:zed", 0, 5,
            3);
    n = lstate_keys(d, names, 16);
    for (int k = 0; k < n; k++) {
        if (strstr(names[k], "{acct:zed}") == NULL) {
            continue;
        }
        found++;
        snprintf(strstr(names[k], ":gcra") != NULL ? gc : fw, sizeof(fw),
                 "%.127s", names[k]);
    }
    cr_assert_eq(found, 2, "%d states of acct:zed", found);
    cr_assert(fw[0] != '\0' && gc[0] != '\0', "keys %s, %s", fw, gc);
    px_check_int(lstate_cmd(d, "DEL %s", gc), 1);
    px_check_int(lstate_cmd(d, "HSET %s f v", gc), 1);
    before = px_cmd(d, "DUMP %s", fw);
    r = px_cmd(c, "LIMITER ADJUST acct:zed:trade 3");
    cr_assert_eq(r->type, REDIS_REPLY_ERROR);
    cr_assert(strncmp(r->str, "WRONGTYPE", 9) == 0, "%s", r->str);
    freeReplyObject(r);
    after = px_cmd(d, "DUMP %s", fw);
    cr_assert(before->type == REDIS_REPLY_STRING &&
                  after->type == REDIS_REPLY_STRING &&
                  before->len == after->len &&
                  memcmp(before->str, after->str, before->len) == 0,
              "the acct level was written");
    freeReplyObject(before);
    freeReplyObject(after);
    redisFree(d);
    redisFree(c);
}

/* ---------------- The three modes (one proxy each: starting a cluster
 * costs more than all its calls) ---------------- */

Test(it_adjust, debt_give_back_every_level_bad_input_embedded,
     .init = init_embedded, .fini = px_env_fini, .timeout = 60)
{
    every_algorithm();
    every_level();
    bad_input();
}

Test(it_adjust, debt_give_back_every_level_bad_input_forms_cache_single,
     .init = init_single, .fini = px_env_fini, .timeout = 60)
{
    every_algorithm();
    every_level();
    bad_input();
    ms_and_headers();
    not_refused_from_the_cache();
    one_call_all_or_nothing();
}

Test(it_adjust, debt_give_back_every_level_and_undo_cluster,
     .init = init_cluster, .fini = px_cluster_fini, .timeout = 120)
{
    every_algorithm();
    every_level();
    failed_group_undoes_the_others();
}
