/* Test support shared by every criterion binary.
 *
 * LeakSanitizer alone does not fail a criterion test (docs/ARCHITECTURE.md), so
 * PX_TEST_SUITE gives each suite a .fini that runs a recoverable leak check
 * and aborts when it finds one, which turns the run's exit code to 1. */
#ifndef PX_TESTS_SUPPORT_PX_TEST_H
#define PX_TESTS_SUPPORT_PX_TEST_H

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stddef.h>
#include <stdlib.h>

#if defined(PX_ASAN)
int __lsan_do_recoverable_leak_check(void);
static inline void px_leak_check(void)
{
    if (__lsan_do_recoverable_leak_check() != 0) {
        abort();
    }
}
#define PX_TEST_SUITE(name) TestSuite(name, .fini = px_leak_check)
#else
#define PX_TEST_SUITE(name) TestSuite(name)
#endif

/* Parameters of a ParameterizedTest over a static case table. Criterion
 * copies parameters into the test process, so pointers inside cases would
 * not survive: tests take the index of their case. Fills ids (static
 * storage of n entries) with 0..n-1 and returns them. */
static inline struct criterion_test_params px_param_ids(size_t *ids, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        ids[k] = k;
    }
    return cr_make_param_array(size_t, ids, n);
}

#endif /* PX_TESTS_SUPPORT_PX_TEST_H */
