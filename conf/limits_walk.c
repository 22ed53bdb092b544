/* limits_walk.c: the nodes of limits.yaml, from the YAML document into
 * the tree of limits.c.
 *
 * The walk goes depth first, one child mapping at a time: each key is a
 * segment (a literal or exactly "*"), each value a node with limits:,
 * children: and shadow:. The node's pattern ("user:*:trade") is kept in
 * the loader while its body is walked; a node with limits becomes the
 * tree's next rule. Children are sorted by segment once their mapping is
 * walked, for limits_resolve.c's binary search. The top level's key
 * overrides is walked last (limits_override.c), against the finished
 * tree. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "conf/limits_impl.h"

/* Children sort by segment: limits_resolve.c finds them by binary
 * search. */
static int limits_node_cmp(const void *a, const void *b)
{
    const struct limits_node *x = *(const struct limits_node *const *)a;
    const struct limits_node *y = *(const struct limits_node *const *)b;

    return limits_seg_cmp(x->seg, x->seglen, y->seg, y->seglen);
}

/* Why a segment of the file is no valid segment, or NULL. */
static const char *limits_segment_problem(const char *s, size_t len)
{
    size_t i;

    if (len == 0) {
        return "is empty";
    }
    for (i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];

        if (ch == ':') {
            return "contains ':', the path separator";
        }
        if (ch == '{' || ch == '}') {
            return "contains '{' or '}', which would move the Redis hash tag";
        }
        if (ch < 0x20 || ch == 0x7f) {
            return "contains a control character";
        }
    }
    if (memchr(s, '*', len) != NULL && len != 1) {
        return "mixes '*' with text: a wildcard is the whole segment \"*\"";
    }
    return NULL;
}

static int limits_walk_children(struct limits_loader *ld,
                                struct limits_node *parent,
                                const yaml_node_t *map, bool top);

/* The pattern of the node being walked, or "top level" above the first. */
static const char *limits_where(const struct limits_loader *ld)
{
    return ld->patlen > 0 ? ld->pattern : "top level";
}

/* Numbers node `n` (its limits just read, its pattern `pattern`) as the
 * tree's next rule. LIMITS_OK or LIMITS_ENOMEM. */
static int limits_rule_add(struct limits_tree *t, struct limits_node *n,
                           const char *pattern)
{
    if (t->nrules == t->rules_cap) {
        size_t cap = t->rules_cap > 0 ? 2 * t->rules_cap : 16;
        const struct limits_node **r = realloc(t->rules, cap * sizeof(*r));
        if (r == NULL) {
            return LIMITS_ENOMEM;
        }
        t->rules = r;
        t->rules_cap = cap;
    }
    n->pattern = strdup(pattern);
    if (n->pattern == NULL) {
        return LIMITS_ENOMEM;
    }
    n->rule = t->nrules;
    t->rules[t->nrules++] = n;
    return LIMITS_OK;
}

/* shadow: true or false (YAML's other spellings of a boolean too, in any
 * case: yes/no, on/off). Anything else is an error: a typo must not turn a
 * limit that should refuse into one that never does, or the reverse. */
static void limits_read_shadow(struct limits_loader *ld, struct limits_node *n,
                               const yaml_node_t *v)
{
    static const char *const yes[] = { "true", "yes", "on" };
    static const char *const no[] = { "false", "no", "off" };
    const char *s =
        conf_yaml_scalar(&ld->diag, v, ld->pattern, "shadow", "true or false");
    char shown[CONF_YAML_SHOW_SIZE];
    size_t i;

    if (s == NULL) {
        return;
    }
    for (i = 0; i < LIMITS_ARRAY_SIZE(yes); i++) {
        if (strcasecmp(s, yes[i]) == 0 || strcasecmp(s, no[i]) == 0) {
            n->shadow = strcasecmp(s, yes[i]) == 0;
            return;
        }
    }
    conf_yaml_show(shown, s, strlen(s));
    conf_yaml_error(&ld->diag, &v->start_mark,
                    "%s: shadow: expected true or false, got \"%s\"",
                    ld->pattern, shown);
}

/* lease: N, a node's own key (units a proxy may take at once for the
 * identity this node ends: proxy/limiter/limiter_lease.h), an integer in
 * 1 .. 2^31. Not the lease: of a concurrency limit, a duration inside
 * that limit's mapping: this one sits beside limits:. */
static void limits_read_lease(struct limits_loader *ld, struct limits_node *n,
                              const yaml_node_t *v)
{
    const char *s = conf_yaml_scalar(&ld->diag, v, ld->pattern, "lease",
                                     "an integer from 1 to 2147483648");
    char shown[CONF_YAML_SHOW_SIZE];
    char *end;
    unsigned long long x;

    if (s == NULL) {
        return;
    }
    errno = 0;
    x = strtoull(s, &end, 10);
    if (s[0] >= '0' && s[0] <= '9' && *end == '\0' && errno == 0 && x >= 1 &&
        x <= LIMITS_LEASE_MAX) {
        n->lease = (int64_t)x;
        return;
    }
    conf_yaml_show(shown, s, strlen(s));
    conf_yaml_error(&ld->diag, &v->start_mark,
                    "%s: lease: expected an integer from 1 to 2147483648, got "
                    "\"%s\"",
                    ld->pattern, shown);
}

/* The body of one node: limits:, children:, shadow: and lease:. */
static int limits_walk_node(struct limits_loader *ld, struct limits_node *n,
                            const yaml_node_t *value)
{
    static const char *const names[4] = { "limits", "children", "shadow",
                                          "lease" };
    const yaml_node_t *seen[4] = { NULL, NULL, NULL, NULL };
    const yaml_node_pair_t *pair;
    char shown[CONF_YAML_SHOW_SIZE];
    int rc;

    if (conf_yaml_is_null(value)) {
        return LIMITS_OK;
    }
    if (value->type != YAML_MAPPING_NODE) {
        conf_yaml_error(
            &ld->diag, &value->start_mark,
            "%s: expected a mapping with limits and/or children, got "
            "%s",
            ld->pattern, conf_yaml_node_kind(value));
        return LIMITS_OK;
    }
    for (pair = value->data.mapping.pairs.start;
         pair < value->data.mapping.pairs.top && !ld->diag.stop; pair++) {
        const yaml_node_t *key = limits_key(ld, pair, ld->pattern);
        const yaml_node_t *v = yaml_document_get_node(ld->doc, pair->value);
        size_t i;

        if (key == NULL) {
            continue;
        }
        for (i = 0; i < 4 && !limits_key_is(key, names[i]); i++) {
        }
        if (i == 4) {
            conf_yaml_show(shown, (const char *)key->data.scalar.value,
                           key->data.scalar.length);
            conf_yaml_error(
                &ld->diag, &key->start_mark,
                "%s: unknown key '%s' (expected limits, children, shadow or "
                "lease)",
                ld->pattern, shown);
            continue;
        }
        if (seen[i] != NULL) {
            conf_yaml_error(&ld->diag, &key->start_mark,
                            "%s: duplicate key '%s' (first at line %zu)",
                            ld->pattern, names[i],
                            seen[i]->start_mark.line + 1);
            continue;
        }
        seen[i] = key;
        if (i == 2) {
            limits_read_shadow(ld, n, v);
            continue;
        }
        if (i == 3) {
            limits_read_lease(ld, n, v);
            continue;
        }
        if (i == 0) {
            rc =
                limits_read_limits(ld, ld->pattern, v, &n->limits, &n->nlimits);
            n->bad = rc == LIMITS_ERR;
            if (rc == LIMITS_OK) {
                rc = limits_rule_add(ld->tree, n, ld->pattern);
            }
        } else {
            rc = limits_walk_children(ld, n, v, false);
        }
        if (rc == LIMITS_ENOMEM) {
            return rc;
        }
    }
    if (n->shadow && seen[0] == NULL) {
        conf_yaml_error(&ld->diag, &seen[2]->start_mark,
                        "%s: shadow: true on a node without limits (it "
                        "applies to the node's own limits, not to its "
                        "children)",
                        ld->pattern);
    }
    if (n->lease > 0 && seen[0] == NULL) {
        conf_yaml_error(&ld->diag, &seen[3]->start_mark,
                        "%s: lease: on a node without limits (a lease is "
                        "taken of the node's own limits and its parents')",
                        ld->pattern);
    }
    return LIMITS_OK;
}

/* Checks the key of a child: a valid segment, not too deep or long. */
static bool limits_segment_ok(struct limits_loader *ld,
                              const struct limits_node *parent,
                              const yaml_node_t *key)
{
    const char *s = (const char *)key->data.scalar.value;
    size_t len = key->data.scalar.length;
    const char *why = limits_segment_problem(s, len);
    char shown[CONF_YAML_SHOW_SIZE];

    conf_yaml_show(shown, s, len);
    if (why != NULL) {
        conf_yaml_error(&ld->diag, &key->start_mark, "%s: segment \"%s\" %s",
                        limits_where(ld), shown, why);
        return false;
    }
    if (ld->patlen + (parent->parent != NULL) + len > LIMITS_MAX_PATH_BYTES) {
        conf_yaml_error(&ld->diag, &key->start_mark,
                        "%s: segment \"%s\" makes a pattern longer than %d "
                        "bytes, which no path can match",
                        limits_where(ld), shown, LIMITS_MAX_PATH_BYTES);
        return false;
    }
    return true;
}

/* Creates a child of `parent` named by `key` (appended to its array). */
static struct limits_node *limits_node_add(struct limits_node *parent,
                                           const yaml_node_t *key)
{
    struct limits_node *c = calloc(1, sizeof(*c));

    if (c == NULL) {
        return NULL;
    }
    c->seglen = key->data.scalar.length;
    c->seg = malloc(c->seglen + 1);
    if (c->seg == NULL) {
        free(c);
        return NULL;
    }
    memcpy(c->seg, key->data.scalar.value, c->seglen);
    c->seg[c->seglen] = '\0';
    c->wildcard = c->seglen == 1 && c->seg[0] == '*';
    c->parent = parent;
    parent->child[parent->nchild++] = c;
    return c;
}

/* Adds one child and walks its body, with the pattern extended. */
static int limits_walk_child(struct limits_loader *ld,
                             struct limits_node *parent, unsigned depth,
                             const yaml_node_t *key, const yaml_node_t *value)
{
    size_t saved = ld->patlen;
    struct limits_node *c;
    int rc;

    if (!limits_segment_ok(ld, parent, key)) {
        return LIMITS_OK;
    }
    if (depth > LIMITS_MAX_DEPTH) {
        conf_yaml_error(&ld->diag, &key->start_mark,
                        "%s: more than %d levels deep (a path has at most %d "
                        "segments)",
                        limits_where(ld), LIMITS_MAX_DEPTH, LIMITS_MAX_DEPTH);
        return LIMITS_OK;
    }
    c = limits_node_add(parent, key);
    if (c == NULL) {
        return LIMITS_ENOMEM;
    }
    if (ld->patlen > 0) {
        ld->pattern[ld->patlen++] = ':';
    }
    memcpy(ld->pattern + ld->patlen, c->seg, c->seglen);
    ld->patlen += c->seglen;
    ld->pattern[ld->patlen] = '\0';
    rc = limits_walk_node(ld, c, value);
    ld->patlen = saved;
    ld->pattern[saved] = '\0';
    return rc;
}

/* Depth of `n` below the root. */
static unsigned limits_depth(const struct limits_node *n)
{
    unsigned d = 0;

    for (; n->parent != NULL; n = n->parent) {
        d++;
    }
    return d;
}

/* A mapping of segment -> node under `parent`. At the top level, the key
 * overrides is skipped (walked later). */
static int limits_walk_children(struct limits_loader *ld,
                                struct limits_node *parent,
                                const yaml_node_t *map, bool top)
{
    const yaml_node_pair_t *pairs = map->data.mapping.pairs.start;
    size_t n = (size_t)(map->data.mapping.pairs.top - pairs), i;
    unsigned depth = limits_depth(parent) + 1;
    bool *dup = NULL;
    int rc = LIMITS_OK;

    if (conf_yaml_is_null(map)) {
        return LIMITS_OK;
    }
    if (map->type != YAML_MAPPING_NODE) {
        conf_yaml_error(
            &ld->diag, &map->start_mark,
            "%s: children: expected a mapping of path segments, got "
            "%s",
            limits_where(ld), conf_yaml_node_kind(map));
        return LIMITS_OK;
    }
    if (n > LIMITS_MAX_NODES - ld->nnodes) {
        conf_yaml_error(&ld->diag, &map->start_mark, "more than %d nodes",
                        LIMITS_MAX_NODES);
        ld->diag.stop = true;
        return LIMITS_OK;
    }
    dup = calloc(n > 0 ? n : 1, sizeof(*dup));
    parent->child = calloc(n > 0 ? n : 1, sizeof(*parent->child));
    if (dup == NULL || parent->child == NULL ||
        limits_find_dups(ld, map, limits_where(ld), dup) != LIMITS_OK) {
        rc = LIMITS_ENOMEM;
        goto done;
    }
    ld->nnodes += n;
    for (i = 0; i < n && !ld->diag.stop && rc == LIMITS_OK; i++) {
        const yaml_node_t *key = limits_key(ld, &pairs[i], limits_where(ld));

        if (key == NULL || dup[i] || (top && limits_key_is(key, "overrides"))) {
            continue;
        }
        rc = limits_walk_child(ld, parent, depth, key,
                               yaml_document_get_node(ld->doc, pairs[i].value));
    }
    qsort(parent->child, parent->nchild, sizeof(*parent->child),
          limits_node_cmp);

done:
    free(dup);
    return rc;
}

/* The top-level mapping: segments, then overrides. */
int limits_walk_root(struct limits_loader *ld, const yaml_node_t *root)
{
    static const yaml_mark_t start = { 0 };
    const yaml_node_pair_t *pair;
    const yaml_node_t *ov = NULL;
    int rc;

    if (root == NULL || conf_yaml_is_null(root)) {
        conf_yaml_error(&ld->diag, root != NULL ? &root->start_mark : &start,
                        "empty file: expected a mapping of path segments");
        return LIMITS_OK;
    }
    if (root->type != YAML_MAPPING_NODE) {
        conf_yaml_error(
            &ld->diag, &root->start_mark,
            "top level: expected a mapping of path segments, got %s",
            conf_yaml_node_kind(root));
        return LIMITS_OK;
    }
    rc = limits_walk_children(ld, &ld->tree->root, root, true);
    if (rc != LIMITS_OK || ld->diag.stop) {
        return rc;
    }
    for (pair = root->data.mapping.pairs.start;
         pair < root->data.mapping.pairs.top; pair++) {
        const yaml_node_t *key = yaml_document_get_node(ld->doc, pair->key);

        if (key->type == YAML_SCALAR_NODE && limits_key_is(key, "overrides")) {
            ov = yaml_document_get_node(ld->doc, pair->value);
            break; /* a second one was reported as a duplicate */
        }
    }
    return ov != NULL ? limits_walk_overrides(ld, ov) : LIMITS_OK;
}
