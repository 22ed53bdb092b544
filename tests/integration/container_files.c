/* The repository's container files, read as Docker reads them, for the
 * tests of the image and of the compose testbench (test_image.c,
 * test_compose.c), which cannot run Docker where the tests run.
 *
 * The Dockerfile is parsed into instructions (continuation lines joined,
 * comments dropped) and split at its last FROM: the build stages before
 * it, the image's stage from it on. .dockerignore's patterns are matched as
 * the builder matches them, closely enough for the paths the tests ask
 * about. A proxy.yaml of the image is loaded with the configuration loader
 * and checked with `cellgate --check-config`. Every function asserts
 * (criterion) on what it cannot read. */
#include "tests/integration/container_files.h"

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/integration/fixture.h"
#include "tests/support/px_test.h"

/* Appends one word of len bytes to w. */
void cf_words_add(struct cf_words *w, size_t *used, const char *p, size_t len)
{
    cr_assert(w->n < CF_MAX_WORDS && *used + len + 1 <= CF_WORDS_BUF,
              "command too long");
    w->w[w->n++] = w->buf + *used;
    memcpy(w->buf + *used, p, len);
    w->buf[*used + len] = '\0';
    *used += len + 1;
}

/* Index of the first word equal to s, or -1. */
int cf_words_find(const struct cf_words *w, const char *s)
{
    for (int i = 0; i < w->n; i++) {
        if (strcmp(w->w[i], s) == 0) {
            return i;
        }
    }
    return -1;
}

/* The word after flag; asserts there is one. */
const char *cf_words_value(const struct cf_words *w, const char *flag)
{
    int i = cf_words_find(w, flag);
    cr_assert(i >= 0 && i + 1 < w->n, "no %s <value>", flag);
    return w->w[i + 1];
}

/* ---------------- The Dockerfile's final stage ---------------- */

void cf_dockerfile_load(struct cf_dockerfile *d)
{
    char raw[CF_DF_LINE];
    size_t used = 0;
    FILE *f = fopen(CF_DOCKERFILE, "rb");

    cr_assert_not_null(f, "no %s", CF_DOCKERFILE);
    d->n = 0;
    d->final = 0;
    while (fgets(raw, sizeof(raw), f) != NULL) {
        size_t len = strcspn(raw, "\r\n");
        const char *p = raw + strspn(raw, " \t");
        raw[len] = '\0';
        if (*p == '#' || (*p == '\0' && used == 0)) {
            continue;
        }
        if (used == 0) {
            cr_assert_lt(d->n, CF_DF_MAX_LINES, "Dockerfile too long");
            d->line[d->n][0] = '\0';
        }
        int cont = len > 0 && raw[len - 1] == '\\';
        if (cont) {
            raw[--len] = '\0';
        }
        cr_assert_lt(used + strlen(p) + 1, (size_t)CF_DF_LINE, "line too long");
        memcpy(d->line[d->n] + used, p, strlen(p) + 1);
        used += strlen(p);
        if (!cont) {
            /* A FROM starts a new stage: the last one is the image. */
            if (strncmp(d->line[d->n], "FROM ", 5) == 0) {
                d->final = d->n;
            }
            d->n++;
            used = 0;
        }
    }
    fclose(f);
    cr_assert_gt(d->n, 0, "the Dockerfile has no stage");
}

/* The arguments of the final stage's last `instr` instruction, or NULL. */
const char *cf_dockerfile_get(const struct cf_dockerfile *d, const char *instr)
{
    size_t n = strlen(instr);
    for (int i = d->n - 1; i >= d->final; i--) {
        if (strncmp(d->line[i], instr, n) == 0 && d->line[i][n] == ' ') {
            return d->line[i] + n + strspn(d->line[i] + n, " ");
        }
    }
    return NULL;
}

/* The words of an exec-form (JSON array) argument: ["a", "b"]. */
void cf_exec_words(struct cf_words *w, const char *s)
{
    size_t used = 0;

    w->n = 0;
    cr_assert_eq(*s, '[', "not in exec form: %s", s);
    while ((s = strchr(s, '"')) != NULL) {
        const char *end = strchr(s + 1, '"');
        cr_assert_not_null(end, "unterminated string");
        cf_words_add(w, &used, s + 1, (size_t)(end - s - 1));
        s = end + 1;
    }
}

/* The repository file (relative to the source dir) the final stage COPYs
 * to `dest` from the build context, or NULL. */
const char *cf_dockerfile_copied(const struct cf_dockerfile *d,
                                 const char *dest, char *out, size_t len)
{
    for (int i = d->final; i < d->n; i++) {
        char src[CF_DF_LINE], dst[CF_DF_LINE];
        if (strncmp(d->line[i], "COPY ", 5) != 0 ||
            strstr(d->line[i], "--from") != NULL ||
            sscanf(d->line[i] + 5, "%2047s %2047s", src, dst) != 2) {
            continue;
        }
        if (strcmp(dst, dest) == 0) {
            snprintf(out, len, "%s", src);
            return out;
        }
    }
    return NULL;
}

/* Whether a RUN of the build stages (final 0) or of the image's stage
 * (final 1) installs the Debian package pkg (a whole word). */
int cf_dockerfile_installs(const struct cf_dockerfile *d, int final,
                           const char *pkg)
{
    int from = final ? d->final : 0, to = final ? d->n : d->final;
    size_t n = strlen(pkg);
    for (int i = from; i < to; i++) {
        if (strncmp(d->line[i], "RUN ", 4) != 0) {
            continue;
        }
        for (const char *p = strstr(d->line[i], pkg); p != NULL;
             p = strstr(p + 1, pkg)) {
            if (p[-1] == ' ' && (p[n] == ' ' || p[n] == '\0')) {
                return 1;
            }
        }
    }
    return 0;
}

/* The ENTRYPOINT's --config: the path of the image's proxy.yaml. */
const char *cf_image_config(const struct cf_dockerfile *d, struct cf_words *w)
{
    const char *ep = cf_dockerfile_get(d, "ENTRYPOINT");
    cr_assert_not_null(ep, "no ENTRYPOINT");
    cf_exec_words(w, ep);
    cr_assert_gt(w->n, 0);
    cr_assert_not_null(strstr(w->w[0], "cellgate"),
                       "the ENTRYPOINT runs %s, not cellgate", w->w[0]);
    return cf_words_value(w, "--config");
}

/* ---------------- Configurations ---------------- */

/* Loads the repository's file `rel` as proxy.yaml into c. */
void cf_conf_of(struct conf *c, const char *rel)
{
    char path[PX_PATH_MAX], err[512] = "";
    snprintf(path, sizeof(path), "%s/%s", PX_SOURCE_DIR, rel);
    cr_assert_eq(conf_init(c), CONF_OK);
    cr_assert_eq(conf_load_file(c, path, err, sizeof(err)), CONF_OK, "%s: %s",
                 rel, err);
}

/* A container's listeners: on every address, at the published port. */
void cf_check_listens_outside(const struct conf *c, const char *rel)
{
    cr_assert_str_eq(c->listen.host, CF_ANY_ADDRESS,
                     "%s: listen on %s: unreachable from outside the "
                     "container",
                     rel, c->listen.host);
    cr_assert_eq(c->listen.port, CF_PROXY_PORT, "%s: listen port %d", rel,
                 c->listen.port);
    cr_assert_str_eq(c->metrics_listen.host, CF_ANY_ADDRESS,
                     "%s: metrics_listen on %s", rel, c->metrics_listen.host);
    cr_assert_eq(c->metrics_listen.port, CF_METRICS_PORT,
                 "%s: metrics_listen port %d", rel, c->metrics_listen.port);
}

/* `cellgate --config <rel> --limits <limits> [extra] --check-config`
 * passes: the file's keys and the tree the image ships parse together. */
void cf_check_config_passes(const char *rel, const char *limits,
                            const char *extra_flag, const char *extra)
{
    char path[PX_PATH_MAX], lpath[PX_PATH_MAX];
    struct px_run res;

    snprintf(path, sizeof(path), "%s/%s", PX_SOURCE_DIR, rel);
    snprintf(lpath, sizeof(lpath), "%s/%s", PX_SOURCE_DIR, limits);
    const char *argv[] = { PX_CELLGATE_BIN, "--config", path,
                           "--limits",      lpath,      "--check-config",
                           extra_flag,      extra,      NULL };
    px_run(&res, argv);
    cr_assert_eq(res.status, 0, "%s with %s: exit %d: %s%s", rel, limits,
                 res.status, res.out, res.err);
    px_run_free(&res);
}

/* The limits file a proxy.yaml of the image names: shipped by the
 * Dockerfile from the repository's example tree. */
void cf_check_limits_shipped(const struct cf_dockerfile *d,
                             const struct conf *c, const char *rel)
{
    char src[CF_DF_LINE];
    cr_assert_not_null(c->limits_file, "%s names no limits_file", rel);
    cr_assert_not_null(
        cf_dockerfile_copied(d, c->limits_file, src, sizeof(src)),
        "%s: limits_file %s is not in the image", rel, c->limits_file);
    cr_assert_str_eq(src, CF_EXAMPLE_LIMITS, "the image's %s is %s",
                     c->limits_file, src);
}

/* ---------------- .dockerignore ---------------- */

/* Whether one pattern excludes `path`, as the builder reads it: a pattern
 * matches the path or one of its parent directories; "**" + "/" matches any
 * leading directories; a trailing '/' is dropped (filepath.Clean). */
static int ignore_match(const char *pat, const char *path)
{
    char p[256], sub[PX_PATH_MAX];
    size_t len = strlen(pat);

    snprintf(p, sizeof(p), "%.*s",
             (int)(len > 1 && pat[len - 1] == '/' ? len - 1 : len),
             pat[0] == '/' ? pat + 1 : pat);
    for (const char *end = path;; end++) {
        if (*end == '/' || *end == '\0') {
            snprintf(sub, sizeof(sub), "%.*s", (int)(end - path), path);
            if (strncmp(p, "**/", 3) == 0) {
                for (const char *s = sub; s != NULL;
                     s = strchr(s, '/') != NULL ? strchr(s, '/') + 1 : NULL) {
                    if (fnmatch(p + 3, s, FNM_PATHNAME) == 0) {
                        return 1;
                    }
                }
            } else if (fnmatch(p, sub, FNM_PATHNAME) == 0) {
                return 1;
            }
        }
        if (*end == '\0') {
            return 0;
        }
    }
}

/* Whether .dockerignore (text) leaves `path` out of the build context:
 * the last matching pattern decides, "!" re-includes. */
int cf_ignored(const char *text, const char *path)
{
    int out = 0;
    char *save = NULL, *copy = strdup(text);
    cr_assert_not_null(copy);
    for (char *l = strtok_r(copy, "\n", &save); l != NULL;
         l = strtok_r(NULL, "\n", &save)) {
        l += strspn(l, " \t");
        if (*l == '#' || *l == '\0') {
            continue;
        }
        int neg = *l == '!';
        if (ignore_match(l + neg, path)) {
            out = !neg;
        }
    }
    free(copy);
    return out;
}
