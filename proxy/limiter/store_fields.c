/* The limits whose state is a few integers (see store_fields.h): one
 * switch over their algorithms, so the embedded store and the refusal
 * cache decide them through the same code. */
#include "proxy/limiter/store_fields.h"

#include <stddef.h>

/* The models count in nanoseconds, the scripts store microseconds. */
#define STORE_FIELDS_NS_PER_US 1000

int store_fields_algo(enum limits_algo a)
{
    return a == LIMITS_TOKEN_BUCKET || a == LIMITS_LEAKY_BUCKET ||
           a == LIMITS_FIXED_WINDOW || a == LIMITS_SLIDING_COUNTER;
}

/* conf's calendar windows are the model's units, negated. */
_Static_assert(LIMITS_WINDOW_DAY == -FIXED_WINDOW_DAY &&
                   LIMITS_WINDOW_WEEK == -FIXED_WINDOW_WEEK &&
                   LIMITS_WINDOW_MONTH == -FIXED_WINDOW_MONTH,
               "calendar windows differ between conf and the model");

/* The model's parameters of a fixed_window limit: a window of ms, or a
 * calendar window at its UTC offset. */
static int store_fields_fw_params(const struct limits_fixed_window *fw,
                                  struct fixed_window_params *p,
                                  const char **err)
{
    if (fw->window_ms < 0) {
        return fixed_window_params_calendar(
            p, fw->max, (enum fixed_window_unit)(-fw->window_ms), fw->tz_min,
            err);
    }
    return fixed_window_params_init(p, fw->max, fw->window_ms, err);
}

/* The model's parameters of a token_bucket limit, its warm-up included. */
static int store_fields_tb_params(const struct limits_token_bucket *tb,
                                  struct token_bucket_params *p,
                                  const char **err)
{
    if (token_bucket_params_init(p, tb->capacity, tb->refill_per_sec_micro,
                                 err) != TOKEN_BUCKET_OK) {
        return TOKEN_BUCKET_EARGS;
    }
    if (tb->warmup_ms > 0) {
        return token_bucket_params_warmup(p, tb->warmup_ms, tb->cold_factor,
                                          err);
    }
    return TOKEN_BUCKET_OK;
}

/* The model's parameters of a leaky_bucket limit. */
static int store_fields_lb_params(const struct limits_leaky_bucket *lb,
                                  struct leaky_bucket_params *p,
                                  const char **err)
{
    return leaky_bucket_params_init(p, lb->size, lb->drip_ms, lb->drip_size,
                                    err);
}

/* Takes a model's decision into *out: its integers, whether it writes. */
static void store_fields_take(const struct rl_decision *d, int write,
                              int64_t expiry_ms,
                              struct store_fields_result *out)
{
    out->d = *d;
    out->write = write;
    out->expiry_ms = expiry_ms;
}

int store_fields_decide(const struct limits_limit *lim,
                        const union store_fields *st, int64_t now_ns,
                        int64_t cost, struct store_fields_result *out,
                        const char **err)
{
    switch (lim->algo) {
    case LIMITS_TOKEN_BUCKET: {
        struct token_bucket_params p;
        struct token_bucket_result r;
        if (store_fields_tb_params(&lim->u.token_bucket, &p, err) !=
                TOKEN_BUCKET_OK ||
            token_bucket_decide(&p, st ? &st->tb : NULL, now_ns, cost, &r,
                                err) != TOKEN_BUCKET_OK) {
            return -1;
        }
        out->next.tb = r.next;
        store_fields_take(&r.d, r.write == TOKEN_BUCKET_WRITE_SET, r.expiry_ms,
                          out);
        return 0;
    }
    case LIMITS_LEAKY_BUCKET: {
        struct leaky_bucket_params p;
        struct leaky_bucket_result r;
        if (store_fields_lb_params(&lim->u.leaky_bucket, &p, err) !=
                LEAKY_BUCKET_OK ||
            leaky_bucket_decide(&p, st ? &st->lb : NULL, now_ns, cost, &r,
                                err) != LEAKY_BUCKET_OK) {
            return -1;
        }
        out->next.lb = r.next;
        store_fields_take(&r.d, r.write == LEAKY_BUCKET_WRITE_SET, r.expiry_ms,
                          out);
        return 0;
    }
    case LIMITS_FIXED_WINDOW: {
        struct fixed_window_params p;
        struct fixed_window_result r;
        if (store_fields_fw_params(&lim->u.fixed_window, &p, err) !=
                FIXED_WINDOW_OK ||
            fixed_window_decide(&p, st ? &st->fw : NULL, now_ns, cost, &r,
                                err) != FIXED_WINDOW_OK) {
            return -1;
        }
        out->next.fw = r.next;
        store_fields_take(&r.d, r.write == FIXED_WINDOW_WRITE_SET, r.expiry_ms,
                          out);
        return 0;
    }
    case LIMITS_SLIDING_COUNTER: {
        struct sliding_counter_params p;
        struct sliding_counter_result r;
        if (sliding_counter_params_init(&p, lim->u.sliding_counter.max,
                                        lim->u.sliding_counter.window_ms,
                                        err) != SLIDING_COUNTER_OK ||
            sliding_counter_decide(&p, st ? &st->sc : NULL, now_ns, cost, &r,
                                   err) != SLIDING_COUNTER_OK) {
            return -1;
        }
        out->next.sc = r.next;
        store_fields_take(&r.d, r.write == SLIDING_COUNTER_WRITE_SET,
                          r.expiry_ms, out);
        return 0;
    }
    default:
        break;
    }
    *err = "unknown algorithm";
    return -1;
}

int store_fields_adjust(const struct limits_limit *lim,
                        const union store_fields *st, int64_t now_ns,
                        int64_t delta, struct store_fields_result *out,
                        const char **err)
{
    switch (lim->algo) {
    case LIMITS_FIXED_WINDOW: {
        struct fixed_window_params p;
        struct fixed_window_result r;
        if (store_fields_fw_params(&lim->u.fixed_window, &p, err) !=
                FIXED_WINDOW_OK ||
            fixed_window_adjust(&p, st ? &st->fw : NULL, now_ns, delta, &r,
                                err) != FIXED_WINDOW_OK) {
            return -1;
        }
        out->next.fw = r.next;
        store_fields_take(&r.d, r.write == FIXED_WINDOW_WRITE_SET, r.expiry_ms,
                          out);
        return 0;
    }
    case LIMITS_SLIDING_COUNTER: {
        struct sliding_counter_params p;
        struct sliding_counter_result r;
        if (sliding_counter_params_init(&p, lim->u.sliding_counter.max,
                                        lim->u.sliding_counter.window_ms,
                                        err) != SLIDING_COUNTER_OK ||
            sliding_counter_adjust(&p, st ? &st->sc : NULL, now_ns, delta, &r,
                                   err) != SLIDING_COUNTER_OK) {
            return -1;
        }
        out->next.sc = r.next;
        store_fields_take(&r.d, r.write == SLIDING_COUNTER_WRITE_SET,
                          r.expiry_ms, out);
        return 0;
    }
    case LIMITS_TOKEN_BUCKET: {
        struct token_bucket_params p;
        struct token_bucket_result r;
        if (store_fields_tb_params(&lim->u.token_bucket, &p, err) !=
                TOKEN_BUCKET_OK ||
            token_bucket_adjust(&p, st ? &st->tb : NULL, now_ns, delta, &r,
                                err) != TOKEN_BUCKET_OK) {
            return -1;
        }
        out->next.tb = r.next;
        store_fields_take(&r.d, r.write == TOKEN_BUCKET_WRITE_SET, r.expiry_ms,
                          out);
        return 0;
    }
    case LIMITS_LEAKY_BUCKET: {
        struct leaky_bucket_params p;
        struct leaky_bucket_result r;
        if (store_fields_lb_params(&lim->u.leaky_bucket, &p, err) !=
                LEAKY_BUCKET_OK ||
            leaky_bucket_adjust(&p, st ? &st->lb : NULL, now_ns, delta, &r,
                                err) != LEAKY_BUCKET_OK) {
            return -1;
        }
        out->next.lb = r.next;
        store_fields_take(&r.d, r.write == LEAKY_BUCKET_WRITE_SET, r.expiry_ms,
                          out);
        return 0;
    }
    default:
        break;
    }
    *err = "unknown algorithm";
    return -1;
}

const char *const *store_fields_names(enum limits_algo a)
{
    static const char *const tb[] = { "tokens", "frac", "ts", NULL };
    static const char *const lb[] = { "level", "ts", NULL };
    static const char *const fw[] = { "start", "count", NULL };
    static const char *const sc[] = { "start", "count", "prev", NULL };

    switch (a) {
    case LIMITS_TOKEN_BUCKET:
        return tb;
    case LIMITS_LEAKY_BUCKET:
        return lb;
    case LIMITS_FIXED_WINDOW:
        return fw;
    case LIMITS_SLIDING_COUNTER:
        return sc;
    default:
        return NULL;
    }
}

/* A stored time (us) in the models' ns; -1 beyond their range. */
static int64_t store_fields_ns(int64_t us)
{
    return us > INT64_MAX / STORE_FIELDS_NS_PER_US
               ? -1
               : us * STORE_FIELDS_NS_PER_US;
}

int store_fields_from_hash(enum limits_algo a, const int64_t *v,
                           union store_fields *st)
{
    int64_t t;

    switch (a) {
    case LIMITS_TOKEN_BUCKET:
        st->tb.tokens = v[0];
        st->tb.frac = v[1];
        t = st->tb.ts_ns = store_fields_ns(v[2]);
        /* A warm-up bucket's cold is not read: whether it admits, and
         * when it may, depends on its level alone. */
        st->tb.cold = 0;
        break;
    case LIMITS_LEAKY_BUCKET:
        st->lb.level = v[0];
        t = st->lb.ts_ns = store_fields_ns(v[1]);
        break;
    case LIMITS_FIXED_WINDOW:
        t = st->fw.start_ns = store_fields_ns(v[0]);
        st->fw.count = v[1];
        break;
    case LIMITS_SLIDING_COUNTER:
        t = st->sc.start_ns = store_fields_ns(v[0]);
        st->sc.count = v[1];
        st->sc.prev = v[2];
        break;
    default:
        return -1;
    }
    return t < 0 ? -1 : 0;
}

int store_fields_decide_wait(const struct limits_limit *lim,
                             const union store_fields *st, int64_t now_ns,
                             int64_t cost, int64_t wait_ns,
                             struct store_fields_result *out, const char **err)
{
    if (wait_ns > 0 && lim->algo == LIMITS_TOKEN_BUCKET) {
        struct token_bucket_params p;
        struct token_bucket_result r;
        if (store_fields_tb_params(&lim->u.token_bucket, &p, err) !=
                TOKEN_BUCKET_OK ||
            token_bucket_decide_wait(&p, st ? &st->tb : NULL, now_ns, cost,
                                     wait_ns, &r, err) != TOKEN_BUCKET_OK) {
            return -1;
        }
        out->next.tb = r.next;
        store_fields_take(&r.d, r.write == TOKEN_BUCKET_WRITE_SET, r.expiry_ms,
                          out);
        return 0;
    }
    if (wait_ns > 0 && lim->algo == LIMITS_LEAKY_BUCKET) {
        struct leaky_bucket_params p;
        struct leaky_bucket_result r;
        if (store_fields_lb_params(&lim->u.leaky_bucket, &p, err) !=
                LEAKY_BUCKET_OK ||
            leaky_bucket_decide_wait(&p, st ? &st->lb : NULL, now_ns, cost,
                                     wait_ns, &r, err) != LEAKY_BUCKET_OK) {
            return -1;
        }
        out->next.lb = r.next;
        store_fields_take(&r.d, r.write == LEAKY_BUCKET_WRITE_SET, r.expiry_ms,
                          out);
        return 0;
    }
    return store_fields_decide(lim, st, now_ns, cost, out, err);
}
