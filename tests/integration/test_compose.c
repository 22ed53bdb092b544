/* docker-compose.yml describes the cluster testbench it claims to, and the
 * image (Dockerfile, .dockerignore, the proxy.yaml it ships) is usable as
 * one.
 *
 * Docker cannot run where the tests run, so this suite reads the files:
 * docker-compose.yml with libyaml's document API (aliases resolved, as
 * compose resolves them), the Dockerfile's final stage line by line,
 * .dockerignore's patterns; the configurations with conf_load_file and
 * `cellgate --check-config`. It checks the compose shape: six redis 7 nodes
 * in cluster mode that say --protected-mode no and keep their --dir on a
 * tmpfs (no anonymous volume left by `down`), a one-shot service that joins
 * them with `redis-cli --cluster create ... --cluster-replicas 1
 * --cluster-yes` once they answer, and cellgate built from the repository's
 * Dockerfile, published on 127.0.0.1:7777 and :9121, whose --cluster seeds
 * are services of the file and whose proxy.yaml, mounted over the image's,
 * listens on 0.0.0.0 with the example limits tree. And the image's: it
 * runs as a non-root user with a health check, its ENTRYPOINT loads its own
 * proxy.yaml (listening on 0.0.0.0, so `docker run IMAGE --upstream ...`
 * is reachable) and the build context leaves host build trees, .git and
 * node_modules out. */
#include "tests/support/px_test.h"

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <yaml.h>

#include "conf/conf.h"
#include "tests/integration/fixture.h"

PX_TEST_SUITE(it_compose);

#define COMPOSE_FILE    PX_SOURCE_DIR "/docker-compose.yml"
#define DOCKERFILE      PX_SOURCE_DIR "/Dockerfile"
#define REDIS_NODES     6    /* redis-1 .. redis-6 */
#define MAX_WORDS       64   /* words of one command */
#define WORDS_BUF       4096 /* their text */
#define REDIS_IMAGE     "redis:7"
#define PROXY_SERVICE   "cellgate"
#define PROXY_PUBLISH   "127.0.0.1:7777:7777"
#define METRICS_PUBLISH "127.0.0.1:9121:9121"
#define ANY_ADDRESS     "0.0.0.0" /* a container's listeners take every one */
#define PROXY_PORT      7777
#define METRICS_PORT    9121
#define REDIS_DIR       "/data" /* the redis image's VOLUME: a tmpfs here */
/* The tree scripts/run.sh loads and the README's examples answer from. */
#define EXAMPLE_LIMITS "conf/limits.example.yaml"
#define DOCKERIGNORE   PX_SOURCE_DIR "/.dockerignore"
#define DF_MAX_LINES   64   /* instructions of the Dockerfile's final stage */
#define DF_LINE        2048 /* one instruction, continuation lines joined */

static yaml_document_t doc; /* docker-compose.yml, loaded by .init */
static int doc_loaded;      /* doc must be deleted by .fini */

/* A command as words: a sequence's items, or a scalar split on blanks. */
struct words {
    int n;               /* words in w */
    char *w[MAX_WORDS];  /* borrowed from buf */
    char buf[WORDS_BUF]; /* NUL-separated word text */
};

/* ---------------- Loading and lookups ---------------- */

static void compose_init(void)
{
    yaml_parser_t parser;
    FILE *f = fopen(COMPOSE_FILE, "rb");

    cr_assert_not_null(f, "cannot open %s", COMPOSE_FILE);
    cr_assert(yaml_parser_initialize(&parser));
    yaml_parser_set_input_file(&parser, f);
    int ok = yaml_parser_load(&parser, &doc);
    char problem[256];
    snprintf(problem, sizeof(problem), "%s at line %zu",
             parser.problem != NULL ? parser.problem : "?",
             parser.problem_mark.line + 1);
    yaml_parser_delete(&parser);
    fclose(f);
    cr_assert(ok, "%s: %s", COMPOSE_FILE, problem);
    doc_loaded = 1;
    cr_assert_not_null(yaml_document_get_root_node(&doc), "empty file");
}

static void compose_fini(void)
{
    if (doc_loaded) {
        yaml_document_delete(&doc);
        doc_loaded = 0;
    }
}

/* True when node is the scalar `s`. */
static int scalar_is(const yaml_node_t *node, const char *s)
{
    return node != NULL && node->type == YAML_SCALAR_NODE &&
           node->data.scalar.length == strlen(s) &&
           memcmp(node->data.scalar.value, s, strlen(s)) == 0;
}

/* The value of `key` in a mapping node, or NULL. */
static yaml_node_t *map_get(yaml_node_t *map, const char *key)
{
    if (map == NULL || map->type != YAML_MAPPING_NODE) {
        return NULL;
    }
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start;
         p < map->data.mapping.pairs.top; p++) {
        if (scalar_is(yaml_document_get_node(&doc, p->key), key)) {
            return yaml_document_get_node(&doc, p->value);
        }
    }
    return NULL;
}

/* The "services" mapping. */
static yaml_node_t *services(void)
{
    yaml_node_t *s = map_get(yaml_document_get_root_node(&doc), "services");
    cr_assert(s != NULL && s->type == YAML_MAPPING_NODE, "no services mapping");
    return s;
}

/* A service by name, or NULL. */
static yaml_node_t *service(const char *name)
{
    return map_get(services(), name);
}

/* The NUL-terminated text of a scalar (libyaml terminates scalars). */
static const char *scalar_text(const yaml_node_t *node)
{
    cr_assert(node != NULL && node->type == YAML_SCALAR_NODE,
              "expected a scalar");
    return (const char *)node->data.scalar.value;
}

/* Appends one word of len bytes to w. */
static void words_add(struct words *w, size_t *used, const char *p, size_t len)
{
    cr_assert(w->n < MAX_WORDS && *used + len + 1 <= WORDS_BUF,
              "command too long");
    w->w[w->n++] = w->buf + *used;
    memcpy(w->buf + *used, p, len);
    w->buf[*used + len] = '\0';
    *used += len + 1;
}

/* Splits a scalar on blanks and shell ';' into w. */
static void words_split(struct words *w, size_t *used, const char *s)
{
    while (*s != '\0') {
        size_t skip = strspn(s, " \t\r\n;"), len;
        s += skip;
        len = strcspn(s, " \t\r\n;");
        if (len > 0) {
            words_add(w, used, s, len);
        }
        s += len;
    }
}

/* The words of a service's `key` (command, entrypoint). */
static void words_of(struct words *w, yaml_node_t *svc, const char *key)
{
    yaml_node_t *cmd = map_get(svc, key);
    size_t used = 0;

    w->n = 0;
    cr_assert_not_null(cmd, "no %s", key);
    if (cmd->type == YAML_SCALAR_NODE) {
        words_split(w, &used, scalar_text(cmd));
        return;
    }
    cr_assert_eq(cmd->type, YAML_SEQUENCE_NODE, "%s: not a list", key);
    for (yaml_node_item_t *it = cmd->data.sequence.items.start;
         it < cmd->data.sequence.items.top; it++) {
        const char *s = scalar_text(yaml_document_get_node(&doc, *it));
        if (strchr(s, '\n') != NULL || strchr(s, ' ') != NULL) {
            words_split(w, &used, s); /* a shell script item */
        } else {
            words_add(w, &used, s, strlen(s));
        }
    }
}

/* Index of the first word equal to s, or -1. */
static int words_find(const struct words *w, const char *s)
{
    for (int i = 0; i < w->n; i++) {
        if (strcmp(w->w[i], s) == 0) {
            return i;
        }
    }
    return -1;
}

/* True when a word is `node` or "node:port". */
static int words_name(const struct words *w, const char *node)
{
    size_t n = strlen(node);
    for (int i = 0; i < w->n; i++) {
        if (strncmp(w->w[i], node, n) == 0 &&
            (w->w[i][n] == '\0' || w->w[i][n] == ':')) {
            return 1;
        }
    }
    return 0;
}

/* The word after flag; asserts there is one. */
static const char *words_value(const struct words *w, const char *flag)
{
    int i = words_find(w, flag);
    cr_assert(i >= 0 && i + 1 < w->n, "no %s <value>", flag);
    return w->w[i + 1];
}

/* True when the sequence or mapping `deps` (depends_on) names `name`. */
static int depends_on(yaml_node_t *svc, const char *name)
{
    yaml_node_t *deps = map_get(svc, "depends_on");
    if (deps == NULL) {
        return 0;
    }
    if (deps->type == YAML_MAPPING_NODE) {
        return map_get(deps, name) != NULL;
    }
    if (deps->type != YAML_SEQUENCE_NODE) {
        return 0;
    }
    for (yaml_node_item_t *it = deps->data.sequence.items.start;
         it < deps->data.sequence.items.top; it++) {
        if (scalar_is(yaml_document_get_node(&doc, *it), name)) {
            return 1;
        }
    }
    return 0;
}

/* Name of redis node i (1-based). */
static void node_name(char *out, size_t outlen, int i)
{
    snprintf(out, outlen, "redis-%d", i);
}

/* The service whose command runs `redis-cli --cluster create`, or NULL;
 * its words in w. */
static yaml_node_t *init_service(struct words *w, const char **name)
{
    yaml_node_t *s = services();
    for (yaml_node_pair_t *p = s->data.mapping.pairs.start;
         p < s->data.mapping.pairs.top; p++) {
        yaml_node_t *svc = yaml_document_get_node(&doc, p->value);
        if (map_get(svc, "command") == NULL) {
            continue;
        }
        words_of(w, svc, "command");
        int i = words_find(w, "--cluster");
        if (i >= 0 && i + 1 < w->n && strcmp(w->w[i + 1], "create") == 0 &&
            words_find(w, "redis-cli") >= 0) {
            *name = scalar_text(yaml_document_get_node(&doc, p->key));
            return svc;
        }
    }
    return NULL;
}

/* The sequence or scalar `key` of a mapping holds the scalar s. */
static int list_has(yaml_node_t *map, const char *key, const char *s)
{
    yaml_node_t *v = map_get(map, key);
    if (v != NULL && v->type == YAML_SCALAR_NODE) {
        return scalar_is(v, s);
    }
    if (v == NULL || v->type != YAML_SEQUENCE_NODE) {
        return 0;
    }
    for (yaml_node_item_t *it = v->data.sequence.items.start;
         it < v->data.sequence.items.top; it++) {
        if (scalar_is(yaml_document_get_node(&doc, *it), s)) {
            return 1;
        }
    }
    return 0;
}

/* ---------------- The Dockerfile's final stage ---------------- */

/* Its instructions, continuation lines joined, comments dropped. */
struct dockerfile {
    int n;     /* lines in line */
    int final; /* index of the last FROM: the image's stage starts there */
    char line[DF_MAX_LINES][DF_LINE];
};

static void dockerfile_load(struct dockerfile *d)
{
    char raw[DF_LINE];
    size_t used = 0;
    FILE *f = fopen(DOCKERFILE, "rb");

    cr_assert_not_null(f, "no %s", DOCKERFILE);
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
            cr_assert_lt(d->n, DF_MAX_LINES, "Dockerfile too long");
            d->line[d->n][0] = '\0';
        }
        int cont = len > 0 && raw[len - 1] == '\\';
        if (cont) {
            raw[--len] = '\0';
        }
        cr_assert_lt(used + strlen(p) + 1, (size_t)DF_LINE, "line too long");
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
static const char *dockerfile_get(const struct dockerfile *d, const char *instr)
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
static void exec_words(struct words *w, const char *s)
{
    size_t used = 0;

    w->n = 0;
    cr_assert_eq(*s, '[', "not in exec form: %s", s);
    while ((s = strchr(s, '"')) != NULL) {
        const char *end = strchr(s + 1, '"');
        cr_assert_not_null(end, "unterminated string");
        words_add(w, &used, s + 1, (size_t)(end - s - 1));
        s = end + 1;
    }
}

/* The repository file (relative to the source dir) the final stage COPYs
 * to `dest` from the build context, or NULL. */
static const char *dockerfile_copied(const struct dockerfile *d,
                                     const char *dest, char *out, size_t len)
{
    for (int i = d->final; i < d->n; i++) {
        char src[DF_LINE], dst[DF_LINE];
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
static int dockerfile_installs(const struct dockerfile *d, int final,
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
static const char *image_config(const struct dockerfile *d, struct words *w)
{
    const char *ep = dockerfile_get(d, "ENTRYPOINT");
    cr_assert_not_null(ep, "no ENTRYPOINT");
    exec_words(w, ep);
    cr_assert_gt(w->n, 0);
    cr_assert_not_null(strstr(w->w[0], "cellgate"),
                       "the ENTRYPOINT runs %s, not cellgate", w->w[0]);
    return words_value(w, "--config");
}

/* ---------------- Configurations ---------------- */

/* Loads the repository's file `rel` as proxy.yaml into c. */
static void conf_of(struct conf *c, const char *rel)
{
    char path[PX_PATH_MAX], err[512] = "";
    snprintf(path, sizeof(path), "%s/%s", PX_SOURCE_DIR, rel);
    cr_assert_eq(conf_init(c), CONF_OK);
    cr_assert_eq(conf_load_file(c, path, err, sizeof(err)), CONF_OK, "%s: %s",
                 rel, err);
}

/* A container's listeners: on every address, at the published port. */
static void check_listens_outside(const struct conf *c, const char *rel)
{
    cr_assert_str_eq(c->listen.host, ANY_ADDRESS,
                     "%s: listen on %s: unreachable from outside the "
                     "container",
                     rel, c->listen.host);
    cr_assert_eq(c->listen.port, PROXY_PORT, "%s: listen port %d", rel,
                 c->listen.port);
    cr_assert_str_eq(c->metrics_listen.host, ANY_ADDRESS,
                     "%s: metrics_listen on %s", rel, c->metrics_listen.host);
    cr_assert_eq(c->metrics_listen.port, METRICS_PORT,
                 "%s: metrics_listen port %d", rel, c->metrics_listen.port);
}

/* `cellgate --config <rel> --limits <limits> [extra] --check-config`
 * passes: the file's keys and the tree the image ships parse together. */
static void check_config_passes(const char *rel, const char *limits,
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
static void check_limits_shipped(const struct dockerfile *d,
                                 const struct conf *c, const char *rel)
{
    char src[DF_LINE];
    cr_assert_not_null(c->limits_file, "%s names no limits_file", rel);
    cr_assert_not_null(dockerfile_copied(d, c->limits_file, src, sizeof(src)),
                       "%s: limits_file %s is not in the image", rel,
                       c->limits_file);
    cr_assert_str_eq(src, EXAMPLE_LIMITS, "the image's %s is %s",
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
static int ignored(const char *text, const char *path)
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

/* ---------------- Tests ---------------- */

Test(it_compose, every_redis_node_runs_redis_7_in_cluster_mode,
     .init = compose_init, .fini = compose_fini)
{
    for (int i = 1; i <= REDIS_NODES; i++) {
        char name[16];
        struct words w;
        node_name(name, sizeof(name), i);
        yaml_node_t *svc = service(name);
        cr_assert_not_null(svc, "no service %s", name);
        const char *image = scalar_text(map_get(svc, "image"));
        cr_assert(strncmp(image, REDIS_IMAGE, strlen(REDIS_IMAGE)) == 0,
                  "%s: image %s is not redis 7", name, image);
        words_of(&w, svc, "command");
        cr_assert_str_eq(w.w[0], "redis-server", "%s runs %s", name, w.w[0]);
        cr_assert_str_eq(words_value(&w, "--cluster-enabled"), "yes",
                         "%s: cluster mode is off", name);
        cr_assert_str_eq(words_value(&w, "--port"), "6379");
        cr_assert_not_null(map_get(svc, "healthcheck"),
                           "%s: no healthcheck to wait on", name);
        /* What the official image would decide is said in the file. */
        cr_assert_str_eq(words_value(&w, "--protected-mode"), "no",
                         "%s: protected mode left to the image", name);
        cr_assert_gt(strlen(words_value(&w, "--dir")), 0, "%s: no --dir", name);
        cr_assert_str_eq(words_value(&w, "--save"), "", "%s persists", name);
        cr_assert_str_eq(words_value(&w, "--appendonly"), "no",
                         "%s keeps an AOF", name);
    }
}

Test(it_compose, init_service_creates_the_cluster_with_one_replica_each,
     .init = compose_init, .fini = compose_fini)
{
    struct words w;
    const char *name = NULL;
    yaml_node_t *svc = init_service(&w, &name);

    cr_assert_not_null(svc, "no service runs redis-cli --cluster create");
    cr_assert_str_eq(words_value(&w, "--cluster-replicas"), "1");
    cr_assert_geq(words_find(&w, "--cluster-yes"), 0, "no --cluster-yes");
    /* One-shot: never restarted once the cluster exists. */
    yaml_node_t *restart = map_get(svc, "restart");
    cr_assert(restart == NULL || scalar_is(restart, "no"),
              "%s has a restart policy other than \"no\"", name);
    for (int i = 1; i <= REDIS_NODES; i++) {
        char node[16];
        node_name(node, sizeof(node), i);
        cr_assert(words_name(&w, node), "%s does not join %s", name, node);
        cr_assert(depends_on(svc, node), "%s does not wait for %s", name, node);
    }
}

Test(it_compose, cellgate_builds_from_the_dockerfile_and_publishes_7777,
     .init = compose_init, .fini = compose_fini)
{
    yaml_node_t *svc = service(PROXY_SERVICE);
    struct words w;
    const char *init = NULL;

    cr_assert_not_null(svc, "no service " PROXY_SERVICE);
    yaml_node_t *build = map_get(svc, "build");
    cr_assert_not_null(build, PROXY_SERVICE " is not built");
    if (build->type == YAML_SCALAR_NODE) {
        cr_assert_str_eq(scalar_text(build), ".");
    } else {
        cr_assert_str_eq(scalar_text(map_get(build, "context")), ".");
        yaml_node_t *df = map_get(build, "dockerfile");
        cr_assert(df == NULL || scalar_is(df, "Dockerfile"),
                  PROXY_SERVICE " is not built from the Dockerfile");
    }
    FILE *f = fopen(DOCKERFILE, "rb");
    cr_assert_not_null(f, "no %s", DOCKERFILE);
    char line[512];
    int entry = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        entry |= strncmp(line, "ENTRYPOINT", 10) == 0 &&
                 strstr(line, "cellgate") != NULL;
    }
    fclose(f);
    cr_assert(entry, "the Dockerfile's ENTRYPOINT is not cellgate");

    yaml_node_t *ports = map_get(svc, "ports");
    cr_assert(ports != NULL && ports->type == YAML_SEQUENCE_NODE, "no ports");
    int published = 0;
    for (yaml_node_item_t *it = ports->data.sequence.items.start;
         it < ports->data.sequence.items.top; it++) {
        published |=
            scalar_is(yaml_document_get_node(&doc, *it), PROXY_PUBLISH);
    }
    cr_assert(published, "port " PROXY_PUBLISH " is not published");
    cr_assert(list_has(svc, "ports", METRICS_PUBLISH),
              "the metrics port " METRICS_PUBLISH " is not published");

    /* The listeners come from the mounted proxy.yaml (checked below); a
     * --listen in the command would have to take every address too. */
    words_of(&w, svc, "command");
    int li = words_find(&w, "--listen");
    cr_assert(li < 0 || (li + 1 < w.n &&
                         strncmp(w.w[li + 1], ANY_ADDRESS ":", 8) == 0),
              "--listen %s is unreachable from outside the container",
              li + 1 < w.n ? w.w[li + 1] : "");
    cr_assert_lt(words_find(&w, "--upstream"), 0, "--upstream with --cluster");
    struct words iw;
    cr_assert_not_null(init_service(&iw, &init));
    cr_assert(depends_on(svc, init), PROXY_SERVICE " does not wait for %s",
              init);
}

/* The testbench's proxy.yaml is a file of the repository, mounted
 * read-only over the one the image's ENTRYPOINT loads (so no second
 * --config is needed): listeners on every address at the published ports,
 * the example limits tree the image ships (the README's LIMITER examples
 * answer as with scripts/run.sh), and an admin password (limiter
 * administration needs one, and there is none by default). */
Test(it_compose, cellgate_runs_a_mounted_proxy_yaml_over_the_images,
     .init = compose_init, .fini = compose_fini, .timeout = 30)
{
    yaml_node_t *svc = service(PROXY_SERVICE);
    struct dockerfile *d = malloc(sizeof(*d));
    struct words w, ew;
    struct conf c;
    const char *rel = NULL;
    char want[PX_PATH_MAX], src[PX_PATH_MAX];

    cr_assert_not_null(d);
    dockerfile_load(d);
    const char *conf = image_config(d, &ew);
    words_of(&w, svc, "command");
    cr_assert_lt(words_find(&w, "--config"), 0,
                 "a --config in the command replaces the mounted file");
    yaml_node_t *vols = map_get(svc, "volumes");
    cr_assert(vols != NULL && vols->type == YAML_SEQUENCE_NODE, "no volumes");
    snprintf(want, sizeof(want), ":%s:ro", conf);
    for (yaml_node_item_t *it = vols->data.sequence.items.start;
         it < vols->data.sequence.items.top; it++) {
        const char *v = scalar_text(yaml_document_get_node(&doc, *it));
        const char *at = strstr(v, want);
        if (at != NULL && at[strlen(want)] == '\0' &&
            strncmp(v, "./", 2) == 0) {
            snprintf(src, sizeof(src), "%.*s", (int)(at - v - 2), v + 2);
            rel = src;
        }
    }
    cr_assert_not_null(rel,
                       "no file of the repository is mounted read-only "
                       "over the image's %s",
                       conf);
    conf_of(&c, rel);
    check_listens_outside(&c, rel);
    cr_assert_not_null(c.admin_password, "%s sets no admin_password", rel);
    check_limits_shipped(d, &c, rel);
    check_config_passes(rel, EXAMPLE_LIMITS, NULL, NULL);
    conf_free(&c);
    free(d);
}

/* `down` leaves nothing: the redis image declares VOLUME /data, an
 * anonymous volume per container and per `up` unless something is mounted
 * there; every service of that image mounts a tmpfs on it, and every
 * volume a service lists names its source. */
Test(it_compose, no_service_leaves_an_anonymous_volume, .init = compose_init,
     .fini = compose_fini)
{
    yaml_node_t *s = services();
    yaml_node_t *named = map_get(yaml_document_get_root_node(&doc), "volumes");

    for (yaml_node_pair_t *p = s->data.mapping.pairs.start;
         p < s->data.mapping.pairs.top; p++) {
        const char *name = scalar_text(yaml_document_get_node(&doc, p->key));
        yaml_node_t *svc = yaml_document_get_node(&doc, p->value);
        yaml_node_t *image = map_get(svc, "image");
        if (image != NULL && strncmp(scalar_text(image), "redis:", 6) == 0) {
            cr_assert(list_has(svc, "tmpfs", REDIS_DIR),
                      "%s: the image's VOLUME " REDIS_DIR
                      " becomes an anonymous volume",
                      name);
        }
        yaml_node_t *vols = map_get(svc, "volumes");
        if (vols == NULL) {
            continue;
        }
        cr_assert_eq(vols->type, YAML_SEQUENCE_NODE, "%s: volumes", name);
        for (yaml_node_item_t *it = vols->data.sequence.items.start;
             it < vols->data.sequence.items.top; it++) {
            const char *v = scalar_text(yaml_document_get_node(&doc, *it));
            const char *colon = strchr(v, ':');
            char src[256];
            cr_assert_not_null(colon,
                               "%s: volume %s has no source: "
                               "anonymous",
                               name, v);
            snprintf(src, sizeof(src), "%.*s", (int)(colon - v), v);
            cr_assert(src[0] == '.' || src[0] == '/' ||
                          map_get(named, src) != NULL,
                      "%s: volume source %s is not declared", name, src);
        }
    }
}

Test(it_compose, cellgate_cluster_seeds_are_redis_services,
     .init = compose_init, .fini = compose_fini)
{
    struct words w;
    char seeds[512];
    int n = 0, named[REDIS_NODES + 1] = { 0 };

    words_of(&w, service(PROXY_SERVICE), "command");
    snprintf(seeds, sizeof(seeds), "%s", words_value(&w, "--cluster"));
    for (char *save = NULL, *s = strtok_r(seeds, ",", &save); s != NULL;
         s = strtok_r(NULL, ",", &save)) {
        char *colon = strrchr(s, ':');
        cr_assert_not_null(colon, "seed %s has no port", s);
        *colon = '\0';
        yaml_node_t *svc = service(s);
        cr_assert_not_null(svc, "seed %s is not a service", s);
        struct words nw;
        words_of(&nw, svc, "command");
        cr_assert_str_eq(words_value(&nw, "--cluster-enabled"), "yes",
                         "seed %s is not a cluster node", s);
        cr_assert_str_eq(colon + 1, words_value(&nw, "--port"),
                         "seed %s: port %s, it listens on %s", s, colon + 1,
                         words_value(&nw, "--port"));
        int i = 0;
        cr_assert(sscanf(s, "redis-%d", &i) == 1 && i >= 1 && i <= REDIS_NODES,
                  "seed %s", s);
        named[i] = 1;
        n++;
    }
    cr_assert_eq(n, REDIS_NODES, "%d seeds, not %d", n, REDIS_NODES);
    for (int i = 1; i <= REDIS_NODES; i++) {
        cr_assert(named[i], "redis-%d is not a seed", i);
    }
}

/* ---------------- The image ---------------- */

/* The build context: a host build tree (scripts/run.sh's build/, the
 * test builds build-*) makes the image's own CMake configure refuse its
 * CMakeCache.txt; .git and node_modules are large and never read. What the
 * build needs stays in. */
Test(it_compose, dockerignore_leaves_build_trees_git_and_node_modules_out)
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
    char *text = px_read_file(DOCKERIGNORE, NULL);

    cr_assert_not_null(text, "no %s", DOCKERIGNORE);
    for (size_t i = 0; i < sizeof(out) / sizeof(out[0]); i++) {
        cr_assert(ignored(text, out[i]), ".dockerignore sends %s", out[i]);
    }
    for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
        char path[PX_PATH_MAX];
        snprintf(path, sizeof(path), "%s/%s", PX_SOURCE_DIR, in[i]);
        cr_assert_eq(access(path, R_OK), 0, "%s is gone: update this test",
                     in[i]);
        cr_assert(!ignored(text, in[i]), ".dockerignore leaves out %s", in[i]);
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

Test(it_compose, image_installs_every_library_the_build_finds)
{
    char path[PX_PATH_MAX];
    struct dockerfile *d = malloc(sizeof(*d));

    cr_assert_not_null(d);
    dockerfile_load(d);
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
        cr_assert(dockerfile_installs(d, 0, image_libs[i].dev),
                  "the build stage does not install %s (%s)", image_libs[i].dev,
                  image_libs[i].cmake);
        cr_assert(dockerfile_installs(d, 1, image_libs[i].run),
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
Test(it_compose, image_runs_its_own_config_as_a_non_root_user)
{
    struct dockerfile *d = malloc(sizeof(*d));
    struct words w, cw;
    char src[DF_LINE], user[64];

    cr_assert_not_null(d);
    dockerfile_load(d);
    const char *conf = image_config(d, &w);
    cr_assert_not_null(dockerfile_copied(d, conf, src, sizeof(src)),
                       "the image has no %s", conf);
    const char *cmd = dockerfile_get(d, "CMD");
    if (cmd != NULL) {
        exec_words(&cw, cmd);
        cr_assert_eq(cw.n, 0, "CMD %s: default flags a user's replace", cmd);
    }
    const char *u = dockerfile_get(d, "USER");
    cr_assert_not_null(u, "the image runs as root");
    snprintf(user, sizeof(user), "%.*s", (int)strcspn(u, ": "), u);
    cr_assert(strcmp(user, "root") != 0 && strcmp(user, "0") != 0,
              "the image runs as %s", u);
    const char *hc = dockerfile_get(d, "HEALTHCHECK");
    cr_assert(hc != NULL && strncmp(hc, "NONE", 4) != 0, "no HEALTHCHECK");
    cr_assert_not_null(strstr(hc, "7777"), "the health check asks %s", hc);
    const char *ex = dockerfile_get(d, "EXPOSE");
    cr_assert(ex != NULL && strstr(ex, "7777") != NULL &&
                  strstr(ex, "9121") != NULL,
              "EXPOSE %s", ex != NULL ? ex : "(none)");
    free(d);
}

/* The image's proxy.yaml listens on every address (in a container
 * 127.0.0.1 is its own loopback), opens the metrics endpoint, names the
 * tree the image ships and no admin password (closed by default); it and
 * that tree pass --check-config, with a user's --upstream over them. */
Test(it_compose, image_config_listens_outside_with_the_example_tree,
     .timeout = 30)
{
    struct dockerfile *d = malloc(sizeof(*d));
    struct words w;
    struct conf c;
    char src[DF_LINE];

    cr_assert_not_null(d);
    dockerfile_load(d);
    cr_assert_not_null(
        dockerfile_copied(d, image_config(d, &w), src, sizeof(src)));
    conf_of(&c, src);
    check_listens_outside(&c, src);
    cr_assert_null(c.admin_password, "%s opens limiter administration", src);
    cr_assert_eq(c.upstream.port, 0, "%s names an upstream", src);
    check_limits_shipped(d, &c, src);
    check_config_passes(src, EXAMPLE_LIMITS, "--upstream", "redis:6379");
    conf_free(&c);
    free(d);
}

/* The README's first screen, through the image's files: its proxy.yaml and
 * the tree it ships, listeners moved to loopback ports by flags (as a
 * user's flags would move them), embedded. LIMITER CHECK answers the
 * README's [0, 6, 5, -1, 4], LIMITER RULES lists user:*:trade, and the
 * decision is on /metrics. */
Test(it_compose, readme_limiter_examples_answer_through_the_images_files,
     .fini = px_env_fini, .timeout = 60)
{
    static char conf[PX_PATH_MAX], limits[PX_PATH_MAX], metrics[64];
    static const char *args[8];
    struct dockerfile *d = malloc(sizeof(*d));
    struct words w;
    static char buf[1 << 18]; /* the whole scrape */
    char src[256];
    int closed = 0;
    int mport = px_free_port();

    cr_assert_not_null(d);
    dockerfile_load(d);
    cr_assert_not_null(
        dockerfile_copied(d, image_config(d, &w), src, sizeof(src)));
    snprintf(conf, sizeof(conf), "%s/%s", PX_SOURCE_DIR, src);
    snprintf(limits, sizeof(limits), "%s/%s", PX_SOURCE_DIR, EXAMPLE_LIMITS);
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
    /* One line per node with limits, in one bulk string. */
    cr_assert_eq(r->type, REDIS_REPLY_STRING, "LIMITER RULES: type %d",
                 r->type);
    int found = strncmp(r->str, "user:*:trade ", 13) == 0 ||
                strstr(r->str, "\nuser:*:trade ") != NULL;
    cr_assert(found, "LIMITER RULES lists no user:*:trade");
    freeReplyObject(r);
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
