/* The refusal cache in cluster mode, against a real local cluster of 3
 * masters: for identities on every master and every algorithm the cache
 * knows, refusals are answered without any node being called, with the
 * fields of Redis's own refusal; a client beside them is served exactly;
 * each master gets one tracker connection; a write on a master reaches the
 * cache; and sliding logs always go to their node. No timing assertions. */
#include "tests/support/px_test.h"

#include <stdio.h>
#include <string.h>

#include "tests/integration/cluster_fixture.h"
#include "tests/integration/fixture.h"
#include "tests/integration/limiter_support.h"
#include "tests/integration/lstate.h"

PX_TEST_SUITE(it_refusal_cluster);

/* Polls that wait for the proxy to read a message of Redis: many, short. */
#define POLLS   2000
#define POLL_MS 1

/* Refusals answered from the cache per identity. */
#define CACHED_CALLS 30

/* Every algorithm with 3 allowed in a long window, and gcra too. */
static const char tree[] =
    PX_ALGOS_YAML PX_LIMITS_STAR("g", "{algorithm: gcra, max_burst: 2, "
                                      "count: 1, period: 1h}");

/* The tree's nodes the cache answers for, and the algorithm in their key. */
static const char *const cached_nodes[][2] = {
    { "g", "gcra" },
    { "tb", "token_bucket" },
    { "lb", "leaky_bucket" },
    { "fw", "fixed_window" },
    { "sw", "sliding_window" },
    { "sc", "sliding_counter" },
};

static void init(void)
{
    px_limits_start(PX_MODE_CLUSTER, tree, NULL);
}

/* Writes to path "<node>:m<m>x<n>" for the first n whose path (the hash
 * tag of its key) lands on master m. */
static void path_on_master(const char *node, int m, char *path, size_t len)
{
    struct px_cluster *cl = px_cluster();

    for (int n = 0; n < PX_IDENT_TRIES; n++) {
        snprintf(path, len, "%s:m%dx%d", node, m, n);
        if (px_cluster_master_of_key(cl, path, strlen(path)) == m) {
            return;
        }
    }
    cr_assert_fail("no path of %s lands on master %d", node, m);
}

/* FCALL calls on every master, summed. */
static long long fcalls_everywhere(void)
{
    struct px_cluster *cl = px_cluster();
    long long sum = 0;

    for (int m = 0; m < cl->nmasters; m++) {
        redisContext *d = px_cluster_connect(cl, m);
        sum += px_cmdstat_calls(d, "fcall");
        redisFree(d);
    }
    return sum;
}

/* Sends LIMITER CHECK `path` through c until the cache answers it
 * (refused each time); returns Redis's last refusal. */
static struct px_five until_cached(redisContext *c, const char *path)
{
    long long hits = px_info_int(c, "limiter_refusal_cache_hits");
    struct px_five last = { 0 };

    for (int i = 0; i < POLLS; i++) {
        struct px_five v =
            px_take_five(px_cmd(c, "LIMITER CHECK %s", path), path);
        cr_assert_eq(v.limited, 1, "%s: admitted while learning", path);
        if (px_info_int(c, "limiter_refusal_cache_hits") != hits) {
            cr_assert_eq(i > 0, 1, "%s: the first refusal came from the cache",
                         path);
            return last;
        }
        last = v;
        px_sleep_ms(POLL_MS);
    }
    cr_assert_fail("%s: the cache never answered", path);
    return last;
}

/* CACHED_CALLS refusals of `path` (CHECK and PEEK in turn) through c with
 * Redis's refusal `first`'s limit and remaining, its waits no longer, each
 * answered by the cache or else by one call of its node; between them `o`
 * writes and reads a key of the same tag, which must round-trip exactly.
 * The cache rightly leaves a call to Redis when its uncertainty about the
 * node's clock (a round trip wide) straddles a change of the reply's
 * whole seconds, which a loaded machine makes likelier: so most calls,
 * not all, must be the cache's. */
static void cached_refusals(redisContext *c, redisContext *o, const char *path,
                            struct px_five first)
{
    long long hits = px_info_int(c, "limiter_refusal_cache_hits");
    long long calls = fcalls_everywhere();

    for (int i = 0; i < CACHED_CALLS; i++) {
        char want[16];
        struct px_five v = px_take_five(
            px_cmd(c, "LIMITER %s %s", i % 2 ? "PEEK" : "CHECK", path), path);
        cr_assert(v.limited == 1 && v.limit == first.limit &&
                      v.remaining == first.remaining &&
                      v.retry <= first.retry && v.reset <= first.reset,
                  "%s: cached %lld %lld %lld %lld %lld, Redis said %lld %lld "
                  "%lld %lld %lld",
                  path, v.limited, v.limit, v.remaining, v.retry, v.reset,
                  first.limited, first.limit, first.remaining, first.retry,
                  first.reset);
        snprintf(want, sizeof(want), "v%d", i);
        px_check_status(px_cmd(o, "SET {%s}:plain %s", path, want), "OK");
        px_check_str(px_cmd(o, "GET {%s}:plain", path), want);
    }
    hits = px_info_int(c, "limiter_refusal_cache_hits") - hits;
    calls = fcalls_everywhere() - calls;
    cr_assert(hits >= CACHED_CALLS * 2 / 3, "%s: %lld of %d refusals cached",
              path, hits, CACHED_CALLS);
    cr_assert(calls >= CACHED_CALLS - hits &&
                  (hits < CACHED_CALLS || calls == 0),
              "%s: %lld cached, %lld node calls for %d refusals", path, hits,
              calls, CACHED_CALLS);
}

/* Clients with CLIENT TRACKING on, on master m (the cache's tracker). */
static int trackers_on(int m)
{
    redisContext *d = px_cluster_connect(px_cluster(), m);
    redisReply *r = px_cmd(d, "CLIENT LIST");
    int n = 0;

    cr_assert_eq(r->type, REDIS_REPLY_STRING);
    for (const char *p = r->str; (p = strstr(p, " flags=")) != NULL; p++) {
        const char *end = strchr(p + 7, ' ');
        n += end != NULL && memchr(p + 7, 't', (size_t)(end - p - 7)) != NULL;
    }
    freeReplyObject(r);
    redisFree(d);
    return n;
}

Test(it_refusal_cluster, refusals_of_every_algorithm_on_every_master,
     .init = init, .fini = px_cluster_fini, .timeout = 180)
{
    struct px_cluster *cl = px_cluster();
    redisContext *c = px_connect(px_env()->proxy.port);
    redisContext *o = px_connect(px_env()->proxy.port);
    char path[64], key[128];
    size_t nnodes = sizeof(cached_nodes) / sizeof(cached_nodes[0]);

    for (int m = 0; m < cl->nmasters; m++) {
        for (size_t a = 0; a < nnodes; a++) {
            struct px_five v, first;
            path_on_master(cached_nodes[a][0], m, path, sizeof(path));
            for (int i = 0; i < 3; i++) {
                v = px_take_five(px_cmd(c, "LIMITER CHECK %s", path), path);
                cr_assert_eq(v.limited, 0, "%s: call %d refused", path, i);
            }
            first = until_cached(c, path);
            cr_assert(first.limit == 3 && first.remaining == 0 &&
                          first.retry > 0,
                      "%s: Redis's refusal %lld %lld %lld", path, first.limit,
                      first.remaining, first.retry);
            cached_refusals(c, o, path, first);
        }
        /* One tracker per master holding cached keys, whatever the
         * number of keys. */
        cr_assert_eq(trackers_on(m), 1, "master %d", m);
    }
    /* A write on a master reaches the cache: DEL of an identity's key
     * there (an admission by any client would do the same). */
    for (int m = 0; m < cl->nmasters; m++) {
        redisContext *d = px_cluster_connect(cl, m);
        long long inval = px_info_int(c, "limiter_refusal_cache_invalidations");
        struct px_five v;
        path_on_master("sw", m, path, sizeof(path));
        snprintf(key, sizeof(key), "cellgate:{%s}#0:sliding_window", path);
        px_check_int(lstate_cmd(d, "DEL %s", key), 1);
        px_wait_refusal_invalidation(c, inval, "a DEL on a master");
        v = px_take_five(px_cmd(c, "LIMITER CHECK %s", path), "after DEL");
        cr_assert(v.limited == 0 && v.limit == 3 && v.remaining == 2,
                  "master %d: after the DEL %lld %lld %lld", m, v.limited,
                  v.limit, v.remaining);
        redisFree(d);
    }
    redisFree(o);
    redisFree(c);
}

Test(it_refusal_cluster, sliding_logs_always_go_to_their_node, .init = init,
     .fini = px_cluster_fini, .timeout = 120)
{
    struct px_cluster *cl = px_cluster();
    redisContext *c = px_connect(px_env()->proxy.port);
    char path[64];

    for (int m = 0; m < cl->nmasters; m++) {
        redisContext *d = px_cluster_connect(cl, m);
        long long calls;
        path_on_master("sl", m, path, sizeof(path));
        for (int i = 0; i < 3; i++) {
            px_take_five(px_cmd(c, "LIMITER CHECK %s", path), path);
        }
        calls = px_cmdstat_calls(d, "fcall");
        for (int i = 0; i < 20; i++) {
            struct px_five v =
                px_take_five(px_cmd(c, "LIMITER CHECK %s", path), path);
            cr_assert_eq(v.limited, 1);
        }
        cr_assert_eq(px_cmdstat_calls(d, "fcall"), calls + 20,
                     "master %d: a sliding log's refusal skipped its node", m);
        redisFree(d);
    }
    cr_assert_eq(px_info_int(c, "limiter_refusal_cache_hits"), 0);
    redisFree(c);
}
