/* Token bucket with lazy refill (see token_bucket.h).
 *
 * Flow: the limiter builds the parameters from limits.yaml with
 * token_bucket_params_init(), reads the stored HASH (or nothing), and calls
 * token_bucket_decide() with the node's time; the result says what to
 * reply and whether to store `next`.
 *
 * The level is exact fixed-point: tokens + frac / 1e15. Refill over e ns at
 * `rate` millionths of a token per second brings exactly e * rate units of
 * frac, so the arithmetic needs e * rate (up to 2^113) and deficit * 1e15
 * (up to 2^103). Those products are formed in 128 bits from 32-bit halves
 * and divided back by long division: no compiler extension, no wrap, no
 * rounding. Every other sum is checked and saturates. */
#include "algorithms/token_bucket.h"

#include <string.h>

/* ---------------- Parameters ---------------- */

int token_bucket_params_init(struct token_bucket_params *p, int64_t capacity,
                             int64_t refill_per_sec_micro, const char **err)
{
    memset(p, 0, sizeof(*p));
    if (capacity < 1 || capacity > TOKEN_BUCKET_MAX_CAPACITY) {
        *err = TOKEN_BUCKET_ERR_CAPACITY;
        return TOKEN_BUCKET_EARGS;
    }
    if (refill_per_sec_micro != TOKEN_BUCKET_RATE_INF &&
        (refill_per_sec_micro < 1 ||
         refill_per_sec_micro > TOKEN_BUCKET_MAX_RATE_MICRO)) {
        *err = TOKEN_BUCKET_ERR_RATE;
        return TOKEN_BUCKET_EARGS;
    }
    p->capacity = capacity;
    p->rate_micro = refill_per_sec_micro;
    p->unlimited = refill_per_sec_micro == TOKEN_BUCKET_RATE_INF;
    return TOKEN_BUCKET_OK;
}

int token_bucket_params_warmup(struct token_bucket_params *p, int64_t warmup_ms,
                               int64_t cold_factor, const char **err)
{
    int64_t w;

    if (cold_factor == 0) {
        cold_factor = TOKEN_BUCKET_COLD_DEFAULT;
    }
    if (warmup_ms < 1 || warmup_ms > TOKEN_BUCKET_MAX_WARMUP_MS) {
        *err = TOKEN_BUCKET_ERR_WARMUP;
        return TOKEN_BUCKET_EARGS;
    }
    if (cold_factor < 2 || cold_factor > TOKEN_BUCKET_MAX_COLD) {
        *err = TOKEN_BUCKET_ERR_COLD;
        return TOKEN_BUCKET_EARGS;
    }
    if (p->unlimited) {
        *err = TOKEN_BUCKET_ERR_WARM_INF;
        return TOKEN_BUCKET_EARGS;
    }
    /* W = warmup * rate in millionths of a token: ms * micro-tokens/s /
     * 1000. Its bounds keep max (< 1.5 W) and its products in range. */
    if (p->rate_micro > TOKEN_BUCKET_MAX_WARM_MICRO * 1000 / warmup_ms) {
        *err = TOKEN_BUCKET_ERR_WARM_SPAN;
        return TOKEN_BUCKET_EARGS;
    }
    w = warmup_ms * p->rate_micro / 1000;
    if (w < TOKEN_BUCKET_MICRO) {
        *err = TOKEN_BUCKET_ERR_WARM_SPAN;
        return TOKEN_BUCKET_EARGS;
    }
    p->warmup_ns = warmup_ms * RL_NS_PER_MS;
    p->cold_factor = cold_factor;
    p->thr = w / 2;
    p->span = 2 * w / (1 + cold_factor); /* >= 2e6 / 1001 */
    return TOKEN_BUCKET_OK;
}

/* True when *p could have come from token_bucket_params_init(). */
static int tb_params_ok(const struct token_bucket_params *p)
{
    if (p->capacity < 1 || p->capacity > TOKEN_BUCKET_MAX_CAPACITY) {
        return 0;
    }
    return p->unlimited ||
           (p->rate_micro >= 1 && p->rate_micro <= TOKEN_BUCKET_MAX_RATE_MICRO);
}

/* ---------------- Refill ---------------- */

/* Credits e > 0 ns of refill to the level *tok + *frac / 1e15 (capped at
 * capacity, where frac is 0). */
static void tb_refill(const struct token_bucket_params *p, int64_t *tok,
                      int64_t *frac, int64_t e)
{
    int64_t gained, rem;

    if (*tok >= p->capacity) {
        return;
    }
    gained =
        rl_muladd_div(e, p->rate_micro, *frac, TOKEN_BUCKET_FRAC_ONE, &rem);
    if (gained >= p->capacity - *tok) {
        *tok = p->capacity;
        *frac = 0;
    } else {
        *tok += gained;
        *frac = rem;
    }
}

/* The refill time, in ns, until the level tok + frac / 1e15 reaches n
 * whole tokens (n <= capacity): ceil(((n - tok) * 1e15 - frac) / rate),
 * written as floor(((n - tok - 1) * 1e15 + (1e15 - frac) + rate - 1) /
 * rate) so that every addend is non-negative. 0 when tok >= n. */
static int64_t tb_wait(const struct token_bucket_params *p, int64_t tok,
                       int64_t frac, int64_t n)
{
    int64_t rem;

    if (tok >= n) {
        return 0;
    }
    return rl_muladd_div(n - tok - 1, TOKEN_BUCKET_FRAC_ONE,
                         (TOKEN_BUCKET_FRAC_ONE - frac) + (p->rate_micro - 1),
                         p->rate_micro, &rem);
}

/* ---------------- Warm-up ---------------- */

/* Guava's maxPermits, in millionths of a token. */
static int64_t tb_max(const struct token_bucket_params *p)
{
    return p->thr + p->span;
}

/* The cold c after e > 0 ns of standing full: it grows with the time,
 * up to the warm-up (exactly: so idle time adds up the same whichever
 * decisions split it). */
static int64_t tb_cool(const struct token_bucket_params *p, int64_t c,
                       int64_t e)
{
    return e >= p->warmup_ns - c ? p->warmup_ns : c + e;
}

/* Guava's storedPermits of cold c: c * max / warmup, floored to 1e-6
 * token. */
static int64_t tb_permits(const struct token_bucket_params *p, int64_t c)
{
    return rl_muladd_div(c, tb_max(p), 0, p->warmup_ns, NULL);
}

/* What taking k millionths of a token from cold s costs beyond k: the
 * part of [s - k, s] above thr, under Guava's slope, floored to 1e-6
 * token: (f - 1) * len * (b + a - 2 thr) / (2 span), with [a, b] that
 * part. len * (f - 1) < 2^61 and the quotient is at most it. */
static int64_t tb_extra(const struct token_bucket_params *p, int64_t s,
                        int64_t k)
{
    int64_t a = s - k, len;

    if (s <= p->thr) {
        return 0;
    }
    if (a < p->thr) {
        a = p->thr;
    }
    len = s - a;
    return rl_muladd_div(len * (p->cold_factor - 1), s + a - 2 * p->thr, 0,
                         2 * p->span, NULL);
}

/* ---------------- The decision ---------------- */

int token_bucket_decide(const struct token_bucket_params *p,
                        const struct token_bucket_state *st, int64_t now_ns,
                        int64_t cost, struct token_bucket_result *out,
                        const char **err)
{
    return token_bucket_decide_wait(p, st, now_ns, cost, 0, out, err);
}

int token_bucket_decide_wait(const struct token_bucket_params *p,
                             const struct token_bucket_state *st,
                             int64_t now_ns, int64_t cost, int64_t wait_ns,
                             struct token_bucket_result *out, const char **err)
{
    int64_t tok, frac, ts, gap = 0, cold = 0, full_at, k, extra, retry = -1;

    memset(out, 0, sizeof(*out));
    if (!tb_params_ok(p)) {
        *err = p->capacity < 1 || p->capacity > TOKEN_BUCKET_MAX_CAPACITY
                   ? TOKEN_BUCKET_ERR_CAPACITY
                   : TOKEN_BUCKET_ERR_RATE;
        return TOKEN_BUCKET_EARGS;
    }
    if (now_ns < 0) {
        *err = TOKEN_BUCKET_ERR_TIME;
        return TOKEN_BUCKET_EARGS;
    }
    if (cost < 0) {
        *err = TOKEN_BUCKET_ERR_COST;
        return TOKEN_BUCKET_EARGS;
    }
    if (st != NULL &&
        (st->tokens < -TOKEN_BUCKET_MAX_CAPACITY || st->frac < 0 ||
         st->frac >= TOKEN_BUCKET_FRAC_ONE || st->ts_ns < 0 || st->cold < 0)) {
        *err = TOKEN_BUCKET_ERR_STATE;
        return TOKEN_BUCKET_ESTATE;
    }

    out->d.limit = p->capacity;
    out->d.retry_after_ns = -RL_NS_PER_SEC;
    if (p->unlimited) {
        out->d.remaining = p->capacity;
        out->next.tokens = p->capacity;
        out->next.ts_ns = now_ns;
        return TOKEN_BUCKET_OK;
    }

    if (st == NULL || st->tokens >= p->capacity) {
        /* A missing key, or a level above a lowered capacity: full. */
        tok = p->capacity;
        frac = 0;
        ts = st == NULL || st->ts_ns < now_ns ? now_ns : st->ts_ns;
    } else {
        tok = st->tokens;
        frac = st->frac;
        ts = st->ts_ns;
    }
    if (p->warmup_ns > 0) {
        /* The cold grows only while the bucket stands full: from the
         * instant the stored level reached capacity. */
        cold = st == NULL || st->cold > p->warmup_ns ? p->warmup_ns : st->cold;
        full_at = st == NULL ? now_ns
                  : st->tokens >= p->capacity
                      ? st->ts_ns
                      : rl_add_sat(ts, tb_wait(p, tok, frac, p->capacity));
        if (now_ns > full_at) {
            cold = tb_cool(p, cold, now_ns - full_at);
        }
    }
    if (now_ns >= ts) {
        if (now_ns > ts) {
            tb_refill(p, &tok, &frac, now_ns - ts);
        }
        ts = now_ns;
    } else {
        /* The clock is behind the credited time: no time has passed, and
         * refill resumes only once the clock reaches ts again. */
        gap = ts - now_ns;
    }

    if (cost <= p->capacity && tok < cost) {
        retry = rl_add_sat(gap, tb_wait(p, tok, frac, cost));
    }
    if (cost > p->capacity) {
        out->d.limited = 1;
    } else if (tok >= cost ||
               (wait_ns > 0 && retry <= wait_ns &&
                cost <= tok + (TOKEN_BUCKET_MAX_CAPACITY - p->capacity))) {
        if (tok < cost) {
            /* A WAIT reservation: the cost is taken now, a debt the
             * refill pays by the time the request is due, and the reply
             * says when that is. */
            out->d.limited = 1;
            out->d.retry_after_ns = retry;
        }
        tok -= cost;
        if (p->warmup_ns > 0 && cost > 0) {
            /* Take min(cost, permits) of the stored permits, pay their
             * slope too, and cool down by their time (rounded up). */
            int64_t s = tb_permits(p, cold);
            k = cost > s / TOKEN_BUCKET_MICRO ? s : cost * TOKEN_BUCKET_MICRO;
            extra = tb_extra(p, s, k);
            cold -=
                rl_muladd_div(k, p->warmup_ns, tb_max(p) - 1, tb_max(p), NULL);
            tok -= extra / TOKEN_BUCKET_MICRO;
            frac -= extra % TOKEN_BUCKET_MICRO *
                    (TOKEN_BUCKET_FRAC_ONE / TOKEN_BUCKET_MICRO);
            if (frac < 0) {
                frac += TOKEN_BUCKET_FRAC_ONE;
                tok--;
            }
        }
    } else {
        out->d.limited = 1;
        out->d.retry_after_ns = retry;
        retry = -1; /* refused: nothing taken */
    }
    out->d.remaining = tok < 0 ? 0 : tok;
    out->d.reset_after_ns =
        tok >= p->capacity
            ? 0
            : rl_add_sat(gap, tb_wait(p, tok, frac, p->capacity));
    out->next.tokens = tok;
    out->next.frac = frac;
    out->next.ts_ns = ts;
    out->next.cold = cold;
    if ((!out->d.limited || retry >= 0) && cost > 0) {
        /* tok < capacity now, so reset_after > 0 and the expiry >= 1 ms.
         * A warm-up key lasts until it is cold again too. */
        out->write = TOKEN_BUCKET_WRITE_SET;
        out->expiry_ms =
            rl_ceil_ms(p->warmup_ns > 0 ? rl_add_sat(out->d.reset_after_ns,
                                                     p->warmup_ns - cold)
                                        : out->d.reset_after_ns);
    }
    return TOKEN_BUCKET_OK;
}

/* ---------------- Adjust ---------------- */

int token_bucket_adjust(const struct token_bucket_params *p,
                        const struct token_bucket_state *st, int64_t now_ns,
                        int64_t delta, struct token_bucket_result *out,
                        const char **err)
{
    struct token_bucket_result cur, after;
    struct token_bucket_state s;
    int64_t floor, full;
    int rc;

    /* A peek validates and gives the level at now (refilled, and a warm
     * bucket's cold grown): the adjustment applies to that. */
    rc = token_bucket_decide(p, st, now_ns, 0, &cur, err);
    if (rc != TOKEN_BUCKET_OK) {
        memset(out, 0, sizeof(*out));
        return rc;
    }
    if (delta < -TOKEN_BUCKET_MAX_CAPACITY ||
        delta > TOKEN_BUCKET_MAX_CAPACITY) {
        memset(out, 0, sizeof(*out));
        *err = TOKEN_BUCKET_ERR_DELTA;
        return TOKEN_BUCKET_EARGS;
    }
    s = cur.next;
    if (p->unlimited || delta == 0 || (delta < 0 && s.tokens >= p->capacity)) {
        /* Nothing changes: an unlimited bucket keeps nothing, and a full
         * one has nothing to take back. */
        return token_bucket_decide(p, st, now_ns, 1, out, err) ==
                       TOKEN_BUCKET_OK
                   ? (out->write = TOKEN_BUCKET_WRITE_NONE, TOKEN_BUCKET_OK)
                   : TOKEN_BUCKET_EARGS;
    }
    if (delta > 0) {
        /* The work is done: the debt grows, at most to a full capacity
         * of 2^53 - 1 tokens below full, so every wait stays exact. */
        floor = p->capacity - TOKEN_BUCKET_MAX_CAPACITY;
        if (s.tokens - delta <= floor) {
            if (s.tokens > floor) {
                s.tokens = floor;
                s.frac = 0;
            }
        } else {
            s.tokens -= delta;
        }
    } else if (-delta >= p->capacity - s.tokens) {
        s.tokens = p->capacity; /* never beyond a fresh (full) bucket */
        s.frac = 0;
    } else {
        s.tokens -= delta;
    }
    if (token_bucket_decide(p, &s, now_ns, 1, out, err) != TOKEN_BUCKET_OK ||
        token_bucket_decide(p, &s, now_ns, 0, &after, err) != TOKEN_BUCKET_OK) {
        return TOKEN_BUCKET_EARGS; /* not reached: s is a valid state */
    }
    /* Kept as a check keeps it: until full again, and a warm bucket until
     * it is cold again too (at least 1 ms: a bucket given back to full
     * equals no key once its instant has passed). */
    out->write = TOKEN_BUCKET_WRITE_SET;
    out->next = s;
    /* A full bucket credited ahead of the clock differs from no key until
     * the clock reaches its ts (as a refund keeps it). */
    full = s.tokens < p->capacity ? after.d.reset_after_ns
           : s.ts_ns > now_ns     ? s.ts_ns - now_ns
                                  : 0;
    out->expiry_ms = rl_ceil_ms(
        p->warmup_ns > 0 ? rl_add_sat(full, p->warmup_ns - s.cold) : full);
    if (out->expiry_ms < 1) {
        out->expiry_ms = 1;
    }
    return TOKEN_BUCKET_OK;
}
