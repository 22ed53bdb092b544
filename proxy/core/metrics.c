/* The metrics counters (see metrics.h). Entries are made off the hot path
 * (a rule when a tree is loaded, a node when a connection is made) and
 * only incremented afterwards. */
#include "proxy/core/metrics.h"

#include <stdio.h>
#include <string.h>

#include "proxy/core/util.h"

const char *const metrics_bucket_le[METRICS_BUCKETS] = {
    "0.00005", "0.0001", "0.00025", "0.0005", "0.001", "0.0025",
    "0.005",   "0.01",   "0.025",   "0.05",   "0.1",   "0.25",
    "0.5",     "1",      "2.5",     "5",      "10",
};

const uint64_t metrics_bucket_ns[METRICS_BUCKETS] = {
    50000,     100000,     250000,     500000,     1000000,     2500000,
    5000000,   10000000,   25000000,   50000000,   100000000,   250000000,
    500000000, 1000000000, 2500000000, 5000000000, 10000000000,
};

static void metrics_rule_free(void *v)
{
    struct metrics_rule *r = v;

    px_free(r->path);
    px_free(r);
}

void metrics_init(struct metrics *m, double near_ratio)
{
    memset(m, 0, sizeof(*m));
    hmap_init(&m->rule_by_path);
    hmap_init(&m->node_by_name);
    m->near_ratio = near_ratio;
    m->throttle = metrics_rule(m, METRICS_RULE_THROTTLE);
}

void metrics_free(struct metrics *m)
{
    hmap_free(&m->rule_by_path, metrics_rule_free);
    hmap_free(&m->node_by_name, px_free);
    px_free(m->rules);
    px_free(m->nodes);
    memset(m, 0, sizeof(*m));
}

/* Appends `item` to the array *arr of *n entries (*cap allocated). */
static void metrics_push(void ***arr, size_t *n, size_t *cap, void *item)
{
    if (*n == *cap) {
        *cap = *cap > 0 ? 2 * *cap : 16;
        *arr = px_realloc(*arr, *cap * sizeof(**arr));
    }
    (*arr)[(*n)++] = item;
}

/* The entry of `*name` in `map` (`count` entries), or NULL when it is to
 * be made; past `max` entries a new name counts under "other", and *name
 * and *len say which name to make it under. */
static void *metrics_lookup(struct hmap *map, size_t count, size_t max,
                            const char **name, size_t *len)
{
    void *e;

    *len = strlen(*name);
    e = hmap_get(map, *name, *len);
    if (e != NULL || count < max) {
        return e;
    }
    *name = "other";
    *len = strlen(*name);
    return hmap_get(map, *name, *len);
}

struct metrics_rule *metrics_rule(struct metrics *m, const char *path)
{
    size_t len;
    struct metrics_rule *r = metrics_lookup(&m->rule_by_path, m->nrules,
                                            METRICS_MAX_RULES, &path, &len);

    if (r != NULL) {
        return r;
    }
    r = px_calloc(1, sizeof(*r));
    r->path = px_strndup(path, len);
    hmap_put(&m->rule_by_path, path, len, r);
    metrics_push((void ***)&m->rules, &m->nrules, &m->rules_cap, r);
    return r;
}

int metrics_near_limit(const struct metrics *m, int64_t limit,
                       int64_t remaining)
{
    if (limit <= 0) {
        return 0; /* an exempt identity: no limit to be near */
    }
    return (double)(limit - remaining) >= m->near_ratio * (double)limit;
}

struct metrics_node *metrics_node(struct metrics *m, const char *name)
{
    size_t len;
    struct metrics_node *n = metrics_lookup(&m->node_by_name, m->nnodes,
                                            METRICS_MAX_NODES, &name, &len);

    if (n != NULL) {
        return n;
    }
    n = px_calloc(1, sizeof(*n));
    snprintf(n->name, sizeof(n->name), "%s", name);
    hmap_put(&m->node_by_name, name, len, n);
    metrics_push((void ***)&m->nodes, &m->nnodes, &m->nodes_cap, n);
    return n;
}

void metrics_observe(struct metrics_hist *h, uint64_t ns)
{
    unsigned i = 0;

    /* At most 17 compares, most requests stop in the first few. */
    while (i < METRICS_BUCKETS && ns > metrics_bucket_ns[i]) {
        i++;
    }
    h->bucket[i]++;
    h->count++;
    h->sum_ns += ns;
}

void metrics_set_sha256(struct metrics *m, const char *hex)
{
    snprintf(m->sha256, sizeof(m->sha256), "%s", hex != NULL ? hex : "");
}
