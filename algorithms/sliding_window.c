/* Sliding window of time slots (see sliding_window.h).
 *
 * Flow: the limiter builds the parameters from limits.yaml with
 * sliding_window_params_init(), reads the stored HASH into an array of
 * slots (any order), and calls sliding_window_decide() with the node's
 * time and an output array of nslots entries; the result says what to
 * reply and whether to store the new slots.
 *
 * The N live slots are consecutive slot numbers base .. base + N - 1, so
 * the output array is first used densely, indexed by k - base: that drops,
 * merges and sorts any input in O(n + N) with no allocation. It is then
 * compacted in place to the non-empty slots, oldest first. */
#include "algorithms/sliding_window.h"

#include <string.h>

/* ---------------- Helpers ---------------- */

/* The time from now until slot k leaves the window, (k * res - now) +
 * window, saturating at INT64_MAX. k * res never exceeds a start or a time
 * it was computed from, so only the last addition can overflow. */
static int64_t sw_until_expired(const struct sliding_window_params *p,
                                int64_t k, int64_t now)
{
    int64_t w;

    if (__builtin_add_overflow(k * p->resolution_ns - now, p->window_ns, &w)) {
        return INT64_MAX;
    }
    return w;
}

/* ---------------- Parameters ---------------- */

int sliding_window_params_init(struct sliding_window_params *p, int64_t max,
                               int64_t window_ms, int64_t resolution_ms,
                               const char **err)
{
    memset(p, 0, sizeof(*p));
    if (max < 1 || max > SLIDING_WINDOW_MAX_COUNT) {
        *err = SLIDING_WINDOW_ERR_MAX;
        return SLIDING_WINDOW_EARGS;
    }
    if (window_ms < 1 || window_ms > SLIDING_WINDOW_MAX_WINDOW_MS) {
        *err = SLIDING_WINDOW_ERR_WINDOW;
        return SLIDING_WINDOW_EARGS;
    }
    if (resolution_ms < 1 || window_ms % resolution_ms != 0) {
        *err = SLIDING_WINDOW_ERR_RESOLUTION;
        return SLIDING_WINDOW_EARGS;
    }
    if (window_ms / resolution_ms > SLIDING_WINDOW_MAX_SLOTS) {
        *err = SLIDING_WINDOW_ERR_SLOTS;
        return SLIDING_WINDOW_EARGS;
    }
    p->max = max;
    p->window_ns = window_ms * RL_NS_PER_MS; /* <= 3.2e17: fits */
    p->resolution_ns = resolution_ms * RL_NS_PER_MS;
    p->nslots = window_ms / resolution_ms;
    return SLIDING_WINDOW_OK;
}

/* The text for parameters that sliding_window_params_init() never makes,
 * or NULL when they are fine. */
static const char *sw_params_bad(const struct sliding_window_params *p)
{
    if (p->max < 1 || p->max > SLIDING_WINDOW_MAX_COUNT) {
        return SLIDING_WINDOW_ERR_MAX;
    }
    if (p->window_ns < RL_NS_PER_MS ||
        p->window_ns > SLIDING_WINDOW_MAX_WINDOW_MS * RL_NS_PER_MS) {
        return SLIDING_WINDOW_ERR_WINDOW;
    }
    if (p->resolution_ns < RL_NS_PER_MS ||
        p->window_ns % p->resolution_ns != 0) {
        return SLIDING_WINDOW_ERR_RESOLUTION;
    }
    if (p->nslots != p->window_ns / p->resolution_ns ||
        p->nslots > SLIDING_WINDOW_MAX_SLOTS) {
        return SLIDING_WINDOW_ERR_SLOTS;
    }
    return NULL;
}

/* ---------------- The decision ---------------- */

/* Checks the stored slots and finds the effective slot number: the later
 * of now's slot and the newest non-empty stored slot. */
static int sw_scan(const struct sliding_window_params *p,
                   const struct sliding_window_slot *slots, size_t n,
                   int64_t now, int64_t *k_eff)
{
    *k_eff = now / p->resolution_ns;
    for (size_t i = 0; i < n; i++) {
        int64_t k = slots[i].start_ns / p->resolution_ns;

        if (slots[i].start_ns < 0 || slots[i].count < 0) {
            return SLIDING_WINDOW_ESTATE;
        }
        if (slots[i].count > 0 && k > *k_eff) {
            *k_eff = k;
        }
    }
    return SLIDING_WINDOW_OK;
}

/* Fills next[0 .. N) densely with the live counts (slot base + i at index
 * i) and sums them into *total. ESTATE when a sum overflows. */
static int sw_fill(const struct sliding_window_params *p,
                   const struct sliding_window_slot *slots, size_t n,
                   int64_t base, struct sliding_window_slot *next,
                   int64_t *total)
{
    *total = 0;
    for (int64_t i = 0; i < p->nslots; i++) {
        next[i].start_ns = 0;
        next[i].count = 0;
    }
    for (size_t i = 0; i < n; i++) {
        int64_t k = slots[i].start_ns / p->resolution_ns;
        struct sliding_window_slot *s;

        if (slots[i].count == 0 || k < base) {
            continue; /* empty, or out of the window */
        }
        s = &next[k - base]; /* k <= k_eff = base + N - 1 */
        if (__builtin_add_overflow(s->count, slots[i].count, &s->count) ||
            __builtin_add_overflow(*total, slots[i].count, total)) {
            return SLIDING_WINDOW_ESTATE;
        }
    }
    return SLIDING_WINDOW_OK;
}

/* For a refused request of `cost` <= max: the time until the oldest slots
 * whose counts free enough room have left the window. The newest slot
 * frees everything, so the walk always ends. */
static int64_t sw_retry(const struct sliding_window_params *p,
                        const struct sliding_window_slot *dense, int64_t base,
                        int64_t total, int64_t now, int64_t cost)
{
    int64_t left = total;

    for (int64_t i = 0; i < p->nslots; i++) {
        left -= dense[i].count;
        if (dense[i].count > 0 && left <= p->max - cost) {
            return sw_until_expired(p, base + i, now);
        }
    }
    return sw_until_expired(p, base + p->nslots - 1, now); /* not reached */
}

/* The checks and the dense fill both calls start with: next[0 .. N)
 * holds the live counts of slots base .. base + N - 1 (the last is the
 * effective slot), *total their sum. cost_ok says whether the caller's
 * cost or delta is in range (else `cost_err`). */
static int sw_load(const struct sliding_window_params *p,
                   const struct sliding_window_slot *slots, size_t n,
                   int64_t now_ns, int cost_ok, const char *cost_err,
                   struct sliding_window_slot *next, size_t next_cap,
                   int64_t *base, int64_t *total, const char **err)
{
    const char *bad = sw_params_bad(p);
    int64_t k_eff;

    if (bad != NULL) {
        *err = bad;
        return SLIDING_WINDOW_EARGS;
    }
    if (now_ns < 0 || !cost_ok || next == NULL ||
        next_cap < (size_t)p->nslots) {
        *err = now_ns < 0 ? SLIDING_WINDOW_ERR_TIME
               : !cost_ok ? cost_err
                          : SLIDING_WINDOW_ERR_BUFFER;
        return SLIDING_WINDOW_EARGS;
    }
    if (sw_scan(p, slots, n, now_ns, &k_eff) != SLIDING_WINDOW_OK) {
        *err = SLIDING_WINDOW_ERR_STATE;
        return SLIDING_WINDOW_ESTATE;
    }
    *base = k_eff - (p->nslots - 1);
    if (sw_fill(p, slots, n, *base, next, total) != SLIDING_WINDOW_OK) {
        *err = SLIDING_WINDOW_ERR_STATE;
        return SLIDING_WINDOW_ESTATE;
    }
    return SLIDING_WINDOW_OK;
}

/* Compacts the dense next[0 .. N) (slot base + i at i) in place to its
 * non-empty slots, oldest first (j <= i); returns how many. */
static size_t sw_compact(const struct sliding_window_params *p,
                         struct sliding_window_slot *next, int64_t base)
{
    size_t j = 0;

    for (int64_t i = 0; i < p->nslots; i++) {
        if (next[i].count > 0) {
            next[j].start_ns = (base + i) * p->resolution_ns;
            next[j].count = next[i].count;
            j++;
        }
    }
    return j;
}

int sliding_window_decide(const struct sliding_window_params *p,
                          const struct sliding_window_slot *slots, size_t n,
                          int64_t now_ns, int64_t cost,
                          struct sliding_window_slot *next, size_t next_cap,
                          struct sliding_window_result *out, const char **err)
{
    int64_t base, total;
    size_t j;
    int rc;

    memset(out, 0, sizeof(*out));
    rc = sw_load(p, slots, n, now_ns, cost >= 0, SLIDING_WINDOW_ERR_COST, next,
                 next_cap, &base, &total, err);
    if (rc != SLIDING_WINDOW_OK) {
        return rc;
    }

    out->d.limit = p->max;
    out->d.retry_after_ns = -RL_NS_PER_SEC;
    if (cost > p->max) {
        out->d.limited = 1;
    } else if (total <= p->max - cost) {
        next[p->nslots - 1].count += cost; /* the effective slot, k_eff */
        total += cost;
    } else {
        out->d.limited = 1;
        out->d.retry_after_ns = sw_retry(p, next, base, total, now_ns, cost);
    }

    j = sw_compact(p, next, base);
    out->next_n = j;
    out->total = total;
    out->d.remaining = total < p->max ? p->max - total : 0;
    if (j > 0) {
        out->d.reset_after_ns = sw_until_expired(
            p, next[j - 1].start_ns / p->resolution_ns, now_ns);
    }
    if (!out->d.limited && cost > 0) {
        out->write = SLIDING_WINDOW_WRITE_SET;
        out->expiry_ms = rl_ceil_ms(out->d.reset_after_ns);
    }
    return SLIDING_WINDOW_OK;
}

/* ---------------- ADJUST ---------------- */

/* What sliding_window_decide() with cost 1 answers on the compacted slots
 * s[0 .. j) (oldest first, each count > 0, summing to total) at now, into
 * *d; it never writes, so no second array is needed. The effective slot
 * is recomputed: a give-back may have emptied a slot from the future. */
static void sw_peek_one(const struct sliding_window_params *p,
                        const struct sliding_window_slot *s, size_t j,
                        int64_t total, int64_t now, struct rl_decision *d)
{
    int64_t k_eff = now / p->resolution_ns;

    memset(d, 0, sizeof(*d));
    d->limit = p->max;
    d->retry_after_ns = -RL_NS_PER_SEC;
    if (j > 0 && s[j - 1].start_ns / p->resolution_ns > k_eff) {
        k_eff = s[j - 1].start_ns / p->resolution_ns;
    }
    if (total <= p->max - 1) {
        /* Admitted: counted in the effective slot, the newest then. */
        d->remaining = p->max - total - 1;
        d->reset_after_ns = sw_until_expired(p, k_eff, now);
        return;
    }
    d->limited = 1;
    if (j > 0) {
        int64_t left = total;

        d->reset_after_ns =
            sw_until_expired(p, s[j - 1].start_ns / p->resolution_ns, now);
        for (size_t i = 0; i < j; i++) {
            left -= s[i].count;
            if (left <= p->max - 1) {
                d->retry_after_ns =
                    sw_until_expired(p, s[i].start_ns / p->resolution_ns, now);
                break;
            }
        }
    }
}

int sliding_window_adjust(const struct sliding_window_params *p,
                          const struct sliding_window_slot *slots, size_t n,
                          int64_t now_ns, int64_t delta,
                          struct sliding_window_slot *next, size_t next_cap,
                          struct sliding_window_result *out, const char **err)
{
    int64_t base, total, moved = 0;
    size_t j;
    int rc;

    memset(out, 0, sizeof(*out));
    rc = sw_load(p, slots, n, now_ns,
                 delta >= -SLIDING_WINDOW_MAX_COUNT &&
                     delta <= SLIDING_WINDOW_MAX_COUNT,
                 SLIDING_WINDOW_ERR_DELTA, next, next_cap, &base, &total, err);
    if (rc != SLIDING_WINDOW_OK) {
        return rc;
    }

    if (delta > 0) {
        /* Debt allowed, up to the largest total the twin can store. */
        moved = total < SLIDING_WINDOW_MAX_COUNT
                    ? (delta < SLIDING_WINDOW_MAX_COUNT - total
                           ? delta
                           : SLIDING_WINDOW_MAX_COUNT - total)
                    : 0;
        next[p->nslots - 1].count += moved; /* the effective slot */
        total += moved;
    } else if (delta < 0) {
        /* Newest first: what was counted last is given back first. */
        int64_t want = -delta;

        for (int64_t i = p->nslots - 1; i >= 0 && want > 0; i--) {
            int64_t x = next[i].count < want ? next[i].count : want;

            next[i].count -= x;
            want -= x;
            moved += x;
        }
        total -= moved;
    }

    j = sw_compact(p, next, base);
    out->next_n = j;
    out->total = total;
    sw_peek_one(p, next, j, total, now_ns, &out->d);
    if (moved == 0) {
        return SLIDING_WINDOW_OK; /* nothing changed: write NONE */
    }
    if (j == 0) {
        out->write = SLIDING_WINDOW_WRITE_DEL;
        return SLIDING_WINDOW_OK;
    }
    out->write = SLIDING_WINDOW_WRITE_SET;
    out->expiry_ms = rl_ceil_ms(
        sw_until_expired(p, next[j - 1].start_ns / p->resolution_ns, now_ns));
    return SLIDING_WINDOW_OK;
}
