/* limits_parse.c: one `limits:` value of limits.yaml, from the YAML
 * document into struct limits_limit, with the YAML helpers the walks of
 * nodes (limits_walk.c) and overrides (limits_override.c) share.
 *
 * A value is redis-cell's shorthand [max_burst, count, period] or a list
 * of mappings naming an algorithm and its parameters, read against the
 * table of limits_algo.c. Every problem is reported ("file:l:c: ...") and
 * the walk goes on, so one load lists every error of the file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf/limits_impl.h"

/* ---------------- YAML helpers ---------------- */

/* A scalar key of a mapping, or NULL after reporting a collection key. */
const yaml_node_t *limits_key(struct limits_loader *ld,
                              const yaml_node_pair_t *pair, const char *where)
{
    yaml_node_t *key = yaml_document_get_node(ld->doc, pair->key);

    if (key->type != YAML_SCALAR_NODE) {
        conf_yaml_error(&ld->diag, &key->start_mark,
                        "%s: expected a scalar key, got %s", where,
                        conf_yaml_node_kind(key));
        return NULL;
    }
    return key;
}

bool limits_key_is(const yaml_node_t *key, const char *name)
{
    return key->data.scalar.length == strlen(name) &&
           memcmp(key->data.scalar.value, name, key->data.scalar.length) == 0;
}

/* Key text of a pair, for sorting a mapping's keys. */
struct limits_keyref {
    const char *s; /* borrowed from the document */
    size_t len;    /* bytes of s */
    size_t index;  /* of the pair in its mapping */
};

static int limits_keyref_cmp(const void *a, const void *b)
{
    const struct limits_keyref *x = a, *y = b;
    int c = limits_seg_cmp(x->s, x->len, y->s, y->len);

    if (c != 0) {
        return c;
    }
    return x->index < y->index ? -1 : x->index > y->index;
}

/* Reports every later duplicate of a scalar key of `map`, and marks it in
 * `dup` (one flag per pair) so the walk skips it. O(n log n), for mappings
 * of any size. LIMITS_OK or LIMITS_ENOMEM. */
int limits_find_dups(struct limits_loader *ld, const yaml_node_t *map,
                     const char *where, bool *dup)
{
    const yaml_node_pair_t *pairs = map->data.mapping.pairs.start;
    size_t n = (size_t)(map->data.mapping.pairs.top - pairs), m = 0, i, first;
    struct limits_keyref *refs;
    char shown[CONF_YAML_SHOW_SIZE];

    refs = calloc(n > 0 ? n : 1, sizeof(*refs));
    if (refs == NULL) {
        return LIMITS_ENOMEM;
    }
    for (i = 0; i < n; i++) {
        const yaml_node_t *key = yaml_document_get_node(ld->doc, pairs[i].key);

        if (key->type == YAML_SCALAR_NODE) {
            refs[m].s = (const char *)key->data.scalar.value;
            refs[m].len = key->data.scalar.length;
            refs[m++].index = i;
        }
    }
    qsort(refs, m, sizeof(*refs), limits_keyref_cmp);
    for (i = 1, first = 0; i < m; i++) {
        const yaml_node_t *key, *first_key;

        if (limits_seg_cmp(refs[first].s, refs[first].len, refs[i].s,
                           refs[i].len) != 0) {
            first = i; /* a new key: its first occurrence sorts first */
            continue;
        }
        dup[refs[i].index] = true;
        key = yaml_document_get_node(ld->doc, pairs[refs[i].index].key);
        first_key =
            yaml_document_get_node(ld->doc, pairs[refs[first].index].key);
        conf_yaml_show(shown, refs[i].s, refs[i].len);
        conf_yaml_error(&ld->diag, &key->start_mark,
                        "%s: duplicate key '%s' (first at line %zu)", where,
                        shown, first_key->start_mark.line + 1);
    }
    free(refs);
    return LIMITS_OK;
}

/* ---------------- limits: ---------------- */

/* Reads one parameter value into `l`. LIMITS_OK or LIMITS_ERR. */
int limits_read_param(struct limits_loader *ld, const char *where,
                      const struct limits_param *p, const yaml_node_t *node,
                      struct limits_limit *l)
{
    const char *want = limits_kind_want(p->kind);
    const char *s = conf_yaml_scalar(&ld->diag, node, where, p->name, want);
    char shown[CONF_YAML_SHOW_SIZE], max[32];

    if (s == NULL) {
        return LIMITS_ERR;
    }
    conf_yaml_show(shown, s, strlen(s));
    switch (limits_parse_param(p, s, limits_field(l, p))) {
    case CONF_YAML_NUM_OK:
        return LIMITS_OK;
    case CONF_YAML_NUM_EINVAL:
        conf_yaml_error(&ld->diag, &node->start_mark,
                        "%s: %s: expected %s, got \"%s\"", where, p->name, want,
                        shown);
        break;
    case CONF_YAML_NUM_ERANGE:
        if (p->kind == LIMITS_K_TZ) {
            conf_yaml_error(&ld->diag, &node->start_mark,
                            "%s: %s: \"%s\" is out of range (-14:00 to "
                            "+14:00)",
                            where, p->name, shown);
            break;
        }
        if (p->kind == LIMITS_K_DURATION || p->kind == LIMITS_K_DURATION0 ||
            p->kind == LIMITS_K_WINDOW) {
            /* In days: 3650d (LIMITS_MAX_DURATION_MS), a lease's 1d. */
            snprintf(max, sizeof(max), "%lldd",
                     (long long)(p->max / INT64_C(86400000)));
        } else {
            limits_fmt_value(max, sizeof(max), p->kind, p->max);
        }
        conf_yaml_error(&ld->diag, &node->start_mark,
                        "%s: %s: \"%s\" is too large (max %s)", where, p->name,
                        shown, max);
        break;
    case CONF_YAML_NUM_EPREC:
        conf_yaml_error(&ld->diag, &node->start_mark,
                        "%s: %s: \"%s\" is finer than %s", where, p->name,
                        shown, p->kind == LIMITS_K_RATE ? "0.000001" : "1 ms");
        break;
    }
    return LIMITS_ERR;
}

/* Reports a limit that breaks a rule spanning its parameters. */
int limits_check_report(struct limits_loader *ld, const char *where,
                        const yaml_node_t *node, const struct limits_limit *l)
{
    const char *why = limits_check(l);

    if (why == NULL) {
        return LIMITS_OK;
    }
    conf_yaml_error(&ld->diag, &node->start_mark, "%s: %s: %s", where,
                    limits_algo_name(l->algo), why);
    return LIMITS_ERR;
}

/* [max_burst, count, period]: redis-cell's GCRA shorthand. */
static int limits_read_shorthand(struct limits_loader *ld, const char *where,
                                 const yaml_node_t *seq, struct limits_limit *l)
{
    const struct limits_algo_def *gcra = limits_def(LIMITS_GCRA);
    const yaml_node_item_t *it = seq->data.sequence.items.start;
    size_t n = (size_t)(seq->data.sequence.items.top - it), i;
    int rc = LIMITS_OK;

    if (n != gcra->nparams) {
        conf_yaml_error(&ld->diag, &seq->start_mark,
                        "%s: limits: the shorthand is [max_burst, count, "
                        "period], got %zu values",
                        where, n);
        return LIMITS_ERR;
    }
    memset(l, 0, sizeof(*l));
    l->algo = LIMITS_GCRA;
    for (i = 0; i < n; i++) {
        const yaml_node_t *v = yaml_document_get_node(ld->doc, it[i]);

        if (limits_read_param(ld, where, &gcra->params[i], v, l) != LIMITS_OK) {
            rc = LIMITS_ERR;
        }
    }
    return rc == LIMITS_OK ? limits_check_report(ld, where, seq, l) : rc;
}

/* The algorithm a limit mapping names (gcra when it names none), or NULL
 * after reporting. */
static const struct limits_algo_def *limits_read_algo(struct limits_loader *ld,
                                                      const char *where,
                                                      const yaml_node_t *map)
{
    const struct limits_algo_def *def;
    const yaml_node_pair_t *pair;
    char shown[CONF_YAML_SHOW_SIZE];
    const char *s;

    for (pair = map->data.mapping.pairs.start;
         pair < map->data.mapping.pairs.top; pair++) {
        const yaml_node_t *key = yaml_document_get_node(ld->doc, pair->key);
        const yaml_node_t *v = yaml_document_get_node(ld->doc, pair->value);

        if (key->type != YAML_SCALAR_NODE || !limits_key_is(key, "algorithm")) {
            continue;
        }
        s = conf_yaml_scalar(&ld->diag, v, where, "algorithm",
                             "an algorithm name");
        if (s == NULL) {
            return NULL;
        }
        def = limits_algo_find(s);
        if (def != NULL) {
            return def;
        }
        conf_yaml_show(shown, s, strlen(s));
        conf_yaml_error(&ld->diag, &v->start_mark,
                        "%s: algorithm: unknown algorithm \"%s\" (expected "
                        "%s)",
                        where, shown, LIMITS_ALGO_NAMES);
        return NULL;
    }
    return limits_def(LIMITS_GCRA);
}

/* One limit mapping: algorithm: and its parameters. */
static int limits_read_limit_map(struct limits_loader *ld, const char *where,
                                 const yaml_node_t *map, struct limits_limit *l)
{
    const struct limits_algo_def *def = limits_read_algo(ld, where, map);
    const yaml_node_t *seen[8] = { NULL };
    const yaml_node_pair_t *pair;
    char shown[CONF_YAML_SHOW_SIZE], names[128];
    int rc = LIMITS_OK;
    size_t i;

    if (def == NULL) {
        return LIMITS_ERR;
    }
    memset(l, 0, sizeof(*l));
    l->algo = def->algo;
    limits_param_names(def, names, sizeof(names));
    for (pair = map->data.mapping.pairs.start;
         pair < map->data.mapping.pairs.top && !ld->diag.stop; pair++) {
        const yaml_node_t *key = limits_key(ld, pair, where);
        const yaml_node_t *v = yaml_document_get_node(ld->doc, pair->value);
        const struct limits_param *p;

        if (key == NULL) {
            rc = LIMITS_ERR;
            continue;
        }
        if (limits_key_is(key, "algorithm")) {
            p = NULL;
            i = def->nparams; /* its own slot in seen[] */
        } else {
            p = limits_param_find(def, (const char *)key->data.scalar.value,
                                  key->data.scalar.length);
            if (p == NULL) {
                conf_yaml_show(shown, (const char *)key->data.scalar.value,
                               key->data.scalar.length);
                conf_yaml_error(&ld->diag, &key->start_mark,
                                "%s: %s: unknown parameter '%s' (expected %s)",
                                where, def->name, shown, names);
                rc = LIMITS_ERR;
                continue;
            }
            i = (size_t)(p - def->params);
        }
        if (seen[i] != NULL) {
            conf_yaml_error(&ld->diag, &key->start_mark,
                            "%s: duplicate key '%s' (first at line %zu)", where,
                            p != NULL ? p->name : "algorithm",
                            seen[i]->start_mark.line + 1);
            rc = LIMITS_ERR;
            continue;
        }
        seen[i] = key;
        if (p != NULL && limits_read_param(ld, where, p, v, l) != LIMITS_OK) {
            rc = LIMITS_ERR;
        }
    }
    for (i = 0; i < def->nparams; i++) {
        if (seen[i] != NULL) {
            continue;
        }
        if (def->params[i].optional) {
            *limits_field(l, &def->params[i]) = def->params[i].dflt;
            continue;
        }
        conf_yaml_error(&ld->diag, &map->start_mark,
                        "%s: %s: missing parameter '%s'", where, def->name,
                        def->params[i].name);
        rc = LIMITS_ERR;
    }
    return rc == LIMITS_OK ? limits_check_report(ld, where, map, l) : rc;
}

/* The value of limits: into a new array. LIMITS_OK, LIMITS_ERR after
 * reporting (nothing allocated), or LIMITS_ENOMEM. */
int limits_read_limits(struct limits_loader *ld, const char *where,
                       const yaml_node_t *node, struct limits_limit **out,
                       size_t *nout)
{
    const yaml_node_item_t *it;
    struct limits_limit *ls;
    bool shorthand;
    size_t n, i;
    int rc = LIMITS_OK;

    if (node->type != YAML_SEQUENCE_NODE) {
        conf_yaml_error(&ld->diag, &node->start_mark,
                        "%s: limits: expected [max_burst, count, period] or a "
                        "list of limit mappings, got %s",
                        where, conf_yaml_node_kind(node));
        return LIMITS_ERR;
    }
    it = node->data.sequence.items.start;
    n = (size_t)(node->data.sequence.items.top - it);
    if (n == 0) {
        conf_yaml_error(&ld->diag, &node->start_mark,
                        "%s: limits: expected at least one limit", where);
        return LIMITS_ERR;
    }
    shorthand =
        yaml_document_get_node(ld->doc, it[0])->type == YAML_SCALAR_NODE;
    if (shorthand) {
        n = 1; /* [max_burst, count, period]: one GCRA limit */
    } else if (n > LIMITS_MAX_LIMITS) {
        conf_yaml_error(&ld->diag, &node->start_mark,
                        "%s: limits: at most %d limits per node, got %zu",
                        where, LIMITS_MAX_LIMITS, n);
        return LIMITS_ERR;
    }
    ls = calloc(n, sizeof(*ls));
    if (ls == NULL) {
        return LIMITS_ENOMEM;
    }
    if (shorthand) {
        rc = limits_read_shorthand(ld, where, node, &ls[0]);
    }
    for (i = 0; !shorthand && i < n && !ld->diag.stop; i++) {
        const yaml_node_t *item = yaml_document_get_node(ld->doc, it[i]);

        if (item->type != YAML_MAPPING_NODE) {
            conf_yaml_error(&ld->diag, &item->start_mark,
                            "%s: limits: expected a mapping naming an "
                            "algorithm, got %s",
                            where, conf_yaml_node_kind(item));
            rc = LIMITS_ERR;
        } else if (limits_read_limit_map(ld, where, item, &ls[i]) !=
                   LIMITS_OK) {
            rc = LIMITS_ERR;
        }
    }
    if (rc != LIMITS_OK || ld->diag.stop) {
        free(ls);
        return LIMITS_ERR;
    }
    *out = ls;
    *nout = n;
    return LIMITS_OK;
}
