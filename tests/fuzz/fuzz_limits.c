/* Fuzz target: the limits loader (conf/limits.c), from a memory buffer.
 *
 * The input is a limits.yaml (cut at its first NUL, as a C string is).
 * Whatever it holds, loading must either fail with an error text or give a
 * tree that every reader of the tree can walk: LIMITER RULES's rendering,
 * each rule's pattern, and the levels of paths made from the rules'
 * patterns (each "*" a concrete segment), with their keys, formats and
 * parameters; a copy of the levels must say the same. The input's last
 * line is also read as a run-time override of the first level found. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf/limits.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fz_fail(const char *what)
{
    fprintf(stderr, "fuzz_limits: %s\n", what);
    abort();
}

/* Checks one resolved level's strings and limits. */
static void fz_level(const struct limits_level *lv)
{
    char buf[2048], fmt[256];
    int64_t params[LIMITS_MAX_PARAMS];
    size_t i;

    if (lv->nlimits > LIMITS_MAX_LIMITS || lv->nbase < 1 ||
        lv->nbase > LIMITS_MAX_LIMITS || (lv->nlimits > 0) != !lv->unlimited) {
        fz_fail("a level with a bad count of limits");
    }
    if (strlen(lv->key) != lv->key_len || lv->tag < lv->key ||
        lv->tag + lv->tag_len > lv->key + lv->key_len) {
        fz_fail("a level's key or tag is not what it says");
    }
    for (i = 0; i < lv->nlimits; i++) {
        if (limits_limit_key(lv, i, buf, sizeof(buf)) < 0) {
            fz_fail("no key for a limit of the level");
        }
        if (limits_format(&lv->limits[i], fmt, sizeof(fmt)) < 0 ||
            limits_params(&lv->limits[i], params) > LIMITS_MAX_PARAMS) {
            fz_fail("a limit that cannot be written");
        }
    }
    if (limits_limit_key(lv, lv->nlimits, buf, sizeof(buf)) != -1) {
        fz_fail("a key for a limit past the level's");
    }
}

/* Resolves `path` and checks what it finds; returns the first level's base
 * limits (into base, *nbase) when there is one. */
static void fz_resolve(const struct limits_tree *t, const char *path,
                       struct limits_levels *lv, struct limits_limit *base,
                       size_t *nbase)
{
    const char *why = NULL;
    struct limits_levels *copy;
    size_t i;

    if (limits_resolve(t, path, strlen(path), NULL, 0, lv, &why) != LIMITS_OK) {
        if (why == NULL) {
            fz_fail("a path refused without a reason");
        }
        return;
    }
    if (lv->n > LIMITS_MAX_DEPTH || lv->ngroups > lv->n) {
        fz_fail("more levels than a path can have");
    }
    for (i = 0; i < lv->n; i++) {
        fz_level(&lv->level[i]);
    }
    if (lv->n > 0 && *nbase == 0) {
        *nbase = lv->level[0].nbase;
        memcpy(base, lv->level[0].base, *nbase * sizeof(*base));
    }
    copy = limits_levels_copy(lv);
    if (copy == NULL) {
        return;
    }
    if (copy->n != lv->n) {
        fz_fail("a copy of the levels says otherwise");
    }
    for (i = 0; i < copy->n; i++) {
        if (copy->level[i].key_len != lv->level[i].key_len ||
            strcmp(copy->level[i].key, lv->level[i].key) != 0) {
            fz_fail("a copy of the levels says otherwise");
        }
    }
    free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct limits_levels *lv;
    struct limits_limit base[LIMITS_MAX_LIMITS];
    struct limits_runtime rt;
    struct limits_tree *t = NULL;
    char err[1024], path[LIMITS_MAX_PATH_BYTES + 1];
    char *text, *out = NULL;
    const char *last;
    size_t i, k, outlen = 0, nbase = 0;
    int rc;

    if (lv == NULL) {
        lv = malloc(LIMITS_LEVELS_BYTES); /* kept for the process */
        if (lv == NULL) {
            return 0;
        }
    }
    text = malloc(size + 1);
    if (text == NULL) {
        return 0;
    }
    memcpy(text, data, size);
    text[size] = '\0';
    err[0] = '\0';
    rc = limits_load_string("limits.yaml", text, &t, err, sizeof(err));
    if (rc != LIMITS_OK) {
        if (t != NULL || (rc == LIMITS_ERR && err[0] == '\0')) {
            fz_fail("a refused file without an error, or with a tree");
        }
        free(text);
        return 0;
    }
    if (t == NULL || limits_sha256(t) == NULL ||
        strlen(limits_sha256(t)) != 64) {
        fz_fail("a loaded file without its tree or digest");
    }
    if (limits_describe(t, (size & 1) != 0, (size & 2) != 0, &out, &outlen) ==
        LIMITS_OK) {
        if (strlen(out) != outlen) {
            fz_fail("LIMITER RULES's text is not its length");
        }
        free(out);
    }
    for (i = 0; i < limits_rule_count(t); i++) {
        const char *pat = limits_rule_pattern(t, i);
        size_t n = 0;

        if (pat == NULL) {
            fz_fail("a rule without a pattern");
        }
        /* The rule's pattern with each "*" a segment of its own. */
        for (k = 0; pat[k] != '\0' && n + 2 < sizeof(path); k++) {
            if (pat[k] == '*') {
                path[n++] = 'x';
            } else {
                path[n++] = pat[k];
            }
        }
        path[n] = '\0';
        fz_resolve(t, path, lv, base, &nbase);
        if (n + 3 < sizeof(path)) {
            memcpy(path + n, ":y", 3);
            fz_resolve(t, path, lv, base, &nbase);
        }
    }
    if (limits_rule_pattern(t, limits_rule_count(t)) != NULL) {
        fz_fail("a pattern past the last rule");
    }
    if (nbase > 0) {
        last = strrchr(text, '\n');
        last = last != NULL ? last + 1 : text;
        (void)limits_runtime_parse_text(base, nbase, last, strlen(last), &rt,
                                        err, sizeof(err));
    }
    limits_free(t);
    free(text);
    return 0;
}
