/* The limiter's byte bounds, as pure decisions: when a pending call may
 * start (the bound, and the reserve for a client with nothing pending),
 * what a call is charged, when freed memory is given back, and what an
 * override is charged. */
#include <criterion/criterion.h>
#include <string.h>

#include "proxy/core/util.h"
#include "proxy/limiter/store.h"
#include "proxy/limiter/store_local.h"
#include "proxy/limiter/store_trim.h"

Test(store_bytes, a_pending_call_starts_within_the_bound)
{
    /* Within the bound, whoever asks. */
    cr_assert(store_pending_admits(0, 1000, 4000, 5));
    cr_assert(store_pending_admits(3000, 1000, 4000, 5));
    cr_assert_not(store_pending_admits(3001, 1000, 4000, 5));
    /* A call larger than the bound never starts (no wrap-around). */
    cr_assert_not(store_pending_admits(0, 6000, 4000, 1));
    cr_assert_not(store_pending_admits((size_t)-1, 1, 4000, 1));
    /* 0: no bound. */
    cr_assert(store_pending_admits((size_t)1 << 40, 1 << 20, 0, 9));
}

Test(store_bytes, a_client_with_nothing_pending_has_a_quarter_more)
{
    /* Past the bound, a client making one call at a time still starts,
     * up to a quarter more; one with calls running does not. */
    cr_assert(store_pending_admits(4000, 1000, 4000, 0));
    cr_assert_not(store_pending_admits(4000, 1000, 4000, 1));
    cr_assert(store_pending_admits(3500, 1500, 4000, 0));
    cr_assert_not(store_pending_admits(4001, 1000, 4000, 0));
}

Test(store_bytes, a_call_is_charged_its_keys_and_levels)
{
    struct store_check *c = store_check_new(2, 1);
    size_t empty = store_check_bytes(c), one;

    cr_assert_geq(empty, sizeof(*c) + 2 * sizeof(struct store_limit));
    c->lim[0].key = px_strndup("cellgate:{a}#0:gcra", 19);
    c->lim[0].klen = 19;
    c->n = 1;
    one = store_check_bytes(c);
    cr_assert_eq(one, empty + 2 * 20 + STORE_CALL_BYTES_PER_LIMIT);
    store_check_free(c);
}

Test(store_bytes, freed_memory_goes_back_only_after_many_bytes)
{
    struct store_trim t;

    memset(&t, 0, sizeof(t));
    cr_assert_not(store_trim_due(&t, 0, 100));
    cr_assert_not(store_trim_due(&t, 99, 100));
    cr_assert(store_trim_due(&t, 100, 100));
    cr_assert_not(store_trim_maybe(&t, STORE_TRIM_BYTES - 1));
    cr_assert(store_trim_maybe(&t, STORE_TRIM_BYTES));
    cr_assert_eq(t.trims, 1);
    /* Counted from the last trim, not from 0. */
    cr_assert_not(store_trim_maybe(&t, 2 * STORE_TRIM_BYTES - 1));
    cr_assert(store_trim_maybe(&t, 2 * STORE_TRIM_BYTES));
    cr_assert_eq(t.trims, 2);
}

Test(store_bytes, overrides_are_charged_and_given_back_exactly)
{
    struct store_local st;
    size_t one = store_local_override_bytes(5, 8);

    store_local_init(&st, 100, 0, 2 * one);
    cr_assert_eq(store_local_override_set(&st, "a:one", 5, "FACTOR 3", 8), 0);
    cr_assert_eq(st.override_bytes, one);
    cr_assert_eq(store_local_override_set(&st, "a:two", 5, "FACTOR 3", 8), 0);
    cr_assert_eq(store_local_override_set(&st, "a:thr", 5, "FACTOR 3", 8), -1);
    cr_assert_eq(st.override_refused, 1);
    cr_assert_null(store_local_override_get(&st, "a:thr", 5));
    /* A replacement is weighed without the text it replaces. */
    cr_assert_eq(store_local_override_set(&st, "a:two", 5, "FACTOR 2", 8), 1);
    cr_assert_eq(store_local_override_set(&st, "a:two", 5, "FACTOR 2.5", 10),
                 -1);
    cr_assert_eq(store_local_override_set(&st, "a:one", 5, NULL, 0), 1);
    cr_assert_eq(store_local_override_set(&st, "a:two", 5, NULL, 0), 1);
    cr_assert_eq(st.override_bytes, 0);
    store_local_free(&st);
}
