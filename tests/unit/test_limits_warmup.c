/* Unit tests of token_bucket's warm-up keys in limits.yaml: how a rule
 * with warmup and cold_factor reads back, that a rule without them reads
 * as before, and every error (each a clear message, nothing loaded). */
#include "conf/limits.h"
#include "tests/support/limits_test.h"
#include "tests/support/px_test.h"

PX_TEST_SUITE(limits_warmup);

#define TB "u:\n  limits:\n    - {algorithm: token_bucket, capacity: 4, "

Test(limits_warmup, reads_back)
{
    struct limits_tree *t =
        limits_test_load_ok(TB "refill_per_sec: 2, warmup: 4s}\n"
                               "v:\n  limits:\n    - {algorithm: token_bucket, "
                               "capacity: 4, refill_per_sec: 2, warmup: 1.5m, "
                               "cold_factor: 10}\n"
                               "w:\n  limits:\n    - {algorithm: token_bucket, "
                               "capacity: 4, refill_per_sec: 2}\n");
    struct limits_levels *lv = limits_test_levels_new();

    limits_test_resolve(t, "u", lv);
    cr_assert_eq(lv->level[0].limits[0].u.token_bucket.warmup_ms, 4000);
    cr_assert_eq(lv->level[0].limits[0].u.token_bucket.cold_factor, 0);
    cr_assert_str_eq(limits_test_fmt(&lv->level[0].limits[0]),
                     "token_bucket(capacity=4,refill_per_sec=2,warmup=4s)");
    limits_test_resolve(t, "v", lv);
    cr_assert_str_eq(limits_test_fmt(&lv->level[0].limits[0]),
                     "token_bucket(capacity=4,refill_per_sec=2,warmup=90s,"
                     "cold_factor=10)");
    /* Without warmup a rule reads exactly as it always did. */
    limits_test_resolve(t, "w", lv);
    cr_assert_str_eq(limits_test_fmt(&lv->level[0].limits[0]),
                     "token_bucket(capacity=4,refill_per_sec=2)");
    free(lv);
    limits_free(t);
}

Test(limits_warmup, errors)
{
    limits_test_expect_error(
        TB "refill_per_sec: 2, warmup: 0}\n",
        "limits.yaml:3:73: u: warmup: expected a positive duration such as "
        "60, 1.5, 500ms or 2m, got \"0\"");
    limits_test_expect_error(
        TB "refill_per_sec: 2, warmup: -1s}\n",
        "limits.yaml:3:73: u: warmup: expected a positive duration such as "
        "60, 1.5, 500ms or 2m, got \"-1s\"");
    limits_test_expect_error(TB "refill_per_sec: 2, cold_factor: 3}\n",
                             "limits.yaml:3:7: u: token_bucket: cold_factor "
                             "needs warmup");
    limits_test_expect_error(
        TB "refill_per_sec: 2, warmup: 4, cold_factor: 1}\n",
        "limits.yaml:3:7: u: token_bucket: cold_factor must be an integer "
        "from 2 to 1000");
    limits_test_expect_error(
        TB "refill_per_sec: 2, warmup: 4, cold_factor: 2.5}\n",
        "limits.yaml:3:89: u: cold_factor: expected a positive integer, got "
        "\"2.5\"");
    limits_test_expect_error(
        TB "refill_per_sec: 2, warmup: 4, cold_factor: 0}\n",
        "limits.yaml:3:89: u: cold_factor: expected a positive integer, got "
        "\"0\"");
    limits_test_expect_error(TB "refill_per_sec: 2, warmup: 2d}\n",
                             "limits.yaml:3:7: u: token_bucket: warmup is "
                             "longer than 1 day");
    /* warmup * rate past 1e9 tokens: the math would overflow. */
    limits_test_expect_error(
        TB "refill_per_sec: 1000000, warmup: 1h}\n",
        "limits.yaml:3:7: u: token_bucket: warmup * refill_per_sec must be "
        "between 1 and 1e9 tokens");
    limits_test_expect_error(
        TB "refill_per_sec: 1, warmup: 100ms}\n",
        "limits.yaml:3:7: u: token_bucket: warmup * refill_per_sec must be "
        "between 1 and 1e9 tokens");
    limits_test_expect_error(TB "refill_per_sec: inf, warmup: 4}\n",
                             "limits.yaml:3:7: u: token_bucket: warmup needs "
                             "a finite refill_per_sec");
    limits_test_expect_error(
        "u:\n  limits:\n    - {algorithm: fixed_window, max: 4, window: 1, "
        "warmup: 4}\n",
        "limits.yaml:3:52: u: fixed_window: unknown parameter 'warmup' "
        "(expected max, window, tz)");
}
