/* limits_describe.c: the text of LIMITER RULES.
 *
 * One line per node with limits, depth first with children in byte order
 * (the order of the sorted tree, so the text is stable across loads of
 * one file), then one line per override of the file. Each limit is
 * rendered by limits_format (limits_algo.c). The text is cut past 1 MiB:
 * a tree of 100,000 rules must not become a reply of unbounded size. */
#include <stdlib.h>
#include <string.h>

#include "conf/limits_impl.h"

/* LIMITER RULES output is cut past this many bytes. */
#define LIMITS_MAX_DESCRIBE_BYTES ((size_t)1024 * 1024)
/* One rendered limit or line of LIMITER RULES fits in these. */
#define LIMITS_FORMAT_SIZE 256
#define LIMITS_LINE_SIZE                                                       \
    (LIMITS_MAX_PATH_BYTES + 64 + LIMITS_MAX_LIMITS * LIMITS_FORMAT_SIZE)

/* ---------------- Public API: LIMITER RULES ---------------- */

/* A growing output string, cut at LIMITS_MAX_DESCRIBE_BYTES. */
struct limits_out {
    char *data;     /* owned; NUL-terminated */
    size_t len;     /* bytes, NUL excluded */
    size_t cap;     /* bytes allocated */
    bool truncated; /* the cut happened: append nothing more */
};

/* Appends one rendered line and its newline (or, past the cap, the
 * truncation mark). LIMITS_OK or LIMITS_ENOMEM. */
static int limits_out_line(struct limits_out *o, const struct limits_str *str)
{
    static const char cut[] = "(truncated)";
    const char *line = str->p;
    size_t n = str->len < str->size ? str->len : str->size - 1;
    size_t need;
    char *nd;

    if (o->truncated) {
        return LIMITS_OK;
    }
    if (o->len + n + 1 > LIMITS_MAX_DESCRIBE_BYTES) {
        o->truncated = true;
        line = cut;
        n = sizeof(cut) - 1;
    }
    need = o->len + n + 2;
    if (need > o->cap) {
        size_t cap = o->cap < 4096 ? 4096 : o->cap;

        while (cap < need) {
            cap *= 2;
        }
        nd = realloc(o->data, cap);
        if (nd == NULL) {
            return LIMITS_ENOMEM;
        }
        o->data = nd;
        o->cap = cap;
    }
    memcpy(o->data + o->len, line, n);
    o->len += n;
    o->data[o->len++] = '\n';
    o->data[o->len] = '\0';
    return LIMITS_OK;
}

/* Renders `n` limits, space-separated. */
static void limits_fmt_list(struct limits_str *str,
                            const struct limits_limit *ls, size_t n)
{
    char one[LIMITS_FORMAT_SIZE];
    size_t i;

    for (i = 0; i < n; i++) {
        limits_format(&ls[i], one, sizeof(one));
        limits_str_add(str, "%s%s", i > 0 ? " " : "", one);
    }
}

/* One line per node with limits under `n`, depth first; `pat` holds the
 * pattern of `n` (patlen bytes). */
static int limits_describe_node(const struct limits_node *n, char *pat,
                                size_t patlen, bool all_shadow, char *line,
                                struct limits_out *o)
{
    struct limits_str str = { .p = line, .size = LIMITS_LINE_SIZE };
    size_t i;
    int rc = LIMITS_OK;

    if (n->nlimits > 0) {
        limits_str_add(&str, "%s  ", pat);
        limits_fmt_list(&str, n->limits, n->nlimits);
        if (n->shadow || all_shadow) {
            limits_str_add(&str, "  shadow");
        }
        if (n->lease > 0) {
            limits_str_add(&str, "  lease %lld", (long long)n->lease);
        }
        rc = limits_out_line(o, &str);
    }
    for (i = 0; i < n->nchild && rc == LIMITS_OK && !o->truncated; i++) {
        const struct limits_node *c = n->child[i];
        size_t len = patlen;

        if (patlen > 0) {
            pat[len++] = ':';
        }
        memcpy(pat + len, c->seg, c->seglen);
        pat[len + c->seglen] = '\0';
        rc = limits_describe_node(c, pat, len + c->seglen, all_shadow, line, o);
        pat[patlen] = '\0';
    }
    return rc;
}

/* One line for one override. */
static int limits_describe_override(const struct limits_override *ov,
                                    char *line, struct limits_out *o)
{
    struct limits_str str = { .p = line, .size = LIMITS_LINE_SIZE };
    char factor[32];

    limits_str_add(&str, "override %s  ", ov->path);
    if (ov->kind == LIMITS_OV_UNLIMITED) {
        limits_str_add(&str, "unlimited");
        return limits_out_line(o, &str);
    }
    if (ov->kind == LIMITS_OV_FACTOR) {
        limits_fmt_micro(factor, sizeof(factor), ov->factor_micro);
        limits_str_add(&str, "factor=%s ", factor);
    }
    limits_fmt_list(&str, ov->limits, ov->nlimits);
    return limits_out_line(o, &str);
}

int limits_describe(const struct limits_tree *t, bool all_shadow,
                    bool overrides, char **out, size_t *outlen)
{
    struct limits_out o = { 0 };
    char pat[LIMITS_MAX_PATH_BYTES + 1] = "";
    char *line = malloc(LIMITS_LINE_SIZE);
    size_t i;
    int rc = LIMITS_ENOMEM;

    if (line == NULL) {
        return LIMITS_ENOMEM;
    }
    /* An empty description is "" (allocated, so the caller always frees). */
    o.data = malloc(1);
    if (o.data == NULL) {
        goto fail;
    }
    o.data[0] = '\0';
    o.cap = 1;
    rc = t != NULL
             ? limits_describe_node(&t->root, pat, 0, all_shadow, line, &o)
             : LIMITS_OK;
    for (i = 0; overrides && t != NULL && i < t->nov && rc == LIMITS_OK; i++) {
        rc = limits_describe_override(&t->ov[i], line, &o);
    }
    if (rc != LIMITS_OK) {
        goto fail;
    }
    free(line);
    *out = o.data;
    *outlen = o.len;
    return LIMITS_OK;

fail:
    free(line);
    free(o.data);
    return LIMITS_ENOMEM;
}
