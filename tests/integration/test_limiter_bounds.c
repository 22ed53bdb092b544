/* Bounded limiter resources under a hostile client:
 *   - the embedded store holds at most embedded_max_keys keys: thousands
 *     of distinct keys fill it, after which a new key is refused (every
 *     entry is live, and none is evicted), while a hot key beside them
 *     keeps its exact state (its CL.THROTTLE replies count down as if
 *     alone, then refuse for the hour);
 *   - LIMITER CHECK ... WAIT is capped per identity and in total: the
 *     request over a cap gets the error at once and writes nothing, the
 *     others keep working, a client beside is unaffected;
 *   - a client that leaves with 1,000 replies held releases them at once
 *     (INFO's count of waits drops to 0; polled, bounded, no timing
 *     assertion), its reservations staying taken as docs/limiter.md promises.
 * Embedded and single Redis. */
#include "tests/support/px_test.h"

#include <stdio.h>
#include <string.h>

#include "tests/integration/fixture.h"
#include "tests/integration/limiter_support.h"

PX_TEST_SUITE(it_limiter_bounds);

/* Tries of a poll of INFO, 10 ms apart: 20 s at most. */
#define POLL_TRIES 2000

/* ---------------- The embedded store's cap ---------------- */

/* Any tree: CL.THROTTLE needs none, but the proxy starts with one. */
static const char any_tree[] = "api:\n"
                               "  children:\n"
                               "    \"*\":\n"
                               "      limits: [0, 1, 60]\n";

#define STORE_CAP  1000
#define ROUNDS     12
#define OTHERS     500 /* distinct keys between two uses of the hot key */
#define HOT_BURST  9   /* CL.THROTTLE hot 9 1 3600: 10 at once, 1 an hour */
#define HOT_PERIOD 3600

static void init_capped_embedded(void)
{
    px_limits_start(PX_MODE_EMBEDDED, any_tree, "embedded_max_keys: 1000\n");
}

Test(it_limiter_bounds, embedded_store_stays_at_its_cap_and_a_hot_key_exact,
     .init = init_capped_embedded, .fini = px_env_fini, .timeout = 300)
{
    redisContext *attacker = px_connect(px_env()->proxy.port);
    redisContext *hot = px_connect(px_env()->proxy.port);
    long long stored = 1; /* the hot key */
    int round, i;

    for (round = 0; round < ROUNDS; round++) {
        /* The hot key, used between every OTHERS new keys: its replies
         * count down exactly, then refuse, never a fresh bucket. */
        struct px_five f = px_take_five(
            px_cmd(hot, "CL.THROTTLE hot %d 1 %d", HOT_BURST, HOT_PERIOD),
            "hot key");
        cr_assert_eq(f.limit, HOT_BURST + 1);
        if (round <= HOT_BURST) {
            cr_assert_eq(f.limited, 0, "round %d: refused", round);
            cr_assert_eq(f.remaining, HOT_BURST - round,
                         "round %d: the hot key lost its state", round);
            cr_assert_eq(f.retry, -1);
        } else {
            cr_assert_eq(f.limited, 1, "round %d: admitted again", round);
            cr_assert_eq(f.remaining, 0);
            /* Due an hour after the tenth (give or take the seconds the
             * test took, rounded). */
            cr_assert(f.retry > HOT_PERIOD - 120 && f.retry <= HOT_PERIOD,
                      "round %d: retry %lld", round, f.retry);
        }
        for (i = 0; i < OTHERS; i++) {
            cr_assert_eq(redisAppendCommand(attacker,
                                            "CL.THROTTLE k%d:%d 9 1 "
                                            "3600",
                                            round, i),
                         REDIS_OK);
        }
        for (i = 0; i < OTHERS; i++) {
            redisReply *r = px_next(attacker);
            if (stored < STORE_CAP) {
                struct px_five o = px_take_five(r, "other key");
                cr_assert_eq(o.limited, 0);
                cr_assert_eq(o.remaining, 9);
                stored++;
            } else {
                px_check_error(r, "ERR embedded limiter store full (every "
                                  "entry is live): raise embedded_max_keys "
                                  "or embedded_max_bytes");
            }
        }
    }
    /* Every key lives for an hour: the store is full, nothing was
     * evicted, and every new key past the cap was refused. */
    cr_assert_eq(px_info_int(hot, "limiter_embedded_keys"), STORE_CAP);
    cr_assert_eq(px_info_int(hot, "limiter_embedded_evicted_expired"), 0);
    cr_assert_eq(px_info_int(hot, "limiter_embedded_full_refused"),
                 ROUNDS * OTHERS + 1 - STORE_CAP);
    /* A new identity's LIMITER CHECK is refused the same way. */
    px_check_error(px_cmd(hot, "LIMITER CHECK api:newcomer"),
                   "ERR embedded limiter store full (every entry is live): "
                   "raise embedded_max_keys or embedded_max_bytes");
    /* A key stored before the flood kept its state: 8 left, not 9. */
    px_check_five(px_cmd(hot, "CL.THROTTLE k0:0 9 1 3600"), "kept", 0, 10, 8,
                  -1, 7200);
    redisFree(attacker);
    redisFree(hot);
}

/* ---------------- WAIT caps ---------------- */

/* One request a minute, no burst: a WAIT of 10 minutes is reserved and
 * its reply held long after the test. */
static const char wait_tree[] = "api:\n"
                                "  children:\n"
                                "    \"*\":\n"
                                "      limits: [0, 1, 60]\n";

static const char wait_caps[] = "limiter_wait_max_per_identity: 3\n"
                                "limiter_wait_max_total: 5\n"
                                "limiter_wait_max_ms: 3600000\n";

static void init_caps_embedded(void)
{
    px_limits_start(PX_MODE_EMBEDDED, wait_tree, wait_caps);
}

static void init_caps_single(void)
{
    px_limits_start(PX_MODE_SINGLE, wait_tree, wait_caps);
}

static void init_caps_cluster(void)
{
    px_limits_start(PX_MODE_CLUSTER, wait_tree, wait_caps);
}

/* `c` checks `id` once (admitted) and sends n WAITs whose replies are
 * held; returns once the proxy holds `total` waits. */
static void hold_waits(redisContext *c, redisContext *watch, const char *id,
                       int n, long long total)
{
    int i;

    px_check_five(px_cmd(c, "LIMITER CHECK api:%s", id), "admitted", 0, 1, 0,
                  -1, 60);
    for (i = 0; i < n; i++) {
        cr_assert_eq(
            redisAppendCommand(c, "LIMITER CHECK api:%s WAIT 600000", id),
            REDIS_OK);
    }
    px_flush(c);
    px_info_poll(watch, "limiter_waits", total, POLL_TRIES);
}

static void wait_caps_hold(void)
{
    redisContext *a = px_connect(px_env()->proxy.port);
    redisContext *b = px_connect(px_env()->proxy.port);
    redisContext *watch = px_connect(px_env()->proxy.port);
    redisContext *beside = px_connect(px_env()->proxy.port);
    redisReply *before, *after;

    /* a holds 3 waits of api:a: that identity's cap. */
    hold_waits(a, watch, "a", 3, 3);
    before = px_cmd(watch, "LIMITER PEEK api:a");
    px_check_error(px_cmd(watch, "LIMITER CHECK api:a WAIT 600000"),
                   "ERR too many LIMITER WAIT replies held for 'api:a' "
                   "(limiter_wait_max_per_identity is 3)");
    /* It reserved nothing: the state is what it was. */
    after = px_cmd(watch, "LIMITER PEEK api:a");
    cr_assert_eq(before->type, REDIS_REPLY_ARRAY);
    cr_assert_eq(after->type, REDIS_REPLY_ARRAY);
    for (size_t k = 0; k < 5; k++) {
        cr_assert_eq(before->element[k]->integer, after->element[k]->integer,
                     "field %zu moved: the refused WAIT reserved", k);
    }
    freeReplyObject(before);
    freeReplyObject(after);
    cr_assert_eq(px_info_int(watch, "limiter_waits_refused_identity"), 1);
    /* Checks without WAIT on that identity keep working: refused, as the
     * reservations ahead say (due after the three: 4 minutes). */
    px_check_five(px_cmd(watch, "LIMITER CHECK api:a"), "no wait", 1, 1, 0, 240,
                  240);

    /* b holds 2 of api:b: 5 in all, the total cap. */
    hold_waits(b, watch, "b", 2, 5);
    px_check_error(px_cmd(watch, "LIMITER CHECK api:c WAIT 600000"),
                   "ERR too many LIMITER WAIT replies held "
                   "(limiter_wait_max_total is 5)");
    /* Nothing was written for api:c: RESET finds no key. */
    px_check_int(px_cmd_admin(watch, "LIMITER RESET api:c"), 0);
    cr_assert_eq(px_info_int(watch, "limiter_waits_refused_total"), 1);
    cr_assert_eq(px_info_int(watch, "limiter_waits"), 5);

    /* A client beside, without WAIT, is unaffected. */
    px_check_five(px_cmd(beside, "LIMITER CHECK api:d"), "beside", 0, 1, 0, -1,
                  60);
    px_check_five(px_cmd(beside, "LIMITER CHECK api:d"), "beside", 1, 1, 0, 60,
                  60);
    px_check_status(px_cmd(beside, "PING"), "PONG");

    /* a leaves: its 3 slots come back at once, and a WAIT of api:c fits
     * again (reserved: held, counted). */
    redisFree(a);
    px_info_poll(watch, "limiter_waits", 2, POLL_TRIES);
    hold_waits(beside, watch, "c", 1, 3);
    redisFree(beside);
    redisFree(b);
    px_info_poll(watch, "limiter_waits", 0, POLL_TRIES);
    redisFree(watch);
}

Test(it_limiter_bounds, wait_caps_hold_embedded, .init = init_caps_embedded,
     .fini = px_env_fini, .timeout = 120)
{
    wait_caps_hold();
}

Test(it_limiter_bounds, wait_caps_hold_single, .init = init_caps_single,
     .fini = px_env_fini, .timeout = 120)
{
    wait_caps_hold();
}

/* The caps are the proxy's, whichever master holds each identity. */
Test(it_limiter_bounds, wait_caps_hold_cluster, .init = init_caps_cluster,
     .fini = px_env_fini, .timeout = 120)
{
    wait_caps_hold();
}

/* ---------------- A client leaving with 1,000 waits ---------------- */

#define MANY_WAITS 1000

/* One request in 50 minutes: each identity's WAIT of an hour is reserved
 * and held for 50 minutes. */
static const char long_tree[] = "api:\n"
                                "  children:\n"
                                "    \"*\":\n"
                                "      limits: [0, 1, 3000]\n";

static void init_many_embedded(void)
{
    px_limits_start(PX_MODE_EMBEDDED, long_tree,
                    "limiter_wait_max_total: 1000\n"
                    "limiter_wait_max_ms: 3600000\n");
}

static void init_many_single(void)
{
    px_limits_start(PX_MODE_SINGLE, long_tree,
                    "limiter_wait_max_total: 1000\n"
                    "limiter_wait_max_ms: 3600000\n");
}

static void leaving_with_many_waits(void)
{
    redisContext *setup = px_connect(px_env()->proxy.port);
    redisContext *a = px_connect(px_env()->proxy.port);
    redisContext *watch = px_connect(px_env()->proxy.port);
    int i;

    /* Every identity's one request now, from another client (a's
     * pipeline then holds only its waits, under max_pipeline). */
    for (i = 0; i < MANY_WAITS; i++) {
        cr_assert_eq(redisAppendCommand(setup, "LIMITER CHECK api:w%d", i),
                     REDIS_OK);
    }
    for (i = 0; i < MANY_WAITS; i++) {
        px_check_five(px_next(setup), "admitted", 0, 1, 0, -1, 3000);
    }
    for (i = 0; i < MANY_WAITS; i++) {
        cr_assert_eq(
            redisAppendCommand(a, "LIMITER CHECK api:w%d WAIT 3600000", i),
            REDIS_OK);
    }
    px_flush(a);
    px_info_poll(watch, "limiter_waits", MANY_WAITS, POLL_TRIES);
    /* The total is reached: one more is refused, at once. */
    px_check_error(px_cmd(setup, "LIMITER CHECK api:x WAIT 3600000"),
                   "ERR too many LIMITER WAIT replies held "
                   "(limiter_wait_max_total is 1000)");
    redisFree(a);
    px_info_poll(watch, "limiter_waits", 0, POLL_TRIES);
    /* The reservations stay taken (docs/limiter.md: a client that leaves keeps
     * its reservation): the next request of w0 is due after it. */
    px_check_five(px_cmd(setup, "LIMITER PEEK api:w0"), "kept", 1, 1, 0, 6000,
                  6000);
    /* And WAIT works again. */
    px_check_five(px_cmd(setup, "LIMITER CHECK api:y"), "admitted", 0, 1, 0, -1,
                  3000);
    cr_assert_eq(redisAppendCommand(setup, "LIMITER CHECK api:y WAIT 3600000"),
                 REDIS_OK);
    px_flush(setup);
    px_info_poll(watch, "limiter_waits", 1, POLL_TRIES);
    redisFree(setup);
    px_info_poll(watch, "limiter_waits", 0, POLL_TRIES);
    redisFree(watch);
}

Test(it_limiter_bounds, a_client_leaving_releases_1000_waits_embedded,
     .init = init_many_embedded, .fini = px_env_fini, .timeout = 180)
{
    leaving_with_many_waits();
}

Test(it_limiter_bounds, a_client_leaving_releases_1000_waits_single,
     .init = init_many_single, .fini = px_env_fini, .timeout = 180)
{
    leaving_with_many_waits();
}
