/* Two proxies in front of the same store, four clients hammering one
 * identity with LIMITER CHECK ... ID, ADJUST (both signs) and RELEASE
 * interleaved in pipelines, in single and in cluster mode (where the
 * path's two levels live in two slots, so a check is two script calls and
 * a refusal in one is refunded in the other).
 *
 * The path api:x has a shared level `api` (a token bucket of 60) and its
 * own level `api:*` (at most 4 requests in flight, and a bucket of 40);
 * both buckets refill so slowly that no whole token comes back during the
 * test. The test keeps its own books: the tokens each bucket must hold
 * (what admitted checks and ADJUSTs took, never given back beyond what was
 * taken, so no give-back is lost to the cap) and the tokens holding a
 * slot. After each pipelined batch, whatever order the proxies and Redis
 * ran it in, Redis must hold exactly that:
 *   - the concurrency set has exactly the holders the replies admitted
 *     and the RELEASEs freed, never more than 4;
 *   - each bucket holds exactly its capacity less what was charged: a
 *     check refused by either level took nothing anywhere, an ADJUST
 *     applied once to each level;
 *   - a batch never admits more cost than its buckets held plus what its
 *     negative ADJUSTs gave back. */
#include "tests/support/px_test.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/integration/cluster_fixture.h"
#include "tests/integration/fixture.h"
#include "tests/integration/limiter_support.h"
#include "tests/integration/lstate.h"

PX_TEST_SUITE(it_interleave);

static const char limits_yaml[] =
    "api:\n"
    "  limits:\n"
    "    - {algorithm: token_bucket, capacity: 60, refill_per_sec: 0.001}\n"
    "  children:\n"
    "    \"*\":\n"
    "      limits:\n"
    "        - {algorithm: concurrency, max: 4, lease: 60s}\n"
    "        - {algorithm: token_bucket, capacity: 40, refill_per_sec: "
    "0.001}\n";

#define MAX_HELD   4
#define CAP_SHARED 60
#define CAP_OWN    40
#define BATCHES    40
#define BATCH_OPS  10
#define CLIENTS    4
#define TOKENS_MAX (BATCHES * BATCH_OPS)

static const char key_slots[] = "cellgate:{api:x}#0:concurrency";
static const char key_own[] = "cellgate:{api:x}#1:token_bucket";
static const char key_shared[] = "cellgate:{api}#0:token_bucket";

static struct px_child second;
static char conf[PX_PATH_MAX + 64];

static void prepare(void)
{
    char limits[PX_PATH_MAX];

    px_write_file(limits, sizeof(limits), "limits.yaml", limits_yaml);
    snprintf(conf, sizeof(conf), "limits_file: %s\n", limits);
    px_path(second.log, sizeof(second.log), "cellgate-second.stderr");
}

static void init_single(void)
{
    prepare();
    px_redis_start(&px_env()->redis, NULL);
    px_proxy_start_for(&px_env()->proxy, &px_env()->redis, conf);
    px_proxy_start_for(&second, &px_env()->redis, conf);
}

static void init_cluster(void)
{
    prepare();
    px_cluster_init();
    px_cluster_proxy_start(&px_env()->proxy, px_cluster(), conf);
    px_cluster_proxy_start(&second, px_cluster(), conf);
}

static void fini(void)
{
    if (second.pid > 0) {
        px_proxy_stop_clean(&second, SIGTERM);
    }
    memset(&second, 0, sizeof(second));
    px_env_fini();
}

/* A bucket's whole tokens as Redis holds them: its capacity when the key
 * is gone (a bucket given back to full may be deleted). */
static long long bucket_tokens(const char *key, long long cap)
{
    redisContext *d = px_direct_for(key, strlen(key));
    redisReply *r = lstate_cmd(d, "HGET %s tokens", key);
    long long n = cap;

    cr_assert(r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_NIL,
              "HGET %s: type %d", key, r->type);
    if (r->type == REDIS_REPLY_STRING) {
        n = strtoll(r->str, NULL, 10);
    }
    freeReplyObject(r);
    redisFree(d);
    return n;
}

/* The holders Redis keeps in the concurrency level's set. */
static long long slots_held(void)
{
    redisContext *d = px_direct_for(key_slots, strlen(key_slots));
    redisReply *r = px_cmd(d, "ZCARD %s", key_slots);
    long long n;

    cr_assert_eq(r->type, REDIS_REPLY_INTEGER, "ZCARD: type %d", r->type);
    n = r->integer;
    freeReplyObject(r);
    redisFree(d);
    return n;
}

/* One operation of a batch, and what its reply must be checked for. */
struct op {
    enum { OP_CHECK, OP_ADJUST, OP_RELEASE, OP_RELEASE_BOGUS } kind;
    int client;  /* which of the four connections sends it */
    long long n; /* CHECK: cost; ADJUST: delta */
    int token;   /* CHECK, RELEASE: the ID */
};

static void run(void)
{
    redisContext *c[CLIENTS];
    static unsigned char held[TOKENS_MAX];
    int next_token = 0, nheld = 0;
    long long charged = 0, admitted_total = 0, refused_total = 0;
    unsigned seed = (unsigned)px_now_ms();

    memset(held, 0, sizeof(held));
    for (int k = 0; k < CLIENTS; k++) {
        c[k] = px_connect(k % 2 == 0 ? px_env()->proxy.port : second.port);
    }
    srand(seed);
    for (int b = 0; b < BATCHES; b++) {
        struct op ops[BATCH_OPS];
        long long given = 0, adm_cost = 0;
        long long before = CAP_OWN - charged;
        unsigned char released[TOKENS_MAX];

        memset(released, 0, sizeof(released));
        for (int i = 0; i < BATCH_OPS; i++) {
            struct op *o = &ops[i];
            int pick = rand() % 10;

            o->client = rand() % CLIENTS;
            o->token = -1;
            if (pick < 5) {
                o->kind = OP_CHECK;
                o->n = 1 + rand() % 3;
                o->token = next_token++;
            } else if (pick < 7) {
                /* Give back at most what is charged before the batch, less
                 * what this batch gave back already: whatever the order,
                 * no bucket is ever given back beyond full. */
                o->kind = OP_ADJUST;
                if (rand() % 2 == 0 && charged - given >= 1) {
                    long long g = 1 + rand() % 4;
                    if (g > charged - given) {
                        g = charged - given;
                    }
                    given += g;
                    o->n = -g;
                } else {
                    o->n = 1 + rand() % 3;
                }
            } else if (pick < 9 && nheld > 0) {
                int t;
                do {
                    t = rand() % next_token;
                } while (!held[t] || released[t]);
                o->kind = OP_RELEASE;
                o->token = t;
                released[t] = 1;
                nheld--; /* reserve it: picked once per batch */
            } else {
                o->kind = OP_RELEASE_BOGUS;
            }
        }
        /* nheld already left out the releases picked; the admitted
         * checks are added as their replies come. */
        for (int i = 0; i < BATCH_OPS; i++) {
            const struct op *o = &ops[i];
            switch (o->kind) {
            case OP_CHECK:
                redisAppendCommand(c[o->client],
                                   "LIMITER CHECK api:x COST %lld ID t%d", o->n,
                                   o->token);
                break;
            case OP_ADJUST:
                redisAppendCommand(c[o->client], "LIMITER ADJUST api:x %lld",
                                   o->n);
                break;
            case OP_RELEASE:
                redisAppendCommand(c[o->client], "LIMITER RELEASE api:x t%d",
                                   o->token);
                break;
            case OP_RELEASE_BOGUS:
                redisAppendCommand(c[o->client],
                                   "LIMITER RELEASE api:x never-held");
                break;
            }
        }
        /* Replies come back per connection in the order it sent. */
        for (int i = 0; i < BATCH_OPS; i++) {
            const struct op *o = &ops[i];
            redisReply *r = px_next(c[o->client]);
            char what[96];

            snprintf(what, sizeof(what), "batch %d op %d (seed %u)", b, i,
                     seed);
            switch (o->kind) {
            case OP_CHECK: {
                struct px_five f = px_take_five(r, what);
                if (f.limited == 0) {
                    held[o->token] = 1;
                    nheld++;
                    charged += o->n;
                    adm_cost += o->n;
                    admitted_total++;
                } else {
                    refused_total++;
                }
                break;
            }
            case OP_ADJUST:
                (void)px_take_five(r, what);
                charged += o->n;
                break;
            case OP_RELEASE:
                cr_assert(r->type == REDIS_REPLY_INTEGER && r->integer == 1,
                          "%s: RELEASE of a holder: type %d %lld", what,
                          r->type, r->integer);
                held[o->token] = 0;
                freeReplyObject(r);
                break;
            case OP_RELEASE_BOGUS:
                cr_assert(r->type == REDIS_REPLY_INTEGER && r->integer == 0,
                          "%s: RELEASE of nobody: type %d %lld", what, r->type,
                          r->integer);
                freeReplyObject(r);
                break;
            }
        }
        cr_assert_leq(nheld, MAX_HELD, "batch %d (seed %u): %d in flight", b,
                      seed, nheld);
        cr_assert_eq(slots_held(), nheld,
                     "batch %d (seed %u): Redis holds %lld slots, the "
                     "replies say %d",
                     b, seed, slots_held(), nheld);
        cr_assert_eq(bucket_tokens(key_own, CAP_OWN), CAP_OWN - charged,
                     "batch %d (seed %u): api:x's bucket", b, seed);
        cr_assert_eq(bucket_tokens(key_shared, CAP_SHARED),
                     CAP_SHARED - charged, "batch %d (seed %u): api's bucket",
                     b, seed);
        cr_assert_leq(adm_cost, (before > 0 ? before : 0) + given,
                      "batch %d (seed %u): admitted %lld with %lld held and "
                      "%lld given back",
                      b, seed, adm_cost, before, given);
    }
    /* The run exercised both outcomes, or it proved little. */
    cr_assert(admitted_total > 0 && refused_total > 0,
              "seed %u: %lld admitted, %lld refused", seed, admitted_total,
              refused_total);
    for (int k = 0; k < CLIENTS; k++) {
        redisFree(c[k]);
    }
}

Test(it_interleave, two_proxies_check_adjust_release_in_single_mode,
     .init = init_single, .fini = fini, .timeout = 120)
{
    run();
}

Test(it_interleave, two_proxies_check_adjust_release_across_cluster_slots,
     .init = init_cluster, .fini = fini, .timeout = 180)
{
    run();
}
