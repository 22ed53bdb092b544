/* Integration test fixture: real redis-server and cellgate processes.
 *
 * Every test runs in its own criterion process. The fixture gives it a
 * private temp directory, starts redis-server and the cellgate binary as
 * children on loopback ports picked at run time, and stops them in the
 * test's .fini (which criterion runs even after a failed cr_assert). The
 * children get PR_SET_PDEATHSIG, so they die with the test process if it
 * crashes or times out. Stopping the proxy always checks a clean shutdown:
 * exit status 0 and no sanitizer report in its stderr.
 *
 * Set PX_KEEP_TMP=1 in the environment to keep the temp directories (logs,
 * generated proxy.yaml) for a post-mortem. */
#ifndef PX_TESTS_INTEGRATION_FIXTURE_H
#define PX_TESTS_INTEGRATION_FIXTURE_H

#include <stddef.h>
#include <sys/types.h>

#include <hiredis/hiredis.h>

#define PX_PATH_MAX 512 /* enough for "$TMPDIR/cellgate-it-XXXXXX/file" */
#define PX_MAX_ARGS 32  /* extra argv entries kept for a restart */

/* Seconds of read timeout for every test client: a hang fails the test. */
#define PX_CLIENT_TIMEOUT_S 5

/* A child process serving on a loopback port (redis-server or cellgate). */
struct px_child {
    pid_t pid;                     /* 0 when not running */
    int exit_code;                 /* last exit code (128 + signal) */
    int port;                      /* port it listens on */
    char log[PX_PATH_MAX];         /* its stdout and stderr */
    char conf[PX_PATH_MAX];        /* generated config file, "" if none */
    const char *args[PX_MAX_ARGS]; /* borrowed extra argv, NULL-ended */
};

/* The standard per-test environment: one redis and one proxy in front. */
struct px_env {
    char dir[PX_PATH_MAX]; /* private temp directory */
    struct px_child redis; /* the upstream redis-server */
    struct px_child proxy; /* cellgate under test */
};

/* ---------------- Environment ---------------- */

/* The process-wide environment of the running test (zeroed at start). */
struct px_env *px_env(void);

/* Creates the temp dir and ignores SIGPIPE in the test process. Called by
 * every other start function, so calling it directly is optional. */
void px_env_prepare(void);

/* .init of most tests: a redis-server and a cellgate forwarding to it. */
void px_env_init(void);

/* .fini of every test: stops the proxy (asserting a clean shutdown), then
 * redis, then removes the temp dir. Safe after a partial init. */
void px_env_fini(void);

/* Writes "<tempdir>/<name>" to out. */
void px_path(char *out, size_t outlen, const char *name);

/* Writes text to "<tempdir>/<name>" and returns the path in out. */
void px_write_file(char *out, size_t outlen, const char *name,
                   const char *text);

/* A loopback port that was free a moment ago. */
int px_free_port(void);

/* ---------------- redis-server ---------------- */

/* Starts redis-server on r->port (a free port when 0) with the NULL-ended
 * extra arguments (borrowed, kept for px_redis_restart; may be NULL), and
 * waits until it answers PING. Asserts on failure. */
void px_redis_start(struct px_child *r, const char *const *extra);

/* Kills redis with `sig` (SIGTERM or SIGKILL) and reaps it. */
void px_redis_kill(struct px_child *r, int sig);

/* Starts redis again on the same port with the same arguments. */
void px_redis_restart(struct px_child *r);

/* A direct connection to redis (password may be NULL). Asserts. */
redisContext *px_redis_connect(const struct px_child *r, const char *password);

/* ---------------- cellgate ---------------- */

/* Starts cellgate. When yaml is not NULL, it is written to proxy.yaml after
 * a "listen:" line for p->port (a free port when 0) and passed with
 * --config; when yaml is NULL, "--listen 127.0.0.1:<port>" is passed
 * instead. args: NULL-ended extra flags (may be NULL). Waits until the port
 * accepts connections. Asserts on failure. */
void px_proxy_start(struct px_child *p, const char *yaml,
                    const char *const *args);

/* Starts cellgate with "upstream:" pointing at redis, plus yaml_extra
 * (further proxy.yaml lines, may be NULL). */
void px_proxy_start_for(struct px_child *p, const struct px_child *redis,
                        const char *yaml_extra);

/* Sends `sig` to the proxy, waits for it (bounded, then SIGKILL) and
 * returns its exit code, or 128 + signal number when a signal ended it. */
int px_proxy_stop(struct px_child *p, int sig);

/* px_proxy_stop(sig) (SIGTERM or SIGINT), then asserts exit code 0 and
 * that its stderr holds no AddressSanitizer, LeakSanitizer or UBSan
 * report. */
void px_proxy_stop_clean(struct px_child *p, int sig);

/* Resident set size of a process in KiB (VmRSS), or -1. */
long px_rss_kb(pid_t pid);

/* True while the child has not exited (reaps it when it has). */
int px_child_alive(struct px_child *c);

/* ---------------- Processes run to completion ---------------- */

/* Output of a short-lived command (cellgate --help and the like). */
struct px_run {
    int status;  /* exit code, or 128 + signal */
    char *out;   /* owned, NUL-terminated stdout */
    char *err;   /* owned, NUL-terminated stderr */
    size_t olen; /* bytes in out */
    size_t elen; /* bytes in err */
};

/* Runs argv[0] (a path) with argv, waits at most 10 s. Asserts it ended. */
void px_run(struct px_run *res, const char *const *argv);

/* Frees the buffers of a px_run. */
void px_run_free(struct px_run *res);

/* ---------------- hiredis clients ---------------- */

/* Connects to a loopback port with a PX_CLIENT_TIMEOUT_S timeout. Asserts. */
redisContext *px_connect(int port);

/* redisCommand that asserts a reply arrived (no I/O error, no timeout). */
redisReply *px_cmd(redisContext *c, const char *fmt, ...);

/* The admin password px_proxy_start gives a proxy whose yaml names none. */
#define PX_ADMIN_PASSWORD "px-admin-secret"

/* A proxy.yaml line that keeps px_proxy_start from adding one: the
 * default install, with no admin at all. */
#define PX_NO_ADMIN "# admin_password: none (the default install)\n"

/* px_cmd on a new connection to the proxy `c` is connected to, after
 * `AUTH admin` with that proxy's admin password (its yaml's, else
 * PX_ADMIN_PASSWORD): for LIMITER OVERRIDE, RESET and RELOAD, which need
 * an admin. The connection is closed before it returns. */
redisReply *px_cmd_admin(redisContext *c, const char *fmt, ...);

/* Reads the next reply of a pipeline; asserts it arrived. */
redisReply *px_next(redisContext *c);

/* Checkers: each asserts the reply has the exact type and value, then
 * frees it. */
void px_check_status(redisReply *r, const char *want);
void px_check_int(redisReply *r, long long want);
void px_check_bulk(redisReply *r, const char *want, size_t wantlen);
void px_check_str(redisReply *r, const char *want); /* bulk, strlen(want) */
void px_check_nil(redisReply *r);
void px_check_error(redisReply *r, const char *want); /* whole text */
void px_check_error_prefix(redisReply *r, const char *prefix);
/* An array of bulk strings without '\n' (LIMITER RULES' answer), as the
 * text of its lines, each ending in '\n'; frees r, the caller frees the
 * text. */
char *px_lines_text(redisReply *r);

/* Writes every pending hiredis output byte (after redisAppendCommand). */
void px_flush(redisContext *c);

/* ---------------- Raw sockets ---------------- */

/* A blocking TCP connection to a loopback port. rcvbuf > 0 sets
 * SO_RCVBUF before connecting. Asserts. */
int px_raw_connect(int port, int rcvbuf);

/* Sends all bytes (MSG_NOSIGNAL). Returns 0, or -1 when the peer is gone. */
int px_raw_send(int fd, const void *buf, size_t len);

/* Reads until `want` bytes arrived, the peer closed, or timeout_ms passed.
 * Returns the count read; *closed (may be NULL) is 1 on EOF/reset. */
size_t px_raw_read(int fd, char *buf, size_t want, int timeout_ms, int *closed);

/* Reads until the peer closes or timeout_ms passes; keeps the first cap-1
 * bytes, NUL-terminated. Returns the number of bytes kept. */
size_t px_raw_read_to_close(int fd, char *buf, size_t cap, int timeout_ms,
                            int *closed);

/* Asserts that the next bytes read are exactly `want`. */
void px_raw_expect(int fd, const char *want, size_t wantlen);

/* ---------------- Files ---------------- */

/* Reads a whole file into a fresh NUL-terminated buffer (the caller frees
 * it; *lenp, when not NULL, gets its length), or NULL when it cannot be
 * read. */
char *px_read_file(const char *path, size_t *lenp);

/* Occurrences of `text` in the log of the proxy of px_env() (0 when it has
 * no log yet). */
int px_log_count(const char *text);

/* Asserts that text (an error message or a log) holds a location
 * "<path>:<line>:<column>:", with any line when line is 0. */
void px_check_location(const char *text, const char *path, int line);

/* ---------------- Misc ---------------- */

/* Sleeps for ms milliseconds. */
void px_sleep_ms(int ms);

/* Sends, on `c`, a script that holds its Redis for `ms` milliseconds and
 * returns 1 (read it with px_next), without waiting for it. Meanwhile
 * Redis reads nothing else; afterwards it reads the connections that got
 * bytes in the order they got their first ones. */
void px_hold_redis(redisContext *c, int ms);

/* Monotonic milliseconds. */
long long px_now_ms(void);

/* The integer field `field` of INFO on `c` (a proxy or a Redis); asserts
 * it is there. */
long long px_info_int(redisContext *c, const char *field);

/* Polls INFO `field` on `c`, 10 ms apart and `tries` times at most, until
 * it equals `want`; asserts it did. */
void px_info_poll(redisContext *c, const char *field, long long want,
                  int tries);

/* Calls of `cmd` (lower case; "function|load" for a subcommand) the Redis
 * node `d` has run since it started (or CONFIG RESETSTAT), from INFO
 * commandstats; 0 when none. */
long long px_cmdstat_calls(redisContext *d, const char *cmd);

/* Calls of `cmd` on `d` that answered an error while running (INFO
 * commandstats' failed_calls); 0 when none. */
long long px_cmdstat_failed(redisContext *d, const char *cmd);

#endif /* PX_TESTS_INTEGRATION_FIXTURE_H */
