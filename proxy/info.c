/* cellgate's INFO sections (see info.h).
 *
 * Each line is "name:value\r\n", as Redis writes INFO. Values that come
 * from outside (a client's lib-name, a rule's path, a node's name) are
 * cleaned of the bytes that would break a line's format (',', '=', and
 * control bytes; ':' too in lib-names, as INFO has always shown them). The
 * order of the lines is the interface: scripts read them, so a new field
 * goes at the end of its section. */
#include "proxy/info.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "parser/buf.h"
#include "proxy/core/util.h"

const char *const info_results[METRICS_RESULTS] = {
    [METRICS_ALLOWED] = "allowed",
    [METRICS_LIMITED] = "limited",
    [METRICS_NEAR_LIMIT] = "near_limit",
    [METRICS_SHADOW_LIMITED] = "shadow_limited",
    [METRICS_ERRORS] = "errors",
    [METRICS_FAIL_OPEN] = "fail_open",
};

/* Rules the Limiter section lists at most. */
#define INFO_RULES_SHOWN 1000

/* A lib-name shows at most this many bytes. */
#define INFO_LIB_SHOWN 79

static void info_printf(struct buf *out, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Appends the formatted text, however long (a node's or a master's name
 * is configuration, of any length). */
static void info_printf(struct buf *out, const char *fmt, ...)
{
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    PX_ASSERT(n >= 0);
    PX_CHECK_OOM(buf_reserve(out, (size_t)n + 1));
    va_start(ap, fmt);
    vsnprintf(buf_tail(out), (size_t)n + 1, fmt, ap);
    va_end(ap);
    buf_commit(out, (size_t)n);
}

/* A value that came from outside: ',' and '=' would split the line's
 * fields, control bytes its lines. */
static void info_value(struct buf *out, const char *v)
{
    for (; *v != '\0'; v++) {
        char ch = *v == ',' || *v == '=' || (unsigned char)*v < 0x20 ? '_' : *v;
        PX_CHECK_OOM(buf_append(out, &ch, 1));
    }
}

/* A lib-name, at most INFO_LIB_SHOWN bytes of it, with ',', '=' and ':'
 * made '_'. */
static void info_lib_value(struct buf *out, const char *name)
{
    size_t k;

    for (k = 0; name[k] != '\0' && k < INFO_LIB_SHOWN; k++) {
        char ch = name[k];
        ch = ch == ',' || ch == '=' || ch == ':' ? '_' : ch;
        PX_CHECK_OOM(buf_append(out, &ch, 1));
    }
}

/* "private_connections_by_node:host:port=n,...": nodes holding none are
 * left out. */
static void info_held_line(struct buf *out, const struct info_snapshot *snap)
{
    size_t i;

    PX_CHECK_OOM(buf_append_str(out, "private_connections_by_node:"));
    for (i = 0; i < snap->nheld; i++) {
        info_printf(out, "%s%s=%u", i == 0 ? "" : ",", snap->held[i].name,
                    snap->held[i].n);
    }
    PX_CHECK_OOM(buf_append_str(out, "\r\n"));
}

/* "clients_by_lib_name:name=n,...,(other)=n,(none)=n". */
static void info_libs_line(struct buf *out, const struct info_libs *libs)
{
    unsigned i;

    PX_CHECK_OOM(buf_append_str(out, "clients_by_lib_name:"));
    for (i = 0; i < libs->n; i++) {
        info_lib_value(out, libs->names[i]);
        info_printf(out, "=%u,", libs->counts[i]);
    }
    if (libs->other > 0) {
        info_printf(out, "(other)=%u,", libs->other);
    }
    info_printf(out, "(none)=%u\r\n", libs->none);
}

/* "# Proxy": cellgate's own numbers. */
static void info_proxy(struct buf *out, const struct info_snapshot *s)
{
    const struct store_stats *ls = &s->store;

    info_printf(out,
                "# Proxy\r\ncellgate_version:%s\r\nproxy_mode:%s\r\n"
                "connected_clients:%u\r\ntotal_connections_received:%llu\r\n"
                "total_commands_processed:%llu\r\n"
                "connected_tls_clients:%u\r\ntls_handshake_failures:%llu\r\n",
                s->version, s->mode, s->clients,
                (unsigned long long)s->connections,
                (unsigned long long)s->commands, s->tls_clients,
                (unsigned long long)s->tls_failures);
    info_printf(
        out,
        "proxy_error_replies:%llu\r\nrejected_connections:%llu\r\n"
        "client_output_limit_disconnections:%llu\r\n"
        "client_output_bytes:%llu\r\n"
        "limiter_fail_open:%llu\r\n"
        "limiter_shadow_limited:%llu\r\n"
        "limiter_refusal_cache_hits:%llu\r\n"
        "limiter_refusal_cache_keys:%llu\r\n"
        "limiter_refusal_cache_invalidations:%llu\r\n",
        (unsigned long long)s->errors, (unsigned long long)s->rejected_conns,
        (unsigned long long)s->output_limit,
        (unsigned long long)s->output_bytes, (unsigned long long)s->fail_open,
        (unsigned long long)s->shadow_limited,
        (unsigned long long)ls->refusal_hits,
        (unsigned long long)ls->refusal_keys,
        (unsigned long long)ls->refusal_invalidations);
    info_printf(out, "limiter_adjusts:%llu\r\n",
                (unsigned long long)s->adjusts);
    info_printf(
        out,
        "limiter_lease_hits:%llu\r\n"
        "limiter_lease_takes:%llu\r\n"
        "limiter_lease_returned_units:%llu\r\n"
        "limiter_lease_waits:%llu\r\n",
        (unsigned long long)s->leases[0], (unsigned long long)s->leases[1],
        (unsigned long long)s->leases[2], (unsigned long long)s->leases[3]);
    info_printf(out,
                "limiter_embedded_keys:%llu\r\n"
                "limiter_embedded_evicted_expired:%llu\r\n"
                "limiter_waits:%llu\r\n"
                "limiter_waits_refused_identity:%llu\r\n"
                "limiter_waits_refused_total:%llu\r\n",
                (unsigned long long)ls->embedded_keys,
                (unsigned long long)ls->embedded_evicted_expired,
                (unsigned long long)s->wait.held,
                (unsigned long long)s->wait.refused_identity,
                (unsigned long long)s->wait.refused_total);
    info_printf(out,
                "limiter_embedded_bytes:%llu\r\n"
                "limiter_embedded_full_refused:%llu\r\n"
                "limiter_override_bytes:%llu\r\n"
                "limiter_override_refused:%llu\r\n"
                "limiter_refusal_cache_bytes:%llu\r\n"
                "limiter_refusal_cache_skipped:%llu\r\n"
                "limiter_pending_bytes:%llu\r\n"
                "limiter_pending_refused:%llu\r\n",
                (unsigned long long)ls->embedded_bytes,
                (unsigned long long)ls->embedded_full_refused,
                (unsigned long long)ls->override_bytes,
                (unsigned long long)ls->override_refused,
                (unsigned long long)ls->refusal_bytes,
                (unsigned long long)ls->refusal_skipped,
                (unsigned long long)ls->pending_bytes,
                (unsigned long long)ls->pending_refused);
    info_printf(out,
                "upstream_nodes:%u\r\nupstream_masters:%u\r\n"
                "cluster_slots_covered:%u\r\n",
                s->nodes, s->masters, s->slots_covered);
    if (s->sentinel) {
        info_printf(
            out,
            "sentinel_master_name:%s\r\nsentinel_master_addr:%s\r\n"
            "sentinel_known:%d\r\nsentinel_switches:%llu\r\n"
            "sentinel_watching:%s\r\n",
            s->sentinel_name, s->sentinel_addr, s->sentinel_addr[0] != '\0',
            (unsigned long long)s->sentinel_switches, s->sentinel_watching);
    }
    info_printf(out,
                "private_connections:%u\r\nprivate_connections_refused:%llu\r\n"
                "acl_access_denied_auth:%llu\r\n",
                s->private_conns, (unsigned long long)s->private_refused,
                (unsigned long long)s->auth_failures);
    info_held_line(out, s);
    info_libs_line(out, &s->libs);
}

/* "# name" of a section, after a blank line unless it is the first. */
static void info_header(struct buf *out, const char *name)
{
    info_printf(out, "%s# %s\r\n", out->len > 0 ? "\r\n" : "", name);
}

/* "# Limiter": the near-limit ratio, the limits file, and the decisions of
 * the first INFO_RULES_SHOWN rules. */
static void info_limiter(struct buf *out, const struct metrics *m)
{
    size_t i, r;

    info_header(out, "Limiter");
    info_printf(out,
                "limiter_near_limit_ratio:%g\r\n"
                "config_reloads_ok:%llu\r\n"
                "config_reloads_failed:%llu\r\n"
                "limits_file_sha256:%s\r\n",
                m->near_ratio, (unsigned long long)m->reloads_ok,
                (unsigned long long)m->reloads_failed, m->sha256);
    /* Any client may run INFO: a line per rule of a tree of 71,000 would
     * be megabytes rendered on the loop for each. The endpoint, rendered
     * in slices, has them all. */
    for (i = 0; i < m->nrules && i < INFO_RULES_SHOWN; i++) {
        info_printf(out, "limiter_rule_%zu:rule=", i);
        info_value(out, m->rules[i]->path);
        for (r = 0; r < METRICS_RESULTS; r++) {
            info_printf(out, ",%s=%llu", info_results[r],
                        (unsigned long long)m->rules[i]->n[r]);
        }
        PX_CHECK_OOM(buf_append_str(out, "\r\n"));
    }
    if (m->nrules > INFO_RULES_SHOWN) {
        info_printf(out, "limiter_rules_omitted:%zu\r\n",
                    m->nrules - INFO_RULES_SHOWN);
    }
}

/* A histogram on one line: count, sum, then the cumulative buckets. */
static void info_hist(struct buf *out, const char *name,
                      const struct metrics_hist *h)
{
    uint64_t cum = 0;
    unsigned i;

    info_printf(out, "%s:count=%llu,sum=%.9f", name,
                (unsigned long long)h->count, (double)h->sum_ns / 1e9);
    for (i = 0; i < METRICS_BUCKETS; i++) {
        cum += h->bucket[i];
        info_printf(out, ",le_%s=%llu", metrics_bucket_le[i],
                    (unsigned long long)cum);
    }
    info_printf(out, ",le_+Inf=%llu\r\n", (unsigned long long)h->count);
}

/* "# Nodes": a line per node of the counters. */
static void info_nodes(struct buf *out, const struct metrics *m)
{
    size_t i;

    info_header(out, "Nodes");
    for (i = 0; i < m->nnodes; i++) {
        const struct metrics_node *n = m->nodes[i];
        info_printf(out, "node_%zu:node=", i);
        info_value(out, n->name);
        info_printf(
            out,
            ",connected=%llu,reconnects=%llu,timeouts=%llu,moved=%llu,"
            "ask=%llu,requests=%llu,errors=%llu\r\n",
            (unsigned long long)n->connected, (unsigned long long)n->reconnects,
            (unsigned long long)n->timeouts, (unsigned long long)n->moved,
            (unsigned long long)n->ask, (unsigned long long)n->requests,
            (unsigned long long)n->errors);
    }
}

void info_render(struct buf *out, unsigned sections,
                 const struct info_snapshot *snap)
{
    if (sections & INFO_PROXY) {
        info_proxy(out, snap);
    }
    if (sections & INFO_LIMITER) {
        info_limiter(out, snap->metrics);
    }
    if (sections & INFO_LATENCY) {
        info_header(out, "Latency");
        info_hist(out, "decision_latency_seconds", &snap->metrics->decision);
        info_hist(out, "forward_latency_seconds", &snap->metrics->forward);
    }
    if (sections & INFO_NODES) {
        info_nodes(out, snap->metrics);
    }
}

void info_snapshot_free(struct info_snapshot *snap)
{
    px_free(snap->held);
    snap->held = NULL;
    snap->nheld = 0;
}
