/* Pipelining: replies come back in request order, per client, even when
 * hundreds of clients share the proxy's upstream connections. */
#include "tests/integration/fixture.h"
#include "tests/support/px_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

PX_TEST_SUITE(it_pipeline);

#define INCR_COUNT     10000 /* pipelined INCRs on one connection */
#define NCLIENTS       200   /* concurrent clients */
#define ROUNDS         50    /* SET/GET/ECHO triples per client */
#define ROUNDS_PER_GAP 10    /* rounds each client sends before the next */

Test(it_pipeline, ten_thousand_incrs_return_one_to_n_in_order,
     .init = px_env_init, .fini = px_env_fini, .timeout = 120)
{
    redisContext *px = px_connect(px_env()->proxy.port);
    for (int i = 0; i < INCR_COUNT; i++) {
        cr_assert_eq(redisAppendCommand(px, "INCR counter"), REDIS_OK);
    }
    for (long long i = 1; i <= INCR_COUNT; i++) {
        px_check_int(px_next(px), i);
    }
    redisFree(px);

    redisContext *direct = px_redis_connect(&px_env()->redis, NULL);
    px_check_str(px_cmd(direct, "GET counter"), "10000");
    redisFree(direct);
}

Test(it_pipeline, mixed_pipeline_keeps_order_across_local_and_forwarded,
     .init = px_env_init, .fini = px_env_fini, .timeout = 60)
{
    /* Local replies (PING, ECHO) must wait for earlier forwarded ones. */
    redisContext *px = px_connect(px_env()->proxy.port);
    for (int i = 0; i < 1000; i++) {
        redisAppendCommand(px, "SET m%d %d", i, i);
        redisAppendCommand(px, "ECHO e%d", i);
        redisAppendCommand(px, "GET m%d", i);
        redisAppendCommand(px, "PING");
        redisAppendCommand(px, "GET missing");
    }
    char want[32];
    for (int i = 0; i < 1000; i++) {
        px_check_status(px_next(px), "OK");
        snprintf(want, sizeof(want), "e%d", i);
        px_check_str(px_next(px), want);
        snprintf(want, sizeof(want), "%d", i);
        px_check_str(px_next(px), want);
        px_check_status(px_next(px), "PONG");
        px_check_nil(px_next(px));
    }
    redisFree(px);
}

/* Appends round j of client i: SET, GET, ECHO with values unique to both. */
static void append_round(redisContext *c, int i, int j)
{
    cr_assert_eq(redisAppendCommand(c, "SET k%d_%d v%d_%d", i, j, i, j),
                 REDIS_OK);
    cr_assert_eq(redisAppendCommand(c, "GET k%d_%d", i, j), REDIS_OK);
    cr_assert_eq(redisAppendCommand(c, "ECHO e%d_%d", i, j), REDIS_OK);
}

Test(it_pipeline, concurrent_clients_each_get_only_their_own_replies,
     .init = px_env_init, .fini = px_env_fini, .timeout = 120)
{
    redisContext **cs = calloc(NCLIENTS, sizeof(*cs));
    cr_assert_not_null(cs);
    for (int i = 0; i < NCLIENTS; i++) {
        cs[i] = px_connect(px_env()->proxy.port);
    }
    /* Send every pipeline before reading anything, interleaving clients in
     * time so their requests share upstream connections. */
    for (int j = 0; j < ROUNDS; j += ROUNDS_PER_GAP) {
        for (int i = 0; i < NCLIENTS; i++) {
            for (int k = j; k < j + ROUNDS_PER_GAP && k < ROUNDS; k++) {
                append_round(cs[i], i, k);
            }
            px_flush(cs[i]);
        }
    }
    char want[64];
    for (int i = 0; i < NCLIENTS; i++) {
        for (int j = 0; j < ROUNDS; j++) {
            px_check_status(px_next(cs[i]), "OK");
            snprintf(want, sizeof(want), "v%d_%d", i, j);
            px_check_str(px_next(cs[i]), want);
            snprintf(want, sizeof(want), "e%d_%d", i, j);
            px_check_str(px_next(cs[i]), want);
        }
        redisFree(cs[i]);
    }
    free(cs);

    redisContext *direct = px_redis_connect(&px_env()->redis, NULL);
    px_check_int(px_cmd(direct, "DBSIZE"), NCLIENTS * ROUNDS);
    redisFree(direct);
}
