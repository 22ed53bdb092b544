/* Passwords from files, rotated with SIGHUP: upstream_password_file,
 * limiter_password_file, admin_password_file and requirepass_file against
 * a real redis-server; bad files at start (--check-config) and at SIGHUP.
 * No secret may reach the proxy's log. */
#include "tests/integration/fixture.h"
#include "tests/support/px_test.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

PX_TEST_SUITE(it_secrets);

/* Distinct enough that finding one in the log is never a coincidence. */
#define UP_OLD   "up-old-7f3a91"
#define UP_NEW   "up-new-c0e5d2"
#define LIM_OLD  "lim-old-41b7e8"
#define LIM_NEW  "lim-new-9d20af"
#define ADM_OLD  "adm-old-5e8c13"
#define ADM_NEW  "adm-new-b6f074"
#define REQ_OLD  "req-old-2a9d64"
#define REQ_NEW  "req-new-e13f58"
#define BAD_SEEN "bad-3c7e1a"

/* Bound of every wait for the proxy to act on a change (a reconnect backs
 * off up to 2 s); polled, never slept through. */
#define WAIT_MS 8000
#define STEP_MS 20

/* Writes `secret` and a newline as "<tempdir>/<name>", path to `out`. */
static void write_secret(char *out, size_t outlen, const char *name,
                         const char *secret)
{
    char text[256];

    snprintf(text, sizeof(text), "%s\n", secret);
    px_write_file(out, outlen, name, text);
}

/* Occurrences of `needle` in the proxy's log. */
static int log_count(const char *needle)
{
    char *log = px_read_file(px_env()->proxy.log, NULL);
    const char *p;
    int n = 0;

    cr_assert_not_null(log);
    for (p = log; (p = strstr(p, needle)) != NULL; p += strlen(needle)) {
        n++;
    }
    free(log);
    return n;
}

/* Waits until the log holds `needle` at least `want` times. */
static void wait_log(const char *needle, int want)
{
    long long deadline = px_now_ms() + WAIT_MS;

    while (log_count(needle) < want) {
        cr_assert_lt(px_now_ms(), deadline, "log never said '%s' %d times",
                     needle, want);
        px_sleep_ms(STEP_MS);
    }
}

/* The AUTHs Redis refused (`d`, a direct connection): its WRONGPASS
 * replies, INFO errorstats. */
static long long redis_denied(redisContext *d)
{
    redisReply *r = px_cmd(d, "INFO errorstats");
    const char *at = strstr(r->str, "errorstat_WRONGPASS:count=");
    long long v =
        at != NULL ? atoll(at + strlen("errorstat_WRONGPASS:count=")) : 0;

    freeReplyObject(r);
    return v;
}

/* Waits until Redis has refused at least `want` more AUTHs than `base`:
 * the proxy's attempts, counted where they land (the proxy logs a run of
 * failures once, rate-limited). */
static void wait_redis_denied(redisContext *d, long long base, int want)
{
    long long deadline = px_now_ms() + WAIT_MS;

    while (redis_denied(d) - base < want) {
        cr_assert_lt(px_now_ms(), deadline,
                     "Redis never refused %d AUTHs of the proxy", want);
        px_sleep_ms(STEP_MS);
    }
}

/* SIGHUP, then waits for the log line of `key` (`outcome`: "reloaded" or
 * "not reloaded"); `n` is how many such lines the log has by then. */
static void sighup_and_wait(const char *key, const char *outcome, int n)
{
    char line[128];

    snprintf(line, sizeof(line), "SIGHUP: %s %s", key, outcome);
    cr_assert_eq(kill(px_env()->proxy.pid, SIGHUP), 0);
    wait_log(line, n);
    cr_assert_eq(log_count(line), n, "more than one line: '%s'", line);
}

/* Fails when the proxy's log holds any of the NULL-ended secrets. */
static void assert_log_has_no_secret(const char *const *secrets)
{
    char *log = px_read_file(px_env()->proxy.log, NULL);

    cr_assert_not_null(log);
    for (; *secrets != NULL; secrets++) {
        cr_assert_null(strstr(log, *secrets), "the log shows %s:\n%s", *secrets,
                       log);
    }
    free(log);
}

/* Closes every connection Redis has that matches `filter value`, but
 * `d`'s own. */
static void kill_clients(redisContext *d, const char *filter, const char *value)
{
    redisReply *r = px_cmd(d, "CLIENT KILL %s %s SKIPME yes", filter, value);

    cr_assert_eq(r->type, REDIS_REPLY_INTEGER, "CLIENT KILL: %s",
                 r->type == REDIS_REPLY_ERROR ? r->str : "?");
    cr_assert_geq(r->integer, 1, "no connection of the proxy was killed");
    freeReplyObject(r);
}

/* The bystander: a client that keeps one connection to the proxy through
 * the whole rotation and INCRs a counter at each step. Each reply is the
 * next count, or (only while Redis refuses the proxy's password, `may_fail`)
 * the proxy's "upstream unavailable" error; never anything else. */
struct bystander {
    redisContext *c;
    long long count; /* INCRs Redis ran */
};

static void bystander_step(struct bystander *b, int may_fail)
{
    redisReply *r = px_cmd(b->c, "INCR bystander");

    if (r->type == REDIS_REPLY_INTEGER) {
        cr_assert_eq(r->integer, b->count + 1, "bystander: %lld after %lld",
                     r->integer, b->count);
        b->count++;
    } else {
        cr_assert(may_fail, "bystander got type %d: %s", r->type,
                  r->type == REDIS_REPLY_ERROR ? r->str : "");
        cr_assert_eq(r->type, REDIS_REPLY_ERROR);
        cr_assert(strncmp(r->str, "ERR upstream ", 13) == 0, "%s", r->str);
    }
    freeReplyObject(r);
}

/* Steps the bystander until its INCR runs: its connection to Redis (each
 * client keeps one of the pool's) may still be backing off a failed
 * login when another's is back. */
static void bystander_until_ok(struct bystander *b)
{
    long long deadline = px_now_ms() + WAIT_MS, before = b->count;

    for (;;) {
        bystander_step(b, 1);
        if (b->count > before) {
            return;
        }
        cr_assert_lt(px_now_ms(), deadline, "the bystander never recovered");
        px_sleep_ms(STEP_MS);
    }
}

/* Every INCR the bystander saw answered ran once, and no other did. */
static void bystander_check(const struct bystander *b, redisContext *d)
{
    redisReply *r = px_cmd(d, "GET bystander");

    cr_assert_eq(r->type, REDIS_REPLY_STRING);
    cr_assert_eq(atoll(r->str), b->count);
    freeReplyObject(r);
}

/* Sends `cmd` on `c` until its reply is an error holding `want` (NULL:
 * until it is not an error), the bystander (may be NULL) stepping
 * alongside, allowed to fail when `may_fail`. */
static void poll_until(redisContext *c, const char *cmd, const char *want,
                       struct bystander *b, int may_fail)
{
    long long deadline = px_now_ms() + WAIT_MS;
    char last[512] = "";

    for (;;) {
        redisReply *r = px_cmd(c, cmd);
        int err = r->type == REDIS_REPLY_ERROR;
        int done = want != NULL ? err && strstr(r->str, want) != NULL : !err;

        snprintf(last, sizeof(last), "%s", err ? r->str : "(not an error)");
        freeReplyObject(r);
        if (b != NULL) {
            bystander_step(b, may_fail);
        }
        if (done) {
            return;
        }
        cr_assert_lt(px_now_ms(), deadline, "%s: never %s; last: %s", cmd,
                     want != NULL ? want : "answered", last);
        px_sleep_ms(STEP_MS);
    }
}

/* ---------------- upstream_password_file ---------------- */

Test(it_secrets, upstream_password_rotates_on_sighup, .fini = px_env_fini,
     .timeout = 60)
{
    static const char *const redis_args[] = { "--requirepass", UP_OLD, NULL };
    static const char *const secrets[] = { UP_OLD, UP_NEW, NULL };
    struct bystander b = { 0 };
    char pw[PX_PATH_MAX], yaml[PX_PATH_MAX + 64];
    redisContext *c, *d;
    long long denied;

    px_env_prepare();
    px_redis_start(&px_env()->redis, redis_args);
    write_secret(pw, sizeof(pw), "upstream.pw", UP_OLD);
    snprintf(yaml, sizeof(yaml), "upstream_password_file: %s\n", pw);
    px_proxy_start_for(&px_env()->proxy, &px_env()->redis, yaml);
    c = px_connect(px_env()->proxy.port);
    b.c = px_connect(px_env()->proxy.port);
    px_check_status(px_cmd(c, "SET k v"), "OK");
    bystander_step(&b, 0);

    /* Redis takes the new password; the file says it too, but until
     * SIGHUP the proxy still logs in with the old one, which Redis now
     * refuses. */
    d = px_redis_connect(&px_env()->redis, UP_OLD);
    px_check_status(px_cmd(d, "CONFIG SET requirepass %s", UP_NEW), "OK");
    write_secret(pw, sizeof(pw), "upstream.pw", UP_NEW);
    bystander_step(&b, 0); /* logged-in connections keep working */
    denied = redis_denied(d);
    kill_clients(d, "TYPE", "normal");
    poll_until(c, "GET k", "AUTH failed (WRONGPASS", &b, 1);
    /* Retries (50, 100, 200 ms apart) log in with the old one too: the
     * file is read on SIGHUP only. */
    wait_redis_denied(d, denied, 6);
    poll_until(c, "GET k", "AUTH failed (WRONGPASS", &b, 1);

    sighup_and_wait("upstream_password_file", "reloaded", 1);
    wait_log("upstream_password_file reloaded: new logins use the new "
             "password",
             1);
    poll_until(c, "GET k", NULL, &b, 1);
    px_check_str(px_cmd(c, "GET k"), "v");
    px_check_status(px_cmd(c, "SET k v2"), "OK");
    bystander_until_ok(&b);
    bystander_step(&b, 0);

    bystander_check(&b, d);
    assert_log_has_no_secret(secrets);
    redisFree(d);
    redisFree(b.c);
    redisFree(c);
}

/* ---------------- limiter_password_file ---------------- */

Test(it_secrets, limiter_password_rotates_on_sighup, .fini = px_env_fini,
     .timeout = 60)
{
    static const char *const secrets[] = { LIM_OLD, LIM_NEW, NULL };
    static const char throttle[] = "CL.THROTTLE rot 1000 1000 60";
    struct bystander b = { 0 };
    char pw[PX_PATH_MAX], yaml[PX_PATH_MAX + 64];
    redisContext *c, *d;
    long long denied;
    redisReply *r;

    px_env_prepare();
    px_redis_start(&px_env()->redis, NULL);
    d = px_redis_connect(&px_env()->redis, NULL);
    px_check_status(px_cmd(d, "ACL SETUSER lim on >%s ~* +@all", LIM_OLD),
                    "OK");
    write_secret(pw, sizeof(pw), "limiter.pw", LIM_OLD);
    snprintf(yaml, sizeof(yaml),
             "limiter_user: lim\nlimiter_password_file: %s\n", pw);
    px_proxy_start_for(&px_env()->proxy, &px_env()->redis, yaml);
    c = px_connect(px_env()->proxy.port);
    b.c = px_connect(px_env()->proxy.port);
    r = px_cmd(c, throttle);
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s",
                 r->type == REDIS_REPLY_ERROR ? r->str : "");
    cr_assert_eq(r->element[0]->integer, 0);
    freeReplyObject(r);
    bystander_step(&b, 0);

    /* The limiter's user gets a new password; its connections, killed,
     * log in with the old one again until SIGHUP. Client traffic (the
     * default user) never notices. */
    px_check_status(px_cmd(d, "ACL SETUSER lim resetpass >%s", LIM_NEW), "OK");
    write_secret(pw, sizeof(pw), "limiter.pw", LIM_NEW);
    denied = redis_denied(d);
    kill_clients(d, "USER", "lim");
    poll_until(c, throttle, "", &b, 0);
    wait_redis_denied(d, denied, 3);
    poll_until(c, throttle, "", &b, 0);

    sighup_and_wait("limiter_password_file", "reloaded", 1);
    poll_until(c, throttle, NULL, &b, 0);
    r = px_cmd(c, throttle);
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    cr_assert_eq(r->element[0]->integer, 0);
    freeReplyObject(r);
    bystander_step(&b, 0);
    bystander_check(&b, d);
    assert_log_has_no_secret(secrets);
    redisFree(d);
    redisFree(b.c);
    redisFree(c);
}

/* ---------------- admin_password_file, requirepass_file ---------------- */

/* Logs in as `user` with `pass` on a new connection: the reply checked
 * ("OK", or an error starting with `want`), the connection returned. */
static redisContext *login(const char *user, const char *pass, const char *want)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    redisReply *r = px_cmd(c, "AUTH %s %s", user, pass);

    if (strcmp(want, "OK") == 0) {
        px_check_status(r, "OK");
    } else {
        px_check_error_prefix(r, want);
    }
    return c;
}

/* An admin's connection can administer: LIMITER RESET is not refused. */
static void assert_admin(redisContext *c)
{
    px_check_int(px_cmd(c, "LIMITER RESET user:x"), 0);
}

Test(it_secrets, admin_and_client_passwords_rotate_on_sighup,
     .init = px_env_prepare, .fini = px_env_fini, .timeout = 60)
{
    static const char *const secrets[] = { ADM_OLD, ADM_NEW, REQ_OLD, REQ_NEW,
                                           NULL };
    char apw[PX_PATH_MAX], rpw[PX_PATH_MAX], limits[PX_PATH_MAX];
    char yaml[3 * PX_PATH_MAX + 64];
    redisContext *adm, *cli, *c;

    px_redis_start(&px_env()->redis, NULL);
    write_secret(apw, sizeof(apw), "admin.pw", ADM_OLD);
    write_secret(rpw, sizeof(rpw), "clients.pw", REQ_OLD);
    px_write_file(limits, sizeof(limits), "limits.yaml",
                  "user:\n  children:\n    \"*\":\n      limits: [2, 1, "
                  "3600]\n");
    snprintf(yaml, sizeof(yaml),
             "admin_password_file: %s\nrequirepass_file: %s\nlimits_file: "
             "%s\n",
             apw, rpw, limits);
    px_proxy_start_for(&px_env()->proxy, &px_env()->redis, yaml);
    adm = login("admin", ADM_OLD, "OK");
    cli = login("default", REQ_OLD, "OK");
    assert_admin(adm);
    px_check_status(px_cmd(cli, "SET k v"), "OK");

    write_secret(apw, sizeof(apw), "admin.pw", ADM_NEW);
    write_secret(rpw, sizeof(rpw), "clients.pw", REQ_NEW);
    /* Before SIGHUP, the old passwords are the ones in use. */
    redisFree(login("admin", ADM_OLD, "OK"));
    redisFree(login("admin", ADM_NEW, "WRONGPASS"));
    sighup_and_wait("admin_password_file", "reloaded", 1);
    wait_log("SIGHUP: requirepass_file reloaded", 1);

    redisFree(login("admin", ADM_OLD, "WRONGPASS"));
    c = login("admin", ADM_NEW, "OK");
    assert_admin(c);
    redisFree(c);
    redisFree(login("default", REQ_OLD, "WRONGPASS"));
    c = login("default", REQ_NEW, "OK");
    px_check_str(px_cmd(c, "GET k"), "v");
    redisFree(c);

    /* Those logged in before stay so. */
    assert_admin(adm);
    px_check_str(px_cmd(cli, "GET k"), "v");
    assert_log_has_no_secret(secrets);
    redisFree(adm);
    redisFree(cli);
}

/* ---------------- Bad files ---------------- */

/* Runs `cellgate --config <yaml> [--check-config]` and expects exit 1 with
 * `want` (and no BAD_SEEN) in its stderr. */
static void expect_refused(const char *yaml_text, int check, const char *want)
{
    char conf[PX_PATH_MAX];
    const char *argv[] = { PX_CELLGATE_BIN, "--config", conf,
                           check ? "--check-config" : NULL, NULL };
    struct px_run r;

    px_write_file(conf, sizeof(conf), "p.yaml", yaml_text);
    px_run(&r, argv);
    cr_assert_eq(r.status, 1, "exit %d for:\n%s\nstderr: %s", r.status,
                 yaml_text, r.err);
    cr_assert_not_null(strstr(r.err, want), "want '%s' in: %s", want, r.err);
    cr_assert_null(strstr(r.err, BAD_SEEN), "the secret shown: %s", r.err);
    cr_assert_null(strstr(r.out, BAD_SEEN), "the secret shown: %s", r.out);
    px_run_free(&r);
}

Test(it_secrets, start_and_check_config_name_a_bad_file, .init = px_env_prepare,
     .fini = px_env_fini, .timeout = 60)
{
    static char big[5000];
    char path[PX_PATH_MAX], yaml[2 * PX_PATH_MAX], want[2 * PX_PATH_MAX];
    int check;

    for (check = 0; check <= 1; check++) {
        px_path(path, sizeof(path), "none");
        snprintf(yaml, sizeof(yaml),
                 "upstream: 127.0.0.1:1\nupstream_password_file: %s\n", path);
        snprintf(want, sizeof(want),
                 "p.yaml:2:1: upstream_password_file: cannot open '%s': No "
                 "such file or directory",
                 path);
        expect_refused(yaml, check, want);

        px_write_file(path, sizeof(path), "empty", "\n");
        snprintf(yaml, sizeof(yaml), "admin_password_file: %s\n", path);
        snprintf(want, sizeof(want),
                 "p.yaml:1:1: admin_password_file: '%s' is empty", path);
        expect_refused(yaml, check, want);

        memset(big, 'b', sizeof(big) - 1);
        px_write_file(path, sizeof(path), "big", big);
        snprintf(yaml, sizeof(yaml),
                 "limiter_user: l\nlimiter_password_file: %s\n", path);
        snprintf(want, sizeof(want),
                 "p.yaml:2:1: limiter_password_file: '%s' is larger than "
                 "4096 bytes",
                 path);
        expect_refused(yaml, check, want);

        px_write_file(path, sizeof(path), "lines", BAD_SEEN "\nmore\n");
        snprintf(yaml, sizeof(yaml), "requirepass_file: %s\n", path);
        snprintf(want, sizeof(want),
                 "p.yaml:1:1: requirepass_file: '%s' holds more than one line",
                 path);
        expect_refused(yaml, check, want);

        write_secret(path, sizeof(path), "good", BAD_SEEN);
        snprintf(yaml, sizeof(yaml),
                 "upstream_password: x\nupstream_password_file: %s\n", path);
        expect_refused(yaml, check,
                       "p.yaml:2:1: upstream_password and "
                       "upstream_password_file are mutually exclusive");
    }
}

Test(it_secrets, a_bad_file_at_sighup_keeps_the_old_password,
     .init = px_env_prepare, .fini = px_env_fini, .timeout = 60)
{
    static const char *const redis_args[] = { "--requirepass", UP_OLD, NULL };
    static const char *const secrets[] = { UP_OLD, BAD_SEEN, NULL };
    static char big[5000];
    static const char bad[] = "SIGHUP: upstream_password_file not reloaded, "
                              "the old password stays in use: ";
    char pw[PX_PATH_MAX], yaml[PX_PATH_MAX + 64], line[2 * PX_PATH_MAX];
    struct bystander b = { 0 };
    redisContext *c, *d;

    px_redis_start(&px_env()->redis, redis_args);
    write_secret(pw, sizeof(pw), "upstream.pw", UP_OLD);
    snprintf(yaml, sizeof(yaml), "upstream_password_file: %s\n", pw);
    px_proxy_start_for(&px_env()->proxy, &px_env()->redis, yaml);
    c = px_connect(px_env()->proxy.port);
    b.c = px_connect(px_env()->proxy.port);
    d = px_redis_connect(&px_env()->redis, UP_OLD);
    px_check_status(px_cmd(c, "SET k v"), "OK");

    /* Empty, two lines, too large, gone: each SIGHUP says why in one
     * line, and a new login still uses the old password. */
    px_write_file(pw, sizeof(pw), "upstream.pw", "");
    sighup_and_wait("upstream_password_file", "not reloaded", 1);
    snprintf(line, sizeof(line), "%s'%s' is empty\n", bad, pw);
    cr_assert_eq(log_count(line), 1, "no line '%s'", line);

    px_write_file(pw, sizeof(pw), "upstream.pw", BAD_SEEN "\n" BAD_SEEN "\n");
    sighup_and_wait("upstream_password_file", "not reloaded", 2);
    snprintf(line, sizeof(line), "%s'%s' holds more than one line\n", bad, pw);
    cr_assert_eq(log_count(line), 1, "no line '%s'", line);

    memset(big, 'b', sizeof(big) - 1);
    px_write_file(pw, sizeof(pw), "upstream.pw", big);
    sighup_and_wait("upstream_password_file", "not reloaded", 3);
    snprintf(line, sizeof(line), "%s'%s' is larger than 4096 bytes\n", bad, pw);
    cr_assert_eq(log_count(line), 1, "no line '%s'", line);

    cr_assert_eq(remove(pw), 0);
    sighup_and_wait("upstream_password_file", "not reloaded", 4);
    snprintf(line, sizeof(line),
             "%scannot open '%s': No such file or directory\n", bad, pw);
    cr_assert_eq(log_count(line), 1, "no line '%s'", line);

    bystander_step(&b, 0);
    kill_clients(d, "TYPE", "normal");
    poll_until(c, "GET k", NULL, &b, 1);
    px_check_str(px_cmd(c, "GET k"), "v");
    bystander_until_ok(&b);
    bystander_step(&b, 0);
    cr_assert_eq(log_count("AUTH failed"), 0);
    bystander_check(&b, d);
    assert_log_has_no_secret(secrets);
    redisFree(d);
    redisFree(b.c);
    redisFree(c);
}
