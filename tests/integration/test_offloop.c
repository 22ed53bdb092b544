/* Nothing heavy on the event loop: a scrape of a 71k-rule tree is
 * rendered in slices, scrapers that never read hold little, and LIMITER
 * RELOAD / SIGHUP read and parse the limits file in the thread pool. A
 * bystander RESP client is served meanwhile; a reload from a FIFO with no
 * writer waits without stalling anyone, and SIGTERM while it waits exits
 * cleanly. Latency during a scrape and a reload of the big tree is
 * printed (p50/p99/max of PING round trips), never asserted. */
#include "tests/support/px_test.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/integration/fixture.h"
#include "tests/integration/limiter_support.h"

PX_TEST_SUITE(it_offloop);

#define BIG_RULES   71000              /* the hostile review's tree */
#define BODY_MAX    (64 * 1024 * 1024) /* a whole scrape of it */
#define IDLE_CONNS  16                 /* METRICS_HTTP_MAX_CONNS */
#define IDLE_RSS_KB (96 * 1024)        /* what 16 idle scrapers may add */
#define RESULTS     6                  /* results per rule in the text */
#define MAX_SAMPLES 200000

static const char small_yaml[] = "user:\n"
                                 "  children:\n"
                                 "    \"*\":\n"
                                 "      limits: [5, 6, 3600]\n";

/* The tree after the FIFO reloads: fresh:<id> exists only there. */
static const char fresh_yaml[] = "user:\n"
                                 "  children:\n"
                                 "    \"*\":\n"
                                 "      limits: [5, 6, 3600]\n"
                                 "fresh:\n"
                                 "  children:\n"
                                 "    \"*\":\n"
                                 "      limits: [1, 2, 3600]\n";

static int metrics_port;
static char limits_file[PX_PATH_MAX];

/* ---------------- Setup ---------------- */

/* t0 ... t<n-1>, each with a limit; `extra` (may be NULL) after them. */
static char *big_yaml(int n, const char *extra)
{
    size_t cap = (size_t)n * 40 + 1024;
    char *y = malloc(cap);
    size_t len = 0;

    cr_assert_not_null(y);
    for (int i = 0; i < n; i++) {
        len += (size_t)snprintf(y + len, cap - len,
                                "t%d:\n  limits: [5, 6, "
                                "3600]\n",
                                i);
    }
    snprintf(y + len, cap - len, "%s", extra != NULL ? extra : "");
    return y;
}

/* Embedded cellgate with `yaml` as its limits file and the endpoint. */
static void start_embedded(const char *yaml)
{
    char more[96];

    metrics_port = px_free_port();
    snprintf(more, sizeof(more), "metrics_listen: 127.0.0.1:%d\n",
             metrics_port);
    px_limits_start(PX_MODE_EMBEDDED, yaml, more);
    px_path(limits_file, sizeof(limits_file), "limits.yaml");
}

/* A client whose replies may take a minute (a reload of the big tree
 * under the sanitizers, on a busy machine). */
static redisContext *slow_client(void)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    struct timeval tv = { .tv_sec = 120 };

    cr_assert_eq(redisSetTimeout(c, tv), REDIS_OK);
    return c;
}

/* A client that has run AUTH admin: RELOAD is the admin's. */
static redisContext *offloop_admin(void)
{
    redisContext *c = px_connect(px_env()->proxy.port);

    px_check_status(px_cmd(c, "AUTH admin " PX_ADMIN_PASSWORD), "OK");
    return c;
}

/* Writes t0 ... t<n-1> plus `extra` as the limits file and reloads it. */
static void reload_big(int n, const char *extra)
{
    char *y = big_yaml(n, extra);
    redisContext *c = slow_client();

    px_write_file(limits_file, sizeof(limits_file), "limits.yaml", y);
    free(y);
    px_check_status(px_cmd(c, "AUTH admin " PX_ADMIN_PASSWORD), "OK");
    px_check_status(px_cmd(c, "LIMITER RELOAD"), "OK");
    redisFree(c);
}

/* The small tree at start (a 71k-rule file takes longer to load under
 * the sanitizers than the fixture waits), then the big one. */
static void init_big(void)
{
    start_embedded(small_yaml);
    reload_big(BIG_RULES, NULL);
}

static void init_small(void)
{
    start_embedded(small_yaml);
}

/* Replaces the limits file by a FIFO that nobody writes yet. */
static void limits_become_fifo(void)
{
    cr_assert_eq(unlink(limits_file), 0);
    cr_assert_eq(mkfifo(limits_file, 0600), 0, "mkfifo: %s", strerror(errno));
}

/* Writes `text` into the FIFO once its reader has it open (blocks until
 * then: the proxy's reload opens it). */
static void feed_fifo(const char *text)
{
    int fd = open(limits_file, O_WRONLY);
    size_t len = strlen(text), off = 0;

    cr_assert(fd >= 0, "open fifo: %s", strerror(errno));
    while (off < len) {
        ssize_t n = write(fd, text + off, len - off);
        cr_assert(n > 0, "write fifo: %s", strerror(errno));
        off += (size_t)n;
    }
    close(fd);
}

/* True when a reply is readable on `c` within `ms`. */
static int reply_ready(redisContext *c, int ms)
{
    struct pollfd p = { .fd = c->fd, .events = POLLIN };

    return poll(&p, 1, ms) > 0;
}

/* A bystander's round: PING, and a LIMITER PEEK of the small tree. */
static void bystander_round(redisContext *c, const char *path, long long limit)
{
    struct px_five f;

    px_check_status(px_cmd(c, "PING"), "PONG");
    f = px_take_five(px_cmd(c, "LIMITER PEEK %s", path), path);
    cr_assert_eq(f.limit, limit, "%s: limit %lld", path, f.limit);
}

/* ---------------- Scrapes ---------------- */

/* GET /metrics on a new connection, read until closed: the whole
 * response (malloc'd, NUL-ended). */
static char *scrape_all(size_t *lenp)
{
    static const char req[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
    char *resp = malloc(BODY_MAX);
    int fd = px_raw_connect(metrics_port, 0);
    int closed = 0;
    size_t len;

    cr_assert_not_null(resp);
    cr_assert_eq(px_raw_send(fd, req, sizeof(req) - 1), 0);
    len = px_raw_read_to_close(fd, resp, BODY_MAX, 120000, &closed);
    close(fd);
    cr_assert(closed, "the endpoint did not close after its response");
    *lenp = len;
    return resp;
}

/* Asserts `resp` is a 200 whose decision counters name cl.throttle,
 * user:* (the tree at start) and t0 ... t<n-1> once each, in result order, all
 * 0 but t7's allowed
 * (`t7_allowed`), and that the histograms follow them. */
/* Per line, only a failure reaches criterion: each passed cr_assert is an
 * event sent to its runner, and millions of them add up. */
static void check_scrape(const char *resp, int n, long long t7_allowed)
{
    static const char *const results[RESULTS] = {
        "allowed",        "limited", "near_limit",
        "shadow_limited", "errors",  "fail_open",
    };
    static const char head[] =
        "# HELP cellgate_limiter_decisions_total Limiter decisions by rule "
        "(tree path; cl.throttle for CL.THROTTLE) and result.\n"
        "# TYPE cellgate_limiter_decisions_total counter\n";
    const char *p = strstr(resp, "\r\n\r\n");
    /* memchr within the text, not strchr: under ASan's
     * strict_string_checks (scripts/test.sh) every strchr measures the
     * rest of the 29 MB text first. */
    const char *stop = resp + strlen(resp);
    char *seen = calloc((size_t)n + 2, 1);
    int rules = 0;

    cr_assert(strncmp(resp, "HTTP/1.1 200 OK\r\n", 17) == 0, "%.80s", resp);
    cr_assert_not_null(p);
    p += 4;
    cr_assert(strncmp(p, head, sizeof(head) - 1) == 0, "%.200s", p);
    p += sizeof(head) - 1;
    while (strncmp(p, "cellgate_limiter_decisions_total{", 33) == 0) {
        char rule[64];
        int idx = -1;
        for (int r = 0; r < RESULTS; r++) {
            char line[256], name[64], want[128];
            const char *nl = memchr(p, '\n', (size_t)(stop - p));
            const char *tail;
            char *end;
            long long v;
            /* One line at a time: sscanf measures its whole input. */
            if (nl == NULL || nl - p >= (long)sizeof(line)) {
                cr_assert_fail("%.120s", p);
            }
            memcpy(line, p, (size_t)(nl - p));
            line[nl - p] = '\0';
            snprintf(want, sizeof(want), "\",result=\"%s\"} ", results[r]);
            if (sscanf(line, "cellgate_limiter_decisions_total{rule=\"%63[^\"]",
                       name) != 1) {
                cr_assert_fail("bad line: %s", line);
            }
            tail = line + 39 + strlen(name);
            if (strncmp(tail, want, strlen(want)) != 0) {
                cr_assert_fail("bad line: %s", line);
            }
            v = strtoll(tail + strlen(want), &end, 10);
            if (end == tail + strlen(want) || *end != '\0') {
                cr_assert_fail("bad line: %s", line);
            }
            if (r == 0) {
                snprintf(rule, sizeof(rule), "%s", name);
            }
            if (strcmp(name, rule) != 0 ||
                v != (strcmp(rule, "t7") == 0 && r == 0 ? t7_allowed : 0)) {
                cr_assert_fail("rule %s %s = %lld: %s", rule, results[r], v,
                               line);
            }
            p = nl + 1;
        }
        if (strcmp(rule, "cl.throttle") == 0) {
            idx = n;
        } else if (strcmp(rule, "user:*") == 0) {
            idx = n + 1;
        } else {
            idx = rule[0] == 't' ? atoi(rule + 1) : -1;
            if (idx < 0 || idx >= n) {
                cr_assert_fail("rule %s", rule);
            }
        }
        if (seen[idx] != 0) {
            cr_assert_fail("rule %s twice", rule);
        }
        seen[idx] = 1;
        rules++;
    }
    cr_assert_eq(rules, n + 2, "%d rules in the scrape", rules);
    cr_assert(strncmp(p, "# HELP cellgate_decision_duration_seconds ", 42) == 0,
              "after the rules: %.120s", p);
    cr_assert_not_null(strstr(p, "cellgate_config_info{sha256=\""));
    free(seen);
}

/* ---------------- Latency ---------------- */

static int cmp_ms(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

/* Prints p50/p99/max of `n` round trips (ms) under `what`. */
static void print_latency(const char *what, double *ms, size_t n)
{
    cr_assert(n > 0);
    qsort(ms, n, sizeof(*ms), cmp_ms);
    fprintf(stderr,
            "it_offloop latency %s: %zu PINGs, p50 %.3f ms, p99 %.3f ms, "
            "max %.3f ms\n",
            what, n, ms[n / 2], ms[(n * 99) / 100], ms[n - 1]);
}

static double now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* PINGs on `c` until *done, recording each round trip; returns the
 * count. Every reply must be PONG. */
static size_t ping_until(redisContext *c, volatile int *done, double *ms)
{
    size_t n = 0;

    while (!*done && n < MAX_SAMPLES) {
        double t0 = now_ms();
        redisReply *r = redisCommand(c, "PING");
        cr_assert_not_null(r, "PING got no reply (%s)", c->errstr);
        cr_assert_eq(r->type, REDIS_REPLY_STATUS);
        cr_assert_str_eq(r->str, "PONG");
        freeReplyObject(r);
        ms[n++] = now_ms() - t0;
    }
    return n;
}

struct scraper {
    volatile int done;
    char *resp;
    size_t len;
};

static void *scraper_main(void *arg)
{
    static const char req[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
    struct scraper *s = arg;
    int fd = px_raw_connect(metrics_port, 0);
    int closed = 0;

    s->resp = malloc(BODY_MAX);
    if (s->resp != NULL && px_raw_send(fd, req, sizeof(req) - 1) == 0) {
        s->len = px_raw_read_to_close(fd, s->resp, BODY_MAX, 120000, &closed);
    }
    close(fd);
    s->done = 1;
    return NULL;
}

struct reloader {
    volatile int done;
    int port;
    int ok; /* the reply was +OK */
};

static void *reloader_main(void *arg)
{
    struct reloader *rl = arg;
    redisContext *c = redisConnect("127.0.0.1", rl->port);
    redisReply *r;

    if (c != NULL && c->err == 0) {
        r = redisCommand(c, "AUTH admin " PX_ADMIN_PASSWORD);
        if (r != NULL) {
            freeReplyObject(r);
        }
        r = redisCommand(c, "LIMITER RELOAD");
        rl->ok = r != NULL && r->type == REDIS_REPLY_STATUS &&
                 strcmp(r->str, "OK") == 0;
        if (r != NULL) {
            freeReplyObject(r);
        }
    }
    if (c != NULL) {
        redisFree(c);
    }
    rl->done = 1;
    return NULL;
}

/* ---------------- Tests ---------------- */

Test(it_offloop, a_scrape_of_71k_rules_leaves_resp_clients_served,
     .init = init_big, .fini = px_env_fini, .timeout = 300)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    double *ms = malloc(MAX_SAMPLES * sizeof(*ms));
    struct scraper s = { 0 };
    pthread_t th;
    size_t n;

    for (int i = 0; i < 3; i++) {
        redisReply *r = px_cmd(c, "LIMITER CHECK t7");
        freeReplyObject(r);
    }
    for (int i = 0; i < 200; i++) {
        double t0 = now_ms();
        px_check_status(px_cmd(c, "PING"), "PONG");
        ms[i] = now_ms() - t0;
    }
    print_latency("idle, 71k rules", ms, 200);
    cr_assert_eq(pthread_create(&th, NULL, scraper_main, &s), 0);
    n = ping_until(c, &s.done, ms);
    pthread_join(th, NULL);
    print_latency("during a scrape of 71k rules", ms, n);
    fprintf(stderr, "it_offloop scrape of 71k rules: %zu bytes\n", s.len);
    check_scrape(s.resp, BIG_RULES, 3);
    free(s.resp);
    free(ms);
    redisFree(c);
}

Test(it_offloop, scrapers_that_never_read_hold_bounded_memory, .init = init_big,
     .fini = px_env_fini, .timeout = 300)
{
    static const char req[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
    redisContext *c = px_connect(px_env()->proxy.port);
    pid_t pid = px_env()->proxy.pid;
    int idle[IDLE_CONNS];
    long before, after = 0;
    size_t len;
    char *resp;

    for (int i = 0; i < 3; i++) {
        freeReplyObject(px_cmd(c, "LIMITER CHECK t7"));
    }
    px_check_status(px_cmd(c, "PING"), "PONG");
    before = px_rss_kb(pid);
    cr_assert(before > 0);
    for (int i = 0; i < IDLE_CONNS; i++) {
        idle[i] = px_raw_connect(metrics_port, 4096);
        cr_assert_eq(px_raw_send(idle[i], req, sizeof(req) - 1), 0);
    }
    /* Each sent its request and reads nothing: whatever the proxy
     * renders for them stays with it. The bystander is served, and the
     * highest RSS seen over a second is what they cost. */
    for (int round = 0; round < 20; round++) {
        long rss;
        px_check_status(px_cmd(c, "PING"), "PONG");
        freeReplyObject(px_cmd(c, "LIMITER PEEK t1"));
        px_sleep_ms(50);
        rss = px_rss_kb(pid);
        after = rss > after ? rss : after;
    }
    fprintf(stderr,
            "it_offloop 16 idle scrapers of 71k rules: RSS %ld -> %ld KiB\n",
            before, after);
    cr_assert(after - before < IDLE_RSS_KB,
              "16 idle scrapers grew the proxy by %ld KiB", after - before);
    for (int i = 0; i < IDLE_CONNS; i++) {
        close(idle[i]);
    }
    /* Their slots come back; a whole scrape is still the whole text. */
    for (int tries = 0;; tries++) {
        resp = scrape_all(&len);
        if (strncmp(resp, "HTTP/1.1 200 ", 13) == 0 || tries == 100) {
            break;
        }
        free(resp);
        px_sleep_ms(50);
    }
    check_scrape(resp, BIG_RULES, 3);
    free(resp);
    px_check_status(px_cmd(c, "PING"), "PONG");
    redisFree(c);
}

Test(it_offloop, a_reload_of_71k_rules_leaves_resp_clients_served,
     .init = init_big, .fini = px_env_fini, .timeout = 300)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    double *ms = malloc(MAX_SAMPLES * sizeof(*ms));
    struct reloader rl = { .port = px_env()->proxy.port };
    struct px_five f;
    char *y = big_yaml(BIG_RULES, "fresh:\n  limits: [1, 2, 3600]\n");
    pthread_t th;
    size_t n;

    px_write_file(limits_file, sizeof(limits_file), "limits.yaml", y);
    free(y);
    cr_assert_eq(pthread_create(&th, NULL, reloader_main, &rl), 0);
    n = ping_until(c, &rl.done, ms);
    pthread_join(th, NULL);
    print_latency("during a reload of 71k rules", ms, n);
    cr_assert(rl.ok, "LIMITER RELOAD did not answer +OK");
    /* The new tree is in force: fresh allows 2 at once. */
    f = px_take_five(px_cmd(c, "LIMITER CHECK fresh"), "fresh");
    cr_assert(f.limited == 0 && f.limit == 2 && f.remaining == 1,
              "fresh: %lld %lld %lld", f.limited, f.limit, f.remaining);
    free(ms);
    redisFree(c);
}

Test(it_offloop, a_reload_from_a_fifo_waits_while_others_are_served,
     .init = init_small, .fini = px_env_fini, .timeout = 120)
{
    redisContext *by = px_connect(px_env()->proxy.port);
    redisContext *a = offloop_admin();
    redisContext *gone = offloop_admin();
    redisReply *r;

    bystander_round(by, "user:bo", 6);
    limits_become_fifo();
    /* A's reload opens the FIFO and waits for a writer, in the pool. */
    redisAppendCommand(a, "LIMITER RELOAD");
    px_flush(a);
    /* Another RELOAD comes meanwhile, and its client leaves: it waits
     * for the run after A's, as an orphan. */
    redisAppendCommand(gone, "LIMITER RELOAD");
    px_flush(gone);
    for (int i = 0; i < 10; i++) {
        bystander_round(by, "user:bo", 6);
    }
    cr_assert_not(reply_ready(a, 200), "RELOAD answered before the file "
                                       "was written");
    redisFree(gone);
    bystander_round(by, "user:bo", 6);
    /* The file arrives: A's run parses it and answers +OK. */
    feed_fifo(fresh_yaml);
    px_check_status(px_next(a), "OK");
    bystander_round(by, "fresh:kim", 2);
    /* The run after it (the orphan's) reads the FIFO again. */
    feed_fifo(fresh_yaml);
    for (int tries = 0; tries < 100; tries++) {
        r = px_cmd(by, "INFO limiter");
        if (strstr(r->str, "config_reloads_ok:2\r\n") != NULL) {
            freeReplyObject(r);
            break;
        }
        freeReplyObject(r);
        cr_assert(tries < 99, "the second run never ended");
        px_sleep_ms(20);
    }
    bystander_round(by, "fresh:kim", 2);
    redisFree(a);
    redisFree(by);
}

Test(it_offloop, a_broken_file_from_a_fifo_keeps_the_old_rules,
     .init = init_small, .fini = px_env_fini, .timeout = 120)
{
    redisContext *by = px_connect(px_env()->proxy.port);
    redisContext *a = offloop_admin();
    redisReply *r;

    limits_become_fifo();
    redisAppendCommand(a, "LIMITER RELOAD");
    px_flush(a);
    bystander_round(by, "user:bo", 6);
    feed_fifo("user:\n  limits: [1, 2\n");
    r = px_next(a);
    cr_assert_eq(r->type, REDIS_REPLY_ERROR);
    px_check_location(r->str, limits_file, 0);
    freeReplyObject(r);
    bystander_round(by, "user:bo", 6);
    r = px_cmd(by, "INFO limiter");
    cr_assert_not_null(strstr(r->str, "config_reloads_failed:1\r\n"));
    freeReplyObject(r);
    redisFree(a);
    redisFree(by);
}

Test(it_offloop, sigterm_during_a_pending_reload_exits_clean,
     .init = init_small, .fini = px_env_fini, .timeout = 120)
{
    redisContext *a = offloop_admin();
    redisContext *b = offloop_admin();

    limits_become_fifo();
    redisAppendCommand(a, "LIMITER RELOAD");
    px_flush(a);
    /* A second one waits behind it, and a SIGHUP joins that one. */
    redisAppendCommand(b, "LIMITER RELOAD");
    px_flush(b);
    cr_assert_eq(kill(px_env()->proxy.pid, SIGHUP), 0);
    cr_assert_not(reply_ready(a, 200));
    /* Exit 0, no sanitizer report: nothing leaked, nothing hung. */
    px_proxy_stop_clean(&px_env()->proxy, SIGTERM);
    redisFree(a);
    redisFree(b);
}

/* Any client may run INFO: its limiter section lists the first 1,000 rules
 * and counts the rest (a line per rule of a 71k-rule tree would be
 * megabytes rendered on the loop for each INFO); the endpoint has them
 * all. */
Test(it_offloop, info_lists_at_most_1000_rules, .init = init_small,
     .fini = px_env_fini, .timeout = 120)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    redisReply *r;
    const char *p;
    int lines = 0;
    long long omitted;

    reload_big(1500, NULL);
    r = px_cmd(c, "INFO limiter");
    cr_assert_eq(r->type, REDIS_REPLY_STRING);
    for (p = strstr(r->str, "\nlimiter_rule_"); p != NULL;
         p = strstr(p + 1, "\nlimiter_rule_")) {
        lines++;
    }
    cr_assert_not_null(strstr(r->str, "\nlimiter_rule_999:"));
    cr_assert_null(strstr(r->str, "\nlimiter_rule_1000:"));
    freeReplyObject(r);
    cr_assert_eq(lines, 1000, "%d rule lines", lines);
    omitted = px_info_int(c, "limiter_rules_omitted");
    /* 1,500 rules of the big tree and user:* of the first, whose
     * counters a reload keeps (cl.throttle's too, if made yet). */
    cr_assert(omitted >= 501 && omitted <= 502, "omitted %lld", omitted);
    redisFree(c);
}
