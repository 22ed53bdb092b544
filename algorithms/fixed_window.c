/* Fixed window counter aligned to the epoch (see fixed_window.h).
 *
 * Flow: the limiter builds the parameters from limits.yaml with
 * fixed_window_params_init(), reads the stored HASH (or nothing), and calls
 * fixed_window_decide() with the node's time; the result says what to
 * reply and whether to store `next`.
 *
 * Durations are computed relative to now, (start - now) + window, so a
 * window that ends after INT64_MAX ns saturates instead of overflowing. */
#include "algorithms/fixed_window.h"

#include <string.h>

int fixed_window_params_init(struct fixed_window_params *p, int64_t max,
                             int64_t window_ms, const char **err)
{
    memset(p, 0, sizeof(*p));
    if (max < 1 || max > FIXED_WINDOW_MAX_COUNT) {
        *err = FIXED_WINDOW_ERR_MAX;
        return FIXED_WINDOW_EARGS;
    }
    if (window_ms < 1 || window_ms > FIXED_WINDOW_MAX_WINDOW_MS) {
        *err = FIXED_WINDOW_ERR_WINDOW;
        return FIXED_WINDOW_EARGS;
    }
    p->max = max;
    p->window_ns = window_ms * RL_NS_PER_MS; /* <= 3.2e17: fits */
    return FIXED_WINDOW_OK;
}

/* The text for parameters that fixed_window_params_init() never makes, or
 * NULL when they are fine. */
static const char *fw_params_bad(const struct fixed_window_params *p)
{
    if (p->max < 1 || p->max > FIXED_WINDOW_MAX_COUNT) {
        return FIXED_WINDOW_ERR_MAX;
    }
    if (p->window_ns < RL_NS_PER_MS ||
        p->window_ns > FIXED_WINDOW_MAX_WINDOW_MS * RL_NS_PER_MS) {
        return FIXED_WINDOW_ERR_WINDOW;
    }
    return NULL;
}

int fixed_window_decide(const struct fixed_window_params *p,
                        const struct fixed_window_state *st, int64_t now_ns,
                        int64_t cost, struct fixed_window_result *out,
                        const char **err)
{
    const char *bad = fw_params_bad(p);
    int64_t start, count = 0, until_end;

    memset(out, 0, sizeof(*out));
    if (bad != NULL) {
        *err = bad;
        return FIXED_WINDOW_EARGS;
    }
    if (now_ns < 0) {
        *err = FIXED_WINDOW_ERR_TIME;
        return FIXED_WINDOW_EARGS;
    }
    if (cost < 0) {
        *err = FIXED_WINDOW_ERR_COST;
        return FIXED_WINDOW_EARGS;
    }
    if (st != NULL && (st->start_ns < 0 || st->count < 0)) {
        *err = FIXED_WINDOW_ERR_STATE;
        return FIXED_WINDOW_ESTATE;
    }

    start = now_ns - now_ns % p->window_ns;
    if (st != NULL && st->start_ns >= start) {
        /* The current window, or a later one when the clock is behind. */
        start = st->start_ns;
        count = st->count;
    }
    /* start - now > -window, so only a far-future start can saturate. */
    if (__builtin_add_overflow(start - now_ns, p->window_ns, &until_end)) {
        until_end = INT64_MAX;
    }

    out->d.limit = p->max;
    out->d.retry_after_ns = -RL_NS_PER_SEC;
    if (cost > p->max) {
        out->d.limited = 1;
    } else if (count <= p->max - cost) {
        count += cost;
    } else {
        out->d.limited = 1;
        out->d.retry_after_ns = until_end;
    }
    out->d.remaining = count < p->max ? p->max - count : 0;
    out->d.reset_after_ns = count > 0 ? until_end : 0;
    out->next.start_ns = start;
    out->next.count = count;
    if (!out->d.limited && cost > 0) {
        out->write = FIXED_WINDOW_WRITE_SET;
        out->expiry_ms = rl_ceil_ms(until_end);
    }
    return FIXED_WINDOW_OK;
}
