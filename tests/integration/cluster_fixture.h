/* Integration test fixture: a local Redis Cluster of real redis-server nodes.
 *
 * px_cluster_start launches N masters with R replicas each from Debian's
 * redis-server on free loopback ports (client port and cluster bus port both
 * picked at run time), joins them with `redis-cli --cluster create`, and
 * returns only once the cluster is ready: every running node reports
 * cluster_state:ok, knows every node, flags none of the running ones as
 * failing, agrees with every other node on the slot map and on who
 * replicates whom, answers CLUSTER SLOTS with that same map (every running
 * replica listed), and every replica's link to its master is up.
 *
 * Nodes are px_child processes of fixture.c: they live in the test's temp
 * directory (logs redis-<port>.log, nodes-<port>.conf), get PR_SET_PDEATHSIG
 * so they die with the test process, and are stopped by px_cluster_fini,
 * the .fini of every cluster test, also after a failed assert.
 *
 * Nodes are named by their index in `cl->nodes`, fixed at start (the first
 * `masters` indexes are the initial masters). Roles and slot owners change
 * (failover, migration); the fixture's copy of the map is what the cluster
 * agreed on at the end of the last px_cluster_start, px_cluster_wait_ok,
 * px_cluster_failover or px_cluster_migrate_finish.
 *
 * Typical test:
 *
 *   Test(it_cluster_x, ..., .init = px_cluster_init, .fini = px_cluster_fini)
 *   {
 *       struct px_cluster *cl = px_cluster();
 *       int m = px_cluster_master_of_key(cl, "k", 1);
 *       redisContext *c = px_cluster_connect(cl, m);
 *       ...
 *       px_cluster_kill(cl, m);
 *       px_cluster_wait_ok(cl);     (a replica of m now serves its slots)
 *   }
 */
#ifndef PX_TESTS_INTEGRATION_CLUSTER_FIXTURE_H
#define PX_TESTS_INTEGRATION_CLUSTER_FIXTURE_H

#include <stddef.h>

#include <hiredis/hiredis.h>

#include "tests/integration/fixture.h"

#define PX_CLUSTER_MAX_NODES        16    /* cellgate accepts 16 seeds */
#define PX_CLUSTER_SLOTS            16384 /* CLUSTER_SLOTS in Redis */
#define PX_CLUSTER_ID_LEN           40    /* hex digits of a node id */
#define PX_CLUSTER_DEFAULT_MASTERS  3     /* redis-cli's minimum */
#define PX_CLUSTER_DEFAULT_REPLICAS 1     /* per master */

/* Failure detection delay: small so that a killed master is replaced within
 * seconds (Redis default: 15000 ms). */
#define PX_CLUSTER_NODE_TIMEOUT_MS 2000

/* Bound of every wait for the cluster to settle (start, failover, kill,
 * migration). A kill needs node timeout + election, about 4 s. */
#define PX_CLUSTER_WAIT_MS 30000

/* One redis-server of the cluster. */
struct px_cluster_node {
    struct px_child proc;           /* the process; proc.port: client port */
    int bus_port;                   /* cluster bus port */
    char id[PX_CLUSTER_ID_LEN + 1]; /* node id, as of the last refresh */
    int master;                     /* index of its master, -1 if master */
    char arg_bus[16];               /* argv text borrowed by proc.args */
    char arg_conf[64];              /* argv text borrowed by proc.args */
    char arg_rdb[64];               /* argv text borrowed by proc.args */
};

/* A running cluster and the map it last agreed on. */
struct px_cluster {
    int nnodes;    /* nodes started, masters first */
    int nmasters;  /* masters at start */
    int nreplicas; /* replicas per master at start */
    struct px_cluster_node nodes[PX_CLUSTER_MAX_NODES]; /* by index */
    short owner[PX_CLUSTER_SLOTS]; /* master index per slot, -1: none */
};

/* A slot migration in progress, driven step by step (see below). */
struct px_cluster_migration {
    unsigned slot; /* slot being moved */
    int from;      /* index of the master giving it up */
    int to;        /* index of the master receiving it */
    size_t moved;  /* keys moved so far */
};

/* ---------------- Lifecycle ---------------- */

/* The process-wide cluster used by px_cluster_init (zeroed at start). */
struct px_cluster *px_cluster(void);

/* .init: starts px_cluster() with 3 masters and 1 replica each. */
void px_cluster_init(void);

/* .fini of every cluster test: kills the nodes of every cluster still
 * running (first, so that nothing below can leave them behind), then runs
 * px_env_fini (the proxy's clean-shutdown checks, temp dir removal). */
void px_cluster_fini(void);

/* Starts `masters` (>= 3) masters with `replicas` replicas each (at most
 * PX_CLUSTER_MAX_NODES nodes in all) and waits until the cluster is ready
 * (see the top of this file). Asserts on failure, after killing the nodes
 * it started and removing the temp dir. cl must not be running, and must
 * outlive the test body (px_cluster() or a static): px_cluster_fini stops
 * it after the test returned. */
void px_cluster_start(struct px_cluster *cl, int masters, int replicas);

/* Further redis-server arguments of node `node` (a NULL-ended list that
 * outlives the node, e.g. "--include", a file with its TLS port), asked by
 * px_cluster_start (a restart reuses them); set by a test before it starts
 * a cluster (NULL: none, the default). */
typedef const char *const *px_cluster_args_fn(int node);
void px_cluster_set_node_args(px_cluster_args_fn *fn);

/* Kills every node with SIGKILL and reaps it. Idempotent. */
void px_cluster_stop(struct px_cluster *cl);

/* Writes "127.0.0.1:p1,127.0.0.1:p2,..." of the running nodes, in index
 * order, for --cluster or the "cluster:" key. Asserts it fits. */
void px_cluster_seeds(const struct px_cluster *cl, char *out, size_t outlen);

/* Starts cellgate (px_proxy_start) with "cluster:" set to the seed list,
 * plus yaml_extra (further proxy.yaml lines, may be NULL). */
void px_cluster_proxy_start(struct px_child *p, const struct px_cluster *cl,
                            const char *yaml_extra);

/* ---------------- Topology (as of the last agreement) ---------------- */

/* Client port of a node. */
int px_cluster_port(const struct px_cluster *cl, int node);

/* Index of the node listening on port, or -1 (to decode MOVED/ASK). */
int px_cluster_node_by_port(const struct px_cluster *cl, int port);

/* True when the node is a master. */
int px_cluster_is_master(const struct px_cluster *cl, int node);

/* True while the fixture runs the node (not killed nor stopped). */
int px_cluster_is_running(const struct px_cluster *cl, int node);

/* Index of the master that serves a slot. */
int px_cluster_master_of_slot(const struct px_cluster *cl, unsigned slot);

/* Index of the master that serves a key (slot_for_key). */
int px_cluster_master_of_key(const struct px_cluster *cl, const char *key,
                             size_t len);

/* Writes the indexes of the running replicas of `master` to out (at most
 * max) and returns how many it has. */
int px_cluster_replicas_of(const struct px_cluster *cl, int master, int *out,
                           int max);

/* Lowest slot served by `master`, or -1 when it serves none. */
int px_cluster_first_slot_of(const struct px_cluster *cl, int master);

/* Writes a key in `slot`: "{tag}" + suffix, with the shortest decimal tag
 * that hashes there. Asserts it fits. */
void px_cluster_key_in_slot(unsigned slot, const char *suffix, char *out,
                            size_t outlen);

/* A direct hiredis connection to a node (no redirection following). */
redisContext *px_cluster_connect(const struct px_cluster *cl, int node);

/* ---------------- Waiting and faults ---------------- */

/* Waits (PX_CLUSTER_WAIT_MS) until the running nodes are ready as at start,
 * with every slot served by a running master, then refreshes the fixture's
 * map. After px_cluster_kill of a master, this returns once one of its
 * replicas serves its slots. Asserts with the last reason on timeout. */
void px_cluster_wait_ok(struct px_cluster *cl);

/* kill -9 a node and reap it. Does not wait for the cluster to react. */
void px_cluster_kill(struct px_cluster *cl, int node);

/* Starts a killed node again on the same ports with its nodes.conf, and
 * waits until it answers PING (not until it rejoined: px_cluster_wait_ok).
 * A former master comes back as a replica of the node that took over. */
void px_cluster_restart(struct px_cluster *cl, int node);

/* Sends CLUSTER FAILOVER [mode] to a replica (mode NULL, "FORCE" or
 * "TAKEOVER") and waits until it is a master that the whole cluster agrees
 * on. Its former master becomes its replica when it is running. */
void px_cluster_failover(struct px_cluster *cl, int replica, const char *mode);

/* ---------------- Slot migration, step by step ----------------
 *
 * begin (SETSLOT IMPORTING on the target, then MIGRATING on the source),
 * keys (MIGRATE a batch; the source answers -ASK for moved keys), finish
 * (SETSLOT NODE on the target, the source, then every other master). A test
 * can send traffic between the steps. */

/* Starts moving `slot` from its current master to master `to`. */
void px_cluster_migrate_begin(struct px_cluster *cl,
                              struct px_cluster_migration *m, unsigned slot,
                              int to);

/* MIGRATEs up to max_keys keys of the slot (0: all) to the target and
 * returns how many moved. */
size_t px_cluster_migrate_keys(struct px_cluster *cl,
                               struct px_cluster_migration *m, size_t max_keys);

/* Assigns the slot to the target on every master and waits until every
 * node agrees. Asserts that the source holds no key of the slot any more. */
void px_cluster_migrate_finish(struct px_cluster *cl,
                               struct px_cluster_migration *m);

/* begin + keys (all) + finish. */
void px_cluster_migrate_slot(struct px_cluster *cl, unsigned slot, int to);

#endif /* PX_TESTS_INTEGRATION_CLUSTER_FIXTURE_H */
