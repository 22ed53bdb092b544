/* Renders the Prometheus text (see metrics_text.h). It walks the same
 * counters as INFO (info.c), in the same order, from the same snapshot,
 * so INFO and /metrics never disagree.
 *
 * What the node numbers mean: `connected` is the connections open to the
 * node now (shared, private, the proxy's own); `requests` every request
 * written to it (clients' and the proxy's own: scripts, ASKING, setup);
 * `errors` its error replies other than -MOVED/-ASK plus connections that
 * failed (refused, lost, timed out); `timeouts` connects and commands that
 * ran out of time; `reconnects` the shared connections' attempts again
 * after a loss. Rendering is not on the hot path: it formats into the
 * caller's buffer, and a scrape goes in slices (a cursor over the rules),
 * since a large tree's decision counters run to tens of megabytes and the
 * loop must serve RESP clients between slices. */
#include "proxy/metrics_text.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "parser/buf.h"
#include "proxy/core/metrics.h"
#include "proxy/core/util.h"
#include "proxy/info.h"

static void metrics_text_printf(struct buf *out, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void metrics_text_printf(struct buf *out, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    PX_ASSERT(n >= 0 && (size_t)n < sizeof(line));
    PX_CHECK_OOM(buf_append(out, line, (size_t)n));
}

/* A label value, escaped as the exposition format wants: backslash,
 * double quote and newline. */
static void metrics_text_label(struct buf *out, const char *v)
{
    for (; *v != '\0'; v++) {
        const char *esc = *v == '\\'   ? "\\\\"
                          : *v == '"'  ? "\\\""
                          : *v == '\n' ? "\\n"
                                       : NULL;
        if (esc != NULL) {
            PX_CHECK_OOM(buf_append_str(out, esc));
        } else {
            PX_CHECK_OOM(buf_append(out, v, 1));
        }
    }
}

static double metrics_text_seconds(uint64_t ns)
{
    return (double)ns / 1e9;
}

static void metrics_text_hist(struct buf *out, const char *name,
                              const char *help, const struct metrics_hist *h)
{
    uint64_t cum = 0;
    unsigned i;

    metrics_text_printf(out, "# HELP %s %s\n# TYPE %s histogram\n", name, help,
                        name);
    for (i = 0; i < METRICS_BUCKETS; i++) {
        cum += h->bucket[i];
        metrics_text_printf(out, "%s_bucket{le=\"%s\"} %llu\n", name,
                            metrics_bucket_le[i], (unsigned long long)cum);
    }
    metrics_text_printf(out, "%s_bucket{le=\"+Inf\"} %llu\n", name,
                        (unsigned long long)h->count);
    metrics_text_printf(out, "%s_sum %.9f\n%s_count %llu\n", name,
                        metrics_text_seconds(h->sum_ns), name,
                        (unsigned long long)h->count);
}

/* One per-node family of the Prometheus text: a counter or gauge of
 * struct metrics_node. */
struct metrics_text_family {
    const char *name;
    const char *type; /* "counter" or "gauge" */
    const char *help;
    size_t field; /* offsetof its uint64_t in struct metrics_node */
};

static const struct metrics_text_family metrics_text_node_families[] = {
    { "cellgate_node_connected", "gauge", "Connections open to the node.",
      offsetof(struct metrics_node, connected) },
    { "cellgate_node_reconnects_total", "counter",
      "Reconnect attempts after a loss.",
      offsetof(struct metrics_node, reconnects) },
    { "cellgate_node_timeouts_total", "counter",
      "Connects and commands that timed out.",
      offsetof(struct metrics_node, timeouts) },
    { "cellgate_node_moved_total", "counter", "-MOVED replies.",
      offsetof(struct metrics_node, moved) },
    { "cellgate_node_ask_total", "counter", "-ASK replies.",
      offsetof(struct metrics_node, ask) },
    { "cellgate_node_requests_total", "counter",
      "Requests written to the node.",
      offsetof(struct metrics_node, requests) },
    { "cellgate_node_errors_total", "counter",
      "Error replies (not MOVED/ASK) and failed connections.",
      offsetof(struct metrics_node, errors) },
};

static void metrics_text_node_family(struct buf *out, const struct metrics *m,
                                     const struct metrics_text_family *f)
{
    size_t i;

    metrics_text_printf(out, "# HELP %s %s\n# TYPE %s %s\n", f->name, f->help,
                        f->name, f->type);
    for (i = 0; i < m->nnodes; i++) {
        const struct metrics_node *n = m->nodes[i];
        uint64_t v =
            *(const uint64_t *)(const void *)((const char *)n + f->field);
        metrics_text_printf(out, "%s{node=\"", f->name);
        metrics_text_label(out, n->name);
        metrics_text_printf(out, "\"} %llu\n", (unsigned long long)v);
    }
}

/* The limiter's memory held for clients and the calls refused for lack of
 * room, by what holds it (the INFO fields limiter_*_bytes and their
 * refusals). */
static void metrics_text_limiter_bytes(struct buf *out,
                                       const struct store_stats *ls)
{
    metrics_text_printf(
        out,
        "# HELP cellgate_limiter_bytes Bytes the limiter holds for clients, "
        "keys included.\n"
        "# TYPE cellgate_limiter_bytes gauge\n"
        "cellgate_limiter_bytes{what=\"embedded\"} %llu\n"
        "cellgate_limiter_bytes{what=\"refusal_cache\"} %llu\n"
        "cellgate_limiter_bytes{what=\"override\"} %llu\n"
        "cellgate_limiter_bytes{what=\"pending\"} %llu\n"
        "# HELP cellgate_limiter_no_room_total Calls refused (or not cached) "
        "for lack of room.\n"
        "# TYPE cellgate_limiter_no_room_total counter\n"
        "cellgate_limiter_no_room_total{what=\"embedded\"} %llu\n"
        "cellgate_limiter_no_room_total{what=\"refusal_cache\"} %llu\n"
        "cellgate_limiter_no_room_total{what=\"override\"} %llu\n"
        "cellgate_limiter_no_room_total{what=\"pending\"} %llu\n",
        (unsigned long long)ls->embedded_bytes,
        (unsigned long long)ls->refusal_bytes,
        (unsigned long long)ls->override_bytes,
        (unsigned long long)ls->pending_bytes,
        (unsigned long long)ls->embedded_full_refused,
        (unsigned long long)ls->refusal_skipped,
        (unsigned long long)ls->override_refused,
        (unsigned long long)ls->pending_refused);
}

/* The decision counters of rules [cur->rule, ...) until `bytes` more
 * were appended or the rules end. */
static void metrics_text_rules(struct metrics_text_cursor *cur, struct buf *out,
                               size_t bytes, const struct metrics *m)
{
    size_t start = out->len, r;

    for (; cur->rule < m->nrules && out->len - start < bytes; cur->rule++) {
        const struct metrics_rule *rule = m->rules[cur->rule];
        for (r = 0; r < METRICS_RESULTS; r++) {
            PX_CHECK_OOM(buf_append_str(
                out, "cellgate_limiter_decisions_total{rule=\""));
            metrics_text_label(out, rule->path);
            metrics_text_printf(out, "\",result=\"%s\"} %llu\n",
                                info_results[r],
                                (unsigned long long)rule->n[r]);
        }
    }
}

/* Sentinel mode: the master Sentinel named, and how often it changed. */
static void metrics_text_sentinel(struct buf *out,
                                  const struct info_snapshot *snap)
{
    if (!snap->sentinel) {
        return;
    }
    metrics_text_printf(out,
                        "# HELP cellgate_sentinel_switches_total Masters "
                        "Sentinel named after the first.\n"
                        "# TYPE cellgate_sentinel_switches_total counter\n"
                        "cellgate_sentinel_switches_total %llu\n",
                        (unsigned long long)snap->sentinel_switches);
    if (snap->sentinel_addr[0] != '\0') {
        metrics_text_printf(out, "# HELP cellgate_sentinel_master_info The "
                                 "master cellgate forwards to.\n"
                                 "# TYPE cellgate_sentinel_master_info gauge\n"
                                 "cellgate_sentinel_master_info{name=\"");
        metrics_text_label(out, snap->sentinel_name);
        PX_CHECK_OOM(buf_append_str(out, "\",addr=\""));
        metrics_text_label(out, snap->sentinel_addr);
        PX_CHECK_OOM(buf_append_str(out, "\"} 1\n"));
    }
}

/* Everything after the rules: small whatever the tree (histograms, at
 * most METRICS_MAX_NODES nodes, clients by a bounded set of names). */
void metrics_text_prometheus_rest(struct buf *out,
                                  const struct info_snapshot *snap)
{
    const struct metrics *m = snap->metrics;
    const struct info_libs *libs = &snap->libs;
    size_t i;

    metrics_text_hist(out, "cellgate_decision_duration_seconds",
                      "CL.THROTTLE and LIMITER commands, from parsed to "
                      "reply queued.",
                      &m->decision);
    metrics_text_hist(out, "cellgate_forward_duration_seconds",
                      "Forwarded commands, from parsed to reply delivered.",
                      &m->forward);
    for (i = 0; i < ARRAY_SIZE(metrics_text_node_families); i++) {
        metrics_text_node_family(out, m, &metrics_text_node_families[i]);
    }
    metrics_text_printf(out, "# HELP cellgate_clients Connected clients by "
                             "lib-name (CLIENT SETINFO).\n"
                             "# TYPE cellgate_clients gauge\n");
    for (i = 0; i < libs->n; i++) {
        PX_CHECK_OOM(buf_append_str(out, "cellgate_clients{lib=\""));
        metrics_text_label(out, libs->names[i]);
        metrics_text_printf(out, "\"} %u\n", libs->counts[i]);
    }
    metrics_text_printf(out,
                        "cellgate_clients{lib=\"(other)\"} %u\n"
                        "cellgate_clients{lib=\"(none)\"} %u\n",
                        libs->other, libs->none);
    metrics_text_printf(
        out,
        "# HELP cellgate_config_reloads_total Limits file reloads (SIGHUP, "
        "LIMITER RELOAD) by result.\n"
        "# TYPE cellgate_config_reloads_total counter\n"
        "cellgate_config_reloads_total{result=\"ok\"} %llu\n"
        "cellgate_config_reloads_total{result=\"failed\"} %llu\n",
        (unsigned long long)m->reloads_ok,
        (unsigned long long)m->reloads_failed);
    metrics_text_printf(out,
                        "# HELP cellgate_auth_failures_total AUTH and HELLO "
                        "AUTH attempts refused.\n"
                        "# TYPE cellgate_auth_failures_total counter\n"
                        "cellgate_auth_failures_total %llu\n",
                        (unsigned long long)snap->auth_failures);
    metrics_text_limiter_bytes(out, &snap->store);
    metrics_text_sentinel(out, snap);
    if (m->sha256[0] != '\0') {
        metrics_text_printf(out,
                            "# HELP cellgate_config_info The loaded limits "
                            "file (its SHA-256).\n"
                            "# TYPE cellgate_config_info gauge\n"
                            "cellgate_config_info{sha256=\"%s\"} 1\n",
                            m->sha256);
    }
}

int metrics_text_prometheus_rules(struct metrics_text_cursor *cur,
                                  struct buf *out, size_t bytes,
                                  const struct metrics *m)
{
    switch (cur->stage) {
    case 0:
        metrics_text_printf(
            out, "# HELP cellgate_limiter_decisions_total Limiter "
                 "decisions by rule (tree path; cl.throttle for "
                 "CL.THROTTLE) and result.\n"
                 "# TYPE cellgate_limiter_decisions_total counter\n");
        cur->stage = 1;
        /* fall through */
    case 1:
        metrics_text_rules(cur, out, bytes, m);
        if (cur->rule >= m->nrules) {
            cur->stage = 2;
        }
        return 0;
    default:
        return 1;
    }
}

void metrics_text_prometheus(struct buf *out, const struct info_snapshot *snap)
{
    struct metrics_text_cursor cur = { 0, 0 };

    while (!metrics_text_prometheus_rules(&cur, out, SIZE_MAX, snap->metrics)) {
    }
    metrics_text_prometheus_rest(out, snap);
}
