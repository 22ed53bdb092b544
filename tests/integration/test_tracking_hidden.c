/* CLIENT TRACKING through cellgate never shows an ordinary client the
 * limiter's key names, and still works as Redis's: BCAST with no PREFIX is
 * accepted, and Redis's broadcasts of the limiter's writes (real LIMITER
 * CHECKs, and a key planted under the prefix directly) never reach the
 * client, in a RESP2 redirect target's messages of __redis__:invalidate
 * nor in a RESP3 tracker's invalidate pushes; an invalidation that names a
 * limiter key beside the client's own comes without it; the client's own
 * invalidations all arrive, in Redis's order; an admin's arrive whole. A
 * RESP2 redirect target whose PING is owed when a limiter key's
 * invalidation arrives gets its PONG and nothing else. A client beside
 * them is served exactly. Single mode. */
#include "tests/integration/fixture.h"
#include "tests/support/px_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

PX_TEST_SUITE(it_track_hidden);

#define ADMIN_PASS "adm1n"
#define PREFIX     "cellgate:"
#define LIMITS_YAML                                                            \
    "login:\n  children:\n    \"*\":\n      limits: [5, 1, 3600]\n"

/* The end of cellgate's HELLO 3 reply (its last field). */
#define HELLO_END "$7\r\nmodules\r\n*0\r\n"

static void init(void)
{
    char limits[PX_PATH_MAX], yaml[PX_PATH_MAX + 128];

    px_env_prepare();
    px_write_file(limits, sizeof(limits), "limits.yaml", LIMITS_YAML);
    snprintf(yaml, sizeof(yaml), "admin_password: %s\nlimits_file: %s\n",
             ADMIN_PASS, limits);
    px_redis_start(&px_env()->redis, NULL);
    px_proxy_start_for(&px_env()->proxy, &px_env()->redis, yaml);
}

static void fini(void)
{
    px_env_fini();
}

/* A limiter decision, which writes limiter keys in Redis (checked there:
 * so Redis does broadcast them). */
static void th_limiter_writes(redisContext *c, redisContext *d, int n)
{
    redisReply *r = px_cmd(c, "LIMITER CHECK login:10.7.7.%d", n);

    cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "LIMITER CHECK: type %d (%s)",
                 r->type, r->type == REDIS_REPLY_ERROR ? r->str : "");
    freeReplyObject(r);
    r = px_cmd(d, "KEYS " PREFIX "*10.7.7.%d*", n);
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    cr_assert_gt(r->elements, 0, "no limiter key in Redis for 10.7.7.%d", n);
    freeReplyObject(r);
}

/* A client beside them: a write and a read of its own, exact. */
static void th_bystander(redisContext *b, int n)
{
    char v[16];

    snprintf(v, sizeof(v), "b%d", n);
    px_check_status(px_cmd(b, "SET by:key %s", v), "OK");
    px_check_str(px_cmd(b, "GET by:key"), v);
}

/* The next message of a RESP2 redirect target: an invalidation of exactly
 * the one key `key`. */
static void th_message_is(redisContext *t, const char *key)
{
    redisReply *r = px_next(t), *keys;

    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 3,
              "want an invalidation of %s: type %d", key, r->type);
    cr_assert_str_eq(r->element[0]->str, "message");
    cr_assert_str_eq(r->element[1]->str, "__redis__:invalidate");
    keys = r->element[2];
    cr_assert(keys->type == REDIS_REPLY_ARRAY && keys->elements == 1,
              "want [%s]: type %d, %zu keys%s%s", key, keys->type,
              keys->elements, keys->elements > 0 ? ", the first " : "",
              keys->elements > 0 ? keys->element[0]->str : "");
    cr_assert_str_eq(keys->element[0]->str, key);
    freeReplyObject(r);
}

/* Reads fd into buf (cap bytes) until what was read ends with `end`;
 * returns the length, buf NUL-terminated. */
static size_t th_raw_until(int fd, char *buf, size_t cap, const char *end)
{
    size_t got = 0, elen = strlen(end);
    int closed = 0;

    while (got < elen || memcmp(buf + got - elen, end, elen) != 0) {
        cr_assert_lt(got, cap - 1, "no '%s' in %zu bytes", end, got);
        cr_assert_eq(px_raw_read(fd, buf + got, 1, 5000, &closed), 1,
                     "cut short before '%s': %.*s", end, (int)got, buf);
        got++;
    }
    buf[got] = '\0';
    return got;
}

/* A raw connection to cellgate: `auth` first when given, then HELLO 3,
 * whose reply is read through. */
static int th_raw_resp3(const char *auth)
{
    int fd = px_raw_connect(px_env()->proxy.port, 0);
    char buf[2048];

    if (auth != NULL) {
        px_raw_send(fd, auth, strlen(auth));
        px_raw_expect(fd, "+OK\r\n", 5);
    }
    px_raw_send(fd, "HELLO 3\r\n", 9);
    th_raw_until(fd, buf, sizeof(buf), HELLO_END);
    return fd;
}

/* The invalidate push of the one key `key`, in RESP3. */
static void th_push_is(int fd, const char *key)
{
    char want[256];
    int n = snprintf(want, sizeof(want),
                     ">2\r\n$10\r\ninvalidate\r\n*1\r\n$%zu\r\n%s\r\n",
                     strlen(key), key);

    px_raw_expect(fd, want, (size_t)n);
}

Test(it_track_hidden, resp2_redirect_bcast_without_prefix, .init = init,
     .fini = fini)
{
    redisContext *t = px_connect(px_env()->proxy.port);
    redisContext *c = px_connect(px_env()->proxy.port);
    redisContext *b = px_connect(px_env()->proxy.port);
    redisContext *d = px_redis_connect(&px_env()->redis, NULL);
    redisReply *r = px_cmd(t, "CLIENT ID");
    long long id = r->integer;

    freeReplyObject(r);
    freeReplyObject(px_cmd(t, "SUBSCRIBE __redis__:invalidate"));
    px_check_status(px_cmd(c, "CLIENT TRACKING on BCAST REDIRECT %lld", id),
                    "OK");
    /* Limiter keys only: nothing reaches the target. */
    th_limiter_writes(c, d, 1);
    px_check_status(px_cmd(d, "SET " PREFIX "planted 1"), "OK");
    th_bystander(b, 1);
    /* One invalidation naming a limiter key and the client's: trimmed. */
    px_check_status(px_cmd(d, "MSET " PREFIX "x 1 app:b 2"), "OK");
    th_limiter_writes(c, d, 2);
    px_check_status(px_cmd(c, "SET app:c 3"), "OK");
    th_bystander(b, 2);

    th_message_is(t, "by:key"); /* the bystander's SET, bystander 1 */
    th_message_is(t, "app:b");
    th_message_is(t, "app:c");
    th_message_is(t, "by:key");
    /* And the flush that ends it all: a null list, as Redis sends it. */
    px_check_status(px_cmd(d, "FLUSHALL"), "OK");
    r = px_next(t);
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
                  r->element[2]->type == REDIS_REPLY_NIL,
              "want the flush's invalidation: type %d", r->type);
    freeReplyObject(r);
    th_bystander(b, 3);
    redisFree(d);
    redisFree(b);
    redisFree(c);
    redisFree(t);
}

Test(it_track_hidden, resp3_bcast_pushes, .init = init, .fini = fini)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    redisContext *b = px_connect(px_env()->proxy.port);
    redisContext *d = px_redis_connect(&px_env()->redis, NULL);
    int fd = th_raw_resp3(NULL);
    int fa = th_raw_resp3("AUTH admin " ADMIN_PASS "\r\n");

    px_raw_send(fd, "CLIENT TRACKING on BCAST\r\n", 26);
    px_raw_expect(fd, "+OK\r\n", 5);
    px_raw_send(fa, "CLIENT TRACKING on BCAST\r\n", 26);
    px_raw_expect(fa, "+OK\r\n", 5);

    th_limiter_writes(c, d, 1);
    px_check_status(px_cmd(d, "SET " PREFIX "y 1"), "OK");
    px_check_status(px_cmd(d, "MSET " PREFIX "z 1 app:c 2"), "OK");
    px_raw_send(fd, "PING\r\n", 6);
    /* Only the client's own key, before the PONG, as Redis sent it. */
    th_push_is(fd, "app:c");
    px_raw_expect(fd, "+PONG\r\n", 7);
    th_bystander(b, 1);

    /* The admin gets them whole: Redis did broadcast them. */
    px_check_status(px_cmd(d, "SET " PREFIX "y 2"), "OK");
    px_raw_send(fa, "PING\r\n", 6);
    {
        char buf[8192];

        th_raw_until(fa, buf, sizeof(buf), "+PONG\r\n");
        cr_assert(strstr(buf, "$10\r\n" PREFIX "y\r\n") != NULL &&
                      strstr(buf, "$5\r\napp:c\r\n") != NULL,
                  "admin's pushes: %s", buf);
    }
    px_check_status(px_cmd(d, "SET app:d 1"), "OK");
    px_raw_send(fd, "PING\r\n", 6);
    th_push_is(fd, "by:key"); /* the bystander's, then not y's */
    th_push_is(fd, "app:d");
    px_raw_expect(fd, "+PONG\r\n", 7);
    th_bystander(b, 2);
    close(fa);
    close(fd);
    redisFree(d);
    redisFree(b);
    redisFree(c);
}

/* An invalidation that Redis writes to a RESP2 redirect target after its
 * PING was sent and before the PONG takes the PING's place in the core's
 * reply order: filtered there too. An admin tracks a limiter key (without
 * BCAST, Redis invalidates at once, not at the end of the event loop);
 * its write and the target's PING reach a Redis held busy, the write
 * first. */
Test(it_track_hidden, resp2_target_with_a_reply_owed, .init = init,
     .fini = fini)
{
    static const char pong[] = "*2\r\n$4\r\npong\r\n$0\r\n\r\n";
    static const char sub[] =
        "*3\r\n$9\r\nsubscribe\r\n$20\r\n__redis__:invalidate\r\n:1\r\n";
    static const char inval[] = "*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:"
                                "invalidate\r\n*1\r\n$5\r\napp:q\r\n";
    redisContext *a = px_connect(px_env()->proxy.port);
    redisContext *b = px_connect(px_env()->proxy.port);
    redisContext *d = px_redis_connect(&px_env()->redis, NULL);
    redisContext *h = px_redis_connect(&px_env()->redis, NULL);
    redisContext *w = px_redis_connect(&px_env()->redis, NULL);
    int fd = px_raw_connect(px_env()->proxy.port, 0), i;
    char idbuf[32];

    px_raw_send(fd, "CLIENT ID\r\n", 11);
    th_raw_until(fd, idbuf, sizeof(idbuf), "\r\n");
    px_raw_send(fd, "SUBSCRIBE __redis__:invalidate\r\n", 32);
    px_raw_expect(fd, sub, sizeof(sub) - 1);
    px_check_status(px_cmd(a, "AUTH admin " ADMIN_PASS), "OK");
    px_check_status(
        px_cmd(a, "CLIENT TRACKING on REDIRECT %lld", atoll(idbuf + 1)), "OK");
    for (i = 0; i < 3; i++) {
        px_check_status(px_cmd(d, "SET " PREFIX "q%d 1", i), "OK");
        px_check_str(px_cmd(a, "GET " PREFIX "q%d", i), "1");
        px_hold_redis(h, 300);
        px_sleep_ms(50); /* the EVAL first: the rest waits behind it */
        redisAppendCommand(w, "SET " PREFIX "q%d 2", i);
        px_flush(w);
        px_sleep_ms(50); /* the write ahead of the PING in Redis's turn */
        px_raw_send(fd, "PING\r\n", 6);
        px_raw_expect(fd, pong, sizeof(pong) - 1);
        px_check_int(px_next(h), 1);
        px_check_status(px_next(w), "OK");
        th_bystander(b, i);
    }
    /* The client's own key still comes, and nothing before it. */
    px_check_status(px_cmd(d, "SET app:q 1"), "OK");
    px_check_str(px_cmd(a, "GET app:q"), "1");
    px_check_status(px_cmd(d, "SET app:q 2"), "OK");
    px_raw_expect(fd, inval, sizeof(inval) - 1);
    close(fd);
    redisFree(w);
    redisFree(h);
    redisFree(d);
    redisFree(b);
    redisFree(a);
}
