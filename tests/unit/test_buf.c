/* Growable byte buffer: growth policy, consume/commit, failure leaves the
 * buffer unchanged. */
#include "tests/support/px_test.h"

#include <stdint.h>
#include <string.h>

#include "parser/buf.h"

PX_TEST_SUITE(buf);

Test(buf, init_allocates_nothing)
{
    struct buf b;

    buf_init(&b);
    cr_assert_null(b.data);
    cr_assert_eq(b.len, 0);
    cr_assert_eq(b.cap, 0);
    cr_assert_eq(buf_append(&b, NULL, 0), BUF_OK);
    cr_assert_null(b.data);
    buf_free(&b);
}

Test(buf, first_reserve_allocates_at_least_64_bytes)
{
    struct buf b;

    buf_init(&b);
    cr_assert_eq(buf_reserve(&b, 1), BUF_OK);
    cr_assert_eq(b.cap, 64);
    cr_assert_eq(b.len, 0);
    buf_free(&b);

    cr_assert_eq(buf_reserve(&b, 100), BUF_OK);
    cr_assert_eq(b.cap, 128);
    buf_free(&b);
}

Test(buf, growth_doubles_capacity)
{
    char chunk[64];
    struct buf b;

    memset(chunk, 'a', sizeof(chunk));
    buf_init(&b);
    cr_assert_eq(buf_append(&b, chunk, 64), BUF_OK);
    cr_assert_eq(b.cap, 64);
    cr_assert_eq(buf_append(&b, chunk, 1), BUF_OK);
    cr_assert_eq(b.cap, 128);
    cr_assert_eq(buf_append(&b, chunk, 64), BUF_OK);
    cr_assert_eq(b.cap, 256);
    cr_assert_eq(b.len, 129);
    buf_free(&b);
}

Test(buf, reserve_within_capacity_does_not_move_data)
{
    struct buf b;
    char *before;

    buf_init(&b);
    cr_assert_eq(buf_reserve(&b, 10), BUF_OK);
    before = b.data;
    cr_assert_eq(buf_reserve(&b, 64), BUF_OK);
    cr_assert_eq(b.data, before);
    buf_free(&b);
}

Test(buf, reserve_overflow_fails_and_leaves_buffer_unchanged)
{
    struct buf b;

    buf_init(&b);
    cr_assert_eq(buf_append_str(&b, "hello"), BUF_OK);
    cr_assert_eq(buf_reserve(&b, SIZE_MAX), BUF_ENOMEM);
    cr_assert_eq(buf_reserve(&b, SIZE_MAX - 4), BUF_ENOMEM);
    cr_assert_eq(buf_append(&b, "x", SIZE_MAX), BUF_ENOMEM);
    cr_assert_eq(b.len, 5);
    cr_assert_eq(b.cap, 64);
    cr_assert(memcmp(b.data, "hello", 5) == 0);
    buf_free(&b);
}

Test(buf, append_and_append_str_concatenate)
{
    struct buf b;

    buf_init(&b);
    cr_assert_eq(buf_append(&b, "ab\0c", 4), BUF_OK);
    cr_assert_eq(buf_append_str(&b, "de"), BUF_OK);
    cr_assert_eq(buf_append_str(&b, ""), BUF_OK);
    cr_assert_eq(b.len, 6);
    cr_assert(memcmp(b.data, "ab\0cde", 6) == 0);
    buf_free(&b);
}

Test(buf, commit_marks_reserved_tail_as_used)
{
    struct buf b;

    buf_init(&b);
    cr_assert_eq(buf_reserve(&b, 3), BUF_OK);
    cr_assert_geq(buf_avail(&b), 3);
    memcpy(buf_tail(&b), "xyz", 3);
    buf_commit(&b, 3);
    cr_assert_eq(b.len, 3);
    cr_assert_eq(buf_avail(&b), b.cap - 3);
    cr_assert(memcmp(b.data, "xyz", 3) == 0);
    buf_free(&b);
}

Test(buf, consume_drops_prefix_and_keeps_the_rest)
{
    struct buf b;

    buf_init(&b);
    cr_assert_eq(buf_append_str(&b, "0123456789"), BUF_OK);
    buf_consume(&b, 0);
    cr_assert_eq(b.len, 10);
    buf_consume(&b, 4);
    cr_assert_eq(b.len, 6);
    cr_assert(memcmp(b.data, "456789", 6) == 0);
    buf_consume(&b, 6);
    cr_assert_eq(b.len, 0);
    cr_assert_not_null(b.data);
    buf_free(&b);
}

Test(buf, clear_keeps_storage)
{
    struct buf b;
    size_t cap;

    buf_init(&b);
    cr_assert_eq(buf_append_str(&b, "abc"), BUF_OK);
    cap = b.cap;
    buf_clear(&b);
    cr_assert_eq(b.len, 0);
    cr_assert_eq(b.cap, cap);
    cr_assert_not_null(b.data);
    buf_free(&b);
}

Test(buf, swap_exchanges_contents)
{
    struct buf a, b;

    buf_init(&a);
    buf_init(&b);
    cr_assert_eq(buf_append_str(&a, "left"), BUF_OK);
    buf_swap(&a, &b);
    cr_assert_null(a.data);
    cr_assert_eq(a.len, 0);
    cr_assert_eq(b.len, 4);
    cr_assert(memcmp(b.data, "left", 4) == 0);
    buf_free(&a);
    buf_free(&b);
}

Test(buf, free_leaves_an_empty_reusable_buffer)
{
    struct buf b;

    buf_init(&b);
    buf_free(&b);
    cr_assert_eq(buf_append_str(&b, "x"), BUF_OK);
    buf_free(&b);
    cr_assert_null(b.data);
    cr_assert_eq(b.len, 0);
    cr_assert_eq(b.cap, 0);
    cr_assert_eq(buf_append_str(&b, "again"), BUF_OK);
    cr_assert_eq(b.len, 5);
    buf_free(&b);
}
