/* A TLS Redis Cluster whose nodes announce a host name, as managed
 * services run one: every node serves TLS on a port of its own (the
 * cluster bus and replication speak TLS too: tls-cluster,
 * tls-replication), announces itself as "localhost"
 * (cluster-announce-hostname, cluster-preferred-endpoint-type hostname),
 * so CLUSTER SLOTS and -MOVED, asked over TLS, name "localhost:<tls port>".
 * cellgate, seeded with one such name, reaches every master over TLS and
 * checks each node's certificate against the name the node announced.
 *
 * The nodes keep their plain ports for the cluster fixture (create, wait,
 * migrate) and for the tests' own look at them: Redis answers a plaintext
 * connection with the plain ports, so the fixture runs unchanged.
 * CLIENT LIST's laddr tells which port each connection came in on. */
#include "tests/integration/cluster_fixture.h"
#include "tests/integration/fixture.h"
#include "tests/integration/tls_fixture.h"
#include "tests/support/px_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(PX_TLS) && PX_TLS

PX_TEST_SUITE(it_tls_cluster);

#define TC_MASTERS  3
#define TC_HOSTNAME "localhost" /* the server certificate's DNS name */
#define TC_KEYS     300         /* keys of many slots, on every master */

/* Per node: its TLS port, certificate, and the include file that sets
 * them up. */
static int tls_port[TC_MASTERS];
static const char *node_cert[TC_MASTERS]; /* NULL: the right names */
static char include[TC_MASTERS][PX_PATH_MAX];
static const char *include_args[TC_MASTERS][3];

/* px_cluster_args_fn: "--include" the node's TLS settings. */
static const char *const *tc_node_args(int node)
{
    cr_assert(node >= 0 && node < TC_MASTERS, "node %d", node);
    return include_args[node];
}

/* .init: the certificates, then 3 TLS masters announcing "localhost". */
static void tc_init(void)
{
    const struct px_tls_certs *k = px_tls_certs();
    char text[4 * PX_PATH_MAX], name[32];

    for (int i = 0; i < TC_MASTERS; i++) {
        tls_port[i] = px_free_port();
        snprintf(text, sizeof(text),
                 "tls-port %d\n"
                 "tls-cert-file \"%s\"\n"
                 "tls-key-file \"%s\"\n"
                 "tls-ca-cert-file \"%s\"\n"
                 "tls-auth-clients no\n"
                 "tls-cluster yes\n"
                 "tls-replication yes\n"
                 "cluster-announce-hostname " TC_HOSTNAME "\n"
                 "cluster-preferred-endpoint-type hostname\n",
                 tls_port[i], node_cert[i] != NULL ? node_cert[i] : k->server,
                 k->server_key, k->ca);
        snprintf(name, sizeof(name), "tls-node-%d.conf", i);
        px_write_file(include[i], sizeof(include[i]), name, text);
        include_args[i][0] = "--include";
        include_args[i][1] = include[i];
        include_args[i][2] = NULL;
    }
    px_cluster_set_node_args(tc_node_args);
    px_cluster_start(px_cluster(), TC_MASTERS, 0);
}

/* .init: as tc_init, but nodes 1 and 2 serve a certificate for
 * wrong.example only. */
static void tc_init_mixed(void)
{
    node_cert[1] = px_tls_certs()->wrong_name;
    node_cert[2] = px_tls_certs()->wrong_name;
    tc_init();
}

/* Starts cellgate on the cluster, seeded with "localhost:<TLS port>" of
 * the first `nseeds` nodes (one: the other nodes come from CLUSTER SLOTS
 * only), plus `more`. */
static void tc_proxy_start(int nseeds, const char *more)
{
    char yaml[2 * PX_PATH_MAX], seeds[128] = "";
    size_t used = 0;

    for (int i = 0; i < nseeds; i++) {
        used += (size_t)snprintf(seeds + used, sizeof(seeds) - used,
                                 "  - " TC_HOSTNAME ":%d\n", tls_port[i]);
    }
    snprintf(yaml, sizeof(yaml),
             "cluster:\n%s"
             "upstream_tls: yes\n"
             "upstream_tls_ca_cert_file: %s\n%s",
             seeds, px_tls_certs()->ca, more != NULL ? more : "");
    px_proxy_start(&px_env()->proxy, yaml, NULL);
}

/* Waits until the proxy `c` has the slot map: SET w v answers OK. */
static void tc_wait_map(redisContext *c)
{
    for (int i = 0;; i++) {
        redisReply *r = px_cmd(c, "SET w v");
        int ok = r->type == REDIS_REPLY_STATUS;
        if (!ok && i >= 100) {
            cr_assert_fail("no slot map over TLS: %s",
                           r->type == REDIS_REPLY_ERROR ? r->str : "?");
        }
        freeReplyObject(r);
        if (ok) {
            return;
        }
        px_sleep_ms(50);
    }
}

/* The INFO section `section` of the proxy `c` (the caller frees it). */
static redisReply *tc_info(redisContext *c, const char *section)
{
    redisReply *r = px_cmd_admin(c, "INFO %s", section);
    cr_assert_eq(r->type, REDIS_REPLY_STRING, "INFO %s: %s", section,
                 r->type == REDIS_REPLY_ERROR ? r->str : "?");
    return r;
}

/* The moved= count of INFO nodes' line for "localhost:<port>". */
static long long tc_node_moved(redisContext *c, int port)
{
    redisReply *r = tc_info(c, "nodes");
    char want[64];
    snprintf(want, sizeof(want), "node=" TC_HOSTNAME ":%d,", port);
    const char *line = strstr(r->str, want);
    cr_assert_not_null(line, "INFO nodes has no %s: %s", want, r->str);
    const char *m = strstr(line, ",moved=");
    cr_assert_not_null(m, "no moved= in %s", line);
    long long n = strtoll(m + strlen(",moved="), NULL, 10);
    freeReplyObject(r);
    return n;
}

/* Connections on master `node` that came in on its TLS port. */
static int tc_tls_clients(int node)
{
    redisContext *d = px_cluster_connect(px_cluster(), node);
    redisReply *r = px_cmd(d, "CLIENT LIST");
    char want[64];
    int n = 0;

    cr_assert_eq(r->type, REDIS_REPLY_STRING);
    snprintf(want, sizeof(want), " laddr=127.0.0.1:%d ", tls_port[node]);
    for (const char *p = strstr(r->str, want); p != NULL;
         p = strstr(p + 1, want)) {
        n++;
    }
    freeReplyObject(r);
    redisFree(d);
    return n;
}

/* Every master serves keys through cellgate over TLS, with nodes named by
 * host name: SET/GET of keys of many slots land on all three, MGET across
 * slots, INFO names the three nodes "localhost:<tls port>", each master
 * sees cellgate's connections on its TLS port, and after a slot moves the
 * old owner's -MOVED (naming localhost:<tls port>) is followed. */
Test(it_tls_cluster, hostname_nodes_over_tls, .init = tc_init,
     .fini = px_cluster_fini, .timeout = 90)
{
    struct px_cluster *cl = px_cluster();
    char key[64], val[64];
    redisReply *r;

    tc_proxy_start(1, NULL);
    redisContext *c = px_connect(px_env()->proxy.port);
    tc_wait_map(c);

    for (int i = 0; i < TC_KEYS; i++) {
        snprintf(key, sizeof(key), "k:%d", i);
        snprintf(val, sizeof(val), "v:%d", i);
        r = px_cmd(c, "SET %s %s", key, val);
        if (r->type != REDIS_REPLY_STATUS) {
            cr_assert_fail("SET %s: %s", key,
                           r->type == REDIS_REPLY_ERROR ? r->str : "?");
        }
        freeReplyObject(r);
    }
    for (int i = 0; i < TC_KEYS; i++) {
        snprintf(key, sizeof(key), "k:%d", i);
        snprintf(val, sizeof(val), "v:%d", i);
        r = px_cmd(c, "GET %s", key);
        if (r->type != REDIS_REPLY_STRING || strcmp(r->str, val) != 0) {
            cr_assert_fail("GET %s: type %d %s", key, r->type,
                           r->str != NULL ? r->str : "");
        }
        freeReplyObject(r);
    }
    /* Each master holds its share, read over its plain port. */
    long long total = 0;
    for (int m = 0; m < TC_MASTERS; m++) {
        redisContext *d = px_cluster_connect(cl, m);
        r = px_cmd(d, "DBSIZE");
        cr_assert_eq(r->type, REDIS_REPLY_INTEGER);
        cr_assert_gt(r->integer, 0, "master %d holds no key", m);
        total += r->integer;
        freeReplyObject(r);
        redisFree(d);
    }
    cr_assert_eq(total, TC_KEYS + 1, "keys on the masters: %lld", total);

    /* MGET across slots (k:0..k:5 are on more than one master). */
    r = px_cmd(c, "MGET k:0 k:1 k:2 k:3 k:4 k:5 nope");
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "MGET: %s",
                 r->type == REDIS_REPLY_ERROR ? r->str : "?");
    cr_assert_eq(r->elements, 7);
    for (size_t i = 0; i < 6; i++) {
        snprintf(val, sizeof(val), "v:%zu", i);
        cr_assert_eq(r->element[i]->type, REDIS_REPLY_STRING);
        cr_assert_str_eq(r->element[i]->str, val);
    }
    cr_assert_eq(r->element[6]->type, REDIS_REPLY_NIL);
    freeReplyObject(r);

    /* INFO: three nodes, each by the host name it announced. */
    cr_assert_eq(px_info_int(c, "upstream_nodes"), TC_MASTERS);
    cr_assert_eq(px_info_int(c, "upstream_masters"), TC_MASTERS);
    for (int m = 0; m < TC_MASTERS; m++) {
        cr_assert_eq(tc_node_moved(c, tls_port[m]), 0);
        cr_assert_gt(tc_tls_clients(m), 0,
                     "master %d: no connection on its TLS port %d", m,
                     tls_port[m]);
    }

    /* A slot no key uses moves from its master to the next one; cellgate
     * still has the old map, so its SET goes to the old owner, whose
     * -MOVED names localhost:<the new owner's TLS port>. */
    int from = 0, to = 1;
    unsigned slot = (unsigned)px_cluster_first_slot_of(cl, from);
    redisContext *d = px_cluster_connect(cl, from);
    for (;; slot++) {
        cr_assert_eq(px_cluster_master_of_slot(cl, slot), from);
        r = px_cmd(d, "CLUSTER COUNTKEYSINSLOT %u", slot);
        int empty = r->type == REDIS_REPLY_INTEGER && r->integer == 0;
        freeReplyObject(r);
        if (empty) {
            break;
        }
    }
    redisFree(d);
    px_cluster_migrate_slot(cl, slot, to);
    px_cluster_key_in_slot(slot, "moved", key, sizeof(key));
    px_check_status(px_cmd(c, "SET %s here", key), "OK");
    px_check_str(px_cmd(c, "GET %s", key), "here");
    cr_assert_geq(tc_node_moved(c, tls_port[from]), 1,
                  "no -MOVED from the old owner");
    d = px_cluster_connect(cl, to);
    px_check_str(px_cmd(d, "GET %s", key), "here");
    redisFree(d);
    redisFree(c);
}

/* A client's request for a key of master `m` gets the error of a node
 * that is down, naming localhost:<m's TLS port> and `reason`. */
static void tc_expect_down(redisContext *c, int m, const char *reason)
{
    char key[64], prefix[64];
    int slot = px_cluster_first_slot_of(px_cluster(), m);

    px_cluster_key_in_slot((unsigned)slot, "down", key, sizeof(key));
    snprintf(prefix, sizeof(prefix), "ERR upstream " TC_HOSTNAME ":%d ",
             tls_port[m]);
    for (int i = 0; i < 3; i++) { /* the first attempt may be under way */
        redisReply *r = px_cmd(c, "GET %s", key);
        cr_assert_eq(r->type, REDIS_REPLY_ERROR, "GET answered type %d",
                     r->type);
        cr_assert(strncmp(r->str, prefix, strlen(prefix)) == 0 &&
                      strstr(r->str, reason) != NULL,
                  "GET %s: %s (want %s... %s)", key, r->str, prefix, reason);
        freeReplyObject(r);
    }
}

/* The name checked is each node's own, the one it announced: with nodes 1
 * and 2 serving a certificate for another name, node 0 serves and the
 * other two are nodes that are down, each named in its error. */
Test(it_tls_cluster, each_node_checked_by_its_name, .init = tc_init_mixed,
     .fini = px_cluster_fini, .timeout = 90)
{
    char key[64];

    tc_proxy_start(1, NULL);
    redisContext *c = px_connect(px_env()->proxy.port);
    /* The seed, node 0, answers the map; its keys work. */
    int slot = px_cluster_first_slot_of(px_cluster(), 0);
    px_cluster_key_in_slot((unsigned)slot, "up", key, sizeof(key));
    for (int i = 0;; i++) {
        redisReply *r = px_cmd(c, "SET %s v", key);
        int ok = r->type == REDIS_REPLY_STATUS;
        if (!ok && i >= 100) {
            cr_assert_fail("node 0 never served: %s",
                           r->type == REDIS_REPLY_ERROR ? r->str : "?");
        }
        freeReplyObject(r);
        if (ok) {
            break;
        }
        px_sleep_ms(50);
    }
    px_check_str(px_cmd(c, "GET %s", key), "v");
    tc_expect_down(c, 1, "certificate verify failed: hostname mismatch");
    tc_expect_down(c, 2, "certificate verify failed: hostname mismatch");
    px_check_str(px_cmd(c, "GET %s", key), "v");
    redisFree(c);
}

/* upstream_tls_server_name replaces every node's name: wrong.example, a
 * name no node's certificate holds, makes each seed a node that is down
 * (the log says OpenSSL's reason), so no map ever comes and clients get
 * CLUSTERDOWN with that reason; local commands still work. */
Test(it_tls_cluster, wrong_server_name_fails_every_node, .init = tc_init,
     .fini = px_cluster_fini, .timeout = 90)
{
    tc_proxy_start(TC_MASTERS, "upstream_tls_server_name: wrong.example\n");
    redisContext *c = px_connect(px_env()->proxy.port);
    px_file_wait(px_env()->proxy.log,
                 "certificate verify failed: hostname mismatch", 5000);
    redisReply *r = px_cmd(c, "GET k");
    cr_assert_eq(r->type, REDIS_REPLY_ERROR, "GET answered type %d", r->type);
    cr_assert(strncmp(r->str, "CLUSTERDOWN ", 12) == 0 &&
                  strstr(r->str, "hostname mismatch") != NULL,
              "GET: %s", r->str);
    freeReplyObject(r);
    px_check_str(px_cmd(c, "ECHO still-here"), "still-here");
    redisFree(c);
}

#endif
