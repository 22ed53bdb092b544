/* LIMITER CHECK ... WAIT: a request due within the wait is reserved and its
 * reply held until then (a timer, nothing blocks), replies keep request
 * order, a client that leaves while waiting keeps its reservation and harms
 * nothing, token_bucket and leaky_bucket reserve as gcra does (a debt),
 * all or nothing over a path's levels, and a proxy stopped with replies held
 * exits cleanly. Single Redis, a 3-master cluster and embedded. No timing
 * assertion: reservations show in the replies and in the stored state. */
#include "tests/support/px_test.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tests/integration/fixture.h"
#include "tests/integration/limiter_support.h"
#include "tests/integration/lstate.h"

PX_TEST_SUITE(it_limiter_wait);

/* One request a second, no burst: the second is due one second later.
 * The buckets (token_bucket, leaky_bucket) hold one, back 200 ms later;
 * slow's in 50 s. mix: a gcra level of 5 a second shared by every mix:<id>
 * above a bucket per id that refills in 5 s; mixg: a bucket shared by
 * every mixg:<id> (200 ms) above a gcra level of 1 a minute per id; duo:
 * both on one level (one key slot: one script call decides them). */
static const char wait_tree[] =
    "api:\n"
    "  children:\n"
    "    \"*\":\n"
    "      limits: [0, 1, 1]\n"
    "tb:\n"
    "  children:\n"
    "    \"*\":\n"
    "      limits:\n"
    "        - {algorithm: token_bucket, capacity: 1, refill_per_sec: 5}\n"
    "lb:\n"
    "  children:\n"
    "    \"*\":\n"
    "      limits:\n"
    "        - {algorithm: leaky_bucket, size: 1, drip_ms: 200}\n"
    "slow:\n"
    "  children:\n"
    "    \"*\":\n"
    "      limits:\n"
    "        - {algorithm: token_bucket, capacity: 1, refill_per_sec: 0.02}\n"
    "mix:\n"
    "  limits: [0, 5, 1]\n"
    "  children:\n"
    "    \"*\":\n"
    "      limits:\n"
    "        - {algorithm: token_bucket, capacity: 1, refill_per_sec: 0.2}\n"
    "mixg:\n"
    "  limits:\n"
    "    - {algorithm: token_bucket, capacity: 1, refill_per_sec: 5}\n"
    "  children:\n"
    "    \"*\":\n"
    "      limits: [0, 1, 60]\n"
    "duo:\n"
    "  children:\n"
    "    \"*\":\n"
    "      limits:\n"
    "        - {algorithm: gcra, max_burst: 0, count: 1, period: 60}\n"
    "        - {algorithm: token_bucket, capacity: 1, refill_per_sec: 5}\n";

static char limits_path[PX_PATH_MAX];
static const char *limits_args[] = { "--limits", limits_path, NULL };

static void init_single(void)
{
    char yaml[PX_PATH_MAX + 64];

    px_env_prepare();
    px_write_file(limits_path, sizeof(limits_path), "limits.yaml", wait_tree);
    px_redis_start(&px_env()->redis, NULL);
    snprintf(yaml, sizeof(yaml), "limits_file: \"%s\"\n", limits_path);
    px_proxy_start_for(&px_env()->proxy, &px_env()->redis, yaml);
}

static void init_cluster(void)
{
    px_limits_start(PX_MODE_CLUSTER, wait_tree, NULL);
}

static void init_embedded(void)
{
    px_env_prepare();
    px_write_file(limits_path, sizeof(limits_path), "limits.yaml", wait_tree);
    px_proxy_start(&px_env()->proxy, NULL, limits_args);
}

static void reserves_and_keeps_order(void)
{
    redisContext *c = px_connect(px_env()->proxy.port);

    redisAppendCommand(c, "LIMITER CHECK api:k");
    redisAppendCommand(c, "LIMITER CHECK api:k WAIT 3000");
    redisAppendCommand(c, "LIMITER CHECK api:k WAIT 3000");
    redisAppendCommand(c, "LIMITER CHECK api:k WAIT 500");
    redisAppendCommand(c, "PING");
    /* Admitted at once; then two reservations (due in 1 s and 2 s), each
     * reporting nothing left and the reset its reservation set; the last
     * would be due in 3 s, beyond its 500 ms: refused. */
    px_check_five(px_next(c), "admitted", 0, 1, 0, -1, 1);
    /* Meanwhile the reservations hold: another client's PEEK sees the
     * key taken for the next 3 s. */
    redisContext *other = px_connect(px_env()->proxy.port);
    /* Clients share upstream connections by id, so `other` may reach
     * Redis before c's last reservation: look again until it is there
     * (microseconds; bounded, and the values below are still asserted). */
    for (int i = 0; i < 200; i++) {
        struct px_five f =
            px_take_five(px_cmd(other, "LIMITER PEEK api:k COST 0"), "peek");
        if (f.retry == 2) {
            break;
        }
        px_sleep_ms(1);
    }
    px_check_five(px_cmd(other, "LIMITER PEEK api:k COST 0"), "peek", 1, 1, 0,
                  2, 3);
    redisFree(other);
    px_check_five(px_next(c), "reserved 1 s", 0, 1, 0, -1, 2);
    px_check_five(px_next(c), "reserved 2 s", 0, 1, 0, -1, 3);
    px_check_five(px_next(c), "due after its wait", 1, 1, 0, 3, 3);
    px_check_status(px_next(c), "PONG");
    redisFree(c);
}

Test(it_limiter_wait, reserved_requests_reply_in_order_single,
     .init = init_single, .fini = px_env_fini, .timeout = 60)
{
    reserves_and_keeps_order();
}

Test(it_limiter_wait, reserved_requests_reply_in_order_cluster,
     .init = init_cluster, .fini = px_env_fini, .timeout = 120)
{
    reserves_and_keeps_order();
}

Test(it_limiter_wait, reserved_requests_reply_in_order_embedded,
     .init = init_embedded, .fini = px_env_fini, .timeout = 60)
{
    reserves_and_keeps_order();
}

static void leaving_while_waiting(void)
{
    redisContext *a = px_connect(px_env()->proxy.port);
    redisContext *b;

    px_check_five(px_cmd(a, "LIMITER CHECK api:gone"), "admitted", 0, 1, 0, -1,
                  1);
    cr_assert_eq(redisAppendCommand(a, "LIMITER CHECK api:gone WAIT 2000"),
                 REDIS_OK);
    px_flush(a);
    /* Make sure the proxy has the request before the client leaves. */
    b = px_connect(px_env()->proxy.port);
    px_check_status(px_cmd(b, "PING"), "PONG");
    redisFree(a);
    /* The reservation stays: the next request is due after it. */
    redisReply *r = px_cmd(b, "LIMITER PEEK api:gone");
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    cr_assert_eq(r->element[0]->integer, 1, "the reservation was released");
    freeReplyObject(r);
    /* Another waiter on the same key queues behind it and is served. */
    px_check_five(px_cmd(b, "LIMITER CHECK api:gone WAIT 5000"), "queued", 0, 1,
                  0, -1, 3);
    redisFree(b);
}

Test(it_limiter_wait, a_client_leaving_while_waiting_keeps_its_reservation,
     .init = init_single, .fini = px_env_fini, .timeout = 60)
{
    leaving_while_waiting();
}

Test(it_limiter_wait, a_client_leaving_while_waiting_cluster,
     .init = init_cluster, .fini = px_env_fini, .timeout = 120)
{
    leaving_while_waiting();
}

Test(it_limiter_wait, a_client_leaving_while_waiting_embedded,
     .init = init_embedded, .fini = px_env_fini, .timeout = 60)
{
    leaving_while_waiting();
}

/* A token_bucket or leaky_bucket path (`kind`, "tb" or "lb") checked with
 * WAIT: the request due within the wait takes its cost at once (a debt)
 * and is answered when due with the reserved decision; the next one is
 * due after it, beyond its own wait: refused. */
static void bucket_reserves(redisContext *c, const char *kind)
{
    redisAppendCommand(c, "LIMITER CHECK %s:k", kind);
    redisAppendCommand(c, "LIMITER CHECK %s:k WAIT 1000", kind);
    redisAppendCommand(c, "LIMITER CHECK %s:k WAIT 300", kind);
    redisAppendCommand(c, "PING");
    px_check_five(px_next(c), "admitted", 0, 1, 0, -1, 1);
    /* Due within 200 ms: held until then, admitted, nothing left, full
     * again in 400 ms (the reservation's debt too). */
    px_check_five(px_next(c), "reserved", 0, 1, 0, -1, 1);
    /* Behind the reservation it would be due in 400 ms: beyond 300. */
    px_check_five(px_next(c), "due after its wait", 1, 1, 0, 1, 1);
    px_check_status(px_next(c), "PONG");
}

/* LIMITER ADJUST of a bucket (`kind`, "tb" or "lb": one unit, back in
 * 200 ms): a charge of 3 goes into debt (3 units short: the reply is a
 * PEEK's, refused for 600 ms, seconds rounded up), a giving back of 10
 * stops at a fresh bucket. */
static void bucket_adjusts(redisContext *c, const char *kind)
{
    px_check_five(px_cmd(c, "LIMITER ADJUST %s:adj 3", kind), "charged", 1, 1,
                  0, 1, 1);
    px_check_five(px_cmd(c, "LIMITER PEEK %s:adj", kind), "in debt", 1, 1, 0, 1,
                  1);
    px_check_five(px_cmd(c, "LIMITER ADJUST %s:adj -10", kind), "given back", 0,
                  1, 0, -1, 1);
    px_check_five(px_cmd(c, "LIMITER CHECK %s:adj", kind), "fresh", 0, 1, 0, -1,
                  1);
}

/* All or nothing over the levels: a level due within the wait is not
 * reserved when another is beyond it. */
static void mixed_levels_all_or_nothing(redisContext *c)
{
    /* gcra shared (due in 200 ms) within, the id's bucket (5 s) beyond:
     * refused, and the gcra level reserved nothing, so mix:b is due
     * within 250 ms (it would be 400 ms after a leaked reservation). */
    px_check_five(px_cmd(c, "LIMITER CHECK mix:a"), "mix admitted", 0, 1, 0, -1,
                  5);
    px_check_five(px_cmd(c, "LIMITER CHECK mix:a WAIT 1000"), "mix refused", 1,
                  1, 0, 5, 5);
    cr_assert_eq(
        px_take_five(px_cmd(c, "LIMITER CHECK mix:b WAIT 250"), "mix:b")
            .limited,
        0, "the gcra level kept a reservation of a refused check");
    /* The shared bucket (200 ms) within, the id's gcra (60 s) beyond:
     * refused, and the bucket took nothing (in debt, mixg:b would be due
     * in 400 ms, beyond 300). */
    px_check_five(px_cmd(c, "LIMITER CHECK mixg:a"), "mixg admitted", 0, 1, 0,
                  -1, 60);
    px_check_five(px_cmd(c, "LIMITER CHECK mixg:a WAIT 1000"), "mixg refused",
                  1, 1, 0, 60, 60);
    cr_assert_eq(
        px_take_five(px_cmd(c, "LIMITER CHECK mixg:b WAIT 300"), "mixg:b")
            .limited,
        0, "the bucket kept a reservation of a refused check");
    /* One level: the bucket (200 ms) within, gcra (60 s) beyond: refused,
     * the bucket's key as the first check left it (0 tokens, no debt). */
    px_check_five(px_cmd(c, "LIMITER CHECK duo:a"), "duo admitted", 0, 1, 0, -1,
                  60);
    px_check_five(px_cmd(c, "LIMITER CHECK duo:a WAIT 1000"), "duo refused", 1,
                  1, 0, 60, 60);
    {
        static const char key[] = "cellgate:{duo:a}#1:token_bucket";
        redisContext *d = px_direct_for(key, sizeof(key) - 1);
        if (d != NULL) {
            redisReply *r = lstate_cmd(d, "HGET %s tokens", key);
            cr_assert(r->type == REDIS_REPLY_STRING && strcmp(r->str, "0") == 0,
                      "duo's bucket holds %s tokens", r->str ? r->str : "?");
            freeReplyObject(r);
            redisFree(d);
        }
    }
}

/* A reservation held for 50 s delays no other client: the test's timeout
 * is shorter. */
static void bucket_holds_only_its_client(void)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    redisContext *b = px_connect(px_env()->proxy.port);
    struct px_five f = { 0 };

    px_check_five(px_cmd(c, "LIMITER CHECK slow:k"), "admitted", 0, 1, 0, -1,
                  50);
    cr_assert_eq(redisAppendCommand(c, "LIMITER CHECK slow:k WAIT 55000"),
                 REDIS_OK);
    px_flush(c);
    bucket_reserves(b, "tb");
    bucket_reserves(b, "lb");
    bucket_adjusts(b, "tb");
    bucket_adjusts(b, "lb");
    mixed_levels_all_or_nothing(b);
    /* The held request took its token: the next is due after it (b may
     * reach the store before c's call: look until it is there). */
    for (int i = 0; i < 2000 && f.retry < 51; i++) {
        f = px_take_five(px_cmd(b, "LIMITER PEEK slow:k"), "peek");
        px_sleep_ms(f.retry < 51 ? 1 : 0);
    }
    cr_assert(f.limited == 1 && f.retry > 50 && f.retry <= 100,
              "the reservation took nothing: retry %lld", f.retry);
    redisFree(b);
    redisFree(c);
}

Test(it_limiter_wait, buckets_reserve_all_or_nothing_single,
     .init = init_single, .fini = px_env_fini, .timeout = 30)
{
    bucket_holds_only_its_client();
}

Test(it_limiter_wait, buckets_reserve_all_or_nothing_cluster,
     .init = init_cluster, .fini = px_env_fini, .timeout = 30)
{
    bucket_holds_only_its_client();
}

Test(it_limiter_wait, buckets_reserve_all_or_nothing_embedded,
     .init = init_embedded, .fini = px_env_fini, .timeout = 30)
{
    bucket_holds_only_its_client();
}

Test(it_limiter_wait, shutdown_with_replies_held_is_clean, .init = init_single,
     .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);

    px_check_five(px_cmd(c, "LIMITER CHECK api:s"), "admitted", 0, 1, 0, -1, 1);
    cr_assert_eq(redisAppendCommand(c, "LIMITER CHECK api:s WAIT 60000"),
                 REDIS_OK);
    px_flush(c);
    redisContext *other = px_connect(px_env()->proxy.port);
    px_check_status(px_cmd(other, "PING"), "PONG");
    redisFree(other);
    /* SIGTERM now, with the reply still held: exit 0, no leak (the
     * fixture's clean-stop check). */
    px_proxy_stop_clean(&px_env()->proxy, SIGTERM);
    redisFree(c);
}

Test(it_limiter_wait, bad_wait_values_are_refused, .init = init_embedded,
     .fini = px_env_fini, .timeout = 60)
{
    static const char *const bad[] = { "-1", "x", "1.5", "",
                                       "9223372036854775808" };
    redisContext *c = px_connect(px_env()->proxy.port);

    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        px_check_error(px_cmd(c, "LIMITER CHECK api:b WAIT %s", bad[k]),
                       "ERR value is not an integer or out of range");
    }
    px_check_error(px_cmd(c, "LIMITER CHECK api:b WAIT"), "ERR syntax error");
    /* WAIT 0 is a plain check. */
    px_check_five(px_cmd(c, "LIMITER CHECK api:b WAIT 0"), "WAIT 0", 0, 1, 0,
                  -1, 1);
    px_check_five(px_cmd(c, "LIMITER CHECK api:b WAIT 0"), "WAIT 0 again", 1, 1,
                  0, 1, 1);
    redisFree(c);
}
