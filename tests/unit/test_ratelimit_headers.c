/* The IETF RateLimit header values of LIMITER CHECK|PEEK ... HEADERS
 * (proxy/limiter/ratelimit_headers.h): each algorithm's quota and window,
 * the sf-string names (quoting, escaping, a level's several limits), the
 * clamping to an sf-integer, and the rounding of seconds (up, never a
 * retry too early). Pure functions: values written by hand. */
#include "tests/support/px_test.h"

#include <stdint.h>
#include <string.h>

#include "algorithms/rl.h"
#include "conf/limits.h"
#include "parser/buf.h"
#include "proxy/limiter/ratelimit_headers.h"

PX_TEST_SUITE(ratelimit_headers);

#define S RL_NS_PER_SEC

/* Asserts `b` holds exactly `want`, then frees it. */
static void expect_buf(struct buf *b, const char *want)
{
    cr_assert(b->len == strlen(want) && memcmp(b->data, want, b->len) == 0,
              "got '%.*s', expected '%s'", (int)b->len,
              b->data != NULL ? b->data : "", want);
    buf_free(b);
}

static struct ratelimit_headers_item item_of(const struct limits_limit *l)
{
    struct ratelimit_headers_item it;

    memset(&it, 0, sizeof(it));
    ratelimit_headers_item_of(&it, l);
    return it;
}

Test(ratelimit_headers, quota_and_window_of_every_algorithm)
{
    struct limits_limit l;
    struct ratelimit_headers_item it;

    memset(&l, 0, sizeof(l));
    /* gcra [15, 30, 60 s]: 16 at once, back whole in 16 * 2 s. */
    l.algo = LIMITS_GCRA;
    l.u.gcra = (struct limits_gcra){ 15, 30, 60000 };
    it = item_of(&l);
    cr_assert(it.quota == 16 && it.window_s == 32, "gcra %lld %lld",
              (long long)it.quota, (long long)it.window_s);
    /* gcra [0, 3, 1 s]: 1 at once, 333.3 ms: rounded up to 1 s. */
    l.u.gcra = (struct limits_gcra){ 0, 3, 1000 };
    it = item_of(&l);
    cr_assert(it.quota == 1 && it.window_s == 1);
    /* token_bucket 5 at 0.5/s: 10 s; an infinite refill has no window. */
    l.algo = LIMITS_TOKEN_BUCKET;
    l.u.token_bucket = (struct limits_token_bucket){ 5, 500000, 0, 0 };
    it = item_of(&l);
    cr_assert(it.quota == 5 && it.window_s == 10, "tb %lld %lld",
              (long long)it.quota, (long long)it.window_s);
    l.u.token_bucket.refill_per_sec_micro = LIMITS_RATE_INF;
    it = item_of(&l);
    cr_assert(it.quota == 5 && it.window_s == -1);
    /* leaky_bucket 10, 2 every 1.5 s: 7.5 s, rounded up. */
    l.algo = LIMITS_LEAKY_BUCKET;
    l.u.leaky_bucket = (struct limits_leaky_bucket){ 10, 1500, 2 };
    it = item_of(&l);
    cr_assert(it.quota == 10 && it.window_s == 8);
    /* Windows: their window, at least 1 s. */
    l.algo = LIMITS_FIXED_WINDOW;
    l.u.fixed_window = (struct limits_fixed_window){ 3, 86400000, 0 };
    it = item_of(&l);
    cr_assert(it.quota == 3 && it.window_s == 86400);
    /* Calendar windows: a day and a week have a length, a month none. */
    l.u.fixed_window.window_ms = LIMITS_WINDOW_DAY;
    l.u.fixed_window.tz_min = 540;
    cr_assert_eq(item_of(&l).window_s, 86400);
    l.u.fixed_window.window_ms = LIMITS_WINDOW_WEEK;
    cr_assert_eq(item_of(&l).window_s, 604800);
    l.u.fixed_window.window_ms = LIMITS_WINDOW_MONTH;
    cr_assert_eq(item_of(&l).window_s, -1);
    l.u.fixed_window.tz_min = 0;
    l.algo = LIMITS_SLIDING_WINDOW;
    l.u.sliding_window = (struct limits_sliding_window){ 4, 3600000, 60000 };
    it = item_of(&l);
    cr_assert(it.quota == 4 && it.window_s == 3600);
    l.algo = LIMITS_SLIDING_LOG;
    l.u.sliding_log = (struct limits_sliding_log){ 6, 1, 0 };
    it = item_of(&l);
    cr_assert(it.quota == 6 && it.window_s == 1);
    l.algo = LIMITS_SLIDING_COUNTER;
    l.u.sliding_counter = (struct limits_sliding_counter){ 7, 2500 };
    it = item_of(&l);
    cr_assert(it.quota == 7 && it.window_s == 3);
}

Test(ratelimit_headers, policy_lists_every_item_as_sf_strings)
{
    struct ratelimit_headers_item items[] = {
        { "org:*", 5, 0, 100, 60 },
        { "org:*:user:*", 12, 1, 10, 1 },
        { "org:*:user:*", 12, 2, 1000, 86400 },
        { "tb", 2, 0, 5, -1 },
    };
    struct buf b;

    buf_init(&b);
    cr_assert_eq(ratelimit_headers_policy(&b, items, 4), 0);
    expect_buf(&b, "\"org:*\";q=100;w=60, \"org:*:user:*#1\";q=10;w=1, "
                   "\"org:*:user:*#2\";q=1000;w=86400, \"tb\";q=5");
}

Test(ratelimit_headers, names_escape_quote_and_backslash_and_hide_bytes)
{
    struct ratelimit_headers_item it = { "a\"b\\c\x01\xff", 7, 0, 1, 1 };
    struct buf b;

    buf_init(&b);
    cr_assert_eq(ratelimit_headers_policy(&b, &it, 1), 0);
    expect_buf(&b, "\"a\\\"b\\\\c??\";q=1;w=1");
}

Test(ratelimit_headers, ratelimit_names_the_binding_item_seconds_rounded_up)
{
    struct ratelimit_headers_item it = { "user:*", 6, 0, 10, 60 };
    struct buf b;

    buf_init(&b);
    cr_assert_eq(ratelimit_headers_ratelimit(&b, &it, 3, 59 * S + 1), 0);
    expect_buf(&b, "\"user:*\";r=3;t=60");
    buf_init(&b);
    /* Nothing negative, nothing past 15 digits. */
    cr_assert_eq(ratelimit_headers_ratelimit(&b, &it, -2, -S), 0);
    expect_buf(&b, "\"user:*\";r=0;t=0");
    it.quota = INT64_C(9007199254740991);
    buf_init(&b);
    cr_assert_eq(ratelimit_headers_policy(&b, &it, 1), 0);
    expect_buf(&b, "\"user:*\";q=999999999999999;w=60");
}

Test(ratelimit_headers, retry_after_is_delay_seconds_rounded_up)
{
    struct buf b;

    buf_init(&b);
    cr_assert_eq(ratelimit_headers_retry_after(&b, 0), 0);
    expect_buf(&b, "0");
    buf_init(&b);
    cr_assert_eq(ratelimit_headers_retry_after(&b, 1), 0);
    expect_buf(&b, "1"); /* 1 ns: a retry now would be early */
    buf_init(&b);
    cr_assert_eq(ratelimit_headers_retry_after(&b, 2 * S), 0);
    expect_buf(&b, "2");
    buf_init(&b);
    cr_assert_eq(ratelimit_headers_retry_after(&b, 2 * S + RL_NS_PER_MS), 0);
    expect_buf(&b, "3");
    cr_assert_eq(ratelimit_headers_seconds(INT64_MAX), INT64_C(9223372037));
    cr_assert_eq(ratelimit_headers_seconds(-S), 0);
}
