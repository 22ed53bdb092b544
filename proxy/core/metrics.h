/* The numbers behind INFO's Limiter, Latency and Nodes sections and the
 * Prometheus endpoint: per-rule decision counters, two latency histograms,
 * per-node counters and the limits file's reloads and hash.
 *
 * One struct metrics, embedded in the server and handed to the core (and
 * through it to the limiter) as a pointer, like the rest of their state.
 * Counting is a plain increment on a pointer the caller already holds (a
 * rule's counters are found when a check starts, a node's when its
 * connection is made), so the hot path neither allocates nor looks
 * anything up. Entries are keyed by name and never removed: a counter
 * survives a reload that drops and brings back its rule, and a node that
 * leaves the map and returns. Both sets are bounded, and their names come
 * from the configuration and the topology, never from a client: past the
 * cap, new names share one "other" entry.
 *
 * Rendering (the Prometheus text, INFO) is the top layer's: it also needs
 * the clients and the connections (proxy/info.c, proxy/metrics_text.c). */
#ifndef PX_PROXY_CORE_METRICS_H
#define PX_PROXY_CORE_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "proxy/core/hmap.h"

/* The result label of cellgate_limiter_decisions_total. */
enum metrics_result {
    METRICS_ALLOWED,        /* admitted */
    METRICS_LIMITED,        /* refused by this rule */
    METRICS_NEAR_LIMIT,     /* admitted with >= the ratio of it used (also
                               counted as allowed) */
    METRICS_SHADOW_LIMITED, /* would have been refused, admitted by shadow
                               mode */
    METRICS_ERRORS,         /* the store could not decide */
    METRICS_FAIL_OPEN,      /* admitted undecided: store down, fail_open */
    METRICS_RESULTS,
};

/* The rule label of CL.THROTTLE and the raw LIMITER <key> form, which
 * have no tree path. */
#define METRICS_RULE_THROTTLE "cl.throttle"

/* Caps of the label sets (then "other"): every rule of the largest tree,
 * and far more nodes than a cluster has. */
#define METRICS_MAX_RULES 100000
#define METRICS_MAX_NODES 1024

/* Bucket bounds of both histograms, in seconds and nanoseconds: 50 us to
 * 10 s, roughly 1-2.5-5 per decade. */
#define METRICS_BUCKETS 17
extern const char *const metrics_bucket_le[METRICS_BUCKETS];
extern const uint64_t metrics_bucket_ns[METRICS_BUCKETS];

/* A rule's decision counters. */
struct metrics_rule {
    char *path;                  /* owned: the tree path, "user:*:trade" */
    uint64_t n[METRICS_RESULTS]; /* by result */
};

/* A latency histogram: bucket[i] counts observations in (le[i-1], le[i]];
 * bucket[METRICS_BUCKETS] those above the last bound. */
struct metrics_hist {
    uint64_t bucket[METRICS_BUCKETS + 1];
    uint64_t count;  /* observations */
    uint64_t sum_ns; /* their total */
};

/* A node's counters (see metrics_text.c for what each one means). */
struct metrics_node {
    char name[300];      /* "host:port" */
    uint64_t reconnects; /* reconnect attempts of shared connections */
    uint64_t timeouts;   /* connects and commands that timed out */
    uint64_t moved;      /* -MOVED replies */
    uint64_t ask;        /* -ASK replies */
    uint64_t requests;   /* requests written to it */
    uint64_t errors;     /* error replies (not MOVED/ASK) and connections
                            lost or refused */
    uint64_t connected;  /* scratch of info_snapshot_take: connections
                            open */
};

struct metrics {
    struct hmap rule_by_path;    /* path -> struct metrics_rule (owned) */
    struct metrics_rule **rules; /* owned array: every rule, first seen
                                    first */
    size_t nrules;
    size_t rules_cap;
    struct metrics_rule *throttle; /* borrowed from rules: CL.THROTTLE */
    struct hmap node_by_name;      /* name -> struct metrics_node (owned) */
    struct metrics_node **nodes;   /* owned array, first seen first */
    size_t nnodes;
    size_t nodes_cap;
    struct metrics_hist decision; /* CL.THROTTLE and LIMITER: parsed to
                                     reply queued */
    struct metrics_hist forward;  /* forwarded commands: parsed to reply
                                     delivered */
    uint64_t reloads_ok;          /* limits file reloads applied */
    uint64_t reloads_failed;      /* ... and refused */
    char sha256[65];              /* the loaded limits file's, or "" */
    double near_ratio;            /* metrics_near_limit_ratio */
};

/* Sets up empty counters; `near_ratio` is metrics_near_limit_ratio. */
void metrics_init(struct metrics *m, double near_ratio);

/* Frees every entry. */
void metrics_free(struct metrics *m);

/* The counters of rule `path` (NUL-ended), made on first sight. */
struct metrics_rule *metrics_rule(struct metrics *m, const char *path);

/* Counts one decision of `r` (NULL: nothing). Shadow mode's
 * METRICS_SHADOW_LIMITED goes through here too. */
static inline void metrics_rule_count(struct metrics_rule *r,
                                      enum metrics_result res)
{
    if (r != NULL) {
        r->n[res]++;
    }
}

/* True when an admitted decision with `limit` and `remaining` (after it)
 * has at least the near-limit ratio of its limit used. */
int metrics_near_limit(const struct metrics *m, int64_t limit,
                       int64_t remaining);

/* The counters of node `name`, made on first sight. */
struct metrics_node *metrics_node(struct metrics *m, const char *name);

/* Adds one observation of `ns` nanoseconds. */
void metrics_observe(struct metrics_hist *h, uint64_t ns);

/* Records the loaded limits file's hash (NULL: none loaded). */
void metrics_set_sha256(struct metrics *m, const char *hex);

#endif /* PX_PROXY_CORE_METRICS_H */
