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

#include "proxy/core/queue.h"

struct client;
struct conf;
struct keyspec;
struct req;
struct upstream;

#define CLUSTER_SLOTS 16384

/* One Redis node and its shared connections. */
struct node {
    char name[300];             /* "host:port", for logs and errors */
    char host[256];             /* as the topology names it */
    int port;                   /* TCP port */
    struct sockaddr_storage sa; /* resolved address */
    struct upstream **pool;     /* owned array of shared upstreams (RESP2) */
    struct upstream **pool3;    /* owned array of npool shared RESP3
                                   upstreams, NULL until a RESP3 client
                                   needs this node */
    unsigned npool;             /* length of pool (and of pool3) */
    struct queue idle;          /* idle private upstreams, reset, ready for
                                   the next client that needs one */
    unsigned nidle;             /* length of idle */
    struct queue link;          /* link in cluster.nodes */
    unsigned gen;               /* last slot map that listed it */
    unsigned seed : 1;          /* from the configuration: never dropped */
};

/* The topology. Embedded in the server struct. */
struct cluster {
    int enabled;                      /* cluster mode (else single) */
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
    char last_err[160];               /* why the last refresh failed */
    unsigned refreshing : 1;          /* a CLUSTER SLOTS is in flight */
    unsigned fetching_keys : 1;       /* a COMMAND is in flight */
    unsigned has_map : 1;             /* a slot map was loaded */
};

/* Creates the nodes of the configuration (the upstream, or the seeds) and,
 * in cluster mode, asks for the slot map. PX_OK or PX_ERR (logged). */
int cluster_init(const struct conf *conf);

/* Closes every node (shutdown). Held requests fail. */
void cluster_shutdown(void);

/* True once requests can be routed (always in single mode). */
int cluster_ready(void);

/* Holds `req` until the slot map and the command table are known; it fails
 * after the command timeout. */
void cluster_hold(struct req *req);

/* The key positions learned from COMMAND (cluster mode, once ready). */
const struct keyspec *cluster_keyspec(void);

/* The node serving `slot`, or NULL when no master covers it. */
struct node *cluster_node_for_slot(unsigned slot);

/* A node for keyless commands: single mode's node, or a master. */
struct node *cluster_any_node(void);

/* The shared RESP2 connection of `node` that the client with id `cid`
 * uses. Each client sticks to one connection per node, so its commands stay
 * in order. The proxy's own requests (limiter scripts) use these too. */
struct upstream *cluster_upstream(const struct node *node, uint64_t cid);

/* The same in protocol `proto` (RESP_PROTO2 or RESP_PROTO3). The RESP3
 * pool of a node is opened here, the first time a RESP3 client needs it, so
 * RESP2-only deployments never open one. */
struct upstream *cluster_upstream_proto(struct node *node, uint64_t cid,
                                        int proto);

/* A private upstream to `node` for `owner` (NULL: lent for one request),
 * speaking `proto`: an idle one of the node's pool when there is one, else
 * a new connection. */
struct upstream *cluster_private_take(struct node *node, struct client *owner,
                                      int proto);

/* Gives back a private upstream nobody uses any more: reset and kept in
 * its node's idle pool (up to `private_pool`), or closed when `close` is
 * set, when it still owes replies, or when the pool is full. */
void cluster_private_put(struct upstream *up, int close);

/* Sends `req` on a private upstream of `node` lent for this one request
 * (SCRIPT KILL must not queue behind the busy script on a shared one). */
void cluster_send_oneshot(struct node *node, struct req *req);

/* The node named "host:port", or NULL. */
struct node *cluster_node_by_name(const char *name);

/* The index in the pool of `node` (in `proto`) of a shared connection that
 * is ready and idle (owes nothing), else of one that is not stalled
 * (upstream_is_stalled), or -1. */
int cluster_upstream_unstalled(const struct node *node, int proto);

/* The masters of the current map, each once, sorted by name (a stable
 * order: SCAN cursors name a master by its index). Writes at most `max`
 * and returns how many there are. */
unsigned cluster_masters(struct node **out, unsigned max);

/* Handles a -MOVED or -ASK reply to `req`: updates the map and re-sends
 * `req` to the node named. Returns 1 when it took `req`, 0 when the reply is
 * to be delivered as it is (not a redirection, or too many of them). */
int cluster_redirect(struct req *req, const char *frame, size_t len);

/* A -MOVED or -ASK on the private connection of `owner`: it cannot follow
 * (the connection holds the client's state), so inside a transaction the
 * reply becomes Redis's -CROSSSLOT (the node flagged the transaction, EXEC
 * aborts), and elsewhere -TRYAGAIN while the map refreshes. Returns 1 when
 * it completed `req` (which may be freed). */
int cluster_private_redirect(struct req *req, const struct client *owner,
                             const char *frame, size_t len);

/* An upstream of the topology lost its connection: refresh the map soon
 * (a failover may be under way). */
void cluster_upstream_down(struct upstream *up);

/* Periodic work: map refresh, held requests' timeouts, command timeouts. */
void cluster_cron(uint64_t now_ms);

#endif /* PX_PROXY_CLUSTER_H */
