/* A master, its replica and Redis Sentinels (sentinel_fixture.h). */
#include "tests/integration/sentinel_fixture.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "tests/integration/tls_fixture.h"

#define SENT_WAIT_MS 30000 /* bound of every wait for the sentinels */
#define SENT_POLL_MS 20
#define SENT_RETRIES 2 /* new ports for a process whose port was taken */

static struct px_sentinels sents; /* one per test process */
static char replica_of[16];       /* the master's port, for --replicaof */
static const char *replica_args[] = { "--replicaof", "127.0.0.1", replica_of,
                                      NULL };

struct px_sentinels *px_sentinels(void)
{
    return &sents;
}

/* Starts `argv` with stdout and stderr to `log`, dying with the test
 * process (PR_SET_PDEATHSIG). */
static pid_t sent_spawn(const char *const *argv, const char *log)
{
    pid_t parent = getpid();
    pid_t pid;

    fflush(stdout);
    fflush(stderr);
    pid = fork();
    cr_assert(pid >= 0, "fork: %s", strerror(errno));
    if (pid > 0) {
        return pid;
    }
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) {
        _exit(126);
    }
    int in = open("/dev/null", O_RDONLY);
    int out = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (in < 0 || out < 0) {
        _exit(126);
    }
    dup2(in, STDIN_FILENO);
    dup2(out, STDOUT_FILENO);
    dup2(out, STDERR_FILENO);
    execvp(argv[0], (char *const *)argv);
    _exit(127);
}

/* 1 when the sentinels listen on a TLS port only. */
static int sent_tls_port_only(const struct px_sentinels *s)
{
    return s->tls == PX_SENTINEL_TLS_ALL || s->tls == PX_SENTINEL_TLS_SENTINELS;
}

/* 1 when `port` (a sentinel's or a data node's) speaks TLS. */
static int sent_port_tls(const struct px_sentinels *s, int port)
{
    int i;

    for (i = 0; i < s->n; i++) {
        if (s->sent[i].port == port) {
            return sent_tls_port_only(s);
        }
    }
    return s->tls == PX_SENTINEL_TLS_ALL || s->tls == PX_SENTINEL_TLS_DATA;
}

/* One command on a new connection to `port` (logged in with s->password,
 * TLS when the port speaks it): its reply, or NULL when it does not answer
 * (yet). */
static redisReply *sent_vquery(struct px_sentinels *s, int port,
                               const char *fmt, va_list ap)
{
    struct timeval tv = { .tv_sec = 1, .tv_usec = 0 };
    redisContext *c;
    redisReply *r = NULL;

    if (sent_port_tls(s, port)) {
#if defined(PX_TLS) && PX_TLS
        return px_tls_try_vcmd(port, fmt, ap);
#else
        cr_assert_fail("TLS sentinels in a build without TLS");
#endif
    }
    c = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (c == NULL || c->err != 0) {
        if (c != NULL) {
            redisFree(c);
        }
        return NULL;
    }
    redisSetTimeout(c, tv);
    if (s->password != NULL) {
        r = redisCommand(c, "AUTH %s", s->password);
        if (r == NULL || r->type != REDIS_REPLY_STATUS) {
            if (r != NULL) {
                freeReplyObject(r);
            }
            redisFree(c);
            return NULL;
        }
        freeReplyObject(r);
    }
    r = redisvCommand(c, fmt, ap);
    redisFree(c);
    return r;
}

static redisReply *sent_query(struct px_sentinels *s, int port, const char *fmt,
                              ...)
{
    redisReply *r;
    va_list ap;

    va_start(ap, fmt);
    r = sent_vquery(s, port, fmt, ap);
    va_end(ap);
    return r;
}

redisReply *px_sentinel_cmd(struct px_sentinels *s, int port, const char *fmt,
                            ...)
{
    redisReply *r;
    va_list ap;

    va_start(ap, fmt);
    r = sent_vquery(s, port, fmt, ap);
    va_end(ap);
    cr_assert_not_null(r, "no reply from port %d", port);
    return r;
}

/* The port sentinel `i` names for the master, 0 when it names none (or
 * does not answer). */
static int sent_named_port(struct px_sentinels *s, int i)
{
    redisReply *r =
        sent_query(s, s->sent[i].port, "SENTINEL GET-MASTER-ADDR-BY-NAME %s",
                   PX_SENTINEL_MASTER);
    int port = 0;

    if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2) {
        port = atoi(r->element[1]->str);
    }
    if (r != NULL) {
        freeReplyObject(r);
    }
    return port;
}

/* The value of `field` in a flat field/value array reply, or NULL. */
static const char *sent_field(const redisReply *r, const char *field)
{
    size_t k;

    for (k = 0;
         r != NULL && r->type == REDIS_REPLY_ARRAY && k + 1 < r->elements;
         k += 2) {
        if (strcmp(r->element[k]->str, field) == 0) {
            return r->element[k + 1]->str;
        }
    }
    return NULL;
}

/* True when sentinel `i` names the master, sees the replica up and, with
 * `peers`, knows the other sentinels. */
static int sent_ready(struct px_sentinels *s, int i, int peers)
{
    redisReply *r;
    int ok;

    r = sent_query(s, s->sent[i].port, "SENTINEL REPLICAS %s",
                   PX_SENTINEL_MASTER);
    ok = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 1 &&
         sent_field(r->element[0], "flags") != NULL &&
         strcmp(sent_field(r->element[0], "flags"), "slave") == 0 &&
         sent_field(r->element[0], "master-link-status") != NULL &&
         strcmp(sent_field(r->element[0], "master-link-status"), "ok") == 0;
    if (r != NULL) {
        freeReplyObject(r);
    }
    if (ok && peers) {
        const char *v;
        r = sent_query(s, s->sent[i].port, "SENTINEL MASTER %s",
                       PX_SENTINEL_MASTER);
        v = sent_field(r, "num-other-sentinels");
        ok = v != NULL && atoi(v) == s->n - 1;
        if (r != NULL) {
            freeReplyObject(r);
        }
    }
    return ok;
}

/* The certificates (TLS modes only). */
static const struct px_tls_certs *sent_certs(void)
{
#if defined(PX_TLS) && PX_TLS
    return px_tls_certs();
#else
    cr_assert_fail("TLS sentinels in a build without TLS");
    return NULL;
#endif
}

static void sent_start_one(struct px_sentinels *s, int i)
{
    struct px_child *c = &s->sent[i];
    char text[1024], name[64], conf[PX_PATH_MAX];
    int n;

    c->port = px_free_port();
    n = snprintf(text, sizeof(text),
                 "port %d\nbind 127.0.0.1\ndir %s\n"
                 "sentinel monitor %s 127.0.0.1 %d 2\n"
                 "sentinel down-after-milliseconds %s 1000\n"
                 "sentinel failover-timeout %s 5000\n",
                 sent_tls_port_only(s) ? 0 : c->port, px_env()->dir,
                 PX_SENTINEL_MASTER, px_env()->redis.port, PX_SENTINEL_MASTER,
                 PX_SENTINEL_MASTER);
    if (s->tls != PX_SENTINEL_PLAIN) {
        const struct px_tls_certs *k = sent_certs();
        /* tls-replication: TLS to the nodes and to the other sentinels,
         * which learn the TLS port from its hellos. */
        n += snprintf(text + n, sizeof(text) - (size_t)n,
                      "tls-port %d\ntls-cert-file %s\ntls-key-file %s\n"
                      "tls-ca-cert-file %s\ntls-auth-clients no\n"
                      "tls-replication %s\n",
                      sent_tls_port_only(s) ? c->port : px_free_port(),
                      k->server, k->server_key, k->ca,
                      s->tls == PX_SENTINEL_TLS_SENTINELS ? "no" : "yes");
    }
    if (s->password != NULL) {
        /* Its peers log in with the same password when they ask it
         * (is-master-down-by-addr). */
        snprintf(text + n, sizeof(text) - (size_t)n,
                 "requirepass %s\nsentinel sentinel-pass %s\n", s->password,
                 s->password);
    }
    snprintf(name, sizeof(name), "sentinel-%d.conf", c->port);
    px_write_file(conf, sizeof(conf), name, text);
    snprintf(c->conf, sizeof(c->conf), "%s", conf);
    snprintf(name, sizeof(name), "sentinel-%d.log", c->port);
    px_path(c->log, sizeof(c->log), name);
    {
        const char *argv[] = { "redis-server", c->conf, "--sentinel", NULL };
        c->pid = sent_spawn(argv, c->log);
    }
}

/* 1 when `c` exited because its port was taken meanwhile (another
 * run's), and `retries` allows another port. */
static int sent_port_taken(struct px_child *c, int retries)
{
    return retries > 0 && px_file_has(c->log, "already in use");
}

/* A data node on a TLS port only (a replica of `master` when not 0);
 * returns once it answers PING over TLS. A port taken before it bound is
 * replaced, `retries` times at most. */
static void sent_node_start_tls(struct px_sentinels *s, struct px_child *c,
                                int master, int retries)
{
    const struct px_tls_certs *k = sent_certs();
    char port[16], of[16], name[64];
    const char *argv[40];
    long long deadline;
    size_t n = 0;
    redisReply *r;

    c->port = px_free_port();
    snprintf(port, sizeof(port), "%d", c->port);
    snprintf(of, sizeof(of), "%d", master);
    snprintf(name, sizeof(name), "redis-%d.log", c->port);
    px_path(c->log, sizeof(c->log), name);
    {
        const char *fixed[] = {
            "redis-server",
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            px_env()->dir,
            "--port",
            "0",
            "--tls-port",
            port,
            "--tls-cert-file",
            k->server,
            "--tls-key-file",
            k->server_key,
            "--tls-ca-cert-file",
            k->ca,
            "--tls-auth-clients",
            "no",
            "--tls-replication",
            "yes",
            NULL,
        };
        for (; fixed[n] != NULL; n++) {
            argv[n] = fixed[n];
        }
    }
    if (master != 0) {
        argv[n++] = "--replicaof";
        argv[n++] = "127.0.0.1";
        argv[n++] = of;
    }
    argv[n] = NULL;
    c->pid = sent_spawn(argv, c->log);
    deadline = px_now_ms() + SENT_WAIT_MS;
    for (;;) {
        r = sent_query(s, c->port, "PING");
        if (r != NULL && r->type == REDIS_REPLY_STATUS) {
            freeReplyObject(r);
            return;
        }
        if (r != NULL) {
            freeReplyObject(r);
        }
        if (!px_child_alive(c) && sent_port_taken(c, retries)) {
            sent_node_start_tls(s, c, master, retries - 1);
            return;
        }
        cr_assert(px_child_alive(c),
                  "redis-server on TLS port %d exited (log %s)", c->port,
                  c->log);
        cr_assert(px_now_ms() < deadline,
                  "redis-server on TLS port %d not ready (log %s)", c->port,
                  c->log);
        px_sleep_ms(SENT_POLL_MS);
    }
}

static void sent_start(int n, const char *password, int peers,
                       enum px_sentinel_tls tls)
{
    struct px_sentinels *s = &sents;
    long long deadline;
    int i;

    cr_assert(n >= 1 && n <= PX_SENTINEL_MAX);
    px_env_prepare();
    s->password = password;
    s->tls = tls;
    cr_assert(tls == PX_SENTINEL_PLAIN || password == NULL,
              "no password with TLS sentinels (not needed yet)");
    cr_assert(tls != PX_SENTINEL_TLS_SENTINELS || n == 1,
              "plaintext data nodes: one TLS sentinel at most");
    if (tls == PX_SENTINEL_TLS_ALL || tls == PX_SENTINEL_TLS_DATA) {
        sent_node_start_tls(s, &px_env()->redis, 0, SENT_RETRIES);
        sent_node_start_tls(s, &s->replica, px_env()->redis.port, SENT_RETRIES);
    } else {
        px_redis_start(&px_env()->redis, NULL);
        snprintf(replica_of, sizeof(replica_of), "%d", px_env()->redis.port);
        px_redis_start(&s->replica, replica_args);
    }
    for (i = 0; i < n; i++) {
        sent_start_one(s, i);
        s->n = i + 1;
    }
    deadline = px_now_ms() + SENT_WAIT_MS;
    for (i = 0; i < n; i++) {
        int retries = SENT_RETRIES;
        while (!sent_ready(s, i, peers)) {
            if (!px_child_alive(&s->sent[i]) &&
                sent_port_taken(&s->sent[i], retries--)) {
                sent_start_one(s, i); /* on new ports */
                continue;
            }
            cr_assert(px_child_alive(&s->sent[i]),
                      "sentinel on port %d exited (log %s)", s->sent[i].port,
                      s->sent[i].log);
            cr_assert(px_now_ms() < deadline,
                      "sentinel on port %d not ready (log %s)", s->sent[i].port,
                      s->sent[i].log);
            px_sleep_ms(SENT_POLL_MS);
        }
    }
}

void px_sentinel_start(int n, const char *password, int peers)
{
    sent_start(n, password, peers, PX_SENTINEL_PLAIN);
}

void px_sentinel_start_tls(int n, int peers, enum px_sentinel_tls tls)
{
    sent_start(n, NULL, peers, tls);
}

void px_sentinel_init(void)
{
    px_sentinel_start(3, NULL, 1);
}

void px_sentinel_fini(void)
{
    struct px_sentinels *s = &sents;
    int i;

    for (i = 0; i < s->n; i++) {
        px_redis_kill(&s->sent[i], SIGKILL);
    }
    px_redis_kill(&s->replica, SIGKILL);
    px_env_fini();
}

const char *px_sentinel_yaml(struct px_sentinels *s, int dead_port,
                             const char *extra)
{
    size_t n = 0;
    int i;

    n += (size_t)snprintf(s->yaml + n, sizeof(s->yaml) - n, "sentinel: [");
    if (dead_port != 0) {
        n += (size_t)snprintf(s->yaml + n, sizeof(s->yaml) - n,
                              "127.0.0.1:%d, ", dead_port);
    }
    for (i = 0; i < s->n; i++) {
        n +=
            (size_t)snprintf(s->yaml + n, sizeof(s->yaml) - n, "%s127.0.0.1:%d",
                             i > 0 ? ", " : "", s->sent[i].port);
    }
    snprintf(s->yaml + n, sizeof(s->yaml) - n, "]\nsentinel_master: %s\n%s",
             PX_SENTINEL_MASTER, extra != NULL ? extra : "");
    return s->yaml;
}

int px_sentinel_master_port(struct px_sentinels *s, int i)
{
    int port = sent_named_port(s, i);

    cr_assert(port > 0, "sentinel on port %d names no master", s->sent[i].port);
    return port;
}

/* True when the Redis on `port` says ROLE master. */
static int sent_is_master(struct px_sentinels *s, int port)
{
    redisReply *r = sent_query(s, port, "ROLE");
    int ok = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
             strcmp(r->element[0]->str, "master") == 0;

    if (r != NULL) {
        freeReplyObject(r);
    }
    return ok;
}

int px_sentinel_wait_switch(struct px_sentinels *s, int old_port)
{
    long long deadline = px_now_ms() + SENT_WAIT_MS;

    for (;;) {
        int port = sent_named_port(s, 0), i, agree = port != 0;
        for (i = 1; i < s->n && agree; i++) {
            agree = sent_named_port(s, i) == port;
        }
        if (agree && port != old_port && sent_is_master(s, port)) {
            return port;
        }
        cr_assert(px_now_ms() < deadline,
                  "the sentinels did not switch from port %d", old_port);
        px_sleep_ms(50);
    }
}
