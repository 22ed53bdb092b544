/* docker-compose.yml describes the cluster testbench it claims to.
 *
 * Docker cannot run where the tests run, so this suite reads the file with
 * libyaml's document API (aliases resolved, as compose resolves them) and
 * checks its shape: six redis 7 nodes in cluster mode that say
 * --protected-mode no and --dir, persist nothing, and mount a tmpfs where
 * the image declares its VOLUME (no anonymous volume left by `down`); a
 * one-shot service that joins them with `redis-cli --cluster create ...
 * --cluster-replicas 1 --cluster-yes` once they answer; and cellgate built
 * from the repository's Dockerfile, published on 127.0.0.1:7777 and :9121,
 * whose --cluster seeds are services of the file and whose proxy.yaml, a
 * repository file mounted over the image's, listens on 0.0.0.0 with the
 * example limits tree. The image itself: test_image.c. */
#include "tests/support/px_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "conf/conf.h"
#include "tests/integration/container_files.h"
#include "tests/integration/fixture.h"

PX_TEST_SUITE(it_compose);

#define COMPOSE_FILE    PX_SOURCE_DIR "/docker-compose.yml"
#define REDIS_NODES     6 /* redis-1 .. redis-6 */
#define REDIS_IMAGE     "redis:7"
#define PROXY_SERVICE   "cellgate"
#define PROXY_PUBLISH   "127.0.0.1:7777:7777"
#define METRICS_PUBLISH "127.0.0.1:9121:9121"
#define REDIS_DIR       "/data" /* the redis image's VOLUME: a tmpfs here */

static yaml_document_t doc; /* docker-compose.yml, loaded by .init */
static int doc_loaded;      /* doc must be deleted by .fini */

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

/* Splits a scalar on blanks and shell ';' into w. */
static void words_split(struct cf_words *w, size_t *used, const char *s)
{
    while (*s != '\0') {
        size_t skip = strspn(s, " \t\r\n;"), len;
        s += skip;
        len = strcspn(s, " \t\r\n;");
        if (len > 0) {
            cf_words_add(w, used, s, len);
        }
        s += len;
    }
}

/* The words of a service's `key` (command, entrypoint). */
static void words_of(struct cf_words *w, yaml_node_t *svc, const char *key)
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
            cf_words_add(w, &used, s, strlen(s));
        }
    }
}

/* True when a word is `node` or "node:port". */
static int words_name(const struct cf_words *w, const char *node)
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
static yaml_node_t *init_service(struct cf_words *w, const char **name)
{
    yaml_node_t *s = services();
    for (yaml_node_pair_t *p = s->data.mapping.pairs.start;
         p < s->data.mapping.pairs.top; p++) {
        yaml_node_t *svc = yaml_document_get_node(&doc, p->value);
        if (map_get(svc, "command") == NULL) {
            continue;
        }
        words_of(w, svc, "command");
        int i = cf_words_find(w, "--cluster");
        if (i >= 0 && i + 1 < w->n && strcmp(w->w[i + 1], "create") == 0 &&
            cf_words_find(w, "redis-cli") >= 0) {
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

/* ---------------- Tests ---------------- */

Test(it_compose, every_redis_node_runs_redis_7_in_cluster_mode,
     .init = compose_init, .fini = compose_fini)
{
    for (int i = 1; i <= REDIS_NODES; i++) {
        char name[16];
        struct cf_words w;
        node_name(name, sizeof(name), i);
        yaml_node_t *svc = service(name);
        cr_assert_not_null(svc, "no service %s", name);
        const char *image = scalar_text(map_get(svc, "image"));
        cr_assert(strncmp(image, REDIS_IMAGE, strlen(REDIS_IMAGE)) == 0,
                  "%s: image %s is not redis 7", name, image);
        words_of(&w, svc, "command");
        cr_assert_str_eq(w.w[0], "redis-server", "%s runs %s", name, w.w[0]);
        cr_assert_str_eq(cf_words_value(&w, "--cluster-enabled"), "yes",
                         "%s: cluster mode is off", name);
        cr_assert_str_eq(cf_words_value(&w, "--port"), "6379");
        cr_assert_not_null(map_get(svc, "healthcheck"),
                           "%s: no healthcheck to wait on", name);
        /* What the official image would decide is said in the file. */
        cr_assert_str_eq(cf_words_value(&w, "--protected-mode"), "no",
                         "%s: protected mode left to the image", name);
        cr_assert_gt(strlen(cf_words_value(&w, "--dir")), 0, "%s: no --dir",
                     name);
        cr_assert_str_eq(cf_words_value(&w, "--save"), "", "%s persists", name);
        cr_assert_str_eq(cf_words_value(&w, "--appendonly"), "no",
                         "%s keeps an AOF", name);
    }
}

Test(it_compose, init_service_creates_the_cluster_with_one_replica_each,
     .init = compose_init, .fini = compose_fini)
{
    struct cf_words w;
    const char *name = NULL;
    yaml_node_t *svc = init_service(&w, &name);

    cr_assert_not_null(svc, "no service runs redis-cli --cluster create");
    cr_assert_str_eq(cf_words_value(&w, "--cluster-replicas"), "1");
    cr_assert_geq(cf_words_find(&w, "--cluster-yes"), 0, "no --cluster-yes");
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
    struct cf_words w;
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
    FILE *f = fopen(CF_DOCKERFILE, "rb");
    cr_assert_not_null(f, "no %s", CF_DOCKERFILE);
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
    int li = cf_words_find(&w, "--listen");
    cr_assert(li < 0 || (li + 1 < w.n &&
                         strncmp(w.w[li + 1], CF_ANY_ADDRESS ":", 8) == 0),
              "--listen %s is unreachable from outside the container",
              li + 1 < w.n ? w.w[li + 1] : "");
    cr_assert_lt(cf_words_find(&w, "--upstream"), 0,
                 "--upstream with --cluster");
    struct cf_words iw;
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
    struct cf_dockerfile *d = malloc(sizeof(*d));
    struct cf_words w, ew;
    struct conf c;
    const char *rel = NULL;
    char want[PX_PATH_MAX], src[PX_PATH_MAX];

    cr_assert_not_null(d);
    cf_dockerfile_load(d);
    const char *conf = cf_image_config(d, &ew);
    words_of(&w, svc, "command");
    cr_assert_lt(cf_words_find(&w, "--config"), 0,
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
    cf_conf_of(&c, rel);
    cf_check_listens_outside(&c, rel);
    cr_assert_not_null(c.admin_password, "%s sets no admin_password", rel);
    cf_check_limits_shipped(d, &c, rel);
    cf_check_config_passes(rel, CF_EXAMPLE_LIMITS, NULL, NULL);
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
    struct cf_words w;
    char seeds[512];
    int n = 0, named[REDIS_NODES + 1] = { 0 };

    words_of(&w, service(PROXY_SERVICE), "command");
    snprintf(seeds, sizeof(seeds), "%s", cf_words_value(&w, "--cluster"));
    for (char *save = NULL, *s = strtok_r(seeds, ",", &save); s != NULL;
         s = strtok_r(NULL, ",", &save)) {
        char *colon = strrchr(s, ':');
        cr_assert_not_null(colon, "seed %s has no port", s);
        *colon = '\0';
        yaml_node_t *svc = service(s);
        cr_assert_not_null(svc, "seed %s is not a service", s);
        struct cf_words nw;
        words_of(&nw, svc, "command");
        cr_assert_str_eq(cf_words_value(&nw, "--cluster-enabled"), "yes",
                         "seed %s is not a cluster node", s);
        cr_assert_str_eq(colon + 1, cf_words_value(&nw, "--port"),
                         "seed %s: port %s, it listens on %s", s, colon + 1,
                         cf_words_value(&nw, "--port"));
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
