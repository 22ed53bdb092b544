/* The limiter's memory under a hostile client, bounded in bytes, keys
 * included, through the real binary:
 *   - embedded, fail_open: a flood of new identities past
 *     embedded_max_keys is admitted undecided (as with a store that is
 *     down) and never evicts a bystander's limited key, which stays
 *     limited; the full store's refusals are counted;
 *   - embedded: 1 MB keys stay within embedded_max_bytes (INFO's bytes
 *     never past it, the rest refused), and once they expire the bytes
 *     return to 0 (RSS before, at the peak and after is printed);
 *   - embedded: run-time overrides past limiter_override_max_bytes get the
 *     error naming the key, and deleting them gives the bytes back;
 *   - single Redis: limiter calls pending past limiter_pending_max_bytes
 *     (Redis busy) get the error at once while a bystander's call is
 *     served, and the pending bytes return to 0;
 *   - single Redis: the refusal cache stays within
 *     refusal_cache_max_bytes with large keys, and a refusal that alone
 *     does not fit is not cached (Redis decides it, the same reply). */
#include "tests/support/px_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/integration/fixture.h"
#include "tests/integration/limiter_support.h"

PX_TEST_SUITE(it_limiter_bytes);

/* Tries of a poll of INFO, 10 ms apart: 30 s at most. */
#define POLL_TRIES 3000

/* One request a minute per identity, no burst. */
static const char tree[] = "api:\n"
                           "  children:\n"
                           "    \"*\":\n"
                           "      limits: [0, 1, 60]\n";

/* ---------------- A flood never re-admits a limited key ---------------- */

#define FLOOD_CAP 200
#define FLOOD     2000

static void init_flood_fail_open(void)
{
    px_limits_start(PX_MODE_EMBEDDED, tree,
                    "embedded_max_keys: 200\n"
                    "store_down_policy: fail_open\n");
}

Test(it_limiter_bytes, a_flood_of_new_identities_never_readmits_a_limited_key,
     .init = init_flood_fail_open, .fini = px_env_fini, .timeout = 120)
{
    redisContext *flood = px_connect(px_env()->proxy.port);
    redisContext *bob = px_connect(px_env()->proxy.port);
    long long admitted_undecided = 0;
    int i;

    /* The bystander uses its one request a minute: limited from now. */
    px_check_five(px_cmd(bob, "LIMITER CHECK api:bob"), "bob", 0, 1, 0, -1, 60);
    px_check_five(px_cmd(bob, "LIMITER CHECK api:bob"), "bob again", 1, 1, 0,
                  60, 60);
    for (i = 0; i < FLOOD; i++) {
        cr_assert_eq(redisAppendCommand(flood, "CL.THROTTLE id:%d 0 1 3600", i),
                     REDIS_OK);
    }
    for (i = 0; i < FLOOD; i++) {
        struct px_five f = px_take_five(px_next(flood), "flood");
        cr_assert_eq(f.limited, 0);
        /* Stored (remaining 0 of a burst of 1), or admitted undecided as
         * with a store that is down: [0, 1, 0, -1, 0]. */
        admitted_undecided += f.reset == 0;
        if (i % 100 == 0) {
            px_check_five(px_cmd(bob, "LIMITER CHECK api:bob"),
                          "bob in the flood", 1, 1, 0, 60, 60);
        }
    }
    cr_assert_eq(px_info_int(bob, "limiter_embedded_keys"), FLOOD_CAP);
    cr_assert_eq(px_info_int(bob, "limiter_embedded_full_refused"),
                 admitted_undecided);
    cr_assert_eq(admitted_undecided, FLOOD - (FLOOD_CAP - 1));
    cr_assert_eq(px_info_int(bob, "limiter_fail_open"), admitted_undecided);
    cr_assert_eq(px_info_int(bob, "limiter_embedded_evicted_expired"), 0);
    /* Still limited after the flood. */
    px_check_five(px_cmd(bob, "LIMITER CHECK api:bob"), "bob after", 1, 1, 0,
                  60, 60);
    /* A new identity's LIMITER CHECK is admitted undecided too. */
    px_check_five(px_cmd(bob, "LIMITER CHECK api:newcomer"), "newcomer", 0, 1,
                  0, -1, 0);
    cr_assert_eq(px_info_int(bob, "limiter_fail_open"), admitted_undecided + 1);
    redisFree(flood);
    redisFree(bob);
}

/* ---------------- Huge keys within embedded_max_bytes ---------------- */

#define HUGE_KEY   (1 << 20)
#define HUGE_N     30
#define HUGE_BOUND (16 << 20)

static void init_huge(void)
{
    /* ASan's quarantine would hold freed blocks: RSS could not fall. */
    setenv("ASAN_OPTIONS", "quarantine_size_mb=0:detect_leaks=1", 1);
    px_limits_start(PX_MODE_EMBEDDED, tree, "embedded_max_bytes: 16mb\n");
}

Test(it_limiter_bytes, huge_keys_stay_within_embedded_max_bytes,
     .init = init_huge, .fini = px_env_fini, .timeout = 180)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    char *key = malloc(HUGE_KEY + 16);
    long rss0 = px_rss_kb(px_env()->proxy.pid), rss_peak, rss_after;
    long long stored = 0, refused = 0, bytes;
    int i;

    cr_assert_not_null(key);
    memset(key, 'k', HUGE_KEY);
    for (i = 0; i < HUGE_N; i++) {
        redisReply *r;
        int n = snprintf(key + HUGE_KEY, 16, ":%d", i);
        /* One in 20 s, no burst: each key lives 20 s, past the flood. */
        r = px_cmd(c, "CL.THROTTLE %b 0 1 20", key, (size_t)HUGE_KEY + n);
        if (r->type == REDIS_REPLY_ERROR) {
            px_check_error(r, "ERR embedded limiter store full (every entry "
                              "is live): raise embedded_max_keys or "
                              "embedded_max_bytes");
            refused++;
        } else {
            struct px_five f = px_take_five(r, "huge key");
            cr_assert_eq(f.limited, 0);
            stored++;
        }
        bytes = px_info_int(c, "limiter_embedded_bytes");
        cr_assert_leq(bytes, HUGE_BOUND, "key %d: %lld bytes held", i, bytes);
    }
    rss_peak = px_rss_kb(px_env()->proxy.pid);
    /* Each entry is charged its key twice (the table's and the index's
     * copy): 7 of 2 MB fit 16 MB, the others are refused. */
    cr_assert_gt(stored, 0);
    cr_assert_gt(refused, 0);
    cr_assert_eq(px_info_int(c, "limiter_embedded_full_refused"), refused);
    /* Every key expires 20 s after it was set: the cron frees them, the
     * bytes return to 0 exactly, and the memory is trimmed back. */
    px_info_poll(c, "limiter_embedded_keys", 0, POLL_TRIES);
    cr_assert_eq(px_info_int(c, "limiter_embedded_bytes"), 0);
    px_sleep_ms(300); /* a cron tick or more after the last drop */
    rss_after = px_rss_kb(px_env()->proxy.pid);
    printf("it_limiter_bytes: %d keys of 1 MB, %lld stored, %lld refused; "
           "RSS %ld kB before, %ld kB at the peak, %ld kB after\n",
           HUGE_N, stored, refused, rss0, rss_peak, rss_after);
    /* Generous: the bound is 16 MB; unbounded, 30 entries were 57 MB. */
    cr_assert_lt(rss_peak - rss0, 48 * 1024, "RSS grew %ld kB",
                 rss_peak - rss0);
    free(key);
    redisFree(c);
}

/* ---------------- Run-time overrides ---------------- */

static void init_overrides(void)
{
    px_limits_start(PX_MODE_EMBEDDED, tree,
                    "limiter_override_max_bytes: 2kb\n");
}

Test(it_limiter_bytes, overrides_past_the_bound_are_refused,
     .init = init_overrides, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    long long bytes;
    int i, set = 0;

    /* Overrides are the admin's (an ordinary client gets NOPERM). */
    px_check_status(px_cmd(c, "AUTH admin " PX_ADMIN_PASSWORD), "OK");
    for (i = 0; i < 1000; i++) {
        redisReply *r =
            px_cmd(c, "LIMITER OVERRIDE SET api:user%04d FACTOR 3", i);
        if (r->type == REDIS_REPLY_ERROR) {
            px_check_error(r, "ERR run-time overrides past "
                              "limiter_override_max_bytes: raise it or "
                              "delete some");
            break;
        }
        px_check_status(r, "OK");
        set++;
    }
    cr_assert(set > 10 && set < 1000, "%d overrides set", set);
    bytes = px_info_int(c, "limiter_override_bytes");
    cr_assert(bytes > 2048 - 100 && bytes <= 2048, "%lld bytes", bytes);
    cr_assert_eq(px_info_int(c, "limiter_override_refused"), 1);
    /* Refused means not set; one set before still applies. */
    px_check_nil(px_cmd(c, "LIMITER OVERRIDE GET api:user%04d", set));
    px_check_str(px_cmd(c, "LIMITER OVERRIDE GET api:user0000"), "FACTOR 3");
    /* Replacing one with a text of the same size fits. */
    px_check_status(px_cmd(c, "LIMITER OVERRIDE SET api:user0000 FACTOR 2"),
                    "OK");
    /* Deleting gives the bytes back, to 0. */
    for (i = 0; i < set; i++) {
        px_check_int(px_cmd(c, "LIMITER OVERRIDE DEL api:user%04d", i), 1);
    }
    cr_assert_eq(px_info_int(c, "limiter_override_bytes"), 0);
    px_check_status(
        px_cmd(c, "LIMITER OVERRIDE SET api:user%04d FACTOR 3", set), "OK");
    redisFree(c);
}

/* ---------------- Pending calls, all clients ---------------- */

#define PENDING_SENT 400

static void init_pending(void)
{
    px_limits_start(PX_MODE_SINGLE, tree, "limiter_pending_max_bytes: 64kb\n");
}

Test(it_limiter_bytes, pending_calls_past_the_bound_are_refused_at_once,
     .init = init_pending, .fini = px_env_fini, .timeout = 120)
{
    redisContext *hog = px_connect(px_env()->proxy.port);
    redisContext *bob = px_connect(px_env()->proxy.port);
    redisContext *d = px_redis_connect(&px_env()->redis, NULL);
    long long refused = 0, admitted = 0;
    int i;

    /* Warm up: the scripts are loaded, the limiter's connection is up. */
    px_check_five(px_cmd(bob, "LIMITER CHECK api:warm"), "warm", 0, 1, 0, -1,
                  60);
    /* Redis busy for 1.5 s: every call waits for it. */
    px_hold_redis(d, 1500);
    px_sleep_ms(100);
    for (i = 0; i < PENDING_SENT; i++) {
        cr_assert_eq(redisAppendCommand(hog, "LIMITER CHECK api:hog%d", i),
                     REDIS_OK);
    }
    px_flush(hog);
    /* The bystander's one call, sent while the hog fills the bound. */
    cr_assert_eq(redisAppendCommand(bob, "LIMITER CHECK api:bob"), REDIS_OK);
    px_flush(bob);
    for (i = 0; i < PENDING_SENT; i++) {
        redisReply *r = px_next(hog);
        if (r->type == REDIS_REPLY_ERROR) {
            px_check_error(r, "ERR limiter calls pending past "
                              "limiter_pending_max_bytes: retry later");
            refused++;
        } else {
            px_check_five(r, "hog", 0, 1, 0, -1, 60);
            admitted++;
        }
    }
    px_check_five(px_next(bob), "bob", 0, 1, 0, -1, 60);
    freeReplyObject(px_next(d));
    cr_assert_gt(admitted, 0);
    cr_assert_gt(refused, 0);
    cr_assert_eq(px_info_int(bob, "limiter_pending_refused"), refused);
    /* Every call ended: nothing charged any more. */
    cr_assert_eq(px_info_int(bob, "limiter_pending_bytes"), 0);
    /* A refused call wrote nothing: the hog's identity is fresh. */
    px_check_five(px_cmd(bob, "LIMITER CHECK api:hog%d", PENDING_SENT - 1),
                  "refused one", 0, 1, 0, -1, 60);
    redisFree(hog);
    redisFree(bob);
    redisFree(d);
}

/* ---------------- The refusal cache ---------------- */

#define RC_KEY 4000
#define RC_N   100

static void init_refusal(void)
{
    px_limits_start(PX_MODE_SINGLE, tree, "refusal_cache_max_bytes: 64kb\n");
}

Test(it_limiter_bytes, refusal_cache_stays_within_its_bytes,
     .init = init_refusal, .fini = px_env_fini, .timeout = 120)
{
    redisContext *c = px_connect(px_env()->proxy.port);
    static char key[(1 << 17) + 16];
    long long bytes;
    int i, n;

    memset(key, 'r', sizeof(key));
    for (i = 0; i < RC_N; i++) {
        n = snprintf(key + RC_KEY, 16, ":%d", i);
        px_check_five(
            px_cmd(c, "CL.THROTTLE %b 0 1 3600", key, (size_t)RC_KEY + n),
            "first", 0, 1, 0, -1, 3600);
        px_check_five(
            px_cmd(c, "CL.THROTTLE %b 0 1 3600", key, (size_t)RC_KEY + n),
            "refused", 1, 1, 0, 3600, 3600);
        bytes = px_info_int(c, "limiter_refusal_cache_bytes");
        cr_assert_leq(bytes, 64 * 1024, "key %d: %lld bytes", i, bytes);
    }
    /* Each entry is charged more than 8 kB: at most 7 fit, and the
     * cache holds some. */
    n = (int)px_info_int(c, "limiter_refusal_cache_keys");
    cr_assert(n >= 1 && n <= 7, "%d keys cached", n);
    cr_assert_eq(px_info_int(c, "limiter_refusal_cache_skipped"), 0);
    /* A 128 kB key alone is past the bound: not cached, and Redis gives
     * the same refusal. */
    n = snprintf(key + sizeof(key) - 16, 16, ":big");
    px_check_five(
        px_cmd(c, "CL.THROTTLE %b 0 1 3600", key, sizeof(key) - 16 + n), "big",
        0, 1, 0, -1, 3600);
    px_check_five(
        px_cmd(c, "CL.THROTTLE %b 0 1 3600", key, sizeof(key) - 16 + n),
        "big refused", 1, 1, 0, 3600, 3600);
    cr_assert_eq(px_info_int(c, "limiter_refusal_cache_skipped"), 1);
    cr_assert_leq(px_info_int(c, "limiter_refusal_cache_bytes"), 64 * 1024);
    redisFree(c);
}
