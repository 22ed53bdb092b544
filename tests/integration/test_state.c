/* Connection state: transactions, pub/sub, blocking commands, SELECT and
 * CLIENT SETNAME give the client a private upstream connection, and nothing
 * of that state leaks to, or delays, other clients. */
#include "tests/integration/fixture.h"
#include "tests/support/px_test.h"

#include <stdio.h>
#include <string.h>

PX_TEST_SUITE(it_state);

#define BYSTANDER_ROUNDS 1000 /* SET/GET round trips during a BLPOP */
#define BLOCKED_WAIT_MS  5000 /* bounded wait for redis to see the BLPOP */

/* Asserts an array reply of bulk strings equal to want[0..n-1], frees. */
static void check_strings(redisReply *r, const char *const *want, size_t n)
{
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "expected array, got type %d",
                 r->type);
    cr_assert_eq(r->elements, n, "%zu elements, expected %zu",
                 (size_t)r->elements, n);
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(r->element[i]->type, REDIS_REPLY_STRING);
        cr_assert_str_eq(r->element[i]->str, want[i]);
    }
    freeReplyObject(r);
}

/* Asserts a (p)subscribe/unsubscribe confirmation [kind, name, count]. */
static void check_confirm(redisReply *r, const char *kind, const char *name,
                          long long count)
{
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    cr_assert_eq(r->elements, 3);
    cr_assert_str_eq(r->element[0]->str, kind);
    if (name == NULL) {
        cr_assert_eq(r->element[1]->type, REDIS_REPLY_NIL);
    } else {
        cr_assert_str_eq(r->element[1]->str, name);
    }
    cr_assert_eq(r->element[2]->type, REDIS_REPLY_INTEGER);
    cr_assert_eq(r->element[2]->integer, count);
    freeReplyObject(r);
}

/* Polls redis until `field:value` appears in INFO clients (bounded). */
static int wait_info_clients(redisContext *direct, const char *line)
{
    long long deadline = px_now_ms() + BLOCKED_WAIT_MS;
    for (;;) {
        redisReply *r = px_cmd(direct, "INFO clients");
        int found =
            r->type == REDIS_REPLY_STRING && strstr(r->str, line) != NULL;
        freeReplyObject(r);
        if (found) {
            return 1;
        }
        if (px_now_ms() >= deadline) {
            return 0;
        }
        px_sleep_ms(10);
    }
}

Test(it_state, multi_exec_returns_the_array_of_queued_replies,
     .init = px_env_init, .fini = px_env_fini, .timeout = 60)
{
    redisContext *a = px_connect(px_env()->proxy.port);
    redisContext *b = px_connect(px_env()->proxy.port);

    px_check_status(px_cmd(a, "MULTI"), "OK");
    px_check_status(px_cmd(a, "SET t 1"), "QUEUED");
    /* Another client is not inside A's transaction. */
    px_check_status(px_cmd(b, "SET other 2"), "OK");
    px_check_nil(px_cmd(b, "GET t"));
    px_check_status(px_cmd(a, "INCR t"), "QUEUED");

    redisReply *r = px_cmd(a, "EXEC");
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    cr_assert_eq(r->elements, 2);
    cr_assert_eq(r->element[0]->type, REDIS_REPLY_STATUS);
    cr_assert_str_eq(r->element[0]->str, "OK");
    cr_assert_eq(r->element[1]->type, REDIS_REPLY_INTEGER);
    cr_assert_eq(r->element[1]->integer, 2);
    freeReplyObject(r);

    px_check_str(px_cmd(b, "GET t"), "2");
    px_check_str(px_cmd(a, "GET other"), "2");
    redisFree(a);
    redisFree(b);
}

Test(it_state, ping_and_echo_inside_multi_are_queued, .init = px_env_init,
     .fini = px_env_fini, .timeout = 60)
{
    /* Redis queues every command inside MULTI, local ones included. */
    redisContext *a = px_connect(px_env()->proxy.port);
    px_check_status(px_cmd(a, "MULTI"), "OK");
    px_check_status(px_cmd(a, "PING"), "QUEUED");
    px_check_status(px_cmd(a, "ECHO hi"), "QUEUED");
    px_check_status(px_cmd(a, "SET e 1"), "QUEUED");
    redisReply *r = px_cmd(a, "EXEC");
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    cr_assert_eq(r->elements, 3);
    cr_assert_eq(r->element[0]->type, REDIS_REPLY_STATUS);
    cr_assert_str_eq(r->element[0]->str, "PONG");
    cr_assert_eq(r->element[1]->type, REDIS_REPLY_STRING);
    cr_assert_str_eq(r->element[1]->str, "hi");
    cr_assert_str_eq(r->element[2]->str, "OK");
    freeReplyObject(r);
    redisFree(a);
}

Test(it_state, arity_error_inside_multi_aborts_exec, .init = px_env_init,
     .fini = px_env_fini, .timeout = 60)
{
    /* Redis flags the transaction on a rejected command, so EXEC discards
     * it; answering the error in the proxy would let EXEC commit. */
    redisContext *a = px_connect(px_env()->proxy.port);
    px_check_status(px_cmd(a, "MULTI"), "OK");
    px_check_status(px_cmd(a, "SET ab 1"), "QUEUED");
    px_check_error(px_cmd(a, "GET"),
                   "ERR wrong number of arguments for 'get' command");
    px_check_error(px_cmd(a, "EXEC"),
                   "EXECABORT Transaction discarded because of previous "
                   "errors.");
    px_check_nil(px_cmd(a, "GET ab"));
    redisFree(a);
}

Test(it_state, pipelined_transactions_see_their_own_writes, .init = px_env_init,
     .fini = px_env_fini, .timeout = 60)
{
    /* Commands around a transaction, in one pipeline, run in the order
     * sent even though the transaction uses another upstream connection. */
    redisContext *a = px_connect(px_env()->proxy.port);
    for (int i = 0; i < 100; i++) {
        redisAppendCommand(a, "INCR p");
        redisAppendCommand(a, "MULTI");
        redisAppendCommand(a, "INCR p");
        redisAppendCommand(a, "EXEC");
        redisAppendCommand(a, "GET p");
    }
    char want[32];
    for (long long i = 0; i < 100; i++) {
        px_check_int(px_next(a), 2 * i + 1);
        px_check_status(px_next(a), "OK");
        px_check_status(px_next(a), "QUEUED");
        redisReply *r = px_next(a);
        cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
        cr_assert_eq(r->elements, 1);
        cr_assert_eq(r->element[0]->integer, 2 * i + 2);
        freeReplyObject(r);
        snprintf(want, sizeof(want), "%lld", 2 * i + 2);
        px_check_str(px_next(a), want);
    }
    redisFree(a);
}

Test(it_state, state_of_a_closed_client_never_reaches_another_client,
     .init = px_env_init, .fini = px_env_fini, .timeout = 60)
{
    redisContext *direct = px_redis_connect(&px_env()->redis, NULL);
    px_check_status(px_cmd(direct, "SET shared db0"), "OK");
    for (int i = 0; i < 20; i++) {
        /* Leave in the middle of a transaction, in db 1, watching. */
        redisContext *a = px_connect(px_env()->proxy.port);
        px_check_status(px_cmd(a, "SELECT 1"), "OK");
        px_check_status(px_cmd(a, "WATCH shared"), "OK");
        px_check_status(px_cmd(a, "MULTI"), "OK");
        px_check_status(px_cmd(a, "SET leaked yes"), "QUEUED");
        redisFree(a);

        redisContext *b = px_connect(px_env()->proxy.port);
        px_check_str(px_cmd(b, "GET shared"), "db0");
        px_check_status(px_cmd(b, "SET fresh %d", i), "OK");
        px_check_error(px_cmd(b, "EXEC"), "ERR EXEC without MULTI");
        redisFree(b);
    }
    px_check_status(px_cmd(direct, "SELECT 1"), "OK");
    px_check_nil(px_cmd(direct, "GET leaked"));
    redisFree(direct);
}

Test(it_state, abandoned_blpop_does_not_consume_later_pushes,
     .init = px_env_init, .fini = px_env_fini, .timeout = 60)
{
    redisContext *direct = px_redis_connect(&px_env()->redis, NULL);
    redisContext *a = px_connect(px_env()->proxy.port);
    cr_assert_eq(redisAppendCommand(a, "BLPOP q 0"), REDIS_OK);
    px_flush(a);
    cr_assert(wait_info_clients(direct, "blocked_clients:1\r\n"),
              "redis never saw the BLPOP");
    redisFree(a);
    /* The client is gone, so its BLPOP must be gone from redis too. */
    cr_assert(wait_info_clients(direct, "blocked_clients:0\r\n"),
              "BLPOP of a closed client still blocked in redis");
    redisContext *b = px_connect(px_env()->proxy.port);
    px_check_int(px_cmd(b, "LPUSH q v"), 1);
    px_check_int(px_cmd(b, "LLEN q"), 1);
    redisFree(b);
    redisFree(direct);
}

Test(it_state, discard_drops_the_queued_commands, .init = px_env_init,
     .fini = px_env_fini, .timeout = 60)
{
    redisContext *a = px_connect(px_env()->proxy.port);
    px_check_status(px_cmd(a, "SET d before"), "OK");
    px_check_status(px_cmd(a, "MULTI"), "OK");
    px_check_status(px_cmd(a, "SET d after"), "QUEUED");
    px_check_status(px_cmd(a, "DISCARD"), "OK");
    px_check_str(px_cmd(a, "GET d"), "before");
    px_check_error(px_cmd(a, "EXEC"), "ERR EXEC without MULTI");
    redisFree(a);
}

Test(it_state, watch_aborts_exec_after_a_concurrent_write, .init = px_env_init,
     .fini = px_env_fini, .timeout = 60)
{
    redisContext *a = px_connect(px_env()->proxy.port);
    redisContext *b = px_connect(px_env()->proxy.port);

    px_check_status(px_cmd(a, "SET w 1"), "OK");
    px_check_status(px_cmd(a, "WATCH w"), "OK");
    px_check_status(px_cmd(b, "SET w 2"), "OK");
    px_check_status(px_cmd(a, "MULTI"), "OK");
    px_check_status(px_cmd(a, "SET w 3"), "QUEUED");
    px_check_nil(px_cmd(a, "EXEC"));
    px_check_str(px_cmd(b, "GET w"), "2");

    /* Without interference the same sequence commits. */
    px_check_status(px_cmd(a, "WATCH w"), "OK");
    px_check_status(px_cmd(a, "MULTI"), "OK");
    px_check_status(px_cmd(a, "SET w 3"), "QUEUED");
    redisReply *r = px_cmd(a, "EXEC");
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    cr_assert_eq(r->elements, 1);
    cr_assert_str_eq(r->element[0]->str, "OK");
    freeReplyObject(r);
    px_check_str(px_cmd(b, "GET w"), "3");

    redisFree(a);
    redisFree(b);
}

Test(it_state, subscriber_receives_published_messages, .init = px_env_init,
     .fini = px_env_fini, .timeout = 60)
{
    redisContext *a = px_connect(px_env()->proxy.port);
    redisContext *b = px_connect(px_env()->proxy.port);

    check_confirm(px_cmd(a, "SUBSCRIBE news"), "subscribe", "news", 1);
    px_check_int(px_cmd(b, "PUBLISH news hello"), 1);
    px_check_int(px_cmd(b, "PUBLISH elsewhere ignored"), 0);
    px_check_int(px_cmd(b, "PUBLISH news %b", "bin\0\r\n", (size_t)6), 1);

    const char *const m1[] = { "message", "news", "hello" };
    check_strings(px_next(a), m1, 3);
    redisReply *r = px_next(a);
    cr_assert_eq(r->elements, 3);
    cr_assert_str_eq(r->element[0]->str, "message");
    cr_assert_eq(r->element[2]->len, 6);
    cr_assert(memcmp(r->element[2]->str, "bin\0\r\n", 6) == 0);
    freeReplyObject(r);

    /* B, a normal client, is not affected by A's subscription. */
    px_check_status(px_cmd(b, "SET s 1"), "OK");
    px_check_str(px_cmd(b, "GET s"), "1");
    redisFree(a);
    redisFree(b);
}

Test(it_state, pattern_subscriber_receives_matching_messages,
     .init = px_env_init, .fini = px_env_fini, .timeout = 60)
{
    redisContext *a = px_connect(px_env()->proxy.port);
    redisContext *b = px_connect(px_env()->proxy.port);

    check_confirm(px_cmd(a, "PSUBSCRIBE ne*"), "psubscribe", "ne*", 1);
    px_check_int(px_cmd(b, "PUBLISH news x"), 1);
    px_check_int(px_cmd(b, "PUBLISH other y"), 0);
    px_check_int(px_cmd(b, "PUBLISH nest z"), 1);

    const char *const m1[] = { "pmessage", "ne*", "news", "x" };
    check_strings(px_next(a), m1, 4);
    const char *const m2[] = { "pmessage", "ne*", "nest", "z" };
    check_strings(px_next(a), m2, 4);
    redisFree(a);
    redisFree(b);
}

Test(it_state, unsubscribing_from_all_returns_to_normal_commands,
     .init = px_env_init, .fini = px_env_fini, .timeout = 60)
{
    redisContext *a = px_connect(px_env()->proxy.port);
    redisContext *b = px_connect(px_env()->proxy.port);

    px_check_status(px_cmd(b, "SET u value"), "OK");
    redisReply *r = px_cmd(a, "SUBSCRIBE c1 c2");
    check_confirm(r, "subscribe", "c1", 1);
    check_confirm(px_next(a), "subscribe", "c2", 2);

    /* Unsubscribing from all confirms each channel; redis picks the order. */
    r = px_cmd(a, "UNSUBSCRIBE");
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    cr_assert_eq(r->elements, 3);
    cr_assert_str_eq(r->element[0]->str, "unsubscribe");
    cr_assert_eq(r->element[2]->integer, 1);
    int first_c1 = strcmp(r->element[1]->str, "c1") == 0;
    freeReplyObject(r);
    check_confirm(px_next(a), "unsubscribe", first_c1 ? "c2" : "c1", 0);

    /* The subscription is really gone, and A is a normal client again. */
    px_check_int(px_cmd(b, "PUBLISH c1 x"), 0);
    px_check_str(px_cmd(a, "GET u"), "value");
    px_check_status(px_cmd(a, "SET u2 v2"), "OK");
    px_check_str(px_cmd(b, "GET u2"), "v2");
    px_check_status(px_cmd(a, "PING"), "PONG");
    redisFree(a);
    redisFree(b);
}

Test(it_state, blpop_in_one_client_does_not_delay_others, .init = px_env_init,
     .fini = px_env_fini, .timeout = 120)
{
    redisContext *a = px_connect(px_env()->proxy.port);
    redisContext *b = px_connect(px_env()->proxy.port);
    redisContext *direct = px_redis_connect(&px_env()->redis, NULL);

    cr_assert_eq(redisAppendCommand(a, "BLPOP jobs 0"), REDIS_OK);
    px_flush(a);
    cr_assert(wait_info_clients(direct, "blocked_clients:1\r\n"),
              "redis never saw the BLPOP");

    /* Each round trip must complete within B's read timeout while A's
     * BLPOP holds an upstream connection. */
    char val[32];
    for (int i = 0; i < BYSTANDER_ROUNDS; i++) {
        snprintf(val, sizeof(val), "%d", i);
        px_check_status(px_cmd(b, "SET b%d %s", i % 10, val), "OK");
        px_check_str(px_cmd(b, "GET b%d", i % 10), val);
    }
    cr_assert(wait_info_clients(direct, "blocked_clients:1\r\n"),
              "the BLPOP ended early");

    px_check_int(px_cmd(b, "LPUSH jobs job1"), 1);
    const char *const want[] = { "jobs", "job1" };
    check_strings(px_next(a), want, 2);

    /* A is a normal client again; the list was consumed. */
    px_check_int(px_cmd(a, "LLEN jobs"), 0);
    px_check_status(px_cmd(a, "SET after blpop"), "OK");
    px_check_str(px_cmd(b, "GET after"), "blpop");

    redisFree(a);
    redisFree(b);
    redisFree(direct);
}

Test(it_state, blpop_with_timeout_returns_nil_when_nothing_arrives,
     .init = px_env_init, .fini = px_env_fini, .timeout = 60)
{
    redisContext *a = px_connect(px_env()->proxy.port);
    px_check_nil(px_cmd(a, "BLPOP empty 0.1"));
    px_check_status(px_cmd(a, "PING"), "PONG");
    redisFree(a);
}

Test(it_state, select_isolates_databases, .init = px_env_init,
     .fini = px_env_fini, .timeout = 60)
{
    redisContext *a = px_connect(px_env()->proxy.port);
    redisContext *b = px_connect(px_env()->proxy.port);
    redisContext *direct = px_redis_connect(&px_env()->redis, NULL);

    px_check_status(px_cmd(b, "SET k db0"), "OK");
    px_check_status(px_cmd(a, "SELECT 1"), "OK");
    px_check_nil(px_cmd(a, "GET k"));
    px_check_status(px_cmd(a, "SET k db1"), "OK");
    px_check_str(px_cmd(a, "GET k"), "db1");

    /* Other clients, and redis's own db 0, still see db 0. */
    px_check_str(px_cmd(b, "GET k"), "db0");
    px_check_status(px_cmd(b, "SET only0 x"), "OK");
    px_check_nil(px_cmd(a, "GET only0"));
    px_check_str(px_cmd(direct, "GET k"), "db0");
    px_check_status(px_cmd(direct, "SELECT 1"), "OK");
    px_check_str(px_cmd(direct, "GET k"), "db1");

    /* Back to db 0 on the same client. */
    px_check_status(px_cmd(a, "SELECT 0"), "OK");
    px_check_str(px_cmd(a, "GET k"), "db0");
    px_check_str(px_cmd(a, "GET only0"), "x");

    redisFree(a);
    redisFree(b);
    redisFree(direct);
}

Test(it_state, client_name_is_private_to_the_client, .init = px_env_init,
     .fini = px_env_fini, .timeout = 60)
{
    redisContext *a = px_connect(px_env()->proxy.port);
    redisContext *b = px_connect(px_env()->proxy.port);

    px_check_nil(px_cmd(a, "CLIENT GETNAME"));
    px_check_status(px_cmd(a, "CLIENT SETNAME alice"), "OK");
    px_check_str(px_cmd(a, "CLIENT GETNAME"), "alice");
    px_check_nil(px_cmd(b, "CLIENT GETNAME"));
    px_check_status(px_cmd(b, "CLIENT SETNAME bob"), "OK");
    px_check_str(px_cmd(b, "CLIENT GETNAME"), "bob");
    px_check_str(px_cmd(a, "CLIENT GETNAME"), "alice");

    /* Named clients still run ordinary commands. */
    px_check_status(px_cmd(a, "SET n1 v"), "OK");
    px_check_str(px_cmd(b, "GET n1"), "v");

    redisFree(a);
    redisFree(b);
}
