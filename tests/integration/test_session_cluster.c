/* Sessions in front of a Redis Cluster: client-library handshakes stay
 * multiplexed and never pin a client to one node, a client bound to a node
 * (a blocking call, CLIENT TRACKING) is served on the others, and PUBLISH
 * and SUBSCRIBE of a channel meet on the channel's node, so one
 * publisher's messages arrive in order and PUBLISH counts the subscriber. */
#include "tests/support/px_test.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tests/integration/cluster_fixture.h"
#include "tests/integration/fixture.h"

PX_TEST_SUITE(it_session_cluster);

#define NCLIENTS 30 /* default-handshake clients */
#define NKEYS    60 /* keys per client, over every master */

static void init(void)
{
    px_cluster_init();
    px_cluster_proxy_start(&px_env()->proxy, px_cluster(), NULL);
}

/* Normal connections a node sees (not its replicas' links), less the one
 * asking. */
static int node_connections(int node)
{
    redisContext *d = px_cluster_connect(px_cluster(), node);
    redisReply *r = px_cmd(d, "CLIENT LIST TYPE normal");
    int n = 0;

    for (const char *p = r->str; (p = strchr(p, '\n')) != NULL; p++) {
        n++;
    }
    freeReplyObject(r);
    redisFree(d);
    return n - 1;
}

Test(it_session_cluster, handshake_clients_use_every_node_over_shared_conns,
     .init = init, .fini = px_cluster_fini, .timeout = 180)
{
    struct px_cluster *cl = px_cluster();
    redisContext *c[NCLIENTS];
    char key[32], want[32];
    int i, k, node;

    for (i = 0; i < NCLIENTS; i++) {
        c[i] = px_connect(px_env()->proxy.port);
        redisAppendCommand(c[i], "CLIENT SETINFO lib-name node-redis");
        redisAppendCommand(c[i], "CLIENT SETINFO lib-ver 4.6.%d", i);
        redisAppendCommand(c[i], "CLIENT SETNAME worker%d", i);
        redisAppendCommand(c[i], "SELECT 0");
        redisAppendCommand(c[i], "READONLY");
        for (k = 0; k < 5; k++) {
            px_check_status(px_next(c[i]), "OK");
        }
    }
    for (i = 0; i < NCLIENTS; i++) {
        for (k = 0; k < NKEYS; k++) {
            redisAppendCommand(c[i], "SET hk:%d:%d v%d", i, k, k);
        }
        redisAppendCommand(c[i], "MSET hm:%d:a 1 hm:%d:b 2 hm:%d:c 3", i, i, i);
        for (k = 0; k < NKEYS + 1; k++) {
            px_check_status(px_next(c[i]), "OK");
        }
    }
    for (i = 0; i < NCLIENTS; i++) {
        redisReply *r = px_cmd(c[i], "MGET hm:%d:a hm:%d:b hm:%d:c", i, i, i);
        cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
        cr_assert_eq(r->elements, 3);
        cr_assert_str_eq(r->element[2]->str, "3");
        freeReplyObject(r);
        for (k = 0; k < NKEYS; k += 7) {
            snprintf(key, sizeof(key), "hk:%d:%d", i, k);
            snprintf(want, sizeof(want), "v%d", k);
            px_check_str(px_cmd(c[i], "GET %s", key), want);
        }
    }
    for (node = 0; node < cl->nnodes; node++) {
        int n;
        if (!px_cluster_is_master(cl, node)) {
            continue;
        }
        n = node_connections(node);
        fprintf(stderr, "it_session: master %d sees %d connections\n", node, n);
        /* upstream_pool (2): no client has a connection of its own. */
        cr_assert_leq(n, 2, "master %d: %d connections for %d clients", node, n,
                      NCLIENTS);
    }
    for (i = 0; i < NCLIENTS; i++) {
        redisFree(c[i]);
    }
}

Test(it_session_cluster, a_client_bound_to_a_node_is_served_on_the_others,
     .init = init, .fini = px_cluster_fini, .timeout = 180)
{
    redisContext *t = px_connect(px_env()->proxy.port);
    redisContext *b = px_connect(px_env()->proxy.port);
    redisContext *p = px_connect(px_env()->proxy.port);
    redisReply *r;
    char want[32];
    int k;

    /* Tracking binds a private connection on one node; reads of keys on
     * every node still work. */
    px_check_status(px_cmd(t, "CLIENT TRACKING on"), "OK");
    for (k = 0; k < 40; k++) {
        px_check_status(px_cmd(p, "SET tk:%d %d", k, k), "OK");
        snprintf(want, sizeof(want), "%d", k);
        px_check_str(px_cmd(t, "GET tk:%d", k), want);
    }
    px_check_status(px_cmd(t, "CLIENT TRACKING off"), "OK");

    /* A blocking call holds its node; the commands pipelined after it
     * for keys of other nodes are served, and replies keep their order. */
    redisAppendCommand(b, "BLPOP queue 10");
    for (k = 0; k < 40; k++) {
        redisAppendCommand(b, "GET tk:%d", k);
    }
    px_flush(b);
    px_sleep_ms(200);
    px_check_int(px_cmd(p, "RPUSH queue job"), 1);
    r = px_next(b);
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    cr_assert_str_eq(r->element[1]->str, "job");
    freeReplyObject(r);
    for (k = 0; k < 40; k++) {
        snprintf(want, sizeof(want), "%d", k);
        px_check_str(px_next(b), want);
    }
    redisFree(t);
    redisFree(b);
    redisFree(p);
}

Test(it_session_cluster, publish_reaches_subscribers_in_order_and_counts_them,
     .init = init, .fini = px_cluster_fini, .timeout = 180)
{
    redisContext *sub = px_connect(px_env()->proxy.port);
    redisContext *pub = px_connect(px_env()->proxy.port);
    redisReply *r;
    char want[16];
    int i, ch;

    for (ch = 0; ch < 4; ch++) {
        r = px_cmd(sub, "SUBSCRIBE chan%d", ch);
        cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
        freeReplyObject(r);
    }
    r = px_cmd(sub, "UNSUBSCRIBE chan1 chan2 chan3");
    freeReplyObject(r);
    for (i = 0; i < 2; i++) {
        freeReplyObject(px_next(sub));
    }
    /* One publisher, pipelined: the order it sent. */
    for (i = 1; i <= 6; i++) {
        redisAppendCommand(pub, "PUBLISH chan0 m%d", i);
    }
    for (i = 1; i <= 6; i++) {
        px_check_int(px_next(pub), 1);
    }
    for (i = 1; i <= 6; i++) {
        r = px_next(sub);
        cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
        cr_assert_str_eq(r->element[0]->str, "message");
        snprintf(want, sizeof(want), "m%d", i);
        cr_assert_str_eq(r->element[2]->str, want);
        freeReplyObject(r);
    }
    px_check_int(px_cmd(pub, "PUBLISH nobody-listens x"), 0);
    /* NUMSUB counts the subscribers of every node. */
    r = px_cmd(pub, "PUBSUB NUMSUB chan0 chan1 chan9");
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    cr_assert_eq(r->elements, 6);
    cr_assert_str_eq(r->element[0]->str, "chan0");
    cr_assert_eq(r->element[1]->integer, 1);
    cr_assert_str_eq(r->element[2]->str, "chan1");
    cr_assert_eq(r->element[3]->integer, 0);
    cr_assert_eq(r->element[5]->integer, 0);
    freeReplyObject(r);
    redisFree(sub);

    /* A client's channels of other nodes and its patterns live on its one
     * connection; PUBLISH still counts them, and stops when it leaves. */
    {
        struct px_cluster *cl = px_cluster();
        char x[32], y[32];
        int mx, k = 0, left;
        redisContext *s2 = px_connect(px_env()->proxy.port);

        snprintf(x, sizeof(x), "ch:%d", k);
        mx = px_cluster_master_of_key(cl, x, strlen(x));
        do {
            snprintf(y, sizeof(y), "ch:%d", ++k);
        } while (px_cluster_master_of_key(cl, y, strlen(y)) == mx);
        r = px_cmd(s2, "SUBSCRIBE %s %s", x, y);
        freeReplyObject(r);
        freeReplyObject(px_next(s2));
        r = px_cmd(s2, "PSUBSCRIBE pat*");
        freeReplyObject(r);
        px_check_int(px_cmd(pub, "PUBLISH %s hi", y), 1);
        px_check_int(px_cmd(pub, "PUBLISH %s hi", x), 1);
        for (k = 0; k < 8; k++) {
            px_check_int(px_cmd(pub, "PUBLISH pat-%d hi", k), 1);
        }
        px_check_int(px_cmd(pub, "PUBLISH pattern hi"), 1);
        redisFree(s2);
        for (k = 0, left = 1; k < 100 && left != 0; k++) {
            r = px_cmd(pub, "PUBLISH %s hi", y);
            left = (int)r->integer;
            freeReplyObject(r);
            px_sleep_ms(20);
        }
        cr_assert_eq(left, 0, "the subscriber left, PUBLISH still counts it");
    }
    redisFree(pub);
}

/* Client-side caching across the cluster: a RESP3 client that tracks gets
 * the invalidation of every key it read, whichever node owns it. */
Test(it_session_cluster, tracking_covers_keys_of_every_node, .init = init,
     .fini = px_cluster_fini, .timeout = 180)
{
    struct px_cluster *cl = px_cluster();
    redisContext *w = px_connect(px_env()->proxy.port);
    int fd = px_raw_connect(px_env()->proxy.port, 0), closed = 0;
    char keys[3][32], req[512], got[65536];
    int seen[PX_CLUSTER_MAX_NODES] = { 0 }, nkeys = 0, i, found;
    size_t n = 0;
    long long deadline;

    for (i = 0; nkeys < 3 && i < 1000; i++) {
        char k[32];
        int m;
        snprintf(k, sizeof(k), "cache:%d", i);
        m = px_cluster_master_of_key(cl, k, strlen(k));
        if (!seen[m]) {
            seen[m] = 1;
            memcpy(keys[nkeys++], k, sizeof(k));
            px_check_status(px_cmd(w, "SET %s v", k), "OK");
        }
    }
    cr_assert_eq(nkeys, 3);
    snprintf(req, sizeof(req),
             "HELLO 3\r\nCLIENT TRACKING on\r\nGET %s\r\nGET %s\r\n"
             "GET %s\r\nPING\r\n",
             keys[0], keys[1], keys[2]);
    cr_assert_eq(px_raw_send(fd, req, strlen(req)), 0);
    deadline = px_now_ms() + 5000;
    while (px_now_ms() < deadline &&
           (n < 7 || memcmp(got + n - 7, "+PONG\r\n", 7) != 0)) {
        n += px_raw_read(fd, got + n, sizeof(got) - 1 - n, 100, &closed);
    }
    cr_assert(n >= 7 && memcmp(got + n - 7, "+PONG\r\n", 7) == 0,
              "no PONG after the reads");
    for (i = 0; i < 3; i++) {
        px_check_status(px_cmd(w, "SET %s changed", keys[i]), "OK");
    }
    n = 0;
    deadline = px_now_ms() + 5000;
    do {
        n += px_raw_read(fd, got + n, sizeof(got) - 1 - n, 100, &closed);
        got[n] = '\0';
        for (found = 0, i = 0; i < 3; i++) {
            found += strstr(got, keys[i]) != NULL;
        }
    } while (found < 3 && px_now_ms() < deadline && !closed);
    cr_assert_not_null(strstr(got, "invalidate"), "no invalidation: %s", got);
    cr_assert_eq(found, 3, "invalidations for %d of 3 nodes' keys: %s", found,
                 got);
    close(fd);
    redisFree(w);
}
