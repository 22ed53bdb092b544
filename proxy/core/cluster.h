/* The upstream topology: which Redis node serves which hash slot.
 *
 * Single mode is a topology of one node that owns every slot; cluster mode
 * learns the slot map from `CLUSTER SLOTS` and the key positions of every
 * command from `COMMAND`, both asked over the ordinary shared upstream
 * connections, so the loop never blocks on them. */
#ifndef PX_PROXY_CLUSTER_H
#define PX_PROXY_CLUSTER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "proxy/core/downlog.h"
#include "proxy/core/queue.h"

struct conf;
struct core;
struct keyspec;
struct req;
struct upstream;
struct upstream_ops;

#define CLUSTER_SLOTS 16384

/* One Redis node and its shared connections. */
struct node {
    char name[300];             /* "host:port", for logs and errors */
    char host[256];             /* as configured (single mode) or as the
                                   cluster announces it: an address or a
                                   host name, resolved by each connection
                                   at each attempt; a TLS certificate is
                                   checked for it */
    int port;                   /* TCP port */
    struct downlog outage_dlog; /* its shared connections' outages */
    struct upstream **pool;     /* owned array of shared upstreams (RESP2) */
    struct upstream **pool3;    /* owned array of npool shared RESP3
                                   upstreams, NULL until a RESP3 client
                                   needs this node */
    struct upstream **lpool;    /* owned array of npool shared limiter
                                   upstreams (UPSTREAM_LIMITER), NULL
                                   unless limiter_password is set */
    struct upstream *lim;       /* owned: the limiter's own shared RESP2
                                   upstream (lane CLUSTER_LIMITER_LANE)
                                   without limiter_password; NULL until
                                   its first use */
    unsigned npool;             /* length of pool (and of pool3, lpool) */
    struct queue idle;          /* idle private upstreams, reset, ready for
                                   the next client that needs one */
    unsigned nidle;             /* length of idle */
    struct queue held;          /* private upstreams clients hold now
                                   (struct upstream, held_link) */
    unsigned nheld;             /* length of held: at most
                                   private_max_per_node */
    struct queue link;          /* link in cluster.nodes */
    struct cluster *cl;         /* borrowed: the topology it belongs to */
    unsigned gen;               /* last slot map that listed it */
    unsigned seed : 1;          /* single mode's upstream: never dropped */
};

/* Where requests go, decided once from the configuration (cluster_init)
 * and never again: no Redis, one node, the one node a Sentinel names (none
 * until it answers), or a Redis Cluster's masters. */
enum cluster_mode {
    CLUSTER_MODE_EMBEDDED, /* no upstream: the limiter decides in memory */
    CLUSTER_MODE_SINGLE,   /* upstream.host:port */
    CLUSTER_MODE_SENTINEL, /* the master Sentinel names */
    CLUSTER_MODE_CLUSTER,  /* the seeds' slot map */
};

/* The topology. Embedded in the server struct. */
struct cluster {
    struct core *core;                /* borrowed: loop, configuration */
    enum cluster_mode mode;           /* set once by cluster_init */
    struct node *slot[CLUSTER_SLOTS]; /* borrowed: master of each slot */
    struct queue nodes;               /* every struct node */
    unsigned nnodes;                  /* length of nodes */
    struct node *single;              /* borrowed: single mode's node */
    struct keyspec *keys;             /* owned: key positions (cluster) */
    struct queue waiting;             /* reqs held until the map is known */
    uint64_t last_refresh_ms;         /* loop time of the last refresh */
    uint64_t refresh_after_ms;        /* next refresh due at this time */
    unsigned gen;                     /* slot maps loaded so far */
    unsigned next_ask;                /* rotates the node asked */
    unsigned next_seed;               /* rotates the seed asked while no
                                         node answers */
    uint64_t seed_due_ms;             /* no seed is asked before (a round
                                         over them ended) */
    struct downlog refresh_dlog;      /* failed refreshes, told at the
                                         first and once a minute */
    char last_err[160];               /* why the last refresh failed (in
                                         sentinel mode: why no master is
                                         known, set by sentinel.c) */
    char asked_host[256];             /* host of the node last asked for
                                         the map (it may not know its own
                                         address) */
    unsigned refreshing : 1;          /* a CLUSTER SLOTS is in flight */
    unsigned fetching_keys : 1;       /* a COMMAND is in flight */
    unsigned has_map : 1;             /* a slot map was loaded */
};

/* Sets the mode from `conf`, once; creates single mode's node, or in
 * cluster mode asks a seed for the slot map (its nodes are created from
 * it). PX_OK or PX_ERR (logged). */
int cluster_init(struct cluster *cl, struct core *core,
                 const struct conf *conf);

/* Closes every node (shutdown). Held requests fail. */
void cluster_shutdown(struct cluster *cl);

/* True unless the proxy is embedded: requests go to Redis (in sentinel
 * mode also while no master is known yet; they are held meanwhile). */
static inline int cluster_has_upstream(const struct cluster *cl)
{
    return cl->mode != CLUSTER_MODE_EMBEDDED;
}

/* The proxy's mode (see enum cluster_mode). */
static inline enum cluster_mode cluster_mode(const struct cluster *cl)
{
    return cl->mode;
}

/* True in cluster mode: keys live on the master of their slot. */
static inline int cluster_sharded(const struct cluster *cl)
{
    return cl->mode == CLUSTER_MODE_CLUSTER;
}

/* True once requests can be routed (in single mode, once its node is
 * known). */
int cluster_ready(struct cluster *cl);

/* Holds `req` until the slot map and the command table are known (in
 * sentinel mode, until a master is named), then calls `resume`, the point
 * where its owner stopped; it fails after the command timeout. */
void cluster_hold(struct cluster *cl, struct req *req,
                  void (*resume)(struct req *req));

/* The key positions learned from COMMAND (once known). */
const struct keyspec *cluster_keyspec(struct cluster *cl);

/* ---- The one way to send a request (a client's or the proxy's own) ----
 * Each takes `req` and completes it through its own callback (req.h),
 * with the reply, or with an error when the request cannot be sent. */

/* To node `n` (NULL: fails with -CLUSTERDOWN, the slot is not served), on
 * the shared connection of lane req->lane in protocol req->proto (or on
 * the limiter's connection of that lane, for a req->limiter request). */
void cluster_send(struct cluster *cl, struct node *n, struct req *req);

/* To the node that owns `key`. */
void cluster_send_key(struct cluster *cl, const char *key, size_t klen,
                      struct req *req);

/* To `node` on a private upstream lent for this one request (SCRIPT KILL
 * must not queue behind the busy script on a shared one). To reach every
 * master, send one part to each of cluster_masters(). */
void cluster_send_oneshot(struct cluster *cl, struct node *node,
                          struct req *req);

/* ---- Nodes and connections ---- */

/* The node serving `slot`, or NULL when no master covers it. */
struct node *cluster_node_for_slot(struct cluster *cl, unsigned slot);

/* A node for keyless commands: single mode's node, or a master. */
struct node *cluster_any_node(struct cluster *cl);

/* The lane of the limiter's own connection per node: the calls of every
 * client that owes nothing else go there, and the commands such a client
 * sends behind them follow (so they keep their order), but no client's
 * lane is it otherwise, so no other client's large reply delays the
 * limiter's. With limiter_password, one of the limiter user's. */
#define CLUSTER_LIMITER_LANE UINT64_MAX

/* The shared RESP2 connection of `node` that lane `lane` uses. Each client
 * sticks to one connection per node, so its commands stay in order. The
 * limiter's lane is opened here, at its first use. */
struct upstream *cluster_upstream(struct node *node, uint64_t lane);

/* The same in protocol `proto` (RESP_PROTO2 or RESP_PROTO3). The RESP3
 * pool of a node is opened here, the first time a RESP3 client needs it, so
 * RESP2-only deployments never open one. */
struct upstream *cluster_upstream_proto(struct node *node, uint64_t lane,
                                        int proto);

/* The shared connection of `node` that the limiter's calls of lane `lane`
 * use: one logged in as limiter_user when it is set, else the client
 * traffic's (cluster_upstream). */
struct upstream *cluster_limiter_upstream(struct node *node, uint64_t lane);

/* A private upstream for the limiter (its invalidation tracker): a new one
 * logged in as limiter_user when it is set, which is closed when given
 * back, never pooled for a client; else cluster_private_take's. */
struct upstream *cluster_limiter_private(struct cluster *cl, struct node *node,
                                         int proto,
                                         const struct upstream_ops *ops);

/* A private upstream to `node` speaking `proto`, telling `ops` (its new
 * holder's): an idle one of the node's pool when there is one, else a new
 * connection. The holder sets its `owner`. */
struct upstream *cluster_private_take(struct cluster *cl, struct node *node,
                                      int proto,
                                      const struct upstream_ops *ops);

/* Gives back a private upstream nobody uses any more: reset and kept in
 * its node's idle pool (up to `private_pool`), or closed when `close` is
 * set, when it still owes replies, or when the pool is full. A held one
 * stops counting. */
void cluster_private_put(struct cluster *cl, struct upstream *up, int close);

/* A client's private upstream: cluster_private_take's, counted in the
 * node's `held` list until it is given back (cluster_private_put) or gone
 * (cluster_private_unhold). NULL when the node's clients hold
 * `private_max_per_node` already: the cap keeps Redis's maxclients for the
 * shared connections, which are never counted. */
struct upstream *cluster_private_hold(struct cluster *cl, struct node *node,
                                      int proto,
                                      const struct upstream_ops *ops);

/* A held private upstream stops counting (it failed or was closed while
 * its client held it). Idempotent; nothing for an upstream never held. */
void cluster_private_unhold(struct upstream *up);

/* Private upstreams clients hold now, on every node. */
unsigned cluster_private_held(const struct cluster *cl);

/* The node named "host:port", or NULL. */
struct node *cluster_node_by_name(struct cluster *cl, const char *name);

/* The index in the pool of `node` (in `proto`) of a shared connection that
 * is ready and idle (owes nothing), else of one that is not stalled
 * (upstream_is_stalled), or -1. */
int cluster_upstream_unstalled(const struct node *node, int proto);

/* The masters of the current map, each once, sorted by name (a stable
 * order: SCAN cursors name a master by its index). Writes at most `max`
 * and returns how many there are. */
unsigned cluster_masters(struct cluster *cl, struct node **out, unsigned max);

/* ---- Redirections (parsed by topo_parse_redirect) ---- */

/* A -MOVED or -ASK on a private connection: it cannot follow (the
 * connection holds the client's state), so inside a transaction
 * (`in_multi`) the reply becomes Redis's -CROSSSLOT (the node flagged the
 * transaction, EXEC aborts), and elsewhere -TRYAGAIN while the map
 * refreshes. Returns 1 when it completed `req` (which may be freed). */
int cluster_private_redirect(struct cluster *cl, struct req *req, int in_multi,
                             const char *frame, size_t len);

/* Sentinel mode: the single node becomes host:port (a master Sentinel
 * named). The old node's connections close: every request owed there gets
 * "-ERR upstream <old> <why>", never another's reply, and the private
 * connections clients hold there are closed (their clients are told as
 * for a lost connection). Held requests are routed to the new node. 1
 * when it moved, 0 when host:port is the node already, -1 when it cannot
 * be resolved (nothing changed). */
int cluster_single_move(struct cluster *cl, const char *host, int port,
                        const char *why);

/* Periodic work: map refresh, held requests' timeouts, command timeouts. */
void cluster_cron(struct cluster *cl, uint64_t now_ms);

#endif /* PX_PROXY_CLUSTER_H */
