/* Cluster mode through the proxy, against a real local cluster (3 masters,
 * 3 replicas): routing by slot, split and merged multi-key commands,
 * fan-out, SCAN, transactions, pub/sub, blocking calls, resharding (ASK then
 * MOVED) and failover. Values are always checked against direct reads from
 * the node that owns the key. */
#include "tests/support/px_test.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "parser/slot.h"
#include "tests/integration/cluster_fixture.h"
#include "tests/integration/fixture.h"

PX_TEST_SUITE(it_cluster);

/* Keys written by the tests: enough to land on every master many times. */
#define NKEYS 300

static void start(const char *yaml_extra)
{
    px_cluster_init();
    px_cluster_proxy_start(&px_env()->proxy, px_cluster(), yaml_extra);
}

static void init(void)
{
    start(NULL);
}

static void init_nosplit(void)
{
    start("split_multikey: no\n");
}

/* FLUSHALL, which the default policy refuses ordinary clients. */
static void init_flushall(void)
{
    start("commands: +flushall\n");
}

/* The value of `key` read straight from the master that owns it. */
static redisReply *direct_get(const char *key)
{
    struct px_cluster *cl = px_cluster();
    int m = px_cluster_master_of_key(cl, key, strlen(key));
    redisContext *c = px_cluster_connect(cl, m);
    redisReply *r = px_cmd(c, "GET %s", key);
    redisFree(c);
    return r;
}

Test(it_cluster, keys_on_every_master_round_trip_through_one_address,
     .init = init, .fini = px_cluster_fini, .timeout = 120)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    int used[PX_CLUSTER_MAX_NODES] = { 0 };
    char key[32], val[32];

    for (int i = 0; i < NKEYS; i++) {
        snprintf(key, sizeof(key), "key:%d", i);
        snprintf(val, sizeof(val), "v\r\n%d", i);
        px_check_status(px_cmd(c, "SET %s %s", key, val), "OK");
        used[px_cluster_master_of_key(px_cluster(), key, strlen(key))]++;
    }
    for (int m = 0; m < 3; m++) {
        cr_assert_gt(used[m], 0, "no key landed on master %d", m);
    }
    for (int i = 0; i < NKEYS; i++) {
        snprintf(key, sizeof(key), "key:%d", i);
        snprintf(val, sizeof(val), "v\r\n%d", i);
        px_check_str(px_cmd(c, "GET %s", key), val);
        px_check_str(direct_get(key), val);
    }
    /* Pipelined across nodes: replies still come back in request order. */
    for (int i = 0; i < NKEYS; i++) {
        redisAppendCommand(c, "INCR ctr:%d", i % 17);
        redisAppendCommand(c, "GET key:%d", i);
    }
    for (int i = 0; i < NKEYS; i++) {
        px_check_int(px_next(c), i / 17 + 1);
        snprintf(val, sizeof(val), "v\r\n%d", i);
        px_check_str(px_next(c), val);
    }
    redisFree(c);
}

Test(it_cluster, multi_key_commands_split_by_slot_and_merge_like_redis,
     .init = init, .fini = px_cluster_fini, .timeout = 120)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    const char *argv[1 + 2 * 40];
    size_t lens[1 + 2 * 40];
    char keys[40][16], vals[40][16];
    redisReply *r;

    argv[0] = "MSET";
    lens[0] = 4;
    for (int i = 0; i < 40; i++) {
        snprintf(keys[i], sizeof(keys[i]), "mk%d", i);
        snprintf(vals[i], sizeof(vals[i]), "val%d", i);
        argv[1 + 2 * i] = keys[i];
        lens[1 + 2 * i] = strlen(keys[i]);
        argv[2 + 2 * i] = vals[i];
        lens[2 + 2 * i] = strlen(vals[i]);
    }
    r = redisCommandArgv(c, 81, argv, lens);
    px_check_status(r, "OK");
    for (int i = 0; i < 40; i++) {
        px_check_str(direct_get(keys[i]), vals[i]);
    }
    /* MGET keeps key order, with nils for missing keys and duplicates. */
    r = px_cmd(c, "MGET mk3 nosuch mk17 mk3 mk39 other");
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    cr_assert_eq(r->elements, 6);
    cr_assert_str_eq(r->element[0]->str, "val3");
    cr_assert_eq(r->element[1]->type, REDIS_REPLY_NIL);
    cr_assert_str_eq(r->element[2]->str, "val17");
    cr_assert_str_eq(r->element[3]->str, "val3");
    cr_assert_str_eq(r->element[4]->str, "val39");
    cr_assert_eq(r->element[5]->type, REDIS_REPLY_NIL);
    freeReplyObject(r);
    px_check_int(px_cmd(c, "EXISTS mk1 mk2 mk1 nosuch mk30"), 4);
    px_check_int(px_cmd(c, "TOUCH mk1 mk2 nosuch"), 2);
    px_check_int(px_cmd(c, "DEL mk1 mk2 nosuch mk3"), 3);
    px_check_int(px_cmd(c, "UNLINK mk4 mk5"), 2);
    px_check_nil(direct_get("mk1"));
    px_check_nil(direct_get("mk4"));
    px_check_str(direct_get("mk6"), "val6");
    /* Commands that do not split get Redis's own error. */
    px_check_error(px_cmd(c, "SUNIONSTORE dst a b"),
                   "CROSSSLOT Keys in request don't hash to the same slot");
    px_check_error(px_cmd(c, "RENAME mk6 mk7"),
                   "CROSSSLOT Keys in request don't hash to the same slot");
    /* Keys sharing a hash tag work as on one node. */
    px_check_status(px_cmd(c, "MSET {t}a 1 {t}b 2"), "OK");
    px_check_int(px_cmd(c, "SUNIONSTORE {t}s {t}x {t}y"), 0);
    px_check_status(px_cmd(c, "RENAME {t}a {t}c"), "OK");
    px_check_str(px_cmd(c, "GET {t}c"), "1");
    redisFree(c);
}

Test(it_cluster, splitting_can_be_turned_off, .init = init_nosplit,
     .fini = px_cluster_fini, .timeout = 120)
{
    redisContext *c = px_connect(px_env()->proxy.port);

    px_check_error(px_cmd(c, "MGET a b c d e f"),
                   "CROSSSLOT Keys in request don't hash to the same slot");
    px_check_status(px_cmd(c, "MSET {x}a 1 {x}b 2"), "OK");
    redisReply *r = px_cmd(c, "MGET {x}a {x}b");
    cr_assert_eq(r->elements, 2);
    cr_assert_str_eq(r->element[1]->str, "2");
    freeReplyObject(r);
    redisFree(c);
}

Test(it_cluster, scripts_route_by_their_keys_and_load_on_every_master,
     .init = init, .fini = px_cluster_fini, .timeout = 120)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    const char *body = "return redis.call('INCRBY', KEYS[1], ARGV[1])";
    redisReply *r = px_cmd(c, "SCRIPT LOAD %s", body);
    char sha[64], key[32];

    cr_assert_eq(r->type, REDIS_REPLY_STRING);
    snprintf(sha, sizeof(sha), "%s", r->str);
    freeReplyObject(r);
    /* The script is now on every master: EVALSHA works for any key. */
    for (int i = 0; i < 30; i++) {
        snprintf(key, sizeof(key), "s%d", i);
        px_check_int(px_cmd(c, "EVALSHA %s 1 %s 5", sha, key), 5);
        px_check_str(direct_get(key), "5");
    }
    r = px_cmd(c, "SCRIPT EXISTS %s 0000000000000000000000000000000000000000",
               sha);
    cr_assert_eq(r->elements, 2);
    cr_assert_eq(r->element[0]->integer, 1);
    cr_assert_eq(r->element[1]->integer, 0);
    freeReplyObject(r);
    px_check_int(px_cmd(c, "EVAL %s 1 {z}k 2", body), 2);
    px_check_error_prefix(
        px_cmd(c, "EVAL %s 2 a b 1", body),
        "CROSSSLOT Keys in request don't hash to the same slot");
    px_check_status(px_cmd(c, "SCRIPT FLUSH"), "OK");
    r = px_cmd(c, "SCRIPT EXISTS %s", sha);
    cr_assert_eq(r->element[0]->integer, 0);
    freeReplyObject(r);
    redisFree(c);
}

Test(it_cluster, keyless_commands_cover_every_master, .init = init_flushall,
     .fini = px_cluster_fini, .timeout = 120)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    static char seen[NKEYS];
    unsigned long long cursor = 0;
    int total = 0, rounds = 0;
    char key[32];

    for (int i = 0; i < NKEYS; i++) {
        px_check_status(px_cmd(c, "SET sc:%d x", i), "OK");
    }
    px_check_int(px_cmd(c, "DBSIZE"), NKEYS);
    redisReply *r = px_cmd(c, "KEYS sc:*");
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    cr_assert_eq(r->elements, NKEYS);
    freeReplyObject(r);
    /* SCAN walks every master once: each key exactly once. */
    do {
        r = px_cmd(c, "SCAN %llu COUNT 20", cursor);
        cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "SCAN: %s",
                     r->type == REDIS_REPLY_ERROR ? r->str : "?");
        cursor = strtoull(r->element[0]->str, NULL, 10);
        for (size_t k = 0; k < r->element[1]->elements; k++) {
            int i = atoi(r->element[1]->element[k]->str + 3);
            cr_assert(i >= 0 && i < NKEYS);
            cr_assert_eq(seen[i], 0, "key %d returned twice", i);
            seen[i] = 1;
            total++;
        }
        freeReplyObject(r);
        cr_assert_lt(++rounds, 10000, "SCAN never ended");
    } while (cursor != 0);
    cr_assert_eq(total, NKEYS);
    px_check_error(px_cmd(c, "SCAN notanumber"), "ERR invalid cursor");
    snprintf(key, sizeof(key), "sc:%d", 7);
    r = px_cmd(c, "RANDOMKEY");
    cr_assert_eq(r->type, REDIS_REPLY_STRING);
    freeReplyObject(r);
    /* INFO: the proxy's section, then every master's own. */
    r = px_cmd(c, "INFO");
    cr_assert_eq(r->type, REDIS_REPLY_STRING);
    cr_assert_not_null(strstr(r->str, "# Proxy\r\n"));
    cr_assert_not_null(strstr(r->str, "proxy_mode:cluster\r\n"));
    cr_assert_not_null(strstr(r->str, "cluster_slots_covered:16384\r\n"));
    int nodes = 0;
    for (const char *q = r->str; (q = strstr(q, "# Node ")) != NULL; q++) {
        nodes++;
    }
    cr_assert_eq(nodes, 3, "INFO names %d nodes", nodes);
    cr_assert_not_null(strstr(r->str, "redis_version:"));
    freeReplyObject(r);
    px_check_status(px_cmd(c, "FLUSHALL"), "OK");
    px_check_int(px_cmd(c, "DBSIZE"), 0);
    px_check_nil(direct_get(key));
    px_check_status(px_cmd(c, "PING"), "PONG");
    redisFree(c);
}

Test(it_cluster, transactions_run_on_the_node_of_their_keys, .init = init,
     .fini = px_cluster_fini, .timeout = 120)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    redisReply *r;

    px_check_status(px_cmd(c, "MULTI"), "OK");
    px_check_status(px_cmd(c, "SET {acct}a 10"), "QUEUED");
    px_check_status(px_cmd(c, "INCRBY {acct}a 5"), "QUEUED");
    px_check_status(px_cmd(c, "GET {acct}a"), "QUEUED");
    r = px_cmd(c, "EXEC");
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    cr_assert_eq(r->elements, 3);
    cr_assert_eq(r->element[1]->integer, 15);
    cr_assert_str_eq(r->element[2]->str, "15");
    freeReplyObject(r);
    px_check_str(direct_get("{acct}a"), "15");

    /* A command on another slot inside the transaction: CROSSSLOT, and the
     * whole transaction is discarded, as Redis Cluster does. */
    px_check_status(px_cmd(c, "MULTI"), "OK");
    px_check_status(px_cmd(c, "SET {acct}a 99"), "QUEUED");
    px_check_error(px_cmd(c, "SET {other}b 1"),
                   "CROSSSLOT Keys in request don't hash to the same slot");
    px_check_error(px_cmd(c, "EXEC"), "EXECABORT Transaction discarded "
                                      "because of previous errors.");
    px_check_str(direct_get("{acct}a"), "15");
    px_check_nil(direct_get("{other}b"));
    /* The connection is back to normal afterwards. */
    px_check_status(px_cmd(c, "SET {other}b 2"), "OK");
    px_check_status(px_cmd(c, "MULTI"), "OK");
    px_check_status(px_cmd(c, "DISCARD"), "OK");
    px_check_status(px_cmd(c, "MULTI"), "OK");
    r = px_cmd(c, "EXEC");
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    cr_assert_eq(r->elements, 0);
    freeReplyObject(r);
    /* WATCH picks the node by its key, and a conflicting write aborts. */
    redisContext *other = px_connect(px_env()->proxy.port);
    px_check_status(px_cmd(c, "WATCH {acct}a"), "OK");
    px_check_status(px_cmd(other, "SET {acct}a 0"), "OK");
    px_check_status(px_cmd(c, "MULTI"), "OK");
    px_check_status(px_cmd(c, "SET {acct}a 1"), "QUEUED");
    r = px_cmd(c, "EXEC");
    cr_assert_eq(r->type, REDIS_REPLY_NIL, "EXEC ran despite WATCH");
    freeReplyObject(r);
    px_check_str(direct_get("{acct}a"), "0");
    redisFree(other);
    redisFree(c);
}

Test(it_cluster, pubsub_and_blocking_calls_work_through_the_proxy, .init = init,
     .fini = px_cluster_fini, .timeout = 120)
{
    redisContext *sub = px_connect(px_env()->proxy.port);
    redisContext *pub = px_connect(px_env()->proxy.port);
    redisContext *blk = px_connect(px_env()->proxy.port);
    redisReply *r;

    r = px_cmd(sub, "SUBSCRIBE news");
    cr_assert_eq(r->elements, 3);
    freeReplyObject(r);
    /* Cluster pub/sub reaches every node, whichever one got PUBLISH. */
    for (int i = 0; i < 5; i++) {
        r = px_cmd(pub, "PUBLISH news m%d", i);
        cr_assert_eq(r->type, REDIS_REPLY_INTEGER);
        freeReplyObject(r);
        r = px_next(sub);
        cr_assert_eq(r->elements, 3);
        cr_assert_str_eq(r->element[0]->str, "message");
        char want[8];
        snprintf(want, sizeof(want), "m%d", i);
        cr_assert_str_eq(r->element[2]->str, want);
        freeReplyObject(r);
    }
    /* BLPOP waits on the key's node while others keep working. */
    cr_assert_eq(redisAppendCommand(blk, "BLPOP jobs 10"), REDIS_OK);
    px_flush(blk);
    px_check_status(px_cmd(pub, "SET unrelated 1"), "OK");
    px_check_int(px_cmd(pub, "RPUSH jobs j1"), 1);
    r = px_next(blk);
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    cr_assert_str_eq(r->element[1]->str, "j1");
    freeReplyObject(r);
    redisFree(blk);
    redisFree(pub);
    redisFree(sub);
}

Test(it_cluster, resharding_is_invisible_ask_then_moved, .init = init,
     .fini = px_cluster_fini, .timeout = 180)
{
    struct px_cluster *cl = px_cluster();
    struct px_cluster_migration m;
    redisContext *c = px_connect(px_env()->proxy.port);
    char keys[20][32];
    unsigned slot = slot_for_key("{mig}", 5);
    int from = px_cluster_master_of_slot(cl, slot);
    int to = (from + 1) % 3;

    for (int i = 0; i < 20; i++) {
        snprintf(keys[i], sizeof(keys[i]), "{mig}%d", i);
        px_check_status(px_cmd(c, "SET %s %d", keys[i], i), "OK");
    }
    px_cluster_migrate_begin(cl, &m, slot, to);
    px_cluster_migrate_keys(cl, &m, 10);
    /* Half the keys moved: the source answers -ASK for those. */
    for (int i = 0; i < 20; i++) {
        char want[8];
        snprintf(want, sizeof(want), "%d", i);
        px_check_str(px_cmd(c, "GET %s", keys[i]), want);
    }
    px_cluster_migrate_keys(cl, &m, 0);
    px_cluster_migrate_finish(cl, &m);
    /* The slot moved: the proxy's map is stale until MOVED fixes it. */
    for (int i = 0; i < 20; i++) {
        char want[8];
        snprintf(want, sizeof(want), "%d", i);
        px_check_str(px_cmd(c, "GET %s", keys[i]), want);
        px_check_int(px_cmd(c, "INCR %s", keys[i]), i + 1);
    }
    redisContext *d = px_cluster_connect(cl, to);
    px_check_str(px_cmd(d, "GET %s", keys[3]), "4");
    redisFree(d);
    redisFree(c);
}

/* Reads every key back and checks no wrong value is ever returned; counts
 * errors (allowed only while a master is being replaced). */
static int check_values(redisContext *c, int n)
{
    int errors = 0;

    for (int i = 0; i < n; i++) {
        redisAppendCommand(c, "GET fo:%d", i);
    }
    for (int i = 0; i < n; i++) {
        redisReply *r = px_next(c);
        if (r->type == REDIS_REPLY_ERROR) {
            errors++;
        } else {
            char want[16];
            snprintf(want, sizeof(want), "%d", i);
            cr_assert_eq(r->type, REDIS_REPLY_STRING, "key %d: type %d", i,
                         r->type);
            cr_assert_str_eq(r->str, want, "key %d: wrong value", i);
        }
        freeReplyObject(r);
    }
    return errors;
}

Test(it_cluster, failover_and_master_kill_never_return_a_wrong_value,
     .init = init, .fini = px_cluster_fini, .timeout = 240)
{
    struct px_cluster *cl = px_cluster();
    redisContext *c = px_connect(px_env()->proxy.port);
    int replicas[4], errors = 0;

    for (int i = 0; i < NKEYS; i++) {
        px_check_status(px_cmd(c, "SET fo:%d %d", i, i), "OK");
    }
    /* Replicas must hold the data before they take over. */
    for (int m = 0; m < 3; m++) {
        redisContext *d = px_cluster_connect(cl, m);
        redisReply *r = px_cmd(d, "WAIT 1 5000");
        freeReplyObject(r);
        redisFree(d);
    }
    /* A planned failover: no error at all is acceptable only after the
     * switch, but never a wrong value. */
    cr_assert_gt(px_cluster_replicas_of(cl, 0, replicas, 4), 0);
    px_cluster_failover(cl, replicas[0], NULL);
    for (int round = 0; round < 20; round++) {
        errors += check_values(c, NKEYS);
    }
    cr_assert_eq(check_values(c, NKEYS), 0,
                 "errors persist after the failover completed");

    /* kill -9 of a master: its slots fail until a replica is promoted,
     * the others keep serving, and the proxy needs no restart. */
    int victim = px_cluster_master_of_key(cl, "fo:0", 4);
    px_cluster_kill(cl, victim);
    for (int round = 0; round < 5; round++) {
        errors += check_values(c, NKEYS);
    }
    px_cluster_wait_ok(cl);
    long long deadline = px_now_ms() + 20000;
    while (check_values(c, NKEYS) != 0) {
        cr_assert_lt(px_now_ms(), deadline,
                     "the proxy never served the promoted replica");
        px_sleep_ms(100);
    }
    cr_assert(px_child_alive(&px_env()->proxy), "proxy died");
    redisFree(c);
}
