/* The limiter's script calls batched per loop turn, through the real binary
 * against real Redis (single and a 3-master cluster): the LIMITER CHECK and
 * PEEK calls of one turn go to a node as one call of the limiter library,
 * CL.THROTTLE calls as one call of gcra; in cluster mode the calls of
 * several slots that one node serves share a call, their keys undeclared,
 * and a call whose slot the node turns out not to serve (a map the proxy
 * has not refreshed yet) is sent again by itself, where Redis redirects it.
 *
 * Every reply is checked exactly, in request order, and the keys on the
 * nodes that hold them; the number of script calls Redis ran (INFO
 * commandstats) shows the batching. Nothing asserts how fast anything is. */
#include "tests/support/px_test.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parser/slot.h"
#include "tests/integration/cluster_fixture.h"
#include "tests/integration/fixture.h"
#include "tests/integration/limiter_support.h"
#include "tests/integration/lstate.h"

PX_TEST_SUITE(it_limiter_batch);

#define KEY_MAX     160   /* room for every key and path the tests build */
#define IDS         30    /* identities checked once each in one pipeline */
#define SAME        6     /* checks of one identity in the same pipeline */
#define FW          4     /* checks of the fixed-window identity */
#define OTHER       10    /* checks of the client beside it */
#define SPREAD_KEYS 60    /* CL.THROTTLE keys of many slots */
#define LONG_KEYS   100   /* keys of the long pipeline, each round */
#define LONG_ROUNDS 6     /* its rounds: 600 calls */
#define ID_TRIES    10000 /* bound of the search for an identity on a node */
#define LOAD_WAIT   200   /* probes of FUNCTION LIST, 50 ms apart */

/* user:<id>: gcra, 3 in a minute (max_burst 2, 1 per 60 s), and below
 * it user:<id>:trade, 5 in a minute; fw:<id>: fixed window, 2 a
 * minute. */
static const char tree_yaml[] = "user:\n"
                                "  children:\n"
                                "    \"*\":\n"
                                "      limits: [2, 1, 60]\n"
                                "      children:\n"
                                "        trade:\n"
                                "          limits: [4, 1, 60]\n"
                                "fw:\n"
                                "  children:\n"
                                "    \"*\":\n"
                                "      limits:\n"
                                "        - algorithm: fixed_window\n"
                                "          max: 2\n"
                                "          window: 60s\n";

static void init_single(void)
{
    px_limits_start(PX_MODE_SINGLE, tree_yaml, NULL);
}

static void init_cluster(void)
{
    px_limits_start(PX_MODE_CLUSTER, tree_yaml, NULL);
}

/* ---------------- What Redis ran ---------------- */

/* Script calls (FCALL, EVALSHA, EVAL) node `d` has run. */
static long long script_calls(redisContext *d)
{
    return px_cmdstat_calls(d, "fcall") + px_cmdstat_calls(d, "evalsha") +
           px_cmdstat_calls(d, "eval");
}

/* Script calls of every node of the running mode. */
static long long all_script_calls(void)
{
    long long total = 0;

    if (px_mode_now() == PX_MODE_SINGLE) {
        redisContext *d = px_redis_connect(&px_env()->redis, NULL);
        total = script_calls(d);
        redisFree(d);
        return total;
    }
    for (int m = 0; m < px_cluster()->nmasters; m++) {
        redisContext *d = px_cluster_connect(px_cluster(), m);
        total += script_calls(d);
        redisFree(d);
    }
    return total;
}

/* Asserts that `key` exists on the node that serves its tag `tag` (Redis
 * answers MOVED for it anywhere else). */
static void check_only_on_owner(const char *tag, const char *key)
{
    redisContext *d = px_direct_for(tag, strlen(tag));

    px_check_int(lstate_cmd(d, "EXISTS %s", key), 1);
    redisFree(d);
}

/* ---------------- LIMITER CHECK and PEEK in one pipeline ---------------- */

/* IDS fresh identities, SAME checks of one, FW of a fixed window, a PEEK
 * and a check on a key of the wrong type, all in one pipeline: every reply
 * exact and in order, the wrong type failing alone, far fewer script
 * calls than checks. */
static void checks_share_calls(void)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    redisContext *o = px_connect(px_env()->proxy.port);
    redisContext *d = px_direct_for("user:bad", 8);
    long long before, used;
    int i, sent = 0;

    px_check_int(lstate_cmd(d, "HSET cellgate:{user:bad}#0:gcra f v"), 1);
    redisFree(d);
    before = all_script_calls();
    for (i = 0; i < IDS; i++) {
        redisAppendCommand(c, "LIMITER CHECK user:b%d", i);
        sent++;
        if (i == IDS / 2) {
            redisAppendCommand(c, "LIMITER CHECK user:bad");
            sent++;
        }
    }
    for (i = 0; i < SAME; i++) {
        redisAppendCommand(c, "LIMITER CHECK user:same");
        redisAppendCommand(c, "LIMITER PEEK user:same");
        sent += 2;
    }
    for (i = 0; i < FW; i++) {
        redisAppendCommand(c, "LIMITER CHECK fw:x");
        sent++;
    }
    /* Another client beside it, in the same turns: its own checks, and
     * bad input on the identity the first one counts down. */
    for (i = 0; i < OTHER; i++) {
        redisAppendCommand(o, "LIMITER CHECK user:o%d", i);
        redisAppendCommand(o, "LIMITER CHECK user:same COST -1");
        redisAppendCommand(o, "LIMITER CHECK user::same");
        sent++;
    }
    px_flush(c);
    px_flush(o);
    for (i = 0; i < OTHER; i++) {
        char what[32];
        snprintf(what, sizeof(what), "user:o%d", i);
        px_check_five(px_next(o), what, 0, 3, 2, -1, 60);
        px_check_error_prefix(px_next(o), "ERR ");
        px_check_error_prefix(px_next(o), "ERR ");
    }
    for (i = 0; i < IDS; i++) {
        char what[32];
        snprintf(what, sizeof(what), "user:b%d", i);
        px_check_five(px_next(c), what, 0, 3, 2, -1, 60);
        if (i == IDS / 2) {
            px_check_error(px_next(c), "WRONGTYPE Operation against a key "
                                       "holding the wrong kind of value");
        }
    }
    for (i = 0; i < SAME; i++) {
        struct px_five f = px_take_five(px_next(c), "CHECK user:same");
        struct px_five p = px_take_five(px_next(c), "PEEK user:same");
        /* 3 admitted (2, 1, 0 left), then refused; the PEEK after each
         * says what the next check will: refused from the third on. */
        cr_assert_eq(f.limited, i < 3 ? 0 : 1, "check %d", i);
        cr_assert_eq(f.remaining, i < 3 ? 2 - i : 0, "check %d", i);
        cr_assert_eq(p.limited, i < 2 ? 0 : 1, "peek %d", i);
        cr_assert_eq(p.remaining, i < 2 ? 1 - i : 0, "peek %d", i);
    }
    for (i = 0; i < FW; i++) {
        struct px_five f = px_take_five(px_next(c), "CHECK fw:x");
        cr_assert_eq(f.limited, i < 2 ? 0 : 1, "fw check %d", i);
        cr_assert_eq(f.limit, 2);
        cr_assert_eq(f.remaining, i < 2 ? 1 - i : 0, "fw check %d", i);
    }
    used = all_script_calls() - before;
    cr_assert_gt(used, 0);
    cr_assert_lt(used, sent / 2, "%lld script calls for %d LIMITER calls", used,
                 sent);
    for (i = 0; i < IDS; i += 7) {
        char tag[KEY_MAX], key[KEY_MAX + 32];
        snprintf(tag, sizeof(tag), "user:b%d", i);
        snprintf(key, sizeof(key), "cellgate:{%s}#0:gcra", tag);
        check_only_on_owner(tag, key);
    }
    check_only_on_owner("fw:x", "cellgate:{fw:x}#0:fixed_window");
    redisFree(o);
    redisFree(c);
}

Test(it_limiter_batch, limiter_calls_of_one_turn_share_a_call_single,
     .init = init_single, .fini = px_env_fini, .timeout = 60)
{
    checks_share_calls();
}

Test(it_limiter_batch, limiter_calls_of_many_slots_share_a_call_cluster,
     .init = init_cluster, .fini = px_cluster_fini, .timeout = 120)
{
    checks_share_calls();
}

/* ---------------- Overrides another proxy set ---------------- */

#define OV_IDS 24 /* identities of the pipeline, a quarter of each kind */

/* Run-time overrides this proxy has never seen (written to Redis as
 * another proxy's LIMITER OVERRIDE SET writes them), in one pipeline of
 * two-level checks beside identities without any: each batch sees them at
 * its first check, at either level, while an override hash that holds
 * only another path's field changes nothing. The proxy names a group's
 * override fields by its keys when it assumes none, so this is the
 * script finding each level's path in the keys, in batches with and
 * without override hashes, on one node or spread over three. */
/* The identity of check i: every other one ending like the index of a
 * limit key's tail ("#<i>:<algorithm>": cellgate:{user:ov1#0}#0:gcra),
 * which the script must not take for the key's own when it reads the
 * path back. */
static void ov_id(char *out, size_t outlen, int i)
{
    snprintf(out, outlen, i % 2 ? "user:ov%d#0" : "user:ov%d", i);
}

static void unseen_overrides_apply_at_once(void)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    char id[KEY_MAX], hash[KEY_MAX + 32], what[KEY_MAX + 32];
    int i, k;

    for (i = 0; i < OV_IDS; i++) {
        redisContext *d;
        ov_id(id, sizeof(id), i);
        snprintf(hash, sizeof(hash), "cellgate:{%s}#overrides", id);
        d = px_direct_for(id, strlen(id));
        /* Kind 0: no hash; 1: a factor on the top level (3 / 3 = 1);
         * 2: one on the trade level (5 / 5 = 1); 3: a field of a path
         * this check does not take. */
        if (i % 4 == 1) {
            px_check_int(px_cmd(d, "HSET %s %s %s", hash, id, "FACTOR 3"), 1);
        } else if (i % 4 == 2) {
            px_check_int(px_cmd(d, "HSET %s %s:trade %s", hash, id, "FACTOR 5"),
                         1);
        } else if (i % 4 == 3) {
            px_check_int(px_cmd(d, "HSET %s %s:other %s", hash, id, "FACTOR 3"),
                         1);
        }
        redisFree(d);
    }
    for (k = 0; k < 2; k++) {
        for (i = 0; i < OV_IDS; i++) {
            ov_id(id, sizeof(id), i);
            redisAppendCommand(c, "LIMITER CHECK %s:trade", id);
        }
    }
    for (k = 0; k < 2; k++) {
        for (i = 0; i < OV_IDS; i++) {
            ov_id(id, sizeof(id), i);
            snprintf(what, sizeof(what), "%s:trade, check %d", id, k);
            if (i % 4 == 1 || i % 4 == 2) {
                /* A limit of 1, one every 3 or 5 minutes (a factor
                 * multiplies the spacing): the first admitted, the second
                 * refused. */
                int t = i % 4 == 1 ? 180 : 300;
                px_check_five(px_next(c), what, k, 1, 0, k == 0 ? -1 : t, t);
            } else {
                px_check_five(px_next(c), what, 0, 3, 2 - k, -1, 60 * (k + 1));
            }
        }
    }
    redisFree(c);
}

Test(it_limiter_batch, overrides_no_proxy_knew_apply_at_once_single,
     .init = init_single, .fini = px_env_fini, .timeout = 60)
{
    unseen_overrides_apply_at_once();
}

Test(it_limiter_batch, overrides_no_proxy_knew_apply_at_once_cluster,
     .init = init_cluster, .fini = px_cluster_fini, .timeout = 120)
{
    unseen_overrides_apply_at_once();
}

/* ---------------- CL.THROTTLE across slots ---------------- */

Test(it_limiter_batch, cl_throttle_keys_of_many_slots_share_a_call_per_node,
     .init = init_cluster, .fini = px_cluster_fini, .timeout = 120)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    long long before = all_script_calls(), used;
    char key[KEY_MAX];
    int i, round;

    /* Three rounds of every key: 2 admitted (1, then 0 left), then
     * refused. */
    for (round = 0; round < 3; round++) {
        for (i = 0; i < SPREAD_KEYS; i++) {
            redisAppendCommand(c, "CL.THROTTLE spread:%d 1 1 60", i);
        }
    }
    for (round = 0; round < 3; round++) {
        for (i = 0; i < SPREAD_KEYS; i++) {
            snprintf(key, sizeof(key), "spread:%d round %d", i, round);
            px_check_five(px_next(c), key, round < 2 ? 0 : 1, 2,
                          round < 2 ? 1 - round : 0, round < 2 ? -1 : 60,
                          round < 2 ? 60 * (round + 1) : 120);
        }
    }
    used = all_script_calls() - before;
    cr_assert_gt(used, 0);
    /* 180 calls of 60 slots on 3 masters: a call per node and turn, not
     * one per slot. */
    cr_assert_lt(used, SPREAD_KEYS / 2, "%lld script calls", used);
    for (i = 0; i < SPREAD_KEYS; i++) {
        snprintf(key, sizeof(key), "spread:%d", i);
        check_only_on_owner(key, key);
    }
    redisFree(c);
}

/* ---------------- More calls than a loop turn's batches ---------------- */

/* One pipeline of many calls (more than the limiter queues before it
 * sends batches without waiting for the loop turn's end), the same keys
 * in every round, beside another client: each reply exact and in order. */
Test(it_limiter_batch, a_long_pipeline_is_decided_in_order_single,
     .init = init_single, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    redisContext *o = px_connect(px_env()->proxy.port);
    char key[KEY_MAX];
    int i, round;

    for (round = 0; round < LONG_ROUNDS; round++) {
        for (i = 0; i < LONG_KEYS; i++) {
            redisAppendCommand(c, "CL.THROTTLE long:%d 1 1 60", i);
        }
        redisAppendCommand(o, "CL.THROTTLE other 1 1 60");
    }
    px_flush(c);
    px_flush(o);
    for (round = 0; round < LONG_ROUNDS; round++) {
        /* 2 admitted (1, then 0 left), then refused. */
        for (i = 0; i < LONG_KEYS; i++) {
            snprintf(key, sizeof(key), "long:%d round %d", i, round);
            px_check_five(px_next(c), key, round < 2 ? 0 : 1, 2,
                          round < 2 ? 1 - round : 0, round < 2 ? -1 : 60,
                          round < 2 ? 60 * (round + 1) : 120);
        }
    }
    for (round = 0; round < LONG_ROUNDS; round++) {
        snprintf(key, sizeof(key), "other round %d", round);
        px_check_five(px_next(o), key, round < 2 ? 0 : 1, 2,
                      round < 2 ? 1 - round : 0, round < 2 ? -1 : 60,
                      round < 2 ? 60 * (round + 1) : 120);
    }
    redisFree(o);
    redisFree(c);
}

/* ---------------- A map the proxy has not refreshed ---------------- */

/* Writes to out "<base><n>" for the first n whose tag "<prefix><base><n>"
 * master `m` serves, other than slot `avoid` (-1: none). */
static void id_on(int m, const char *prefix, const char *base, int avoid,
                  char *out, size_t outlen)
{
    char tag[KEY_MAX];

    for (int i = 0; i < ID_TRIES; i++) {
        snprintf(out, outlen, "%s%d", base, i);
        snprintf(tag, sizeof(tag), "%s%s", prefix, out);
        if (px_cluster_master_of_key(px_cluster(), tag, strlen(tag)) == m &&
            (int)slot_for_key(tag, strlen(tag)) != avoid) {
            return;
        }
    }
    cr_assert_fail("no %s%s<n> on master %d", prefix, base, m);
}

Test(it_limiter_batch, a_call_whose_slot_moved_is_sent_again_alone,
     .init = init_cluster, .fini = px_cluster_fini, .timeout = 120)
{
    struct px_cluster *cl = px_cluster();
    redisContext *c = px_connect(px_env()->proxy.port);
    char moved[KEY_MAX], others[4][KEY_MAX], tag[KEY_MAX + 8];
    char key[KEY_MAX + 48];
    unsigned slot;
    int from, to, i;

    /* An identity whose slot moves from its master to the next one behind
     * the proxy's back, and identities staying on the old master: their
     * calls share a batch to the old master, which no longer serves the
     * moved one. */
    snprintf(moved, sizeof(moved), "mv");
    slot = slot_for_key("user:mv", 7);
    from = px_cluster_master_of_slot(cl, slot);
    to = (from + 1) % cl->nmasters;
    for (i = 0; i < 4; i++) {
        char base[8];
        snprintf(base, sizeof(base), "s%d_", i);
        id_on(from, "user:", base, (int)slot, others[i], sizeof(others[i]));
    }
    px_cluster_migrate_slot(cl, slot, to);

    for (i = 0; i < 4; i++) {
        redisAppendCommand(c, "LIMITER CHECK user:%s", others[i]);
        redisAppendCommand(c, "CL.THROTTLE {user:%s}ct 1 1 60", others[i]);
        if (i == 1) {
            redisAppendCommand(c, "LIMITER CHECK user:%s", moved);
            redisAppendCommand(c, "CL.THROTTLE {user:%s}ct 1 1 60", moved);
        }
    }
    for (i = 0; i < 4; i++) {
        px_check_five(px_next(c), others[i], 0, 3, 2, -1, 60);
        px_check_five(px_next(c), others[i], 0, 2, 1, -1, 60);
        if (i == 1) {
            px_check_five(px_next(c), "moved identity", 0, 3, 2, -1, 60);
            px_check_five(px_next(c), "moved key", 0, 2, 1, -1, 60);
        }
    }
    /* The moved identity's keys live on the new owner, none on the old. */
    {
        redisContext *d = px_cluster_connect(cl, to);
        px_check_int(
            lstate_cmd(d, "EXISTS cellgate:{user:mv}#0:gcra {user:mv}ct"), 2);
        redisFree(d);
        d = px_cluster_connect(cl, from);
        px_check_int(px_cmd(d, "CLUSTER COUNTKEYSINSLOT %u", slot), 0);
        redisFree(d);
    }
    for (i = 0; i < 4; i++) {
        snprintf(tag, sizeof(tag), "user:%.*s", KEY_MAX - 1, others[i]);
        snprintf(key, sizeof(key), "cellgate:{%s}#0:gcra", tag);
        check_only_on_owner(tag, key);
    }
    /* And the next calls go straight on from the state written there. */
    px_check_five(px_cmd(c, "LIMITER CHECK user:mv"), "moved again", 0, 3, 1,
                  -1, 120);
    redisFree(c);
}

/* ---------------- The library called with undeclared keys ---------------- */

/* The name of the cellgate library master `d` holds, once the proxy has
 * loaded it (the caller frees it). */
static char *library_name(redisContext *d)
{
    redisReply *r = NULL;
    char *name;

    for (int i = 0; i < LOAD_WAIT; i++) {
        r = px_cmd(d, "FUNCTION LIST LIBRARYNAME cellgate_*");
        cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
        if (r->elements > 0) {
            break;
        }
        freeReplyObject(r);
        r = NULL;
        px_sleep_ms(50);
    }
    cr_assert_not_null(r, "the proxy never loaded its library");
    cr_assert_eq(r->elements, 1, "cellgate libraries: %zu", r->elements);
    name = strdup(r->element[0]->element[1]->str);
    freeReplyObject(r);
    return name;
}

Test(it_limiter_batch, undeclared_keys_of_another_node_are_left_untouched,
     .init = init_cluster, .fini = px_cluster_fini, .timeout = 120)
{
    struct px_cluster *cl = px_cluster();
    char a1[KEY_MAX], a2[KEY_MAX], b[KEY_MAX], fn[KEY_MAX + 16];
    int ma = 0, mb = 1;
    redisContext *da, *db;
    char *lib;
    redisReply *r;

    /* Two keys of master a (two slots), one of master b. */
    id_on(ma, "", "ua", -1, a1, sizeof(a1));
    id_on(ma, "", "va", (int)slot_for_key(a1, strlen(a1)), a2, sizeof(a2));
    id_on(mb, "", "ub", -1, b, sizeof(b));
    da = px_cluster_connect(cl, ma);
    db = px_cluster_connect(cl, mb);
    lib = library_name(da);

    /* gcra "runs": 1 per 60 s, burst 1 (INC 60 s, DVT 120 s). */
    snprintf(fn, sizeof(fn), "%s_gcra", lib);
    r = px_cmd(da, "FCALL %s 0 runs 1 3 60 0 120 0 %s %s %s", fn, a1, b, a2);
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    /* 3 TATs (b's error code in its place), 1 word of refusal bits. */
    cr_assert_eq(r->elements, 7);
    cr_assert_eq(r->element[3]->type, REDIS_REPLY_NIL, "a1 new");
    cr_assert_eq(r->element[4]->type, REDIS_REPLY_INTEGER);
    cr_assert_eq(r->element[4]->integer, -3, "b is not master a's");
    cr_assert_eq(r->element[5]->type, REDIS_REPLY_NIL, "a2 new");
    cr_assert_eq(r->element[6]->integer, 0, "a1 and a2 admitted");
    freeReplyObject(r);
    px_check_int(px_cmd(da, "EXISTS %s", a1), 1);
    px_check_int(px_cmd(da, "EXISTS %s", a2), 1);
    px_check_int(lstate_cmd(db, "EXISTS %s", b), 0);

    /* limiter "each": a fixed window group of each key, the override hash
     * after it; the group of b fails alone with the node's error. */
    {
        const char *argv[64];
        size_t lens[64];
        int n = 0;
        char k[3][2][KEY_MAX];
        const char *ids[3] = { a1, b, a2 };
        snprintf(fn, sizeof(fn), "%s_limiter", lib);
        argv[n++] = "FCALL";
        argv[n++] = fn;
        argv[n++] = "0";
        argv[n++] = "each";
        argv[n++] = "";
        argv[n++] = "3";
        for (int g = 0; g < 3; g++) {
            static const char *const group[] = {
                "check", "1", "1", "fixed_window", "5", "60000", "", "", "", "0"
            };
            for (size_t j = 0; j < sizeof(group) / sizeof(*group); j++) {
                argv[n++] = group[j];
            }
        }
        for (int g = 0; g < 3; g++) {
            snprintf(k[g][0], KEY_MAX, "{%s}fw", ids[g]);
            snprintf(k[g][1], KEY_MAX, "{%s}o", ids[g]);
            argv[n++] = k[g][0];
            argv[n++] = k[g][1];
        }
        for (int j = 0; j < n; j++) {
            lens[j] = strlen(argv[j]);
        }
        r = redisCommandArgv(da, n, argv, lens);
        cr_assert_not_null(r);
        cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "type %d: %s", r->type,
                     r->type == REDIS_REPLY_ERROR ? r->str : "");
        cr_assert_eq(r->elements, 6);
        cr_assert_eq(r->element[3]->type, REDIS_REPLY_ARRAY);
        cr_assert_eq(r->element[4]->type, REDIS_REPLY_ERROR);
        cr_assert(strstr(r->element[4]->str, "non local key") != NULL, "%s",
                  r->element[4]->str);
        cr_assert_eq(r->element[5]->type, REDIS_REPLY_ARRAY);
        freeReplyObject(r);
        px_check_int(px_cmd(da, "EXISTS %s", k[0][0]), 1);
        px_check_int(px_cmd(da, "EXISTS %s", k[2][0]), 1);
        px_check_int(lstate_cmd(db, "EXISTS %s", k[1][0]), 0);
    }
    free(lib);
    redisFree(da);
    redisFree(db);
}
