/* Bounded proxy resources against hostile clients, with a bystander whose
 * replies are checked exactly throughout:
 *
 *   - output held behind an unfinished request (a BLPOP in front of a
 *     pipeline of large GETs, pushes to a RESP3 subscriber in a BLPOP)
 *     counts toward client_max_output_bytes: the client is closed and what
 *     was held for it is freed;
 *   - private upstream connections are capped per node
 *     (private_max_per_node): one more MULTI, SUBSCRIBE or BLPOP gets an
 *     error, the shared traffic goes on, Redis sees no more connections
 *     than the cap and the pools, and a slot given back is taken again. */
#include "tests/support/px_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/integration/cluster_fixture.h"
#include "tests/integration/fixture.h"

PX_TEST_SUITE(it_bounds);
PX_TEST_SUITE(it_bounds_cluster);

#define BIG_BYTES  (1024 * 1024)     /* value of the key GET in a flood */
#define HELD_LIMIT (8 * 1024 * 1024) /* client_max_output_bytes below */
/* GETs pipelined behind the BLPOP: 200 MB of replies, 25 times the
 * output limit. Not more: Redis copies every reply into its output
 * buffer, and 2,000 (2 GB) held a cluster node busy past the cluster's
 * node timeout, which then failed it over under the test. */
#define NGETS        200
#define PUSH_BYTES   (512 * 1024) /* one published message */
#define NPUBLISH     64           /* 32 MB of pushes: 4x the limit */
#define READ_WAIT_MS (PX_CLIENT_TIMEOUT_S * 1000)
#define WAIT_STEP_MS 20
#define WAIT_MS      10000
#define RSS_SLACK_KB (64 * 1024) /* allocator and ASan overhead */
#define NBYSTANDER   100         /* SET/GET pairs of one bystander round */
#define CAP          2           /* private_max_per_node below */
#define POOL         2           /* upstream_pool below */
#define IDLE         1           /* private_pool below */
#define ERR_CAP                                                                \
    "ERR max private upstream connections reached "                            \
    "(private_max_per_node 2)"

static const char bounds_yaml[] = "client_max_output_bytes: 8mb\n"
                                  "private_max_per_node: 2\n"
                                  "private_pool: 1\n"
                                  "upstream_pool: 2\n";

/* ---------------- Helpers ---------------- */

/* A small ASan quarantine, so the proxy's RSS shows what it holds rather
 * than what ASan keeps of freed memory. */
static void small_quarantine(void)
{
    const char *old = getenv("ASAN_OPTIONS");
    char opts[1024];

    snprintf(opts, sizeof(opts), "%s%squarantine_size_mb=16",
             old != NULL ? old : "", old != NULL && old[0] != '\0' ? ":" : "");
    setenv("ASAN_OPTIONS", opts, 1);
}

static void init_single(void)
{
    small_quarantine();
    px_env_prepare();
    px_redis_start(&px_env()->redis, NULL);
    px_proxy_start_for(&px_env()->proxy, &px_env()->redis, bounds_yaml);
}

static void init_cluster(void)
{
    small_quarantine();
    px_cluster_init();
    px_cluster_proxy_start(&px_env()->proxy, px_cluster(), bounds_yaml);
}

/* One round of a bystander: SET and GET of its own keys, pipelined, every
 * reply checked exactly. */
static void bystander_round(redisContext *c, int round)
{
    char want[32];
    int i;

    for (i = 0; i < NBYSTANDER; i++) {
        redisAppendCommand(c, "SET by:%d:%d v%d.%d", round, i, round, i);
        redisAppendCommand(c, "GET by:%d:%d", round, i);
    }
    for (i = 0; i < NBYSTANDER; i++) {
        snprintf(want, sizeof(want), "v%d.%d", round, i);
        px_check_status(px_next(c), "OK");
        px_check_str(px_next(c), want);
    }
}

/* Normal connections `node` sees, less the one asking. */
static int redis_connections(int port)
{
    redisContext *d = px_connect(port);
    redisReply *r = px_cmd(d, "CLIENT LIST TYPE normal");
    int n = 0;

    cr_assert_eq(r->type, REDIS_REPLY_STRING);
    for (const char *p = r->str; (p = strchr(p, '\n')) != NULL; p++) {
        n++;
    }
    freeReplyObject(r);
    redisFree(d);
    return n - 1;
}

/* Waits until Redis on `port` reports `want` blocked clients. */
static void wait_blocked(int port, long long want)
{
    redisContext *d = px_connect(port);
    long long deadline = px_now_ms() + WAIT_MS;
    long long n;

    while ((n = px_info_int(d, "blocked_clients")) != want &&
           px_now_ms() < deadline) {
        px_sleep_ms(WAIT_STEP_MS);
    }
    redisFree(d);
    cr_assert_eq(n, want, "blocked_clients %lld, want %lld", n, want);
}

/* Waits until the proxy's INFO shows `want` private connections held
 * (a client that quit gives its slot back once the proxy saw it go). */
static void wait_private(redisContext *c, long long want)
{
    long long deadline = px_now_ms() + WAIT_MS;
    long long n;

    while ((n = px_info_int(c, "private_connections")) != want &&
           px_now_ms() < deadline) {
        px_sleep_ms(WAIT_STEP_MS);
    }
    cr_assert_eq(n, want, "private_connections %lld, want %lld", n, want);
}

/* Reads from `fd` until the proxy closes it; asserts that it does. */
static void expect_closed(int fd, const char *who)
{
    char buf[4096];
    int closed = 0;

    px_raw_read_to_close(fd, buf, sizeof(buf), READ_WAIT_MS, &closed);
    cr_assert(closed, "%s: not disconnected", who);
}

/* Checks the proxy freed what it held for a client it closed: nothing is
 * held for anyone (the asking client's INFO is not stored yet), and the
 * RSS is back near where it was. */
static void expect_memory_returned(redisContext *c, long rss_before)
{
    struct px_child *proxy = &px_env()->proxy;
    long long deadline = px_now_ms() + WAIT_MS;
    long rss_after;

    cr_assert_eq(px_info_int(c, "client_output_bytes"), 0);
    cr_assert_eq(px_info_int(c, "private_connections"), 0);
    /* The replies Redis still sends for the closed client's GETs are read
     * and dropped; wait for the RSS to settle. */
    rss_after = px_rss_kb(proxy->pid);
    while (rss_after > rss_before + HELD_LIMIT / 1024 * 2 + RSS_SLACK_KB &&
           px_now_ms() < deadline) {
        px_sleep_ms(100);
        rss_after = px_rss_kb(proxy->pid);
    }
    cr_log_info("proxy RSS %ld kB -> %ld kB", rss_before, rss_after);
    cr_assert_leq(rss_after, rss_before + HELD_LIMIT / 1024 * 2 + RSS_SLACK_KB,
                  "RSS %ld kB -> %ld kB", rss_before, rss_after);
}

/* ---------------- Output held behind an unfinished request ------------- */

/* One request a 600 s: a second LIMITER CHECK ... WAIT is held that long. */
static const char wait_tree[] = "api:\n"
                                "  children:\n"
                                "    \"*\":\n"
                                "      limits: [0, 1, 600]\n";

static void init_single_limits(void)
{
    char path[PX_PATH_MAX], yaml[sizeof(bounds_yaml) + PX_PATH_MAX + 32];

    small_quarantine();
    px_env_prepare();
    px_write_file(path, sizeof(path), "limits.yaml", wait_tree);
    px_redis_start(&px_env()->redis, NULL);
    snprintf(yaml, sizeof(yaml), "%slimits_file: \"%s\"\n", bounds_yaml, path);
    px_proxy_start_for(&px_env()->proxy, &px_env()->redis, yaml);
}

/* Appends the RESP of the argv `argv` to out at *off. */
static void append_cmd(char *out, size_t *off, int argc,
                       const char *const *argv)
{
    *off += (size_t)sprintf(out + *off, "*%d\r\n", argc);
    for (int i = 0; i < argc; i++) {
        *off += (size_t)sprintf(out + *off, "$%zu\r\n%s\r\n", strlen(argv[i]),
                                argv[i]);
    }
}

/* An attacker sends `head` (a request that stays unfinished: a held WAIT,
 * a BLPOP on an empty list) and NGETS "GET <big>" behind it, reading
 * nothing: every GET reply (BIG_BYTES) is held for ordering. The proxy
 * closes it once they pass the limit, frees them, and a bystander's
 * replies stay exact during and after. */
static void held_flood(int head_argc, const char *const *head, const char *big)
{
    struct px_child *proxy = &px_env()->proxy;
    redisContext *by = px_connect(proxy->port);
    const char *get[2] = { "GET", big };
    char *flood = malloc(4096 + (size_t)NGETS * (32 + strlen(big)));
    char *value = malloc(BIG_BYTES);
    size_t off = 0;
    long rss_before;
    int fd, i;

    cr_assert_not_null(flood);
    cr_assert_not_null(value);
    memset(value, 'x', BIG_BYTES);
    px_check_status(px_cmd(by, "SET %s %b", big, value, (size_t)BIG_BYTES),
                    "OK");
    free(value);
    bystander_round(by, 0);
    rss_before = px_rss_kb(proxy->pid);
    cr_assert_gt(rss_before, 0);

    append_cmd(flood, &off, head_argc, head);
    for (i = 0; i < NGETS; i++) {
        append_cmd(flood, &off, 2, get);
    }
    fd = px_raw_connect(proxy->port, 4096);
    cr_assert_eq(px_raw_send(fd, flood, off), 0);
    free(flood);
    bystander_round(by, 1); /* during */
    expect_closed(fd, "client holding replies behind an unfinished one");
    close(fd);

    cr_assert(px_child_alive(proxy), "proxy died");
    cr_assert_eq(px_info_int(by, "client_output_limit_disconnections"), 1);
    expect_memory_returned(by, rss_before);
    bystander_round(by, 2); /* after */
    px_check_int(px_cmd(by, "STRLEN %s", big), BIG_BYTES);
    redisFree(by);
}

Test(it_bounds, replies_held_behind_limiter_wait_count_toward_output_limit,
     .init = init_single_limits, .fini = px_env_fini, .timeout = 120)
{
    /* The first CHECK is admitted; the second is due in 600 s and held. */
    static const char *const head[] = { "LIMITER", "CHECK", "api:k", "WAIT",
                                        "3600000" };
    redisContext *c = px_connect(px_env()->proxy.port);
    redisReply *r = px_cmd(c, "LIMITER CHECK api:k");

    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    cr_assert_eq(r->element[0]->integer, 0);
    freeReplyObject(r);
    redisFree(c);
    held_flood(5, head, "big");
}

Test(it_bounds_cluster, replies_held_behind_blpop_count_toward_output_limit,
     .init = init_cluster, .fini = px_cluster_fini, .timeout = 180)
{
    /* BLPOP holds the private connection of its node; GETs of a key of
     * another node are served over the shared ones, and held. */
    static const char *const head[] = { "BLPOP", "emptylist", "0" };
    struct px_cluster *cl = px_cluster();
    int node = px_cluster_master_of_key(cl, "emptylist", 9);
    char big[32];

    for (int k = 0;; k++) {
        snprintf(big, sizeof(big), "big%d", k);
        if (px_cluster_master_of_key(cl, big, strlen(big)) != node) {
            break;
        }
    }
    held_flood(3, head, big);
}

Test(it_bounds, pushes_to_a_resp3_subscriber_in_blpop_count_toward_limit,
     .init = init_single, .fini = px_env_fini, .timeout = 120)
{
    struct px_child *proxy = &px_env()->proxy;
    static const char cmds[] =
        "*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n"
        "*2\r\n$9\r\nSUBSCRIBE\r\n$2\r\nch\r\n"
        "*3\r\n$5\r\nBLPOP\r\n$9\r\nemptylist\r\n$1\r\n0\r\n";
    redisContext *by = px_connect(proxy->port);
    char *msg = malloc(PUSH_BYTES);
    long rss_before;
    long long n, deadline;
    int fd, i, zeros = 0;

    cr_assert_not_null(msg);
    memset(msg, 'm', PUSH_BYTES);
    bystander_round(by, 0);
    rss_before = px_rss_kb(proxy->pid);
    fd = px_raw_connect(proxy->port, 4096);
    cr_assert_eq(px_raw_send(fd, cmds, sizeof(cmds) - 1), 0);
    wait_blocked(px_env()->redis.port, 1);

    /* Every message reaches the subscriber's connection while its BLPOP
     * is unfinished: cellgate holds the pushes behind it. PUBLISH counts
     * the subscriber until cellgate closes it, then never again. */
    for (i = 0; i < NPUBLISH; i++) {
        redisReply *r = px_cmd(by, "PUBLISH ch %b", msg, (size_t)PUSH_BYTES);
        cr_assert_eq(r->type, REDIS_REPLY_INTEGER);
        cr_assert(r->integer == 0 || (r->integer == 1 && !zeros),
                  "PUBLISH %d: %lld", i, r->integer);
        zeros |= r->integer == 0;
        freeReplyObject(r);
    }
    free(msg);
    expect_closed(fd, "RESP3 subscriber in a BLPOP");
    close(fd);
    deadline = px_now_ms() + WAIT_MS;
    while ((n = px_info_int(by, "client_output_limit_disconnections")) == 0 &&
           px_now_ms() < deadline) {
        px_sleep_ms(WAIT_STEP_MS);
    }
    cr_assert_eq(n, 1);
    px_check_int(px_cmd(by, "PUBLISH ch after"), 0);
    expect_memory_returned(by, rss_before);
    bystander_round(by, 1);
    redisFree(by);
}

/* ---------------- Private connections per node ---------------- */

/* The shared connections and the idle private ones a node may see from
 * cellgate besides the CAP held ones (one more: the COMMAND asked at
 * start). */
#define ALLOWED_CONNS (CAP + POOL + IDLE + 1)

Test(it_bounds, private_connections_are_capped_per_node, .init = init_single,
     .fini = px_env_fini, .timeout = 60)
{
    struct px_child *proxy = &px_env()->proxy;
    redisContext *tx = px_connect(proxy->port);
    redisContext *sub = px_connect(proxy->port);
    redisContext *late = px_connect(proxy->port);
    redisContext *by = px_connect(proxy->port);
    redisReply *r;
    int conns;

    /* Two clients hold a private connection each. */
    px_check_status(px_cmd(tx, "MULTI"), "OK");
    px_check_status(px_cmd(tx, "SET tx:k 1"), "QUEUED");
    r = px_cmd(sub, "SUBSCRIBE news");
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    cr_assert_eq(r->element[2]->integer, 1);
    freeReplyObject(r);

    /* A third gets the error for each kind, and nothing else changes for
     * it: its shared traffic works, it is in no transaction. */
    px_check_error(px_cmd(late, "MULTI"), ERR_CAP);
    px_check_error(px_cmd(late, "BLPOP q 0"), ERR_CAP);
    px_check_error(px_cmd(late, "SUBSCRIBE other"), ERR_CAP);
    px_check_error(px_cmd(late, "WATCH w"), ERR_CAP);
    px_check_status(px_cmd(late, "SET late:k 7"), "OK");
    px_check_str(px_cmd(late, "GET late:k"), "7");
    px_check_error(px_cmd(late, "EXEC"), "ERR EXEC without MULTI");
    bystander_round(by, 0);
    cr_assert_eq(px_info_int(by, "private_connections"), CAP);
    cr_assert_eq(px_info_int(by, "private_connections_refused"), 4);
    conns = redis_connections(px_env()->redis.port);
    cr_assert_leq(conns, ALLOWED_CONNS, "Redis sees %d connections", conns);

    /* The transaction ends: its slot is free, and the third client takes
     * it. */
    r = px_cmd(tx, "EXEC");
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    cr_assert_eq(r->elements, 1);
    freeReplyObject(r);
    cr_assert_eq(px_info_int(by, "private_connections"), 1);
    cr_assert_eq(redisAppendCommand(late, "BLPOP q 0"), REDIS_OK);
    px_flush(late);
    wait_blocked(px_env()->redis.port, 1);
    px_check_error(px_cmd(tx, "MULTI"), ERR_CAP); /* now tx is the third */
    px_check_int(px_cmd(by, "LPUSH q x"), 1);
    r = px_next(late);
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    cr_assert_str_eq(r->element[1]->str, "x");
    freeReplyObject(r);

    /* The subscriber leaves: its slot is free too. */
    redisFree(sub);
    wait_private(by, 0);
    px_check_status(px_cmd(tx, "MULTI"), "OK");
    px_check_status(px_cmd(late, "MULTI"), "OK");
    px_check_status(px_cmd(tx, "INCR tx:n"), "QUEUED");
    r = px_cmd(tx, "EXEC");
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    cr_assert_eq(r->element[0]->integer, 1);
    freeReplyObject(r);
    px_check_status(px_cmd(late, "DISCARD"), "OK");
    bystander_round(by, 1);
    conns = redis_connections(px_env()->redis.port);
    cr_assert_leq(conns, ALLOWED_CONNS, "Redis sees %d connections", conns);
    redisFree(tx);
    redisFree(late);
    redisFree(by);
}

Test(it_bounds_cluster, private_connections_are_capped_per_node,
     .init = init_cluster, .fini = px_cluster_fini, .timeout = 180)
{
    struct px_cluster *cl = px_cluster();
    struct px_child *proxy = &px_env()->proxy;
    int node = px_cluster_master_of_key(cl, "{t}", 3);
    int port = px_cluster_port(cl, node);
    redisContext *tx = px_connect(proxy->port);
    redisContext *blk = px_connect(proxy->port);
    redisContext *late = px_connect(proxy->port);
    redisContext *by = px_connect(proxy->port);
    char other[32], want[96];
    redisReply *r;
    int conns, k;

    /* A key of another master, for the third client. */
    for (k = 0;; k++) {
        snprintf(other, sizeof(other), "o%d", k);
        if (px_cluster_master_of_key(cl, other, strlen(other)) != node) {
            break;
        }
    }

    /* Two clients hold a private connection each on the node of {t}. */
    px_check_status(px_cmd(tx, "MULTI"), "OK");
    px_check_status(px_cmd(tx, "SET {t}a 1"), "QUEUED");
    cr_assert_eq(redisAppendCommand(blk, "BLPOP {t}q 0"), REDIS_OK);
    px_flush(blk);
    wait_blocked(port, 1);

    /* The third is refused there, inside a transaction too (EXEC then
     * aborts, as after any command refused while queuing), but not on
     * another node, and its shared traffic works. */
    px_check_error(px_cmd(late, "BLPOP {t}q2 0"), ERR_CAP);
    px_check_error(px_cmd(late, "SUBSCRIBE {t}ch"), ERR_CAP);
    px_check_status(px_cmd(late, "MULTI"), "OK");
    px_check_error(px_cmd(late, "SET {t}b 2"), ERR_CAP);
    px_check_error_prefix(px_cmd(late, "EXEC"), "EXECABORT");
    px_check_status(px_cmd(late, "SET {t}b 3"), "OK");
    px_check_str(px_cmd(late, "GET {t}b"), "3");
    px_check_nil(px_cmd(late, "BLPOP %s 0.01", other));
    bystander_round(by, 0);
    cr_assert_eq(px_info_int(by, "private_connections"), CAP);
    cr_assert_eq(px_info_int(by, "private_connections_refused"), 3);
    snprintf(want, sizeof(want),
             "\r\nprivate_connections_by_node:127.0.0.1:%d=2\r\n", port);
    r = px_cmd(by, "INFO");
    cr_assert_eq(r->type, REDIS_REPLY_STRING);
    cr_assert_not_null(strstr(r->str, want), "INFO: %s", r->str);
    freeReplyObject(r);
    conns = redis_connections(port);
    cr_assert_leq(conns, ALLOWED_CONNS, "node sees %d connections", conns);

    /* The blocked client is served and gives its slot back: the third
     * takes it, with a transaction on {t}. */
    px_check_int(px_cmd(by, "LPUSH {t}q x"), 1);
    r = px_next(blk);
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    cr_assert_str_eq(r->element[1]->str, "x");
    freeReplyObject(r);
    px_check_status(px_cmd(late, "MULTI"), "OK");
    px_check_status(px_cmd(late, "INCR {t}n"), "QUEUED");
    r = px_cmd(late, "EXEC");
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    cr_assert_eq(r->element[0]->integer, 1);
    freeReplyObject(r);
    r = px_cmd(tx, "EXEC");
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    cr_assert_eq(r->elements, 1);
    freeReplyObject(r);
    px_check_str(px_cmd(by, "GET {t}a"), "1");
    bystander_round(by, 1);
    conns = redis_connections(port);
    cr_assert_leq(conns, ALLOWED_CONNS, "node sees %d connections", conns);
    redisFree(tx);
    redisFree(blk);
    redisFree(late);
    redisFree(by);
}

/* The port of the one node where the proxy's clients hold private
 * connections (INFO private_connections_by_node). */
static int held_node_port(redisContext *c)
{
    static const char field[] = "\r\nprivate_connections_by_node:127.0.0.1:";
    redisReply *r = px_cmd(c, "INFO");
    const char *at;
    int port;

    cr_assert_eq(r->type, REDIS_REPLY_STRING);
    at = strstr(r->str, field);
    cr_assert_not_null(at, "INFO: %s", r->str);
    port = atoi(at + strlen(field));
    freeReplyObject(r);
    return port;
}

Test(it_bounds_cluster, tracked_reads_on_a_full_node_are_refused,
     .init = init_cluster, .fini = px_cluster_fini, .timeout = 180)
{
    struct px_cluster *cl = px_cluster();
    struct px_child *proxy = &px_env()->proxy;
    redisContext *tr = px_connect(proxy->port);
    redisContext *b1 = px_connect(proxy->port);
    redisContext *b2 = px_connect(proxy->port);
    redisContext *by = px_connect(proxy->port);
    char key[32];
    redisReply *r;
    int home, node, k, conns;

    /* A tracking client reads keys of other nodes over private connections
     * there that track too. */
    px_check_status(px_cmd(tr, "CLIENT TRACKING on"), "OK");
    home = held_node_port(by);
    for (k = 0;; k++) {
        snprintf(key, sizeof(key), "tk%d", k);
        node = px_cluster_master_of_key(cl, key, strlen(key));
        if (px_cluster_port(cl, node) != home) {
            break;
        }
    }

    /* Two blocked clients fill that node: a read there cannot be tracked,
     * so it is refused rather than served untracked. */
    cr_assert_eq(redisAppendCommand(b1, "BLPOP {%s}a 0", key), REDIS_OK);
    cr_assert_eq(redisAppendCommand(b2, "BLPOP {%s}b 0", key), REDIS_OK);
    px_flush(b1);
    px_flush(b2);
    wait_blocked(px_cluster_port(cl, node), 2);
    px_check_error(px_cmd(tr, "GET %s", key), ERR_CAP);
    bystander_round(by, 0);
    conns = redis_connections(px_cluster_port(cl, node));
    cr_assert_leq(conns, ALLOWED_CONNS, "node sees %d connections", conns);

    /* One is served and gives its slot back: the read is served there,
     * on a private connection of the tracking client's own. */
    px_check_int(px_cmd(by, "LPUSH {%s}a x", key), 1);
    r = px_next(b1);
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    freeReplyObject(r);
    px_check_nil(px_cmd(tr, "GET %s", key));
    cr_assert_eq(px_info_int(by, "private_connections"), 3);
    px_check_int(px_cmd(by, "LPUSH {%s}b y", key), 1);
    r = px_next(b2);
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    freeReplyObject(r);
    bystander_round(by, 1);
    cr_assert_eq(px_info_int(by, "private_connections_refused"), 1);
    redisFree(tr);
    redisFree(b1);
    redisFree(b2);
    redisFree(by);
}
