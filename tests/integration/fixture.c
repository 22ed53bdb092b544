/* Integration test fixture: child processes, ports, clients, raw sockets.
 *
 * See fixture.h for the model. Everything here asserts with criterion on
 * failure, so a test body reads as a sequence of expectations. Children are
 * started with fork/exec; between fork and exec the child only calls
 * async-signal-safe functions. */
#define _GNU_SOURCE /* prctl(PR_SET_PDEATHSIG), POLLRDHUP */

#include "tests/integration/fixture.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <criterion/criterion.h>

#define READY_TIMEOUT_MS 10000 /* bounded wait for a child to serve */
#define STOP_TIMEOUT_MS  10000 /* bounded wait for a clean exit */
#define RUN_TIMEOUT_MS   10000 /* bounded wait for px_run */
#define LOG_TAIL_BYTES   4096  /* log excerpt printed when a check fails */
#define POLL_STEP_MS     10    /* granularity of the bounded waits */
#define ARRAY_LEN(a)     (sizeof(a) / sizeof(*(a)))

static struct px_env env; /* one per test process */

/* Sanitizer report markers that must never appear in the proxy's stderr. */
static const char *const sanitizer_markers[] = {
    "ERROR: AddressSanitizer",
    "ERROR: LeakSanitizer",
    "runtime error:",
};

/* ---------------- Small helpers ---------------- */

void px_sleep_ms(int ms)
{
    struct timespec ts = {
        .tv_sec = ms / 1000,
        .tv_nsec = (long)(ms % 1000) * 1000000L,
    };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

long long px_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

char *px_read_file(const char *path, size_t *lenp)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        return NULL;
    }
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    cr_assert_not_null(buf);
    for (;;) {
        size_t n = fread(buf + len, 1, cap - len - 1, f);
        len += n;
        if (n == 0) {
            break;
        }
        if (cap - len - 1 == 0) {
            cap *= 2;
            buf = realloc(buf, cap);
            cr_assert_not_null(buf);
        }
    }
    fclose(f);
    buf[len] = '\0';
    if (lenp != NULL) {
        *lenp = len;
    }
    return buf;
}

void px_check_location(const char *text, const char *path, int line)
{
    char prefix[PX_PATH_MAX + 32];

    if (line > 0) {
        snprintf(prefix, sizeof(prefix), "%s:%d:", path, line);
    } else {
        snprintf(prefix, sizeof(prefix), "%s:", path);
    }
    for (const char *p = strstr(text, prefix); p != NULL;
         p = strstr(p + 1, prefix)) {
        const char *q = p + strlen(prefix);
        if (line == 0) {
            if (!isdigit((unsigned char)*q)) {
                continue;
            }
            while (isdigit((unsigned char)*q)) {
                q++;
            }
            if (*q++ != ':') {
                continue;
            }
        }
        if (!isdigit((unsigned char)*q)) {
            continue;
        }
        while (isdigit((unsigned char)*q)) {
            q++;
        }
        if (*q == ':') {
            return;
        }
    }
    cr_assert_fail("no \"%s<col>:\" in \"%s\"", prefix, text);
}

/* Prints the end of a log file to stderr, to explain a failure. */
static void dump_log_tail(const char *what, const char *path)
{
    size_t len = 0;
    char *text = px_read_file(path, &len);
    if (text == NULL) {
        fprintf(stderr, "--- %s log %s: unreadable\n", what, path);
        return;
    }
    const char *from =
        len > LOG_TAIL_BYTES ? text + len - LOG_TAIL_BYTES : text;
    fprintf(stderr, "--- %s log %s (tail) ---\n%s\n--- end ---\n", what, path,
            from);
    free(text);
}

/* Exit code of a wait status: the code, or 128 + signal. */
static int decode_status(int status)
{
    if (WIFEXITED(status)) {
        return WEXITSTATUS(status);
    }
    if (WIFSIGNALED(status)) {
        return 128 + WTERMSIG(status);
    }
    return -1;
}

/* Waits for pid up to timeout_ms. Returns 1 and the decoded status when it
 * exited, 0 when it is still running. */
static int wait_bounded(pid_t pid, int timeout_ms, int *code)
{
    long long deadline = px_now_ms() + timeout_ms;
    for (;;) {
        int status = 0;
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) {
            *code = decode_status(status);
            return 1;
        }
        if (r < 0 && errno != EINTR) {
            *code = -1;
            return 1;
        }
        if (px_now_ms() >= deadline) {
            return 0;
        }
        px_sleep_ms(POLL_STEP_MS);
    }
}

/* ---------------- Environment ---------------- */

struct px_env *px_env(void)
{
    return &env;
}

void px_env_prepare(void)
{
    if (env.dir[0] != '\0') {
        return;
    }
    /* A peer closing a socket must not kill the test process. Children get
     * the default disposition back before exec (see spawn). */
    signal(SIGPIPE, SIG_IGN);
    const char *tmp = getenv("TMPDIR");
    if (tmp == NULL || tmp[0] == '\0') {
        tmp = "/tmp";
    }
    int n = snprintf(env.dir, sizeof(env.dir), "%s/cellgate-it-XXXXXX", tmp);
    cr_assert(n > 0 && (size_t)n < sizeof(env.dir), "TMPDIR too long");
    cr_assert_not_null(mkdtemp(env.dir), "mkdtemp(%s): %s", env.dir,
                       strerror(errno));
}

void px_path(char *out, size_t outlen, const char *name)
{
    px_env_prepare();
    int n = snprintf(out, outlen, "%s/%s", env.dir, name);
    cr_assert(n > 0 && (size_t)n < outlen, "path too long: %s", name);
}

void px_write_file(char *out, size_t outlen, const char *name, const char *text)
{
    px_path(out, outlen, name);
    FILE *f = fopen(out, "wb");
    cr_assert_not_null(f, "fopen(%s): %s", out, strerror(errno));
    size_t len = strlen(text);
    cr_assert_eq(fwrite(text, 1, len, f), len);
    cr_assert_eq(fclose(f), 0);
}

/* Removes the flat temp dir, unless PX_KEEP_TMP is set. */
static void remove_tmpdir(void)
{
    if (env.dir[0] == '\0') {
        return;
    }
    const char *keep = getenv("PX_KEEP_TMP");
    if (keep != NULL && keep[0] != '\0' && strcmp(keep, "0") != 0) {
        fprintf(stderr, "keeping %s\n", env.dir);
        return;
    }
    DIR *d = opendir(env.dir);
    if (d != NULL) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
                continue;
            }
            char p[PX_PATH_MAX * 2];
            snprintf(p, sizeof(p), "%s/%s", env.dir, e->d_name);
            unlink(p);
        }
        closedir(d);
    }
    rmdir(env.dir);
    env.dir[0] = '\0';
}

int px_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert(fd >= 0, "socket: %s", strerror(errno));
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = 0;
    cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0, "bind: %s",
                 strerror(errno));
    socklen_t sl = sizeof(sa);
    cr_assert_eq(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
    close(fd);
    return ntohs(sa.sin_port);
}

/* ---------------- Child processes ---------------- */

/* Forks and execs argv (argv[0] looked up in PATH). stdout goes to
 * out_path, stderr to err_path (or out_path when NULL). The child dies with
 * the test process (PR_SET_PDEATHSIG). Returns the pid. */
static pid_t spawn(const char *const *argv, const char *out_path,
                   const char *err_path)
{
    pid_t parent = getpid();
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    cr_assert(pid >= 0, "fork: %s", strerror(errno));
    if (pid > 0) {
        return pid;
    }
    /* Child: async-signal-safe calls only. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) {
        _exit(126);
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL); /* never hide a missing SIGPIPE handler */
    int in = open("/dev/null", O_RDONLY);
    int out = open(out_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    int err = err_path != NULL
                  ? open(err_path, O_WRONLY | O_CREAT | O_APPEND, 0644)
                  : out;
    if (in < 0 || out < 0 || err < 0) {
        _exit(126);
    }
    dup2(in, STDIN_FILENO);
    dup2(out, STDOUT_FILENO);
    dup2(err, STDERR_FILENO);
    execvp(argv[0], (char *const *)argv);
    _exit(127);
}

int px_child_alive(struct px_child *c)
{
    if (c->pid <= 0) {
        return 0;
    }
    int status = 0;
    pid_t r = waitpid(c->pid, &status, WNOHANG);
    if (r == c->pid) {
        c->exit_code = decode_status(status);
        c->pid = 0;
        return 0;
    }
    return 1;
}

/* Stops a child with sig, bounded, then SIGKILL. Returns its exit code
 * (128 + signal when killed), or -1 when it was not running. */
static int child_stop(struct px_child *c, int sig, int *timed_out)
{
    int code = -1;
    *timed_out = 0;
    if (c->pid <= 0) {
        return -1;
    }
    kill(c->pid, SIGCONT); /* a test may have stopped it */
    kill(c->pid, sig);
    if (!wait_bounded(c->pid, STOP_TIMEOUT_MS, &code)) {
        *timed_out = 1;
        kill(c->pid, SIGKILL);
        wait_bounded(c->pid, STOP_TIMEOUT_MS, &code);
    }
    c->exit_code = code;
    c->pid = 0;
    return code;
}

/* True when a TCP connect to the loopback port succeeds. */
static int port_accepts(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) {
        return 0;
    }
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = htons((unsigned short)port);
    int ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    close(fd);
    return ok;
}

/* Kills every child of the environment and removes the temp dir. Called
 * before failing in a start function: criterion does not run .fini when
 * .init fails, so nothing else would clean up. */
static void abandon(void)
{
    int timed_out = 0;
    child_stop(&env.proxy, SIGKILL, &timed_out);
    child_stop(&env.redis, SIGKILL, &timed_out);
    remove_tmpdir();
}

/* ---------------- redis-server ---------------- */

/* True when the redis-server with process id `pid` answers on `port`.
 * The process id matters: when another run on the machine took the same
 * free port first, a PING alone would be answered by its server, and this
 * test would share (and flush) someone else's data. */
static int redis_answers(int port, pid_t pid)
{
    struct timeval tv = { .tv_sec = 0, .tv_usec = 200000 };
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    int ok = 0;
    if (c != NULL && c->err == 0) {
        redisSetTimeout(c, tv);
        redisReply *r = redisCommand(c, "INFO server");
        if (r != NULL && r->type == REDIS_REPLY_STRING) {
            const char *p = strstr(r->str, "process_id:");
            ok = p != NULL && atol(p + 11) == (long)pid;
        } else if (r != NULL && r->type == REDIS_REPLY_ERROR) {
            /* A server with requirepass: it answers, and it is ours as
             * long as our child is alive (the caller checks). */
            ok = strncmp(r->str, "NOAUTH", 6) == 0;
        }
        if (r != NULL) {
            freeReplyObject(r);
        }
    }
    if (c != NULL) {
        redisFree(c);
    }
    return ok;
}

/* Spawns redis-server for `r` on r->port and waits until it answers.
 * Returns 1, or 0 when it exited first (the port was taken meanwhile). */
static int redis_spawn(struct px_child *r)
{
    static const char *const fixed[] = {
        "redis-server", "--bind", "127.0.0.1",   "--save", "",
        "--appendonly", "no",     "--daemonize", "no",     NULL,
    };
    const char *argv[PX_MAX_ARGS + 16];
    char port[16];
    size_t n = 0;

    snprintf(port, sizeof(port), "%d", r->port);
    for (size_t i = 0; fixed[i] != NULL; i++) {
        argv[n++] = fixed[i];
    }
    argv[n++] = "--port";
    argv[n++] = port;
    /* Its files (the RDB a SYNC writes) go to the test's own directory:
     * one left in the working directory would be loaded by every later
     * redis-server. */
    argv[n++] = "--dir";
    argv[n++] = px_env()->dir;
    for (size_t i = 0; r->args[i] != NULL; i++) {
        argv[n++] = r->args[i];
    }
    argv[n] = NULL;
    r->pid = spawn(argv, r->log, NULL);

    long long deadline = px_now_ms() + READY_TIMEOUT_MS;
    while (!redis_answers(r->port, r->pid)) {
        if (!px_child_alive(r)) {
            return 0;
        }
        if (px_now_ms() >= deadline) {
            dump_log_tail("redis", r->log);
            abandon();
            cr_assert_fail("redis-server on port %d did not start (pid %d)",
                           r->port, (int)r->pid);
        }
        px_sleep_ms(POLL_STEP_MS);
    }
    /* NOAUTH does not say whose server answered: ours is the one still
     * running. */
    return px_child_alive(r);
}

void px_redis_start(struct px_child *r, const char *const *extra)
{
    int picked = 0, attempt;

    px_env_prepare();
    if (r->port == 0) {
        r->port = px_free_port();
        picked = 1;
    }
    if (extra != NULL) {
        size_t i = 0;
        for (; extra[i] != NULL; i++) {
            cr_assert(i + 1 < PX_MAX_ARGS, "too many redis args");
            r->args[i] = extra[i];
        }
        r->args[i] = NULL;
    }
    /* A free port can be taken by another run between asking and
     * binding: a port this call picked is picked again. */
    for (attempt = 0; attempt < 3; attempt++) {
        if (r->log[0] == '\0' || (picked && attempt > 0)) {
            char name[64];
            snprintf(name, sizeof(name), "redis-%d.log", r->port);
            px_path(r->log, sizeof(r->log), name);
        }
        if (redis_spawn(r)) {
            return;
        }
        if (!picked) {
            break;
        }
        r->port = px_free_port();
    }
    dump_log_tail("redis", r->log);
    abandon();
    cr_assert_fail("redis-server on port %d did not start (exit code %d)",
                   r->port, r->exit_code);
}

void px_redis_kill(struct px_child *r, int sig)
{
    int timed_out = 0;
    child_stop(r, sig, &timed_out);
}

void px_redis_restart(struct px_child *r)
{
    cr_assert_eq(r->pid, 0, "redis still running");
    px_redis_start(r, NULL);
}

redisContext *px_redis_connect(const struct px_child *r, const char *password)
{
    redisContext *c = px_connect(r->port);
    if (password != NULL) {
        px_check_status(px_cmd(c, "AUTH %s", password), "OK");
    }
    return c;
}

/* ---------------- cellgate ---------------- */

/* The admin password of each proxy started, by port, for px_cmd_admin: a
 * test may start several, and a yaml may name its own password. */
#define ADMIN_PORTS 16
static struct {
    int port;
    char password[64];
} admin_ports[ADMIN_PORTS];

static void admin_remember(int port, const char *yaml)
{
    const char *at = yaml != NULL ? strstr(yaml, "admin_password:") : NULL;
    char pw[64] = PX_ADMIN_PASSWORD;
    size_t i, k = 0;

    if (at != NULL) {
        at += strlen("admin_password:");
        at += strspn(at, " \"'");
        while (k + 1 < sizeof(pw) && at[k] != '\0' &&
               strchr(" \"'\n#", at[k]) == NULL) {
            pw[k] = at[k];
            k++;
        }
        pw[k] = '\0';
    }
    for (i = 0; i < ADMIN_PORTS; i++) {
        if (admin_ports[i].port == port || admin_ports[i].port == 0) {
            admin_ports[i].port = port;
            snprintf(admin_ports[i].password, sizeof(admin_ports[i].password),
                     "%s", pw);
            return;
        }
    }
    cr_assert_fail("more than %d proxies in one test", ADMIN_PORTS);
}

redisReply *px_cmd_admin(redisContext *c, const char *fmt, ...)
{
    const char *pw = NULL;
    redisContext *a;
    redisReply *r;
    va_list ap;
    size_t i;

    for (i = 0; i < ADMIN_PORTS && pw == NULL; i++) {
        if (admin_ports[i].port == c->tcp.port) {
            pw = admin_ports[i].password;
        }
    }
    cr_assert_not_null(pw, "px_cmd_admin: no proxy started on port %d",
                       c->tcp.port);
    a = px_connect(c->tcp.port);
    px_check_status(px_cmd(a, "AUTH admin %s", pw), "OK");
    va_start(ap, fmt);
    r = redisvCommand(a, fmt, ap);
    va_end(ap);
    cr_assert_not_null(r, "no reply to \"%s\": %s", fmt, a->errstr);
    redisFree(a);
    return r;
}

void px_proxy_start(struct px_child *p, const char *yaml,
                    const char *const *args)
{
    px_env_prepare();
    if (p->port == 0) {
        p->port = px_free_port();
    }
    if (p->log[0] == '\0') {
        px_path(p->log, sizeof(p->log), "cellgate.stderr");
    }
    char listen[64];
    snprintf(listen, sizeof(listen), "127.0.0.1:%d", p->port);
    const char *argv[PX_MAX_ARGS + 8];
    size_t n = 0;
    argv[n++] = PX_CELLGATE_BIN;
    /* Every proxy gets an admin password (PX_ADMIN_PASSWORD, for
     * px_cmd_admin) unless its yaml names admin_password itself. */
    const char *admin = yaml != NULL && strstr(yaml, "admin_password") != NULL
                            ? ""
                            : "admin_password: " PX_ADMIN_PASSWORD "\n";
    size_t len = (yaml != NULL ? strlen(yaml) : 0) + 160;
    char *text = malloc(len);
    cr_assert_not_null(text);
    if (yaml != NULL) {
        snprintf(text, len, "listen: %s\n%s%s", listen, admin, yaml);
    } else {
        /* No yaml: the flags name the listener, as a user would. */
        snprintf(text, len, "%s", admin);
        argv[n++] = "--listen";
        argv[n++] = listen;
    }
    px_write_file(p->conf, sizeof(p->conf), "proxy.yaml", text);
    free(text);
    argv[n++] = "--config";
    argv[n++] = p->conf;
    admin_remember(p->port, yaml);
    for (size_t i = 0; args != NULL && args[i] != NULL; i++) {
        cr_assert(n + 1 < PX_MAX_ARGS + 8, "too many proxy args");
        argv[n++] = args[i];
    }
    argv[n] = NULL;
    cr_assert_eq(access(PX_CELLGATE_BIN, X_OK), 0, "%s is not built",
                 PX_CELLGATE_BIN);
    p->pid = spawn(argv, p->log, NULL);

    long long deadline = px_now_ms() + READY_TIMEOUT_MS;
    while (!port_accepts(p->port)) {
        if (!px_child_alive(p) || px_now_ms() >= deadline) {
            dump_log_tail("cellgate", p->log);
            abandon();
            cr_assert_fail("cellgate did not listen on port %d (%s %d)",
                           p->port, p->pid > 0 ? "pid" : "exit code",
                           p->pid > 0 ? (int)p->pid : p->exit_code);
        }
        px_sleep_ms(POLL_STEP_MS);
    }
}

void px_proxy_start_for(struct px_child *p, const struct px_child *redis,
                        const char *yaml_extra)
{
    char yaml[4096];
    int n = snprintf(yaml, sizeof(yaml), "upstream: 127.0.0.1:%d\n%s",
                     redis->port, yaml_extra != NULL ? yaml_extra : "");
    cr_assert(n > 0 && (size_t)n < sizeof(yaml), "yaml too long");
    px_proxy_start(p, yaml, NULL);
}

int px_proxy_stop(struct px_child *p, int sig)
{
    int timed_out = 0;
    int code = child_stop(p, sig, &timed_out);
    if (timed_out) {
        dump_log_tail("cellgate", p->log);
        cr_assert_fail("cellgate did not exit within %d ms of signal %d",
                       STOP_TIMEOUT_MS, sig);
    }
    return code;
}

/* The first sanitizer marker found in a log file, or NULL. */
static const char *find_sanitizer_report(const char *path)
{
    char *text = px_read_file(path, NULL);
    const char *found = NULL;
    if (text == NULL) {
        return "(unreadable log)";
    }
    for (size_t i = 0; i < ARRAY_LEN(sanitizer_markers); i++) {
        if (found == NULL && strstr(text, sanitizer_markers[i]) != NULL) {
            found = sanitizer_markers[i];
        }
    }
    free(text);
    return found;
}

void px_proxy_stop_clean(struct px_child *p, int sig)
{
    cr_assert_gt(p->pid, 0, "cellgate is not running");
    int code = px_proxy_stop(p, sig);
    const char *found = find_sanitizer_report(p->log);
    if (code != 0 || found != NULL) {
        dump_log_tail("cellgate", p->log);
    }
    cr_assert_eq(code, 0, "cellgate exited with %d after signal %d", code, sig);
    cr_assert_null(found, "cellgate stderr contains \"%s\"", found);
}

long px_rss_kb(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    char *text = px_read_file(path, NULL);
    if (text == NULL) {
        return -1;
    }
    long kb = -1;
    const char *line = strstr(text, "VmRSS:");
    if (line != NULL) {
        kb = strtol(line + strlen("VmRSS:"), NULL, 10);
    }
    free(text);
    return kb;
}

/* ---------------- Standard environment ---------------- */

void px_env_init(void)
{
    px_env_prepare();
    px_redis_start(&env.redis, NULL);
    px_proxy_start_for(&env.proxy, &env.redis, NULL);
}

void px_env_fini(void)
{
    int proxy_timed_out = 0, redis_timed_out = 0, code = 0;
    const char *found = NULL;
    int had_proxy = env.proxy.pid > 0;
    if (had_proxy) {
        code = child_stop(&env.proxy, SIGTERM, &proxy_timed_out);
        found = find_sanitizer_report(env.proxy.log);
        if (code != 0 || found != NULL || proxy_timed_out) {
            dump_log_tail("cellgate", env.proxy.log);
        }
    }
    /* Stop redis and clean up before asserting, so a failed check leaves
     * nothing behind. */
    child_stop(&env.redis, SIGTERM, &redis_timed_out);
    remove_tmpdir();
    if (had_proxy) {
        cr_assert(!proxy_timed_out,
                  "cellgate did not exit within %d ms of SIGTERM",
                  STOP_TIMEOUT_MS);
        cr_assert_eq(code, 0, "cellgate exited with %d after SIGTERM", code);
        cr_assert_null(found, "cellgate stderr contains \"%s\"", found);
    }
}

/* ---------------- Processes run to completion ---------------- */

void px_run(struct px_run *res, const char *const *argv)
{
    char out[PX_PATH_MAX], err[PX_PATH_MAX];
    px_path(out, sizeof(out), "run.stdout");
    px_path(err, sizeof(err), "run.stderr");
    unlink(out);
    unlink(err);
    pid_t pid = spawn(argv, out, err);
    int code = -1;
    if (!wait_bounded(pid, RUN_TIMEOUT_MS, &code)) {
        kill(pid, SIGKILL);
        wait_bounded(pid, RUN_TIMEOUT_MS, &code);
        cr_assert_fail("%s did not exit within %d ms", argv[0], RUN_TIMEOUT_MS);
    }
    res->status = code;
    res->out = px_read_file(out, &res->olen);
    res->err = px_read_file(err, &res->elen);
    cr_assert_not_null(res->out);
    cr_assert_not_null(res->err);
}

void px_run_free(struct px_run *res)
{
    free(res->out);
    free(res->err);
    res->out = NULL;
    res->err = NULL;
}

/* ---------------- hiredis clients ---------------- */

redisContext *px_connect(int port)
{
    struct timeval tv = { .tv_sec = PX_CLIENT_TIMEOUT_S, .tv_usec = 0 };
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    cr_assert_not_null(c, "redisConnect: out of memory");
    cr_assert_eq(c->err, 0, "connect to port %d: %s", port, c->errstr);
    cr_assert_eq(redisSetTimeout(c, tv), REDIS_OK);
    return c;
}

redisReply *px_cmd(redisContext *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    cr_assert_not_null(r, "no reply to \"%s\": %s", fmt, c->errstr);
    return r;
}

redisReply *px_next(redisContext *c)
{
    void *r = NULL;
    int rc = redisGetReply(c, &r);
    cr_assert(rc == REDIS_OK && r != NULL, "no reply: %s", c->errstr);
    return r;
}

void px_flush(redisContext *c)
{
    int done = 0;
    while (!done) {
        cr_assert_eq(redisBufferWrite(c, &done), REDIS_OK, "write: %s",
                     c->errstr);
    }
}

void px_hold_redis(redisContext *c, int ms)
{
    redisAppendCommand(c, "EVAL %s 0 %d",
                       "local t = redis.call('TIME') "
                       "local stop = t[1] * 1000000 + t[2] + ARGV[1] * 1000 "
                       "repeat t = redis.call('TIME') "
                       "until t[1] * 1000000 + t[2] >= stop "
                       "return 1",
                       ms);
    px_flush(c);
}

/* Name of a hiredis reply type, for messages. */
static const char *type_name(int type)
{
    switch (type) {
    case REDIS_REPLY_STRING:
        return "bulk";
    case REDIS_REPLY_ARRAY:
        return "array";
    case REDIS_REPLY_INTEGER:
        return "integer";
    case REDIS_REPLY_NIL:
        return "nil";
    case REDIS_REPLY_STATUS:
        return "status";
    case REDIS_REPLY_ERROR:
        return "error";
    default:
        return "?";
    }
}

/* Asserts the reply type, quoting the reply when it differs. */
static void check_type(const redisReply *r, int type)
{
    cr_assert_eq(r->type, type, "expected %s, got %s \"%.*s\"", type_name(type),
                 type_name(r->type),
                 r->str != NULL ? (int)(r->len > 200 ? 200 : r->len) : 0,
                 r->str != NULL ? r->str : "");
}

void px_check_status(redisReply *r, const char *want)
{
    check_type(r, REDIS_REPLY_STATUS);
    cr_assert_str_eq(r->str, want);
    freeReplyObject(r);
}

void px_check_int(redisReply *r, long long want)
{
    check_type(r, REDIS_REPLY_INTEGER);
    cr_assert_eq(r->integer, want, "expected :%lld, got :%lld", want,
                 r->integer);
    freeReplyObject(r);
}

void px_check_bulk(redisReply *r, const char *want, size_t wantlen)
{
    check_type(r, REDIS_REPLY_STRING);
    cr_assert_eq(r->len, wantlen, "bulk length %zu, expected %zu",
                 (size_t)r->len, wantlen);
    cr_assert(memcmp(r->str, want, wantlen) == 0, "bulk bytes differ");
    freeReplyObject(r);
}

void px_check_str(redisReply *r, const char *want)
{
    check_type(r, REDIS_REPLY_STRING);
    cr_assert_str_eq(r->str, want);
    cr_assert_eq(r->len, strlen(want));
    freeReplyObject(r);
}

void px_check_nil(redisReply *r)
{
    check_type(r, REDIS_REPLY_NIL);
    freeReplyObject(r);
}

void px_check_error(redisReply *r, const char *want)
{
    check_type(r, REDIS_REPLY_ERROR);
    cr_assert_str_eq(r->str, want);
    freeReplyObject(r);
}

void px_check_error_prefix(redisReply *r, const char *prefix)
{
    check_type(r, REDIS_REPLY_ERROR);
    cr_assert(strncmp(r->str, prefix, strlen(prefix)) == 0,
              "error \"%s\" does not start with \"%s\"", r->str, prefix);
    freeReplyObject(r);
}

char *px_lines_text(redisReply *r)
{
    size_t total = 1, off = 0;
    char *text;

    cr_assert_eq(r->type, REDIS_REPLY_ARRAY,
                 "not an array of lines: type %d \"%s\"", r->type,
                 r->str != NULL ? r->str : "");
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *e = r->element[i];
        cr_assert_eq(e->type, REDIS_REPLY_STRING, "line %zu: type %d", i,
                     e->type);
        cr_assert_null(memchr(e->str, '\n', e->len), "line %zu holds a \\n", i);
        total += e->len + 1;
    }
    text = malloc(total);
    cr_assert_not_null(text);
    for (size_t i = 0; i < r->elements; i++) {
        memcpy(text + off, r->element[i]->str, r->element[i]->len);
        off += r->element[i]->len;
        text[off++] = '\n';
    }
    text[off] = '\0';
    freeReplyObject(r);
    return text;
}

/* ---------------- Raw sockets ---------------- */

int px_raw_connect(int port, int rcvbuf)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert(fd >= 0, "socket: %s", strerror(errno));
    if (rcvbuf > 0) {
        cr_assert_eq(
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf)), 0);
    }
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = htons((unsigned short)port);
    cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0,
                 "connect to %d: %s", port, strerror(errno));
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

int px_raw_send(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Waits until fd is readable or the deadline passes. 1 when readable. */
static int wait_readable(int fd, long long deadline)
{
    for (;;) {
        long long left = deadline - px_now_ms();
        if (left <= 0) {
            return 0;
        }
        struct pollfd pfd = { .fd = fd, .events = POLLIN | POLLRDHUP };
        int r = poll(&pfd, 1, (int)left);
        if (r > 0) {
            return 1;
        }
        if (r < 0 && errno != EINTR) {
            return 1; /* let recv report the error */
        }
    }
}

size_t px_raw_read(int fd, char *buf, size_t want, int timeout_ms, int *closed)
{
    long long deadline = px_now_ms() + timeout_ms;
    size_t got = 0;
    if (closed != NULL) {
        *closed = 0;
    }
    while (got < want) {
        if (!wait_readable(fd, deadline)) {
            break;
        }
        ssize_t n = recv(fd, buf + got, want - got, 0);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            if (closed != NULL) {
                *closed = 1;
            }
            break;
        }
        got += (size_t)n;
    }
    return got;
}

size_t px_raw_read_to_close(int fd, char *buf, size_t cap, int timeout_ms,
                            int *closed)
{
    long long deadline = px_now_ms() + timeout_ms;
    size_t got = 0;
    char sink[4096];
    *closed = 0;
    for (;;) {
        if (!wait_readable(fd, deadline)) {
            break;
        }
        char *dst = got + 1 < cap ? buf + got : sink;
        size_t room = got + 1 < cap ? cap - 1 - got : sizeof(sink);
        ssize_t n = recv(fd, dst, room, 0);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            *closed = 1;
            break;
        }
        if (dst != sink) {
            got += (size_t)n;
        }
    }
    buf[got] = '\0';
    return got;
}

void px_raw_expect(int fd, const char *want, size_t wantlen)
{
    char *buf = malloc(wantlen + 1);
    cr_assert_not_null(buf);
    int closed = 0;
    size_t got =
        px_raw_read(fd, buf, wantlen, PX_CLIENT_TIMEOUT_S * 1000, &closed);
    buf[got] = '\0';
    int same = got == wantlen && memcmp(buf, want, wantlen) == 0;
    if (!same) {
        fprintf(stderr, "raw read: expected \"%.*s\", got \"%s\"%s\n",
                (int)wantlen, want, buf, closed ? " then close" : "");
    }
    free(buf);
    cr_assert(same, "unexpected raw reply (see stderr)");
}

/* Field `field` ("calls", "failed_calls") of `cmd`'s line in INFO
 * commandstats; 0 when the line is missing. */
static long long px_cmdstat(redisContext *d, const char *cmd, const char *field)
{
    redisReply *r = px_cmd(d, "INFO commandstats");
    char want[96];
    const char *at, *end;
    long long v = 0;

    cr_assert_eq(r->type, REDIS_REPLY_STRING, "INFO commandstats");
    snprintf(want, sizeof(want), "cmdstat_%s:", cmd);
    at = strstr(r->str, want);
    if (at != NULL) {
        /* The field after the name's ':' or after a ',' of its line. */
        const char *line = at + strlen(want) - 1;
        end = strstr(line, "\r\n");
        snprintf(want, sizeof(want), ":%s=", field);
        at = strstr(line, want);
        if (at == NULL || (end != NULL && at > end)) {
            want[0] = ',';
            at = strstr(line, want);
        }
        cr_assert(at != NULL && (end == NULL || at < end),
                  "cmdstat_%s has no %s", cmd, field);
        v = atoll(at + strlen(want));
    }
    freeReplyObject(r);
    return v;
}

long long px_cmdstat_calls(redisContext *d, const char *cmd)
{
    return px_cmdstat(d, cmd, "calls");
}

long long px_cmdstat_failed(redisContext *d, const char *cmd)
{
    return px_cmdstat(d, cmd, "failed_calls");
}

void px_info_poll(redisContext *c, const char *field, long long want, int tries)
{
    long long v = -1;
    int i;

    for (i = 0; i < tries; i++) {
        v = px_info_int(c, field);
        if (v == want) {
            return;
        }
        px_sleep_ms(10);
    }
    cr_assert_fail("INFO %s stayed %lld, want %lld", field, v, want);
}

long long px_info_int(redisContext *c, const char *field)
{
    redisReply *r = px_cmd(c, "INFO");
    char want[128];
    const char *at;
    long long v;

    snprintf(want, sizeof(want), "\r\n%s:", field);
    at = strstr(r->str, want);
    cr_assert_not_null(at, "INFO has no %s", field);
    v = atoll(at + strlen(want));
    freeReplyObject(r);
    return v;
}

int px_log_count(const char *text)
{
    char *log = px_read_file(px_env()->proxy.log, NULL);
    const char *p = log;
    int n = 0;

    while (log != NULL && (p = strstr(p, text)) != NULL) {
        n++;
        p += strlen(text);
    }
    free(log);
    return n;
}
