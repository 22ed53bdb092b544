/* Test support for the limiter algorithms: every algorithm answers with the
 * same five integers, so one checker serves all their suites. */
#ifndef PX_TESTS_SUPPORT_RL_TEST_H
#define PX_TESTS_SUPPORT_RL_TEST_H

#include <criterion/criterion.h>
#include <stdint.h>

#include "algorithms/rl.h"

/* Asserts the reply of decision `d` (seconds rounded as redis-cell):
 * [limited, limit, remaining, retry_after_s, reset_after_s]. */
static inline void rl_test_check_reply(const struct rl_decision *d, int64_t l,
                                       int64_t lim, int64_t rem, int64_t retry,
                                       int64_t reset)
{
    int64_t out[5];

    rl_reply_ints(d, out);
    cr_assert(out[0] == l && out[1] == lim && out[2] == rem &&
                  out[3] == retry && out[4] == reset,
              "reply [%lld, %lld, %lld, %lld, %lld], expected [%lld, %lld, "
              "%lld, %lld, %lld]",
              (long long)out[0], (long long)out[1], (long long)out[2],
              (long long)out[3], (long long)out[4], (long long)l,
              (long long)lim, (long long)rem, (long long)retry,
              (long long)reset);
}

#endif /* PX_TESTS_SUPPORT_RL_TEST_H */
