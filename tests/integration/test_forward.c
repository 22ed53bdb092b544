/* Forwarding: ordinary commands reach redis byte for byte, and the few
 * commands the proxy answers itself (PING, ECHO, HELLO, QUIT) get the
 * replies Redis would give. */
#include "tests/integration/fixture.h"
#include "tests/support/px_test.h"

#include <ctype.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

PX_TEST_SUITE(it_forward);
PX_TEST_SUITE(it_local);

#define MB (1024 * 1024)

/* Stores value through the proxy, then checks it both through the proxy
 * and directly on redis. */
static void roundtrip(redisContext *px, redisContext *direct, const char *key,
                      const char *val, size_t len)
{
    px_check_status(px_cmd(px, "SET %s %b", key, val, len), "OK");
    px_check_bulk(px_cmd(px, "GET %s", key), val, len);
    px_check_bulk(px_cmd(direct, "GET %s", key), val, len);
}

Test(it_forward, binary_values_survive_set_and_get_unchanged,
     .init = px_env_init, .fini = px_env_fini, .timeout = 60)
{
    redisContext *px = px_connect(px_env()->proxy.port);
    redisContext *direct = px_redis_connect(&px_env()->redis, NULL);

    roundtrip(px, direct, "nul", "a\0b\0", 4);
    roundtrip(px, direct, "crlf", "\r\n$3\r\n*1\r\n", 11);
    roundtrip(px, direct, "high", "\xff\xfe\x80\x00\x7f", 5);
    roundtrip(px, direct, "empty", "", 0);

    /* 1 MB covering every byte value, so framing is tested on a value that
     * spans many reads. */
    char *big = malloc(MB);
    cr_assert_not_null(big);
    unsigned x = 12345;
    for (size_t i = 0; i < MB; i++) {
        x = x * 1103515245u + 12345u;
        big[i] = (char)(x >> 16);
    }
    roundtrip(px, direct, "big", big, MB);

    /* And the other way: written directly, read through the proxy. */
    px_check_status(px_cmd(direct, "SET %s %b", "big2", big, (size_t)MB), "OK");
    px_check_bulk(px_cmd(px, "GET %s", "big2"), big, MB);
    free(big);

    /* Binary keys too. */
    px_check_status(px_cmd(px, "SET %b %s", "k\0\r\n\xff", (size_t)5, "v"),
                    "OK");
    px_check_str(px_cmd(direct, "GET %b", "k\0\r\n\xff", (size_t)5), "v");

    redisFree(px);
    redisFree(direct);
}

Test(it_forward, unknown_command_gets_redis_own_error_text, .init = px_env_init,
     .fini = px_env_fini, .timeout = 60)
{
    redisContext *px = px_connect(px_env()->proxy.port);
    redisContext *direct = px_redis_connect(&px_env()->redis, NULL);

    redisReply *want = px_cmd(direct, "FOO.BAR x y");
    cr_assert_eq(want->type, REDIS_REPLY_ERROR);
    cr_assert(strncmp(want->str, "ERR unknown command", 19) == 0, "%s",
              want->str);
    px_check_error(px_cmd(px, "FOO.BAR x y"), want->str);
    freeReplyObject(want);

    redisFree(px);
    redisFree(direct);
}

Test(it_forward, commands_outside_any_table_are_forwarded, .init = px_env_init,
     .fini = px_env_fini, .timeout = 60)
{
    redisContext *px = px_connect(px_env()->proxy.port);

    px_check_status(px_cmd(px, "SET n 12345"), "OK");
    px_check_str(px_cmd(px, "OBJECT ENCODING n"), "int");

    redisReply *id = px_cmd(px, "XADD s * field value");
    cr_assert_eq(id->type, REDIS_REPLY_STRING);
    char *dash = strchr(id->str, '-');
    cr_assert_not_null(dash, "stream id \"%s\"", id->str);
    cr_assert(isdigit((unsigned char)id->str[0]) &&
                  isdigit((unsigned char)dash[1]),
              "stream id \"%s\"", id->str);
    freeReplyObject(id);
    px_check_int(px_cmd(px, "XLEN s"), 1);

    redisReply *r = px_cmd(px, "XRANGE s - +");
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    cr_assert_eq(r->elements, 1);
    redisReply *entry = r->element[0];
    cr_assert_eq(entry->type, REDIS_REPLY_ARRAY);
    cr_assert_eq(entry->elements, 2);
    cr_assert_eq(entry->element[1]->elements, 2);
    cr_assert_str_eq(entry->element[1]->element[0]->str, "field");
    cr_assert_str_eq(entry->element[1]->element[1]->str, "value");
    freeReplyObject(r);

    /* Wrong arity and wrong type are redis's errors, not the proxy's. */
    px_check_error(px_cmd(px, "GET"),
                   "ERR wrong number of arguments for 'get' command");
    px_check_error_prefix(px_cmd(px, "LPUSH n x"), "WRONGTYPE");

    redisFree(px);
}

Test(it_forward, inline_commands_are_executed, .init = px_env_init,
     .fini = px_env_fini, .timeout = 60)
{
    int fd = px_raw_connect(px_env()->proxy.port, 0);

    cr_assert_eq(px_raw_send(fd, "PING\r\n", 6), 0);
    px_raw_expect(fd, "+PONG\r\n", 7);
    cr_assert_eq(px_raw_send(fd, "SET a b\r\n", 9), 0);
    px_raw_expect(fd, "+OK\r\n", 5);
    cr_assert_eq(px_raw_send(fd, "GET a\r\n", 7), 0);
    px_raw_expect(fd, "$1\r\nb\r\n", 7);

    /* Quoted arguments, a bare \n terminator, and an inline pipeline. */
    const char *req = "SET q \"hello world\"\nGET q\r\nECHO 'x y'\r\n";
    cr_assert_eq(px_raw_send(fd, req, strlen(req)), 0);
    const char *want = "+OK\r\n$11\r\nhello world\r\n$3\r\nx y\r\n";
    px_raw_expect(fd, want, strlen(want));
    close(fd);

    redisContext *direct = px_redis_connect(&px_env()->redis, NULL);
    px_check_str(px_cmd(direct, "GET a"), "b");
    px_check_str(px_cmd(direct, "GET q"), "hello world");
    redisFree(direct);
}

/* ---------------- Commands the proxy answers ---------------- */

Test(it_local, ping_and_echo_reply_like_redis, .init = px_env_init,
     .fini = px_env_fini, .timeout = 60)
{
    redisContext *px = px_connect(px_env()->proxy.port);

    px_check_status(px_cmd(px, "PING"), "PONG");
    px_check_str(px_cmd(px, "PING %s", "hello there"), "hello there");
    px_check_bulk(px_cmd(px, "PING %b", "a\0\r\n", (size_t)4), "a\0\r\n", 4);
    px_check_str(px_cmd(px, "ECHO %s", "x"), "x");
    px_check_bulk(px_cmd(px, "ECHO %b", "", (size_t)0), "", 0);
    px_check_error(px_cmd(px, "ECHO"),
                   "ERR wrong number of arguments for 'echo' command");

    redisFree(px);
}

/* ECHO is answered by cellgate; PING is Redis's health check and tells
 * the truth: Redis is down. */
Test(it_local, echo_is_answered_and_ping_tells_redis_is_down,
     .init = px_env_init, .fini = px_env_fini, .timeout = 60)
{
    px_redis_kill(&px_env()->redis, SIGKILL);
    redisContext *px = px_connect(px_env()->proxy.port);
    px_check_error_prefix(px_cmd(px, "PING"), "ERR upstream");
    px_check_str(px_cmd(px, "ECHO %s", "still here"), "still here");
    redisFree(px);
}

/* The value of `key` in a RESP2 HELLO map-as-array reply, or NULL. */
static redisReply *hello_field(redisReply *r, const char *key)
{
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
        redisReply *k = r->element[i];
        if (k->type == REDIS_REPLY_STRING && strcmp(k->str, key) == 0) {
            return r->element[i + 1];
        }
    }
    return NULL;
}

Test(it_local, hello_2_returns_a_resp2_map_with_proto_2, .init = px_env_init,
     .fini = px_env_fini, .timeout = 60)
{
    redisContext *px = px_connect(px_env()->proxy.port);

    redisReply *r = px_cmd(px, "HELLO 2");
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "HELLO 2 type %d", r->type);
    cr_assert(r->elements >= 6 && r->elements % 2 == 0, "%zu elements",
              (size_t)r->elements);
    cr_assert_str_eq(r->element[0]->str, "server");
    redisReply *server = hello_field(r, "server");
    cr_assert_eq(server->type, REDIS_REPLY_STRING);
    cr_assert_gt(server->len, 0);
    redisReply *version = hello_field(r, "version");
    cr_assert_not_null(version, "no \"version\" field");
    cr_assert_eq(version->type, REDIS_REPLY_STRING);
    redisReply *proto = hello_field(r, "proto");
    cr_assert_not_null(proto, "no \"proto\" field");
    cr_assert_eq(proto->type, REDIS_REPLY_INTEGER);
    cr_assert_eq(proto->integer, 2);
    freeReplyObject(r);

    /* The connection is still a working RESP2 connection. */
    px_check_status(px_cmd(px, "SET h 1"), "OK");
    px_check_str(px_cmd(px, "GET h"), "1");
    redisFree(px);
}

/* RESP3 itself is tested in test_resp3.c (hiredis 0.14 cannot read it);
 * here: versions other than 2 and 3 are refused as Redis does, and the
 * connection stays a RESP2 one. */
Test(it_local, hello_with_an_unknown_version_is_refused_with_noproto,
     .init = px_env_init, .fini = px_env_fini, .timeout = 60)
{
    redisContext *px = px_connect(px_env()->proxy.port);
    px_check_error(px_cmd(px, "HELLO 4"),
                   "NOPROTO unsupported protocol version");
    px_check_error(px_cmd(px, "HELLO 1"),
                   "NOPROTO unsupported protocol version");
    px_check_status(px_cmd(px, "PING"), "PONG");
    px_check_nil(px_cmd(px, "GET missing"));
    redisFree(px);
}

Test(it_local, quit_replies_ok_then_closes, .init = px_env_init,
     .fini = px_env_fini, .timeout = 60)
{
    int fd = px_raw_connect(px_env()->proxy.port, 0);
    /* Replies owed before QUIT arrive first; anything pipelined after QUIT
     * is not executed. */
    const char *req = "*3\r\n$3\r\nSET\r\n$2\r\nz0\r\n$1\r\n1\r\n"
                      "*1\r\n$4\r\nQUIT\r\n"
                      "*3\r\n$3\r\nSET\r\n$1\r\nz\r\n$1\r\n1\r\n";
    cr_assert_eq(px_raw_send(fd, req, strlen(req)), 0);
    char buf[256];
    int closed = 0;
    px_raw_read_to_close(fd, buf, sizeof(buf), PX_CLIENT_TIMEOUT_S * 1000,
                         &closed);
    cr_assert_str_eq(buf, "+OK\r\n+OK\r\n");
    cr_assert(closed, "connection still open after QUIT");
    close(fd);

    redisContext *direct = px_redis_connect(&px_env()->redis, NULL);
    px_check_str(px_cmd(direct, "GET z0"), "1");
    px_check_nil(px_cmd(direct, "GET z"));
    redisFree(direct);
}

Test(it_forward, info_starts_with_the_proxy_section_then_redis,
     .init = px_env_init, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    redisReply *r = px_cmd(c, "INFO");

    cr_assert_eq(r->type, REDIS_REPLY_STRING);
    cr_assert(strncmp(r->str, "# Proxy\r\n", 9) == 0, "%.40s", r->str);
    cr_assert_not_null(strstr(r->str, "proxy_mode:single\r\n"));
    cr_assert_not_null(strstr(r->str, "redis_version:"));
    freeReplyObject(r);
    /* A section argument reaches redis too. */
    r = px_cmd(c, "INFO keyspace");
    cr_assert_not_null(strstr(r->str, "# Keyspace"));
    cr_assert_null(strstr(r->str, "redis_version:"));
    freeReplyObject(r);
    redisFree(c);
}
