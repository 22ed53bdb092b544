/* Sliding log of timestamps that also logs refused attempts (see
 * sliding_log.h).
 *
 * Flow: the limiter builds the parameters from limits.yaml with
 * sliding_log_params_init(), reads the ZSET into a sorted array of ns, and
 * calls sliding_log_decide() with the node's time and an output array of
 * max entries; the result says what to reply and whether to store the new
 * log.
 *
 * The log is sorted, so the live part and the horizon are found by binary
 * search, and the new log is built from its newest end: entries from the
 * future first, then this request's entries at now, then the older ones,
 * until `max` are taken. The reply after the decision is computed on the
 * log as the store will hold it, so retry_after accounts for the entries a
 * refused attempt has just logged. */
#include "algorithms/sliding_log.h"

#include <string.h>

/* ---------------- Helpers ---------------- */

/* (t - now) + d for t, now >= 0 and d >= 0, saturating at INT64_MAX. */
static int64_t sl_until(int64_t t, int64_t now, int64_t d)
{
    int64_t w;

    if (__builtin_add_overflow(t - now, d, &w)) {
        return INT64_MAX;
    }
    return w;
}

/* The first index i of the sorted e[0 .. n) with e[i] > x (n if none). */
static size_t sl_after(const int64_t *e, size_t n, int64_t x)
{
    size_t lo = 0, hi = n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (e[mid] > x) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    return lo;
}

/* ---------------- Parameters ---------------- */

int sliding_log_params_init(struct sliding_log_params *p, int64_t max,
                            int64_t window_ms, int64_t min_interval_ms,
                            const char **err)
{
    memset(p, 0, sizeof(*p));
    if (max < 1 || max > SLIDING_LOG_MAX_ENTRIES) {
        *err = SLIDING_LOG_ERR_MAX;
        return SLIDING_LOG_EARGS;
    }
    if (window_ms < 1 || window_ms > SLIDING_LOG_MAX_DURATION_MS) {
        *err = SLIDING_LOG_ERR_WINDOW;
        return SLIDING_LOG_EARGS;
    }
    if (min_interval_ms < 0 || min_interval_ms > SLIDING_LOG_MAX_DURATION_MS) {
        *err = SLIDING_LOG_ERR_INTERVAL;
        return SLIDING_LOG_EARGS;
    }
    p->max = max;
    p->window_ns = window_ms * RL_NS_PER_MS; /* <= 3.2e17: fits */
    p->min_interval_ns = min_interval_ms * RL_NS_PER_MS;
    p->horizon_ns =
        p->window_ns > p->min_interval_ns ? p->window_ns : p->min_interval_ns;
    return SLIDING_LOG_OK;
}

/* The text for parameters that sliding_log_params_init() never makes, or
 * NULL when they are fine. */
static const char *sl_params_bad(const struct sliding_log_params *p)
{
    const int64_t most = SLIDING_LOG_MAX_DURATION_MS * RL_NS_PER_MS;

    if (p->max < 1 || p->max > SLIDING_LOG_MAX_ENTRIES) {
        return SLIDING_LOG_ERR_MAX;
    }
    if (p->window_ns < RL_NS_PER_MS || p->window_ns > most) {
        return SLIDING_LOG_ERR_WINDOW;
    }
    if (p->min_interval_ns < 0 || p->min_interval_ns > most ||
        p->horizon_ns < p->window_ns || p->horizon_ns < p->min_interval_ns ||
        p->horizon_ns > most) {
        return SLIDING_LOG_ERR_INTERVAL;
    }
    return NULL;
}

/* ---------------- The decision ---------------- */

/* Writes the newest `size` entries of log[lo .. n) merged with `add`
 * copies of now into next[0 .. size), sorted: entries after now are newer
 * than the added ones, the others older. size <= (n - lo) + add. */
static void sl_merge(const int64_t *log, size_t lo, size_t n, int64_t now,
                     int64_t add, int64_t *next, size_t size)
{
    size_t i = n, j = size;

    while (j > 0) {
        if (i > lo && log[i - 1] > now) {
            next[--j] = log[--i];
        } else if (add > 0) {
            next[--j] = now;
            add--;
        } else {
            next[--j] = log[--i];
        }
    }
}

/* The retry of a refused request of `cost` (<= max) against the sorted log
 * e[0 .. m) the store holds after the decision: the later of the
 * min_interval wait (requests only, not peeks) and the time until at most
 * max - cost entries are live. */
static int64_t sl_retry(const struct sliding_log_params *p, const int64_t *e,
                        size_t m, int64_t now, int64_t cost)
{
    size_t live = m - sl_after(e, m, now - p->window_ns);
    size_t room = (size_t)(p->max - cost);
    int64_t t = 0, tb;

    if (cost > 0 && p->min_interval_ns > 0 && m > 0) {
        t = sl_until(e[m - 1], now, p->min_interval_ns);
    }
    if (live > room) {
        /* The (live - room)-th oldest live entry must leave the window. */
        tb = sl_until(e[m - room - 1], now, p->window_ns);
        t = tb > t ? tb : t;
    }
    return t > 0 ? t : 0;
}

/* Checks that log[0 .. n) is sorted and non-negative. */
static int sl_log_ok(const int64_t *log, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (log[i] < 0 || (i > 0 && log[i] < log[i - 1])) {
            return 0;
        }
    }
    return 1;
}

int sliding_log_decide(const struct sliding_log_params *p, const int64_t *log,
                       size_t n, int64_t now_ns, int64_t cost, int64_t *next,
                       size_t next_cap, struct sliding_log_result *out,
                       const char **err)
{
    const char *bad = sl_params_bad(p);
    const int64_t *e;
    size_t lo, live, kept, size, m;
    int64_t add = 0;
    int refused;

    memset(out, 0, sizeof(*out));
    if (bad != NULL) {
        *err = bad;
        return SLIDING_LOG_EARGS;
    }
    if (now_ns < 0 || cost < 0 || next == NULL || next_cap < (size_t)p->max) {
        *err = now_ns < 0 ? SLIDING_LOG_ERR_TIME
               : cost < 0 ? SLIDING_LOG_ERR_COST
                          : SLIDING_LOG_ERR_BUFFER;
        return SLIDING_LOG_EARGS;
    }
    if (!sl_log_ok(log, n)) {
        *err = SLIDING_LOG_ERR_STATE;
        return SLIDING_LOG_ESTATE;
    }

    /* now - H and now - W may be negative: then nothing is older. */
    lo = sl_after(log, n, now_ns - p->horizon_ns);
    kept = n - lo;
    live = n - sl_after(log, n, now_ns - p->window_ns);

    if (cost == 0) {
        refused = live > (size_t)p->max;
    } else if (cost > p->max) {
        refused = 1;
    } else {
        int spaced =
            p->min_interval_ns == 0 || kept == 0 ||
            (log[n - 1] <= now_ns && now_ns - log[n - 1] >= p->min_interval_ns);

        refused = !spaced || live > (size_t)(p->max - cost);
        add = cost; /* logged whether it passes or not */
    }

    size = kept + (size_t)add;
    if (size > (size_t)p->max) {
        size = (size_t)p->max;
    }
    sl_merge(log, lo, n, now_ns, add, next, size);
    out->next_n = size;
    out->added = add;

    /* The reply describes the log as the store holds it afterwards. */
    if (add > 0) {
        e = next;
        m = size;
    } else if (kept > 0) {
        e = log + lo; /* not NULL + 0: a missing key may come as NULL */
        m = kept;
    } else {
        e = next;
        m = 0;
    }
    live = m - sl_after(e, m, now_ns - p->window_ns);
    out->d.limited = refused;
    out->d.limit = p->max;
    out->d.remaining = live < (size_t)p->max ? p->max - (int64_t)live : 0;
    out->d.retry_after_ns = -RL_NS_PER_SEC;
    if (refused && cost <= p->max) {
        out->d.retry_after_ns = sl_retry(p, e, m, now_ns, cost);
    }
    if (m > 0) {
        out->d.reset_after_ns = sl_until(e[m - 1], now_ns, p->horizon_ns);
    }
    if (add > 0) {
        /* The newest entry is now or later: reset_after >= H >= 1 ms. */
        out->write = SLIDING_LOG_WRITE_SET;
        out->expiry_ms = rl_ceil_ms(out->d.reset_after_ns);
    }
    return SLIDING_LOG_OK;
}

/* ---------------- ADJUST ---------------- */

/* What sliding_log_decide() with cost 1 answers on the pruned log e[0 ..
 * m) (sorted, every entry within the horizon) at now, into *d. That
 * decision logs its attempt: it is computed on the log with one entry at
 * now merged in and capped at max, M below, without building it (M is
 * the newest `size` entries of e[0 .. pos), now, e[pos .. m), pos the
 * first entry after now). */
static void sl_peek_one(const struct sliding_log_params *p, const int64_t *e,
                        size_t m, int64_t now, struct rl_decision *d)
{
    size_t live = m - sl_after(e, m, now - p->window_ns);
    size_t pos = sl_after(e, m, now);
    size_t size = m + 1 < (size_t)p->max ? m + 1 : (size_t)p->max;
    size_t drop = m + 1 - size; /* the union's oldest entries capped off */
    int64_t newest = pos < m ? e[m - 1] : now;
    int64_t oldest = drop < pos ? e[drop] : drop == pos ? now : e[drop - 1];
    int spaced = p->min_interval_ns == 0 || m == 0 ||
                 (e[m - 1] <= now && now - e[m - 1] >= p->min_interval_ns);
    int refused = !spaced || live > (size_t)(p->max - 1);

    memset(d, 0, sizeof(*d));
    live = live + 1 < size ? live + 1 : size; /* the live are the newest */
    d->limited = refused;
    d->limit = p->max;
    d->remaining = live < (size_t)p->max ? p->max - (int64_t)live : 0;
    d->retry_after_ns = -RL_NS_PER_SEC;
    if (refused) {
        int64_t t = 0, tb;

        if (p->min_interval_ns > 0) {
            t = sl_until(newest, now, p->min_interval_ns);
        }
        if (live > (size_t)(p->max - 1)) {
            /* live == size == max: the oldest of M must leave. */
            tb = sl_until(oldest, now, p->window_ns);
            t = tb > t ? tb : t;
        }
        d->retry_after_ns = t > 0 ? t : 0;
    }
    d->reset_after_ns = sl_until(newest, now, p->horizon_ns);
}

int sliding_log_adjust(const struct sliding_log_params *p, const int64_t *log,
                       size_t n, int64_t now_ns, int64_t delta, int64_t *next,
                       size_t next_cap, struct sliding_log_result *out,
                       const char **err)
{
    const char *bad = sl_params_bad(p);
    const int64_t most = INT64_C(9007199254740991);
    size_t lo, kept, size, gone = 0;
    int64_t add = 0;

    memset(out, 0, sizeof(*out));
    if (bad != NULL) {
        *err = bad;
        return SLIDING_LOG_EARGS;
    }
    if (now_ns < 0 || delta < -most || delta > most || next == NULL ||
        next_cap < (size_t)p->max) {
        *err = now_ns < 0                      ? SLIDING_LOG_ERR_TIME
               : delta < -most || delta > most ? SLIDING_LOG_ERR_DELTA
                                               : SLIDING_LOG_ERR_BUFFER;
        return SLIDING_LOG_EARGS;
    }
    if (!sl_log_ok(log, n)) {
        *err = SLIDING_LOG_ERR_STATE;
        return SLIDING_LOG_ESTATE;
    }

    lo = sl_after(log, n, now_ns - p->horizon_ns);
    kept = n - lo;
    if (delta > 0) {
        add = delta < p->max ? delta : p->max;
        size = kept + (size_t)add;
    } else {
        /* Giving back: the newest -delta entries of the kept ones go. */
        gone = delta < 0 && (uint64_t)-delta < kept ? (size_t)-delta
               : delta < 0                          ? kept
                                                    : 0;
        size = kept - gone;
    }
    if (size > (size_t)p->max) {
        size = (size_t)p->max;
    }
    /* The newest `size` of the kept entries left, with `add` at now. */
    sl_merge(log, lo, n - gone, now_ns, add, next, size);
    out->next_n = size;
    out->added = add;
    sl_peek_one(p, next, size, now_ns, &out->d);
    if (add == 0 && gone == 0) {
        return SLIDING_LOG_OK; /* nothing changed: write NONE */
    }
    if (size == 0) {
        out->write = SLIDING_LOG_WRITE_DEL;
        return SLIDING_LOG_OK;
    }
    out->write = SLIDING_LOG_WRITE_SET;
    out->expiry_ms =
        rl_ceil_ms(sl_until(next[size - 1], now_ns, p->horizon_ns));
    return SLIDING_LOG_OK;
}
