/* The server: THE one mutable global (docs/ARCHITECTURE.md). It owns the loop,
 * the listener, every client and upstream, the flush pass and the cron. */
#ifndef PX_PROXY_SERVER_H
#define PX_PROXY_SERVER_H

#include <stdint.h>
#include <uv.h>

#include "proxy/core/cluster.h"
#include "proxy/core/core.h"
#include "proxy/core/hmap.h"
#include "proxy/core/metrics.h"
#include "proxy/core/queue.h"
#include "proxy/core/req.h"
#include "proxy/core/sentinel.h"
#include "proxy/limiter/limiter.h"
#include "proxy/metrics_http.h"

struct conf;
struct limits_tree;
struct upstream;
struct client;
struct tls_ctx;

/* Redirect targets remembered after they leave (CLIENT TRACKINGINFO still
 * names a broken redirect): the last this many. */
#define SERVER_REDIR_IDS 64

/* A CLIENT TRACKING REDIRECT target: its Redis id and cellgate's. */
struct server_redir_id {
    uint64_t rid;       /* Redis's CLIENT ID of its private connection */
    uint64_t client_id; /* cellgate's id of the client */
};

/* Size of the shared read slab for client sockets (one read at a time). */
#define SERVER_READ_SLAB (64 * 1024)

struct server_stats {
    uint64_t connections;     /* accepted since start */
    uint64_t commands;        /* requests parsed */
    uint64_t errors;          /* error replies made by the proxy */
    uint64_t rejected_conns;  /* refused at max_clients */
    uint64_t output_limit;    /* clients closed at the output limit */
    uint64_t private_refused; /* private upstreams refused at
                                 private_max_per_node */
    uint64_t auth_failures;   /* AUTH and HELLO AUTH refused */
    uint64_t auth_unlogged;   /* ... since the last log line of them */
    uint64_t auth_log_ms;     /* when that line was written, or 0 */
    uint64_t tls_failures;    /* client TLS handshakes failed or timed out */
    uint64_t tls_unlogged;    /* TLS failures since the last log line */
    uint64_t tls_log_ms;      /* when that line was written, or 0 */
};

struct server {
    uv_loop_t *loop;              /* borrowed: the default loop */
    const struct conf *conf;      /* borrowed from main */
    uv_tcp_t listener;            /* embedded */
    uv_tcp_t tls_listener;        /* embedded: tls_listen (server_tls.c) */
    struct tls_ctx *tls_clients;  /* owned: tls_listen's context, replaced
                                     on SIGHUP; NULL without tls_listen */
    struct tls_ctx *tls_upstream; /* owned: upstream_tls's (core.tls),
                                     replaced on SIGHUP */
    struct queue tls_handshakes;  /* clients whose TLS handshake runs,
                                     oldest first (hs_link) */
    unsigned ntls_clients;        /* clients past their TLS handshake */
    uv_prepare_t flush;           /* pre-poll flush pass */
    uv_timer_t cron;              /* 100 ms housekeeping */
    uv_signal_t sigint;           /* shutdown */
    uv_signal_t sigterm;          /* shutdown */
    struct queue clients;         /* every struct client */
    unsigned nclients;            /* length of clients */
    struct queue dirty_clients;   /* clients with output to flush */
    struct req_pool req_pool;     /* owned: spare requests, reused by the
                                     clients' commands (client_req_new) */
    struct core core;             /* the core layer's loop, configuration,
                                     upstreams and dirty upstreams */
    struct cluster cluster;       /* the upstream topology */
    struct sentinel sentinel;     /* sentinel mode: names cluster's node */
    struct limiter limiter;       /* the limiter layer */
    uv_signal_t sighup;           /* LIMITER RELOAD */
    struct hmap pubsub_chans;     /* cluster mode: channels cellgate's
                                     clients subscribed to (pubsub.c) */
    struct hmap pubsub_pats;      /* ... and patterns */
    uint64_t next_client_id;      /* last id given */
    struct server_redir_id redir_ids[SERVER_REDIR_IDS]; /* ring of redirect
                                                           targets */
    unsigned next_redir;              /* next slot of redir_ids */
    char read_slab[SERVER_READ_SLAB]; /* client reads land here */
    unsigned shutting_down : 1;       /* stop() ran */
    unsigned listening : 1;           /* listener handle initialised, open */
    unsigned tls_listening : 1;       /* tls_listener initialised, open */
    unsigned tls_reloading : 1;       /* a SIGHUP's TLS reload runs */
    unsigned tls_reload_again : 1;    /* ... and another SIGHUP came */
    struct server_stats stats;        /* counters */
    struct metrics metrics;           /* INFO's and /metrics' counters; the
                                         core holds a pointer to it */
    struct metrics_http metrics_http; /* the Prometheus endpoint */
    /* The passwords in use (secrets.c); the core borrows them. */
    struct conf_secret_values secrets;
};

extern struct server server;

/* Binds, listens and connects the upstream pool. PX_OK or PX_ERR (logged). */
int server_init(const struct conf *conf);

/* Runs the loop until shutdown; then frees everything. Returns the exit
 * code. */
int server_run(void);

/* Queues `c` for the next flush pass. */
void server_mark_client(struct client *c);

/* Sends the limiter's queued calls and writes the upstreams now, when the
 * limiter has enough calls waiting (limiter_flush_due); called after a
 * client's input is dispatched, outside every upstream's callback. */
void server_flush_early(void);

/* Current loop time in milliseconds. */
uint64_t server_now_ms(void);

#endif /* PX_PROXY_SERVER_H */
