/* Sliding window counter: the current window plus the weighted previous
 * one (see sliding_counter.h).
 *
 * Flow: the limiter builds the parameters from limits.yaml with
 * sliding_counter_params_init(), reads the stored HASH (or nothing), and
 * calls sliding_counter_decide() with the node's time; the result says
 * what to reply and whether to store `next`.
 *
 * The weight prev * rem / window needs a product of up to 2^53 * 2^58. It
 * is formed in 128 bits from 32-bit halves and divided back by long
 * division, so the test against max is exact with no compiler extension.
 * Durations are computed relative to now and saturate. */
#include "algorithms/sliding_counter.h"

#include <string.h>

/* ---------------- Parameters ---------------- */

int sliding_counter_params_init(struct sliding_counter_params *p, int64_t max,
                                int64_t window_ms, const char **err)
{
    memset(p, 0, sizeof(*p));
    if (max < 1 || max > SLIDING_COUNTER_MAX_COUNT) {
        *err = SLIDING_COUNTER_ERR_MAX;
        return SLIDING_COUNTER_EARGS;
    }
    if (window_ms < 1 || window_ms > SLIDING_COUNTER_MAX_WINDOW_MS) {
        *err = SLIDING_COUNTER_ERR_WINDOW;
        return SLIDING_COUNTER_EARGS;
    }
    p->max = max;
    p->window_ns = window_ms * RL_NS_PER_MS; /* <= 3.2e17: fits */
    return SLIDING_COUNTER_OK;
}

/* The text for parameters that sliding_counter_params_init() never makes,
 * or NULL when they are fine. */
static const char *sc_params_bad(const struct sliding_counter_params *p)
{
    if (p->max < 1 || p->max > SLIDING_COUNTER_MAX_COUNT) {
        return SLIDING_COUNTER_ERR_MAX;
    }
    if (p->window_ns < RL_NS_PER_MS ||
        p->window_ns > SLIDING_COUNTER_MAX_WINDOW_MS * RL_NS_PER_MS) {
        return SLIDING_COUNTER_ERR_WINDOW;
    }
    return NULL;
}

/* ---------------- The decision ---------------- */

/* The least wait after which a request of `cost` (<= max) passes, for a
 * refused one: count c, previous prev, until_end ns to the end of the
 * effective window. Phase 1, this window: prev fades, and the request fits
 * once prev * rem <= (max - cost - c) * window, i.e. rem <= F. Phase 2,
 * the next window: c has become prev and fades the same way. */
static int64_t sc_retry(const struct sliding_counter_params *p, int64_t c,
                        int64_t prev, int64_t until_end, int64_t cost)
{
    int64_t w = p->window_ns;
    int64_t room1 = (p->max - cost) - c; /* >= -INT64_MAX: no overflow */
    int64_t room2 = p->max - cost;       /* >= 0 */
    int64_t f;

    if (room1 >= 0 && prev > 0) {
        /* Refused means prev * rem > room1 * w, so f < rem <= until_end. */
        f = rl_muladd_div(room1, w, 0, prev, NULL);
        if (f >= 1 && f < until_end) {
            return until_end - f;
        }
    }
    f = c == 0 ? w : rl_muladd_div(room2, w, 0, c, NULL);
    if (f > w) {
        f = w;
    }
    return rl_add_sat(until_end, w - f);
}

/* Rolls the stored state over to the window of now: sets *start, *c and
 * *prev. A stored window after the current one stays (the clock is
 * behind). */
static void sc_roll(const struct sliding_counter_params *p,
                    const struct sliding_counter_state *st, int64_t now,
                    int64_t *start, int64_t *c, int64_t *prev)
{
    *start = now - now % p->window_ns;
    *c = 0;
    *prev = 0;
    if (st == NULL) {
        return;
    }
    if (st->start_ns >= *start) {
        *start = st->start_ns;
        *c = st->count;
        *prev = st->prev;
    } else if (st->start_ns >= *start - p->window_ns) {
        *prev = st->count;
    }
}

int sliding_counter_decide(const struct sliding_counter_params *p,
                           const struct sliding_counter_state *st,
                           int64_t now_ns, int64_t cost,
                           struct sliding_counter_result *out, const char **err)
{
    const char *bad = sc_params_bad(p);
    int64_t w = p->window_ns;
    int64_t start, c, prev, until_end, rem, weighted = 0, est;

    memset(out, 0, sizeof(*out));
    if (bad != NULL) {
        *err = bad;
        return SLIDING_COUNTER_EARGS;
    }
    if (now_ns < 0) {
        *err = SLIDING_COUNTER_ERR_TIME;
        return SLIDING_COUNTER_EARGS;
    }
    if (cost < 0) {
        *err = SLIDING_COUNTER_ERR_COST;
        return SLIDING_COUNTER_EARGS;
    }
    if (st != NULL && (st->start_ns < 0 || st->count < 0 || st->prev < 0)) {
        *err = SLIDING_COUNTER_ERR_STATE;
        return SLIDING_COUNTER_ESTATE;
    }

    sc_roll(p, st, now_ns, &start, &c, &prev);
    /* start - now > -w, so only a far-future start can saturate. */
    until_end = rl_add_sat(start - now_ns, w);
    rem = until_end < w ? until_end : w;
    if (prev > 0) {
        weighted = rl_muladd_div(prev, rem, w - 1, w, NULL); /* <= prev */
    }
    if (__builtin_add_overflow(c, weighted, &est)) {
        *err = SLIDING_COUNTER_ERR_STATE;
        return SLIDING_COUNTER_ESTATE;
    }

    out->d.limit = p->max;
    out->d.retry_after_ns = -RL_NS_PER_SEC;
    if (cost > p->max) {
        out->d.limited = 1;
    } else if (est <= p->max - cost) {
        c += cost;
        est += cost;
    } else {
        out->d.limited = 1;
        out->d.retry_after_ns = sc_retry(p, c, prev, until_end, cost);
    }
    out->d.remaining = est < p->max ? p->max - est : 0;
    if (c > 0) {
        out->d.reset_after_ns = rl_add_sat(until_end, w);
    } else if (prev > 0) {
        out->d.reset_after_ns = until_end;
    }
    out->next.start_ns = start;
    out->next.count = c;
    out->next.prev = prev;
    out->weighted = weighted;
    if (!out->d.limited && cost > 0) {
        out->write = SLIDING_COUNTER_WRITE_SET;
        out->expiry_ms = rl_ceil_ms(out->d.reset_after_ns);
    }
    return SLIDING_COUNTER_OK;
}

int sliding_counter_adjust(const struct sliding_counter_params *p,
                           const struct sliding_counter_state *st,
                           int64_t now_ns, int64_t delta,
                           struct sliding_counter_result *out, const char **err)
{
    struct sliding_counter_state next;
    struct sliding_counter_result peek;
    int rc = sliding_counter_decide(p, st, now_ns, 0, &peek, err);
    int64_t count, until_end;

    if (rc != SLIDING_COUNTER_OK) {
        memset(out, 0, sizeof(*out));
        return rc;
    }
    next = peek.next; /* rolled to the effective window */
    count = next.count;
    if (delta > 0) {
        count = count > SLIDING_COUNTER_MAX_COUNT - delta
                    ? SLIDING_COUNTER_MAX_COUNT
                    : count + delta;
        if (count < next.count) {
            count = next.count; /* a count already past the cap stays */
        }
    } else if (delta < 0) {
        count = count > -delta ? count + delta : 0;
    }
    if (count == next.count) {
        rc = sliding_counter_decide(p, st, now_ns, 1, out, err);
        out->write = SLIDING_COUNTER_WRITE_NONE;
        out->expiry_ms = 0;
        return rc;
    }
    next.count = count;
    rc = sliding_counter_decide(p, &next, now_ns, 1, out, err);
    if (rc != SLIDING_COUNTER_OK) {
        return rc;
    }
    until_end = rl_add_sat(next.start_ns - now_ns, p->window_ns);
    out->write = SLIDING_COUNTER_WRITE_SET;
    out->next = next;
    out->expiry_ms =
        rl_ceil_ms(count > 0 ? rl_add_sat(until_end, p->window_ns) : until_end);
    return SLIDING_COUNTER_OK;
}
