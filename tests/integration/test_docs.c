/* The documentation holds: what a user copies from docs/operations.md's
 * "## Deploying" section, and conf/proxy.example.yaml, passes
 * `cellgate --check-config`, and every docs/ page README.md links to exists,
 * with the heading its #anchor names.
 *
 * The deployment blocks name files under /etc and /run (certificates, keys,
 * password files, a limits file) that exist only where cellgate is
 * deployed. Each such path is replaced by a file made in the test's temp
 * dir: the TLS fixture's certificate and key for *.crt and *.key (they
 * match, as tls_cert_file and tls_key_file must), the example limits tree
 * for a limits file, one line for anything else (a password file). Every
 * other word of the block stays as written, so an unknown key or a bad
 * value in the deployment examples fails here. */
#include "tests/support/px_test.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/integration/container_files.h"
#include "tests/integration/fixture.h"
#include "tests/integration/tls_fixture.h"

PX_TEST_SUITE(it_docs);

#define EXAMPLE_PROXY PX_SOURCE_DIR "/conf/proxy.example.yaml"

/* Line (1-based) of the byte at p in the text that starts at start. */
static int line_of(const char *start, const char *p)
{
    int line = 1;
    for (const char *q = start; q < p; q++) {
        line += *q == '\n';
    }
    return line;
}

/* The managed-Redis deployment block uses TLS keys, which a -DPX_TLS=OFF
 * build refuses, and its certificates come from the TLS fixture. */
#if defined(PX_TLS) && PX_TLS

#define DEPLOY_DOC      "docs/operations.md"
#define DEPLOY_FILE     PX_SOURCE_DIR "/" DEPLOY_DOC
#define DEPLOY_HEADING  "\n## Deploying\n"
#define YAML_FENCE      "```yaml\n"
#define FENCE_END       "\n```"
#define DOCS_MAX_BLOCKS 16
#define DOCS_YAML_MAX   8192 /* one block with its paths replaced */
#define DOCS_SECRET     "a-password-from-a-file\n"

/* One ```yaml block of the section. */
struct docs_block {
    const char *text; /* borrowed from the page's text */
    size_t len;       /* bytes of text, up to the closing fence's newline */
    int line;         /* page line of its first yaml line */
};

/* Finds the ```yaml blocks of the "## Deploying" section of doc (up to
 * the next "## " heading) and returns how many. */
static int deploy_blocks(const char *doc, struct docs_block *b, int max)
{
    const char *sec = strstr(doc, DEPLOY_HEADING);
    cr_assert_not_null(sec, DEPLOY_DOC " has no \"## Deploying\" section");
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
                  DEPLOY_DOC ":%d: a ```yaml block is not closed",
                  line_of(doc, p));
        cr_assert_lt(n, max, "more than %d yaml blocks", max);
        b[n].text = p;
        b[n].len = (size_t)(close + 1 - p);
        b[n].line = line_of(doc, p);
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
 * page fails with the page's line and cellgate's error. */
Test(it_docs, deploying_examples_pass_check_config, .fini = px_env_fini,
     .timeout = 60)
{
    struct docs_block b[DOCS_MAX_BLOCKS];
    char *doc = px_read_file(DEPLOY_FILE, NULL);
    cr_assert_not_null(doc, "cannot read %s", DEPLOY_FILE);
    int n = deploy_blocks(doc, b, DOCS_MAX_BLOCKS);
    cr_assert_gt(n, 0, DEPLOY_DOC "'s \"## Deploying\" has no ```yaml block");

    for (int k = 0; k < n; k++) {
        char path[PX_PATH_MAX];
        struct px_run res;
        write_block(&b[k], k, path, sizeof(path));
        const char *argv[] = { PX_CELLGATE_BIN, "--config", path,
                               "--check-config", NULL };
        px_run(&res, argv);
        if (res.status != 0) {
            char *yaml = px_read_file(path, NULL);
            fprintf(stderr, "--- " DEPLOY_DOC ":%d, as checked (%s):\n%s",
                    b[k].line, path, yaml != NULL ? yaml : "");
            free(yaml);
        }
        cr_assert_eq(res.status, 0,
                     DEPLOY_DOC
                     ":%d: the yaml block fails --check-config "
                     "(exit %d; line N of the block is the page's line %d + "
                     "N - 1): %s%s",
                     b[k].line, res.status, b[k].line, res.out, res.err);
        px_run_free(&res);
    }
    free(doc);
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

#define README_FILE  PX_SOURCE_DIR "/README.md"
#define DOCS_LINK    "](docs/"
#define DOCS_REF_MAX 128 /* longest "name.md#anchor" a link may carry */

/* Whether the Markdown text has a heading whose GitHub anchor is `anchor`
 * (lower case; letters, digits, '_' and '-' kept, a blank made '-',
 * anything else dropped). Headings inside ``` fences do not count. */
static int has_anchor(const char *text, const char *anchor)
{
    int fence = 0;
    for (const char *line = text; *line != '\0';) {
        const char *eol = strchr(line, '\n');
        size_t len = eol != NULL ? (size_t)(eol - line) : strlen(line);
        if (strncmp(line, "```", 3) == 0) {
            fence = !fence;
        } else if (!fence && line[0] == '#') {
            const char *p = line;
            while (*p == '#') {
                p++;
            }
            char slug[DOCS_REF_MAX * 2];
            size_t n = 0;
            for (p += *p == ' '; p < line + len && n + 1 < sizeof(slug); p++) {
                unsigned char c = (unsigned char)*p;
                if (isalnum(c) || c == '_' || c == '-') {
                    slug[n++] = (char)tolower(c);
                } else if (c == ' ') {
                    slug[n++] = '-';
                }
            }
            slug[n] = '\0';
            if (strcmp(slug, anchor) == 0) {
                return 1;
            }
        }
        line += len + (eol != NULL);
    }
    return 0;
}

/* README.md is the front door: every link it has into docs/ must lead to
 * a page that exists and, when it names an #anchor, to one of its
 * headings (scripts/check_doc_refs.sh checks every document this way; this
 * keeps the README's own links checked with the tests). */
Test(it_docs, readme_docs_links_exist, .timeout = 30)
{
    char *readme = px_read_file(README_FILE, NULL);
    cr_assert_not_null(readme, "cannot read %s", README_FILE);
    int links = 0;

    for (const char *p = strstr(readme, DOCS_LINK); p != NULL;
         p = strstr(p, DOCS_LINK)) {
        p += strlen(DOCS_LINK);
        size_t len = strcspn(p, ")\n");
        cr_assert(p[len] == ')' && len < DOCS_REF_MAX,
                  "README.md:%d: a docs/ link that does not close",
                  line_of(readme, p));
        char ref[DOCS_REF_MAX], path[PX_PATH_MAX];
        snprintf(ref, sizeof(ref), "%.*s", (int)len, p);
        char *anchor = strchr(ref, '#');
        if (anchor != NULL) {
            *anchor++ = '\0';
        }
        snprintf(path, sizeof(path), "%s/docs/%s", PX_SOURCE_DIR, ref);
        char *page = px_read_file(path, NULL);
        cr_assert_not_null(page,
                           "README.md:%d: links to docs/%s, which does "
                           "not exist",
                           line_of(readme, p), ref);
        if (anchor != NULL && !has_anchor(page, anchor)) {
            cr_assert_fail("README.md:%d: docs/%s has no heading #%s",
                           line_of(readme, p), ref, anchor);
        }
        free(page);
        links++;
    }
    /* The README links to every page of the reference at least once. */
    cr_assert_geq(links, 6, "README.md has %d docs/ links", links);
    free(readme);
}
