/* Integration test fixture: a Redis master, its replica and Redis Sentinels
 * watching them, all real processes on free loopback ports.
 *
 * px_sentinel_start starts the master (px_env()->redis), one replica
 * (redis-server --replicaof) and `n` sentinels (redis-server <conf>
 * --sentinel, each with a writable config file in the test's temp
 * directory: `sentinel monitor PX_SENTINEL_MASTER 127.0.0.1 <port> 2`,
 * down-after-milliseconds 1000, failover-timeout 5000), and returns once
 * every sentinel names the master and knows the replica. px_sentinel_fini,
 * the .fini of every sentinel test, stops the sentinels and the replica,
 * then runs px_env_fini (the proxy's clean exit is asserted, the master
 * stopped, the temp directory removed), also after a failed assert.
 *
 *   Test(it_sentinel, x, .init = px_sentinel_init, .fini = px_sentinel_fini)
 *   {
 *       struct px_sentinels *s = px_sentinels();
 *       px_proxy_start(&px_env()->proxy, px_sentinel_yaml(s, NULL), NULL);
 *       ...
 *   }
 */
#ifndef PX_TESTS_INTEGRATION_SENTINEL_FIXTURE_H
#define PX_TESTS_INTEGRATION_SENTINEL_FIXTURE_H

#include "tests/integration/fixture.h"

#define PX_SENTINEL_MASTER "pxmaster" /* the name they monitor it by */
#define PX_SENTINEL_MAX    3

/* Who speaks TLS (certificates: tls_fixture's, tls-auth-clients no). */
enum px_sentinel_tls {
    PX_SENTINEL_PLAIN = 0,     /* nobody */
    PX_SENTINEL_TLS_ALL,       /* everyone, on TLS ports only (--port 0): the
                                  master, the replica (tls-replication), the
                                  sentinels (to the nodes and each other) */
    PX_SENTINEL_TLS_DATA,      /* the same, but each sentinel also has a
                                  plaintext port: its `port`, for clients */
    PX_SENTINEL_TLS_SENTINELS, /* the sentinels on TLS ports only, the
                                  data nodes in plaintext (no
                                  tls-replication: one sentinel only, its
                                  peers would be asked in plaintext) */
};

struct px_sentinels {
    struct px_child replica;               /* replicates px_env()->redis */
    struct px_child sent[PX_SENTINEL_MAX]; /* the sentinels */
    int n;                                 /* sentinels started */
    const char *password;                  /* their requirepass, or NULL */
    enum px_sentinel_tls tls;              /* who speaks TLS */
    char yaml[1024];                       /* px_sentinel_yaml's text */
};

/* The sentinel environment of the running test. */
struct px_sentinels *px_sentinels(void);

/* Starts the master, the replica and `n` sentinels (requirepass
 * `password` when not NULL) and waits until they are ready (above). For
 * failover tests `peers` also waits until each sentinel knows the others
 * (their quorum can agree). Asserts. */
void px_sentinel_start(int n, const char *password, int peers);

/* px_sentinel_start (no password) with TLS as `tls` says. In the TLS_ALL
 * and TLS_DATA modes every port of a data node (px_env()->redis.port,
 * replica.port) is its TLS port, and so is a sentinel's with
 * PX_SENTINEL_TLS_ALL and PX_SENTINEL_TLS_SENTINELS. */
void px_sentinel_start_tls(int n, int peers, enum px_sentinel_tls tls);

/* A command to the sentinel or data node listening on `port`, over TLS
 * when that port speaks it; asserts a reply came (free it, or hand it to
 * a px_check_*). */
redisReply *px_sentinel_cmd(struct px_sentinels *s, int port, const char *fmt,
                            ...);

/* .init: three sentinels, no password, peers known. */
void px_sentinel_init(void);

/* .fini of every sentinel test. */
void px_sentinel_fini(void);

/* proxy.yaml lines naming the sentinels (a "sentinel:" list, first
 * `dead_port` when it is not 0: a port where none listens) and the
 * master's name, plus `extra` (may be NULL). Returns s->yaml. */
const char *px_sentinel_yaml(struct px_sentinels *s, int dead_port,
                             const char *extra);

/* The port of the master the sentinel `i` names now. Asserts it answers. */
int px_sentinel_master_port(struct px_sentinels *s, int i);

/* Polls until every sentinel names a master other than `old_port` and
 * that master says ROLE master; returns its port. Asserts within 30 s. */
int px_sentinel_wait_switch(struct px_sentinels *s, int old_port);

#endif /* PX_TESTS_INTEGRATION_SENTINEL_FIXTURE_H */
