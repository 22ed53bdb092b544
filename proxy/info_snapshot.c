/* Taking the INFO snapshot (see info_snapshot.h).
 *
 * Walks the clients twice at most (their output bytes, the census by
 * lib-name), the nodes once and the slot map once: INFO and a scrape are
 * rare next to commands, and the walks keep no second count that could
 * drift from the real lists. */
#include "proxy/info_snapshot.h"

#include <string.h>

#include "conf/conf.h"
#include "proxy/client_output.h"
#include "proxy/core/cluster.h"
#include "proxy/core/upstream.h"
#include "proxy/core/util.h"
#include "proxy/info.h"
#include "proxy/server.h"

void info_snapshot_libs(struct info_libs *out)
{
    struct queue *q;
    unsigned i;

    memset(out, 0, sizeof(*out));
    for (q = queue_head(&server.clients); q != &server.clients; q = q->next) {
        const struct client *c = container_of(q, struct client, node);
        if (c->lib_name == NULL) {
            out->none++;
            continue;
        }
        for (i = 0; i < out->n && strcmp(out->names[i], c->lib_name) != 0;
             i++) {
        }
        if (i == out->n && out->n == INFO_LIBS_MAX) {
            out->other++;
            continue;
        }
        if (i == out->n) {
            out->names[out->n] = c->lib_name;
            out->counts[out->n++] = 0;
        }
        out->counts[i]++;
    }
}

/* Counts each node's open connections into its counters' `connected`
 * (shared, private and the proxy's own, once ready). */
static void info_snapshot_connected(struct metrics *m)
{
    const struct queue *q;
    size_t i;

    for (i = 0; i < m->nnodes; i++) {
        m->nodes[i]->connected = 0;
    }
    for (q = queue_head(&server.core.upstreams); q != &server.core.upstreams;
         q = q->next) {
        const struct upstream *up = container_of(q, struct upstream, link);
        if (up->mnode != NULL && upstream_is_ready(up)) {
            up->mnode->connected++;
        }
    }
}

/* The nodes on which clients hold private connections, in the cluster's
 * order of nodes. */
static void info_snapshot_held(struct info_snapshot *snap)
{
    const struct cluster *cl = &server.cluster;
    const struct queue *q;
    size_t n = 0;

    for (q = queue_head(&cl->nodes); q != &cl->nodes; q = q->next) {
        n += container_of(q, struct node, link)->nheld > 0;
    }
    snap->held = n > 0 ? px_calloc(n, sizeof(*snap->held)) : NULL;
    for (q = queue_head(&cl->nodes); q != &cl->nodes; q = q->next) {
        const struct node *nd = container_of(q, struct node, link);
        if (nd->nheld > 0) {
            snap->held[snap->nheld].name = nd->name;
            snap->held[snap->nheld++].n = nd->nheld;
        }
    }
}

void info_snapshot_take(struct info_snapshot *snap)
{
    const struct cluster *cl = &server.cluster;
    const struct queue *q;
    unsigned i;

    memset(snap, 0, sizeof(*snap));
    snap->version = PX_VERSION;
    switch (cluster_mode(cl)) {
    case CLUSTER_MODE_CLUSTER:
        snap->mode = "cluster";
        break;
    case CLUSTER_MODE_SENTINEL:
        snap->mode = "sentinel";
        break;
    case CLUSTER_MODE_SINGLE:
        snap->mode = "single";
        break;
    case CLUSTER_MODE_EMBEDDED:
        snap->mode = "embedded";
        break;
    }
    snap->clients = server.nclients;
    snap->connections = server.stats.connections;
    snap->commands = server.stats.commands;
    snap->tls_clients = server.ntls_clients;
    snap->tls_failures = server.stats.tls_failures;
    snap->errors = server.stats.errors;
    snap->rejected_conns = server.stats.rejected_conns;
    snap->output_limit = server.stats.output_limit;
    for (q = queue_head(&server.clients); q != &server.clients; q = q->next) {
        snap->output_bytes +=
            client_output_bytes(container_of(q, struct client, node));
    }
    snap->auth_failures = server.stats.auth_failures;
    info_snapshot_libs(&snap->libs);

    snap->fail_open = limiter_fail_open(&server.limiter);
    snap->shadow_limited = limiter_shadow_limited(&server.limiter);
    snap->adjusts = limiter_adjusts(&server.limiter);
    limiter_lease_stats(&server.limiter, snap->leases);
    limiter_stats(&server.limiter, &snap->store);
    limiter_wait_counts(&server.limiter, &snap->wait);

    snap->nodes = cl->nnodes;
    if (cluster_sharded(cl)) {
        for (i = 0; i < CLUSTER_SLOTS; i++) {
            snap->slots_covered += cl->slot[i] != NULL;
        }
    } else {
        snap->slots_covered = CLUSTER_SLOTS; /* one node serves them all */
    }
    snap->private_conns = cluster_private_held(cl);
    snap->private_refused = server.stats.private_refused;
    info_snapshot_held(snap);

    if (server.sentinel.n > 0) {
        const struct sentinel *st = &server.sentinel;
        snap->sentinel = 1;
        snap->sentinel_name = server.conf->sentinel.master;
        snap->sentinel_addr = st->master;
        snap->sentinel_watching = st->sub != NULL ? st->sub->name : "";
        snap->sentinel_switches = st->switches;
    }

    info_snapshot_connected(&server.metrics);
    snap->metrics = &server.metrics;
}
