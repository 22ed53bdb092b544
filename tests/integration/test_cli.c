/* The command line: --help, --version, unknown flags, --check-config,
 * signals, and the embedded mode (no upstream). */
#include "tests/integration/fixture.h"
#include "tests/support/px_test.h"

#include <ctype.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

PX_TEST_SUITE(it_cli);

#ifndef PX_VERSION
#define PX_VERSION "" /* the CMake target defines it; any version matches */
#endif

/* Case-insensitive strstr. */
static const char *find_nocase(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (; *hay != '\0'; hay++) {
        if (strncasecmp(hay, needle, n) == 0) {
            return hay;
        }
    }
    return NULL;
}

static void run_args(struct px_run *res, const char *a1, const char *a2)
{
    const char *argv[] = { PX_CELLGATE_BIN, a1, a2, NULL };
    px_run(res, argv);
}

Test(it_cli, help_prints_usage_and_exits_zero, .fini = px_env_fini,
     .timeout = 30)
{
    struct px_run res;
    run_args(&res, "--help", NULL);
    cr_assert_eq(res.status, 0, "exit %d, stderr: %s", res.status, res.err);
    cr_assert_not_null(strstr(res.out, "Usage"), "stdout: \"%s\"", res.out);
    cr_assert_not_null(strstr(res.out, "--config"), "stdout: \"%s\"", res.out);
    cr_assert_not_null(strstr(res.out, "--upstream"), "stdout: \"%s\"",
                       res.out);
    px_run_free(&res);
}

Test(it_cli, version_prints_name_and_version, .fini = px_env_fini,
     .timeout = 30)
{
    struct px_run res;
    run_args(&res, "--version", NULL);
    cr_assert_eq(res.status, 0, "exit %d, stderr: %s", res.status, res.err);
    const char *v = strstr(res.out, "cellgate " PX_VERSION);
    cr_assert_not_null(v, "stdout: \"%s\"", res.out);
    cr_assert(isdigit((unsigned char)v[strlen("cellgate ")]),
              "no version number: \"%s\"", res.out);
    px_run_free(&res);
}

Test(it_cli, unknown_flag_prints_usage_and_fails, .fini = px_env_fini,
     .timeout = 30)
{
    struct px_run res;
    run_args(&res, "--no-such-flag", NULL);
    cr_assert(res.status == 1 || res.status == 2, "exit %d", res.status);
    cr_assert_not_null(find_nocase(res.err, "usage"), "stderr: \"%s\"",
                       res.err);
    px_run_free(&res);

    run_args(&res, "--listen", NULL); /* missing value */
    cr_assert(res.status == 1 || res.status == 2, "exit %d", res.status);
    px_run_free(&res);
}

Test(it_cli, check_config_accepts_a_valid_file, .fini = px_env_fini,
     .timeout = 30)
{
    char path[PX_PATH_MAX];
    px_write_file(path, sizeof(path), "good.yaml",
                  "listen: 127.0.0.1:7777\n"
                  "upstream: 127.0.0.1:6379\n"
                  "requirepass: secret\n"
                  "command_timeout_ms: 500\n"
                  "client_max_output_bytes: 64mb\n"
                  "max_bulk_bytes: 1048576\n");
    struct px_run res;
    const char *argv[] = { PX_CELLGATE_BIN, "--config", path, "--check-config",
                           NULL };
    px_run(&res, argv);
    cr_assert_eq(res.status, 0, "exit %d, stderr: %s", res.status, res.err);
    px_run_free(&res);
}

Test(it_cli, check_config_reports_every_error_with_its_location,
     .fini = px_env_fini, .timeout = 30)
{
    char path[PX_PATH_MAX];
    px_write_file(path, sizeof(path), "bad.yaml",
                  "listen: 127.0.0.1:7777\n"
                  "max_clients: lots\n"
                  "no_such_key: 1\n"
                  "upstream: 127.0.0.1:6379\n");
    struct px_run res;
    const char *argv[] = { PX_CELLGATE_BIN, "--config", path, "--check-config",
                           NULL };
    px_run(&res, argv);
    cr_assert_eq(res.status, 1, "exit %d, stderr: %s", res.status, res.err);
    px_check_location(res.err, path, 2);
    px_check_location(res.err, path, 3);
    px_run_free(&res);
}

/* Runs cellgate with the config `yaml` (after a listen line of its own),
 * with --check-config or to start, and asserts it fails with `want` in
 * its stderr. */
static void refused(const char *yaml, int check, const char *want)
{
    char path[PX_PATH_MAX], text[1024];
    struct px_run res;
    const char *argv[] = { PX_CELLGATE_BIN, "--config", path,
                           check ? "--check-config" : NULL, NULL };

    snprintf(text, sizeof(text), "listen: 127.0.0.1:%d\n%s", px_free_port(),
             yaml);
    px_write_file(path, sizeof(path), "acl.yaml", text);
    px_run(&res, argv);
    cr_assert_eq(res.status, 1, "exit %d, stderr: %s", res.status, res.err);
    cr_assert_not_null(strstr(res.err, want), "stderr: \"%s\"", res.err);
    px_run_free(&res);
}

/* What --print-acl could not print is refused by --check-config and at
 * start-up alike: one user for both roles (the limiter user's ~* would
 * give clients every key), a key prefix no ACL pattern can hold. */
Test(it_cli, check_config_and_start_up_refuse_what_print_acl_refuses,
     .fini = px_env_fini, .timeout = 60)
{
    static const char same[] = "upstream: 127.0.0.1:1\n"
                               "upstream_user: app\nupstream_password: x\n"
                               "limiter_user: app\nlimiter_password: y\n";
    static const char blank[] = "upstream: 127.0.0.1:1\n"
                                "upstream_user: app\nupstream_password: x\n"
                                "limiter_user: lim\nlimiter_password: y\n"
                                "key_prefix: \"rate limit:\"\n";
    static const char want_same[] =
        "cellgate: upstream_user and limiter_user are both 'app'";
    static const char want_blank[] =
        "cellgate: key_prefix 'rate limit:' has a blank";
    char path[PX_PATH_MAX];
    struct px_run res;
    const char *argv[] = { PX_CELLGATE_BIN, "--config", path, "--check-config",
                           NULL };

    refused(same, 1, want_same);
    refused(same, 0, want_same);
    refused(blank, 1, want_blank);
    refused(blank, 0, want_blank);
    /* Two users and a plain prefix pass. */
    px_write_file(path, sizeof(path), "ok.yaml",
                  "upstream: 127.0.0.1:1\n"
                  "upstream_user: app\nupstream_password: x\n"
                  "limiter_user: lim\nlimiter_password: y\n");
    px_run(&res, argv);
    cr_assert_eq(res.status, 0, "exit %d, stderr: %s", res.status, res.err);
    px_run_free(&res);
}

Test(it_cli, check_config_reports_yaml_syntax_errors, .fini = px_env_fini,
     .timeout = 30)
{
    char path[PX_PATH_MAX];
    px_write_file(path, sizeof(path), "syntax.yaml",
                  "listen: 127.0.0.1:7777\n"
                  "upstream: [unclosed\n");
    struct px_run res;
    const char *argv[] = { PX_CELLGATE_BIN, "--config", path, "--check-config",
                           NULL };
    px_run(&res, argv);
    cr_assert_eq(res.status, 1, "exit %d, stderr: %s", res.status, res.err);
    cr_assert_not_null(strstr(res.err, path), "stderr: \"%s\"", res.err);
    px_run_free(&res);
}

Test(it_cli, missing_config_file_fails_to_start, .fini = px_env_fini,
     .timeout = 30)
{
    char path[PX_PATH_MAX];
    px_path(path, sizeof(path), "absent.yaml");
    struct px_run res;
    const char *argv[] = { PX_CELLGATE_BIN, "--config", path, NULL };
    px_run(&res, argv);
    cr_assert_neq(res.status, 0);
    cr_assert_not_null(strstr(res.err, path), "stderr: \"%s\"", res.err);
    px_run_free(&res);
}

Test(it_cli, sigterm_exits_zero_with_clients_connected, .init = px_env_init,
     .fini = px_env_fini, .timeout = 60)
{
    struct px_env *e = px_env();
    redisContext *idle = px_connect(e->proxy.port);
    redisContext *busy = px_connect(e->proxy.port);
    redisContext *sub = px_connect(e->proxy.port);
    px_check_status(px_cmd(idle, "SET k v"), "OK");
    redisReply *r = px_cmd(sub, "SUBSCRIBE ch");
    freeReplyObject(r);
    for (int i = 0; i < 1000; i++) {
        redisAppendCommand(busy, "INCR n");
    }
    px_flush(busy);
    px_proxy_stop_clean(&e->proxy, SIGTERM);
    redisFree(idle);
    redisFree(busy);
    redisFree(sub);
}

Test(it_cli, sigint_exits_zero, .init = px_env_init, .fini = px_env_fini,
     .timeout = 60)
{
    struct px_env *e = px_env();
    redisContext *c = px_connect(e->proxy.port);
    px_check_status(px_cmd(c, "SET k v"), "OK");
    px_proxy_stop_clean(&e->proxy, SIGINT);
    redisFree(c);
}

Test(it_cli, flags_override_the_config_file, .fini = px_env_fini, .timeout = 60)
{
    /* The file names a dead upstream; --upstream names the live one. */
    struct px_env *e = px_env();
    px_redis_start(&e->redis, NULL);
    char up[64];
    snprintf(up, sizeof(up), "127.0.0.1:%d", e->redis.port);
    char yaml[128];
    snprintf(yaml, sizeof(yaml), "upstream: 127.0.0.1:%d\n", px_free_port());
    const char *args[] = { "--upstream", up, "--log-level", "debug", NULL };
    px_proxy_start(&e->proxy, yaml, args);
    redisContext *c = px_connect(e->proxy.port);
    px_check_status(px_cmd(c, "SET k v"), "OK");
    redisFree(c);
    redisContext *direct = px_redis_connect(&e->redis, NULL);
    px_check_str(px_cmd(direct, "GET k"), "v");
    redisFree(direct);
}

Test(it_cli, embedded_mode_refuses_ordinary_commands, .fini = px_env_fini,
     .timeout = 60)
{
    struct px_env *e = px_env();
    px_proxy_start(&e->proxy, NULL, NULL); /* flags only, no upstream */
    redisContext *c = px_connect(e->proxy.port);
    px_check_error(px_cmd(c, "GET k"), "ERR no upstream configured");
    px_check_error(px_cmd(c, "SET k v"), "ERR no upstream configured");
    px_check_status(px_cmd(c, "PING"), "PONG");
    px_check_str(px_cmd(c, "ECHO %s", "e"), "e");
    redisFree(c);
}
