/* Sentinel mode over TLS, against real Redis Sentinels: the master, its
 * replica and the sentinels listen on TLS ports only (no plaintext port
 * anywhere), the sentinels talk TLS to the nodes and to each other
 * (tls-replication), and cellgate, with upstream_tls (sentinel_tls
 * following it), finds the master, serves GET/SET and CL.THROTTLE, and
 * follows a SENTINEL FAILOVER. With sentinel_tls: no, the sentinels are
 * asked in plaintext while the data nodes speak TLS; with sentinel_tls:
 * yes and upstream_tls: no, the other way round. */
#include "tests/integration/sentinel_fixture.h"
#include "tests/integration/tls_fixture.h"
#include "tests/support/px_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(PX_TLS) && PX_TLS

PX_TEST_SUITE(it_sentinel_tls);

#define SERVE_MS 20000 /* bound of the wait for service after a switch */

/* Two sentinels that must find each other over TLS (peers known). */
static void init_tls_all(void)
{
    px_sentinel_start_tls(2, 1, PX_SENTINEL_TLS_ALL);
}

static void init_tls_data(void)
{
    px_sentinel_start_tls(1, 0, PX_SENTINEL_TLS_DATA);
}

static void init_tls_sentinels(void)
{
    px_sentinel_start_tls(1, 0, PX_SENTINEL_TLS_SENTINELS);
}

/* cellgate in front of the sentinels, upstream_tls with the test CA, then
 * `more`. */
static void start_proxy(const char *more)
{
    static char extra[2 * PX_PATH_MAX];

    snprintf(extra, sizeof(extra),
             "upstream_tls: yes\nupstream_tls_ca_cert_file: %s\n%s",
             px_tls_certs()->ca, more != NULL ? more : "");
    px_proxy_start(&px_env()->proxy, px_sentinel_yaml(px_sentinels(), 0, extra),
                   NULL);
}

/* Polls INFO on `c` until cellgate names the master on `port`. */
static void wait_master(redisContext *c, int port)
{
    long long deadline = px_now_ms() + SERVE_MS;
    char want[64];

    snprintf(want, sizeof(want), "\r\nsentinel_master_addr:127.0.0.1:%d\r\n",
             port);
    for (;;) {
        redisReply *r = px_cmd(c, "INFO");
        int ok = r->type == REDIS_REPLY_STRING && strstr(r->str, want) != NULL;
        freeReplyObject(r);
        if (ok) {
            return;
        }
        cr_assert(px_now_ms() < deadline, "cellgate never named port %d", port);
        px_sleep_ms(20);
    }
}

/* SET k `val` through `c` until it is accepted (errors only meanwhile: a
 * master being replaced), then GET and CL.THROTTLE; the value is on the
 * master at `port`, read there directly (over TLS when it speaks it). */
static void check_service(redisContext *c, int port, const char *val)
{
    long long deadline = px_now_ms() + SERVE_MS;
    redisReply *r;

    for (;;) {
        r = px_cmd(c, "SET k %s", val);
        if (r->type == REDIS_REPLY_STATUS) {
            break;
        }
        cr_assert_eq(r->type, REDIS_REPLY_ERROR, "SET answered type %d",
                     r->type);
        cr_assert(px_now_ms() < deadline, "SET never accepted: %s", r->str);
        freeReplyObject(r);
        px_sleep_ms(20);
    }
    cr_assert_str_eq(r->str, "OK");
    freeReplyObject(r);
    px_check_str(px_cmd(c, "GET k"), val);
    r = px_cmd(c, "CL.THROTTLE th-%s 5 10 60", val);
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "CL.THROTTLE: type %d %s", r->type,
                 r->type == REDIS_REPLY_ERROR ? r->str : "");
    cr_assert_eq(r->element[0]->integer, 0, "CL.THROTTLE refused");
    freeReplyObject(r);
    px_check_str(px_sentinel_cmd(px_sentinels(), port, "GET k"), val);
}

/* Everything TLS: cellgate asks the sentinels over TLS, serves from the
 * master over TLS, and follows SENTINEL FAILOVER to the replica. A
 * bystander connected before the failover is served after it. */
Test(it_sentinel_tls, tls_everywhere_follows_a_failover, .init = init_tls_all,
     .fini = px_sentinel_fini, .timeout = 90)
{
    struct px_sentinels *s = px_sentinels();
    int old = px_env()->redis.port, new_port;
    redisContext *c, *by;

    start_proxy(NULL);
    c = px_connect(px_env()->proxy.port);
    by = px_connect(px_env()->proxy.port);
    wait_master(c, old);
    check_service(c, old, "before");
    px_check_str(px_cmd(by, "GET k"), "before");

    px_check_status(px_sentinel_cmd(s, s->sent[0].port, "SENTINEL FAILOVER %s",
                                    PX_SENTINEL_MASTER),
                    "OK");
    new_port = px_sentinel_wait_switch(s, old);
    cr_assert_eq(new_port, s->replica.port);
    wait_master(c, new_port);
    check_service(c, new_port, "after");
    px_check_str(px_cmd(by, "GET k"), "after");
    cr_assert(px_file_has(px_env()->proxy.log, "connections moved"),
              "no switch logged");
    redisFree(by);
    redisFree(c);
}

/* sentinel_tls: no: the sentinels are asked on their plaintext port, the
 * data nodes (TLS only) over TLS. */
Test(it_sentinel_tls, plaintext_sentinels_tls_nodes, .init = init_tls_data,
     .fini = px_sentinel_fini, .timeout = 60)
{
    redisContext *c;

    start_proxy("sentinel_tls: no\n");
    c = px_connect(px_env()->proxy.port);
    wait_master(c, px_env()->redis.port);
    check_service(c, px_env()->redis.port, "v");
    redisFree(c);
}

/* sentinel_tls: yes, upstream_tls: no: the sentinel is asked over TLS
 * (its only port), the master in plaintext. */
Test(it_sentinel_tls, tls_sentinels_plaintext_nodes, .init = init_tls_sentinels,
     .fini = px_sentinel_fini, .timeout = 60)
{
    static char extra[2 * PX_PATH_MAX];
    redisContext *c;

    snprintf(extra, sizeof(extra),
             "sentinel_tls: yes\nupstream_tls_ca_cert_file: %s\n",
             px_tls_certs()->ca);
    px_proxy_start(&px_env()->proxy, px_sentinel_yaml(px_sentinels(), 0, extra),
                   NULL);
    c = px_connect(px_env()->proxy.port);
    wait_master(c, px_env()->redis.port);
    check_service(c, px_env()->redis.port, "v");
    redisFree(c);
}

#endif /* PX_TLS */
