/* Sentinel mode against real Redis Sentinels: cellgate finds the master,
 * follows a failover (SENTINEL FAILOVER, a killed master) with every reply
 * the right one for its request, asks the next sentinel when one is down,
 * logs in with sentinel_password, and refuses a bad configuration. */
#include "tests/integration/sentinel_fixture.h"
#include "tests/support/px_test.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

PX_TEST_SUITE(it_sentinel);

#define WRITERS  3     /* clients writing and reading their own keys */
#define THROTTLE 2     /* clients calling CL.THROTTLE */
#define LOAD_MS  30000 /* bound of the load around a failover */

static void init_one(void)
{
    px_sentinel_start(1, NULL, 0);
}

static void init_three(void)
{
    px_sentinel_start(3, NULL, 1);
}

static void init_password(void)
{
    px_sentinel_start(1, "sent-secret", 0);
}

/* Asserts INFO on `c` holds the line `want` (with its CRLF). */
static void check_info_line(redisContext *c, const char *want)
{
    redisReply *r = px_cmd(c, "INFO");
    char line[256];

    snprintf(line, sizeof(line), "\r\n%s\r\n", want);
    cr_assert_eq(r->type, REDIS_REPLY_STRING);
    cr_assert_not_null(strstr(r->str, line), "INFO lacks \"%s\":\n%s", want,
                       r->str);
    freeReplyObject(r);
}

/* The first sentinel listed does not listen: the next is asked, and the
 * master it names serves the keys. */
Test(it_sentinel, finds_the_master_past_a_dead_sentinel, .init = init_one,
     .fini = px_sentinel_fini, .timeout = 60)
{
    struct px_sentinels *s = px_sentinels();
    static char list[64];
    static const char *args[] = { "--sentinel", list, "--sentinel-master",
                                  PX_SENTINEL_MASTER, NULL };
    char want[64];
    redisContext *px, *m;

    /* From the command line this time. */
    snprintf(list, sizeof(list), "127.0.0.1:%d,127.0.0.1:%d", px_free_port(),
             s->sent[0].port);
    px_proxy_start(&px_env()->proxy, NULL, args);
    px = px_connect(px_env()->proxy.port);
    /* Held until the master is known, then served. */
    px_check_status(px_cmd(px, "SET sk sv"), "OK");
    px_check_str(px_cmd(px, "GET sk"), "sv");
    m = px_redis_connect(&px_env()->redis, NULL);
    px_check_str(px_cmd(m, "GET sk"), "sv");
    check_info_line(px, "proxy_mode:sentinel");
    snprintf(want, sizeof(want), "sentinel_master_addr:127.0.0.1:%d",
             px_env()->redis.port);
    check_info_line(px, want);
    check_info_line(px, "sentinel_known:1");
    check_info_line(px, "sentinel_switches:0");
    redisFree(m);
    redisFree(px);
}

/* Requests a client sent before any sentinel answered are held, then go
 * on where they stopped once the master is known, each answered once and
 * in order: a forwarded command (the router's resume), a CL.THROTTLE (the
 * limiter's own resume point) and SCRIPT KILL (the kill path). */
Test(it_sentinel, held_requests_go_on_once_the_master_is_known,
     .init = init_one, .fini = px_sentinel_fini, .timeout = 60)
{
    struct px_sentinels *s = px_sentinels();
    redisContext *px, *ctl;
    redisReply *r;
    long long base;
    int done = 0, i;

    /* A stopped sentinel accepts (the kernel does) and answers nothing. */
    cr_assert_eq(kill(s->sent[0].pid, SIGSTOP), 0);
    px_proxy_start(&px_env()->proxy,
                   px_sentinel_yaml(s, 0, "connect_timeout_ms: 20000\n"), NULL);
    px = px_connect(px_env()->proxy.port);
    ctl = px_connect(px_env()->proxy.port);
    check_info_line(ctl, "sentinel_known:0");
    base = px_info_int(ctl, "total_commands_processed");
    redisAppendCommand(px, "SET hk hv");
    redisAppendCommand(px, "GET hk");
    redisAppendCommand(px, "CL.THROTTLE hk:t 10 10 60");
    redisAppendCommand(px, "SCRIPT KILL");
    while (!done) {
        cr_assert_eq(redisBufferWrite(px, &done), REDIS_OK);
    }
    /* All four parsed (each INFO counts itself too), so all held. */
    for (i = 1; px_info_int(ctl, "total_commands_processed") < base + 4 + i;
         i++) {
        if (i > 1000) {
            cr_assert_fail("cellgate did not read the pipeline");
        }
        px_sleep_ms(5);
    }
    check_info_line(ctl, "sentinel_known:0");
    cr_assert_eq(kill(s->sent[0].pid, SIGCONT), 0);
    px_check_status(px_next(px), "OK");
    px_check_str(px_next(px), "hv");
    r = px_next(px);
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "CL.THROTTLE: type %d", r->type);
    cr_assert_eq(r->elements, 5u);
    cr_assert_eq(r->element[0]->integer, 0, "allowed");
    freeReplyObject(r);
    r = px_next(px);
    cr_assert_eq(r->type, REDIS_REPLY_ERROR);
    cr_assert_not_null(strstr(r->str, "NOTBUSY"), "%s", r->str);
    freeReplyObject(r);
    check_info_line(ctl, "sentinel_known:1");
    redisFree(ctl);
    redisFree(px);
}

/* One round of every client's pipeline: a writer sets k:w:round and reads
 * it back, a throttler calls CL.THROTTLE. Every reply must be its own
 * request's (an error is fine, another key's value never). Returns 1 when
 * the whole round succeeded. */
static int load_round(redisContext **w, redisContext **t, long round)
{
    int all_ok = 1, i;

    for (i = 0; i < WRITERS; i++) {
        redisAppendCommand(w[i], "SET k:%d:%ld v:%d:%ld", i, round, i, round);
        redisAppendCommand(w[i], "GET k:%d:%ld", i, round);
    }
    for (i = 0; i < THROTTLE; i++) {
        redisAppendCommand(t[i], "CL.THROTTLE thr:%d 1000000 1000000 1", i);
    }
    for (i = 0; i < WRITERS; i++) {
        char want[64];
        redisReply *set = px_next(w[i]), *get = px_next(w[i]);

        snprintf(want, sizeof(want), "v:%d:%ld", i, round);
        if (set->type != REDIS_REPLY_ERROR &&
            (set->type != REDIS_REPLY_STATUS || strcmp(set->str, "OK") != 0)) {
            cr_assert_fail("SET k:%d:%ld got type %d", i, round, set->type);
        }
        if (get->type == REDIS_REPLY_STRING && strcmp(get->str, want) != 0) {
            cr_assert_fail("GET k:%d:%ld got \"%s\"", i, round, get->str);
        }
        if (get->type != REDIS_REPLY_STRING && get->type != REDIS_REPLY_NIL &&
            get->type != REDIS_REPLY_ERROR) {
            cr_assert_fail("GET k:%d:%ld got type %d", i, round, get->type);
        }
        all_ok &=
            set->type == REDIS_REPLY_STATUS && get->type == REDIS_REPLY_STRING;
        freeReplyObject(set);
        freeReplyObject(get);
    }
    for (i = 0; i < THROTTLE; i++) {
        redisReply *r = px_next(t[i]);
        size_t k;

        if (r->type == REDIS_REPLY_ERROR) {
            all_ok = 0;
        } else if (r->type != REDIS_REPLY_ARRAY || r->elements != 5) {
            cr_assert_fail("CL.THROTTLE got type %d (%zu elements)", r->type,
                           r->elements);
        } else {
            for (k = 0; k < 5; k++) {
                if (r->element[k]->type != REDIS_REPLY_INTEGER) {
                    cr_assert_fail("CL.THROTTLE element %zu: type %d", k,
                                   r->element[k]->type);
                }
            }
        }
        freeReplyObject(r);
    }
    return all_ok;
}

/* The INFO field `field` (text) on `c`, into out. */
static void info_field(redisContext *c, const char *field, char *out,
                       size_t cap)
{
    redisReply *r = px_cmd(c, "INFO");
    char key[64];
    const char *p;

    out[0] = '\0';
    snprintf(key, sizeof(key), "\r\n%s:", field);
    if (r->type == REDIS_REPLY_STRING && (p = strstr(r->str, key)) != NULL) {
        size_t n = strcspn(p + strlen(key), "\r");
        snprintf(out, cap, "%.*s", (int)n, p + strlen(key));
    }
    freeReplyObject(r);
}

/* GET /metrics on `port`: the whole response (the caller frees it). */
static char *metrics_get(int port)
{
    static const char req[] = "GET /metrics HTTP/1.0\r\n\r\n";
    size_t cap = 1 << 20;
    char *buf = malloc(cap);
    int fd = px_raw_connect(port, 0), closed = 0;

    cr_assert_eq(px_raw_send(fd, req, sizeof(req) - 1), 0);
    px_raw_read_to_close(fd, buf, cap, 5000, &closed);
    close(fd);
    return buf;
}

/* Loads cellgate until the switch is seen (INFO) and a whole round has
 * succeeded after it. `fail_over` runs once, after a few good rounds. */
static void load_through_switch(redisContext *ctl, void (*fail_over)(void))
{
    redisContext *w[WRITERS], *t[THROTTLE];
    long long deadline = px_now_ms() + LOAD_MS;
    long round;
    int i, switched = 0, good_after = 0;

    for (i = 0; i < WRITERS; i++) {
        w[i] = px_connect(px_env()->proxy.port);
    }
    for (i = 0; i < THROTTLE; i++) {
        t[i] = px_connect(px_env()->proxy.port);
    }
    for (round = 0; good_after < 5; round++) {
        int ok = load_round(w, t, round);
        if (round == 10) {
            fail_over();
        }
        if (round > 10 && !switched && round % 5 == 0) {
            char v[32];
            info_field(ctl, "sentinel_switches", v, sizeof(v));
            switched = strcmp(v, "1") == 0;
        }
        good_after = switched && ok ? good_after + 1 : 0;
        cr_assert(px_now_ms() < deadline,
                  "service not back within %d ms of the failover (round %ld)",
                  LOAD_MS, round);
        if (round > 10 && !ok) {
            px_sleep_ms(10); /* no busy loop while the master is away */
        }
    }
    for (i = 0; i < WRITERS; i++) {
        redisFree(w[i]);
    }
    for (i = 0; i < THROTTLE; i++) {
        redisFree(t[i]);
    }
}

static void failover_by_command(void)
{
    struct px_sentinels *s = px_sentinels();
    redisContext *c = px_connect(s->sent[0].port);

    px_check_status(px_cmd(c, "SENTINEL FAILOVER %s", PX_SENTINEL_MASTER),
                    "OK");
    redisFree(c);
}

static void failover_by_kill(void)
{
    px_redis_kill(&px_env()->redis, SIGKILL);
}

/* After the switch: INFO and /metrics name the new master, one switch; a
 * write through cellgate lands on it. */
static void check_after_switch(redisContext *ctl, int new_port, int mport)
{
    char want[128], *text;
    redisContext *m;

    snprintf(want, sizeof(want), "sentinel_master_addr:127.0.0.1:%d", new_port);
    check_info_line(ctl, want);
    check_info_line(ctl, "sentinel_switches:1");
    text = metrics_get(mport);
    cr_assert_not_null(strstr(text, "\ncellgate_sentinel_switches_total 1\n"),
                       "%s", text);
    snprintf(want, sizeof(want),
             "\ncellgate_sentinel_master_info{name=\"%s\",addr=\"127.0.0.1:"
             "%d\"} 1\n",
             PX_SENTINEL_MASTER, new_port);
    cr_assert_not_null(strstr(text, want), "%s", text);
    free(text);
    px_check_status(px_cmd(ctl, "SET after-switch yes"), "OK");
    m = px_connect(new_port);
    px_check_str(px_cmd(m, "GET after-switch"), "yes");
    redisFree(m);
}

/* Refuses a CL.THROTTLE key until the refusal cache holds it (its tracker
 * on the master confirmed the state). */
static void cache_a_refusal(redisContext *c)
{
    int tries;

    freeReplyObject(px_cmd(c, "CL.THROTTLE hot 0 1 3600"));
    for (tries = 0; tries < 500; tries++) {
        freeReplyObject(px_cmd(c, "CL.THROTTLE hot 0 1 3600"));
        if (px_info_int(c, "limiter_refusal_cache_keys") == 1) {
            return;
        }
        px_sleep_ms(10);
    }
    cr_assert_fail("the refusal was never cached");
}

/* SENTINEL FAILOVER while writers and CL.THROTTLE callers hammer cellgate:
 * every reply is its request's, service comes back, CL.THROTTLE answers on
 * the new master (its library there), a subscriber's connection closes. */
Test(it_sentinel, failover_moves_every_connection, .init = init_three,
     .fini = px_sentinel_fini, .timeout = 120)
{
    struct px_sentinels *s = px_sentinels();
    char extra[128];
    int mport = px_free_port(), new_port;
    redisContext *ctl, *sub;
    redisReply *r;
    void *reply = NULL;

    snprintf(extra, sizeof(extra), "metrics_listen: 127.0.0.1:%d\n", mport);
    px_proxy_start(&px_env()->proxy, px_sentinel_yaml(s, 0, extra), NULL);
    ctl = px_connect(px_env()->proxy.port);
    px_check_status(px_cmd(ctl, "PING"), "PONG");
    sub = px_connect(px_env()->proxy.port);
    r = px_cmd(sub, "SUBSCRIBE news");
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    freeReplyObject(r);

    cache_a_refusal(ctl);

    load_through_switch(ctl, failover_by_command);
    new_port = px_sentinel_wait_switch(s, px_env()->redis.port);
    cr_assert_eq(new_port, s->replica.port);
    check_after_switch(ctl, new_port, mport);
    /* What the refusal cache knew came from the old master's tracking:
     * forgotten at the switch. */
    check_info_line(ctl, "limiter_refusal_cache_keys:0");

    /* The subscription lived on the old master: its client is closed, as
     * Redis would close it, rather than left deaf. */
    cr_assert_eq(redisGetReply(sub, &reply), REDIS_ERR,
                 "the subscriber's connection stayed open");
    redisFree(sub);
    redisFree(ctl);
}

/* The master is killed: the sentinels promote the replica and cellgate
 * follows. */
Test(it_sentinel, killed_master_is_replaced, .init = init_three,
     .fini = px_sentinel_fini, .timeout = 120)
{
    struct px_sentinels *s = px_sentinels();
    char extra[128];
    int mport = px_free_port(), old = px_env()->redis.port, new_port;
    redisContext *ctl;

    snprintf(extra, sizeof(extra), "metrics_listen: 127.0.0.1:%d\n", mport);
    px_proxy_start(&px_env()->proxy, px_sentinel_yaml(s, 0, extra), NULL);
    ctl = px_connect(px_env()->proxy.port);
    px_check_status(px_cmd(ctl, "PING"), "PONG");
    load_through_switch(ctl, failover_by_kill);
    new_port = px_sentinel_wait_switch(s, old);
    cr_assert_eq(new_port, s->replica.port);
    check_after_switch(ctl, new_port, mport);
    redisFree(ctl);
}

/* Polls INFO on `c` until sentinel_switches is `want`. An INFO in flight
 * on the old master as it is left gets an error: polled again. */
static void poll_switches(redisContext *c, const char *want)
{
    char v[32];
    int tries;

    for (tries = 0; tries < 1000; tries++) {
        info_field(c, "sentinel_switches", v, sizeof(v));
        if (strcmp(v, want) == 0) {
            return;
        }
        px_sleep_ms(10);
    }
    cr_assert_fail("sentinel_switches stayed \"%s\", want %s", v, want);
}

/* The sentinel names another master while the old one lives on, its
 * clients untouched (an operator re-pointed the sentinels: no
 * +switch-master, no CLIENT KILL on the old master): the periodic ask
 * finds it, a blocked call in flight there gets an error, a subscriber's
 * connection closes, a held LIMITER ... WAIT fails, and new commands go to
 * the new master. */
Test(it_sentinel, new_master_closes_private_connections, .init = init_one,
     .fini = px_sentinel_fini, .timeout = 60)
{
    struct px_sentinels *s = px_sentinels();
    redisContext *ctl, *sub, *blk, *wt, *d;
    redisReply *r;
    void *reply = NULL;
    char want[64], limits[PX_PATH_MAX], extra[PX_PATH_MAX + 32];

    /* One call every 10 s: a second one WAITs 10 s for its reservation. */
    px_write_file(limits, sizeof(limits), "limits.yaml",
                  "api:\n  children:\n    \"*\":\n      limits: [0, 1, 10]\n");
    snprintf(extra, sizeof(extra), "limits_file: \"%s\"\n", limits);
    px_proxy_start(&px_env()->proxy, px_sentinel_yaml(s, 0, extra), NULL);
    ctl = px_connect(px_env()->proxy.port);
    px_check_status(px_cmd(ctl, "SET before 1"), "OK");
    wt = px_connect(px_env()->proxy.port);
    r = px_cmd(wt, "LIMITER CHECK api:k");
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    freeReplyObject(r);
    redisAppendCommand(wt, "LIMITER CHECK api:k WAIT 20000");
    px_flush(wt);
    px_info_poll(ctl, "limiter_waits", 1, 500);
    sub = px_connect(px_env()->proxy.port);
    r = px_cmd(sub, "SUBSCRIBE news");
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    freeReplyObject(r);
    blk = px_connect(px_env()->proxy.port);
    redisAppendCommand(blk, "BLPOP nothing-here 0");
    px_flush(blk);

    d = px_redis_connect(&s->replica, NULL);
    px_check_status(px_cmd(d, "REPLICAOF NO ONE"), "OK");
    /* A master without the limiter's library (replicated until now). */
    px_check_status(px_cmd(d, "FUNCTION FLUSH"), "OK");
    redisFree(d);
    d = px_connect(s->sent[0].port);
    px_check_status(px_cmd(d, "SENTINEL REMOVE %s", PX_SENTINEL_MASTER), "OK");
    px_check_status(px_cmd(d, "SENTINEL MONITOR %s 127.0.0.1 %d 2",
                           PX_SENTINEL_MASTER, s->replica.port),
                    "OK");
    redisFree(d);

    poll_switches(ctl, "1");
    snprintf(want, sizeof(want), "sentinel_master_addr:127.0.0.1:%d",
             s->replica.port);
    check_info_line(ctl, want);
    r = px_next(blk);
    cr_assert_eq(r->type, REDIS_REPLY_ERROR);
    cr_assert_not_null(strstr(r->str, "connection lost (Sentinel named a new "
                                      "master)"),
                       "%s", r->str);
    freeReplyObject(r);
    cr_assert_eq(redisGetReply(sub, &reply), REDIS_ERR,
                 "the subscriber's connection stayed open");
    /* The held WAIT's reservation was made on the old master. */
    r = px_next(wt);
    cr_assert_eq(r->type, REDIS_REPLY_ERROR);
    cr_assert_not_null(strstr(r->str, "the master changed while the WAIT"),
                       "%s", r->str);
    freeReplyObject(r);
    redisFree(wt);
    px_check_status(px_cmd(ctl, "SET after 2"), "OK");
    d = px_redis_connect(&s->replica, NULL);
    px_check_str(px_cmd(d, "GET after"), "2");
    /* The library was loaded on the new master ahead of the first call,
     * which found it (no "Function not found" first). */
    r = px_cmd(ctl, "CL.THROTTLE after-switch 5 10 60");
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    cr_assert_eq(r->elements, 5);
    freeReplyObject(r);
    cr_assert_eq(px_cmdstat_failed(d, "fcall"), 0);
    cr_assert(px_cmdstat_calls(d, "fcall") >= 1);
    redisFree(d);
    redisFree(blk);
    redisFree(sub);
    redisFree(ctl);
}

/* Sentinels with requirepass: cellgate logs in with sentinel_password;
 * without it, requests fail with the sentinel's refusal once
 * connect_timeout_ms passed. */
Test(it_sentinel, logs_in_with_sentinel_password, .init = init_password,
     .fini = px_sentinel_fini, .timeout = 60)
{
    struct px_sentinels *s = px_sentinels();
    struct px_child bare = { 0 };
    char yaml[1200];
    redisContext *px;
    redisReply *r;

    snprintf(yaml, sizeof(yaml), "%s",
             px_sentinel_yaml(s, 0, "connect_timeout_ms: 300\n"));
    px_proxy_start(&bare, yaml, NULL);
    px = px_connect(bare.port);
    /* INFO answers meanwhile, from cellgate alone. */
    check_info_line(px, "proxy_mode:sentinel");
    check_info_line(px, "sentinel_known:0");
    check_info_line(px, "sentinel_master_addr:");
    r = px_cmd(px, "GET k");
    cr_assert_eq(r->type, REDIS_REPLY_ERROR);
    cr_assert_not_null(strstr(r->str, "NOAUTH"), "%s", r->str);
    cr_assert_not_null(strstr(r->str, "upstream master 'pxmaster' "
                                      "unavailable"),
                       "%s", r->str);
    freeReplyObject(r);
    redisFree(px);
    px_proxy_stop_clean(&bare, SIGTERM);

    px_proxy_start(&px_env()->proxy,
                   px_sentinel_yaml(s, 0, "sentinel_password: sent-secret\n"),
                   NULL);
    px = px_connect(px_env()->proxy.port);
    px_check_status(px_cmd(px, "SET pk pv"), "OK");
    check_info_line(px, "sentinel_known:1");
    redisFree(px);
}

/* Runs cellgate --check-config on `yaml`; asserts it fails saying
 * `want`. */
static void check_bad_config(const char *name, const char *yaml,
                             const char *want)
{
    char path[PX_PATH_MAX];
    struct px_run res;
    const char *argv[] = { PX_CELLGATE_BIN, "--config", path, "--check-config",
                           NULL };

    px_write_file(path, sizeof(path), name, yaml);
    px_run(&res, argv);
    cr_assert_eq(res.status, 1, "%s: exit %d", name, res.status);
    cr_assert_not_null(strstr(res.err, want), "%s: %s", name, res.err);
    px_run_free(&res);
}

Test(it_sentinel, bad_config_is_refused, .timeout = 30)
{
    struct px_run res;
    const char *flags[] = { PX_CELLGATE_BIN, "--sentinel", "127.0.0.1:26379",
                            "--check-config", NULL };

    px_env_prepare();
    check_bad_config("nomaster.yaml", "sentinel: [127.0.0.1:26379]\n",
                     "sentinel needs sentinel_master");
    check_bad_config("both.yaml",
                     "sentinel: [127.0.0.1:26379]\nsentinel_master: m\n"
                     "upstream: 127.0.0.1:6379\n",
                     "both.yaml:3:1: sentinel and upstream are mutually "
                     "exclusive");
    check_bad_config("cluster.yaml",
                     "cluster: [127.0.0.1:7000]\nsentinel: [127.0.0.1:26379]\n"
                     "sentinel_master: m\n",
                     "sentinel and cluster are mutually exclusive");
    check_bad_config("alone.yaml", "sentinel_master: m\n",
                     "sentinel_master needs sentinel");
    px_run(&res, flags);
    cr_assert_eq(res.status, 1);
    cr_assert_not_null(strstr(res.err, "sentinel needs sentinel_master"), "%s",
                       res.err);
    px_run_free(&res);
    px_env_fini();
}
