/* RESP3 clients (HELLO 3) through the proxy, against real redis-server
 * processes: the replies a RESP3 client gets through cellgate must be the
 * bytes Redis itself sends it (maps, sets, doubles, booleans, nulls, big
 * numbers, verbatim strings, attributes, pushes), while RESP2 clients of the
 * same proxy keep getting RESP2.
 *
 * hiredis 0.14 reads RESP2 only, so these tests talk over raw sockets and cut
 * replies with the proxy's own framer (parser/resp_framer.c, unit-tested on
 * its own). Most checks send the same commands to Redis directly and to the
 * proxy and compare the frames byte for byte. */
#include "tests/support/px_test.h"

#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "parser/buf.h"
#include "parser/resp.h"
#include "parser/resp_enc.h"
#include "parser/resp_value.h"
#include "tests/integration/cluster_fixture.h"
#include "tests/integration/fixture.h"

PX_TEST_SUITE(it_resp3);
PX_TEST_SUITE(it_resp3_cluster);

/* Longest wait for one reply: a hang fails the test. */
#define R3_WAIT_MS (PX_CLIENT_TIMEOUT_S * 1000)

/* Most arguments of one command sent by these tests. */
#define R3_MAX_ARGS 64

/* Commands in the pipeline test. */
#define R3_PIPELINE 300

/* Keys of the cluster test: enough to land on every master. */
#define R3_CLUSTER_KEYS 30

/* ---------------- Raw RESP connections ---------------- */

/* A client connection that reads whole frames. */
struct r3 {
    int fd;                 /* socket */
    struct resp_framer *fr; /* owned: frames the bytes read */
    struct buf in;          /* owned: bytes read, not yet returned */
};

/* One reply, owned by the caller (r3_free). */
struct r3_frame {
    char *p;    /* owned, NUL-terminated copy */
    size_t len; /* bytes */
};

static void r3_free(struct r3_frame *f)
{
    free(f->p);
    f->p = NULL;
}

/* Connects to a loopback port. With proto 3, says HELLO 3 and checks that a
 * map came back. */
static struct r3 *r3_open(int port, int proto);

static void r3_close(struct r3 *c)
{
    close(c->fd);
    resp_framer_free(c->fr);
    buf_free(&c->in);
    free(c);
}

/* Sends raw bytes. */
static void r3_send_raw(struct r3 *c, const char *p, size_t n)
{
    cr_assert_eq(px_raw_send(c->fd, p, n), 0, "send failed");
}

/* Appends one command (NULL-ended argument list) to `b`. */
static void r3_encode(struct buf *b, const char *first, va_list ap)
{
    const char *argv[R3_MAX_ARGS];
    size_t lens[R3_MAX_ARGS];
    int argc = 0;

    for (const char *a = first; a != NULL; a = va_arg(ap, const char *)) {
        cr_assert_lt(argc, R3_MAX_ARGS);
        argv[argc] = a;
        lens[argc] = strlen(a);
        argc++;
    }
    cr_assert_eq(resp_enc_argv(b, argc, argv, lens), BUF_OK);
}

/* Sends one command, given as NULL-ended strings. */
static void r3_send(struct r3 *c, const char *first, ...)
{
    struct buf b;
    va_list ap;

    buf_init(&b);
    va_start(ap, first);
    r3_encode(&b, first, ap);
    va_end(ap);
    r3_send_raw(c, b.data, b.len);
    buf_free(&b);
}

/* The next complete reply. Asserts one arrives within R3_WAIT_MS. */
static struct r3_frame r3_next(struct r3 *c)
{
    struct r3_frame f;
    size_t len;

    while (resp_framer_next(c->fr, &len) != RESP_OK) {
        struct pollfd pfd = { .fd = c->fd, .events = POLLIN };
        ssize_t n;

        cr_assert_eq(poll(&pfd, 1, R3_WAIT_MS), 1,
                     "no reply within %d ms (%zu bytes of a partial one)",
                     R3_WAIT_MS, c->in.len);
        cr_assert_eq(buf_reserve(&c->in, 64 * 1024), BUF_OK);
        n = recv(c->fd, buf_tail(&c->in), buf_avail(&c->in), 0);
        cr_assert_gt(n, 0, "connection closed while waiting for a reply");
        cr_assert_eq(resp_framer_feed(c->fr, buf_tail(&c->in), (size_t)n),
                     RESP_OK, "reply bytes are not RESP");
        buf_commit(&c->in, (size_t)n);
    }
    f.p = malloc(len + 1);
    cr_assert_not_null(f.p);
    memcpy(f.p, c->in.data, len);
    f.p[len] = '\0';
    f.len = len;
    buf_consume(&c->in, len);
    return f;
}

/* Sends a command and returns its reply. */
static struct r3_frame r3_call(struct r3 *c, const char *first, ...)
{
    struct buf b;
    va_list ap;

    buf_init(&b);
    va_start(ap, first);
    r3_encode(&b, first, ap);
    va_end(ap);
    r3_send_raw(c, b.data, b.len);
    buf_free(&b);
    return r3_next(c);
}

/* Printable form of RESP bytes for failure messages (static storage). */
static const char *r3_show(const char *p, size_t n)
{
    static char out[2][600];
    static int which;
    char *o = out[which ^= 1];
    size_t k = 0;

    for (size_t i = 0; i < n && k + 5 < sizeof(out[0]); i++) {
        unsigned char ch = (unsigned char)p[i];
        if (ch == '\r') {
            k += (size_t)snprintf(o + k, 3, "\\r");
        } else if (ch == '\n') {
            k += (size_t)snprintf(o + k, 3, "\\n");
        } else if (ch < 32 || ch > 126) {
            k += (size_t)snprintf(o + k, 5, "\\x%02x", ch);
        } else {
            o[k++] = (char)ch;
        }
    }
    o[k] = '\0';
    return o;
}

/* Asserts that the reply is exactly `want`, then frees it. */
static void r3_is(struct r3_frame f, const char *want, const char *what)
{
    size_t n = strlen(want);

    cr_assert(f.len == n && memcmp(f.p, want, n) == 0,
              "%s: got '%s', want '%s'", what, r3_show(f.p, f.len),
              r3_show(want, n));
    r3_free(&f);
}

/* Asserts two replies are byte-identical (proxy first, Redis second), then
 * frees both. */
static void r3_eq(struct r3_frame px, struct r3_frame direct, const char *what)
{
    cr_assert(px.len == direct.len && memcmp(px.p, direct.p, px.len) == 0,
              "%s: through cellgate '%s', straight to Redis '%s'", what,
              r3_show(px.p, px.len), r3_show(direct.p, direct.len));
    r3_free(&px);
    r3_free(&direct);
}

/* Sends the same command to the proxy and to Redis and asserts the replies
 * are byte-identical. */
static void r3_same(struct r3 *px, struct r3 *direct, const char *first, ...)
{
    struct buf b;
    va_list ap;

    buf_init(&b);
    va_start(ap, first);
    r3_encode(&b, first, ap);
    va_end(ap);
    r3_send_raw(px, b.data, b.len);
    r3_send_raw(direct, b.data, b.len);
    r3_eq(r3_next(px), r3_next(direct), r3_show(b.data, b.len));
    buf_free(&b);
}

/* A HELLO reply (map or RESP2 array) must have Redis's keys in Redis's
 * order, values of the same types, and `proto` equal to `proto`. */
static void r3_hello_shape(struct r3_frame px, struct r3_frame direct,
                           int proto)
{
    struct resp_value p, d;
    size_t used;

    cr_assert_eq(resp_value_parse(px.p, px.len, &p, &used), RESP_OK);
    cr_assert_eq(resp_value_parse(direct.p, direct.len, &d, &used), RESP_OK);
    cr_assert_eq(p.type, proto == 3 ? '%' : '*', "HELLO reply '%s'",
                 r3_show(px.p, px.len));
    cr_assert_eq(p.type, d.type);
    cr_assert_eq(p.n, d.n, "HELLO: %zu fields through cellgate, %zu in Redis",
                 p.n, d.n);
    for (size_t i = 0; i < p.n; i += 2) {
        cr_assert(p.elem[i].len == d.elem[i].len &&
                      memcmp(p.elem[i].str, d.elem[i].str, p.elem[i].len) == 0,
                  "HELLO field %zu: '%.*s', Redis has '%.*s'", i / 2,
                  (int)p.elem[i].len, p.elem[i].str, (int)d.elem[i].len,
                  d.elem[i].str);
        cr_assert_eq(p.elem[i + 1].type, d.elem[i + 1].type,
                     "HELLO field '%.*s' type", (int)p.elem[i].len,
                     p.elem[i].str);
        if (resp_value_is(&p.elem[i], "proto")) {
            cr_assert_eq(p.elem[i + 1].integer, proto);
        }
    }
    resp_value_free(&p);
    resp_value_free(&d);
    r3_free(&px);
    r3_free(&direct);
}

static struct r3 *r3_open(int port, int proto)
{
    struct r3 *c = calloc(1, sizeof(*c));

    cr_assert_not_null(c);
    c->fd = px_raw_connect(port, 0);
    c->fr = resp_framer_new();
    cr_assert_not_null(c->fr);
    buf_init(&c->in);
    if (proto == 3) {
        struct r3_frame f = r3_call(c, "HELLO", "3", NULL);
        cr_assert(f.len > 3 && memcmp(f.p, "%7\r\n", 4) == 0, "HELLO 3: '%s'",
                  r3_show(f.p, f.len));
        r3_free(&f);
    }
    return c;
}

/* ---------------- Fixtures ---------------- */

/* Redis with DEBUG enabled: DEBUG PROTOCOL sends every RESP3 type,
 * attributes and pushes included. */
static void init_debug(void)
{
    static const char *const args[] = { "--enable-debug-command", "yes", NULL };

    px_env_prepare();
    px_redis_start(&px_env()->redis, args);
    /* DEBUG and CONFIG GET are refused to ordinary clients by default. */
    px_proxy_start_for(&px_env()->proxy, &px_env()->redis,
                       "commands: +debug +config|get\n");
}

/* Redis and the proxy both with a password, to compare HELLO ... AUTH. */
static void init_auth(void)
{
    static const char *const args[] = { "--requirepass", "sekret", NULL };

    px_env_prepare();
    px_redis_start(&px_env()->redis, args);
    px_proxy_start_for(&px_env()->proxy, &px_env()->redis,
                       "requirepass: sekret\nupstream_password: sekret\n");
}

static int proxy_port(void)
{
    return px_env()->proxy.port;
}

static int redis_port(void)
{
    return px_env()->redis.port;
}

/* ---------------- HELLO ---------------- */

Test(it_resp3, hello_3_answers_a_map_shaped_like_redis, .init = init_debug,
     .fini = px_env_fini, .timeout = 60)
{
    struct r3 *px = r3_open(proxy_port(), 2);
    struct r3 *d = r3_open(redis_port(), 2);

    r3_same(px, d, "GET", "nope", NULL); /* $-1 before HELLO */
    /* Unsubscribing with no subscription: one confirmation per channel,
     * in either protocol (answered by cellgate, no connection involved). */
    for (int proto = 2; proto <= 3; proto++) {
        r3_send(px, "UNSUBSCRIBE", "a", "b", NULL);
        r3_send(d, "UNSUBSCRIBE", "a", "b", NULL);
        r3_eq(r3_next(px), r3_next(d), "UNSUBSCRIBE a b (first)");
        r3_eq(r3_next(px), r3_next(d), "UNSUBSCRIBE a b (second)");
        r3_same(px, d, "PUNSUBSCRIBE", NULL);
        r3_same(px, d, "SUNSUBSCRIBE", "s", NULL);
        r3_same(px, d, "PING", NULL);
        if (proto == 2) {
            r3_send(px, "HELLO", "3", NULL);
            r3_send(d, "HELLO", "3", NULL);
            r3_hello_shape(r3_next(px), r3_next(d), 3);
        }
    }
    r3_send(px, "HELLO", "2", NULL);
    r3_send(d, "HELLO", "2", NULL);
    r3_hello_shape(r3_next(px), r3_next(d), 2);
    r3_send(px, "HELLO", "3", NULL);
    r3_send(d, "HELLO", "3", NULL);
    r3_hello_shape(r3_next(px), r3_next(d), 3);
    r3_same(px, d, "GET", "nope", NULL); /* _ after it */
    /* HELLO alone answers in the protocol in use. */
    r3_send(px, "HELLO", NULL);
    r3_send(d, "HELLO", NULL);
    r3_hello_shape(r3_next(px), r3_next(d), 3);
    r3_same(px, d, "CLIENT", "GETNAME", NULL);
    r3_same(px, d, "HELLO", "3", "SETNAME", "a b", NULL);
    r3_send(px, "HELLO", "3", "SETNAME", "app", NULL);
    r3_send(d, "HELLO", "3", "SETNAME", "app", NULL);
    r3_hello_shape(r3_next(px), r3_next(d), 3);
    r3_same(px, d, "CLIENT", "GETNAME", NULL);
    /* And back: RESP2 again, on the same connection. */
    r3_send(px, "HELLO", "2", NULL);
    r3_send(d, "HELLO", "2", NULL);
    r3_hello_shape(r3_next(px), r3_next(d), 2);
    r3_same(px, d, "GET", "nope", NULL);
    r3_is(r3_call(px, "HSET", "hh", "f", "v", NULL), ":1\r\n", "HSET");
    r3_same(px, d, "HGETALL", "hh", NULL);
    /* RESET goes back to RESP2 as well. */
    r3_send(px, "HELLO", "3", NULL);
    r3_send(d, "HELLO", "3", NULL);
    r3_hello_shape(r3_next(px), r3_next(d), 3);
    r3_same(px, d, "RESET", NULL);
    r3_same(px, d, "GET", "nope", NULL);
    r3_close(px);
    r3_close(d);
}

/* HELLO in the middle of a pipeline: the commands after it are answered
 * in the new protocol, in order, though they travel over the other
 * protocol's connections. */
Test(it_resp3, protocol_switches_inside_a_pipeline_keep_order,
     .init = init_debug, .fini = px_env_fini, .timeout = 60)
{
    static const char *const steps[][3] = {
        { "SET", "sw", "0" },    { "HELLO", "3", NULL },
        { "INCR", "sw", NULL },  { "GET", "no", NULL },
        { "HELLO", "2", NULL },  { "INCR", "sw", NULL },
        { "GET", "no", NULL },   { "HELLO", "3", NULL },
        { "INCR", "sw", NULL },  { "HGETALL", "no", NULL },
        { "RESET", NULL, NULL }, { "GET", "sw", NULL },
    };
    /* Each side has its own key: both pipelines run on the same Redis at
     * once, and must not count each other's INCRs. */
    static const char *const keys[2] = { "sw:proxy", "sw:direct" };
    struct r3 *px = r3_open(proxy_port(), 2);
    struct r3 *d = r3_open(redis_port(), 2);
    struct buf b[2];

    for (int side = 0; side < 2; side++) {
        buf_init(&b[side]);
        for (int round = 0; round < 20; round++) {
            for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
                const char *argv[3];
                size_t lens[3];
                int argc = 0;
                while (argc < 3 && steps[i][argc] != NULL) {
                    argv[argc] = strcmp(steps[i][argc], "sw") == 0
                                     ? keys[side]
                                     : steps[i][argc];
                    lens[argc] = strlen(argv[argc]);
                    argc++;
                }
                cr_assert_eq(resp_enc_argv(&b[side], argc, argv, lens), BUF_OK);
            }
        }
    }
    r3_send_raw(px, b[0].data, b[0].len);
    r3_send_raw(d, b[1].data, b[1].len);
    for (int round = 0; round < 20; round++) {
        for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
            if (strcmp(steps[i][0], "HELLO") == 0) {
                r3_hello_shape(r3_next(px), r3_next(d), steps[i][1][0] - '0');
            } else {
                r3_eq(r3_next(px), r3_next(d), steps[i][0]);
            }
        }
    }
    buf_free(&b[0]);
    buf_free(&b[1]);
    r3_close(px);
    r3_close(d);
}

/* Every refusal compared with Redis 7.0 itself, both with a password. */
Test(it_resp3, bad_hello_input_gets_the_errors_redis_gives, .init = init_auth,
     .fini = px_env_fini, .timeout = 60)
{
    struct r3 *px = r3_open(proxy_port(), 2);
    struct r3 *d = r3_open(redis_port(), 2);
    struct r3 *sub_px, *sub_d;

    r3_same(px, d, "HELLO", "3", NULL); /* NOAUTH */
    r3_same(px, d, "HELLO", "4", NULL);
    r3_same(px, d, "HELLO", "1", NULL);
    r3_same(px, d, "HELLO", "0", NULL);
    r3_same(px, d, "HELLO", "-3", NULL);
    r3_same(px, d, "HELLO", "abc", NULL);
    r3_same(px, d, "HELLO", "+3", NULL);
    r3_same(px, d, "HELLO", "03", NULL);
    r3_same(px, d, "HELLO", "-0", NULL);
    r3_same(px, d, "HELLO", "9223372036854775807", NULL);
    r3_same(px, d, "HELLO", "9223372036854775808", NULL);
    r3_same(px, d, "HELLO", "-9223372036854775808", NULL);
    r3_same(px, d, "HELLO", "3 ", NULL);
    r3_same(px, d, "HELLO", "3", "AUTH", "default", "wrong", NULL);
    r3_same(px, d, "GET", "x", NULL); /* still not authenticated */
    /* AUTH takes effect, then the bad name stops HELLO: RESP2 stays. */
    r3_same(px, d, "HELLO", "3", "AUTH", "default", "sekret", "SETNAME", "a b",
            NULL);
    r3_same(px, d, "CLIENT", "GETNAME", NULL);
    r3_same(px, d, "GET", "nope", NULL);
    r3_same(px, d, "HELLO", "3", "FOO", NULL);
    r3_same(px, d, "HELLO", "3", "SETNAME", NULL);
    r3_same(px, d, "HELLO", "3", "AUTH", "default", NULL);
    r3_same(px, d, "HELLO", "3", "SETNAME", "new\nline", NULL);
    r3_same(px, d, "GET", "nope", NULL);
    r3_send(px, "HELLO", "3", "AUTH", "default", "sekret", "SETNAME", "nm",
            NULL);
    r3_send(d, "HELLO", "3", "AUTH", "default", "sekret", "SETNAME", "nm",
            NULL);
    r3_hello_shape(r3_next(px), r3_next(d), 3);
    r3_same(px, d, "CLIENT", "GETNAME", NULL);
    r3_same(px, d, "GET", "nope", NULL);
    r3_same(px, d, "HELLO", "2", "AUTH", "default", "wrong", NULL);
    r3_same(px, d, "GET", "nope", NULL); /* still RESP3 */

    /* A RESP2 subscriber may not switch (Redis refuses it in that
     * context). */
    sub_px = r3_open(proxy_port(), 2);
    sub_d = r3_open(redis_port(), 2);
    r3_same(sub_px, sub_d, "AUTH", "sekret", NULL);
    r3_same(sub_px, sub_d, "SUBSCRIBE", "ch", NULL);
    r3_same(sub_px, sub_d, "HELLO", "3", NULL);
    r3_same(sub_px, sub_d, "UNSUBSCRIBE", NULL);
    r3_same(sub_px, sub_d, "HELLO", "2", "AUTH", "default", "wrong", NULL);
    r3_close(sub_px);
    r3_close(sub_d);
    r3_close(px);
    r3_close(d);
}

/* ---------------- Replies forwarded byte for byte ---------------- */

Test(it_resp3, every_resp3_type_reaches_the_client_byte_for_byte,
     .init = init_debug, .fini = px_env_fini, .timeout = 60)
{
    static const char *const debug_types[] = {
        "string", "integer", "double", "bignum",   "null", "array",
        "set",    "map",     "attrib", "verbatim", "true", "false",
    };
    struct r3 *px = r3_open(proxy_port(), 3);
    struct r3 *d = r3_open(redis_port(), 3);
    struct r3_frame push, after;

    /* Written once through the proxy, read by both. */
    r3_is(r3_call(px, "SET", "s", "v\r\n1", NULL), "+OK\r\n", "SET");
    r3_is(r3_call(px, "HSET", "h", "f1", "v1", "f2", "", NULL), ":2\r\n",
          "HSET");
    r3_is(r3_call(px, "SADD", "set", "a", "b", "c", NULL), ":3\r\n", "SADD");
    r3_is(r3_call(px, "ZADD", "z", "1", "a", "2.5", "b", "-3", "c", NULL),
          ":3\r\n", "ZADD");
    r3_is(r3_call(px, "RPUSH", "l", "a", "b", NULL), ":2\r\n", "RPUSH");
    r3_same(px, d, "GET", "s", NULL);
    r3_same(px, d, "GET", "missing", NULL);
    r3_same(px, d, "HGETALL", "h", NULL);
    r3_same(px, d, "HGETALL", "missing", NULL);
    r3_same(px, d, "HMGET", "h", "f1", "nope", NULL);
    r3_same(px, d, "SMEMBERS", "set", NULL);
    r3_same(px, d, "ZRANGE", "z", "0", "-1", "WITHSCORES", NULL);
    r3_same(px, d, "ZSCORE", "z", "b", NULL);
    r3_same(px, d, "ZSCORE", "z", "nope", NULL);
    r3_same(px, d, "ZPOPMIN", "missing", NULL);
    r3_same(px, d, "LRANGE", "l", "0", "-1", NULL);
    r3_same(px, d, "CONFIG", "GET", "maxmemory", NULL);
    r3_same(px, d, "EVAL", "return {double=3.5}", "0", NULL);
    r3_same(px, d, "EVAL", "return {big_number='123456789012345678901234'}",
            "0", NULL);
    r3_same(px, d, "EVAL",
            "redis.setresp(3); return redis.call('HGETALL', "
            "KEYS[1])",
            "1", "h", NULL);
    r3_same(px, d, "OBJECT", "ENCODING", "z", NULL);
    for (size_t i = 0; i < sizeof(debug_types) / sizeof(debug_types[0]); i++) {
        r3_same(px, d, "DEBUG", "PROTOCOL", debug_types[i], NULL);
    }
    /* DEBUG runs on a connection of its own, so the push it makes Redis
     * send reaches this client, before the reply, as from Redis. */
    r3_send(px, "DEBUG", "PROTOCOL", "push", NULL);
    r3_send(d, "DEBUG", "PROTOCOL", "push", NULL);
    push = r3_next(d);
    cr_assert_eq(push.p[0], '>', "Redis sent '%s'", r3_show(push.p, push.len));
    r3_eq(r3_next(px), push, "the push");
    after = r3_next(d);
    r3_eq(r3_next(px), after, "the reply after a push");
    r3_same(px, d, "PING", NULL);
    r3_same(px, d, "ECHO", "x", NULL);
    r3_close(px);
    r3_close(d);
}

Test(it_resp3, pipeline_of_forwarded_and_local_replies_keeps_order,
     .init = init_debug, .fini = px_env_fini, .timeout = 60)
{
    struct r3 *px = r3_open(proxy_port(), 3);
    struct r3 *d = r3_open(redis_port(), 3);
    struct buf b;
    char key[32], val[32];

    buf_init(&b);
    for (int i = 0; i < R3_PIPELINE; i++) {
        const char *argv[4];
        size_t lens[4];
        int argc = 2;

        snprintf(key, sizeof(key), "pl:%d", i / 7);
        snprintf(val, sizeof(val), "v%d", i);
        argv[1] = key;
        switch (i % 7) {
        case 0:
            argv[0] = "SET";
            argv[2] = val;
            argc = 3;
            break;
        case 1:
            argv[0] = "GET";
            break;
        case 2:
            argv[0] = "GET";
            argv[1] = "pl:nope";
            break;
        case 3:
            argv[0] = "PING";
            argc = 1;
            break;
        case 4:
            argv[0] = "ECHO";
            break;
        case 5:
            argv[0] = "CLIENT";
            argv[1] = "GETNAME";
            break;
        default:
            argv[0] = "HGETALL";
            break;
        }
        for (int k = 0; k < argc; k++) {
            lens[k] = strlen(argv[k]);
        }
        cr_assert_eq(resp_enc_argv(&b, argc, argv, lens), BUF_OK);
    }
    /* One write each: the whole pipeline arrives at once. */
    r3_send_raw(px, b.data, b.len);
    r3_send_raw(d, b.data, b.len);
    for (int i = 0; i < R3_PIPELINE; i++) {
        snprintf(val, sizeof(val), "reply %d", i);
        r3_eq(r3_next(px), r3_next(d), val);
    }
    buf_free(&b);
    r3_close(px);
    r3_close(d);
}

/* The same transaction on both sides: EXEC's array holds RESP3 replies,
 * and an aborted EXEC (WATCH) is a RESP3 null. */
static void tx_run(struct r3 *c, struct r3_frame *out, int *n)
{
    static const char *const cmds[][5] = {
        { "MULTI", NULL },
        { "SET", "tx:s", "v", NULL },
        { "HSET", "tx:h", "f", "v", NULL },
        { "HGETALL", "tx:h", NULL },
        { "GET", "tx:nope", NULL },
        { "ZADD", "tx:z", "1.5", "m", NULL },
        { "ZSCORE", "tx:z", "m", NULL },
        { "EXEC", NULL },
    };
    redisContext *other = px_connect(proxy_port());

    freeReplyObject(px_cmd(other, "DEL tx:s tx:h tx:z tx:w"));
    for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
        r3_send(c, cmds[i][0], cmds[i][1], cmds[i][2], cmds[i][3], cmds[i][4]);
        out[(*n)++] = r3_next(c);
    }
    out[(*n)++] = r3_call(c, "WATCH", "tx:w", NULL);
    px_check_status(px_cmd(other, "SET tx:w %d", *n), "OK");
    out[(*n)++] = r3_call(c, "MULTI", NULL);
    out[(*n)++] = r3_call(c, "GET", "tx:w", NULL);
    out[(*n)++] = r3_call(c, "EXEC", NULL);
    out[(*n)++] = r3_call(c, "GET", "tx:nope", NULL);
    redisFree(other);
}

Test(it_resp3, multi_exec_replies_are_resp3, .init = init_debug,
     .fini = px_env_fini, .timeout = 60)
{
    struct r3 *px = r3_open(proxy_port(), 3);
    struct r3 *d = r3_open(redis_port(), 3);
    struct r3_frame fp[16], fd[16];
    int np = 0, nd = 0;

    tx_run(d, fd, &nd);
    tx_run(px, fp, &np);
    cr_assert_eq(np, nd);
    cr_assert_str_eq(fp[np - 2].p, "_\r\n", "aborted EXEC: '%s'",
                     r3_show(fp[np - 2].p, fp[np - 2].len));
    for (int i = 0; i < np; i++) {
        r3_eq(fp[i], fd[i], "transaction step");
    }
    r3_close(px);
    r3_close(d);
}

/* ---------------- Pushes: pub/sub and client tracking ---------------- */

/* Subscribes, runs ordinary commands while subscribed (RESP3 allows it),
 * receives messages published by `pub`, unsubscribes, and keeps going. */
static void pubsub_run(struct r3 *c, redisContext *pub, struct r3_frame *out,
                       int *n)
{
    r3_send(c, "SUBSCRIBE", "ch1", "ch2", NULL);
    out[(*n)++] = r3_next(c);
    out[(*n)++] = r3_next(c);
    out[(*n)++] = r3_call(c, "SET", "ps:k", "v", NULL);
    out[(*n)++] = r3_call(c, "GET", "ps:k", NULL);
    px_check_int(px_cmd(pub, "PUBLISH ch1 hello"), 1);
    out[(*n)++] = r3_next(c); /* the message push */
    out[(*n)++] = r3_call(c, "PING", NULL);
    out[(*n)++] = r3_call(c, "CLIENT", "GETNAME", NULL);
    r3_send(c, "PSUBSCRIBE", "p*", NULL);
    out[(*n)++] = r3_next(c);
    px_check_int(px_cmd(pub, "PUBLISH px %b", "a\0b", (size_t)3), 1);
    out[(*n)++] = r3_next(c);
    /* A pipeline with a message in the middle of it. The GET may reach
     * Redis after the PUBLISH (through cellgate it takes one more hop than
     * the PUBLISH's own reply): the message and the GET's reply may come
     * in either order, but both before the HGETALL's, sent once the
     * message was out. */
    r3_send(c, "GET", "ps:k", NULL);
    px_check_int(px_cmd(pub, "PUBLISH ch2 mid"), 1);
    r3_send(c, "HGETALL", "ps:nope", NULL);
    for (int i = 0; i < 3; i++) {
        out[(*n)++] = r3_next(c);
    }
    if (out[*n - 3].len > 0 && out[*n - 3].p[0] == '>') {
        struct r3_frame push = out[*n - 3];
        out[*n - 3] = out[*n - 2];
        out[*n - 2] = push;
    }
    r3_send(c, "UNSUBSCRIBE", NULL);
    out[(*n)++] = r3_next(c);
    out[(*n)++] = r3_next(c);
    r3_send(c, "PUNSUBSCRIBE", NULL);
    out[(*n)++] = r3_next(c);
    px_check_int(px_cmd(pub, "PUBLISH ch1 nobody"), 0);
    out[(*n)++] = r3_call(c, "GET", "ps:k", NULL);
    r3_send(c, "UNSUBSCRIBE", "x", "y", NULL);
    out[(*n)++] = r3_next(c);
    out[(*n)++] = r3_next(c);
}

Test(it_resp3, pubsub_pushes_arrive_while_the_client_runs_commands,
     .init = init_debug, .fini = px_env_fini, .timeout = 60)
{
    struct r3 *px = r3_open(proxy_port(), 3);
    struct r3 *d = r3_open(redis_port(), 3);
    redisContext *pub = px_connect(proxy_port());
    struct r3_frame fp[32], fd[32];
    int np = 0, nd = 0;

    pubsub_run(d, pub, fd, &nd);
    pubsub_run(px, pub, fp, &np);
    cr_assert_eq(np, nd);
    for (int i = 0; i < np; i++) {
        char what[32];
        snprintf(what, sizeof(what), "pub/sub step %d", i);
        r3_eq(fp[i], fd[i], what);
    }
    redisFree(pub);
    r3_close(px);
    r3_close(d);
}

/* CLIENT TRACKING in RESP3: invalidations arrive as pushes on the
 * client's own connection; a push right before a reply (DEBUG PROTOCOL
 * push) reaches the client and the reply still goes to its request. */
static void tracking_run(struct r3 *c, redisContext *writer,
                         struct r3_frame *out, int *n)
{
    freeReplyObject(px_cmd(writer, "DEL tk:1 tk:2"));
    out[(*n)++] = r3_call(c, "CLIENT", "TRACKING", "on", NULL);
    out[(*n)++] = r3_call(c, "GET", "tk:1", NULL);
    out[(*n)++] = r3_call(c, "GET", "tk:2", NULL);
    px_check_status(px_cmd(writer, "SET tk:1 v"), "OK");
    out[(*n)++] = r3_next(c); /* invalidate tk:1 */
    r3_send(c, "DEBUG", "PROTOCOL", "push", NULL);
    out[(*n)++] = r3_next(c);
    out[(*n)++] = r3_next(c);
    out[(*n)++] = r3_call(c, "GET", "tk:1", NULL);
    px_check_int(px_cmd(writer, "DEL tk:1"), 1);
    out[(*n)++] = r3_next(c); /* invalidate tk:1 */
    px_check_status(px_cmd(writer, "SET tk:2 x"), "OK");
    out[(*n)++] = r3_next(c); /* invalidate tk:2 */
    out[(*n)++] = r3_call(c, "CLIENT", "TRACKING", "off", NULL);
}

Test(it_resp3, client_tracking_invalidations_are_pushed, .init = init_debug,
     .fini = px_env_fini, .timeout = 60)
{
    struct r3 *px = r3_open(proxy_port(), 3);
    struct r3 *d = r3_open(redis_port(), 3);
    redisContext *writer = px_connect(proxy_port());
    struct r3_frame fp[16], fd[16];
    int np = 0, nd = 0;

    tracking_run(d, writer, fd, &nd);
    tracking_run(px, writer, fp, &np);
    cr_assert_eq(np, nd);
    cr_assert(fp[3].len > 0 && fp[3].p[0] == '>', "invalidation: '%s'",
              r3_show(fp[3].p, fp[3].len));
    for (int i = 0; i < np; i++) {
        char what[32];
        snprintf(what, sizeof(what), "tracking step %d", i);
        r3_eq(fp[i], fd[i], what);
    }
    redisFree(writer);
    r3_close(px);
    r3_close(d);
}

/* ---------------- The proxy's own replies ---------------- */

Test(it_resp3, cl_throttle_answers_five_integers_in_both_protocols,
     .init = px_env_init, .fini = px_env_fini, .timeout = 60)
{
    static const char want[] = "*5\r\n:0\r\n:16\r\n:15\r\n:-1\r\n:2\r\n";
    struct r3 *c3 = r3_open(proxy_port(), 3);
    struct r3 *c2 = r3_open(proxy_port(), 2);

    r3_is(r3_call(c3, "CL.THROTTLE", "user3", "15", "30", "60", NULL), want,
          "RESP3 CL.THROTTLE");
    r3_is(r3_call(c2, "CL.THROTTLE", "user2", "15", "30", "60", NULL), want,
          "RESP2 CL.THROTTLE");
    r3_is(r3_call(c3, "CL.THROTTLE", "user3", "x", "30", "60", NULL),
          "-Cell error: Store error: Couldn't parse as integer: x\r\n",
          "RESP3 CL.THROTTLE error");
    r3_is(r3_call(c3, "LIMITER", "user3b", "15", "30", "60", NULL), want,
          "RESP3 LIMITER");
    r3_close(c3);
    r3_close(c2);
}

/* ---------------- Order with limiter calls ---------------- */

/* How long the script that holds Redis runs, and the pause that lets a
 * command reach Redis before the next one goes. */
#define R3_BUSY_MS   1000
#define R3_SETTLE_MS 100

/* Clients beside whose commands reach Redis while it is held. */
#define R3_BYSTANDERS 4

/* A direct connection to the Redis that serves `key`. */
static redisContext *r3_direct_for(int cluster, const char *key)
{
    struct px_cluster *cl = px_cluster();

    if (cluster) {
        return px_cluster_connect(
            cl, px_cluster_master_of_key(cl, key, strlen(key)));
    }
    return px_redis_connect(&px_env()->redis, NULL);
}

/* Holds `d`'s Redis for R3_BUSY_MS (px_hold_redis), after which it reads
 * the connections that got bytes meanwhile in the order they got them. */
static void r3_hold(redisContext *d)
{
    px_hold_redis(d, R3_BUSY_MS);
    px_sleep_ms(R3_SETTLE_MS);
}

/* Bystanders send a GET each while Redis is held, so that the node's
 * connections of their protocol have bytes waiting before the tested
 * client's commands arrive. */
static void r3_bystanders(struct r3 **b)
{
    char key[64];

    for (int i = 0; i < R3_BYSTANDERS; i++) {
        snprintf(key, sizeof(key), "{o3}by%d", i);
        r3_send(b[i], "GET", key, NULL);
    }
    px_sleep_ms(R3_SETTLE_MS);
}

/* Checks the bystanders' replies (nil in their protocol). */
static void r3_bystanders_answered(int proto, struct r3 **b)
{
    for (int i = 0; i < R3_BYSTANDERS; i++) {
        r3_is(r3_next(b[i]), proto == 3 ? "_\r\n" : "$-1\r\n", "bystander");
    }
}

/* A RESP3 client's forwarded commands go on the node's RESP3 connections,
 * its limiter calls on RESP2 ones: a GET-like command after its
 * CL.THROTTLE, and a CL.THROTTLE after its SET, must still see each
 * other, also when the other connection's bytes were read first. Redis is
 * held while other clients' commands wait on those connections, then
 * reads them in the order they got bytes, which is the wrong one for a
 * client whose two commands were sent at once. */
static void resp3_limiter_order(int cluster)
{
    redisContext *d = r3_direct_for(cluster, "{o3}");
    struct r3 *a = r3_open(proxy_port(), 3);
    struct r3 *b3[R3_BYSTANDERS], *b2[R3_BYSTANDERS];

    for (int i = 0; i < R3_BYSTANDERS; i++) {
        b3[i] = r3_open(proxy_port(), 3);
        b2[i] = r3_open(proxy_port(), 2);
        /* Opens the node's connections of both protocols. */
        r3_is(r3_call(b3[i], "GET", "{o3}warm", NULL), "_\r\n", "warm");
        r3_is(r3_call(b2[i], "GET", "{o3}warm", NULL), "$-1\r\n", "warm");
    }
    /* Loads the library (a load in flight holds calls back). */
    r3_is(r3_call(a, "CL.THROTTLE", "{o3}warm", "5", "10", "60", NULL),
          "*5\r\n:0\r\n:6\r\n:5\r\n:-1\r\n:6\r\n", "warm");

    /* A SET, then a CL.THROTTLE of its key, behind the RESP2 bystanders'
     * GETs (the limiter's connections are RESP2). */
    r3_hold(d);
    r3_bystanders(b2);
    r3_send(a, "SET", "{o3}s", "x", NULL);
    r3_send(a, "CL.THROTTLE", "{o3}s", "5", "10", "60", NULL);
    px_check_int(px_next(d), 1);
    r3_bystanders_answered(2, b2);
    r3_is(r3_next(a), "+OK\r\n", "SET");
    r3_is(r3_next(a),
          "-WRONGTYPE Operation against a key holding the wrong kind of "
          "value\r\n",
          "CL.THROTTLE after SET (the string it wrote)");

    /* A CL.THROTTLE, then an EXISTS of its key, behind the RESP3
     * bystanders' GETs. */
    r3_hold(d);
    r3_bystanders(b3);
    r3_send(a, "CL.THROTTLE", "{o3}k", "5", "10", "60", NULL);
    r3_send(a, "EXISTS", "{o3}k", NULL);
    px_check_int(px_next(d), 1);
    r3_bystanders_answered(3, b3);
    r3_is(r3_next(a), "*5\r\n:0\r\n:6\r\n:5\r\n:-1\r\n:6\r\n", "CL.THROTTLE");
    r3_is(r3_next(a), ":1\r\n", "EXISTS after CL.THROTTLE (the TAT it wrote)");

    for (int i = 0; i < R3_BYSTANDERS; i++) {
        r3_close(b3[i]);
        r3_close(b2[i]);
    }
    r3_close(a);
    redisFree(d);
}

Test(it_resp3, a_clients_limiter_calls_and_commands_keep_their_order,
     .init = px_env_init, .fini = px_env_fini, .timeout = 60)
{
    resp3_limiter_order(0);
}

/* Counts RESP3 connections Redis has: CLIENT LIST's resp=3. */
static int redis_resp3_conns(void)
{
    redisContext *direct = px_redis_connect(&px_env()->redis, NULL);
    redisReply *r = px_cmd(direct, "CLIENT LIST");
    int n = 0;

    cr_assert_eq(r->type, REDIS_REPLY_STRING);
    for (const char *p = r->str; (p = strstr(p, " resp=3")) != NULL; p++) {
        n++;
    }
    freeReplyObject(r);
    redisFree(direct);
    return n;
}

Test(it_resp3, resp2_and_resp3_clients_of_one_proxy_each_get_their_own,
     .init = px_env_init, .fini = px_env_fini, .timeout = 60)
{
    static const char cmds[] = "*2\r\n$3\r\nGET\r\n$4\r\nnope\r\n"
                               "*2\r\n$7\r\nHGETALL\r\n$1\r\nh\r\n"
                               "*2\r\n$6\r\nCLIENT\r\n$7\r\nGETNAME\r\n"
                               "*2\r\n$3\r\nGET\r\n$1\r\ns\r\n";
    static const char *const want2[] = { "$-1\r\n",
                                         "*4\r\n$1\r\nf\r\n$1\r\nv\r\n$1\r\ng"
                                         "\r\n$1\r\nw\r\n",
                                         "$-1\r\n", "$1\r\nx\r\n" };
    static const char *const want3[] = { "_\r\n",
                                         "%2\r\n$1\r\nf\r\n$1\r\nv\r\n$1\r\ng"
                                         "\r\n$1\r\nw\r\n",
                                         "_\r\n", "$1\r\nx\r\n" };
    redisContext *h = px_connect(proxy_port());
    struct r3 *c2, *c3;

    px_check_int(px_cmd(h, "HSET h f v g w"), 2);
    px_check_status(px_cmd(h, "SET s x"), "OK");
    /* RESP2-only traffic opens no RESP3 connection. */
    cr_assert_eq(redis_resp3_conns(), 0);
    c2 = r3_open(proxy_port(), 2);
    c3 = r3_open(proxy_port(), 3);
    for (int round = 0; round < 50; round++) {
        r3_send_raw(c2, cmds, sizeof(cmds) - 1);
        r3_send_raw(c3, cmds, sizeof(cmds) - 1);
        px_check_str(px_cmd(h, "GET s"), "x");
        for (int i = 0; i < 4; i++) {
            r3_is(r3_next(c3), want3[i], "RESP3 client");
            r3_is(r3_next(c2), want2[i], "RESP2 client");
        }
    }
    /* The RESP3 pool was opened for the RESP3 client. */
    cr_assert_gt(redis_resp3_conns(), 0);
    redisFree(h);
    r3_close(c2);
    r3_close(c3);
}

/* A connection's first requests are the proxy's own (HELLO 3 here): when
 * Redis is busy as it opens, their silence counts from when they were
 * queued, so the connection waits the script out like any other instead
 * of being failed at once as silent since time 0. */
Test(it_resp3, a_new_connection_waits_out_a_busy_redis, .init = px_env_init,
     .fini = px_env_fini, .timeout = 60)
{
    redisContext *d = px_redis_connect(&px_env()->redis, NULL);
    struct r3 *c3 = r3_open(proxy_port(), 3);

    cr_assert_eq(redis_resp3_conns(), 0);
    px_hold_redis(d, 1500);
    /* Opens the RESP3 connections, whose HELLO 3 waits for the script;
     * the proxy's periodic checks run meanwhile. */
    r3_send(c3, "GET", "nope", NULL);
    r3_is(r3_next(c3), "_\r\n", "GET after the busy script");
    px_check_int(px_next(d), 1);
    cr_assert_gt(redis_resp3_conns(), 0);
    redisFree(d);
    r3_close(c3);
}

/* ---------------- Cluster mode ---------------- */

static void init_cluster(void)
{
    px_cluster_start(px_cluster(), 3, 0);
    px_cluster_proxy_start(&px_env()->proxy, px_cluster(), NULL);
}

/* Appends `$<n>\r\n<s>\r\n`. */
static void want_bulk(struct buf *b, const char *s)
{
    cr_assert_eq(resp_enc_bulk(b, s, strlen(s)), BUF_OK);
}

Test(it_resp3_cluster, split_and_fanned_out_commands_answer_in_resp3,
     .init = init_cluster, .fini = px_cluster_fini, .timeout = 120)
{
    struct px_cluster *cl = px_cluster();
    struct r3 *c3 = r3_open(proxy_port(), 3);
    struct r3 *c2 = r3_open(proxy_port(), 2);
    struct buf mset, mget, want3, want2;
    char key[R3_CLUSTER_KEYS][16], num[32];
    int used[PX_CLUSTER_MAX_NODES] = { 0 };
    struct r3_frame f;

    buf_init(&mset);
    buf_init(&mget);
    buf_init(&want3);
    buf_init(&want2);
    {
        const char *margv[1 + 2 * R3_CLUSTER_KEYS];
        const char *gargv[1 + 2 * R3_CLUSTER_KEYS];
        size_t mlens[1 + 2 * R3_CLUSTER_KEYS], glens[1 + 2 * R3_CLUSTER_KEYS];
        int mc = 1, gc = 1;

        margv[0] = "MSET";
        gargv[0] = "MGET";
        cr_assert_eq(resp_enc_array_header(&want3, 2 * R3_CLUSTER_KEYS),
                     BUF_OK);
        cr_assert_eq(resp_enc_array_header(&want2, 2 * R3_CLUSTER_KEYS),
                     BUF_OK);
        for (int i = 0; i < R3_CLUSTER_KEYS; i++) {
            snprintf(key[i], sizeof(key[i]), "k:%d", i);
            used[px_cluster_master_of_key(cl, key[i], strlen(key[i]))]++;
            margv[mc++] = key[i];
            margv[mc++] = key[i] + 2; /* the value: the key's number */
            gargv[gc++] = key[i];
            gargv[gc++] = "k:missing";
            want_bulk(&want3, key[i] + 2);
            want_bulk(&want2, key[i] + 2);
            cr_assert_eq(buf_append_str(&want3, "_\r\n"), BUF_OK);
            cr_assert_eq(buf_append_str(&want2, "$-1\r\n"), BUF_OK);
        }
        for (int k = 0; k < mc; k++) {
            mlens[k] = strlen(margv[k]);
        }
        for (int k = 0; k < gc; k++) {
            glens[k] = strlen(gargv[k]);
        }
        cr_assert_eq(resp_enc_argv(&mset, mc, margv, mlens), BUF_OK);
        cr_assert_eq(resp_enc_argv(&mget, gc, gargv, glens), BUF_OK);
    }
    for (int m = 0; m < cl->nmasters; m++) {
        cr_assert_gt(used[m], 0, "no key on master %d", m);
    }
    r3_send_raw(c3, mset.data, mset.len);
    r3_is(r3_next(c3), "+OK\r\n", "MSET over every master");
    /* MGET split by slot: values and RESP3 nulls in key order; the same
     * through a RESP2 connection gives RESP2 nulls. */
    r3_send_raw(c3, mget.data, mget.len);
    r3_send_raw(c2, mget.data, mget.len);
    f = r3_next(c3);
    cr_assert(f.len == want3.len && memcmp(f.p, want3.data, f.len) == 0,
              "RESP3 MGET: '%s'", r3_show(f.p, f.len));
    r3_free(&f);
    f = r3_next(c2);
    cr_assert(f.len == want2.len && memcmp(f.p, want2.data, f.len) == 0,
              "RESP2 MGET: '%s'", r3_show(f.p, f.len));
    r3_free(&f);
    snprintf(num, sizeof(num), ":%d\r\n", R3_CLUSTER_KEYS);
    r3_is(r3_call(c3, "DBSIZE", NULL), num, "DBSIZE summed over masters");
    r3_is(r3_call(c3, "EXISTS", key[0], key[1], key[2], "k:missing", NULL),
          ":3\r\n", "EXISTS split");
    f = r3_call(c3, "KEYS", "k:*", NULL);
    snprintf(num, sizeof(num), "*%d\r\n", R3_CLUSTER_KEYS);
    cr_assert(strncmp(f.p, num, strlen(num)) == 0, "KEYS: '%s'",
              r3_show(f.p, f.len));
    r3_free(&f);
    /* INFO: a verbatim string in RESP3 as Redis sends it, bulk in RESP2. */
    f = r3_call(c3, "INFO", NULL);
    cr_assert(f.p[0] == '=' && strstr(f.p, "\r\ntxt:# Proxy\r\n") != NULL &&
                  strstr(f.p, "# Node ") != NULL &&
                  strstr(f.p, "txt:# Server") == NULL,
              "RESP3 INFO: '%s'", r3_show(f.p, f.len > 200 ? 200 : f.len));
    r3_free(&f);
    f = r3_call(c2, "INFO", NULL);
    cr_assert(f.p[0] == '$' && strstr(f.p, "\r\n# Proxy\r\n") != NULL,
              "RESP2 INFO: '%s'", r3_show(f.p, f.len > 200 ? 200 : f.len));
    r3_free(&f);
    /* A map, byte for byte as the owning master sends it. */
    r3_is(r3_call(c3, "HSET", "{k:0}h", "f", "v", "g", "1.5", NULL), ":2\r\n",
          "HSET");
    {
        int m = px_cluster_master_of_key(cl, "{k:0}h", 6);
        struct r3 *direct = r3_open(px_cluster_port(cl, m), 3);
        r3_same(c3, direct, "HGETALL", "{k:0}h", NULL);
        r3_same(c3, direct, "HMGET", "{k:0}h", "g", "nope", NULL);
        r3_close(direct);
    }
    /* Subscribed, the client keeps reading keys of every master. */
    r3_send(c3, "SUBSCRIBE", "news", NULL);
    r3_is(r3_next(c3), ">3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n",
          "subscribe push");
    for (int i = 0; i < R3_CLUSTER_KEYS; i++) {
        f = r3_call(c3, "GET", key[i], NULL);
        buf_clear(&want3);
        want_bulk(&want3, key[i] + 2);
        cr_assert(f.len == want3.len && memcmp(f.p, want3.data, f.len) == 0,
                  "GET %s while subscribed: '%s'", key[i], r3_show(f.p, f.len));
        r3_free(&f);
    }
    /* PUBLISH counts the receivers of its own node only (the message
     * crosses the cluster bus to the others). */
    f = r3_call(c2, "PUBLISH", "news", "hi", NULL);
    cr_assert_eq(f.p[0], ':', "PUBLISH: '%s'", r3_show(f.p, f.len));
    r3_free(&f);
    r3_is(r3_next(c3), ">3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$2\r\nhi\r\n",
          "message push");
    r3_send(c3, "UNSUBSCRIBE", NULL);
    r3_is(r3_next(c3), ">3\r\n$11\r\nunsubscribe\r\n$4\r\nnews\r\n:0\r\n",
          "unsubscribe push");
    /* Back on the shared path once unsubscribed. */
    r3_is(r3_call(c3, "DEL", key[0], key[1], key[2], key[3], "k:missing", NULL),
          ":4\r\n", "DEL split");
    r3_is(r3_call(c3, "GET", key[0], NULL), "_\r\n", "GET after DEL");
    buf_free(&mset);
    buf_free(&mget);
    buf_free(&want3);
    buf_free(&want2);
    r3_close(c3);
    r3_close(c2);
}

Test(it_resp3_cluster, a_clients_limiter_calls_and_commands_keep_their_order,
     .init = init_cluster, .fini = px_cluster_fini, .timeout = 120)
{
    resp3_limiter_order(1);
}
