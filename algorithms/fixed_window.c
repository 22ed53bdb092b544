/* Fixed window counter aligned to the epoch (see fixed_window.h).
 *
 * Flow: the limiter builds the parameters from limits.yaml with
 * fixed_window_params_init(), reads the stored HASH (or nothing), and calls
 * fixed_window_decide() with the node's time; the result says what to
 * reply and whether to store `next`.
 *
 * Durations are computed relative to now, (start - now) + window, so a
 * window that ends after INT64_MAX ns saturates instead of overflowing.
 *
 * Calendar windows: an instant is split into whole days since the epoch
 * and the time into its day, the offset added to the time of day (never
 * to the instant, which may lie near INT64_MAX), and the date of that day
 * found by the civil-from-days arithmetic of the proleptic Gregorian
 * calendar (400-year eras of 146,097 days, years counted from March so
 * the leap day ends a year). The Lua twin repeats the same steps on
 * microseconds. */
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

int fixed_window_params_calendar(struct fixed_window_params *p, int64_t max,
                                 enum fixed_window_unit unit,
                                 int64_t offset_min, const char **err)
{
    memset(p, 0, sizeof(*p));
    if (max < 1 || max > FIXED_WINDOW_MAX_COUNT) {
        *err = FIXED_WINDOW_ERR_MAX;
        return FIXED_WINDOW_EARGS;
    }
    if (unit != FIXED_WINDOW_DAY && unit != FIXED_WINDOW_WEEK &&
        unit != FIXED_WINDOW_MONTH) {
        *err = FIXED_WINDOW_ERR_UNIT;
        return FIXED_WINDOW_EARGS;
    }
    if (offset_min < -FIXED_WINDOW_MAX_OFFSET_MIN ||
        offset_min > FIXED_WINDOW_MAX_OFFSET_MIN) {
        *err = FIXED_WINDOW_ERR_TZ;
        return FIXED_WINDOW_EARGS;
    }
    p->max = max;
    p->unit = unit;
    p->offset_ns = offset_min * 60 * RL_NS_PER_SEC;
    return FIXED_WINDOW_OK;
}

/* The text for parameters that the two init functions never make, or
 * NULL when they are fine. */
static const char *fw_params_bad(const struct fixed_window_params *p)
{
    if (p->max < 1 || p->max > FIXED_WINDOW_MAX_COUNT) {
        return FIXED_WINDOW_ERR_MAX;
    }
    if (p->unit == FIXED_WINDOW_EPOCH) {
        if (p->window_ns < RL_NS_PER_MS ||
            p->window_ns > FIXED_WINDOW_MAX_WINDOW_MS * RL_NS_PER_MS) {
            return FIXED_WINDOW_ERR_WINDOW;
        }
        return NULL;
    }
    if (p->unit != FIXED_WINDOW_DAY && p->unit != FIXED_WINDOW_WEEK &&
        p->unit != FIXED_WINDOW_MONTH) {
        return FIXED_WINDOW_ERR_UNIT;
    }
    if (p->offset_ns < -FIXED_WINDOW_MAX_OFFSET_MIN * 60 * RL_NS_PER_SEC ||
        p->offset_ns > FIXED_WINDOW_MAX_OFFSET_MIN * 60 * RL_NS_PER_SEC) {
        return FIXED_WINDOW_ERR_TZ;
    }
    return NULL;
}

/* ---------------- Calendar windows ---------------- */

#define FW_NS_PER_DAY (INT64_C(86400) * RL_NS_PER_SEC)
#define FW_ERA_DAYS   INT64_C(146097) /* 400 Gregorian years */
/* Days from 0000-03-01 (the first day of era 0, years from March) to
 * 1970-01-01. */
#define FW_EPOCH_SHIFT INT64_C(719468)

/* floor(a / b) for b > 0. */
static int64_t fw_floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;

    return a % b < 0 ? q - 1 : q;
}

/* The day of the month (1..31) and the length of the month (28..31) of
 * day `z` since 1970-01-01. */
static void fw_civil(int64_t z, int64_t *mday, int64_t *mdays)
{
    static const int8_t len[12] = { 31, 30, 31, 30, 31, 31,
                                    30, 31, 30, 31, 31, 28 }; /* from March */
    int64_t era, doe, yoe, doy, mp, y;

    z += FW_EPOCH_SHIFT;
    era = fw_floor_div(z, FW_ERA_DAYS);
    doe = z - era * FW_ERA_DAYS;                                 /* 0..146096 */
    yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365; /* 0..399 */
    doy = doe - (365 * yoe + yoe / 4 - yoe / 100);               /* 0..365 */
    mp = (5 * doy + 2) / 153; /* 0 = March .. 11 = February */
    *mday = doy - (153 * mp + 2) / 5 + 1;
    *mdays = len[mp];
    if (mp == 11) {
        /* The February of the civil year after the March year yoe. */
        y = era * 400 + yoe + 1;
        if (y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)) {
            *mdays = 29;
        }
    }
}

void fixed_window_calendar(enum fixed_window_unit unit, int64_t offset_ns,
                           int64_t t_ns, struct fixed_window_span *out)
{
    /* No product of the day: near INT64_MIN it would overflow. */
    int64_t day = t_ns / FW_NS_PER_DAY;
    int64_t tod = t_ns % FW_NS_PER_DAY + offset_ns; /* -38 h .. 38 h */
    int64_t first, len, mday, mdays;

    if (tod < -FW_NS_PER_DAY) {
        day -= 2;
        tod += 2 * FW_NS_PER_DAY;
    } else if (tod < 0) {
        day--;
        tod += FW_NS_PER_DAY;
    } else if (tod >= FW_NS_PER_DAY) {
        day++;
        tod -= FW_NS_PER_DAY;
    }
    switch (unit) {
    case FIXED_WINDOW_WEEK:
        /* 1970-01-01 was a Thursday: 3 days after a Monday. */
        first = day - (day + 3 - fw_floor_div(day + 3, 7) * 7);
        len = 7;
        break;
    case FIXED_WINDOW_MONTH:
        fw_civil(day, &mday, &mdays);
        first = day - (mday - 1);
        len = mdays;
        break;
    default:
        first = day;
        len = 1;
        break;
    }
    out->since_ns = (day - first) * FW_NS_PER_DAY + tod;
    out->until_ns = (first + len - day) * FW_NS_PER_DAY - tod;
}

/* The start of now's window (a calendar window that began before the
 * epoch starts at 0). */
static int64_t fw_start(const struct fixed_window_params *p, int64_t now_ns)
{
    struct fixed_window_span sp;

    if (p->unit == FIXED_WINDOW_EPOCH) {
        return now_ns - now_ns % p->window_ns;
    }
    fixed_window_calendar(p->unit, p->offset_ns, now_ns, &sp);
    return now_ns - sp.since_ns < 0 ? 0 : now_ns - sp.since_ns;
}

/* From the start (>= 0) of a window to its end: the window, or the rest
 * of the calendar window holding that start. */
static int64_t fw_length(const struct fixed_window_params *p, int64_t start)
{
    struct fixed_window_span sp;

    if (p->unit == FIXED_WINDOW_EPOCH) {
        return p->window_ns;
    }
    fixed_window_calendar(p->unit, p->offset_ns, start, &sp);
    return sp.until_ns;
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

    start = fw_start(p, now_ns);
    if (st != NULL && st->start_ns >= start) {
        /* The current window, or a later one when the clock is behind. */
        start = st->start_ns;
        count = st->count;
    }
    /* start - now > -window, so only a far-future start can saturate. */
    if (__builtin_add_overflow(start - now_ns, fw_length(p, start),
                               &until_end)) {
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

int fixed_window_adjust(const struct fixed_window_params *p,
                        const struct fixed_window_state *st, int64_t now_ns,
                        int64_t delta, struct fixed_window_result *out,
                        const char **err)
{
    struct fixed_window_state next;
    struct fixed_window_result peek;
    int rc = fixed_window_decide(p, st, now_ns, 0, &peek, err);
    int64_t count, expiry_ms;

    if (rc != FIXED_WINDOW_OK) {
        memset(out, 0, sizeof(*out));
        return rc;
    }
    /* The peek rolled the state to the effective window. */
    next = peek.next;
    count = next.count;
    if (delta > 0) {
        count = count > FIXED_WINDOW_MAX_COUNT - delta ? FIXED_WINDOW_MAX_COUNT
                                                       : count + delta;
        if (count < next.count) {
            count = next.count; /* a count already past the cap stays */
        }
    } else if (delta < 0) {
        count = count > -delta ? count + delta : 0;
    }
    if (count == next.count) {
        /* Nothing changes (delta 0, nothing to give back, the cap). */
        rc = fixed_window_decide(p, st, now_ns, 1, out, err);
        out->write = FIXED_WINDOW_WRITE_NONE;
        out->expiry_ms = 0;
        return rc;
    }
    next.count = count;
    rc = fixed_window_decide(p, &next, now_ns, 1, out, err);
    if (rc != FIXED_WINDOW_OK) {
        return rc;
    }
    /* The window's end, as a check's write expires. */
    expiry_ms = rl_ceil_ms(
        rl_add_sat(next.start_ns - now_ns, fw_length(p, next.start_ns)));
    out->write = FIXED_WINDOW_WRITE_SET;
    out->next = next;
    out->expiry_ms = expiry_ms;
    return FIXED_WINDOW_OK;
}
