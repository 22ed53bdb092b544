/* algorithm: concurrency through the proxy, in the embedded store, a
 * single Redis and a cluster: max holders admitted and the next refused,
 * a renewing CHECK taking no second slot, LIMITER RELEASE freeing a slot
 * (and counting it), a lease running out freeing one by itself, all or
 * nothing with a rate level on the same node and on another slot, and
 * bad inputs each an error that writes nothing, a bystander unharmed.
 *
 * Leases are a minute but one (200 ms), which the test polls: nothing
 * is asserted against the wall clock. */
#include "tests/integration/cluster_fixture.h"
#include "tests/integration/fixture.h"
#include "tests/integration/limiter_support.h"
#include "tests/support/px_test.h"

#include <stdio.h>
#include <string.h>

PX_TEST_SUITE(it_concurrency);

static const char conc_yaml[] =
    "api:              # 2 requests in flight and 3 a day per user\n"
    "  children:\n"
    "    \"*\":\n"
    "      limits:\n"
    "        - {algorithm: concurrency, max: 2, lease: 1m}\n"
    "        - {algorithm: fixed_window, max: 3, window: 1d}\n"
    "short:\n"
    "  children:\n"
    "    \"*\":\n"
    "      limits:\n"
    "        - {algorithm: concurrency, max: 1, lease: 200ms}\n"
    "cross:            # a rate shared by all, slots per user: two slots\n"
    "  limits:\n"
    "    - {algorithm: fixed_window, max: 2, window: 1d}\n"
    "  children:\n"
    "    \"*\":\n"
    "      limits:\n"
    "        - {algorithm: concurrency, max: 5, lease: 1m}\n"
    "plain:\n"
    "  limits:\n"
    "    - {algorithm: fixed_window, max: 5, window: 1d}\n";

static void init_embedded(void)
{
    px_limits_start(PX_MODE_EMBEDDED, conc_yaml, NULL);
}

static void init_single(void)
{
    px_limits_start(PX_MODE_SINGLE, conc_yaml, NULL);
}

static void init_cluster(void)
{
    px_limits_start(PX_MODE_CLUSTER, conc_yaml, NULL);
}

/* Asserts a refused reply of `limit` with nothing left, and a retry and
 * reset within the minute's lease. */
static void check_full(redisReply *r, const char *what, long long limit)
{
    struct px_five f = px_take_five(r, what);

    cr_assert_eq(f.limited, 1, "%s: limited", what);
    cr_assert_eq(f.limit, limit, "%s: limit", what);
    cr_assert_eq(f.remaining, 0, "%s: remaining", what);
    cr_assert(f.retry > 0 && f.retry <= 60, "%s: retry %lld", what, f.retry);
    cr_assert(f.reset >= f.retry, "%s: reset %lld", what, f.reset);
}

/* Asserts an admitted reply of `limit` with `remaining` left. */
static void check_ok(redisReply *r, const char *what, long long limit,
                     long long remaining)
{
    struct px_five f = px_take_five(r, what);

    cr_assert_eq(f.limited, 0, "%s: limited", what);
    cr_assert_eq(f.limit, limit, "%s: limit", what);
    cr_assert_eq(f.remaining, remaining, "%s: remaining %lld", what,
                 f.remaining);
    cr_assert_eq(f.retry, -1, "%s: retry", what);
}

/* Max holders, the next refused, renewal, RELEASE, all or nothing with
 * the day's rate on the same node. */
static void slots(redisContext *c)
{
    redisReply *r;

    check_ok(px_cmd(c, "LIMITER CHECK api:u ID a"), "a", 2, 1);
    check_ok(px_cmd(c, "LIMITER CHECK api:u ID b"), "b", 2, 0);
    /* Full: refused, and it takes no rate either. */
    check_full(px_cmd(c, "LIMITER CHECK api:u ID c"), "c", 2);
    /* a renews: no second slot; the rate's third of the day. */
    r = px_cmd(c, "LIMITER CHECK api:u ID a");
    cr_assert_eq(px_take_five(r, "renew").limited, 0, "a renews");
    px_check_int(px_cmd(c, "LIMITER RELEASE api:u a"), 1);
    px_check_int(px_cmd(c, "LIMITER RELEASE api:u a"), 0);
    /* A slot is free now, but the day's rate is spent (a, b, a): refused
     * by the rate level, c takes no slot. */
    cr_assert_eq(
        px_take_five(px_cmd(c, "LIMITER CHECK api:u ID c"), "rate").limited, 1,
        "refused by the rate level");
    px_check_int(px_cmd(c, "LIMITER RELEASE api:u c"), 0);
    px_check_int(px_cmd(c, "LIMITER RELEASE api:u b"), 1);
    /* An ID on a path without concurrency: ignored. */
    check_ok(px_cmd(c, "LIMITER CHECK plain ID z"), "plain", 5, 4);
}

/* A lease of 200 ms frees its slot by itself: polled, not slept on. */
static void lease_runs_out(redisContext *c)
{
    long long t0 = px_now_ms();
    int admitted = 0;

    check_ok(px_cmd(c, "LIMITER CHECK short:u ID a"), "a", 1, 0);
    cr_assert_eq(
        px_take_five(px_cmd(c, "LIMITER CHECK short:u ID b"), "b").limited, 1,
        "full while a's lease runs");
    while (!admitted && px_now_ms() - t0 < 5000) {
        px_sleep_ms(20);
        admitted = px_take_five(px_cmd(c, "LIMITER CHECK short:u ID b"), "b")
                       .limited == 0;
    }
    cr_assert(admitted, "a's lease ran out and freed its slot");
    px_check_int(px_cmd(c, "LIMITER RELEASE short:u a"), 0);
    px_check_int(px_cmd(c, "LIMITER RELEASE short:u b"), 1);
}

/* The rate lives at {cross}, the slots at {cross:<user>}: a check the
 * shared rate refuses gives back the slot its other group took. */
static void across_slots(redisContext *c)
{
    check_ok(px_cmd(c, "LIMITER CHECK cross:u ID a"), "u", 2, 1);
    check_ok(px_cmd(c, "LIMITER CHECK cross:v ID a"), "v", 2, 0);
    cr_assert_eq(
        px_take_five(px_cmd(c, "LIMITER CHECK cross:w ID a"), "w").limited, 1,
        "the shared rate refuses");
    px_check_int(px_cmd(c, "LIMITER RELEASE cross:w a"), 0);
    px_check_int(px_cmd(c, "LIMITER RELEASE cross:u a"), 1);
}

/* Each bad input an error, nothing written at api:z; a bystander's
 * replies stay right. */
static void bad_inputs(redisContext *c)
{
    static const char *const keys[] = {
        "cellgate:{api:z}#0:concurrency",
        "cellgate:{api:z}#1:fixed_window",
    };
    char longid[514];

    check_ok(px_cmd(c, "LIMITER CHECK api:by ID x"), "bystander", 2, 1);
    px_check_error(px_cmd(c, "LIMITER CHECK api:z"),
                   "ERR LIMITER CHECK of 'api:z' needs ID <token>: level "
                   "'api:*' is a concurrency limit");
    memset(longid, 'x', 513);
    longid[513] = '\0';
    px_check_error(px_cmd(c, "LIMITER CHECK api:z ID %s", longid),
                   "ERR ID must be between 1 and 512 bytes");
    px_check_error(px_cmd(c, "LIMITER CHECK api:z ID %s", ""),
                   "ERR ID must be between 1 and 512 bytes");
    px_check_error(px_cmd(c, "LIMITER CHECK api:z ID a ID b"),
                   "ERR syntax error: ID given more than once");
    px_check_error(px_cmd(c, "LIMITER CHECK api:z ID a WAIT 100"),
                   "ERR concurrency limits cannot WAIT: a slot frees when "
                   "its holder releases it");
    px_check_error(px_cmd(c, "LIMITER RELEASE api:z"),
                   "ERR wrong number of arguments for 'limiter|release' "
                   "command");
    px_check_error(px_cmd(c, "LIMITER RELEASE api:z a b"),
                   "ERR wrong number of arguments for 'limiter|release' "
                   "command");
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        px_check_absent(keys[i], strlen(keys[i]), keys[i]);
    }
    check_ok(px_cmd(c, "LIMITER PEEK api:z ID a"), "nothing taken", 2, 1);
    check_ok(px_cmd(c, "LIMITER CHECK api:by ID y"), "bystander", 2, 0);
}

static void everything(void)
{
    redisContext *c = px_connect(px_env()->proxy.port);

    slots(c);
    lease_runs_out(c);
    across_slots(c);
    bad_inputs(c);
    redisFree(c);
}

Test(it_concurrency, embedded, .init = init_embedded, .fini = px_env_fini,
     .timeout = 60)
{
    everything();
}

Test(it_concurrency, single, .init = init_single, .fini = px_env_fini,
     .timeout = 60)
{
    everything();
}

Test(it_concurrency, cluster, .init = init_cluster, .fini = px_cluster_fini,
     .timeout = 120)
{
    everything();
}
