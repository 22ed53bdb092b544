/* Authentication: the proxy's own requirepass, and the password the proxy
 * uses towards a redis that requires one. */
#include "tests/integration/fixture.h"
#include "tests/support/px_test.h"

#include <string.h>
#include <unistd.h>

PX_TEST_SUITE(it_auth);

#define PROXY_PASS    "s3cret pass"
#define UPSTREAM_PASS "up-secret"

/* redis without a password; the proxy requires PROXY_PASS. */
static void init_requirepass(void)
{
    px_env_prepare();
    px_redis_start(&px_env()->redis, NULL);
    px_proxy_start_for(&px_env()->proxy, &px_env()->redis,
                       "requirepass: \"" PROXY_PASS "\"\n");
}

/* redis requires UPSTREAM_PASS; the proxy requires nothing. */
static void init_upstream_password(void)
{
    static const char *const args[] = { "--requirepass", UPSTREAM_PASS, NULL };
    px_env_prepare();
    px_redis_start(&px_env()->redis, args);
    px_proxy_start_for(&px_env()->proxy, &px_env()->redis,
                       "upstream_password: " UPSTREAM_PASS "\n");
}

#define NOAUTH "NOAUTH Authentication required."

Test(it_auth, commands_before_auth_get_noauth, .init = init_requirepass,
     .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    px_check_error(px_cmd(c, "GET k"), NOAUTH);
    px_check_error(px_cmd(c, "SET k v"), NOAUTH);
    px_check_error(px_cmd(c, "PING"), NOAUTH);
    px_check_error(px_cmd(c, "FOO.BAR"), NOAUTH);
    px_check_error(px_cmd(c, "MULTI"), NOAUTH);
    px_check_error(px_cmd(c, "SUBSCRIBE ch"), NOAUTH);
    redisFree(c);

    /* Nothing reached redis. */
    redisContext *direct = px_redis_connect(&px_env()->redis, NULL);
    px_check_nil(px_cmd(direct, "GET k"));
    redisFree(direct);
}

Test(it_auth, wrong_password_gets_wrongpass, .init = init_requirepass,
     .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    px_check_error_prefix(px_cmd(c, "AUTH %s", "nope"), "WRONGPASS");
    px_check_error_prefix(px_cmd(c, "AUTH %s", PROXY_PASS "x"), "WRONGPASS");
    px_check_error_prefix(px_cmd(c, "AUTH default %s", "nope"), "WRONGPASS");
    px_check_error(px_cmd(c, "GET k"), NOAUTH);
    redisFree(c);
}

Test(it_auth, right_password_unlocks_commands, .init = init_requirepass,
     .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    px_check_status(px_cmd(c, "AUTH %s", PROXY_PASS), "OK");
    px_check_status(px_cmd(c, "SET k v"), "OK");
    px_check_str(px_cmd(c, "GET k"), "v");
    px_check_status(px_cmd(c, "PING"), "PONG");

    /* Authentication is per client. */
    redisContext *other = px_connect(px_env()->proxy.port);
    px_check_error(px_cmd(other, "GET k"), NOAUTH);
    redisFree(other);
    redisFree(c);
}

Test(it_auth, auth_with_default_user_form_is_accepted, .init = init_requirepass,
     .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    px_check_status(px_cmd(c, "AUTH default %s", PROXY_PASS), "OK");
    px_check_status(px_cmd(c, "SET k2 v2"), "OK");
    px_check_str(px_cmd(c, "GET k2"), "v2");
    redisFree(c);
}

Test(it_auth, pipelined_auth_applies_to_following_commands,
     .init = init_requirepass, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    redisAppendCommand(c, "GET p");
    redisAppendCommand(c, "AUTH %s", PROXY_PASS);
    redisAppendCommand(c, "SET p 1");
    redisAppendCommand(c, "GET p");
    px_check_error(px_next(c), NOAUTH);
    px_check_status(px_next(c), "OK");
    px_check_status(px_next(c), "OK");
    px_check_str(px_next(c), "1");
    redisFree(c);
}

Test(it_auth, quit_is_allowed_before_auth, .init = init_requirepass,
     .fini = px_env_fini, .timeout = 60)
{
    int fd = px_raw_connect(px_env()->proxy.port, 0);
    cr_assert_eq(px_raw_send(fd, "QUIT\r\n", 6), 0);
    char buf[64];
    int closed = 0;
    px_raw_read_to_close(fd, buf, sizeof(buf), PX_CLIENT_TIMEOUT_S * 1000,
                         &closed);
    cr_assert_str_eq(buf, "+OK\r\n");
    cr_assert(closed);
    close(fd);
}

Test(it_auth, auth_without_requirepass_is_an_error, .init = px_env_init,
     .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    redisReply *r = px_cmd(c, "AUTH %s", "whatever");
    cr_assert_eq(r->type, REDIS_REPLY_ERROR, "AUTH accepted: type %d", r->type);
    cr_assert(strncmp(r->str, "ERR AUTH", 8) == 0, "%s", r->str);
    cr_assert_not_null(strstr(r->str, "without any password configured"), "%s",
                       r->str);
    freeReplyObject(r);
    px_check_status(px_cmd(c, "PING"), "PONG");
    redisFree(c);
}

Test(it_auth, proxy_authenticates_to_upstream_with_upstream_password,
     .init = init_upstream_password, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    px_check_status(px_cmd(c, "SET up v"), "OK");
    px_check_str(px_cmd(c, "GET up"), "v");
    for (int i = 0; i < 100; i++) {
        redisAppendCommand(c, "INCR cnt");
    }
    for (long long i = 1; i <= 100; i++) {
        px_check_int(px_next(c), i);
    }
    /* Private connections (transactions) authenticate as well. */
    px_check_status(px_cmd(c, "MULTI"), "OK");
    px_check_status(px_cmd(c, "INCR cnt"), "QUEUED");
    redisReply *r = px_cmd(c, "EXEC");
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    cr_assert_eq(r->elements, 1);
    cr_assert_eq(r->element[0]->integer, 101);
    freeReplyObject(r);
    redisFree(c);

    redisContext *direct = px_redis_connect(&px_env()->redis, UPSTREAM_PASS);
    px_check_str(px_cmd(direct, "GET up"), "v");
    redisFree(direct);
}

static void init_admin(void)
{
    px_redis_start(&px_env()->redis, NULL);
    px_proxy_start_for(&px_env()->proxy, &px_env()->redis,
                       "admin_password: \"adm1n\"\n");
}

Test(it_auth, limiter_keys_are_refused_to_clients_that_are_not_admin,
     .init = init_admin, .fini = px_env_fini, .timeout = 60)
{
    static const char noperm[] = "NOPERM keys under 'cellgate:' belong to "
                                 "the rate limiter; AUTH admin to touch them";
    redisContext *c = px_connect(px_env()->proxy.port);
    redisContext *direct = px_redis_connect(&px_env()->redis, NULL);

    /* Wait until the proxy knows key positions (COMMAND at connect). */
    long long deadline = px_now_ms() + 5000;
    for (;;) {
        redisReply *r = px_cmd(c, "SET cellgate:x forged");
        int refused = r->type == REDIS_REPLY_ERROR;
        freeReplyObject(r);
        if (refused) {
            break;
        }
        cr_assert_lt(px_now_ms(), deadline, "limiter keys never guarded");
        freeReplyObject(px_cmd(direct, "DEL cellgate:x"));
        px_sleep_ms(20);
    }
    px_check_error(px_cmd(c, "SET cellgate:x forged"), noperm);
    px_check_error(px_cmd(c, "DEL a cellgate:y"), noperm);
    px_check_error(px_cmd(c, "EVAL %s 1 cellgate:z", "return 1"), noperm);
    px_check_nil(px_cmd(direct, "GET cellgate:x"));
    /* The same on a private connection: inside MULTI the refusal also
     * aborts the transaction, as a command Redis refuses while queuing
     * does; the connection keeps working after it. */
    px_check_status(px_cmd(c, "MULTI"), "OK");
    px_check_status(px_cmd(c, "SET tx:k 1"), "QUEUED");
    px_check_error(px_cmd(c, "DEL cellgate:x"), noperm);
    px_check_error(px_cmd(c, "EXEC"),
                   "EXECABORT Transaction discarded because of previous "
                   "errors.");
    px_check_nil(px_cmd(direct, "GET tx:k"));
    px_check_status(px_cmd(c, "WATCH w"), "OK");
    px_check_error(px_cmd(c, "SET cellgate:x forged"), noperm);
    px_check_status(px_cmd(c, "UNWATCH"), "OK");
    px_check_nil(px_cmd(direct, "GET cellgate:x"));
    /* Other keys and values that merely contain the prefix are untouched;
     * CL.THROTTLE of a key under it is refused like any other command
     * (it would move a limiter key's TAT). */
    px_check_status(px_cmd(c, "SET k cellgate:value"), "OK");
    px_check_status(px_cmd(c, "SET xcellgate:k 1"), "OK");
    px_check_error(px_cmd(c, "CL.THROTTLE cellgate:own 1 1 1"), noperm);
    px_check_nil(px_cmd(direct, "GET cellgate:own"));
    redisReply *r = px_cmd(c, "CL.THROTTLE xcellgate:own 1 1 1");
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    freeReplyObject(r);
    /* An admin may. */
    px_check_status(px_cmd(c, "AUTH admin adm1n"), "OK");
    px_check_status(px_cmd(c, "SET cellgate:x repaired"), "OK");
    px_check_str(px_cmd(direct, "GET cellgate:x"), "repaired");
    redisFree(direct);
    redisFree(c);
}
