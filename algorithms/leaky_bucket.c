/* Leaky bucket draining by whole drips (see leaky_bucket.h).
 *
 * Flow: the limiter builds the parameters from limits.yaml with
 * leaky_bucket_params_init(), reads the stored HASH (or nothing), and calls
 * leaky_bucket_decide() with the node's time; the result says what to reply
 * and whether to store `next`.
 *
 * Everything is a count of whole drips: the drain since ts_ns is
 * floor((now - ts_ns) / drip) * drip_size, and a wait is the time to the
 * k-th drip boundary, ts_ns + k * drip - now. Products that can overflow
 * (drips * drip_size, k * drip) are checked: a drain that overflows empties
 * the bucket, a wait that overflows saturates. */
#include "algorithms/leaky_bucket.h"

#include <string.h>

/* ---------------- Helpers ---------------- */

/* ceil(a / b) for a >= 0, b > 0. */
static int64_t lb_ceil_div(int64_t a, int64_t b)
{
    return a / b + (a % b != 0 ? 1 : 0);
}

/* The time from now until the k-th drip boundary after ts (k >= 1), that
 * is (ts - now) + k * drip, saturating at INT64_MAX. ts - now lies in
 * (-drip, 0] on time, and is positive when the clock is behind ts. */
static int64_t lb_wait(const struct leaky_bucket_params *p, int64_t ts,
                       int64_t now, int64_t k)
{
    int64_t span, w;

    if (__builtin_mul_overflow(k, p->drip_ns, &span) ||
        __builtin_add_overflow(ts - now, span, &w)) {
        return INT64_MAX;
    }
    return w;
}

/* ---------------- Parameters ---------------- */

int leaky_bucket_params_init(struct leaky_bucket_params *p, int64_t size,
                             int64_t drip_ms, int64_t drip_size,
                             const char **err)
{
    memset(p, 0, sizeof(*p));
    if (size < 1 || size > LEAKY_BUCKET_MAX_COUNT) {
        *err = LEAKY_BUCKET_ERR_SIZE;
        return LEAKY_BUCKET_EARGS;
    }
    if (drip_ms < 1 || drip_ms > LEAKY_BUCKET_MAX_DRIP_MS) {
        *err = LEAKY_BUCKET_ERR_DRIP_MS;
        return LEAKY_BUCKET_EARGS;
    }
    if (drip_size < 1 || drip_size > LEAKY_BUCKET_MAX_COUNT) {
        *err = LEAKY_BUCKET_ERR_DRIP_SIZE;
        return LEAKY_BUCKET_EARGS;
    }
    p->size = size;
    p->drip_ns = drip_ms * RL_NS_PER_MS; /* <= 3.2e17: fits */
    p->drip_size = drip_size;
    return LEAKY_BUCKET_OK;
}

/* The text for parameters that leaky_bucket_params_init() never makes, or
 * NULL when they are fine. */
static const char *lb_params_bad(const struct leaky_bucket_params *p)
{
    if (p->size < 1 || p->size > LEAKY_BUCKET_MAX_COUNT) {
        return LEAKY_BUCKET_ERR_SIZE;
    }
    if (p->drip_ns < RL_NS_PER_MS ||
        p->drip_ns > LEAKY_BUCKET_MAX_DRIP_MS * RL_NS_PER_MS) {
        return LEAKY_BUCKET_ERR_DRIP_MS;
    }
    if (p->drip_size < 1 || p->drip_size > LEAKY_BUCKET_MAX_COUNT) {
        return LEAKY_BUCKET_ERR_DRIP_SIZE;
    }
    return NULL;
}

/* ---------------- The decision ---------------- */

/* Drains *level by the whole drips that fell between *ts and now, moving
 * *ts to the last boundary. Nothing falls when now is behind *ts. */
static void lb_drain(const struct leaky_bucket_params *p, int64_t *level,
                     int64_t *ts, int64_t now)
{
    int64_t drips, drained;

    if (*level == 0 || now <= *ts) {
        return;
    }
    drips = (now - *ts) / p->drip_ns;
    if (drips == 0) {
        return;
    }
    if (__builtin_mul_overflow(drips, p->drip_size, &drained) ||
        drained >= *level) {
        *level = 0;
    } else {
        *level -= drained;
    }
    *ts += drips * p->drip_ns; /* <= now: no overflow */
}

int leaky_bucket_decide(const struct leaky_bucket_params *p,
                        const struct leaky_bucket_state *st, int64_t now_ns,
                        int64_t cost, struct leaky_bucket_result *out,
                        const char **err)
{
    return leaky_bucket_decide_wait(p, st, now_ns, cost, 0, out, err);
}

int leaky_bucket_decide_wait(const struct leaky_bucket_params *p,
                             const struct leaky_bucket_state *st,
                             int64_t now_ns, int64_t cost, int64_t wait_ns,
                             struct leaky_bucket_result *out, const char **err)
{
    const char *bad = lb_params_bad(p);
    int64_t level = 0, ts = now_ns;
    int reserved = 0;

    memset(out, 0, sizeof(*out));
    if (bad != NULL) {
        *err = bad;
        return LEAKY_BUCKET_EARGS;
    }
    if (now_ns < 0) {
        *err = LEAKY_BUCKET_ERR_TIME;
        return LEAKY_BUCKET_EARGS;
    }
    if (cost < 0) {
        *err = LEAKY_BUCKET_ERR_COST;
        return LEAKY_BUCKET_EARGS;
    }
    if (st != NULL && (st->level < 0 || st->ts_ns < 0)) {
        *err = LEAKY_BUCKET_ERR_STATE;
        return LEAKY_BUCKET_ESTATE;
    }

    if (st != NULL) {
        level = st->level;
        ts = st->ts_ns;
        lb_drain(p, &level, &ts, now_ns);
    }
    if (level == 0) {
        ts = now_ns; /* empty: no phase, the drip clock starts now */
    }

    out->d.limit = p->size;
    out->d.retry_after_ns = -RL_NS_PER_SEC;
    if (cost > p->size) {
        out->d.limited = 1;
    } else if (level <= p->size - cost) {
        level += cost;
    } else {
        /* Drips needed until level - k * drip_size <= size - cost. */
        int64_t k = lb_ceil_div(level - (p->size - cost), p->drip_size);

        out->d.limited = 1;
        out->d.retry_after_ns = lb_wait(p, ts, now_ns, k);
        if (wait_ns > 0 && out->d.retry_after_ns <= wait_ns) {
            /* A WAIT reservation: poured now (above the size, a debt the
             * drips pay by the time the request is due, at most 2^53 -
             * 1, what the twin stores), the reply held until then. */
            reserved = 1;
            level = cost >= LEAKY_BUCKET_MAX_COUNT - level
                        ? LEAKY_BUCKET_MAX_COUNT
                        : level + cost;
        }
    }
    out->d.remaining = level < p->size ? p->size - level : 0;
    out->d.reset_after_ns =
        level == 0 ? 0
                   : lb_wait(p, ts, now_ns, lb_ceil_div(level, p->drip_size));
    out->next.level = level;
    out->next.ts_ns = ts;
    if ((!out->d.limited || reserved) && cost > 0) {
        /* level >= 1, so the bucket empties on a boundary after now. */
        out->write = LEAKY_BUCKET_WRITE_SET;
        out->expiry_ms = rl_ceil_ms(out->d.reset_after_ns);
    }
    return LEAKY_BUCKET_OK;
}

/* ---------------- Adjust ---------------- */

int leaky_bucket_adjust(const struct leaky_bucket_params *p,
                        const struct leaky_bucket_state *st, int64_t now_ns,
                        int64_t delta, struct leaky_bucket_result *out,
                        const char **err)
{
    struct leaky_bucket_result cur, after;
    struct leaky_bucket_state s;
    int rc;

    /* A peek validates and drains to now: the adjustment applies to
     * that level. */
    rc = leaky_bucket_decide(p, st, now_ns, 0, &cur, err);
    if (rc != LEAKY_BUCKET_OK) {
        memset(out, 0, sizeof(*out));
        return rc;
    }
    if (delta < -LEAKY_BUCKET_MAX_COUNT || delta > LEAKY_BUCKET_MAX_COUNT) {
        memset(out, 0, sizeof(*out));
        *err = LEAKY_BUCKET_ERR_DELTA;
        return LEAKY_BUCKET_EARGS;
    }
    s = cur.next;
    if (delta == 0 || (delta < 0 && s.level == 0)) {
        rc = leaky_bucket_decide(p, st, now_ns, 1, out, err);
        out->write = LEAKY_BUCKET_WRITE_NONE;
        return rc;
    }
    if (delta > 0) {
        /* Poured without a refusal: the level may pass the size (a debt
         * the drips pay back), up to 2^53 - 1, what the twin stores. */
        s.level = delta >= LEAKY_BUCKET_MAX_COUNT - s.level
                      ? LEAKY_BUCKET_MAX_COUNT
                      : s.level + delta;
    } else {
        s.level = -delta >= s.level ? 0 : s.level + delta;
    }
    if (leaky_bucket_decide(p, &s, now_ns, 1, out, err) != LEAKY_BUCKET_OK ||
        leaky_bucket_decide(p, &s, now_ns, 0, &after, err) != LEAKY_BUCKET_OK) {
        return LEAKY_BUCKET_EARGS; /* not reached: s is a valid state */
    }
    /* Kept until empty, as a check keeps it (at least 1 ms: an emptied
     * bucket equals no key). */
    out->write = LEAKY_BUCKET_WRITE_SET;
    out->next = s;
    out->expiry_ms = rl_ceil_ms(after.d.reset_after_ns);
    if (out->expiry_ms < 1) {
        out->expiry_ms = 1;
    }
    return LEAKY_BUCKET_OK;
}
