/* Nodes named by host name: seeds, upstreams, Redis 7's hostname
 * endpoints, names that do not resolve, and the start-up log of a node
 * that is down. One server must be one node (one pool of connections),
 * however the configuration and the cluster name it. */
#define _GNU_SOURCE /* unshare */
#include "tests/support/px_test.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>

#include "parser/slot.h"
#include "tests/integration/cluster_fixture.h"
#include "tests/integration/fixture.h"

PX_TEST_SUITE(it_names);

#define NOWHERE "some-name-that-does-not-resolve.invalid"

/* A field of the INFO nodes line of `node` ("host:port"), or -1 when
 * cellgate lists no such node. */
static long long node_field(redisContext *c, const char *node,
                            const char *field)
{
    redisReply *r = px_cmd(c, "INFO nodes");
    char want[128];
    const char *at, *end;
    long long v = -1;

    cr_assert_eq(r->type, REDIS_REPLY_STRING);
    snprintf(want, sizeof(want), ":node=%s,", node);
    at = strstr(r->str, want);
    if (at != NULL) {
        end = strstr(at, "\r\n");
        snprintf(want, sizeof(want), ",%s=", field);
        at = strstr(at, want);
        if (at != NULL && at < end) {
            v = atoll(at + strlen(want));
        }
    }
    freeReplyObject(r);
    return v;
}

/* Connections of clients other than replication links, MIGRATE's cached
 * ones and this one on a node: cellgate's (CLIENT LIST). */
static int proxy_conns_on(redisContext *d)
{
    redisReply *r = px_cmd(d, "CLIENT LIST");
    const char *p;
    int n = 0;

    cr_assert_eq(r->type, REDIS_REPLY_STRING);
    for (p = r->str; p != NULL && *p != '\0';) {
        const char *eol = strchr(p, '\n');
        size_t len = eol != NULL ? (size_t)(eol - p) : strlen(p);
        char line[1024];
        snprintf(line, sizeof(line), "%.*s", (int)len, p);
        if (len > 0 && strstr(line, " flags=S ") == NULL &&
            strstr(line, " flags=M ") == NULL &&
            strstr(line, " cmd=restore-asking ") == NULL &&
            strstr(line, " cmd=client|list ") == NULL) {
            n++;
        }
        p = eol != NULL ? eol + 1 : NULL;
    }
    freeReplyObject(r);
    return n;
}

/* Waits until every master's count of cellgate connections (Redis's
 * CLIENT LIST) is what cellgate says it holds to it (INFO nodes), named
 * `prefix`:port, and no replica has one (the seeds' connections, asked for
 * the map, are closed once it answered). */
static void check_one_pool_per_server(redisContext *c, const char *prefix)
{
    struct px_cluster *cl = px_cluster();
    char why[256] = "";

    for (int tries = 0; tries < 250; tries++) {
        int ok = 1;
        for (int i = 0; i < cl->nnodes && ok; i++) {
            char name[64];
            redisContext *d = px_cluster_connect(cl, i);
            int on_redis = proxy_conns_on(d);
            long long said;
            redisFree(d);
            snprintf(name, sizeof(name), "%s:%d", prefix,
                     px_cluster_port(cl, i));
            said = node_field(c, name, "connected");
            if (px_cluster_is_master(cl, i)) {
                ok = on_redis > 0 && on_redis == said;
            } else {
                ok = on_redis == 0;
            }
            if (!ok) {
                snprintf(why, sizeof(why),
                         "node %d (%s, %s): %d cellgate connections on "
                         "Redis, cellgate says %lld",
                         i, name,
                         px_cluster_is_master(cl, i) ? "master" : "replica",
                         on_redis, said);
            }
        }
        if (ok) {
            return;
        }
        px_sleep_ms(20);
    }
    cr_assert_fail("%s", why);
}

/* Every key of a few round-trips lands right: written through cellgate,
 * read straight from its master. */
static void check_routing(redisContext *c, const char *tag)
{
    struct px_cluster *cl = px_cluster();

    for (int i = 0; i < 30; i++) {
        char key[48], val[16];
        snprintf(key, sizeof(key), "%s:%d", tag, i);
        snprintf(val, sizeof(val), "v%d", i);
        px_check_status(px_cmd(c, "SET %s %s", key, val), "OK");
        redisContext *d = px_cluster_connect(
            cl, px_cluster_master_of_key(cl, key, strlen(key)));
        px_check_str(px_cmd(d, "GET %s", key), val);
        redisFree(d);
        px_check_str(px_cmd(c, "GET %s", key), val);
    }
}

/* "name:p0,name:p1,...": every node (masters and replicas), after
 * `first` (may be ""). */
static void named_seeds(char *out, size_t cap, const char *first,
                        const char *name)
{
    struct px_cluster *cl = px_cluster();
    size_t len = (size_t)snprintf(out, cap, "%s", first);

    for (int i = 0; i < cl->nnodes; i++) {
        len +=
            (size_t)snprintf(out + len, cap - len, "%s%s:%d",
                             len > 0 ? "," : "", name, px_cluster_port(cl, i));
        cr_assert_lt(len, cap);
    }
}

static void start_proxy_with_seeds(const char *seeds)
{
    char yaml[2048];

    snprintf(yaml, sizeof(yaml), "cluster: \"%s\"\n", seeds);
    px_proxy_start(&px_env()->proxy, yaml, NULL);
}

/* True when every endpoint of `node`'s CLUSTER SLOTS is `host`. */
static int slots_all_named(int node, const char *host)
{
    redisContext *d = px_cluster_connect(px_cluster(), node);
    redisReply *r = px_cmd(d, "CLUSTER SLOTS");
    int ok = r->type == REDIS_REPLY_ARRAY && r->elements > 0;

    for (size_t k = 0; ok && k < r->elements; k++) {
        const redisReply *e = r->element[k];
        for (size_t m = 2; ok && m < e->elements; m++) {
            const redisReply *ep = e->element[m]->element[0];
            ok = ep->type == REDIS_REPLY_STRING && strcmp(ep->str, host) == 0;
        }
    }
    freeReplyObject(r);
    redisFree(d);
    return ok;
}

/* The cluster announces "localhost" as every node's endpoint (Redis 7's
 * cluster-announce-hostname and cluster-preferred-endpoint-type
 * hostname): CLUSTER SLOTS, -MOVED and -ASK name nodes by host name. */
static void init_hostnames(void)
{
    struct px_cluster *cl;
    int tries;

    px_cluster_init();
    cl = px_cluster();
    for (int i = 0; i < cl->nnodes; i++) {
        redisContext *d = px_cluster_connect(cl, i);
        px_check_status(
            px_cmd(d, "CONFIG SET cluster-announce-hostname localhost"), "OK");
        px_check_status(
            px_cmd(d, "CONFIG SET cluster-preferred-endpoint-type hostname"),
            "OK");
        redisFree(d);
    }
    for (tries = 0; tries < 500; tries++) {
        int all = 1;
        for (int i = 0; i < cl->nnodes && all; i++) {
            all = slots_all_named(i, "localhost");
        }
        if (all) {
            break;
        }
        px_sleep_ms(20);
    }
    cr_assert_lt(tries, 500, "the nodes never announced their host names");
}

Test(it_names, a_cluster_announcing_host_names_is_one_node_per_master,
     .init = init_hostnames, .fini = px_cluster_fini, .timeout = 120)
{
    struct px_cluster *cl = px_cluster();
    char seeds[1024], key[32];
    redisContext *c;

    /* Every node by name, masters and replicas, after one that does not
     * resolve (yet): cellgate starts and asks the next. */
    named_seeds(seeds, sizeof(seeds), NOWHERE ":7000", "localhost");
    start_proxy_with_seeds(seeds);
    c = px_connect(px_env()->proxy.port);
    check_routing(c, "hn");
    cr_assert_eq(px_info_int(c, "upstream_nodes"), 3);
    cr_assert_eq(px_info_int(c, "upstream_masters"), 3);
    check_one_pool_per_server(c, "localhost");

    /* A slot moves: -ASK, then -MOVED (or the next map) name its new
     * master by host name. */
    struct px_cluster_migration mig;
    unsigned slot = slot_for_key("{hn}", 4);
    int from = px_cluster_master_of_slot(cl, slot);
    int to = (from + 1) % 3;
    px_check_status(px_cmd(c, "SET {hn}k before"), "OK");
    px_cluster_migrate_begin(cl, &mig, slot, to);
    px_cluster_migrate_keys(cl, &mig, 0);
    px_check_str(px_cmd(c, "GET {hn}k"), "before");
    snprintf(key, sizeof(key), "localhost:%d", px_cluster_port(cl, from));
    cr_assert_geq(node_field(c, key, "ask"), 1, "no -ASK from %s", key);
    px_cluster_migrate_finish(cl, &mig);
    px_check_str(px_cmd(c, "GET {hn}k"), "before");
    px_check_status(px_cmd(c, "SET {hn}k after"), "OK");
    redisContext *d = px_cluster_connect(cl, to);
    px_check_str(px_cmd(d, "GET {hn}k"), "after");
    redisFree(d);
    snprintf(key, sizeof(key), "localhost:%d", px_cluster_port(cl, to));
    cr_assert_geq(node_field(c, key, "requests"), 1);
    cr_assert_eq(px_info_int(c, "upstream_nodes"), 3);
    check_one_pool_per_server(c, "localhost");
    redisFree(c);
}

/* The configuration names the servers "localhost", the cluster by
 * address: each server is still one node, named as the cluster says. */
Test(it_names, seeds_named_otherwise_than_the_map_make_no_extra_nodes,
     .init = px_cluster_init, .fini = px_cluster_fini, .timeout = 120)
{
    char seeds[1024];
    redisContext *c;

    named_seeds(seeds, sizeof(seeds), "", "localhost");
    start_proxy_with_seeds(seeds);
    c = px_connect(px_env()->proxy.port);
    check_routing(c, "ip");
    cr_assert_eq(px_info_int(c, "upstream_nodes"), 3);
    check_one_pool_per_server(c, "127.0.0.1");
    for (int i = 0; i < px_cluster()->nnodes; i++) {
        char name[64];
        snprintf(name, sizeof(name), "localhost:%d",
                 px_cluster_port(px_cluster(), i));
        cr_assert_leq(node_field(c, name, "connected"), 0,
                      "a seed kept connections: %s", name);
    }
    redisFree(c);
}

/* Lines of the proxy's log. */
static int log_lines(void)
{
    return px_log_count("\n");
}

/* Waits until cellgate tried `node` again at least `n` times. */
static void wait_reconnects(redisContext *c, const char *node, long long n)
{
    long long v = -1;

    for (int tries = 0; tries < 1000; tries++) {
        v = node_field(c, node, "reconnects");
        if (v >= n) {
            return;
        }
        px_sleep_ms(10);
    }
    cr_assert_fail("%s: %lld reconnects, want %lld", node, v, n);
}

Test(it_names, an_upstream_name_that_does_not_resolve_is_a_node_down,
     .fini = px_env_fini, .timeout = 60)
{
    redisContext *c;

    px_proxy_start(&px_env()->proxy, "upstream: " NOWHERE ":6379\n", NULL);
    c = px_connect(px_env()->proxy.port);
    px_check_error_prefix(px_cmd(c, "GET k"),
                          "ERR upstream " NOWHERE ":6379 unavailable: cannot "
                          "resolve " NOWHERE);
    px_check_str(px_cmd(c, "ECHO alive"), "alive");
    /* Tried again and again (about 3 s of backoff), told once. */
    wait_reconnects(c, NOWHERE ":6379", 6);
    px_check_error_prefix(px_cmd(c, "SET k v"),
                          "ERR upstream " NOWHERE ":6379 unavailable");
    cr_assert(px_child_alive(&px_env()->proxy));
    cr_assert_eq(px_log_count("cannot resolve"), 1, "%d lines",
                 px_log_count("cannot resolve"));
    redisFree(c);
}

Test(it_names, an_upstream_named_localhost_works, .fini = px_env_fini,
     .timeout = 60)
{
    char yaml[128];
    redisContext *c;

    px_redis_start(&px_env()->redis, NULL);
    snprintf(yaml, sizeof(yaml), "upstream: localhost:%d\n",
             px_env()->redis.port);
    px_proxy_start(&px_env()->proxy, yaml, NULL);
    c = px_connect(px_env()->proxy.port);
    px_check_status(px_cmd(c, "SET k v"), "OK");
    px_check_str(px_cmd(c, "GET k"), "v");
    redisContext *d = px_redis_connect(&px_env()->redis, NULL);
    px_check_str(px_cmd(d, "GET k"), "v");
    redisFree(d);
    redisFree(c);
}

/* Debian's own /etc/hosts names localhost ::1 as well as 127.0.0.1, and
 * getaddrinfo may rank ::1 first, while a Redis bound to 127.0.0.1 listens
 * on one of them only. cellgate tries a name's next address within the
 * same attempt, as client libraries do: nothing waiting for the first
 * connection fails, and no node error is logged. The test runs in a mount
 * namespace of its own (criterion forks each test), with a hosts file
 * that gives a name both addresses, ::1 first; nothing listens on ::1. */
Test(it_names, a_name_whose_first_address_refuses_uses_the_next,
     .fini = px_env_fini, .timeout = 60)
{
    char hosts[PX_PATH_MAX], yaml[128];
    redisContext *c, *d;

    px_env_prepare();
    px_write_file(hosts, sizeof(hosts), "hosts",
                  "::1 px-two-addrs\n127.0.0.1 px-two-addrs\n");
    cr_assert_eq(unshare(CLONE_NEWNS), 0, "unshare: %s", strerror(errno));
    /* Private first, so the bind below stays in this namespace. A root
     * that is no mount point (a chroot) cannot be made private: then the
     * bind could show through in the parent's namespace, so the test
     * says so and does not run. */
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) {
        cr_assert_eq(errno, EINVAL, "mount: %s", strerror(errno));
        cr_skip_test("the root is no mount point (a chroot): a private "
                     "mount namespace cannot be made here");
    }
    cr_assert_eq(mount(hosts, "/etc/hosts", NULL, MS_BIND, NULL), 0,
                 "mount --bind: %s", strerror(errno));
    px_redis_start(&px_env()->redis, NULL);
    snprintf(yaml, sizeof(yaml), "upstream: px-two-addrs:%d\n",
             px_env()->redis.port);
    px_proxy_start(&px_env()->proxy, yaml, NULL);
    c = px_connect(px_env()->proxy.port);
    px_check_status(px_cmd(c, "SET k v"), "OK");
    px_check_str(px_cmd(c, "GET k"), "v");
    d = px_redis_connect(&px_env()->redis, NULL);
    px_check_str(px_cmd(d, "GET k"), "v");
    cr_assert_eq(px_log_count("unavailable"), 0, "a node error was logged");
    redisFree(d);
    redisFree(c);
}

/* A node down at start: one line, however many attempts, then one when it
 * is back. */
Test(it_names, a_node_down_at_start_logs_a_bounded_number_of_lines,
     .fini = px_env_fini, .timeout = 60)
{
    struct px_child *r = &px_env()->redis;
    char yaml[128], node[64];
    redisContext *c;
    int before;

    px_env_prepare();
    r->port = px_free_port();
    snprintf(node, sizeof(node), "127.0.0.1:%d", r->port);
    snprintf(yaml, sizeof(yaml), "upstream: %s\n", node);
    px_proxy_start(&px_env()->proxy, yaml, NULL);
    c = px_connect(px_env()->proxy.port);
    px_check_error_prefix(px_cmd(c, "GET k"), "ERR upstream");
    wait_reconnects(c, node, 8);
    before = log_lines();
    cr_assert_leq(before, 4, "%d lines in the log", before);
    cr_assert_eq(px_log_count("unavailable"), 1);
    px_redis_start(r, NULL);
    /* The first command after the node is back may still find the
     * connection waiting out its backoff. */
    for (int tries = 0; tries < 500 && px_log_count(": back after ") == 0;
         tries++) {
        px_sleep_ms(10);
    }
    cr_assert_eq(px_log_count(": back after "), 1);
    for (int tries = 0; tries < 500; tries++) {
        redisReply *ok = px_cmd(c, "SET k v");
        int done = ok->type == REDIS_REPLY_STATUS;
        freeReplyObject(ok);
        if (done) {
            break;
        }
        px_sleep_ms(10);
    }
    px_check_str(px_cmd(c, "GET k"), "v");
    cr_assert_eq(px_log_count(": back after "), 1);
    redisFree(c);
}
