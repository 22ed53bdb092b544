/* The image, as a user meets it: what the Dockerfile, .dockerignore and
 * the proxy.yaml the image ships promise, checked without Docker (which
 * cannot run where the tests run; see container_files.c).
 *
 * The build context leaves host build trees, .git and node_modules out and
 * the sources in; the build stage and the image install a package for
 * every library CMakeLists.txt asks for; the image runs as a non-root user
 * with a health check, and its ENTRYPOINT loads its own proxy.yaml with no
 * default flags after it, so `docker run IMAGE --upstream ...` keeps that
 * file's listener, 0.0.0.0:7777; that file and the example tree it names
 * pass --check-config and answer the README's LIMITER examples. */
#include "tests/support/px_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "conf/conf.h"
#include "tests/integration/container_files.h"
#include "tests/integration/fixture.h"

PX_TEST_SUITE(it_image);

/* The build context: a host build tree (scripts/run.sh's build/, the
 * test builds build-*) makes the image's own CMake configure refuse its
 * CMakeCache.txt; .git and node_modules are large and never read. What the
 * build needs stays in. */
Test(it_image, dockerignore_leaves_build_trees_git_and_node_modules_out)
{
    static const char *const out[] = {
        "build",        "build/CMakeCache.txt",
        "build-asan",   "build-release",
        ".git",         "tests/clients/node_modules",
        "node_modules", "tests/clients/node_modules/ioredis/package.json",
    };
    static const char *const in[] = {
        "CMakeLists.txt",           "proxy/main.c",         "proxy/core/core.c",
        "conf/docker.yaml",         "conf/conf.c",          "parser/resp.c",
        "conf/limits.example.yaml", "tests/CMakeLists.txt",
    };
    char *text = px_read_file(CF_DOCKERIGNORE, NULL);

    cr_assert_not_null(text, "no %s", CF_DOCKERIGNORE);
    for (size_t i = 0; i < sizeof(out) / sizeof(out[0]); i++) {
        cr_assert(cf_ignored(text, out[i]), ".dockerignore sends %s", out[i]);
    }
    for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
        char path[PX_PATH_MAX];
        snprintf(path, sizeof(path), "%s/%s", PX_SOURCE_DIR, in[i]);
        cr_assert_eq(access(path, R_OK), 0, "%s is gone: update this test",
                     in[i]);
        cr_assert(!cf_ignored(text, in[i]), ".dockerignore leaves out %s",
                  in[i]);
    }
    free(text);
}

/* Every library CMakeLists.txt looks for: the Debian package the build
 * stage installs for it, and the one the image installs to run. A library
 * added to the build without its packages here fails this test, which
 * otherwise nothing would tell until a `docker build` (CI runs none). */
static const struct {
    const char *cmake; /* how CMakeLists.txt asks for it */
    const char *dev;   /* build stage */
    const char *run;   /* the image */
} image_libs[] = {
    { "IMPORTED_TARGET libuv)", "libuv1-dev", "libuv1" },
    { "IMPORTED_TARGET hiredis)", "libhiredis-dev", "libhiredis0.14" },
    { "IMPORTED_TARGET yaml-0.1)", "libyaml-dev", "libyaml-0-2" },
    { "find_package(OpenSSL", "libssl-dev", "libssl3" },
};

Test(it_image, image_installs_every_library_the_build_finds)
{
    char path[PX_PATH_MAX];
    struct cf_dockerfile *d = malloc(sizeof(*d));

    cr_assert_not_null(d);
    cf_dockerfile_load(d);
    snprintf(path, sizeof(path), "%s/CMakeLists.txt", PX_SOURCE_DIR);
    char *cm = px_read_file(path, NULL);
    cr_assert_not_null(cm, "cannot read %s", path);
    /* Each library the build asks for is in the table... */
    static const char *const asks[] = { "pkg_check_modules(", "find_package(" };
    for (size_t a = 0; a < 2; a++) {
        for (const char *p = strstr(cm, asks[a]); p != NULL;
             p = strstr(p + 1, asks[a])) {
            const char *eol = strchr(p, '\n');
            size_t len = eol != NULL ? (size_t)(eol - p) : strlen(p);
            int known = strncmp(p, "find_package(PkgConfig", 22) == 0;
            for (size_t i = 0; i < sizeof(image_libs) / sizeof(image_libs[0]);
                 i++) {
                const char *at = strstr(p, image_libs[i].cmake);
                known |= at != NULL && at < p + len;
            }
            cr_assert(known,
                      "CMakeLists.txt asks for %.*s: add its Debian "
                      "packages to the Dockerfile and to this test",
                      (int)len, p);
        }
    }
    /* ...and the Dockerfile installs its packages. */
    for (size_t i = 0; i < sizeof(image_libs) / sizeof(image_libs[0]); i++) {
        if (strstr(cm, image_libs[i].cmake) == NULL) {
            continue;
        }
        cr_assert(cf_dockerfile_installs(d, 0, image_libs[i].dev),
                  "the build stage does not install %s (%s)", image_libs[i].dev,
                  image_libs[i].cmake);
        cr_assert(cf_dockerfile_installs(d, 1, image_libs[i].run),
                  "the image does not install %s (%s)", image_libs[i].run,
                  image_libs[i].cmake);
    }
    free(cm);
    free(d);
}

/* The image runs as a user of its own, checks its health, and its
 * ENTRYPOINT loads the image's proxy.yaml with no default flags after it:
 * `docker run IMAGE --upstream redis:6379` adds that one flag over the
 * file. Both ports are exposed. */
Test(it_image, image_runs_its_own_config_as_a_non_root_user)
{
    struct cf_dockerfile *d = malloc(sizeof(*d));
    struct cf_words w, cw;
    char src[CF_DF_LINE], user[64];

    cr_assert_not_null(d);
    cf_dockerfile_load(d);
    const char *conf = cf_image_config(d, &w);
    cr_assert_not_null(cf_dockerfile_copied(d, conf, src, sizeof(src)),
                       "the image has no %s", conf);
    const char *cmd = cf_dockerfile_get(d, "CMD");
    if (cmd != NULL) {
        cf_exec_words(&cw, cmd);
        cr_assert_eq(cw.n, 0, "CMD %s: default flags a user's replace", cmd);
    }
    const char *u = cf_dockerfile_get(d, "USER");
    cr_assert_not_null(u, "the image runs as root");
    snprintf(user, sizeof(user), "%.*s", (int)strcspn(u, ": "), u);
    cr_assert(strcmp(user, "root") != 0 && strcmp(user, "0") != 0,
              "the image runs as %s", u);
    const char *hc = cf_dockerfile_get(d, "HEALTHCHECK");
    cr_assert(hc != NULL && strncmp(hc, "NONE", 4) != 0, "no HEALTHCHECK");
    cr_assert_not_null(strstr(hc, "7777"), "the health check asks %s", hc);
    const char *ex = cf_dockerfile_get(d, "EXPOSE");
    cr_assert(ex != NULL && strstr(ex, "7777") != NULL &&
                  strstr(ex, "9121") != NULL,
              "EXPOSE %s", ex != NULL ? ex : "(none)");
    free(d);
}

/* The image's proxy.yaml listens on every address (in a container
 * 127.0.0.1 is its own loopback), opens the metrics endpoint, names the
 * tree the image ships and no admin password (closed by default); it and
 * that tree pass --check-config, with a user's --upstream over them. */
Test(it_image, image_config_listens_outside_with_the_example_tree,
     .timeout = 30)
{
    struct cf_dockerfile *d = malloc(sizeof(*d));
    struct cf_words w;
    struct conf c;
    char src[CF_DF_LINE];

    cr_assert_not_null(d);
    cf_dockerfile_load(d);
    cr_assert_not_null(
        cf_dockerfile_copied(d, cf_image_config(d, &w), src, sizeof(src)));
    cf_conf_of(&c, src);
    cf_check_listens_outside(&c, src);
    cr_assert_null(c.admin_password, "%s opens limiter administration", src);
    cr_assert_eq(c.upstream.port, 0, "%s names an upstream", src);
    cf_check_limits_shipped(d, &c, src);
    cf_check_config_passes(src, CF_EXAMPLE_LIMITS, "--upstream", "redis:6379");
    conf_free(&c);
    free(d);
}

/* The README's first screen, through the image's files: its proxy.yaml and
 * the tree it ships, listeners moved to loopback ports by flags (as a
 * user's flags would move them), embedded. LIMITER CHECK answers the
 * README's [0, 6, 5, -1, 4], LIMITER RULES lists user:*:trade, and the
 * decision is on /metrics. */
Test(it_image, readme_limiter_examples_answer_through_the_images_files,
     .fini = px_env_fini, .timeout = 60)
{
    static char conf[PX_PATH_MAX], limits[PX_PATH_MAX], metrics[64];
    static const char *args[8];
    struct cf_dockerfile *d = malloc(sizeof(*d));
    struct cf_words w;
    static char buf[1 << 18]; /* the whole scrape */
    char src[256];
    int closed = 0;
    int mport = px_free_port();

    cr_assert_not_null(d);
    cf_dockerfile_load(d);
    cr_assert_not_null(
        cf_dockerfile_copied(d, cf_image_config(d, &w), src, sizeof(src)));
    snprintf(conf, sizeof(conf), "%s/%s", PX_SOURCE_DIR, src);
    snprintf(limits, sizeof(limits), "%s/%s", PX_SOURCE_DIR, CF_EXAMPLE_LIMITS);
    snprintf(metrics, sizeof(metrics), "127.0.0.1:%d", mport);
    free(d);
    args[0] = "--config";
    args[1] = conf;
    args[2] = "--limits";
    args[3] = limits;
    args[4] = "--metrics-listen";
    args[5] = metrics;
    args[6] = NULL;
    px_proxy_start(&px_env()->proxy, NULL, args);

    redisContext *c = px_connect(px_env()->proxy.port);
    redisReply *r = px_cmd(c, "LIMITER CHECK user:alex:trade");
    static const long long want[] = { 0, 6, 5, -1, 4 };
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "LIMITER CHECK: %s",
                 r->type == REDIS_REPLY_ERROR ? r->str : "not an array");
    cr_assert_eq(r->elements, 5);
    for (size_t i = 0; i < 5; i++) {
        cr_assert_eq(r->element[i]->integer, want[i], "item %zu: %lld", i,
                     r->element[i]->integer);
    }
    freeReplyObject(r);
    r = px_cmd(c, "LIMITER RULES");
    cr_assert_neq(r->type, REDIS_REPLY_ERROR, "LIMITER RULES: %s", r->str);
    /* One line per node with limits, one bulk string each. */
    char *rules = px_lines_text(r);
    int found = strncmp(rules, "user:*:trade ", 13) == 0 ||
                strstr(rules, "\nuser:*:trade ") != NULL;
    cr_assert(found, "LIMITER RULES lists no user:*:trade");
    free(rules);
    redisFree(c);

    int fd = px_raw_connect(mport, 0);
    static const char get[] = "GET /metrics HTTP/1.0\r\n\r\n";
    cr_assert_eq(px_raw_send(fd, get, sizeof(get) - 1), 0);
    px_raw_read_to_close(fd, buf, sizeof(buf), 5000, &closed);
    cr_assert(closed, "/metrics did not end");
    close(fd);
    cr_assert_not_null(strstr(buf, "cellgate_limiter_decisions_total{rule="
                                   "\"user:*:trade\",result=\"allowed\"} 1"),
                       "no allowed decision of user:*:trade on /metrics");
}
