/* Bad input: malformed RESP gets a protocol error and closes only that
 * client; oversized declarations are refused before their body arrives; a
 * client that never reads is cut off at its output limit. */
#define _GNU_SOURCE /* POLLRDHUP */

#include "tests/integration/fixture.h"
#include "tests/support/px_test.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

PX_TEST_SUITE(it_badinput);

#define PROTO_ERR     "-ERR Protocol error"
#define REPLY_CAP     4096
#define READ_WAIT_MS  (PX_CLIENT_TIMEOUT_S * 1000)
#define OUTPUT_LIMIT  (1024 * 1024) /* client_max_output_bytes in the test */
#define BIG_VALUE     (100 * 1024)  /* value of the key the slow reader GETs */
#define FLOOD_BYTES   (10 * 1024 * 1024) /* requests the slow reader sends */
#define FLOOD_CHUNK   (64 * 1024)
#define STALL_MS      2000  /* no write progress for this long: proxy paused */
#define FLOOD_WAIT_MS 30000 /* bound on the whole flood */
#define DRAIN_CAP     (64 * 1024 * 1024) /* more than this: not cut off */
#define RSS_SLACK_KB  (32 * 1024)        /* allocator and ASan overhead */

/* One malformed request and a description for failure messages. */
struct bad_case {
    const char *name;
    const char *bytes;
};

static const struct bad_case bad_cases[] = {
    { "integer where a bulk is expected", "*2\r\n$3\r\nGET\r\n:1\r\n" },
    { "non-numeric bulk length", "*1\r\n$abc\r\n" },
    { "non-numeric multibulk length", "*x1\r\n$4\r\nPING\r\n" },
    { "nested array in a request", "*1\r\n*1\r\n$4\r\nPING\r\n" },
    { "unbalanced quotes in an inline request", "SET k \"abc\r\n" },
    { "unbalanced single quote inline", "ECHO 'abc\r\n" },
    { "bulk length over 512 MB", "*1\r\n$4000000000\r\n" },
    { "negative bulk length", "*1\r\n$-7\r\n" },
    { "multibulk count over 1M", "*100000000\r\n" },
};

/* Sends bytes on a fresh connection and asserts: the reply is `before`
 * followed by a protocol error, then the proxy closes the connection. */
static void expect_protocol_error(const char *name, const char *before,
                                  const char *bytes, size_t len)
{
    int fd = px_raw_connect(px_env()->proxy.port, 0);
    cr_assert_eq(px_raw_send(fd, bytes, len), 0, "%s: send failed", name);
    char buf[REPLY_CAP];
    int closed = 0;
    px_raw_read_to_close(fd, buf, sizeof(buf), READ_WAIT_MS, &closed);
    close(fd);
    size_t blen = strlen(before);
    cr_assert(strncmp(buf, before, blen) == 0 &&
                  strncmp(buf + blen, PROTO_ERR, strlen(PROTO_ERR)) == 0,
              "%s: reply \"%s\", expected \"%s" PROTO_ERR "...\"", name, buf,
              before);
    cr_assert(strlen(buf) >= 2 && strcmp(buf + strlen(buf) - 2, "\r\n") == 0,
              "%s: error line not terminated: \"%s\"", name, buf);
    cr_assert(closed, "%s: connection not closed after the error", name);
}

/* A pipeline of SET/GET pairs on c with values tagged by `tag`; checks
 * every reply. The pipeline is sent, then `between` runs, then it is read,
 * so the bad client's traffic lands in the middle of it. */
static void bystander_pipeline(redisContext *c, int tag,
                               void (*between)(const struct bad_case *),
                               const struct bad_case *bc)
{
    for (int i = 0; i < 50; i++) {
        redisAppendCommand(c, "SET by%d v%d_%d", i, tag, i);
        redisAppendCommand(c, "GET by%d", i);
    }
    px_flush(c);
    if (between != NULL) {
        between(bc);
    }
    char want[64];
    for (int i = 0; i < 50; i++) {
        px_check_status(px_next(c), "OK");
        snprintf(want, sizeof(want), "v%d_%d", tag, i);
        px_check_str(px_next(c), want);
    }
}

static void send_bad_case(const struct bad_case *bc)
{
    expect_protocol_error(bc->name, "", bc->bytes, strlen(bc->bytes));
}

Test(it_badinput, malformed_requests_get_protocol_error_and_close,
     .init = px_env_init, .fini = px_env_fini, .timeout = 120)
{
    for (size_t i = 0; i < sizeof(bad_cases) / sizeof(*bad_cases); i++) {
        send_bad_case(&bad_cases[i]);
    }
}

Test(it_badinput, other_clients_keep_working_across_protocol_errors,
     .init = px_env_init, .fini = px_env_fini, .timeout = 120)
{
    redisContext *before = px_connect(px_env()->proxy.port);
    for (size_t i = 0; i < sizeof(bad_cases) / sizeof(*bad_cases); i++) {
        bystander_pipeline(before, (int)i, send_bad_case, &bad_cases[i]);
        redisContext *after = px_connect(px_env()->proxy.port);
        bystander_pipeline(after, 1000 + (int)i, NULL, NULL);
        redisFree(after);
    }
    redisFree(before);
}

Test(it_badinput, replies_before_the_bad_request_are_delivered_first,
     .init = px_env_init, .fini = px_env_fini, .timeout = 60)
{
    const char *req = "*3\r\n$3\r\nSET\r\n$2\r\npe\r\n$1\r\n1\r\n"
                      "*1\r\n$4\r\nPING\r\n"
                      "*2\r\n$3\r\nGET\r\n$2\r\npe\r\n"
                      "*1\r\n$abc\r\n"
                      "*3\r\n$3\r\nSET\r\n$2\r\npe\r\n$1\r\n2\r\n";
    expect_protocol_error("valid prefix", "+OK\r\n+PONG\r\n$1\r\n1\r\n", req,
                          strlen(req));
    /* Nothing after the bad request was executed. */
    redisContext *direct = px_redis_connect(&px_env()->redis, NULL);
    px_check_str(px_cmd(direct, "GET pe"), "1");
    redisFree(direct);
}

Test(it_badinput, huge_bulk_header_is_refused_without_its_body,
     .init = px_env_init, .fini = px_env_fini, .timeout = 60)
{
    const char *req = "*2\r\n$3\r\nSET\r\n$4000000000\r\n";
    expect_protocol_error("4 GB bulk", "", req, strlen(req));
}

Test(it_badinput, huge_multibulk_header_is_refused_immediately,
     .init = px_env_init, .fini = px_env_fini, .timeout = 60)
{
    const char *req = "*100000000\r\n$3\r\nSET\r\n";
    expect_protocol_error("100M elements", "", req, strlen(req));
}

Test(it_badinput, inline_request_over_64kb_is_refused, .init = px_env_init,
     .fini = px_env_fini, .timeout = 60)
{
    size_t len = 70 * 1024;
    char *line = malloc(len);
    cr_assert_not_null(line);
    memset(line, 'a', len);
    expect_protocol_error("70 KB inline without newline", "", line, len);
    free(line);

    /* A long but legal inline request still works. */
    int fd = px_raw_connect(px_env()->proxy.port, 0);
    char req[8192];
    memcpy(req, "ECHO ", 5);
    memset(req + 5, 'b', 4000);
    memcpy(req + 4005, "\r\n", 2);
    cr_assert_eq(px_raw_send(fd, req, 4007), 0);
    char want[8192];
    memcpy(want, "$4000\r\n", 7);
    memset(want + 7, 'b', 4000);
    memcpy(want + 4007, "\r\n", 2);
    px_raw_expect(fd, want, 4009);
    close(fd);
}

/* ---------------- Slow reader ---------------- */

/* The proxy gets a 1 MB output limit and a small ASan quarantine, so its
 * RSS reflects what it holds, not what ASan keeps of freed memory. */
static void init_output_limit(void)
{
    const char *old = getenv("ASAN_OPTIONS");
    char opts[1024];
    snprintf(opts, sizeof(opts), "%s%squarantine_size_mb=16",
             old != NULL ? old : "", old != NULL && old[0] != '\0' ? ":" : "");
    setenv("ASAN_OPTIONS", opts, 1);
    px_env_prepare();
    px_redis_start(&px_env()->redis, NULL);
    px_proxy_start_for(&px_env()->proxy, &px_env()->redis,
                       "client_max_output_bytes: 1mb\n");
}

/* Sends up to FLOOD_BYTES of "GET bigkey" without reading. Returns 1 when
 * the proxy reset the connection, 0 when sending stalled or finished. */
static int flood(int fd)
{
    static const char cmd[] = "*2\r\n$3\r\nGET\r\n$6\r\nbigkey\r\n";
    size_t clen = sizeof(cmd) - 1;
    char *chunk = malloc(FLOOD_CHUNK);
    cr_assert_not_null(chunk);
    size_t n = 0;
    while (n + clen <= FLOOD_CHUNK) {
        memcpy(chunk + n, cmd, clen);
        n += clen;
    }
    cr_assert_eq(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK), 0);
    size_t sent = 0, off = 0;
    long long deadline = px_now_ms() + FLOOD_WAIT_MS;
    int reset = 0;
    while (sent < FLOOD_BYTES && px_now_ms() < deadline) {
        struct pollfd pfd = { .fd = fd, .events = POLLOUT };
        int pr = poll(&pfd, 1, STALL_MS);
        if (pr == 0) {
            break; /* the proxy stopped reading from us */
        }
        if (pfd.revents & (POLLERR | POLLHUP)) {
            reset = 1;
            break;
        }
        ssize_t w = send(fd, chunk + off, n - off, MSG_NOSIGNAL);
        if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
            continue;
        }
        if (w < 0) {
            reset = 1;
            break;
        }
        sent += (size_t)w;
        off = (off + (size_t)w) % n;
    }
    free(chunk);
    cr_assert_eq(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK), 0);
    return reset;
}

Test(it_badinput, slow_reader_is_disconnected_at_output_limit,
     .init = init_output_limit, .fini = px_env_fini, .timeout = 120)
{
    struct px_child *proxy = &px_env()->proxy;
    redisContext *direct = px_redis_connect(&px_env()->redis, NULL);
    char *big = malloc(BIG_VALUE);
    cr_assert_not_null(big);
    memset(big, 'x', BIG_VALUE);
    px_check_status(px_cmd(direct, "SET bigkey %b", big, (size_t)BIG_VALUE),
                    "OK");
    free(big);
    redisFree(direct);

    redisContext *bystander = px_connect(proxy->port);
    bystander_pipeline(bystander, 1, NULL, NULL);
    long rss_before = px_rss_kb(proxy->pid);
    cr_assert_gt(rss_before, 0);

    int fd = px_raw_connect(proxy->port, 4096);
    int reset = flood(fd);

    /* Drain what was already sent to us: a proxy that cut us off ends the
     * stream (EOF or reset) after a bounded amount; one that only paused
     * would keep streaming replies. */
    size_t total = 0;
    int closed = reset;
    if (!closed) {
        char *buf = malloc(FLOOD_CHUNK);
        cr_assert_not_null(buf);
        while (total < DRAIN_CAP) {
            size_t got =
                px_raw_read(fd, buf, FLOOD_CHUNK, READ_WAIT_MS, &closed);
            total += got;
            if (closed || got == 0) {
                break;
            }
        }
        free(buf);
    }
    close(fd);
    cr_assert(closed, "slow reader not disconnected (read %zu bytes)", total);
    cr_assert_lt(total, DRAIN_CAP);

    cr_assert(px_child_alive(proxy), "proxy died");
    long rss_after = px_rss_kb(proxy->pid);
    cr_assert_gt(rss_after, 0);
    long bound = rss_before + 5 * OUTPUT_LIMIT / 1024 + RSS_SLACK_KB;
    cr_log_info("slow reader: %s, drained %zu bytes; proxy RSS %ld -> %ld kB",
                reset ? "reset while sending" : "closed", total, rss_before,
                rss_after);
    cr_assert_leq(rss_after, bound, "RSS %ld kB -> %ld kB (bound %ld kB)",
                  rss_before, rss_after, bound);

    /* Everyone else is served, on old and new connections. */
    bystander_pipeline(bystander, 2, NULL, NULL);
    px_check_int(px_cmd(bystander, "STRLEN bigkey"), BIG_VALUE);
    redisFree(bystander);
}
