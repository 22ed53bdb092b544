/* A large value through the proxy, single Redis: SET then GET of 64 MB.
 * The value comes back byte-exact, a bystander is served while the proxy
 * holds half a request and while it holds a reply its client reads
 * slowly, and the proxy holds at most one extra copy of the value each
 * way: its peak RSS (VmHWM, reset before each command) grows by at most
 * 2.5 times the value plus a slack, and falls back near where it was once
 * the command is done (no buffer keeps a copy for the connection's life).
 *
 * ASan's quarantine would keep freed buffers resident, so the proxy runs
 * without one here; ASan's shadow (an eighth of what is written) is what
 * the 0.5 above two copies leaves room for. */
#include "tests/support/px_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/integration/fixture.h"

PX_TEST_SUITE(it_bigvalue);

#define VALUE_BYTES ((size_t)64 << 20)
#define SLACK_KB    (16L * 1024) /* what the proxy may hold besides */
#define IO_WAIT_MS  300000       /* a slow, sanitized machine */
#define SETTLE_MS   30000        /* bound of the wait for RSS to fall */
#define FIRST_READ                                                             \
    (1 << 20)          /* bytes of the reply read before the                   \
                          bystander's turn */
#define BYSTANDER_RN 3 /* bystander rounds each time */

/* The field `name` ("VmHWM:", "VmRSS:") of /proc/<pid>/status, in kB. */
static long status_kb(pid_t pid, const char *name)
{
    char path[64];
    char *text, *line;
    long kb = -1;

    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    text = px_read_file(path, NULL);
    cr_assert_not_null(text);
    line = strstr(text, name);
    if (line != NULL) {
        kb = strtol(line + strlen(name), NULL, 10);
    }
    free(text);
    cr_assert_gt(kb, 0, "%s of %d", name, (int)pid);
    return kb;
}

/* Resets the peak RSS of `pid` to its RSS now (proc(5), clear_refs). */
static void reset_peak(pid_t pid)
{
    char path[64];
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/clear_refs", (int)pid);
    f = fopen(path, "w");
    cr_assert_not_null(f);
    cr_assert_eq(fputs("5", f) >= 0 && fclose(f) == 0, 1);
}

/* Asserts the peak RSS of `pid` grew from `base_kb` by at most two copies
 * of the value and a half, plus the slack. */
static void check_peak(pid_t pid, long base_kb, const char *what)
{
    long peak = status_kb(pid, "VmHWM:");
    long allowed = (long)(VALUE_BYTES / 1024) * 5 / 2 + SLACK_KB;

    cr_log_info("%s: peak %ld kB over %ld kB (%.2f values)", what,
                peak - base_kb, base_kb,
                (double)(peak - base_kb) / (double)(VALUE_BYTES / 1024));
    cr_assert_leq(peak - base_kb, allowed,
                  "%s: peak RSS grew by %ld kB, allowed %ld kB", what,
                  peak - base_kb, allowed);
}

/* Waits (bounded) for the RSS of `pid` to fall back within the slack of
 * `base_kb`, and asserts it does. */
static void check_settled(pid_t pid, long base_kb, const char *what)
{
    long long deadline = px_now_ms() + SETTLE_MS;
    long rss = status_kb(pid, "VmRSS:");

    while (rss > base_kb + SLACK_KB && px_now_ms() < deadline) {
        px_sleep_ms(50);
        rss = status_kb(pid, "VmRSS:");
    }
    cr_assert_leq(rss, base_kb + SLACK_KB,
                  "%s: RSS %ld kB stays over %ld kB: a copy of the value is "
                  "kept",
                  what, rss, base_kb);
}

/* Reads exactly `n` bytes into `buf`; asserts they came. */
static void read_exact(int fd, char *buf, size_t n, const char *what)
{
    int closed = 0;
    size_t got = px_raw_read(fd, buf, n, IO_WAIT_MS, &closed);

    cr_assert_eq(got, n, "%s: %zu of %zu bytes (closed %d)", what, got, n,
                 closed);
}

/* A few rounds of the bystander on its own keys, each checked. */
static void bystander(redisContext *b, int at)
{
    char key[32], val[32];
    int i;

    for (i = 0; i < BYSTANDER_RN; i++) {
        snprintf(key, sizeof(key), "by:%d:%d", at, i);
        snprintf(val, sizeof(val), "v%d.%d", at, i);
        px_check_status(px_cmd(b, "SET %s %s", key, val), "OK");
        px_check_str(px_cmd(b, "GET %s", key), val);
    }
}

static void init_big(void)
{
    const char *old = getenv("ASAN_OPTIONS");
    char opts[1024];

    snprintf(opts, sizeof(opts), "%s%squarantine_size_mb=0",
             old != NULL ? old : "", old != NULL && old[0] != '\0' ? ":" : "");
    setenv("ASAN_OPTIONS", opts, 1);
    px_env_prepare();
    px_redis_start(&px_env()->redis, NULL);
    px_proxy_start_for(&px_env()->proxy, &px_env()->redis,
                       "command_timeout_ms: 300000\n");
}

Test(it_bigvalue, a_64mb_value_passes_with_one_extra_copy_each_way,
     .init = init_big, .fini = px_env_fini, .timeout = 900)
{
    static const char set_head[] =
        "*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n$67108864\r\n";
    static const char get_cmd[] = "*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n";
    static const char get_head[] = "$67108864\r\n";
    pid_t pid = px_env()->proxy.pid;
    redisContext *b = px_connect(px_env()->proxy.port);
    int fd = px_raw_connect(px_env()->proxy.port, 0);
    char *val = malloc(VALUE_BYTES), *got = malloc(VALUE_BYTES + 2);
    char head[sizeof(get_head)], ok[5];
    long base;
    size_t i;

    cr_assert(val != NULL && got != NULL);
    for (i = 0; i < VALUE_BYTES; i++) {
        val[i] = (char)(i * 7 + i / 251);
    }
    bystander(b, 0);
    base = status_kb(pid, "VmRSS:");
    reset_peak(pid);

    /* SET: half the value, the bystander, the rest. */
    cr_assert_eq(px_raw_send(fd, set_head, sizeof(set_head) - 1), 0);
    cr_assert_eq(px_raw_send(fd, val, VALUE_BYTES / 2), 0);
    bystander(b, 1);
    cr_assert_eq(px_raw_send(fd, val + VALUE_BYTES / 2, VALUE_BYTES / 2), 0);
    cr_assert_eq(px_raw_send(fd, "\r\n", 2), 0);
    read_exact(fd, ok, sizeof(ok), "SET's reply");
    cr_assert(memcmp(ok, "+OK\r\n", 5) == 0, "SET: %.5s", ok);
    check_peak(pid, base, "SET");
    check_settled(pid, base, "after SET");

    /* GET: the first megabyte, the bystander, the rest. */
    base = status_kb(pid, "VmRSS:");
    reset_peak(pid);
    cr_assert_eq(px_raw_send(fd, get_cmd, sizeof(get_cmd) - 1), 0);
    read_exact(fd, head, sizeof(get_head) - 1, "GET's header");
    cr_assert(memcmp(head, get_head, sizeof(get_head) - 1) == 0);
    read_exact(fd, got, FIRST_READ, "GET's first part");
    bystander(b, 2);
    read_exact(fd, got + FIRST_READ, VALUE_BYTES + 2 - FIRST_READ,
               "GET's rest");
    cr_assert(memcmp(got, val, VALUE_BYTES) == 0, "the value came back "
                                                  "changed");
    cr_assert(memcmp(got + VALUE_BYTES, "\r\n", 2) == 0);
    check_peak(pid, base, "GET");
    check_settled(pid, base, "after GET");
    bystander(b, 3);

    close(fd);
    free(got);
    free(val);
    redisFree(b);
}
