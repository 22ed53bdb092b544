/* The metrics: the Prometheus endpoint (metrics_listen) scraped over a
 * plain TCP socket, and the same numbers in INFO. Decision counts exact
 * against the traffic sent, in embedded, single and cluster mode; latency
 * histograms; per-node counters; reloads and the limits file's hash;
 * clients by lib-name. Then hostile HTTP clients (an oversized head, a
 * slow partial request, garbage, a flood of connections): the endpoint
 * keeps answering and a RESP client beside them gets exactly its replies. */
#include "tests/support/px_test.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "parser/slot.h"
#include "tests/integration/cluster_fixture.h"
#include "tests/integration/fixture.h"
#include "tests/integration/limiter_support.h"

PX_TEST_SUITE(it_metrics);

/* user:<id> allows 6 at once (max_burst 5, 6 per hour); user:<id>:trade
 * allows far more, so in a check of user:<id>:trade the user level is the
 * one that refuses. */
static const char limits_yaml[] = "user:\n"
                                  "  children:\n"
                                  "    \"*\":\n"
                                  "      limits: [5, 6, 3600]\n"
                                  "      children:\n"
                                  "        trade:\n"
                                  "          limits: [100, 100, 60]\n";

#define HTTP_TIMEOUT_MS 5000
#define SCRAPE_MAX      (256 * 1024)
#define MAX_CONNS       16 /* METRICS_HTTP_MAX_CONNS */

static int metrics_port;
static char metrics_conf[96];

/* ---------------- Setup ---------------- */

static void start_with(enum px_mode mode, const char *yaml, const char *more)
{
    char extra[192];

    metrics_port = px_free_port();
    snprintf(metrics_conf, sizeof(metrics_conf),
             "metrics_listen: 127.0.0.1:%d\n", metrics_port);
    snprintf(extra, sizeof(extra), "%s%s", metrics_conf,
             more != NULL ? more : "");
    px_limits_start(mode, yaml, extra);
}

static void start(enum px_mode mode, const char *more)
{
    start_with(mode, limits_yaml, more);
}

static void init_embedded(void)
{
    start(PX_MODE_EMBEDDED, NULL);
}

static void init_single(void)
{
    start(PX_MODE_SINGLE, NULL);
}

static void init_cluster(void)
{
    start(PX_MODE_CLUSTER, NULL);
}

static void init_fail_open(void)
{
    start(PX_MODE_SINGLE, "store_down_policy: fail_open\n"
                          "command_timeout_ms: 300\n");
}

static void init_fail_open_cluster(void)
{
    start(PX_MODE_CLUSTER, "store_down_policy: fail_open\n"
                           "command_timeout_ms: 300\n"
                           "busy_reply_threshold_ms: 0\n");
}

/* ---------------- HTTP ---------------- */

/* Sends `req` on a new connection and reads the response until the
 * endpoint closes; returns it (static storage). */
static const char *http_exchange(const char *req, size_t len)
{
    static char resp[SCRAPE_MAX];
    int fd = px_raw_connect(metrics_port, 0);
    int closed = 0;

    cr_assert_eq(px_raw_send(fd, req, len), 0);
    px_raw_read_to_close(fd, resp, sizeof(resp), HTTP_TIMEOUT_MS, &closed);
    close(fd);
    cr_assert(closed, "the endpoint did not close after its response");
    return resp;
}

/* GET /metrics: asserts a 200 in the exposition format, returns the body
 * with a newline in front (so every series starts after a '\n'). */
static char *scrape(void)
{
    static const char req[] = "GET /metrics HTTP/1.1\r\nHost: cellgate\r\n"
                              "User-Agent: it_metrics\r\n\r\n";
    static char body[SCRAPE_MAX + 1];
    const char *resp = http_exchange(req, sizeof(req) - 1);
    const char *b = strstr(resp, "\r\n\r\n");

    cr_assert(strncmp(resp, "HTTP/1.1 200 OK\r\n", 17) == 0, "%.80s", resp);
    cr_assert_not_null(strstr(resp, "Content-Type: text/plain; "
                                    "version=0.0.4"));
    cr_assert_not_null(b);
    snprintf(body, sizeof(body), "\n%s", b + 4);
    return body;
}

/* The value of `series` (the whole name with labels) in `body`; asserts it
 * is there. */
static double value_of(const char *body, const char *series)
{
    char pat[512];
    const char *p;

    snprintf(pat, sizeof(pat), "\n%s ", series);
    p = strstr(body, pat);
    cr_assert_not_null(p, "no series %s in:\n%s", series, body);
    return strtod(p + strlen(pat), NULL);
}

static long long count_of(const char *body, const char *series)
{
    return (long long)value_of(body, series);
}

static long long decisions(const char *body, const char *rule,
                           const char *result)
{
    char s[256];

    snprintf(s, sizeof(s),
             "cellgate_limiter_decisions_total{rule=\"%s\",result=\"%s\"}",
             rule, result);
    return count_of(body, s);
}

/* Asserts the six results of `rule`. */
static void check_rule(const char *body, const char *rule, long long allowed,
                       long long limited, long long near, long long errors,
                       long long fail_open)
{
    cr_assert_eq(decisions(body, rule, "allowed"), allowed, "%s allowed", rule);
    cr_assert_eq(decisions(body, rule, "limited"), limited, "%s limited", rule);
    cr_assert_eq(decisions(body, rule, "near_limit"), near, "%s near_limit",
                 rule);
    cr_assert_eq(decisions(body, rule, "shadow_limited"), 0,
                 "%s shadow_limited", rule);
    cr_assert_eq(decisions(body, rule, "errors"), errors, "%s errors", rule);
    cr_assert_eq(decisions(body, rule, "fail_open"), fail_open, "%s fail_open",
                 rule);
}

/* Sum of every series of the family `name` (any labels). */
static long long family_sum(const char *body, const char *name)
{
    char pat[128];
    const char *p = body;
    long long sum = 0;
    int n = 0;

    snprintf(pat, sizeof(pat), "\n%s{", name);
    while ((p = strstr(p, pat)) != NULL) {
        const char *sp = strchr(p + 1, ' ');
        cr_assert_not_null(sp);
        sum += strtoll(sp + 1, NULL, 10);
        p = sp;
        n++;
    }
    cr_assert(n > 0, "no series of %s", name);
    return sum;
}

/* ---------------- Decisions ---------------- */

/* 10 checks of user:alex:trade against user:* (6 allowed) and
 * user:*:trade (100): the user level admits 6 (the 5th and 6th with at
 * least 0.8 of it used: near_limit) and refuses 4; the trade level admits
 * the 6 checks that went through and counts nothing in the 4 refused ones.
 * Three CL.THROTTLE of a limit of 2: allowed 2 (the 2nd near), limited 1. */
static void decisions_body(void)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    const char *body;
    int i;

    for (i = 0; i < 10; i++) {
        struct px_five f =
            px_take_five(px_cmd(c, "LIMITER CHECK user:alex:trade"), "check");
        cr_assert_eq(f.limited, i < 6 ? 0 : 1, "check %d", i);
    }
    for (i = 0; i < 3; i++) {
        struct px_five f =
            px_take_five(px_cmd(c, "CL.THROTTLE th 1 1 60"), "throttle");
        cr_assert_eq(f.limited, i < 2 ? 0 : 1, "throttle %d", i);
    }
    /* A PEEK decides nothing. */
    px_take_five(px_cmd(c, "LIMITER PEEK user:alex:trade"), "peek");
    /* A forwarded command is timed where there is a node to send it to. */
    freeReplyObject(px_cmd(c, "GET x"));
    body = scrape();
    cr_assert_eq(count_of(body, "cellgate_forward_duration_seconds_count"),
                 px_mode_now() == PX_MODE_EMBEDDED ? 0 : 1);
    check_rule(body, "user:*", 6, 4, 2, 0, 0);
    check_rule(body, "user:*:trade", 6, 0, 0, 0, 0);
    check_rule(body, "cl.throttle", 2, 1, 1, 0, 0);
    /* Every CL.THROTTLE and LIMITER request is timed. */
    cr_assert_eq(count_of(body, "cellgate_decision_duration_seconds_count"),
                 14);
    cr_assert_eq(count_of(body, "cellgate_decision_duration_seconds_bucket{"
                                "le=\"+Inf\"}"),
                 14);
    redisFree(c);
}

Test(it_metrics, decisions_are_counted_per_rule_embedded, .init = init_embedded,
     .fini = px_env_fini, .timeout = 60)
{
    decisions_body();
}

Test(it_metrics, decisions_are_counted_per_rule_single, .init = init_single,
     .fini = px_env_fini, .timeout = 60)
{
    decisions_body();
}

Test(it_metrics, decisions_are_counted_per_rule_cluster, .init = init_cluster,
     .fini = px_env_fini, .timeout = 120)
{
    decisions_body();
}

/* A key of the wrong type: CL.THROTTLE and a CHECK whose limiter key holds
 * a list count as errors, under their rules. */
/* user:<id> is a shadow level of 3 at once, over a real trade level. */
static const char shadow_yaml[] = "user:\n"
                                  "  children:\n"
                                  "    \"*\":\n"
                                  "      limits: [2, 1, 3600]\n"
                                  "      shadow: true\n"
                                  "      children:\n"
                                  "        trade:\n"
                                  "          limits: [100, 100, 60]\n";

static void init_shadow_single(void)
{
    start_with(PX_MODE_SINGLE, shadow_yaml, NULL);
}

static void init_shadow_cluster(void)
{
    start_with(PX_MODE_CLUSTER, shadow_yaml, NULL);
}

/* 20 checks of user:bob:trade, all admitted: the shadow level counts 3
 * allowed (the 3rd near its limit) and 17 shadow_limited, never limited;
 * the trade level 20 allowed. */
static void shadow_body(void)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    const char *body;
    int i;

    for (i = 0; i < 20; i++) {
        struct px_five f =
            px_take_five(px_cmd(c, "LIMITER CHECK user:bob:trade"), "check");
        cr_assert_eq(f.limited, 0, "check %d refused", i);
    }
    body = scrape();
    cr_assert_eq(decisions(body, "user:*", "allowed"), 3);
    cr_assert_eq(decisions(body, "user:*", "near_limit"), 1);
    cr_assert_eq(decisions(body, "user:*", "limited"), 0);
    cr_assert_eq(decisions(body, "user:*", "shadow_limited"), 17);
    check_rule(body, "user:*:trade", 20, 0, 0, 0, 0);
    redisFree(c);
}

Test(it_metrics, shadow_refusals_are_counted_single, .init = init_shadow_single,
     .fini = px_env_fini, .timeout = 60)
{
    shadow_body();
}

Test(it_metrics, shadow_refusals_are_counted_cluster,
     .init = init_shadow_cluster, .fini = px_env_fini, .timeout = 120)
{
    shadow_body();
}

static void errors_body(void)
{
    static const char key[] = "cellgate:{user:bob}#0:gcra";
    redisContext *c = px_connect(px_env()->proxy.port);
    redisContext *d = px_direct_for(key, sizeof(key) - 1);
    redisReply *r;
    const char *body;

    freeReplyObject(px_cmd(c, "RPUSH wt x"));
    px_check_error_prefix(px_cmd(c, "CL.THROTTLE wt 1 1 60"), "WRONGTYPE");
    cr_assert_not_null(d);
    freeReplyObject(px_cmd(d, "RPUSH %s x", key));
    r = px_cmd(c, "LIMITER CHECK user:bob");
    cr_assert_eq(r->type, REDIS_REPLY_ERROR, "check of a list: %d", r->type);
    freeReplyObject(r);
    body = scrape();
    check_rule(body, "cl.throttle", 0, 0, 0, 1, 0);
    check_rule(body, "user:*", 0, 0, 0, 1, 0);
    redisFree(d);
    redisFree(c);
}

Test(it_metrics, store_errors_are_counted_single, .init = init_single,
     .fini = px_env_fini, .timeout = 60)
{
    errors_body();
}

Test(it_metrics, store_errors_are_counted_cluster, .init = init_cluster,
     .fini = px_env_fini, .timeout = 120)
{
    errors_body();
}

Test(it_metrics, fail_open_is_counted, .init = init_fail_open,
     .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    redisReply *r;
    const char *body;

    px_check_five(px_cmd(c, "CL.THROTTLE fo 1 1 60"), "up", 0, 2, 1, -1, 60);
    px_check_five(px_cmd(c, "LIMITER CHECK user:fo:trade"), "check up", 0, 6, 5,
                  -1, 600);
    px_redis_kill(&px_env()->redis, SIGKILL);
    px_check_five(px_cmd(c, "CL.THROTTLE fo 1 1 60"), "down", 0, 2, 0, -1, 0);
    px_check_five(px_cmd(c, "CL.THROTTLE fo 1 1 60"), "down", 0, 2, 0, -1, 0);
    /* LIMITER fails open as CL.THROTTLE does: admitted, nothing left, the
     * limit of the path's first level; a PEEK says the same and counts
     * nothing under the rules. */
    for (int i = 0; i < 3; i++) {
        px_check_five(px_cmd(c, "LIMITER CHECK user:fo:trade"), "check down", 0,
                      6, 0, -1, 0);
    }
    px_check_five(px_cmd(c, "LIMITER PEEK user:fo:trade"), "peek down", 0, 6, 0,
                  -1, 0);
    /* Arguments are still checked first. */
    px_check_error_prefix(px_cmd(c, "LIMITER CHECK user:fo:trade COST x"),
                          "ERR ");
    body = scrape();
    check_rule(body, "cl.throttle", 1, 0, 0, 0, 2);
    check_rule(body, "user:*", 1, 0, 0, 0, 3);
    check_rule(body, "user:*:trade", 1, 0, 0, 0, 3);
    /* The lost node counted its failures. */
    cr_assert(family_sum(body, "cellgate_node_errors_total") >= 1);
    /* INFO of the proxy's sections alone is answered with the node down:
     * every call admitted without its node, the PEEK's too. */
    r = px_cmd(c, "INFO proxy Limiter");
    cr_assert_eq(r->type, REDIS_REPLY_STRING, "%d %s", r->type,
                 r->type == REDIS_REPLY_ERROR ? r->str : "");
    cr_assert_not_null(strstr(r->str, "# Limiter\r\n"), "%s", r->str);
    cr_assert_null(strstr(r->str, "# Node"), "%s", r->str);
    cr_assert_not_null(strstr(r->str, "limiter_fail_open:6\r\n"), "%s", r->str);
    freeReplyObject(r);
    /* A Redis section still goes to the node, and gets its error. */
    px_check_error_prefix(px_cmd(c, "INFO proxy server"), "ERR upstream ");
    redisFree(c);
}

/* One master stops answering: a check of an identity it owns fails open,
 * one of an identity on a live master is decided exactly beside it, and
 * once the master is back its identity is decided again. */
Test(it_metrics, fail_open_harms_no_identity_of_a_live_node_cluster,
     .init = init_fail_open_cluster, .fini = px_env_fini, .timeout = 120)
{
    struct px_cluster *cl = px_cluster();
    redisContext *c = px_connect(px_env()->proxy.port);
    char down[32], live[32], cmd[96];
    const char *body;
    struct px_five f;
    long long left;
    int m, i;

    px_ident_off("user:", "dn", NULL, down, sizeof(down));
    snprintf(cmd, sizeof(cmd), "user:%s", down);
    m = px_cluster_master_of_key(cl, cmd, strlen(cmd));
    snprintf(cmd, sizeof(cmd), "user:%s", down);
    px_ident_off("user:", "lv", cmd, live, sizeof(live));
    cr_assert_eq(kill(cl->nodes[m].proc.pid, SIGSTOP), 0);
    snprintf(cmd, sizeof(cmd), "LIMITER CHECK user:%s:trade", down);
    px_check_five(px_cmd(c, cmd), "stopped master", 0, 6, 0, -1, 0);
    snprintf(cmd, sizeof(cmd), "LIMITER CHECK user:%s:trade", live);
    for (i = 0; i < 7; i++) {
        f = px_take_five(px_cmd(c, cmd), "live master");
        cr_assert_eq(f.limited, i < 6 ? 0 : 1, "live check %d", i);
        cr_assert_eq(f.remaining, i < 6 ? 5 - i : 0, "live check %d", i);
    }
    snprintf(cmd, sizeof(cmd), "LIMITER CHECK user:%s:trade", down);
    px_check_five(px_cmd(c, cmd), "stopped master, again", 0, 6, 0, -1, 0);
    cr_assert_eq(kill(cl->nodes[m].proc.pid, SIGCONT), 0);
    /* Back: a PEEK decides again (a fail-open PEEK says 0 left, reset 0).
     * A call that timed out may still have run when the node resumed (it
     * was in the node's socket buffer), so a check would leave 3 to 5 of
     * 6 (a PEEK answers what the CHECK would), and the next check does. */
    snprintf(cmd, sizeof(cmd), "LIMITER PEEK user:%s:trade", down);
    for (i = 0;; i++) {
        f = px_take_five(px_cmd(c, cmd), "peek");
        if (f.remaining != 0 || f.reset != 0) {
            break;
        }
        cr_assert_lt(i, 200, "the stopped master never came back");
        px_sleep_ms(50);
    }
    cr_assert(f.limited == 0 && f.remaining >= 3 && f.remaining <= 5,
              "back: [%lld %lld %lld %lld %lld]", f.limited, f.limit,
              f.remaining, f.retry, f.reset);
    left = f.remaining;
    snprintf(cmd, sizeof(cmd), "LIMITER CHECK user:%s:trade", down);
    f = px_take_five(px_cmd(c, cmd), "back");
    cr_assert(f.limited == 0 && f.limit == 6 && f.remaining == left,
              "back: [%lld %lld %lld %lld %lld], the PEEK said %lld", f.limited,
              f.limit, f.remaining, f.retry, f.reset, left);
    body = scrape();
    check_rule(body, "user:*", 7, 1, 2, 0, 2);
    check_rule(body, "user:*:trade", 7, 0, 0, 0, 2);
    redisFree(c);
}

/* ---------------- Latency, nodes ---------------- */

Test(it_metrics, histograms_count_each_request_and_nodes_count_requests,
     .init = init_single, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    char node[64];
    char series[128];
    const char *body;
    long long before, fwd, dec;
    int i;

    snprintf(node, sizeof(node), "127.0.0.1:%d", px_env()->redis.port);
    body = scrape();
    snprintf(series, sizeof(series),
             "cellgate_node_requests_total{node=\"%s\"}", node);
    before = count_of(body, series);
    fwd = count_of(body, "cellgate_forward_duration_seconds_count");
    dec = count_of(body, "cellgate_decision_duration_seconds_count");
    for (i = 0; i < 7; i++) {
        px_check_status(px_cmd(c, "SET k%d v", i), "OK");
    }
    for (i = 0; i < 5; i++) {
        px_take_five(px_cmd(c, "LIMITER CHECK user:carol"), "check");
    }
    body = scrape();
    cr_assert_eq(count_of(body, "cellgate_forward_duration_seconds_count"),
                 fwd + 7);
    cr_assert_eq(count_of(body, "cellgate_forward_duration_seconds_bucket{"
                                "le=\"+Inf\"}"),
                 fwd + 7);
    cr_assert_eq(count_of(body, "cellgate_decision_duration_seconds_count"),
                 dec + 5);
    cr_assert(value_of(body, "cellgate_forward_duration_seconds_sum") > 0);
    /* The 7 SETs and the 5 checks' script calls, at least. */
    cr_assert(count_of(body, series) >= before + 12, "requests %lld -> %lld",
              before, count_of(body, series));
    snprintf(series, sizeof(series), "cellgate_node_connected{node=\"%s\"}",
             node);
    cr_assert(count_of(body, series) >= 1);
    /* INFO shows the same numbers (INFO itself is forwarded: the 8th). */
    {
        redisReply *r = px_cmd(c, "INFO latency");
        cr_assert_eq(r->type, REDIS_REPLY_STRING, "%d %s", r->type,
                     r->type == REDIS_REPLY_ERROR ? r->str : "");
        cr_assert_not_null(strstr(r->str, "# Latency\r\n"), "%s", r->str);
        char want[96];
        cr_assert_eq(r->type, REDIS_REPLY_STRING, "%d %s", r->type,
                     r->type == REDIS_REPLY_ERROR ? r->str : "");
        snprintf(want, sizeof(want), "decision_latency_seconds:count=%lld,",
                 dec + 5);
        cr_assert_not_null(strstr(r->str, want), "%s", r->str);
        snprintf(want, sizeof(want), "forward_latency_seconds:count=%lld,",
                 fwd + 7);
        cr_assert_not_null(strstr(r->str, want), "%s", r->str);
        cr_assert_null(strstr(r->str, "# Proxy"));
        freeReplyObject(r);
        r = px_cmd(c, "INFO nodes");
        snprintf(series, sizeof(series), "node=%s,connected=", node);
        cr_assert_not_null(strstr(r->str, series), "%s", r->str);
        freeReplyObject(r);
    }
    redisFree(c);
}

Test(it_metrics, cluster_nodes_count_requests, .init = init_cluster,
     .fini = px_env_fini, .timeout = 120)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    long long before, after, fwd;
    const char *body;
    int i;

    body = scrape();
    before = family_sum(body, "cellgate_node_requests_total");
    fwd = count_of(body, "cellgate_forward_duration_seconds_count");
    for (i = 0; i < 20; i++) {
        px_check_status(px_cmd(c, "SET key:%d v", i), "OK");
    }
    body = scrape();
    after = family_sum(body, "cellgate_node_requests_total");
    cr_assert(after >= before + 20, "requests %lld -> %lld", before, after);
    cr_assert(family_sum(body, "cellgate_node_connected") >= 3);
    cr_assert_eq(count_of(body, "cellgate_forward_duration_seconds_count"),
                 fwd + 20);
    redisFree(c);
}

/* A slot half migrated: each GET of a moved key gets -ASK from the source
 * (counted there); once the slot is reassigned, the stale map earns a
 * -MOVED. */
Test(it_metrics, cluster_nodes_count_ask_and_moved, .init = init_cluster,
     .fini = px_env_fini, .timeout = 180)
{
    struct px_cluster *cl = px_cluster();
    struct px_cluster_migration m;
    redisContext *c = px_connect(px_env()->proxy.port);
    unsigned slot = slot_for_key("{mig}", 5);
    int to = (px_cluster_master_of_slot(cl, slot) + 1) % 3;
    long long ask0, moved0;
    const char *body;
    int i;

    for (i = 0; i < 20; i++) {
        px_check_status(px_cmd(c, "SET {mig}%d %d", i, i), "OK");
    }
    body = scrape();
    ask0 = family_sum(body, "cellgate_node_ask_total");
    moved0 = family_sum(body, "cellgate_node_moved_total");
    px_cluster_migrate_begin(cl, &m, slot, to);
    cr_assert_eq(px_cluster_migrate_keys(cl, &m, 10), 10);
    for (i = 0; i < 20; i++) {
        char want[8];
        snprintf(want, sizeof(want), "%d", i);
        px_check_str(px_cmd(c, "GET {mig}%d", i), want);
    }
    body = scrape();
    cr_assert_eq(family_sum(body, "cellgate_node_ask_total"), ask0 + 10);
    px_cluster_migrate_keys(cl, &m, 0);
    px_cluster_migrate_finish(cl, &m);
    for (i = 0; i < 20; i++) {
        char want[8];
        snprintf(want, sizeof(want), "%d", i);
        px_check_str(px_cmd(c, "GET {mig}%d", i), want);
    }
    body = scrape();
    cr_assert(family_sum(body, "cellgate_node_moved_total") >= moved0 + 1);
    redisFree(c);
}

/* ---------------- Reloads, lib-name ---------------- */

/* The file's SHA-256 as sha256sum prints it. */
static void file_sha256(char out[65])
{
    char path[PX_PATH_MAX];
    const char *argv[] = { "/usr/bin/sha256sum", path, NULL };
    struct px_run run;

    px_path(path, sizeof(path), "limits.yaml");
    px_run(&run, argv);
    cr_assert_eq(run.status, 0);
    cr_assert(run.olen >= 64);
    memcpy(out, run.out, 64);
    out[64] = '\0';
    px_run_free(&run);
}

static void check_reloads(const char *body, long long ok, long long failed)
{
    char sha[65], series[128];

    cr_assert_eq(count_of(body, "cellgate_config_reloads_total{result=\"ok\"}"),
                 ok);
    cr_assert_eq(
        count_of(body, "cellgate_config_reloads_total{result=\"failed\"}"),
        failed);
    file_sha256(sha);
    snprintf(series, sizeof(series), "cellgate_config_info{sha256=\"%s\"}",
             sha);
    cr_assert_eq(count_of(body, series), 1);
}

Test(it_metrics, reloads_are_counted_and_the_hash_is_the_files,
     .init = init_embedded, .fini = px_env_fini, .timeout = 60)
{
    char path[PX_PATH_MAX], sha[65], want[128];
    redisContext *c = px_connect(px_env()->proxy.port);
    const char *body;
    redisReply *r;

    px_take_five(px_cmd(c, "LIMITER CHECK user:dave"), "check");
    check_reloads(scrape(), 0, 0);
    /* A new file, reloaded: counted, and its hash replaces the old. */
    px_write_file(path, sizeof(path), "limits.yaml",
                  "user:\n  children:\n    \"*\":\n      limits: [1, 2, 60]\n");
    px_check_status(px_cmd_admin(c, "LIMITER RELOAD"), "OK");
    check_reloads(scrape(), 1, 0);
    /* A bad file is refused, counted, and the loaded hash stays. */
    file_sha256(sha);
    px_write_file(path, sizeof(path), "limits.yaml", "user: [\n");
    px_check_error_prefix(px_cmd_admin(c, "LIMITER RELOAD"), "ERR ");
    body = scrape();
    cr_assert_eq(
        count_of(body, "cellgate_config_reloads_total{result=\"failed\"}"), 1);
    snprintf(want, sizeof(want), "cellgate_config_info{sha256=\"%s\"}", sha);
    cr_assert_eq(count_of(body, want), 1);
    /* SIGHUP counts too; the rule's counters survived the reloads. */
    px_write_file(path, sizeof(path), "limits.yaml", limits_yaml);
    cr_assert_eq(kill(px_env()->proxy.pid, SIGHUP), 0);
    for (int i = 0; i < 250; i++) {
        body = scrape();
        if (count_of(body, "cellgate_config_reloads_total{result=\"ok\"}") ==
            2) {
            break;
        }
        px_sleep_ms(20);
    }
    check_reloads(body, 2, 1);
    cr_assert_eq(decisions(body, "user:*", "allowed"), 1);
    /* INFO limiter: the same. */
    file_sha256(sha);
    r = px_cmd(c, "INFO limiter");
    snprintf(want, sizeof(want), "limits_file_sha256:%s\r\n", sha);
    cr_assert_not_null(strstr(r->str, want), "%s", r->str);
    cr_assert_not_null(strstr(r->str, "config_reloads_ok:2\r\n"));
    cr_assert_not_null(strstr(r->str, "config_reloads_failed:1\r\n"));
    cr_assert_not_null(strstr(r->str, ":rule=user:*,allowed=1,limited=0,"),
                       "%s", r->str);
    freeReplyObject(r);
    redisFree(c);
}

Test(it_metrics, clients_are_counted_by_lib_name, .init = init_embedded,
     .fini = px_env_fini, .timeout = 60)
{
    redisContext *a = px_connect(px_env()->proxy.port);
    redisContext *b = px_connect(px_env()->proxy.port);
    redisContext *n = px_connect(px_env()->proxy.port);
    const char *body;

    px_check_status(px_cmd(a, "CLIENT SETINFO lib-name redis-py"), "OK");
    px_check_status(px_cmd(b, "CLIENT SETINFO lib-name redis-py"), "OK");
    px_check_status(px_cmd(n, "PING"), "PONG");
    body = scrape();
    cr_assert_eq(count_of(body, "cellgate_clients{lib=\"redis-py\"}"), 2);
    cr_assert_eq(count_of(body, "cellgate_clients{lib=\"(none)\"}"), 1);
    redisFree(b);
    px_check_status(px_cmd(n, "PING"), "PONG"); /* b's close is seen */
    for (int i = 0; i < 100; i++) {
        body = scrape();
        if (count_of(body, "cellgate_clients{lib=\"redis-py\"}") == 1) {
            break;
        }
        px_sleep_ms(20);
    }
    cr_assert_eq(count_of(body, "cellgate_clients{lib=\"redis-py\"}"), 1);
    redisFree(a);
    redisFree(n);
}

/* ---------------- Hostile HTTP ---------------- */

/* A RESP client beside the attackers: its replies stay exact. */
static void resp_client_fine(redisContext *c, int round)
{
    struct px_five f;

    px_check_status(px_cmd(c, "PING"), "PONG");
    f = px_take_five(px_cmd(c, "LIMITER PEEK user:erin"), "peek");
    cr_assert_eq(f.limit, 6, "round %d", round);
    cr_assert_eq(f.limited, 0, "round %d", round);
}

static const char *status_of(const char *req, size_t len)
{
    static char line[64];
    const char *resp = http_exchange(req, len);
    size_t n = strcspn(resp, "\r");

    snprintf(line, sizeof(line), "%.*s", (int)(n < 63 ? n : 63), resp);
    return line;
}

Test(it_metrics, bad_requests_get_short_errors, .init = init_embedded,
     .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    static const char notfound[] = "GET /other HTTP/1.1\r\n\r\n";
    static const char post[] = "POST /metrics HTTP/1.1\r\n\r\n";
    static const char bad[] = "GET /metrics HTTP/1.1\nHost: x\n\n";
    static const char garbage[] = "\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03";
    static const char resp[] = "*1\r\n$4\r\nPING\r\n";
    static const char h2[] = "GET /metrics HTTP/2.0\r\n\r\n";
    char big[3 * 4096];
    size_t n;

    cr_assert_str_eq(status_of(notfound, sizeof(notfound) - 1),
                     "HTTP/1.1 404 Not Found");
    cr_assert_str_eq(status_of(post, sizeof(post) - 1),
                     "HTTP/1.1 405 Method Not Allowed");
    cr_assert_str_eq(status_of(bad, sizeof(bad) - 1),
                     "HTTP/1.1 400 Bad Request");
    cr_assert_str_eq(status_of(garbage, sizeof(garbage) - 1),
                     "HTTP/1.1 400 Bad Request");
    cr_assert_str_eq(status_of(resp, sizeof(resp) - 1),
                     "HTTP/1.1 400 Bad Request");
    cr_assert_str_eq(status_of(h2, sizeof(h2) - 1),
                     "HTTP/1.1 505 HTTP Version Not Supported");
    /* A head over the cap: 431, whatever else the client still sends. */
    n = (size_t)snprintf(big, sizeof(big), "GET /metrics HTTP/1.1\r\nX: ");
    memset(big + n, 'a', sizeof(big) - n);
    cr_assert_str_eq(status_of(big, sizeof(big)),
                     "HTTP/1.1 431 Request Header Fields Too Large");
    resp_client_fine(c, 0);
    scrape();
    redisFree(c);
}

Test(it_metrics, a_slow_request_does_not_block_a_scrape, .init = init_embedded,
     .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    static const char part[] = "GET /metr";
    int slow = px_raw_connect(metrics_port, 0);
    char buf[64];
    int closed = 0;

    cr_assert_eq(px_raw_send(slow, part, sizeof(part) - 1), 0);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(px_raw_send(slow, "i", 1), 0);
        scrape();
        resp_client_fine(c, i);
    }
    /* Still held open, unanswered... */
    cr_assert_eq(px_raw_read(slow, buf, 1, 100, &closed), 0);
    cr_assert_not(closed);
    /* ... until its deadline (5 s from accept) closes it. */
    px_raw_read_to_close(slow, buf, sizeof(buf), 8000, &closed);
    cr_assert(closed, "the slow request was never closed");
    cr_assert_eq(buf[0], '\0', "a partial request got a response: %s", buf);
    close(slow);
    resp_client_fine(c, 9);
    redisFree(c);
}

Test(it_metrics, connections_over_the_cap_get_a_503, .init = init_embedded,
     .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    int held[MAX_CONNS], extra, closed = 0;
    char buf[256];
    const char *body = NULL;

    for (int i = 0; i < MAX_CONNS; i++) {
        held[i] = px_raw_connect(metrics_port, 0);
        cr_assert_eq(px_raw_send(held[i], "GET ", 4), 0);
    }
    resp_client_fine(c, 0);
    /* The endpoint has seen them all once the RESP round trip is back?
     * Not necessarily: poll until a new connection is refused, with a
     * 503 and nothing else. */
    for (int tries = 0; tries < 100; tries++) {
        extra = px_raw_connect(metrics_port, 0);
        px_raw_send(extra, "GET /metrics HTTP/1.1\r\n\r\n", 25);
        px_raw_read_to_close(extra, buf, sizeof(buf), 2000, &closed);
        close(extra);
        if (closed && strncmp(buf, "HTTP/1.1 503 ", 13) == 0) {
            break;
        }
        px_sleep_ms(20);
    }
    cr_assert(closed &&
                  strncmp(buf, "HTTP/1.1 503 Service Unavailable\r\n", 34) == 0,
              "a connection over the cap got: %s", buf);
    cr_assert_null(strstr(buf, "cellgate_"), "it was served: %s", buf);
    resp_client_fine(c, 1);
    for (int i = 0; i < MAX_CONNS; i++) {
        close(held[i]);
    }
    /* Their slots come back once the endpoint sees them closed. */
    for (int tries = 0; tries < 100 && body == NULL; tries++) {
        static const char req[] = "GET /metrics HTTP/1.1\r\n\r\n";
        const char *resp = http_exchange(req, sizeof(req) - 1);
        if (strncmp(resp, "HTTP/1.1 200 OK\r\n", 17) == 0) {
            body = resp;
        } else {
            px_sleep_ms(20);
        }
    }
    cr_assert_not_null(body, "no scrape after the flood");
    resp_client_fine(c, 2);
    redisFree(c);
}
