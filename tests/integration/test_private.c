/* A client's private connection when something waits on it or it is lost,
 * against real redis-servers: a SYNC parked behind the replies its
 * connection owes goes on once they are in (or fails with them when the
 * connection is lost, or is dropped when its client leaves); a client whose
 * Redis-side state (a transaction, WATCH, a tracking cache on another
 * node) is lost with its connection gets the replies it is owed, in order,
 * then the connection closes, as a dropped Redis connection would; a
 * client with no state left gets the error and goes on. Beside each, a
 * bystander's pipeline keeps its own replies.
 *
 * Connections are made to wait with what Redis does itself: a BLPOP on an
 * empty list, or CLIENT PAUSE WRITE (a write queued in a transaction is
 * postponed too); the private connection is found in CLIENT LIST by what it
 * waits in, and lost with CLIENT KILL ID. */
#include "tests/support/px_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/integration/cluster_fixture.h"
#include "tests/integration/fixture.h"

PX_TEST_SUITE(it_private);

#define BYSTANDER_PIPE 50 /* SET/GET pairs a bystander has in flight */

static void init_all_commands(void)
{
    px_env_prepare();
    px_redis_start(&px_env()->redis, NULL);
    px_proxy_start_for(&px_env()->proxy, &px_env()->redis,
                       "commands: allcommands\n");
}

/* The id of the connection Redis (`d`) lists with `needle` in its CLIENT
 * LIST line (" cmd=blpop ", " flags=xb "), polled until one is there. */
static long long waiting_client(redisContext *d, const char *needle)
{
    long long deadline = px_now_ms() + 5000;

    for (;;) {
        redisReply *r = px_cmd(d, "CLIENT LIST");
        const char *hit;
        long long id = -1;

        cr_assert_eq(r->type, REDIS_REPLY_STRING);
        hit = strstr(r->str, needle);
        if (hit != NULL) {
            const char *line = hit;
            while (line > r->str && line[-1] != '\n') {
                line--;
            }
            cr_assert_eq(strncmp(line, "id=", 3), 0, "%s", line);
            id = atoll(line + 3);
        }
        freeReplyObject(r);
        if (id > 0) {
            return id;
        }
        cr_assert(px_now_ms() < deadline, "no connection with '%s'", needle);
        px_sleep_ms(10);
    }
}

/* Polls until Redis (`d`) lists no connection with `needle`. */
static void no_waiting_client(redisContext *d, const char *needle)
{
    long long deadline = px_now_ms() + 5000;

    for (;;) {
        redisReply *r = px_cmd(d, "CLIENT LIST");
        int found;

        cr_assert_eq(r->type, REDIS_REPLY_STRING);
        found = strstr(r->str, needle) != NULL;
        freeReplyObject(r);
        if (!found) {
            return;
        }
        cr_assert(px_now_ms() < deadline, "still a connection with '%s'",
                  needle);
        px_sleep_ms(10);
    }
}

/* Ends the connection `id` on Redis (`d`), as a Redis restart or an
 * operator would. */
static void kill_client(redisContext *d, long long id)
{
    px_check_int(px_cmd(d, "CLIENT KILL ID %lld", id), 1);
}

/* A bystander's pipeline of its own keys, sent (not read). */
static void bystander_send(redisContext *b, const char *tag)
{
    for (int i = 0; i < BYSTANDER_PIPE; i++) {
        redisAppendCommand(b, "SET by:%s:%d v%d", tag, i, i);
        redisAppendCommand(b, "GET by:%s:%d", tag, i);
    }
    px_flush(b);
}

/* Its replies: each its own, in order. */
static void bystander_check(redisContext *b)
{
    char want[16];

    for (int i = 0; i < BYSTANDER_PIPE; i++) {
        snprintf(want, sizeof(want), "v%d", i);
        px_check_status(px_next(b), "OK");
        px_check_str(px_next(b), want);
    }
}

/* What a client is told when its private connection to `port` is lost
 * under a request it is owed. */
static void lost_error(char *out, size_t outlen, int port)
{
    snprintf(out, outlen, "-ERR upstream 127.0.0.1:%d connection lost\r\n",
             port);
}

/* Reads from `fd` until the proxy closes it, drops the ": <errno text>"
 * that a reset (rather than an EOF) adds to "connection lost", and asserts
 * that what came is exactly `want`, then the close. */
static void expect_then_close(int fd, const char *want)
{
    static char got[65536];
    int closed = 0;
    char *p;

    px_raw_read_to_close(fd, got, sizeof(got), 5000, &closed);
    while ((p = strstr(got, "connection lost: ")) != NULL) {
        char *eol = strstr(p, "\r\n");
        cr_assert_not_null(eol);
        memmove(p + 15, eol, strlen(eol) + 1);
    }
    cr_assert_str_eq(got, want);
    cr_assert(closed, "the client was not closed after '%s'", got);
}

/* The next line `fd` reads, CRLF included, with the ": <errno text>" of
 * "connection lost" dropped (static). */
static const char *read_line(int fd)
{
    static char line[512];
    size_t n = 0;
    int closed = 0;
    char *p;

    while (n < 2 || memcmp(line + n - 2, "\r\n", 2) != 0) {
        cr_assert(n + 1 < sizeof(line) &&
                      px_raw_read(fd, line + n, 1, 5000, &closed) == 1,
                  "no whole line: '%.*s'", (int)n, line);
        n++;
    }
    line[n] = '\0';
    if ((p = strstr(line, "connection lost: ")) != NULL) {
        memmove(p + 15, line + n - 2, 3);
    }
    return line;
}

/* ---------------- SYNC parked behind owed replies ---------------- */

Test(it_private, sync_goes_on_once_the_replies_before_it_are_in,
     .init = init_all_commands, .fini = px_env_fini, .timeout = 60)
{
    static const char pipe[] = "SET s:a 1\r\nBLPOP s:q 0\r\nSYNC\r\n";
    static const char head[] = "+OK\r\n*2\r\n$3\r\ns:q\r\n$1\r\nx\r\n";
    redisContext *d = px_redis_connect(&px_env()->redis, NULL);
    redisContext *b = px_connect(px_env()->proxy.port);
    int fd = px_raw_connect(px_env()->proxy.port, 0), closed = 0;
    char got[256] = "";
    size_t n = 0;
    long long deadline = px_now_ms() + 5000;

    /* The SYNC reaches the private connection while Redis owes it the
     * BLPOP: Redis would refuse it there ("pending output"), so it waits
     * for the BLPOP's reply, then goes. */
    cr_assert_eq(px_raw_send(fd, pipe, sizeof(pipe) - 1), 0);
    waiting_client(d, " cmd=blpop ");
    bystander_send(b, "sync");
    px_check_int(px_cmd(d, "RPUSH s:q x"), 1);
    bystander_check(b);
    px_raw_expect(fd, head, sizeof(head) - 1);
    while (px_now_ms() < deadline && !closed && strstr(got, "REDIS") == NULL) {
        n += px_raw_read(fd, got + n, sizeof(got) - 1 - n, 100, &closed);
        got[n] = '\0';
    }
    cr_assert(got[0] == '$' && strstr(got, "REDIS") != NULL,
              "no RDB after the replies: '%s'", got);
    px_info_poll(d, "connected_slaves", 1, 300);
    close(fd);
    px_check_str(px_cmd(b, "GET s:a"), "1");
    redisFree(b);
    redisFree(d);
}

Test(it_private, a_client_that_leaves_while_its_sync_waits_harms_nobody,
     .init = init_all_commands, .fini = px_env_fini, .timeout = 60)
{
    static const char pipe[] = "BLPOP s:q 0\r\nSYNC\r\n";
    redisContext *d = px_redis_connect(&px_env()->redis, NULL);
    redisContext *b = px_connect(px_env()->proxy.port);
    int fd = px_raw_connect(px_env()->proxy.port, 0);

    cr_assert_eq(px_raw_send(fd, pipe, sizeof(pipe) - 1), 0);
    waiting_client(d, " cmd=blpop ");
    bystander_send(b, "left");
    close(fd);
    /* Its connection closes with it: the BLPOP pops nothing, and the
     * SYNC parked behind it never reaches Redis. */
    no_waiting_client(d, " cmd=blpop ");
    bystander_check(b);
    px_check_int(px_cmd(b, "RPUSH s:q x"), 1);
    px_check_int(px_cmd(b, "LLEN s:q"), 1);
    cr_assert_eq(px_info_int(d, "connected_slaves"), 0);
    cr_assert_eq(px_cmdstat_calls(d, "sync"), 0);
    bystander_send(b, "after");
    bystander_check(b);
    redisFree(b);
    redisFree(d);
}

Test(it_private, a_lost_connection_fails_the_waiting_sync_then_closes,
     .init = init_all_commands, .fini = px_env_fini, .timeout = 60)
{
    static const char pipe[] = "PING\r\nBLPOP s:q 0\r\nSYNC\r\n";
    redisContext *d = px_redis_connect(&px_env()->redis, NULL);
    redisContext *b = px_connect(px_env()->proxy.port);
    int fd = px_raw_connect(px_env()->proxy.port, 0);
    char err[128], want[512];

    cr_assert_eq(px_raw_send(fd, pipe, sizeof(pipe) - 1), 0);
    kill_client(d, waiting_client(d, " cmd=blpop "));
    /* The BLPOP and the SYNC parked behind it fail, in order; the
     * replication link it asked for is gone, so the client is closed. */
    lost_error(err, sizeof(err), px_env()->redis.port);
    snprintf(want, sizeof(want), "+PONG\r\n%s%s", err, err);
    bystander_send(b, "lost");
    expect_then_close(fd, want);
    close(fd);
    bystander_check(b);
    cr_assert_eq(px_cmdstat_calls(d, "sync"), 0);
    redisFree(b);
    redisFree(d);
}

/* ---------------- Redis-side state lost with the connection ------------ */

Test(it_private, a_lost_watch_closes_after_the_owed_replies,
     .init = px_env_init, .fini = px_env_fini, .timeout = 60)
{
    static const char pipe[] =
        "WATCH w:k\r\nSET w:a 1\r\nBLPOP w:q 0\r\nGET w:a\r\nECHO last\r\n";
    redisContext *d = px_redis_connect(&px_env()->redis, NULL);
    redisContext *b = px_connect(px_env()->proxy.port);
    int fd = px_raw_connect(px_env()->proxy.port, 0);
    char err[128], want[512];

    cr_assert_eq(px_raw_send(fd, pipe, sizeof(pipe) - 1), 0);
    bystander_send(b, "watch");
    kill_client(d, waiting_client(d, " cmd=blpop "));
    /* What was answered, then the errors of what was owed, and the reply
     * cellgate gives itself (ECHO), in order; then the close: the WATCH
     * is gone, an EXEC would run unguarded. */
    lost_error(err, sizeof(err), px_env()->redis.port);
    snprintf(want, sizeof(want), "+OK\r\n+OK\r\n%s%s$4\r\nlast\r\n", err, err);
    expect_then_close(fd, want);
    close(fd);
    bystander_check(b);
    px_check_str(px_cmd(b, "GET w:a"), "1");
    redisFree(b);
    redisFree(d);
}

Test(it_private, a_lost_transaction_closes_after_the_owed_replies,
     .init = px_env_init, .fini = px_env_fini, .timeout = 60)
{
    static const char begin[] = "MULTI\r\nSET t:a 1\r\n";
    static const char rest[] = "SET t:b 2\r\nGET t:a\r\n";
    redisContext *d = px_redis_connect(&px_env()->redis, NULL);
    redisContext *b = px_connect(px_env()->proxy.port);
    int fd = px_raw_connect(px_env()->proxy.port, 0);
    char err[128], want[512];
    long long id;

    cr_assert_eq(px_raw_send(fd, begin, sizeof(begin) - 1), 0);
    px_raw_expect(fd, "+OK\r\n+QUEUED\r\n", 14);
    /* Redis postpones the next write, queued or not, so the connection
     * owes both replies when it is lost. */
    px_check_status(px_cmd(d, "CLIENT PAUSE 10000 WRITE"), "OK");
    cr_assert_eq(px_raw_send(fd, rest, sizeof(rest) - 1), 0);
    id = waiting_client(d, " flags=xb ");
    bystander_send(b, "multi");
    kill_client(d, id);
    px_check_status(px_cmd(d, "CLIENT UNPAUSE"), "OK");
    lost_error(err, sizeof(err), px_env()->redis.port);
    snprintf(want, sizeof(want), "%s%s", err, err);
    expect_then_close(fd, want);
    close(fd);
    bystander_check(b);
    /* The transaction never ran. */
    px_check_nil(px_cmd(b, "GET t:a"));
    px_check_nil(px_cmd(b, "GET t:b"));
    redisFree(b);
    redisFree(d);
}

Test(it_private, a_client_with_no_state_left_goes_on_after_the_error,
     .init = px_env_init, .fini = px_env_fini, .timeout = 60)
{
    static const char pipe[] = "BLPOP n:q 0\r\n";
    redisContext *d = px_redis_connect(&px_env()->redis, NULL);
    int fd = px_raw_connect(px_env()->proxy.port, 0);
    char err[128];

    /* A blocking call holds a connection but no state: losing it is an
     * error for the call, and the client stays. */
    cr_assert_eq(px_raw_send(fd, pipe, sizeof(pipe) - 1), 0);
    kill_client(d, waiting_client(d, " cmd=blpop "));
    lost_error(err, sizeof(err), px_env()->redis.port);
    cr_assert_str_eq(read_line(fd), err);
    cr_assert_eq(px_raw_send(fd, "ECHO still\r\n", 12), 0);
    px_raw_expect(fd, "$5\r\nstill\r\n", 11);
    close(fd);
    redisFree(d);
}

/* ---------------- A tracking client's connection on another node ------ */

static void init_cluster(void)
{
    px_env_prepare();
    px_cluster_start(px_cluster(), 3, 0);
    px_cluster_proxy_start(&px_env()->proxy, px_cluster(), NULL);
}

/* A key whose master is `node`, into out. */
static void key_on(int node, const char *prefix, char *out, size_t outlen)
{
    for (int i = 0; i < 10000; i++) {
        snprintf(out, outlen, "%s%d", prefix, i);
        if (px_cluster_master_of_key(px_cluster(), out, strlen(out)) == node) {
            return;
        }
    }
    cr_assert_fail("no key of node %d", node);
}

/* Reads from `fd` until what came ends with `tail`; returns it (static). */
static const char *read_until(int fd, const char *tail)
{
    static char got[4096];
    size_t n = 0, tl = strlen(tail);
    int closed = 0;
    long long deadline = px_now_ms() + 5000;

    while (px_now_ms() < deadline && !closed &&
           (n < tl || memcmp(got + n - tl, tail, tl) != 0)) {
        n += px_raw_read(fd, got + n, sizeof(got) - 1 - n, 100, &closed);
    }
    got[n] = '\0';
    cr_assert(n >= tl && memcmp(got + n - tl, tail, tl) == 0,
              "no '%s' at the end of '%s'", tail, got);
    return got;
}

Test(it_private, a_lost_tracking_connection_closes_after_the_owed_replies,
     .init = init_cluster, .fini = px_cluster_fini, .timeout = 120)
{
    static const char begin[] = "HELLO 3\r\nCLIENT TRACKING on\r\n";
    struct px_cluster *cl = px_cluster();
    redisContext *b = px_connect(px_env()->proxy.port);
    redisContext *d[3];
    int fd = px_raw_connect(px_env()->proxy.port, 0);
    char kmain[32], kaux[32], req[512], want[512], err[128];
    int main_node = -1, aux_node, i;
    long long id;

    cr_assert_eq(px_raw_send(fd, begin, sizeof(begin) - 1), 0);
    read_until(fd, "+OK\r\n");
    /* Tracking began on a connection of the client's own on one node;
     * reads of another node's keys go on one more there (its aux one). */
    for (i = 0; i < 3; i++) {
        redisReply *r;
        d[i] = px_cluster_connect(cl, i);
        r = px_cmd(d[i], "CLIENT LIST");
        if (strstr(r->str, " flags=t ") != NULL) {
            main_node = i;
        }
        freeReplyObject(r);
    }
    cr_assert_geq(main_node, 0, "no tracking connection on any node");
    aux_node = (main_node + 1) % 3;
    key_on(main_node, "trkm:", kmain, sizeof(kmain));
    key_on(aux_node, "trka:", kaux, sizeof(kaux));
    px_check_status(px_cmd(b, "SET %s main", kmain), "OK");
    px_check_status(px_cmd(b, "SET %s aux", kaux), "OK");
    snprintf(req, sizeof(req), "GET %s\r\nGET %s\r\n", kmain, kaux);
    cr_assert_eq(px_raw_send(fd, req, strlen(req)), 0);
    read_until(fd, "$4\r\nmain\r\n$3\r\naux\r\n");
    waiting_client(d[aux_node], " flags=t ");
    /* A write on the aux node is postponed there, a read on the main node
     * behind it is answered; then the aux connection is lost. */
    px_check_status(px_cmd(d[aux_node], "CLIENT PAUSE 10000 WRITE"), "OK");
    snprintf(req, sizeof(req), "SET %s changed\r\nGET %s\r\n", kaux, kmain);
    cr_assert_eq(px_raw_send(fd, req, strlen(req)), 0);
    id = waiting_client(d[aux_node], " flags=bt ");
    bystander_send(b, "trk");
    kill_client(d[aux_node], id);
    px_check_status(px_cmd(d[aux_node], "CLIENT UNPAUSE"), "OK");
    /* The aux node's invalidations are lost with it: the client's cache
     * cannot be trusted, so it is closed after what it is owed. */
    lost_error(err, sizeof(err), px_cluster_port(cl, aux_node));
    snprintf(want, sizeof(want), "%s$4\r\nmain\r\n", err);
    expect_then_close(fd, want);
    close(fd);
    bystander_check(b);
    px_check_str(px_cmd(b, "GET %s", kaux), "aux");
    for (i = 0; i < 3; i++) {
        redisFree(d[i]);
    }
    redisFree(b);
}
