/* limits_override.c: overrides of a path's limits, from the file and at
 * run time.
 *
 * overrides: in the file maps a concrete path (no "*") that resolves to a
 * node with limits to a factor, parameters, a replacement limits: list or
 * unlimited; each entry is checked against the finished tree and stored
 * with its limits already computed, sorted by path for limits_resolve.c.
 * A run-time override (LIMITER OVERRIDE SET, kept in a Redis hash) is the
 * same idea in words, parsed against the node's own limits. Both scale
 * with limits_scale and check with limits_check (limits_algo.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "conf/limits_impl.h"

/* Room for "where" texts: a pattern, or "override " and a path. */
#define LIMITS_WHERE_SIZE (LIMITS_MAX_PATH_BYTES + 16)

/* ---------------- overrides: of the file ---------------- */

/* Overrides sort by path: limits_resolve.c finds them by binary search. */
static int limits_override_cmp(const void *a, const void *b)
{
    const struct limits_override *x = a, *y = b;

    return limits_seg_cmp(x->path, x->len, y->path, y->len);
}

/* What an override may name, and what it did. */
struct limits_ov_state {
    const char *where;              /* "override <path>" */
    const struct limits_node *n;    /* the node it overrides */
    struct limits_override *ov;     /* being filled */
    const yaml_node_t *kind_key;    /* key that chose ov->kind */
    struct limits_limit work;       /* LIMITS_OV_PARAMS: the edited limit */
    const yaml_node_t *seen[3 + 8]; /* factor, limits, unlimited, params */
};

static const char *limits_ov_kind_name(enum limits_ov_kind kind)
{
    switch (kind) {
    case LIMITS_OV_FACTOR:
        return "factor";
    case LIMITS_OV_LIMITS:
        return "limits";
    case LIMITS_OV_UNLIMITED:
        return "unlimited";
    case LIMITS_OV_PARAMS:
        return "parameters";
    case LIMITS_OV_NONE:
        break;
    }
    return "nothing";
}

/* factor: F, applied to every limit of the node. */
static int limits_ov_factor(struct limits_loader *ld,
                            struct limits_ov_state *st, const yaml_node_t *v)
{
    const char *s = conf_yaml_scalar(&ld->diag, v, st->where, "factor",
                                     "a positive number");
    char shown[CONF_YAML_SHOW_SIZE];
    const char *why = NULL;
    enum conf_yaml_num num;
    size_t i;

    if (s == NULL) {
        return LIMITS_ERR;
    }
    conf_yaml_show(shown, s, strlen(s));
    num = conf_yaml_parse_decimal(s, strlen(s), 6, &st->ov->factor_micro);
    if (num == CONF_YAML_NUM_OK && st->ov->factor_micro == 0) {
        num = CONF_YAML_NUM_EINVAL;
    }
    if (num == CONF_YAML_NUM_OK &&
        st->ov->factor_micro > LIMITS_MAX_FACTOR_MICRO) {
        num = CONF_YAML_NUM_ERANGE;
    }
    if (num != CONF_YAML_NUM_OK) {
        conf_yaml_error(
            &ld->diag, &v->start_mark,
            num == CONF_YAML_NUM_ERANGE
                ? "%s: factor: \"%s\" is too large (max 1000000)"
            : num == CONF_YAML_NUM_EPREC
                ? "%s: factor: \"%s\" is finer than 0.000001"
                : "%s: factor: expected a positive number, got \"%s\"",
            st->where, shown);
        return LIMITS_ERR;
    }
    st->ov->limits = calloc(st->n->nlimits, sizeof(*st->ov->limits));
    if (st->ov->limits == NULL) {
        return LIMITS_ENOMEM;
    }
    st->ov->nlimits = st->n->nlimits;
    for (i = 0; i < st->n->nlimits && why == NULL; i++) {
        if (limits_scale(&st->n->limits[i], st->ov->factor_micro,
                         &st->ov->limits[i], &why) != LIMITS_OK) {
            conf_yaml_error(&ld->diag, &v->start_mark,
                            "%s: factor: %s makes %s invalid: %s", st->where,
                            shown, limits_algo_name(st->n->limits[i].algo),
                            why);
        }
    }
    return why == NULL ? LIMITS_OK : LIMITS_ERR;
}

/* unlimited: true. */
static int limits_ov_unlimited(struct limits_loader *ld,
                               struct limits_ov_state *st, const yaml_node_t *v)
{
    const char *s =
        conf_yaml_scalar(&ld->diag, v, st->where, "unlimited", "true");
    char shown[CONF_YAML_SHOW_SIZE];

    if (s == NULL) {
        return LIMITS_ERR;
    }
    if (strcasecmp(s, "true") != 0) {
        conf_yaml_show(shown, s, strlen(s));
        conf_yaml_error(&ld->diag, &v->start_mark,
                        "%s: unlimited: expected true, got \"%s\" (remove the "
                        "override instead)",
                        st->where, shown);
        return LIMITS_ERR;
    }
    return LIMITS_OK;
}

/* Classifies one key of an override mapping: the kind it selects, and its
 * slot in st->seen (or -1 after reporting an unknown key). */
static int limits_ov_classify(struct limits_loader *ld,
                              struct limits_ov_state *st,
                              const yaml_node_t *key, enum limits_ov_kind *kind,
                              const struct limits_param **param)
{
    static const enum limits_ov_kind fixed[] = { LIMITS_OV_FACTOR,
                                                 LIMITS_OV_LIMITS,
                                                 LIMITS_OV_UNLIMITED };
    const char *s = (const char *)key->data.scalar.value;
    size_t len = key->data.scalar.length, i;
    const struct limits_algo_def *def = limits_def(st->n->limits[0].algo);
    char shown[CONF_YAML_SHOW_SIZE], names[128];

    *param = NULL;
    for (i = 0; i < LIMITS_ARRAY_SIZE(fixed); i++) {
        if (limits_key_is(key, limits_ov_kind_name(fixed[i]))) {
            *kind = fixed[i];
            return (int)i;
        }
    }
    *kind = LIMITS_OV_PARAMS;
    *param = limits_param_find(def, s, len);
    if (*param != NULL && st->n->nlimits == 1) {
        return (int)(LIMITS_ARRAY_SIZE(fixed) + (size_t)(*param - def->params));
    }
    conf_yaml_show(shown, s, len);
    for (i = 0; i < st->n->nlimits; i++) {
        if (limits_param_find(limits_def(st->n->limits[i].algo), s, len)) {
            conf_yaml_error(&ld->diag, &key->start_mark,
                            "%s: '%s': parameters need a node with exactly one "
                            "limit, this one has %zu (use limits:)",
                            st->where, shown, st->n->nlimits);
            return -1;
        }
    }
    if (st->n->nlimits > 1) {
        conf_yaml_error(&ld->diag, &key->start_mark,
                        "%s: unknown key '%s' (expected factor, limits or "
                        "unlimited)",
                        st->where, shown);
        return -1;
    }
    limits_param_names(def, names, sizeof(names));
    conf_yaml_error(&ld->diag, &key->start_mark,
                    "%s: unknown key '%s' (expected factor, limits, unlimited "
                    "or a parameter of %s: %s)",
                    st->where, shown, def->name, names);
    return -1;
}

/* One key: value of an override mapping. */
static int limits_ov_pair(struct limits_loader *ld, struct limits_ov_state *st,
                          const yaml_node_pair_t *pair)
{
    const yaml_node_t *key = limits_key(ld, pair, st->where);
    const yaml_node_t *v = yaml_document_get_node(ld->doc, pair->value);
    const struct limits_param *p;
    enum limits_ov_kind kind;
    int slot;

    if (key == NULL) {
        return LIMITS_ERR;
    }
    slot = limits_ov_classify(ld, st, key, &kind, &p);
    if (slot < 0) {
        return LIMITS_ERR;
    }
    if (st->seen[slot] != NULL) {
        conf_yaml_error(&ld->diag, &key->start_mark,
                        "%s: duplicate key '%s' (first at line %zu)", st->where,
                        (const char *)key->data.scalar.value,
                        st->seen[slot]->start_mark.line + 1);
        return LIMITS_ERR;
    }
    st->seen[slot] = key;
    if (st->ov->kind != LIMITS_OV_NONE && st->ov->kind != kind) {
        conf_yaml_error(&ld->diag, &key->start_mark,
                        "%s: '%s' cannot be combined with '%s'", st->where,
                        (const char *)key->data.scalar.value,
                        (const char *)st->kind_key->data.scalar.value);
        return LIMITS_ERR;
    }
    st->ov->kind = kind;
    st->kind_key = key;
    switch (kind) {
    case LIMITS_OV_FACTOR:
        return limits_ov_factor(ld, st, v);
    case LIMITS_OV_LIMITS:
        return limits_read_limits(ld, st->where, v, &st->ov->limits,
                                  &st->ov->nlimits);
    case LIMITS_OV_UNLIMITED:
        return limits_ov_unlimited(ld, st, v);
    case LIMITS_OV_PARAMS:
        return limits_read_param(ld, st->where, p, v, &st->work);
    case LIMITS_OV_NONE:
        break;
    }
    return LIMITS_ERR;
}

/* The value of one override: a mapping, or inf. */
static int limits_ov_value(struct limits_loader *ld, struct limits_ov_state *st,
                           const yaml_node_t *v)
{
    const yaml_node_pair_t *pair;
    int rc = LIMITS_OK;

    if (v->type == YAML_SCALAR_NODE &&
        limits_is_inf((const char *)v->data.scalar.value)) {
        st->ov->kind = LIMITS_OV_UNLIMITED;
        return LIMITS_OK;
    }
    if (v->type != YAML_MAPPING_NODE ||
        v->data.mapping.pairs.start == v->data.mapping.pairs.top) {
        conf_yaml_error(&ld->diag, &v->start_mark,
                        "%s: expected a mapping with factor, limits, unlimited "
                        "or parameters, or inf, got %s",
                        st->where,
                        v->type == YAML_MAPPING_NODE ? "an empty mapping"
                                                     : conf_yaml_node_kind(v));
        return LIMITS_ERR;
    }
    st->work = st->n->limits[0];
    for (pair = v->data.mapping.pairs.start;
         pair < v->data.mapping.pairs.top && !ld->diag.stop; pair++) {
        int prc = limits_ov_pair(ld, st, pair);

        if (prc == LIMITS_ENOMEM) {
            return prc;
        }
        rc |= prc;
    }
    if (rc != LIMITS_OK || st->ov->kind != LIMITS_OV_PARAMS) {
        return rc != LIMITS_OK ? LIMITS_ERR : LIMITS_OK;
    }
    if (limits_check_report(ld, st->where, v, &st->work) != LIMITS_OK) {
        return LIMITS_ERR;
    }
    st->ov->limits = malloc(sizeof(*st->ov->limits));
    if (st->ov->limits == NULL) {
        return LIMITS_ENOMEM;
    }
    st->ov->limits[0] = st->work;
    st->ov->nlimits = 1;
    return LIMITS_OK;
}

/* Checks the path of an override and finds its node. NULL after
 * reporting, or when the node's own limits were refused (reported
 * already). */
static const struct limits_node *limits_ov_node(struct limits_loader *ld,
                                                const yaml_node_t *key)
{
    const char *s = (const char *)key->data.scalar.value;
    size_t len = key->data.scalar.length, i;
    size_t start[LIMITS_MAX_DEPTH], seglen[LIMITS_MAX_DEPTH];
    const struct limits_node *n = NULL;
    char shown[CONF_YAML_SHOW_SIZE];
    const char *why;
    unsigned nseg;

    why = limits_split_path(s, len, start, seglen, &nseg);
    for (i = 0; why == NULL && i < len; i++) {
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) {
            why = "path contains a control character";
        }
    }
    for (i = 0; why == NULL && i < nseg; i++) {
        if (seglen[i] == 1 && s[start[i]] == '*') {
            why = "an override names a concrete path, without '*' "
                  "segments";
        }
    }
    if (why == NULL) {
        n = limits_walk_path(ld->tree, s, start, seglen, nseg);
        if (n != NULL && n->bad) {
            return NULL;
        }
        if (n == NULL || n->nlimits == 0) {
            why = "matches no node with limits";
        }
    }
    if (why != NULL) {
        conf_yaml_show(shown, s, len);
        conf_yaml_error(&ld->diag, &key->start_mark, "overrides: \"%s\": %s",
                        shown, why);
        return NULL;
    }
    return n;
}

/* One entry of overrides:, appended to the tree when valid. */
static int limits_ov_entry(struct limits_loader *ld,
                           const yaml_node_pair_t *pair)
{
    struct limits_override *ov = &ld->tree->ov[ld->tree->nov];
    const yaml_node_t *key = limits_key(ld, pair, "overrides");
    struct limits_ov_state st = { 0 };
    char where[LIMITS_WHERE_SIZE];
    int rc;

    if (key == NULL) {
        return LIMITS_OK;
    }
    st.n = limits_ov_node(ld, key);
    if (st.n == NULL) {
        return LIMITS_OK;
    }
    memset(ov, 0, sizeof(*ov));
    snprintf(where, sizeof(where), "override %s",
             (const char *)key->data.scalar.value);
    st.where = where;
    st.ov = ov;
    rc = limits_ov_value(ld, &st, yaml_document_get_node(ld->doc, pair->value));
    if (rc != LIMITS_OK) {
        free(ov->limits);
        return rc == LIMITS_ENOMEM ? rc : LIMITS_OK;
    }
    ov->len = key->data.scalar.length;
    ov->path = malloc(ov->len + 1);
    if (ov->path == NULL) {
        free(ov->limits);
        return LIMITS_ENOMEM;
    }
    memcpy(ov->path, key->data.scalar.value, ov->len + 1);
    ld->tree->nov++;
    return LIMITS_OK;
}

/* overrides: a mapping of concrete path -> override. */
int limits_walk_overrides(struct limits_loader *ld, const yaml_node_t *map)
{
    const yaml_node_pair_t *pairs = map->data.mapping.pairs.start;
    size_t n = (size_t)(map->data.mapping.pairs.top - pairs), i;
    bool *dup;
    int rc = LIMITS_OK;

    if (conf_yaml_is_null(map)) {
        return LIMITS_OK;
    }
    if (map->type != YAML_MAPPING_NODE) {
        conf_yaml_error(&ld->diag, &map->start_mark,
                        "overrides: expected a mapping of paths, got %s",
                        conf_yaml_node_kind(map));
        return LIMITS_OK;
    }
    if (n > LIMITS_MAX_OVERRIDES) {
        conf_yaml_error(&ld->diag, &map->start_mark,
                        "overrides: more than %d entries",
                        LIMITS_MAX_OVERRIDES);
        return LIMITS_OK;
    }
    dup = calloc(n > 0 ? n : 1, sizeof(*dup));
    ld->tree->ov = calloc(n > 0 ? n : 1, sizeof(*ld->tree->ov));
    if (dup == NULL || ld->tree->ov == NULL ||
        limits_find_dups(ld, map, "overrides", dup) != LIMITS_OK) {
        free(dup);
        return LIMITS_ENOMEM;
    }
    for (i = 0; i < n && !ld->diag.stop && rc == LIMITS_OK; i++) {
        if (!dup[i]) {
            rc = limits_ov_entry(ld, &pairs[i]);
        }
    }
    free(dup);
    qsort(ld->tree->ov, ld->tree->nov, sizeof(*ld->tree->ov),
          limits_override_cmp);
    return rc;
}

/* ---------------- Public API: run-time overrides ---------------- */

/* A word of a run-time override equals `name`, ignoring case. */
static bool limits_word_is(const char *w, size_t len, const char *name)
{
    return strlen(name) == len && strncasecmp(w, name, len) == 0;
}

int limits_runtime_parse(const struct limits_limit *base, size_t nbase,
                         int argc, const char *const *argv, const size_t *lens,
                         struct limits_runtime *out, char *err, size_t errlen)
{
    char word[64];
    const char *why;
    uint64_t factor = 0;
    size_t i;
    int k;

    memset(out, 0, sizeof(*out));
    if (argc < 1) {
        snprintf(err, errlen,
                 "an override needs FACTOR f, UNLIMITED or "
                 "parameters with values");
        return LIMITS_ERR;
    }
    if (argc == 1 && (limits_word_is(argv[0], lens[0], "unlimited") ||
                      limits_word_is(argv[0], lens[0], "inf"))) {
        out->unlimited = true;
        return LIMITS_OK;
    }
    if (limits_word_is(argv[0], lens[0], "factor")) {
        if (argc != 2 || lens[1] >= sizeof(word)) {
            snprintf(err, errlen, "FACTOR takes one number");
            return LIMITS_ERR;
        }
        memcpy(word, argv[1], lens[1]);
        word[lens[1]] = '\0';
        if (conf_yaml_parse_decimal(word, lens[1], 6, &factor) !=
                CONF_YAML_NUM_OK ||
            factor == 0 || factor > LIMITS_MAX_FACTOR_MICRO) {
            snprintf(err, errlen,
                     "factor must be a number from 0.000001 to 1000000");
            return LIMITS_ERR;
        }
        for (i = 0; i < nbase; i++) {
            if (limits_scale(&base[i], factor, &out->limits[i], &why) !=
                LIMITS_OK) {
                snprintf(err, errlen, "factor %s makes %s invalid: %s", word,
                         limits_algo_name(base[i].algo), why);
                return LIMITS_ERR;
            }
        }
        out->nlimits = nbase;
        return LIMITS_OK;
    }
    if (nbase != 1) {
        snprintf(err, errlen,
                 "parameters need a node with exactly one limit, this one "
                 "has %zu (use FACTOR or UNLIMITED)",
                 nbase);
        return LIMITS_ERR;
    }
    if (argc % 2 != 0) {
        snprintf(err, errlen, "parameters come in pairs: <name> <value>");
        return LIMITS_ERR;
    }
    out->limits[0] = base[0];
    out->nlimits = 1;
    for (k = 0; k < argc; k += 2) {
        const struct limits_algo_def *def = limits_def(base[0].algo);
        const struct limits_param *p = NULL;
        int64_t v;
        char names[128];

        for (i = 0; i < def->nparams && p == NULL; i++) {
            if (limits_word_is(argv[k], lens[k], def->params[i].name)) {
                p = &def->params[i];
            }
        }
        if (p == NULL) {
            limits_param_names(def, names, sizeof(names));
            snprintf(
                err, errlen, "unknown parameter '%.*s' of %s (expected %s)",
                (int)(lens[k] > 32 ? 32 : lens[k]), argv[k], def->name, names);
            return LIMITS_ERR;
        }
        if (lens[k + 1] >= sizeof(word)) {
            snprintf(err, errlen, "%s: value too long", p->name);
            return LIMITS_ERR;
        }
        memcpy(word, argv[k + 1], lens[k + 1]);
        word[lens[k + 1]] = '\0';
        if (limits_parse_param(p, word, &v) != CONF_YAML_NUM_OK) {
            snprintf(err, errlen, "%s: expected %s, got \"%s\"", p->name,
                     limits_kind_want(p->kind), word);
            return LIMITS_ERR;
        }
        *limits_field(&out->limits[0], p) = v;
    }
    why = limits_check(&out->limits[0]);
    if (why != NULL) {
        snprintf(err, errlen, "%s: %s", limits_algo_name(out->limits[0].algo),
                 why);
        return LIMITS_ERR;
    }
    return LIMITS_OK;
}

int limits_runtime_parse_text(const struct limits_limit *base, size_t nbase,
                              const char *text, size_t len,
                              struct limits_runtime *out, char *err,
                              size_t errlen)
{
    const char *argv[2 * 8 + 2];
    size_t lens[2 * 8 + 2], i = 0;
    int argc = 0;

    while (i < len) {
        size_t j = i;
        while (j < len && text[j] != ' ') {
            j++;
        }
        if (j > i) {
            if (argc == (int)(sizeof(argv) / sizeof(argv[0]))) {
                snprintf(err, errlen, "too many words in the override");
                return LIMITS_ERR;
            }
            argv[argc] = text + i;
            lens[argc++] = j - i;
        }
        i = j + 1;
    }
    return limits_runtime_parse(base, nbase, argc, argv, lens, out, err,
                                errlen);
}
