/* The metrics as text: the Prometheus exposition (GET /metrics) and INFO's
 * Limiter, Latency and Nodes sections, from the same counters (struct
 * metrics in the server) plus what only the top layer sees: clients by
 * lib-name and the connections open to each node. */
#ifndef PX_PROXY_METRICS_TEXT_H
#define PX_PROXY_METRICS_TEXT_H

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

/* Appends the sections of `sections` other than Proxy, each under its
 * "# Name" header, after a blank line when `out` holds something already
 * (INFO's layout). */
void metrics_text_info(struct buf *out, unsigned sections);

#endif /* PX_PROXY_METRICS_TEXT_H */
