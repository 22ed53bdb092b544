/* upstream_tls: every connection cellgate opens to Redis goes over TLS
 * (shared, RESP3, private, the limiter's own, the tracker's), verified
 * against the configured CA and the node's name; a node whose handshake
 * fails is a node that is down (the same error for clients, the log names
 * the node and OpenSSL's reason once, the backoff applies), and no byte of
 * a request leaves in plaintext. With tls_listen on too, a client speaks
 * TLS end to end.
 *
 * The redis-servers also keep a plaintext port, for the tests' own look at
 * them (CLIENT LIST's laddr tells which port each connection came in on:
 * the TLS port speaks nothing but TLS). */
#include "tests/integration/fixture.h"
#include "tests/integration/tls_fixture.h"
#include "tests/support/px_test.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(PX_TLS) && PX_TLS

PX_TEST_SUITE(it_tls);

static int tls_redis_port; /* the TLS port of the running test's redis */

/* proxy.yaml's upstream lines for the TLS redis, then `more`. */
static void tls_proxy_start(const char *more)
{
    char yaml[8192];

    snprintf(yaml, sizeof(yaml),
             "upstream: 127.0.0.1:%d\nupstream_tls: yes\n"
             "upstream_tls_ca_cert_file: %s\n%s",
             tls_redis_port, px_tls_certs()->ca, more != NULL ? more : "");
    px_proxy_start(&px_env()->proxy, yaml, NULL);
}

/* A client of the proxy gets the error of a node that is down, which
 * names the node and `reason`; the log says it once for all attempts. */
static void tls_expect_down(const char *reason)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    char prefix[64];
    redisReply *r;
    int n;

    snprintf(prefix, sizeof(prefix), "ERR upstream 127.0.0.1:%d ",
             tls_redis_port);
    /* Until the first attempt fails, a request waits for it and may see
     * the attempt fail; every answer is this node's error either way. */
    for (int i = 0; i < 3; i++) {
        r = px_cmd(c, "GET k");
        cr_assert_eq(r->type, REDIS_REPLY_ERROR, "GET answered type %d",
                     r->type);
        cr_assert(strncmp(r->str, prefix, strlen(prefix)) == 0 &&
                      strstr(r->str, reason) != NULL,
                  "GET: %s (want %s... %s)", r->str, prefix, reason);
        freeReplyObject(r);
    }
    /* Local commands still work: the proxy serves on. */
    px_check_str(px_cmd(c, "ECHO still-here"), "still-here");
    redisFree(c);
    snprintf(prefix, sizeof(prefix),
             "upstream 127.0.0.1:%d: unavailable: ", tls_redis_port);
    px_file_wait(px_env()->proxy.log, reason, 2000);
    cr_assert(px_file_has(px_env()->proxy.log, prefix),
              "the log names no node");
    /* Attempts go on at the backoff (50, 100, 200... ms): several in
     * 600 ms, and no line more (one per connection: its first failure). */
    n = px_file_count(px_env()->proxy.log, prefix);
    px_sleep_ms(600);
    cr_assert_eq(px_file_count(px_env()->proxy.log, prefix), n,
                 "\"%s\" logged at each attempt", reason);
}

/* Every connection on the redis-server `d` but `d`'s own came in on the
 * TLS port; returns how many there are. */
static int tls_redis_all_tls(redisContext *d)
{
    redisReply *r = px_cmd(d, "CLIENT LIST");
    char want[64];
    int n = 0;

    cr_assert_eq(r->type, REDIS_REPLY_STRING);
    snprintf(want, sizeof(want), " laddr=127.0.0.1:%d ", tls_redis_port);
    for (char *line = strtok(r->str, "\n"); line != NULL;
         line = strtok(NULL, "\n")) {
        if (strstr(line, "cmd=client|list") != NULL) {
            continue; /* this connection */
        }
        if (strstr(line, want) == NULL) {
            cr_assert_fail("a plaintext connection to Redis: %s", line);
        }
        n++;
    }
    freeReplyObject(r);
    return n;
}

#define TLS_LIMITS                                                             \
    "user:\n  children:\n    \"*\":\n      limits: [2, 1, 3600]\n"

Test(it_tls, every_connection_to_redis_is_tls, .fini = px_env_fini,
     .timeout = 60)
{
    const struct px_tls_certs *k = px_tls_certs();
    struct px_env *env = px_env();
    char more[4 * PX_PATH_MAX], limits[PX_PATH_MAX];
    int tls_listen = px_free_port();
    redisContext *d, *plain;
    struct px_tls *t, *sub;
    redisReply *r;

    tls_redis_port = px_tls_redis_start(&env->redis, k->server, "no");
    d = px_redis_connect(&env->redis, NULL);
    px_check_status(px_cmd(d, "ACL SETUSER lim on >lim-pw ~* &* +@all"), "OK");
    px_write_file(limits, sizeof(limits), "limits.yaml", TLS_LIMITS);
    snprintf(more, sizeof(more),
             "limits_file: %s\nlimiter_user: lim\nlimiter_password: lim-pw\n"
             "tls_listen: 127.0.0.1:%d\ntls_cert_file: %s\ntls_key_file: %s\n"
             "tls_auth_clients: no\n",
             limits, tls_listen, k->server, k->server_key);
    tls_proxy_start(more);

    t = px_tls_connect(tls_listen);
    px_check_status(px_tls_cmd(t, "SET k v"), "OK");
    px_check_str(px_tls_cmd(t, "GET k"), "v");
    /* A pipeline: 200 commands in one go. */
    for (int i = 0; i < 100; i++) {
        px_tls_append(t, "SET p%d %d", i, i);
        px_tls_append(t, "GET p%d", i);
    }
    for (int i = 0; i < 100; i++) {
        char v[16];
        snprintf(v, sizeof(v), "%d", i);
        px_check_status(px_tls_next(t), "OK");
        px_check_str(px_tls_next(t), v);
    }
    /* A large value, sealed and read in many records. */
    {
        size_t n = 3 * 1024 * 1024;
        char *big = malloc(n);
        cr_assert_not_null(big);
        for (size_t i = 0; i < n; i++) {
            big[i] = (char)('a' + i % 26);
        }
        px_check_status(px_tls_cmd(t, "SET big %b", big, n), "OK");
        px_check_bulk(px_tls_cmd(t, "GET big"), big, n);
        free(big);
    }
    /* MULTI/EXEC: a private connection. */
    px_check_status(px_tls_cmd(t, "MULTI"), "OK");
    px_check_status(px_tls_cmd(t, "INCR n"), "QUEUED");
    r = px_tls_cmd(t, "EXEC");
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    cr_assert_eq(r->elements, 1);
    cr_assert_eq(r->element[0]->integer, 1);
    freeReplyObject(r);
    /* The limiter, logged in as its own user on its own connections. */
    r = px_tls_cmd(t, "CL.THROTTLE th 5 10 60");
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    cr_assert_eq(r->element[0]->integer, 0);
    freeReplyObject(r);
    r = px_tls_cmd(t, "LIMITER CHECK user:alice");
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "LIMITER CHECK: type %d %s",
                 r->type, r->type == REDIS_REPLY_ERROR ? r->str : "");
    freeReplyObject(r);
    /* SUBSCRIBE over TLS, PUBLISH over plaintext. */
    sub = px_tls_connect(tls_listen);
    r = px_tls_cmd(sub, "SUBSCRIBE ch");
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    freeReplyObject(r);
    plain = px_connect(env->proxy.port);
    px_check_int(px_cmd(plain, "PUBLISH ch hello"), 1);
    r = px_tls_next(sub);
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    cr_assert_eq(r->elements, 3);
    cr_assert_str_eq(r->element[2]->str, "hello");
    freeReplyObject(r);
    /* RESP3 connections too (hiredis 0.14 reads no RESP3: raw bytes). */
    {
        static const char req[] = "*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n"
                                  "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n";
        char buf[4096];
        int fd = px_raw_connect(env->proxy.port, 0);
        size_t got = 0;
        cr_assert_eq(px_raw_send(fd, req, sizeof(req) - 1), 0);
        while (got < 8 || memcmp(buf + got - 7, "$1\r\nv\r\n", 7) != 0) {
            size_t n = px_raw_read(fd, buf + got, 1, 5000, NULL);
            cr_assert(n == 1 && got + 1 < sizeof(buf), "RESP3 GET: %.*s",
                      (int)got, buf);
            got++;
        }
        close(fd);
    }
    cr_assert_eq(px_info_int(plain, "connected_tls_clients"), 2);

    /* On Redis: the shared, RESP3, private (subscriber), limiter's own
     * connections: all came in on the TLS port. */
    cr_assert_geq(tls_redis_all_tls(d), 5);
    r = px_cmd(d, "CLIENT LIST");
    cr_assert_not_null(strstr(r->str, "user=lim "), "no limiter connection");
    cr_assert_not_null(strstr(r->str, "sub=1 "), "no subscriber connection");
    freeReplyObject(r);
    px_tls_close(t);
    px_tls_close(sub);
    redisFree(plain);
    redisFree(d);
}

/* SYNC's tunnel is a private connection: over TLS too, the replication
 * stream (an RDB) reaches the client decrypted. */
Test(it_tls, sync_tunnel, .fini = px_env_fini, .timeout = 60)
{
    int fd, closed = 0;
    char rdb[64];
    size_t n;
    redisContext *d;

    tls_redis_port =
        px_tls_redis_start(&px_env()->redis, px_tls_certs()->server, "no");
    tls_proxy_start("commands: allcommands\n" PX_NO_ADMIN);
    fd = px_raw_connect(px_env()->proxy.port, 0);
    cr_assert_eq(px_raw_send(fd, "SYNC\r\n", 6), 0);
    n = px_raw_read(fd, rdb, sizeof(rdb) - 1, 3000, &closed);
    rdb[n] = '\0';
    cr_assert(n > 10 && rdb[0] == '$' && strstr(rdb, "REDIS") != NULL,
              "no RDB after SYNC: '%s'", rdb);
    d = px_redis_connect(&px_env()->redis, NULL);
    cr_assert_geq(tls_redis_all_tls(d), 2);
    redisFree(d);
    close(fd);
}

/* Cluster mode: the seed, and the nodes CLUSTER SLOTS names (its TLS
 * ports, with tls-cluster), are reached over TLS. One node holds every
 * slot. */
Test(it_tls, cluster_mode, .fini = px_env_fini, .timeout = 60)
{
    static const char *const extra[] = { "--cluster-enabled", "yes",
                                         "--tls-cluster", "yes", NULL };
    struct px_env *env = px_env();
    char yaml[2 * PX_PATH_MAX], nodes[PX_PATH_MAX + 32], bus[16];
    redisContext *d, *c;
    const char *argv[24];
    size_t i, n = 0;

    /* px_tls_redis_start's arguments, and the cluster's. */
    px_path(nodes, sizeof(nodes), "nodes.conf");
    tls_redis_port =
        px_tls_redis_start(&env->redis, px_tls_certs()->server, "no");
    px_redis_kill(&env->redis, SIGTERM);
    for (i = 0; env->redis.args[i] != NULL; i++) {
        argv[n++] = env->redis.args[i];
    }
    for (i = 0; extra[i] != NULL; i++) {
        argv[n++] = extra[i];
    }
    argv[n++] = "--cluster-config-file";
    argv[n++] = nodes;
    /* Its own bus port: port + 10000 may be beyond 65535. */
    snprintf(bus, sizeof(bus), "%d", px_free_port());
    argv[n++] = "--cluster-port";
    argv[n++] = bus;
    argv[n] = NULL;
    px_redis_start(&env->redis, argv);
    d = px_redis_connect(&env->redis, NULL);
    px_check_status(px_cmd(d, "CLUSTER ADDSLOTSRANGE 0 16383"), "OK");
    snprintf(yaml, sizeof(yaml),
             "cluster: 127.0.0.1:%d\nupstream_tls: yes\n"
             "upstream_tls_ca_cert_file: %s\n",
             tls_redis_port, px_tls_certs()->ca);
    px_proxy_start(&env->proxy, yaml, NULL);
    c = px_connect(env->proxy.port);
    for (i = 0;; i++) { /* the slot map may still be coming */
        redisReply *r = px_cmd(c, "SET w v");
        int ok = r->type == REDIS_REPLY_STATUS;
        freeReplyObject(r);
        if (ok) {
            break;
        }
        cr_assert(i < 100, "no slot map over TLS");
        px_sleep_ms(50);
    }
    px_check_status(px_cmd(c, "SET a 1"), "OK");
    px_check_str(px_cmd(c, "GET a"), "1");
    px_check_int(px_cmd(c, "DEL a w"), 2);
    cr_assert_geq(tls_redis_all_tls(d), 2);
    redisFree(c);
    redisFree(d);
}

/* Redis requires a client certificate: without one the node is down, with
 * upstream_tls_cert_file + key it serves. */
Test(it_tls, mutual_tls, .fini = px_env_fini, .timeout = 60)
{
    const struct px_tls_certs *k = px_tls_certs();
    char more[2 * PX_PATH_MAX + 64];
    redisContext *c;

    tls_redis_port = px_tls_redis_start(&px_env()->redis, k->server, "yes");
    tls_proxy_start(NULL);
    tls_expect_down("certificate required");
    px_proxy_stop_clean(&px_env()->proxy, SIGTERM);

    snprintf(more, sizeof(more),
             "upstream_tls_cert_file: %s\nupstream_tls_key_file: %s\n",
             k->client, k->client_key);
    px_env()->proxy.port = 0;
    tls_proxy_start(more);
    c = px_connect(px_env()->proxy.port);
    px_check_status(px_cmd(c, "SET k v"), "OK");
    px_check_str(px_cmd(c, "GET k"), "v");
    redisFree(c);
}

/* Copies the file at `from` to "<tempdir>/<name>" (path in `out`). */
static void tls_copy(const char *from, char *out, size_t outlen,
                     const char *name)
{
    size_t len;
    char *text = px_read_file(from, &len);

    cr_assert_not_null(text, "%s unreadable", from);
    px_write_file(out, outlen, name, text);
    free(text);
}

/* GET k on `c` until it answers `want` (when not NULL) or, with `want`
 * NULL, this node's down error holding `reason`; every other answer is
 * one of those two. Up to 8 s: the backoff reaches 2 s. Returns the
 * number of tries. */
static int tls_poll_get(redisContext *c, const char *want, const char *reason)
{
    long long deadline = px_now_ms() + 8000;
    char prefix[64];
    int tries = 0;

    snprintf(prefix, sizeof(prefix), "ERR upstream 127.0.0.1:%d ",
             tls_redis_port);
    for (;;) {
        redisReply *r = px_cmd(c, "GET k");
        int ok = r->type == REDIS_REPLY_STRING && strcmp(r->str, "v") == 0;
        int down = r->type == REDIS_REPLY_ERROR &&
                   strncmp(r->str, prefix, strlen(prefix)) == 0;

        tries++;
        if (!ok && !down) {
            cr_assert_fail("GET k: type %d %s", r->type,
                           r->str != NULL ? r->str : "");
        }
        if (want != NULL ? ok : down && strstr(r->str, reason) != NULL) {
            freeReplyObject(r);
            return tries;
        }
        if (px_now_ms() >= deadline) {
            cr_assert_fail("GET k never gave %s: %s",
                           want != NULL ? want : reason,
                           r->str != NULL ? r->str : "(nil)");
        }
        freeReplyObject(r);
        px_sleep_ms(20);
    }
}

/* SIGHUP reloads the client certificate cellgate shows Redis (mutual
 * TLS): Redis is made to trust another CA only, and cellgate's
 * certificate file replaced by one of that CA. Until the SIGHUP a
 * reconnect is refused (the node is down); after it, reconnects work.
 * A connection made before goes on with its old context all along (a
 * subscriber's private connection), and a bad file keeps the old
 * context. */
Test(it_tls, sighup_reloads_the_upstream_certificate, .fini = px_env_fini,
     .timeout = 60)
{
    const struct px_tls_certs *k = px_tls_certs();
    struct px_env *env = px_env();
    char live[PX_PATH_MAX], more[2 * PX_PATH_MAX + 64];
    redisContext *d, *c, *sub;
    redisReply *r;

    tls_redis_port = px_tls_redis_start(&env->redis, k->server, "yes");
    tls_copy(k->client, live, sizeof(live), "client-live.crt");
    snprintf(more, sizeof(more),
             "upstream_tls_cert_file: %s\nupstream_tls_key_file: %s\n", live,
             k->client_key);
    tls_proxy_start(more);
    c = px_connect(env->proxy.port);
    px_check_status(px_cmd(c, "SET k v"), "OK");
    px_check_str(px_cmd(c, "GET k"), "v");
    sub = px_connect(env->proxy.port);
    r = px_cmd(sub, "SUBSCRIBE ch");
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    freeReplyObject(r);

    /* Redis trusts the other CA only; cellgate's file is of that CA, but
     * cellgate has not read it yet. */
    d = px_redis_connect(&env->redis, NULL);
    px_check_status(px_cmd(d, "CONFIG SET tls-ca-cert-file %s", k->other_ca),
                    "OK");
    tls_copy(k->client_other, live, sizeof(live), "client-live.crt");
    r = px_cmd(d, "CLIENT KILL TYPE normal SKIPME yes");
    cr_assert_eq(r->type, REDIS_REPLY_INTEGER);
    cr_assert_geq(r->integer, 1, "no shared connection killed");
    freeReplyObject(r);
    tls_poll_get(c, NULL, "unavailable: TLS error: tlsv1 alert unknown ca");

    /* A bad file: the old context stays (still refused). */
    px_write_file(live, sizeof(live), "client-live.crt", "not a cert\n");
    kill(env->proxy.pid, SIGHUP);
    px_file_wait(env->proxy.log, "upstream_tls certificates not reloaded",
                 3000);
    cr_assert(px_file_has(env->proxy.log, "upstream_tls_cert_file"),
              "the log does not name the file");
    tls_poll_get(c, NULL, "unavailable: TLS error: tlsv1 alert unknown ca");

    tls_copy(k->client_other, live, sizeof(live), "client-live.crt");
    kill(env->proxy.pid, SIGHUP);
    px_file_wait(env->proxy.log, "upstream_tls certificates reloaded", 3000);
    tls_poll_get(c, "v", NULL);
    px_check_status(px_cmd(c, "SET k v2"), "OK");
    px_check_str(px_cmd(c, "GET k"), "v2");
    /* The subscriber's connection, made with the old context, went on:
     * its client still gets what is published. */
    px_check_int(px_cmd(c, "PUBLISH ch hello"), 1);
    r = px_next(sub);
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    cr_assert_eq(r->elements, 3);
    cr_assert_str_eq(r->element[2]->str, "hello");
    freeReplyObject(r);
    cr_assert_eq(
        px_file_count(env->proxy.log, "upstream_tls certificates reloaded"), 1);
    redisFree(sub);
    redisFree(c);
    redisFree(d);
}

/* A certificate from a CA cellgate does not trust: down; with
 * upstream_tls_verify: no it serves, and cellgate warned at start. */
Test(it_tls, wrong_ca, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c;

    tls_redis_port =
        px_tls_redis_start(&px_env()->redis, px_tls_certs()->other, "no");
    tls_proxy_start(NULL);
    tls_expect_down("certificate verify failed: unable to get local issuer "
                    "certificate");
    px_proxy_stop_clean(&px_env()->proxy, SIGTERM);

    px_env()->proxy.port = 0;
    tls_proxy_start("upstream_tls_verify: no\n");
    c = px_connect(px_env()->proxy.port);
    px_check_status(px_cmd(c, "SET k v"), "OK");
    redisFree(c);
    cr_assert(px_file_has(px_env()->proxy.log, "upstream_tls_verify is no"),
              "no warning about upstream_tls_verify: no");
}

Test(it_tls, expired_certificate, .fini = px_env_fini, .timeout = 60)
{
    tls_redis_port =
        px_tls_redis_start(&px_env()->redis, px_tls_certs()->expired, "no");
    tls_proxy_start(NULL);
    tls_expect_down("certificate verify failed: certificate has expired");
}

/* The node's address is checked against the certificate's IP SANs. */
Test(it_tls, certificate_for_another_name, .fini = px_env_fini, .timeout = 60)
{
    tls_redis_port =
        px_tls_redis_start(&px_env()->redis, px_tls_certs()->wrong_name, "no");
    tls_proxy_start(NULL);
    tls_expect_down("certificate verify failed: IP address mismatch");
}

/* upstream_tls_server_name is the name checked (and sent as SNI). */
Test(it_tls, server_name, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c;

    tls_redis_port =
        px_tls_redis_start(&px_env()->redis, px_tls_certs()->server, "no");
    tls_proxy_start("upstream_tls_server_name: other.example\n");
    tls_expect_down("certificate verify failed: hostname mismatch");
    px_proxy_stop_clean(&px_env()->proxy, SIGTERM);

    px_env()->proxy.port = 0;
    tls_proxy_start("upstream_tls_server_name: localhost\n");
    c = px_connect(px_env()->proxy.port);
    px_check_status(px_cmd(c, "SET k v"), "OK");
    redisFree(c);
}

/* upstream_tls against a plaintext Redis: the handshake fails, and the
 * requests clients sent meanwhile never reach it (no byte of them leaves
 * before a handshake completes). */
Test(it_tls, plaintext_redis_gets_no_request, .fini = px_env_fini,
     .timeout = 60)
{
    struct px_env *env = px_env();
    redisContext *d;

    px_redis_start(&env->redis, NULL);
    tls_redis_port = env->redis.port;
    tls_proxy_start("upstream_user: u\nupstream_password: secret-pw\n");
    tls_expect_down("unavailable: TLS handshake");
    d = px_redis_connect(&env->redis, NULL);
    cr_assert_eq(px_cmdstat_calls(d, "get"), 0, "a GET reached Redis");
    cr_assert_eq(px_cmdstat_calls(d, "auth"), 0, "the AUTH reached Redis");
    redisFree(d);
}

#endif /* PX_TLS */
