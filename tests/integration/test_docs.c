/* The documentation's proxy.yaml files are valid: what a user copies from
 * README.md's "## Deploying" section, and conf/proxy.example.yaml, passes
 * `cellgate --check-config`.
 *
 * The README's blocks name files under /etc and /run (certificates, keys,
 * password files, a limits file) that exist only where cellgate is
 * deployed. Each such path is replaced by a file made in the test's temp
 * dir: the TLS fixture's certificate and key for *.crt and *.key (they
 * match, as tls_cert_file and tls_key_file must), the example limits tree
 * for a limits file, one line for anything else (a password file). Every
 * other word of the block stays as written, so an unknown key or a bad
 * value in the README fails here. */
#include "tests/support/px_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/integration/container_files.h"
#include "tests/integration/fixture.h"
#include "tests/integration/tls_fixture.h"

PX_TEST_SUITE(it_docs);

#define EXAMPLE_PROXY PX_SOURCE_DIR "/conf/proxy.example.yaml"

/* The README's managed-Redis block uses TLS keys, which a -DPX_TLS=OFF
 * build refuses, and its certificates come from the TLS fixture. */
#if defined(PX_TLS) && PX_TLS

#define README_FILE     PX_SOURCE_DIR "/README.md"
#define DEPLOY_HEADING  "\n## Deploying\n"
#define YAML_FENCE      "```yaml\n"
#define FENCE_END       "\n```"
#define DOCS_MAX_BLOCKS 16
#define DOCS_YAML_MAX   8192 /* one block with its paths replaced */
#define DOCS_SECRET     "a-password-from-a-file\n"

/* One ```yaml block of the section. */
struct docs_block {
    const char *text; /* borrowed from the README's text */
    size_t len;       /* bytes of text, up to the closing fence's newline */
    int line;         /* README line of its first yaml line */
};

/* README line (1-based) of the byte at p. */
static int line_of(const char *start, const char *p)
{
    int line = 1;
    for (const char *q = start; q < p; q++) {
        line += *q == '\n';
    }
    return line;
}

/* Finds the ```yaml blocks of the "## Deploying" section of readme (up to
 * the next "## " heading) and returns how many. */
static int deploy_blocks(const char *readme, struct docs_block *b, int max)
{
    const char *sec = strstr(readme, DEPLOY_HEADING);
    cr_assert_not_null(sec, "README.md has no \"## Deploying\" section");
    sec += strlen(DEPLOY_HEADING);
    const char *end = strstr(sec, "\n## ");
    if (end == NULL) {
        end = sec + strlen(sec);
    }
    int n = 0;
    for (const char *p = strstr(sec, YAML_FENCE); p != NULL && p < end;
         p = strstr(p, YAML_FENCE)) {
        p += strlen(YAML_FENCE);
        const char *close = strstr(p - 1, FENCE_END);
        cr_assert(close != NULL && close < end,
                  "README.md:%d: a ```yaml block is not closed",
                  line_of(readme, p));
        cr_assert_lt(n, max, "more than %d yaml blocks", max);
        b[n].text = p;
        b[n].len = (size_t)(close + 1 - p);
        b[n].line = line_of(readme, p);
        n++;
        p = close + strlen(FENCE_END);
    }
    return n;
}

/* True for a byte that ends a path in YAML text. */
static int path_end(char c)
{
    return c == '\0' || c == ' ' || c == '\t' || c == '\n' || c == '"' ||
           c == '\'' || c == ',' || c == ']' || c == '#';
}

/* Whether an absolute path under /etc or /run starts at p (at the start of
 * a YAML value: after a space, a quote, '[' or ','). */
static int deploy_path_at(const char *text, const char *p)
{
    if (strncmp(p, "/etc/", 5) != 0 && strncmp(p, "/run/", 5) != 0) {
        return 0;
    }
    return p == text || strchr(" \t\"'[,", p[-1]) != NULL;
}

/* The stand-in for the deployment's file `path` (len bytes): its name in
 * the temp dir, made on first use, written to out. */
static void stand_in(const char *path, size_t len, int block, char *out,
                     size_t outlen)
{
    const struct px_tls_certs *certs = px_tls_certs();
    char name[128];
    const char *base = path;

    for (size_t i = 0; i < len; i++) {
        if (path[i] == '/') {
            base = path + i + 1;
        }
    }
    int blen = (int)(len - (size_t)(base - path));
    if (blen > 4 && strncmp(base + blen - 4, ".crt", 4) == 0) {
        snprintf(out, outlen, "%s", certs->server);
        return;
    }
    if (blen > 4 && strncmp(base + blen - 4, ".key", 4) == 0) {
        snprintf(out, outlen, "%s", certs->server_key);
        return;
    }
    snprintf(name, sizeof(name), "docs-%d-%.*s", block, blen, base);
    if (strstr(name, "limits") != NULL) {
        char *limits = px_read_file(PX_SOURCE_DIR "/" CF_EXAMPLE_LIMITS, NULL);
        cr_assert_not_null(limits, "cannot read %s", CF_EXAMPLE_LIMITS);
        px_write_file(out, outlen, name, limits);
        free(limits);
        return;
    }
    px_write_file(out, outlen, name, DOCS_SECRET);
}

/* Writes block b (number `block`) with every /etc and /run path replaced
 * to the temp dir as docs-<block>.yaml; its path in out. */
static void write_block(const struct docs_block *b, int block, char *out,
                        size_t outlen)
{
    static char yaml[DOCS_YAML_MAX];
    char file[PX_PATH_MAX], name[32];
    size_t used = 0;

    for (size_t i = 0; i < b->len;) {
        const char *p = b->text + i;
        size_t take = 1;
        const char *piece = p;
        if (deploy_path_at(b->text, p)) {
            size_t len = 0;
            while (i + len < b->len && !path_end(p[len])) {
                len++;
            }
            stand_in(p, len, block, file, sizeof(file));
            piece = file;
            take = strlen(file);
            i += len;
        } else {
            i++;
        }
        cr_assert_lt(used + take, sizeof(yaml), "block %d too long", block);
        memcpy(yaml + used, piece, take);
        used += take;
    }
    yaml[used] = '\0';
    snprintf(name, sizeof(name), "docs-%d.yaml", block);
    px_write_file(out, outlen, name, yaml);
}

/* Every ```yaml block of "## Deploying" passes --check-config, with its
 * deployment's files stood in for. A misspelt key or a bad value in the
 * README fails with the README's line and cellgate's error. */
Test(it_docs, readme_deploying_examples_pass_check_config, .fini = px_env_fini,
     .timeout = 60)
{
    struct docs_block b[DOCS_MAX_BLOCKS];
    char *readme = px_read_file(README_FILE, NULL);
    cr_assert_not_null(readme, "cannot read %s", README_FILE);
    int n = deploy_blocks(readme, b, DOCS_MAX_BLOCKS);
    cr_assert_gt(n, 0, "README.md's \"## Deploying\" has no ```yaml block");

    for (int k = 0; k < n; k++) {
        char path[PX_PATH_MAX];
        struct px_run res;
        write_block(&b[k], k, path, sizeof(path));
        const char *argv[] = { PX_CELLGATE_BIN, "--config", path,
                               "--check-config", NULL };
        px_run(&res, argv);
        if (res.status != 0) {
            char *yaml = px_read_file(path, NULL);
            fprintf(stderr, "--- README.md:%d, as checked (%s):\n%s", b[k].line,
                    path, yaml != NULL ? yaml : "");
            free(yaml);
        }
        cr_assert_eq(res.status, 0,
                     "README.md:%d: the yaml block fails --check-config "
                     "(exit %d; line N of the block is README line %d + N "
                     "- 1): %s%s",
                     b[k].line, res.status, b[k].line, res.out, res.err);
        px_run_free(&res);
    }
    free(readme);
}

#endif /* PX_TLS */

/* conf/proxy.example.yaml, "every setting, shown with its default value",
 * is a file a user can start from: it passes --check-config as it is (the
 * unit tests only parse it; this also builds what the check builds). */
Test(it_docs, proxy_example_passes_check_config, .fini = px_env_fini,
     .timeout = 30)
{
    struct px_run res;
    const char *argv[] = { PX_CELLGATE_BIN, "--config", EXAMPLE_PROXY,
                           "--check-config", NULL };
    px_run(&res, argv);
    cr_assert_eq(res.status, 0, "conf/proxy.example.yaml: exit %d: %s%s",
                 res.status, res.out, res.err);
    px_run_free(&res);
}
