/* store_down_policy in every way a single Redis can fail to decide a
 * limiter call while its connection stays up: a replica that lost its
 * master with replica-serve-stale-data no (-MASTERDOWN), a script running
 * past busy-reply-threshold (-BUSY) and a node still loading its data
 * (-LOADING). A node that is gone or silent is it_limiter's and
 * it_metrics' (SIGKILL, SIGSTOP).
 *
 * Two proxies stand in front of the same Redis: one with fail_open, which
 * must admit CL.THROTTLE, LIMITER CHECK and PEEK undecided
 * ([0, limit, 0, -1, 0]) and count each under its rule, and one with the
 * default fail_closed, which must pass Redis's own error on. Once the node
 * decides again, nothing was taken while it could not. */
#include "tests/support/px_test.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/integration/fixture.h"
#include "tests/integration/limiter_support.h"

PX_TEST_SUITE(it_store_down);

/* user:<id> allows 6 at once (max_burst 5, 6 per hour). */
static const char limits_yaml[] = "user:\n"
                                  "  children:\n"
                                  "    \"*\":\n"
                                  "      limits: [5, 6, 3600]\n";

#define CONF_MAX   1024
#define POLL_MAX   1200 /* bound of a wait for the node's state, in steps */
#define POLL_STEP  25   /* ms between two probes of that wait */
#define LOAD_KEYS  40000
#define LOAD_BATCH 1000

static struct px_child closed_proxy; /* the fail_closed one */
static char conf_open[CONF_MAX], conf_closed[CONF_MAX];

/* Starts redis with `extra`, then both proxies in front of it; `more`:
 * proxy.yaml lines both get. */
static void start(const char *const *extra, const char *more)
{
    char limits[PX_PATH_MAX];

    px_write_file(limits, sizeof(limits), "limits.yaml", limits_yaml);
    snprintf(conf_open, sizeof(conf_open),
             "limits_file: %s\nstore_down_policy: fail_open\n%s", limits, more);
    snprintf(conf_closed, sizeof(conf_closed), "limits_file: %s\n%s", limits,
             more);
    px_redis_start(&px_env()->redis, extra);
    px_proxy_start_for(&px_env()->proxy, &px_env()->redis, conf_open);
    px_proxy_start_for(&closed_proxy, &px_env()->redis, conf_closed);
}

static void fini(void)
{
    if (closed_proxy.pid != 0) {
        px_proxy_stop_clean(&closed_proxy, SIGTERM);
    }
    memset(&closed_proxy, 0, sizeof(closed_proxy));
    px_env_fini();
}

/* A number after `pat` in INFO's Limiter section, which the proxy
 * answers itself (a whole INFO asks the node too, which may not answer). */
static long long limiter_info(redisContext *c, const char *pat)
{
    redisReply *r = px_cmd(c, "INFO proxy limiter");
    const char *p;
    long long n;

    cr_assert_eq(r->type, REDIS_REPLY_STRING, "INFO limiter: %d %s", r->type,
                 r->type == REDIS_REPLY_ERROR ? r->str : "");
    p = strstr(r->str, pat);
    cr_assert_not_null(p, "no %s in %s", pat, r->str);
    n = strtoll(p + strlen(pat), NULL, 10);
    freeReplyObject(r);
    return n;
}

/* The fail_open counter of `rule` in INFO's limiter_rule lines. */
static long long rule_fail_open(redisContext *c, const char *rule)
{
    char pat[128];
    redisReply *r = px_cmd(c, "INFO proxy limiter");
    const char *p, *f;
    long long n;

    cr_assert_eq(r->type, REDIS_REPLY_STRING, "INFO limiter: %d", r->type);
    snprintf(pat, sizeof(pat), ":rule=%s,", rule);
    p = strstr(r->str, pat);
    cr_assert_not_null(p, "no rule %s in %s", rule, r->str);
    f = strstr(p, "fail_open=");
    cr_assert_not_null(f, "%s", p);
    n = strtoll(f + strlen("fail_open="), NULL, 10);
    freeReplyObject(r);
    return n;
}

/* Through the fail_open proxy: every limiter call admitted undecided and
 * counted; through the fail_closed one: Redis's error, `code` first. */
static void check_undecided(const char *code)
{
    redisContext *o = px_connect(px_env()->proxy.port);
    redisContext *k = px_connect(closed_proxy.port);
    long long before = limiter_info(o, "\r\nlimiter_fail_open:");
    redisReply *r;

    px_check_five(px_cmd(o, "CL.THROTTLE sd 1 1 60"), "throttle", 0, 2, 0, -1,
                  0);
    px_check_five(px_cmd(o, "LIMITER CHECK user:sd"), "check", 0, 6, 0, -1, 0);
    px_check_five(px_cmd(o, "LIMITER CHECK user:sd COST 3"), "check 3", 0, 6, 0,
                  -1, 0);
    px_check_five(px_cmd(o, "LIMITER PEEK user:sd"), "peek", 0, 6, 0, -1, 0);
    cr_assert_eq(limiter_info(o, "\r\nlimiter_fail_open:"), before + 4);
    /* The two checks count under their rule; a PEEK counts nothing there. */
    cr_assert_eq(rule_fail_open(o, "user:*"), 2);
    cr_assert_eq(rule_fail_open(o, "cl.throttle"), 1);
    /* Arguments are still checked before the store is asked. */
    px_check_error_prefix(px_cmd(o, "LIMITER CHECK user:sd COST x"), "ERR ");

    r = px_cmd(k, "CL.THROTTLE sd 1 1 60");
    cr_assert_eq(r->type, REDIS_REPLY_ERROR, "fail_closed throttle: %d",
                 r->type);
    cr_assert(strncmp(r->str, code, strlen(code)) == 0, "%s", r->str);
    freeReplyObject(r);
    r = px_cmd(k, "LIMITER CHECK user:sd");
    cr_assert_eq(r->type, REDIS_REPLY_ERROR, "fail_closed check: %d", r->type);
    cr_assert(strncmp(r->str, code, strlen(code)) == 0, "%s", r->str);
    freeReplyObject(r);
    redisFree(k);
    redisFree(o);
}

/* Once the node decides again: nothing was taken while it could not (a
 * PEEK answers what a CHECK would leave: 5 of a fresh 6). */
static void check_decided_again(void)
{
    redisContext *o = px_connect(px_env()->proxy.port);
    struct px_five f;
    int i;

    for (i = 0;; i++) {
        f = px_take_five(px_cmd(o, "LIMITER PEEK user:sd"), "peek again");
        if (f.remaining != 0 || i >= POLL_MAX) {
            break;
        }
        px_sleep_ms(POLL_STEP);
    }
    cr_assert_eq(f.remaining, 5,
                 "the checks took %lld while the node could not decide",
                 5 - f.remaining);
    px_check_five(px_cmd(o, "CL.THROTTLE sd 1 1 60"), "throttle again", 0, 2, 1,
                  -1, 60);
    redisFree(o);
}

/* A replica whose master is gone, with replica-serve-stale-data no,
 * answers -MASTERDOWN to everything the limiter sends. */
Test(it_store_down, masterdown_fails_open_or_passes_the_error, .fini = fini,
     .timeout = 60)
{
    char port[16];
    const char *extra[] = { "--replicaof", "127.0.0.1",
                            port,          "--replica-serve-stale-data",
                            "no",          NULL };

    snprintf(port, sizeof(port), "%d", px_free_port());
    start(extra, "");
    check_undecided("MASTERDOWN ");
}

/* A client's script runs past Redis's busy-reply-threshold: Redis answers
 * -BUSY to every other command until it ends. */
Test(it_store_down, busy_script_fails_open_or_passes_the_error, .fini = fini,
     .timeout = 60)
{
    const char *extra[] = { "--busy-reply-threshold", "100", NULL };
    redisContext *hold, *probe;
    redisReply *r;
    int i;

    start(extra, "busy_reply_threshold_ms: 100\ncommand_timeout_ms: 5000\n");
    hold = px_redis_connect(&px_env()->redis, NULL);
    probe = px_redis_connect(&px_env()->redis, NULL);
    px_hold_redis(hold, 4000);
    for (i = 0; i < POLL_MAX; i++) {
        r = px_cmd(probe, "GET x");
        int busy =
            r->type == REDIS_REPLY_ERROR && strncmp(r->str, "BUSY ", 5) == 0;
        freeReplyObject(r);
        if (busy) {
            break;
        }
    }
    cr_assert_lt(i, POLL_MAX, "Redis never said BUSY");
    check_undecided("BUSY ");
    px_check_int(px_next(hold), 1);
    redisFree(probe);
    redisFree(hold);
    check_decided_again();
}

/* A node restarted with data to load answers -LOADING until it is done
 * (key-load-delay slows each key's load; Redis's own tests do the same). */
Test(it_store_down, loading_fails_open_or_passes_the_error, .fini = fini,
     .timeout = 90)
{
    const char *slow[] = { "--key-load-delay", "100",
                           "--loading-process-events-interval-bytes", "1024",
                           NULL };
    struct px_child *redis = &px_env()->redis;
    redisContext *d, *probe;
    redisReply *r;
    int i, j;

    start(NULL, "");
    d = px_redis_connect(redis, NULL);
    for (i = 0; i < LOAD_KEYS; i += LOAD_BATCH) {
        for (j = 0; j < LOAD_BATCH; j++) {
            redisAppendCommand(d, "SET k:%d v", i + j);
        }
        for (j = 0; j < LOAD_BATCH; j++) {
            px_check_status(px_next(d), "OK");
        }
    }
    px_check_status(px_cmd(d, "SAVE"), "OK");
    redisFree(d);
    px_redis_kill(redis, SIGTERM);
    px_redis_start(redis, slow);
    probe = px_redis_connect(redis, NULL);
    r = px_cmd(probe, "GET x");
    cr_assert_eq(r->type, REDIS_REPLY_ERROR, "not loading: %d", r->type);
    cr_assert(strncmp(r->str, "LOADING ", 8) == 0, "%s", r->str);
    freeReplyObject(r);
    check_undecided("LOADING ");
    redisFree(probe);
    check_decided_again();
}
