/* Upstream failure: while redis is down requests fail fast with an
 * "ERR upstream" error instead of hanging, and service resumes by itself
 * when redis is back. */
#include "tests/integration/fixture.h"
#include "tests/support/px_test.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

PX_TEST_SUITE(it_upstream);

#define UPSTREAM_ERR    "ERR upstream"
#define RECOVER_WAIT_MS 10000 /* bound on the reconnect after a restart */
#define RETRY_STEP_MS   100

/* Sends `cmd` until it gets a non-error reply (bounded) and returns that
 * reply. Every failure on the way must be the upstream error, not a hang, a
 * closed connection or another error. */
static redisReply *retry_until_served(redisContext *c, const char *cmd)
{
    long long deadline = px_now_ms() + RECOVER_WAIT_MS;
    for (;;) {
        redisReply *r = px_cmd(c, cmd);
        if (r->type != REDIS_REPLY_ERROR) {
            return r;
        }
        px_check_error_prefix(r, UPSTREAM_ERR);
        cr_assert_lt(px_now_ms(), deadline,
                     "\"%s\" not served %d ms after redis came back", cmd,
                     RECOVER_WAIT_MS);
        px_sleep_ms(RETRY_STEP_MS);
    }
}

Test(it_upstream, requests_fail_fast_while_redis_is_down_then_recover,
     .init = px_env_init, .fini = px_env_fini, .timeout = 120)
{
    struct px_env *e = px_env();
    redisContext *old = px_connect(e->proxy.port);
    px_check_status(px_cmd(old, "SET k before"), "OK");

    px_redis_kill(&e->redis, SIGKILL);

    /* The client connected before the crash gets errors on its existing
     * connection; so does a new client; local commands still work. */
    px_check_error_prefix(px_cmd(old, "GET k"), UPSTREAM_ERR);
    px_check_error_prefix(px_cmd(old, "SET k during"), UPSTREAM_ERR);
    px_check_str(px_cmd(old, "ECHO alive"), "alive");
    redisContext *fresh = px_connect(e->proxy.port);
    px_check_error_prefix(px_cmd(fresh, "GET k"), UPSTREAM_ERR);

    /* A pipeline gets one error per forwarded request, in order. */
    for (int i = 0; i < 20; i++) {
        redisAppendCommand(fresh, "GET k%d", i);
        redisAppendCommand(fresh, "ECHO %d", i);
    }
    for (int i = 0; i < 20; i++) {
        char want[16];
        redisReply *e1 = px_next(fresh);
        /* Once the reconnect has failed, the reason is named once. */
        cr_assert_null(strstr(e1->str, "unavailable: unavailable"), "%s",
                       e1->str);
        px_check_error_prefix(e1, UPSTREAM_ERR);
        snprintf(want, sizeof(want), "%d", i);
        px_check_str(px_next(fresh), want);
    }

    px_redis_restart(&e->redis);
    px_check_status(retry_until_served(old, "SET back yes"), "OK");
    px_check_status(retry_until_served(fresh, "SET back2 yes"), "OK");
    /* redis restarted empty; the writes went to the new instance. */
    px_check_nil(px_cmd(fresh, "GET k"));
    px_check_str(px_cmd(old, "GET back2"), "yes");
    redisContext *direct = px_redis_connect(&e->redis, NULL);
    px_check_str(px_cmd(direct, "GET back"), "yes");
    redisFree(direct);
    redisFree(old);
    redisFree(fresh);
}

Test(it_upstream, proxy_started_before_redis_serves_once_redis_is_up,
     .fini = px_env_fini, .timeout = 60)
{
    struct px_env *e = px_env();
    px_env_prepare();
    e->redis.port = px_free_port();
    px_proxy_start_for(&e->proxy, &e->redis, NULL);
    redisContext *c = px_connect(e->proxy.port);
    px_check_error_prefix(px_cmd(c, "GET k"), UPSTREAM_ERR);

    px_redis_start(&e->redis, NULL);
    px_check_status(retry_until_served(c, "SET k v"), "OK");
    px_check_str(px_cmd(c, "GET k"), "v");
    redisFree(c);
}

/* redis with DEBUG enabled, so a request can be made to sit in flight. */
static void init_debug(void)
{
    static const char *const args[] = { "--enable-debug-command", "yes", NULL };
    px_env_prepare();
    px_redis_start(&px_env()->redis, args);
    /* DEBUG and CONFIG GET are refused to ordinary clients by default. */
    px_proxy_start_for(&px_env()->proxy, &px_env()->redis,
                       "commands: +debug +config|get\n");
}

/* Returns once a PING straight to Redis goes unanswered for 100 ms: it is
 * running a long command. */
static void wait_until_redis_busy(int port)
{
    struct timeval tv = { 0, 100 * 1000 };
    int i;

    for (i = 0; i < 100; i++) {
        redisContext *d = redisConnectWithTimeout("127.0.0.1", port, tv);
        redisReply *r;
        cr_assert(d != NULL && d->err == 0, "connect to Redis");
        redisSetTimeout(d, tv);
        r = redisCommand(d, "PING");
        redisFree(d);
        if (r == NULL) {
            return;
        }
        freeReplyObject(r);
        px_sleep_ms(20);
    }
    cr_assert_fail("Redis never got busy");
}

Test(it_upstream, requests_in_flight_when_redis_dies_get_an_error,
     .init = init_debug, .fini = px_env_fini, .timeout = 60)
{
    struct px_env *e = px_env();
    redisContext *c = px_connect(e->proxy.port);
    redisContext *other = px_connect(e->proxy.port);

    /* DEBUG SLEEP runs on a connection of its own; once Redis sleeps,
     * `other`'s GET waits on a shared one. Both fail when Redis dies. */
    redisAppendCommand(c, "DEBUG SLEEP 3");
    redisAppendCommand(c, "GET k");
    px_flush(c);
    wait_until_redis_busy(e->redis.port);
    redisAppendCommand(other, "GET k");
    px_flush(other);
    px_sleep_ms(100);
    px_redis_kill(&e->redis, SIGKILL);

    px_check_error_prefix(px_next(c), UPSTREAM_ERR);
    px_check_error_prefix(px_next(c), UPSTREAM_ERR);
    px_check_error_prefix(px_next(other), UPSTREAM_ERR);
    px_check_str(px_cmd(c, "ECHO still-served"), "still-served");

    px_redis_restart(&e->redis);
    px_check_nil(retry_until_served(c, "GET k"));
    redisFree(c);
    redisFree(other);
}

/* The proxy gives up on a silent node after 300 ms (no allowance for a
 * long command). */
static void init_short_timeout(void)
{
    px_env_prepare();
    px_redis_start(&px_env()->redis, NULL);
    px_proxy_start_for(&px_env()->proxy, &px_env()->redis,
                       "command_timeout_ms: 300\nbusy_reply_threshold_ms: 0\n");
}

Test(it_upstream, timed_out_reply_is_never_given_to_a_later_request,
     .init = init_short_timeout, .fini = px_env_fini, .timeout = 60)
{
    struct px_env *e = px_env();
    redisContext *c = px_connect(e->proxy.port);
    px_check_status(px_cmd(c, "SET k1 v1"), "OK");
    px_check_status(px_cmd(c, "SET k2 v2"), "OK");

    /* A frozen redis: the request times out with an error, not a hang. */
    kill(e->redis.pid, SIGSTOP);
    px_check_error_prefix(px_cmd(c, "GET k1"), UPSTREAM_ERR);
    kill(e->redis.pid, SIGCONT);

    /* redis now answers the stale GET k1; that reply belongs to nobody. */
    for (int i = 0; i < 20; i++) {
        px_check_str(retry_until_served(c, "GET k2"), "v2");
    }
    redisFree(c);
}

/* The proxy gives up on a silent node after 1.2 s: long enough that a
 * shared machine's scheduling hiccup is not silence, short against the
 * pipeline below. */
static void init_pipeline_timeout(void)
{
    px_env_prepare();
    px_redis_start(&px_env()->redis, NULL);
    px_proxy_start_for(
        &px_env()->proxy, &px_env()->redis,
        "command_timeout_ms: 1200\nbusy_reply_threshold_ms: 0\n");
}

Test(it_upstream, long_pipeline_with_streaming_replies_never_times_out,
     .init = init_pipeline_timeout, .fini = px_env_fini, .timeout = 60)
{
    /* Each command keeps redis busy 40 ms: the last reply comes ~4 s
     * after the pipeline was sent, over three times the 1.2 s timeout,
     * but replies never stop arriving, so nothing is late. The padding
     * makes redis read (and so answer) a few commands at a time, as it
     * does with any large pipeline (it answers what one read brought in,
     * a dozen or so of these, well within the timeout). */
    redisContext *c = px_connect(px_env()->proxy.port);
    static char pad[8000];
    memset(pad, 'p', sizeof(pad) - 1);
    const char *spin = "local t=redis.call('TIME') "
                       "local s=t[1]*1000000+t[2] repeat "
                       "local n=redis.call('TIME') "
                       "until n[1]*1000000+n[2]-s>=40000 return 1";

    for (int i = 0; i < 100; i++) {
        redisAppendCommand(c, "EVAL %s 0 %s", spin, pad);
    }
    for (int i = 0; i < 100; i++) {
        px_check_int(px_next(c), 1);
    }
    redisFree(c);
}
