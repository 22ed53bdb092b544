/* Unit tests of conf/conf_secret.c: reading a secret file, the *_file keys
 * of proxy.yaml and their conflicts, and the reload of the values in use. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conf/conf.h"
#include "conf/conf_secret.h"
#include "tests/support/px_test.h"

PX_TEST_SUITE(conf_secret);

#define ERRLEN 4096

/* A private directory for the test's files, removed by its .fini. */
static char dir[256];

static void secret_dir_init(void)
{
    const char *tmp = getenv("TMPDIR");

    snprintf(dir, sizeof(dir), "%s/cellgate-secret-XXXXXX",
             tmp != NULL && *tmp != '\0' ? tmp : "/tmp");
    cr_assert_not_null(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
}

static void secret_dir_fini(void)
{
    char cmd[512];

    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

/* Writes `len` bytes to "<dir>/<name>"; the path goes to `path`. */
static void put(char *path, size_t pathlen, const char *name, const void *text,
                size_t len)
{
    FILE *f;

    snprintf(path, pathlen, "%s/%s", dir, name);
    f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(text, 1, len, f), len);
    cr_assert_eq(fclose(f), 0);
}

/* Reads a file holding `text` and expects `want` (NULL: refused with an
 * error holding `why` and the path). */
static void expect_read(const char *text, size_t len, const char *want,
                        const char *why)
{
    char path[512], err[ERRLEN] = "";
    char *out = (char *)1;
    int rc;

    put(path, sizeof(path), "s", text, len);
    rc = conf_secret_read(path, &out, err, sizeof(err));
    if (want != NULL) {
        cr_assert_eq(rc, CONF_OK, "refused: %s", err);
        cr_assert_str_eq(out, want);
        free(out);
        return;
    }
    cr_assert_eq(rc, CONF_ERR, "accepted %zu bytes", len);
    cr_assert_null(out);
    cr_assert_not_null(strstr(err, path), "no path in: %s", err);
    cr_assert_not_null(strstr(err, why), "want '%s' in: %s", why, err);
}

/* ---------------- conf_secret_read ---------------- */

Test(conf_secret, one_line_is_the_secret_without_its_line_end,
     .init = secret_dir_init, .fini = secret_dir_fini)
{
    expect_read("hunter2", 7, "hunter2", NULL);
    expect_read("hunter2\n", 8, "hunter2", NULL);
    expect_read("hunter2\r\n", 9, "hunter2", NULL);
    /* Only a line end is dropped: blanks and a lone CR are the secret's. */
    expect_read(" two words \r", 12, " two words \r", NULL);
    expect_read("a\rb", 3, "a\rb", NULL);
}

Test(conf_secret, empty_files_are_refused, .init = secret_dir_init,
     .fini = secret_dir_fini)
{
    expect_read("", 0, NULL, "is empty");
    expect_read("\n", 1, NULL, "is empty");
    expect_read("\r\n", 2, NULL, "is empty");
}

Test(conf_secret, a_second_line_or_a_nul_byte_is_refused,
     .init = secret_dir_init, .fini = secret_dir_fini)
{
    expect_read("old\nnew\n", 8, NULL, "holds more than one line");
    expect_read("pass\n\n", 6, NULL, "holds more than one line");
    expect_read("pa\0ss\n", 6, NULL, "holds a NUL byte");
}

Test(conf_secret, at_most_4096_bytes_line_end_included, .init = secret_dir_init,
     .fini = secret_dir_fini)
{
    static char big[CONF_SECRET_MAX_BYTES + 2];
    static char want[CONF_SECRET_MAX_BYTES + 1];

    memset(big, 'x', sizeof(big));
    memset(want, 'x', CONF_SECRET_MAX_BYTES);
    want[CONF_SECRET_MAX_BYTES] = '\0';
    expect_read(big, CONF_SECRET_MAX_BYTES, want, NULL);
    expect_read(big, CONF_SECRET_MAX_BYTES + 1, NULL,
                "is larger than 4096 bytes");
    big[CONF_SECRET_MAX_BYTES] = '\n';
    expect_read(big, CONF_SECRET_MAX_BYTES + 1, NULL,
                "is larger than 4096 bytes");
    expect_read(big, sizeof(big), NULL, "is larger than 4096 bytes");
}

Test(conf_secret, missing_or_unreadable_names_the_path_and_strerror,
     .init = secret_dir_init, .fini = secret_dir_fini)
{
    char path[512], err[ERRLEN], want[ERRLEN];
    char *out = NULL;

    snprintf(path, sizeof(path), "%s/none", dir);
    cr_assert_eq(conf_secret_read(path, &out, err, sizeof(err)), CONF_ERR);
    snprintf(want, sizeof(want), "cannot open '%s': %s", path,
             strerror(ENOENT));
    cr_assert_str_eq(err, want);

    cr_assert_eq(conf_secret_read(dir, &out, err, sizeof(err)), CONF_ERR);
    snprintf(want, sizeof(want), "cannot read '%s': %s", dir, strerror(EISDIR));
    cr_assert_str_eq(err, want);
    cr_assert_null(out);
}

/* SIGHUP reads on the event loop: a FIFO (no writer) must not block it. */
Test(conf_secret, a_fifo_is_refused_without_blocking, .init = secret_dir_init,
     .fini = secret_dir_fini, .timeout = 10)
{
    char path[512], err[ERRLEN], want[ERRLEN];
    char *out = NULL;

    snprintf(path, sizeof(path), "%s/fifo", dir);
    cr_assert_eq(mkfifo(path, 0600), 0, "mkfifo: %s", strerror(errno));
    cr_assert_eq(conf_secret_read(path, &out, err, sizeof(err)), CONF_ERR);
    snprintf(want, sizeof(want), "'%s' is not a regular file", path);
    cr_assert_str_eq(err, want);
    cr_assert_null(out);
}

/* ---------------- proxy.yaml ---------------- */

/* Loads `yaml` (each '@' replaced by the test's directory) into `c`. */
static int load(struct conf *c, const char *yaml, char *err)
{
    char text[2048];
    size_t n = 0;

    for (; *yaml != '\0'; yaml++) {
        const char *part = *yaml == '@' ? dir : yaml;
        size_t len = *yaml == '@' ? strlen(dir) : 1;

        cr_assert_lt(n + len, sizeof(text));
        memcpy(text + n, part, len);
        n += len;
    }
    text[n] = '\0';
    cr_assert_eq(conf_init(c), CONF_OK);
    return conf_load_string(c, "proxy.yaml", text, err, ERRLEN);
}

Test(conf_secret, each_file_key_loads_its_password, .init = secret_dir_init,
     .fini = secret_dir_fini)
{
    char path[512], err[ERRLEN];
    struct conf c;

    put(path, sizeof(path), "up", "u-pass\n", 7);
    put(path, sizeof(path), "lim", "l-pass\r\n", 8);
    put(path, sizeof(path), "adm", "a-pass", 6);
    put(path, sizeof(path), "req", "r-pass\n", 7);
    cr_assert_eq(load(&c,
                      "upstream_password_file: @/up\n"
                      "limiter_user: lim\n"
                      "limiter_password_file: @/lim\n"
                      "admin_password_file: @/adm\n"
                      "requirepass_file: @/req\n",
                      err),
                 CONF_OK, "%s", err);
    cr_assert_str_eq(c.upstream_password, "u-pass");
    cr_assert_str_eq(c.limiter_password, "l-pass");
    cr_assert_str_eq(c.admin_password, "a-pass");
    cr_assert_str_eq(c.requirepass, "r-pass");
    snprintf(path, sizeof(path), "%s/up", dir);
    cr_assert_str_eq(c.secret.file[CONF_SECRET_UPSTREAM], path);
    cr_assert_str_eq(conf_secret_file_key(CONF_SECRET_LIMITER),
                     "limiter_password_file");
    conf_free(&c);
}

Test(conf_secret, a_password_set_both_ways_is_an_error, .init = secret_dir_init,
     .fini = secret_dir_fini)
{
    static const char *const keys[] = { "upstream_password", "limiter_password",
                                        "admin_password", "requirepass" };
    char path[512], yaml[1024], err[ERRLEN], want[512];
    struct conf c;
    size_t i;

    put(path, sizeof(path), "p", "x\n", 2);
    for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        snprintf(yaml, sizeof(yaml), "%s_file: %s\nlimiter_user: l\n%s: y\n",
                 keys[i], path, keys[i]);
        cr_assert_eq(conf_init(&c), CONF_OK);
        cr_assert_eq(conf_load_string(&c, "proxy.yaml", yaml, err, ERRLEN),
                     CONF_ERR, "accepted: %s", yaml);
        snprintf(want, sizeof(want),
                 "proxy.yaml:3:1: %s and %s_file are mutually exclusive: "
                 "set one",
                 keys[i], keys[i]);
        cr_assert_not_null(strstr(err, want), "%s", err);
        conf_free(&c);
    }
}

Test(conf_secret, limiter_user_needs_a_password_or_a_password_file,
     .init = secret_dir_init, .fini = secret_dir_fini)
{
    char path[512], err[ERRLEN];
    struct conf c;

    put(path, sizeof(path), "lim", "l-pass\n", 7);
    cr_assert_eq(
        load(&c, "limiter_user: l\nlimiter_password_file: @/lim\n", err),
        CONF_OK, "%s", err);
    cr_assert_str_eq(c.limiter_password, "l-pass");
    conf_free(&c);
    cr_assert_eq(load(&c, "limiter_user: l\nlimiter_password: p\n", err),
                 CONF_OK, "%s", err);
    conf_free(&c);
    cr_assert_eq(load(&c, "log_level: info\nlimiter_user: l\n", err), CONF_ERR);
    cr_assert_str_eq(err, "proxy.yaml:2:1: limiter_user needs "
                          "limiter_password or limiter_password_file");
    conf_free(&c);
}

Test(conf_secret, a_bad_file_is_an_error_at_its_key, .init = secret_dir_init,
     .fini = secret_dir_fini)
{
    char path[512], err[ERRLEN], want[ERRLEN];
    struct conf c;

    cr_assert_eq(
        load(&c, "log_level: info\nadmin_password_file: @/none\n", err),
        CONF_ERR);
    snprintf(want, sizeof(want),
             "proxy.yaml:2:1: admin_password_file: cannot open '%s/none': "
             "%s",
             dir, strerror(ENOENT));
    cr_assert_str_eq(err, want);
    cr_assert_null(c.admin_password);
    conf_free(&c);

    put(path, sizeof(path), "empty", "", 0);
    cr_assert_eq(load(&c, "upstream_password_file: @/empty\n", err), CONF_ERR);
    snprintf(want, sizeof(want),
             "proxy.yaml:1:1: upstream_password_file: '%s' is empty", path);
    cr_assert_str_eq(err, want);
    conf_free(&c);

    cr_assert_eq(load(&c, "upstream_password_file: \"\"\n", err), CONF_ERR);
    cr_assert_str_eq(err, "proxy.yaml:1:25: upstream_password_file: expected "
                          "the path of a file holding the password, got "
                          "\"\"");
    conf_free(&c);
}

/* ---------------- The values in use ---------------- */

Test(conf_secret, reload_replaces_a_value_only_with_a_good_file,
     .init = secret_dir_init, .fini = secret_dir_fini)
{
    char path[512], err[ERRLEN];
    struct conf_secret_values v;
    struct conf c;

    put(path, sizeof(path), "up", "old\n", 4);
    cr_assert_eq(load(&c,
                      "upstream_password_file: @/up\n"
                      "admin_password: adm\n",
                      err),
                 CONF_OK, "%s", err);
    cr_assert_eq(conf_secret_values_init(&v, &c), CONF_OK);
    cr_assert_str_eq(v.value[CONF_SECRET_UPSTREAM], "old");
    cr_assert_str_eq(v.value[CONF_SECRET_ADMIN], "adm");
    cr_assert_null(v.value[CONF_SECRET_LIMITER]);

    /* A password from proxy.yaml has no file to read. */
    cr_assert_eq(conf_secret_reload(&c, CONF_SECRET_ADMIN, &v, err, ERRLEN),
                 CONF_SECRET_NO_FILE);
    cr_assert_eq(conf_secret_reload(&c, CONF_SECRET_UPSTREAM, &v, err, ERRLEN),
                 CONF_SECRET_UNCHANGED);
    put(path, sizeof(path), "up", "new\r\n", 5);
    cr_assert_eq(conf_secret_reload(&c, CONF_SECRET_UPSTREAM, &v, err, ERRLEN),
                 CONF_SECRET_CHANGED);
    cr_assert_str_eq(v.value[CONF_SECRET_UPSTREAM], "new");

    /* Bad, then gone: the last good value stays; the reason has no
     * secret in it. */
    put(path, sizeof(path), "up", "newer\nnewest\n", 13);
    cr_assert_eq(conf_secret_reload(&c, CONF_SECRET_UPSTREAM, &v, err, ERRLEN),
                 CONF_SECRET_BAD);
    cr_assert_not_null(strstr(err, "holds more than one line"), "%s", err);
    cr_assert_null(strstr(err, "newer"), "%s", err);
    cr_assert_eq(unlink(path), 0);
    cr_assert_eq(conf_secret_reload(&c, CONF_SECRET_UPSTREAM, &v, err, ERRLEN),
                 CONF_SECRET_BAD);
    cr_assert_not_null(strstr(err, "cannot open"), "%s", err);
    cr_assert_str_eq(v.value[CONF_SECRET_UPSTREAM], "new");
    /* The configuration keeps the start-up value; only `v` moves. */
    cr_assert_str_eq(c.upstream_password, "old");

    conf_secret_values_free(&v);
    conf_secret_values_free(&v);
    conf_free(&c);
}
