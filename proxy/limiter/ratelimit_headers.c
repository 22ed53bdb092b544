/* The IETF RateLimit header fields (see ratelimit_headers.h).
 *
 * Why this shape: a gateway copies the values as they are, so each is a
 * valid Structured Field on its own. The policy names are the rules of
 * limits.yaml because they are what an operator sees in LIMITER RULES and
 * INFO, stable over requests (the draft wants RateLimit-Policy to stay
 * the same from one response to the next), and say nothing of the
 * identity (the concrete path) that a client should not learn from a
 * header. Strings, not Tokens: a rule pattern holds `*` and `:`, which a
 * Token may not start with. Integers are clamped to the 15 digits an
 * sf-integer may have. */
#include "proxy/limiter/ratelimit_headers.h"

#include <stdio.h>

#include "algorithms/rl.h"
#include "conf/limits.h"

#define RATELIMIT_HEADERS_MS_PER_SEC INT64_C(1000)

/* ceil(ms / 1000), at least 1: a window is never 0 s. */
static int64_t ratelimit_headers_ms_to_s(int64_t ms)
{
    int64_t s = ms / RATELIMIT_HEADERS_MS_PER_SEC +
                (ms % RATELIMIT_HEADERS_MS_PER_SEC != 0 ? 1 : 0);
    return s < 1 ? 1 : s;
}

void ratelimit_headers_item_of(struct ratelimit_headers_item *it,
                               const struct limits_limit *l)
{
    int64_t rem = 0, ms;

    switch (l->algo) {
    case LIMITS_GCRA:
        /* (max_burst + 1) emission intervals of period / count. */
        ms = rl_muladd_div(l->u.gcra.max_burst + 1, l->u.gcra.period_ms, 0,
                           l->u.gcra.count, &rem);
        it->quota = l->u.gcra.max_burst + 1;
        it->window_s = ratelimit_headers_ms_to_s(ms + (rem != 0));
        return;
    case LIMITS_TOKEN_BUCKET:
        it->quota = l->u.token_bucket.capacity;
        if (l->u.token_bucket.refill_per_sec_micro == LIMITS_RATE_INF) {
            it->window_s = -1;
            return;
        }
        /* capacity / (micro / 1e6) s = capacity * 1e9 / micro ms. */
        ms = rl_muladd_div(l->u.token_bucket.capacity, INT64_C(1000000000), 0,
                           l->u.token_bucket.refill_per_sec_micro, &rem);
        it->window_s = ratelimit_headers_ms_to_s(ms + (rem != 0));
        return;
    case LIMITS_LEAKY_BUCKET:
        ms = rl_muladd_div(l->u.leaky_bucket.size, l->u.leaky_bucket.drip_ms, 0,
                           l->u.leaky_bucket.drip_size, &rem);
        it->quota = l->u.leaky_bucket.size;
        it->window_s = ratelimit_headers_ms_to_s(ms + (rem != 0));
        return;
    case LIMITS_FIXED_WINDOW:
        it->quota = l->u.fixed_window.max;
        /* A calendar window: a day or a week has one length; a month has
         * none (28 to 31 days), so it gets no `w` (RateLimit's `t` says
         * when the current one ends). */
        switch (l->u.fixed_window.window_ms) {
        case LIMITS_WINDOW_DAY:
            it->window_s = 86400;
            return;
        case LIMITS_WINDOW_WEEK:
            it->window_s = 7 * 86400;
            return;
        case LIMITS_WINDOW_MONTH:
            it->window_s = -1;
            return;
        default:
            break;
        }
        it->window_s = ratelimit_headers_ms_to_s(l->u.fixed_window.window_ms);
        return;
    case LIMITS_SLIDING_WINDOW:
        it->quota = l->u.sliding_window.max;
        it->window_s = ratelimit_headers_ms_to_s(l->u.sliding_window.window_ms);
        return;
    case LIMITS_SLIDING_LOG:
        it->quota = l->u.sliding_log.max;
        it->window_s = ratelimit_headers_ms_to_s(l->u.sliding_log.window_ms);
        return;
    case LIMITS_SLIDING_COUNTER:
        it->quota = l->u.sliding_counter.max;
        it->window_s =
            ratelimit_headers_ms_to_s(l->u.sliding_counter.window_ms);
        return;
    case LIMITS_CONCURRENCY:
        /* Slots in flight, not a budget per window: no `w`. */
        it->quota = l->u.concurrency.max;
        it->window_s = -1;
        return;
    }
    it->quota = 0;
    it->window_s = -1;
}

int64_t ratelimit_headers_seconds(int64_t ns)
{
    if (ns <= 0) {
        return 0;
    }
    return ns / RL_NS_PER_SEC + (ns % RL_NS_PER_SEC != 0 ? 1 : 0);
}

/* Appends ";<key>=<v>", v clamped to 0 .. the largest sf-integer. */
static int ratelimit_headers_param(struct buf *out, const char *key, int64_t v)
{
    char num[48];
    int n;

    if (v < 0) {
        v = 0;
    }
    if (v > RATELIMIT_HEADERS_MAX_INT) {
        v = RATELIMIT_HEADERS_MAX_INT;
    }
    n = snprintf(num, sizeof(num), ";%s=%lld", key, (long long)v);
    return buf_append(out, num, (size_t)n);
}

/* Appends the item's name as an sf-string. */
static int ratelimit_headers_name(struct buf *out,
                                  const struct ratelimit_headers_item *it)
{
    char suffix[16];
    size_t i;
    int n;

    if (buf_append(out, "\"", 1) != 0) {
        return -1;
    }
    for (i = 0; i < it->name_len; i++) {
        unsigned char ch = (unsigned char)it->name[i];
        if (ch == '"' || ch == '\\') {
            if (buf_append(out, "\\", 1) != 0) {
                return -1;
            }
        } else if (ch < 0x20 || ch > 0x7e) {
            ch = '?';
        }
        if (buf_append(out, &ch, 1) != 0) {
            return -1;
        }
    }
    if (it->nth > 0) {
        n = snprintf(suffix, sizeof(suffix), "#%u", it->nth);
        if (buf_append(out, suffix, (size_t)n) != 0) {
            return -1;
        }
    }
    return buf_append(out, "\"", 1);
}

int ratelimit_headers_policy(struct buf *out,
                             const struct ratelimit_headers_item *items,
                             unsigned n)
{
    unsigned i;

    for (i = 0; i < n; i++) {
        if ((i > 0 && buf_append(out, ", ", 2) != 0) ||
            ratelimit_headers_name(out, &items[i]) != 0 ||
            ratelimit_headers_param(out, "q", items[i].quota) != 0 ||
            (items[i].window_s >= 0 &&
             ratelimit_headers_param(out, "w", items[i].window_s) != 0)) {
            return -1;
        }
    }
    return 0;
}

int ratelimit_headers_ratelimit(struct buf *out,
                                const struct ratelimit_headers_item *bind,
                                int64_t remaining, int64_t reset_ns)
{
    if (ratelimit_headers_name(out, bind) != 0 ||
        ratelimit_headers_param(out, "r", remaining) != 0 ||
        ratelimit_headers_param(out, "t",
                                ratelimit_headers_seconds(reset_ns)) != 0) {
        return -1;
    }
    return 0;
}

int ratelimit_headers_retry_after(struct buf *out, int64_t ns)
{
    char num[32];
    int n = snprintf(num, sizeof(num), "%lld",
                     (long long)ratelimit_headers_seconds(ns));

    return buf_append(out, num, (size_t)n);
}
