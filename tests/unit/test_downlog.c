/* When a node's outage is told: its first failure, then once a minute
 * with the count of attempts, then once when it serves again. */
#include "tests/support/px_test.h"

#include "proxy/core/downlog.h"

PX_TEST_SUITE(downlog);

Test(downlog, the_first_success_is_told_once)
{
    struct downlog d = { 0 };

    cr_assert_eq(downlog_ok(&d), DOWNLOG_UP);
    cr_assert_eq(downlog_ok(&d), DOWNLOG_QUIET);
    cr_assert_eq(downlog_ok(&d), DOWNLOG_QUIET);
}

/* A node down for 5 minutes, retried every 2 s by each of its 3
 * connections: 1 + 4 lines, not 450, then one when it is back. */
Test(downlog, an_outage_is_told_at_start_once_a_minute_and_at_its_end)
{
    struct downlog d = { 0 };
    unsigned down = 0, still = 0, quiet = 0;
    uint64_t t;

    cr_assert_eq(downlog_ok(&d), DOWNLOG_UP);
    for (t = 1000; t < 1000 + 300000; t += 2000) {
        for (int c = 0; c < 3; c++) {
            switch (downlog_fail(&d, t)) {
            case DOWNLOG_DOWN:
                down++;
                cr_assert_eq(t, 1000);
                break;
            case DOWNLOG_STILL:
                still++;
                break;
            case DOWNLOG_QUIET:
                quiet++;
                break;
            default:
                cr_assert_fail("a failure said something else");
            }
        }
    }
    cr_assert_eq(down, 1);
    cr_assert_eq(still, 4, "still: %u", still);
    cr_assert_eq(d.attempts, 450);
    cr_assert_eq(d.down_ms, 1000);
    cr_assert_eq(downlog_ok(&d), DOWNLOG_BACK);
    cr_assert_eq(d.attempts, 450, "the BACK line can say how many");
    cr_assert_eq(downlog_ok(&d), DOWNLOG_QUIET);
}

/* A new outage starts its own count and is told at once. */
Test(downlog, each_outage_is_told_anew)
{
    struct downlog d = { 0 };

    cr_assert_eq(downlog_fail(&d, 10), DOWNLOG_DOWN);
    cr_assert_eq(downlog_fail(&d, 20), DOWNLOG_QUIET);
    cr_assert_eq(downlog_ok(&d), DOWNLOG_BACK);
    cr_assert_eq(downlog_fail(&d, 30), DOWNLOG_DOWN);
    cr_assert_eq(d.attempts, 1);
    cr_assert_eq(d.down_ms, 30);
    cr_assert_eq(downlog_fail(&d, 30 + DOWNLOG_EVERY_MS - 1), DOWNLOG_QUIET);
    cr_assert_eq(downlog_fail(&d, 30 + DOWNLOG_EVERY_MS), DOWNLOG_STILL);
    cr_assert_eq(d.attempts, 3);
}
