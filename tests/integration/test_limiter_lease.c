/* Leases (limits.yaml `lease: N` on a node, limiter_lease_ms) through the
 * real binary, on one Redis and on a cluster of 3 masters:
 *
 * - 25 checks of a leased identity (lease: 10) cost Redis 3 script calls,
 *   each reply the exact one a plain check gives (a fixed window: the
 *   lease's remaining is what Redis holds plus what the lease keeps), and
 *   INFO counts 22 hits and 3 takes; a check of COST 11 > 10 goes straight
 *   to Redis;
 * - after limiter_lease_ms without traffic, what is left goes back: Redis
 *   holds exactly what was admitted;
 * - checks that come while a take is on its way wait for it and are
 *   served from the lease it brings, in order, each reply in its place
 *   among the client's GETs and SETs; a waiter whose client leaves is
 *   dropped (it admits nothing);
 * - a take refused near the limit: the checks queued behind it are
 *   answered as plain checks, exactly as on a path without a lease;
 * - two proxies hammering one identity, both pipelined past a lease (so
 *   checks queue and takes follow each other), never admit more than its
 *   50 a day; once their leases went back, Redis holds exactly what they
 *   admitted;
 * - a RELOAD gives every lease back, so do a LIMITER OVERRIDE SET of the
 *   path and a SIGTERM (before the proxy exits); a RESET of the path
 *   drops its lease.
 *
 * Windows are a day long, so counts never move while a test runs. */
#include "tests/support/px_test.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/integration/cluster_fixture.h"
#include "tests/integration/fixture.h"
#include "tests/integration/limiter_support.h"

PX_TEST_SUITE(it_lease);

static const char lease_yaml[] =
    "hot:\n"
    "  children:\n"
    "    \"*\":\n"
    "      limits:\n"
    "        - {algorithm: fixed_window, max: 50, window: 1d}\n"
    "      lease: 10\n"
    "cold:\n" /* hot without a lease: what plain checks answer */
    "  children:\n"
    "    \"*\":\n"
    "      limits:\n"
    "        - {algorithm: fixed_window, max: 50, window: 1d}\n"
    "slot:\n"
    "  children:\n"
    "    \"*\":\n"
    "      limits:\n"
    "        - {algorithm: concurrency, max: 1}\n"
    "        - {algorithm: fixed_window, max: 50, window: 1d}\n"
    "      lease: 10\n";

/* Long leases (kept while a test runs) and short ones (gone in 50 ms). */
#define LONG  "limiter_lease_ms: 60000\n"
#define SHORT "limiter_lease_ms: 50\n"

static void init_single_long(void)
{
    px_limits_start(PX_MODE_SINGLE, lease_yaml, LONG);
}

static void init_cluster_long(void)
{
    px_limits_start(PX_MODE_CLUSTER, lease_yaml, LONG);
}

static void init_single_short(void)
{
    px_limits_start(PX_MODE_SINGLE, lease_yaml, SHORT);
}

static struct px_child second; /* a peer proxy in front of the same Redis */

static void fini_second(void)
{
    if (second.pid > 0) {
        px_proxy_stop(&second, SIGKILL);
    }
    px_env_fini();
}

/* Asserts limited, limit and remaining of a five-integer reply. */
static void expect3(redisReply *r, const char *what, long long limited,
                    long long limit, long long remaining)
{
    struct px_five f = px_take_five(r, what);

    cr_assert(f.limited == limited && f.limit == limit &&
                  f.remaining == remaining,
              "%s: [%lld, %lld, %lld, ..], want [%lld, %lld, %lld, ..]", what,
              f.limited, f.limit, f.remaining, limited, limit, remaining);
}

/* Script calls every node of the store has run. */
static long long script_calls(void)
{
    long long n = 0;
    int i;

    if (px_mode_now() == PX_MODE_SINGLE) {
        redisContext *d = px_redis_connect(&px_env()->redis, NULL);
        n = px_cmdstat_calls(d, "fcall") + px_cmdstat_calls(d, "evalsha");
        redisFree(d);
        return n;
    }
    for (i = 0; i < px_cluster()->nmasters; i++) {
        redisContext *d = px_cluster_connect(px_cluster(), i);
        n += px_cmdstat_calls(d, "fcall") + px_cmdstat_calls(d, "evalsha");
        redisFree(d);
    }
    return n;
}

/* What Redis holds of `path`'s day (a PEEK of COST 0 reads it there: a
 * PEEK never takes from a lease). */
static long long held(redisContext *c, const char *path)
{
    struct px_five f =
        px_take_five(px_cmd(c, "LIMITER PEEK %s COST 0", path), path);

    return f.limit - f.remaining;
}

/* Polls until Redis holds `want` of `path` (a give-back on its way). */
static void held_poll(redisContext *c, const char *path, long long want)
{
    long long h = -1;
    int i;

    for (i = 0; i < 500; i++) {
        h = held(c, path);
        if (h == want) {
            return;
        }
        px_sleep_ms(10);
    }
    cr_assert_fail("%s: Redis holds %lld, want %lld", path, h, want);
}

static void calls_and_replies(void)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    long long before = script_calls();
    int i;

    for (i = 1; i <= 25; i++) {
        struct px_five f =
            px_take_five(px_cmd(c, "LIMITER CHECK hot:a"), "hot:a");
        if (f.limited != 0 || f.limit != 50 || f.remaining != 50 - i) {
            cr_assert_fail("check %d: [%lld, %lld, %lld], want [0, 50, %d]", i,
                           f.limited, f.limit, f.remaining, 50 - i);
        }
    }
    cr_assert_eq(script_calls() - before, 3, "25 checks: %lld script calls",
                 script_calls() - before);
    cr_assert_eq(px_info_int(c, "limiter_lease_hits"), 22);
    cr_assert_eq(px_info_int(c, "limiter_lease_takes"), 3);
    /* Redis holds the three leases: 30, of which 25 admitted. */
    cr_assert_eq(held(c, "hot:a"), 30);

    /* RESET drops the lease with the keys: the next check starts over. */
    freeReplyObject(px_cmd_admin(c, "LIMITER RESET hot:a"));
    expect3(px_cmd(c, "LIMITER CHECK hot:a"), "hot:a", 0, 50, 49);
    cr_assert_eq(held(c, "hot:a"), 10);

    /* COST 11 > lease 10: one plain call, no lease. */
    before = script_calls();
    expect3(px_cmd(c, "LIMITER CHECK hot:b COST 11"), "hot:b", 0, 50, 39);
    cr_assert_eq(script_calls() - before, 1);
    cr_assert_eq(px_info_int(c, "limiter_lease_takes"), 4);
    cr_assert_eq(held(c, "hot:b"), 11);

    /* A path with a concurrency level never leases: each check must take
     * its token's slot, so the second holder is refused. */
    before = px_info_int(c, "limiter_lease_takes");
    expect3(px_cmd(c, "LIMITER CHECK slot:a ID t1"), "slot:a t1", 0, 1, 0);
    expect3(px_cmd(c, "LIMITER CHECK slot:a ID t2"), "slot:a t2", 1, 1, 0);
    cr_assert_eq(px_info_int(c, "limiter_lease_takes"), before);
    redisFree(c);
}

Test(it_lease, single_calls_and_replies, .init = init_single_long,
     .fini = px_env_fini, .timeout = 60)
{
    calls_and_replies();
}

Test(it_lease, cluster_calls_and_replies, .init = init_cluster_long,
     .fini = px_cluster_fini, .timeout = 120)
{
    calls_and_replies();
}

Test(it_lease, single_expiry_gives_back, .init = init_single_short,
     .fini = px_env_fini, .timeout = 60)
{
    redisContext *c;

    c = px_connect(px_env()->proxy.port);
    expect3(px_cmd(c, "LIMITER CHECK hot:c COST 3"), "hot:c", 0, 50, 47);
    /* The 7 units the lease kept go back: Redis holds the 3 admitted. */
    held_poll(c, "hot:c", 3);
    cr_assert_eq(px_info_int(c, "limiter_lease_returned_units"), 7);
    redisFree(c);
}

Test(it_lease, single_two_proxies_never_over_admit, .init = init_single_short,
     .fini = fini_second, .timeout = 60)
{
    redisContext *c[2];
    long long admitted = 0;
    int i, k, round;

    px_path(second.log, sizeof(second.log), "cellgate-second.stderr");
    px_proxy_start_for(&second, &px_env()->redis, px_limits_conf());
    c[0] = px_connect(px_env()->proxy.port);
    c[1] = px_connect(second.port);
    /* Rounds of 15 pipelined checks on each proxy, 240 in all: a round
     * finds the lease its proxy took in an earlier one, or queues behind
     * a take, and more than a lease's 10 take again from the queue. */
    for (round = 0; round < 8; round++) {
        for (k = 0; k < 2; k++) {
            for (i = 0; i < 15; i++) {
                redisAppendCommand(c[k], "LIMITER CHECK hot:d");
            }
        }
        for (k = 0; k < 2; k++) {
            for (i = 0; i < 15; i++) {
                redisReply *r = NULL;
                struct px_five f;
                cr_assert_eq(redisGetReply(c[k], (void **)&r), REDIS_OK);
                f = px_take_five(r, "hot:d");
                admitted += f.limited == 0;
            }
        }
    }
    cr_assert(admitted > 0 && admitted <= 50, "admitted %lld", admitted);
    cr_assert_gt(px_info_int(c[0], "limiter_lease_hits") +
                     px_info_int(c[1], "limiter_lease_hits"),
                 0);
    /* Once both proxies gave back, Redis holds what they admitted. */
    held_poll(c[0], "hot:d", admitted);
    redisFree(c[0]);
    redisFree(c[1]);
    px_proxy_stop_clean(&second, SIGTERM);
}

Test(it_lease, single_reload_gives_back, .init = init_single_long,
     .fini = px_env_fini, .timeout = 60)
{
    char path[PX_PATH_MAX];
    redisContext *c;
    redisReply *r;

    c = px_connect(px_env()->proxy.port);
    expect3(px_cmd(c, "LIMITER CHECK hot:e"), "hot:e", 0, 50, 49);
    cr_assert_eq(held(c, "hot:e"), 10);
    /* The rules change (another node): the lease goes back. */
    px_write_file(path, sizeof(path), "limits.yaml",
                  "other:\n  limits: [1, 1, 1]\n" /* a new node */
                  "hot:\n"
                  "  children:\n"
                  "    \"*\":\n"
                  "      limits:\n"
                  "        - {algorithm: fixed_window, max: 50, window: 1d}\n"
                  "      lease: 10\n");
    r = px_cmd_admin(c, "LIMITER RELOAD");
    cr_assert_eq(r->type, REDIS_REPLY_STATUS, "RELOAD: %s", r->str);
    freeReplyObject(r);
    held_poll(c, "hot:e", 1);
    redisFree(c);
}

/* A client pipelines SET, CHECK, GET 15 times: the first CHECK takes a
 * lease, the next 14 wait for it; 9 are served from it and the 11th takes
 * the next one, the last 4 waiting for that. Every reply comes in its
 * place, each CHECK's the one a plain check gives (a fixed window), from
 * 2 takes and 13 hits, after 18 waits (14, then 4 again). */
Test(it_lease, single_queued_behind_take_in_order, .init = init_single_long,
     .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    long long hits = px_info_int(c, "limiter_lease_hits");
    long long takes = px_info_int(c, "limiter_lease_takes");
    long long waits = px_info_int(c, "limiter_lease_waits");
    char want[16];
    int i;

    for (i = 1; i <= 15; i++) {
        redisAppendCommand(c, "SET q:k %d", i);
        redisAppendCommand(c, "LIMITER CHECK hot:q");
        redisAppendCommand(c, "GET q:k");
    }
    for (i = 1; i <= 15; i++) {
        struct px_five f;
        px_check_status(px_next(c), "OK");
        f = px_take_five(px_next(c), "hot:q");
        if (f.limited != 0 || f.limit != 50 || f.remaining != 50 - i) {
            cr_assert_fail("check %d: [%lld, %lld, %lld], want [0, 50, %d]", i,
                           f.limited, f.limit, f.remaining, 50 - i);
        }
        snprintf(want, sizeof(want), "%d", i);
        px_check_str(px_next(c), want);
    }
    cr_assert_eq(px_info_int(c, "limiter_lease_takes") - takes, 2);
    cr_assert_eq(px_info_int(c, "limiter_lease_hits") - hits, 13);
    cr_assert_eq(px_info_int(c, "limiter_lease_waits") - waits, 18);
    cr_assert_eq(held(c, "hot:q"), 20);
    redisFree(c);
}

/* limiter_pending_bytes of the proxy of `o`, from INFO proxy (answered
 * by the proxy alone: it does not wait for a held Redis). */
static long long pending_bytes(redisContext *o)
{
    redisReply *r = px_cmd(o, "INFO proxy");
    const char *p;
    long long v;

    cr_assert_eq(r->type, REDIS_REPLY_STRING);
    p = strstr(r->str, "limiter_pending_bytes:");
    cr_assert_not_null(p);
    v = atoll(p + strlen("limiter_pending_bytes:"));
    freeReplyObject(r);
    return v;
}

/* While Redis is held, a check takes a lease and another client's 5
 * checks queue behind it, then that client leaves: its checks are
 * dropped. The take is granted; the next check is served from the lease
 * with 8 units left, so nothing was admitted for the client that left.
 * Then the other way round: the taker leaves, and the checks waiting
 * behind it go on as plain checks. */
Test(it_lease, single_waiter_that_leaves_is_dropped, .init = init_single_long,
     .fini = px_env_fini, .timeout = 60)
{
    redisContext *d = px_redis_connect(&px_env()->redis, NULL);
    redisContext *a = px_connect(px_env()->proxy.port);
    redisContext *o = px_connect(px_env()->proxy.port);
    static const char five[] = "*3\r\n$7\r\nLIMITER\r\n$5\r\nCHECK\r\n"
                               "$5\r\nhot:w\r\n";
    static const char x[] = "*3\r\n$7\r\nLIMITER\r\n$5\r\nCHECK\r\n"
                            "$5\r\nhot:x\r\n";
    long long hits;
    int b, i;

    /* A first check readies the store (its library, its connection). */
    expect3(px_cmd(o, "LIMITER CHECK cold:w"), "cold:w", 0, 50, 49);
    hits = px_info_int(o, "limiter_lease_hits");
    px_hold_redis(d, 500);
    redisAppendCommand(a, "LIMITER CHECK hot:w");
    px_flush(a);
    /* The take is on its way once the proxy charged its bytes. */
    for (i = 0; i < 500 && pending_bytes(o) == 0; i++) {
        px_sleep_ms(2);
    }
    cr_assert_gt(pending_bytes(o), 0);
    b = px_raw_connect(px_env()->proxy.port, 0);
    for (i = 0; i < 5; i++) {
        cr_assert_eq(px_raw_send(b, five, sizeof(five) - 1), 0);
    }
    close(b);
    freeReplyObject(px_next(d));
    expect3(px_next(a), "taker", 0, 50, 49);
    expect3(px_cmd(o, "LIMITER CHECK hot:w"), "after", 0, 50, 48);
    cr_assert_eq(px_info_int(o, "limiter_lease_hits") - hits, 1);
    cr_assert_eq(held(o, "hot:w"), 10);

    /* Now the taker leaves while `a` waits behind it: the store drops the
     * take's answer (what it charged stays charged), and a's 2 checks go
     * on as plain ones at once, not when the take's entry expires. */
    px_hold_redis(d, 300);
    b = px_raw_connect(px_env()->proxy.port, 0);
    cr_assert_eq(px_raw_send(b, x, sizeof(x) - 1), 0);
    for (i = 0; i < 500 && pending_bytes(o) == 0; i++) {
        px_sleep_ms(2);
    }
    redisAppendCommand(a, "LIMITER CHECK hot:x");
    redisAppendCommand(a, "LIMITER CHECK hot:x");
    px_flush(a);
    px_sleep_ms(50); /* nothing to poll: a's checks wait, unseen */
    close(b);
    freeReplyObject(px_next(d));
    expect3(px_next(a), "after the taker left", 0, 50, 39);
    expect3(px_next(a), "after the taker left", 0, 50, 38);
    cr_assert_eq(px_info_int(o, "limiter_lease_hits") - hits, 1);
    redisFree(d);
    redisFree(a);
    redisFree(o);
}

/* Near the limit (44 of 50 held), 8 pipelined checks of a leased path:
 * the first one's take of 10 is refused, so it and the 7 queued behind it
 * go as plain checks, answered exactly as the same 8 on a path without a
 * lease: 6 admitted, 2 refused, Redis holding 50 of each. */
Test(it_lease, single_refused_take_queue_goes_plain, .init = init_single_long,
     .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    const char *paths[2] = { "hot:r", "cold:r" };
    struct px_five got[2][8];
    long long hits = px_info_int(c, "limiter_lease_hits");
    long long waits = px_info_int(c, "limiter_lease_waits");
    int i, k;

    for (k = 0; k < 2; k++) {
        for (i = 0; i < 4; i++) {
            /* COST 11 > lease 10: plain on both paths. */
            freeReplyObject(px_cmd(c, "LIMITER CHECK %s COST 11", paths[k]));
        }
        for (i = 0; i < 8; i++) {
            redisAppendCommand(c, "LIMITER CHECK %s", paths[k]);
        }
        for (i = 0; i < 8; i++) {
            got[k][i] = px_take_five(px_next(c), paths[k]);
        }
    }
    for (i = 0; i < 8; i++) {
        long long rem = i < 6 ? 5 - i : 0;
        if (got[0][i].limited != got[1][i].limited ||
            got[0][i].limit != got[1][i].limit ||
            got[0][i].remaining != got[1][i].remaining ||
            got[0][i].limited != (i >= 6) || got[0][i].remaining != rem) {
            cr_assert_fail("check %d: leased [%lld, %lld, %lld], plain "
                           "[%lld, %lld, %lld], want [%d, 50, %lld]",
                           i, got[0][i].limited, got[0][i].limit,
                           got[0][i].remaining, got[1][i].limited,
                           got[1][i].limit, got[1][i].remaining, i >= 6, rem);
        }
    }
    cr_assert_eq(px_info_int(c, "limiter_lease_hits"), hits);
    cr_assert_eq(px_info_int(c, "limiter_lease_waits") - waits, 7);
    cr_assert_eq(held(c, "hot:r"), 50);
    cr_assert_eq(held(c, "cold:r"), 50);
    redisFree(c);
}

/* LIMITER OVERRIDE SET of a leased path gives its lease back: Redis then
 * holds the 1 admitted (of a limit doubled to 100). */
Test(it_lease, single_override_gives_back, .init = init_single_long,
     .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    redisReply *r;

    expect3(px_cmd(c, "LIMITER CHECK hot:o"), "hot:o", 0, 50, 49);
    cr_assert_eq(held(c, "hot:o"), 10);
    r = px_cmd_admin(c, "LIMITER OVERRIDE SET hot:o FACTOR 2");
    cr_assert_eq(r->type, REDIS_REPLY_STATUS, "OVERRIDE: %s", r->str);
    freeReplyObject(r);
    held_poll(c, "hot:o", 1);
    redisFree(c);
}

/* A proxy stopped by SIGTERM gives its leases back before it exits (its
 * leases live a minute): Redis then holds the 3 it admitted. */
Test(it_lease, single_sigterm_gives_back, .init = init_single_long,
     .fini = fini_second, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    redisContext *s;

    px_path(second.log, sizeof(second.log), "cellgate-second.stderr");
    px_proxy_start_for(&second, &px_env()->redis, px_limits_conf());
    s = px_connect(second.port);
    expect3(px_cmd(s, "LIMITER CHECK hot:t COST 3"), "hot:t", 0, 50, 47);
    cr_assert_eq(held(c, "hot:t"), 10);
    redisFree(s);
    px_proxy_stop_clean(&second, SIGTERM);
    held_poll(c, "hot:t", 3);
    redisFree(c);
}
