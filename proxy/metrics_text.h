/* The metrics as text: the Prometheus exposition (GET /metrics) and INFO's
 * Limiter, Latency and Nodes sections, from the same counters (struct
 * metrics in the server) plus what only the top layer sees: clients by
 * lib-name and the connections open to each node. */
#ifndef PX_PROXY_METRICS_TEXT_H
#define PX_PROXY_METRICS_TEXT_H

#include <stddef.h>

struct buf;

/* INFO sections of cellgate's own, as bits. */
enum metrics_text_section {
    METRICS_TEXT_PROXY = 1,   /* "# Proxy" (merge.c writes it) */
    METRICS_TEXT_LIMITER = 2, /* "# Limiter": decisions by rule, reloads */
    METRICS_TEXT_LATENCY = 4, /* "# Latency": the two histograms */
    METRICS_TEXT_NODES = 8,   /* "# Nodes": per-node counters */
};

/* Appends the text exposition format (version 0.0.4) to `out`. */
void metrics_text_prometheus(struct buf *out);

/* Where a scrape rendered in slices stands: the decision counters of the
 * first `rule` rules are out (after the header, at stage 1). Zeroed to
 * start. */
struct metrics_text_cursor {
    unsigned stage; /* 0: header next; 1: rules; 2: the rest; 3: done */
    size_t rule;    /* next rule of server.metrics.rules */
};

/* Appends the next slice of the exposition to `out`: rules until at least
 * `bytes` were appended (or the rules end), then, in a last slice, the
 * series after them. Returns 1 once the exposition is complete. The
 * slices of one cursor, concatenated, are what metrics_text_prometheus
 * renders when nothing changes between them; counters that move between
 * two slices show the value of the slice that rendered them, and rules
 * made meanwhile are included (the rule list only grows). */
int metrics_text_prometheus_next(struct metrics_text_cursor *cur,
                                 struct buf *out, size_t bytes);

/* Appends the sections of `sections` other than Proxy, each under its
 * "# Name" header, after a blank line when `out` holds something already
 * (INFO's layout). */
void metrics_text_info(struct buf *out, unsigned sections);

#endif /* PX_PROXY_METRICS_TEXT_H */
