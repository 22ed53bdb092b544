/* The Prometheus text exposition (GET /metrics), rendered from the same
 * snapshot as INFO's sections (info.h): the rules' decision counters, the
 * latency histograms, per-node counters, clients by lib-name, reloads, the
 * limiter's memory and sentinel mode. Pure: reads nothing but what it is
 * given. */
#ifndef PX_PROXY_METRICS_TEXT_H
#define PX_PROXY_METRICS_TEXT_H

#include <stddef.h>

struct buf;
struct info_snapshot;
struct metrics;

/* Where a scrape rendered in slices stands: the decision counters of the
 * first `rule` rules are out (after the header, at stage 1). Zeroed to
 * start. */
struct metrics_text_cursor {
    unsigned stage; /* 0: header next; 1: rules; 2: rules done */
    size_t rule;    /* next rule of the metrics' rules */
};

/* Appends the next slice of the decision counters of `m`'s rules (the
 * header first) to `out`: rules until at least `bytes` were appended or
 * the rules end, and returns 0. Called again after the slice that put out
 * the last rule, appends nothing and returns 1: what follows the rules is
 * metrics_text_prometheus_rest's, in a slice of its own. Counters that move
 * between two slices show the value of the slice that rendered them, and rules
 * made meanwhile are included (the rule list only grows). */
int metrics_text_prometheus_rules(struct metrics_text_cursor *cur,
                                  struct buf *out, size_t bytes,
                                  const struct metrics *m);

/* Appends the series after the rules (small whatever the tree), from
 * `snap`. */
void metrics_text_prometheus_rest(struct buf *out,
                                  const struct info_snapshot *snap);

/* Appends the whole exposition (version 0.0.4) of `snap` to `out`: what
 * the slices of one cursor, concatenated, are when nothing changes
 * between them. */
void metrics_text_prometheus(struct buf *out, const struct info_snapshot *snap);

#endif /* PX_PROXY_METRICS_TEXT_H */
