/* The lease decisions (proxy/limiter/limiter_lease.h): whether a check
 * takes a lease, is admitted from one or goes plain; when a lease is
 * over; what a check admitted from a lease replies. Pure functions:
 * leases written by hand, no store, no loop. A lease's limits.yaml key
 * (`lease: N` on a node) is parsed and shown as LIMITER RULES does. */
#include "tests/support/px_test.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/rl.h"
#include "conf/limits.h"
#include "proxy/core/util.h"
#include "proxy/limiter/limiter_lease.h"
#include "tests/support/limits_test.h"

PX_TEST_SUITE(limiter_lease);

/* A live lease of `n` with `units` left, taken with `remaining` left at
 * Redis and a reset of `reset_s` seconds. */
static struct limiter_lease live(int64_t n, int64_t units, int64_t remaining,
                                 int64_t reset_s)
{
    struct limiter_lease l;

    memset(&l, 0, sizeof(l));
    l.state = LIMITER_LEASE_LIVE;
    l.n = n;
    l.units = units;
    l.taken.limit = 50;
    l.taken.remaining = remaining;
    l.taken.retry_after_ns = -RL_NS_PER_SEC;
    l.taken.reset_after_ns = reset_s * RL_NS_PER_SEC;
    l.since_ms = 1000;
    return l;
}

Test(limiter_lease, who_takes_uses_or_goes_plain)
{
    struct limiter_lease l = live(10, 4, 40, 60);
    struct limiter_lease f = l;

    /* No lease yet: take one, unless the check is not plain, the node
     * has none, or the cost is above N. */
    cr_assert_eq(limiter_lease_use(NULL, 10, 1, true), LIMITER_LEASE_TAKE);
    cr_assert_eq(limiter_lease_use(NULL, 10, 10, true), LIMITER_LEASE_TAKE);
    cr_assert_eq(limiter_lease_use(NULL, 10, 11, true), LIMITER_LEASE_PLAIN);
    cr_assert_eq(limiter_lease_use(NULL, 10, 1, false), LIMITER_LEASE_PLAIN);
    cr_assert_eq(limiter_lease_use(NULL, 0, 1, true), LIMITER_LEASE_PLAIN);
    /* A live lease admits what it still holds. */
    cr_assert_eq(limiter_lease_use(&l, 10, 4, true), LIMITER_LEASE_LOCAL);
    cr_assert_eq(limiter_lease_use(&l, 10, 5, true), LIMITER_LEASE_PLAIN);
    cr_assert_eq(limiter_lease_use(&l, 10, 1, false), LIMITER_LEASE_PLAIN);
    /* Another N (a reload changed it): not this lease's. */
    cr_assert_eq(limiter_lease_use(&l, 20, 1, true), LIMITER_LEASE_PLAIN);
    /* Someone else's take in flight, or a refused one: plain. */
    f.state = LIMITER_LEASE_IN_FLIGHT;
    cr_assert_eq(limiter_lease_use(&f, 10, 1, true), LIMITER_LEASE_PLAIN);
    f.state = LIMITER_LEASE_OFF;
    cr_assert_eq(limiter_lease_use(&f, 10, 1, true), LIMITER_LEASE_PLAIN);
}

Test(limiter_lease, queue_behind_a_take_in_flight)
{
    struct limiter_lease l = live(10, 0, 40, 60);

    /* Someone's take of 10 on its way: a check waits for it. */
    l.state = LIMITER_LEASE_IN_FLIGHT;
    l.taker = (struct req *)&l; /* only compared */
    cr_assert_eq(limiter_lease_use(&l, 10, 1, true), LIMITER_LEASE_QUEUE);
    cr_assert_eq(limiter_lease_use(&l, 10, 1, false), LIMITER_LEASE_PLAIN);
    cr_assert_eq(limiter_lease_use(&l, 10, 11, true), LIMITER_LEASE_PLAIN);
    cr_assert_eq(limiter_lease_use(&l, 20, 1, true), LIMITER_LEASE_PLAIN);
    /* At most LIMITER_LEASE_QUEUE_TAKES leases' worth of units wait. */
    l.wait_units = LIMITER_LEASE_QUEUE_TAKES * 10 - 3;
    cr_assert_eq(limiter_lease_use(&l, 10, 3, true), LIMITER_LEASE_QUEUE);
    cr_assert_eq(limiter_lease_use(&l, 10, 4, true), LIMITER_LEASE_PLAIN);
    /* And at most LIMITER_LEASE_QUEUE_MAX checks. */
    l.wait_units = 0;
    l.n = 1000;
    l.nwait = LIMITER_LEASE_QUEUE_MAX - 1;
    cr_assert_eq(limiter_lease_use(&l, 1000, 1, true), LIMITER_LEASE_QUEUE);
    l.nwait = LIMITER_LEASE_QUEUE_MAX;
    cr_assert_eq(limiter_lease_use(&l, 1000, 1, true), LIMITER_LEASE_PLAIN);
    /* A take that failed, or whose client left: nothing to wait for. */
    l.n = 10;
    l.nwait = 0;
    l.taker = NULL;
    cr_assert_eq(limiter_lease_use(&l, 10, 1, true), LIMITER_LEASE_PLAIN);
}

Test(limiter_lease, shutdown_waits_for_give_backs_a_second_at_most)
{
    struct limiter_leases ls;

    limiter_leases_init(&ls, 100);
    cr_assert(!limiter_leases_stop_from(&ls, 5000)); /* none sent */
    cr_assert(!limiter_leases_stop_waits(&ls, 5000));
    ls.giving = 2;
    cr_assert(limiter_leases_stop_from(&ls, 5000));
    cr_assert(limiter_leases_stop_waits(&ls, 5000 + LIMITER_LEASE_STOP_MS - 1));
    cr_assert(!limiter_leases_stop_waits(&ls, 5000 + LIMITER_LEASE_STOP_MS));
    ls.giving = 0; /* answered */
    cr_assert(!limiter_leases_stop_waits(&ls, 5001));
    limiter_leases_free(&ls);
}

Test(limiter_lease, expiry)
{
    struct limiter_lease l = live(10, 4, 40, 60);

    cr_assert(!limiter_lease_expired(&l, 1099, 100));
    cr_assert(limiter_lease_expired(&l, 1100, 100));
    l.state = LIMITER_LEASE_OFF;
    cr_assert(limiter_lease_expired(&l, 1100, 100));
    /* A take in flight is waited for far longer than a lease lives. */
    l.state = LIMITER_LEASE_IN_FLIGHT;
    cr_assert(!limiter_lease_expired(&l, 1100, 100));
    cr_assert(
        !limiter_lease_expired(&l, 1000 + LIMITER_LEASE_FLIGHT_MS - 1, 100));
    cr_assert(limiter_lease_expired(&l, 1000 + LIMITER_LEASE_FLIGHT_MS, 100));
}

Test(limiter_lease, reply_is_redis_plus_what_the_lease_keeps)
{
    struct limiter_lease l = live(10, 6, 40, 60);
    struct rl_decision d;

    /* Redis had 40 left after the take; the lease still keeps 6. */
    limiter_lease_reply(&l, 2 * RL_NS_PER_SEC, &d);
    cr_assert_eq(d.limited, 0);
    cr_assert_eq(d.limit, 50);
    cr_assert_eq(d.remaining, 46);
    cr_assert_eq(d.retry_after_ns, -RL_NS_PER_SEC);
    cr_assert_eq(d.reset_after_ns, 58 * RL_NS_PER_SEC);
    /* The reset counts down from the take's, never below 0. */
    limiter_lease_reply(&l, 90 * RL_NS_PER_SEC, &d);
    cr_assert_eq(d.reset_after_ns, 0);
    l.units = 0;
    limiter_lease_reply(&l, 0, &d);
    cr_assert_eq(d.remaining, 40);
}

Test(limiter_lease, node_key_parsed_and_shown)
{
    limits_test_expect_error("user:\n  limits: [1, 1, 1]\n  lease: 0\n",
                             "limits.yaml:3:10: user: lease: expected an "
                             "integer from 1 to 2147483648, got \"0\"");
    limits_test_expect_error("user:\n  limits: [1, 1, 1]\n  lease: "
                             "2147483649\n",
                             "limits.yaml:3:10: user: lease: expected an "
                             "integer from 1 to 2147483648, got "
                             "\"2147483649\"");
    limits_test_expect_error("user:\n  lease: 5\n  children:\n    a:\n"
                             "      limits: [1, 1, 1]\n",
                             "limits.yaml:2:3: user: lease: on a node "
                             "without limits (a lease is taken of the "
                             "node's own limits and its parents')");
}

Test(limiter_lease, node_key_resolved_and_in_rules)
{
    struct limits_tree *t =
        limits_test_load_ok("user:\n  limits: [1, 1, 1]\n"
                            "  children:\n    \"*\":\n"
                            "      limits: [4, 1, 1000]\n      lease: 7\n");
    struct limits_levels *lv = px_malloc(LIMITS_LEVELS_BYTES);
    char *text = NULL;
    size_t len = 0;

    limits_test_resolve(t, "user:alex", lv);
    cr_assert_eq(lv->n, 2);
    cr_assert_eq(lv->level[0].lease, 0);
    cr_assert_eq(lv->level[1].lease, 7);
    cr_assert_eq(limits_describe(t, false, false, &text, &len), LIMITS_OK);
    cr_assert(strstr(text, "user:*  ") != NULL &&
                  strstr(text, "  lease 7\n") != NULL &&
                  strstr(text, "lease 0") == NULL,
              "%s", text);
    free(text);
    px_free(lv);
    limits_free(t);
}
