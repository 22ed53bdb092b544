/* Sentinel mode: single mode whose one node is the master that Redis
 * Sentinel names (proxy.yaml's `sentinel:`, conf/conf_sentinel.h).
 *
 * The module asks the sentinels, watches them for a switch, checks each
 * master it is told of with ROLE and moves the topology's single node
 * there (cluster_single_move). It calls nothing above the core: the top
 * layer hears of a new master through the callback it installs (the
 * limiter drops what it knew of the old one). */
#ifndef PX_PROXY_CORE_SENTINEL_H
#define PX_PROXY_CORE_SENTINEL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct cluster;
struct core;
struct upstream;

/* A new master: `old` is the one before ("host:port"; "" the first time),
 * `now` the new one. */
typedef void sentinel_change_fn(void *arg, const char *old, const char *now);

/* One configured sentinel. */
struct sentinel_addr {
    char name[300]; /* "host:port", for logs */
    char host[256]; /* as configured: a name is resolved (off the loop)
                       at each connection */
    int port;
};

struct sentinel {
    struct core *core;             /* borrowed: loop, configuration */
    struct cluster *cl;            /* borrowed: the topology it moves */
    sentinel_change_fn *on_change; /* the top layer's, may be NULL */
    void *arg;                     /* borrowed: on_change's argument */
    struct sentinel_addr *addrs;   /* owned array of n */
    int n;                         /* sentinels configured; 0 = off */
    /* Asking GET-MASTER-ADDR-BY-NAME: */
    struct upstream *query; /* owned (private): the connection to
                               sentinel query_at, kept between asks */
    int query_at;           /* its sentinel */
    int ask_at;             /* the sentinel asked now or next */
    int tried;              /* sentinels that failed this round */
    unsigned round_ms;      /* wait after the last failed round, or 0 */
    uint64_t ask_sent_ms;   /* when the ask in flight was sent */
    uint64_t next_ask_ms;   /* the next ask is due then */
    /* Watching +switch-master: */
    struct upstream *sub; /* owned (private): subscribed, or NULL */
    int sub_at;           /* its sentinel, or the next to try */
    uint64_t next_sub_ms; /* the next subscription is due then */
    /* Checking a candidate with ROLE: */
    struct upstream *role; /* owned (private): to the candidate, or NULL */
    char cand_host[256];   /* the candidate ("" when none) */
    int cand_port;
    char cand_from[300];   /* the sentinel that named it */
    uint64_t role_sent_ms; /* when ROLE was sent */
    /* What is known: */
    char master[300];     /* "host:port" of the master, "" until known */
    char prev[300];       /* the master before it, "" until a switch */
    char named[300];      /* the last candidate logged */
    uint64_t switched_ms; /* when the master last changed */
    uint64_t switches;    /* masters after the first */
    uint64_t log_ms;      /* when a rate-limited line was last written */
    unsigned log_dropped; /* rate-limited lines dropped since */
    unsigned asking : 1;  /* an ask is in flight on `query` */
    unsigned stopped : 1; /* shutdown: no new connections */
};

/* Sets up `s` (zeroed or embedded) for the configuration's sentinels and
 * sends the first ask and the subscription (names are resolved off the
 * loop by each connection, so one that does not resolve yet is a sentinel
 * that is down). PX_OK; nothing when no sentinel is configured. */
int sentinel_start(struct sentinel *s, struct core *core, struct cluster *cl,
                   sentinel_change_fn *on_change, void *arg);

/* Periodic work: the safety-net ask, retries, the subscription, replies
 * that are late. */
void sentinel_cron(struct sentinel *s, uint64_t now_ms);

/* Shutdown: closes the sentinel connections. */
void sentinel_stop(struct sentinel *s);

/* Frees what start made (after stop). */
void sentinel_free(struct sentinel *s);

/* ---- Pure: the replies it reads ---- */

enum sentinel_parse {
    SENTINEL_PARSE_OK = 0,
    SENTINEL_PARSE_UNKNOWN = 1, /* GET-MASTER-ADDR: a null (no such name) */
    SENTINEL_PARSE_BAD = -1,    /* an error, or not the expected shape */
};

/* A GET-MASTER-ADDR-BY-NAME reply (RESP2 or RESP3): the host (NUL-ended,
 * at most hostcap - 1 bytes) and port. */
enum sentinel_parse sentinel_parse_addr(const char *frame, size_t len,
                                        char *host, size_t hostcap, int *port);

/* A +switch-master message on a subscription ("message", the channel,
 * "<name> <old-ip> <old-port> <new-ip> <new-port>"): OK when it is one for
 * the master `name`, with the new host and port. */
enum sentinel_parse sentinel_parse_switch(const char *frame, size_t len,
                                          const char *name, char *host,
                                          size_t hostcap, int *port);

/* A ROLE reply: 1 when the node says it is a master, else 0. */
int sentinel_parse_role_master(const char *frame, size_t len);

/* 1 when an ask's answer naming `named` ("host:port") comes from a sentinel
 * that has not seen the last switch yet: it names `prev`, the master left
 * at `switched_ms`, less than a hold time ago (now `now_ms`). */
int sentinel_stale(const char *prev, uint64_t switched_ms, uint64_t now_ms,
                   const char *named);

#endif /* PX_PROXY_CORE_SENTINEL_H */
