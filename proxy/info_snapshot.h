/* Taking the snapshot INFO and the Prometheus text render (info.h): the one
 * place that reads the server's clients, limiter, nodes and stats for them.
 * Kept apart from the renderers, which read only the snapshot, so that
 * they (info.c, metrics_text.c) depend on no module of the top layer's
 * wiring. */
#ifndef PX_PROXY_INFO_SNAPSHOT_H
#define PX_PROXY_INFO_SNAPSHOT_H

struct info_libs;
struct info_snapshot;

/* Fills `snap` with the server's numbers now; `masters` is left 0 (the
 * INFO that fans out sets it). Counts each node's open connections into
 * its counters' `connected`. Free it with info_snapshot_free before the
 * loop runs again (it borrows the clients' and nodes' names). */
void info_snapshot_take(struct info_snapshot *snap);

/* Counts the connected clients by lib-name into `out` (the census of the
 * snapshot). */
void info_snapshot_libs(struct info_libs *out);

#endif /* PX_PROXY_INFO_SNAPSHOT_H */
