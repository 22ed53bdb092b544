/* cellgate's own INFO sections, rendered from a snapshot.
 *
 *   info_snapshot_take (info_snapshot.c)     reads the server once: clients,
 *        |                                   their libraries, limiter and
 *        v                                   store stats, WAIT counts, nodes,
 *   struct info_snapshot                     slot coverage, TLS, sentinel
 *        |                     \
 *   info_render (here)     metrics_text_prometheus_* (metrics_text.c)
 *   "# Proxy", "# Limiter",  the Prometheus text
 *   "# Latency", "# Nodes"
 *
 * The snapshot is plain data: this module renders it without the loop, the
 * server or a client, so the exact lines of every section are unit-tested
 * on hand-built snapshots (tests/unit/test_info.c), and INFO and /metrics
 * show the same facts because they read the same struct. */
#ifndef PX_PROXY_INFO_H
#define PX_PROXY_INFO_H

#include <stddef.h>
#include <stdint.h>

#include "proxy/core/metrics.h"
#include "proxy/limiter/limiter.h"
#include "proxy/limiter/store.h"

struct buf;

/* cellgate's INFO sections, as bits of info_render's `sections`. */
enum info_section {
    INFO_PROXY = 1,   /* "# Proxy": clients, limiter and store, nodes */
    INFO_LIMITER = 2, /* "# Limiter": decisions by rule, reloads */
    INFO_LATENCY = 4, /* "# Latency": the two histograms */
    INFO_NODES = 8,   /* "# Nodes": per-node counters */
};

/* Every section: INFO, INFO all, INFO everything, INFO default. */
#define INFO_ALL (INFO_PROXY | INFO_LIMITER | INFO_LATENCY | INFO_NODES)

/* Distinct lib-names counted at most: more go under "other". */
#define INFO_LIBS_MAX 32

/* The census: connected clients by the lib-name they set (CLIENT
 * SETINFO). */
struct info_libs {
    const char *names[INFO_LIBS_MAX]; /* borrowed from the clients, valid
                                         until the loop runs again */
    unsigned counts[INFO_LIBS_MAX];   /* clients of names[i] */
    unsigned n;                       /* entries of names */
    unsigned other;                   /* clients of names past the cap */
    unsigned none;                    /* clients that set none */
};

/* A node on which clients hold private connections. */
struct info_held {
    const char *name; /* borrowed: the node's "host:port" */
    unsigned n;       /* private connections held on it */
};

/* Everything cellgate's INFO sections and the Prometheus text show, as
 * of one moment. Strings and `metrics` are borrowed from the server and
 * valid until the loop runs again; `held` is owned (info_snapshot_free). */
struct info_snapshot {
    const char *version; /* cellgate_version */
    const char *mode;    /* "cluster", "sentinel", "single", "embedded" */
    /* Clients and connections. */
    unsigned clients;        /* connected_clients */
    uint64_t connections;    /* total_connections_received */
    uint64_t commands;       /* total_commands_processed */
    unsigned tls_clients;    /* connected_tls_clients */
    uint64_t tls_failures;   /* tls_handshake_failures */
    uint64_t errors;         /* proxy_error_replies */
    uint64_t rejected_conns; /* rejected_connections */
    uint64_t output_limit;   /* client_output_limit_disconnections */
    uint64_t output_bytes;   /* client_output_bytes, every client's */
    uint64_t auth_failures;  /* acl_access_denied_auth */
    struct info_libs libs;   /* the census */
    /* The limiter and its store. */
    uint64_t fail_open;              /* limiter_fail_open */
    uint64_t shadow_limited;         /* limiter_shadow_limited */
    uint64_t adjusts;                /* limiter_adjusts */
    uint64_t leases[4];              /* limiter_lease_hits, ... (4) */
    struct store_stats store;        /* limiter_refusal_cache_*, ... */
    struct limiter_wait_counts wait; /* limiter_waits* */
    /* Upstreams. */
    unsigned nodes;           /* upstream_nodes */
    unsigned masters;         /* upstream_masters: the masters an
                                 INFO was sent to (0: none) */
    unsigned slots_covered;   /* cluster_slots_covered */
    unsigned private_conns;   /* private_connections */
    uint64_t private_refused; /* private_connections_refused */
    struct info_held *held;   /* owned: nodes holding private ones */
    size_t nheld;             /* entries of held */
    /* Sentinel mode (sentinel set): the sentinel_* lines. */
    unsigned sentinel : 1;         /* sentinels are configured */
    const char *sentinel_name;     /* the master's name (sentinel_master) */
    const char *sentinel_addr;     /* the master named, "" when none yet */
    const char *sentinel_watching; /* the sentinel subscribed to, or "" */
    uint64_t sentinel_switches;    /* masters named after the first */
    /* The counters of the Limiter, Latency and Nodes sections (each
     * node's `connected` counted by the take). */
    const struct metrics *metrics; /* borrowed */
};

/* Label values of enum metrics_result (the INFO rule lines' keys and the
 * Prometheus result label). */
extern const char *const info_results[METRICS_RESULTS];

/* Appends the sections of `sections` that `snap` shows, in the order
 * Proxy, Limiter, Latency, Nodes: Proxy first, each other one under its
 * "# Name" header after a blank line when `out` holds something already
 * (INFO's layout). Pure: reads nothing but `snap`. */
void info_render(struct buf *out, unsigned sections,
                 const struct info_snapshot *snap);

/* Frees what `snap` owns (not what it borrows). */
void info_snapshot_free(struct info_snapshot *snap);

#endif /* PX_PROXY_INFO_H */
