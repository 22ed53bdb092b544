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

/* What store_fields_run asks of a limit's model. */
enum store_fields_op {
    STORE_FIELDS_DECIDE, /* a check or peek of `amount` */
    STORE_FIELDS_WAIT,   /* a check with WAIT (the buckets reserve) */
    STORE_FIELDS_ADJUST, /* LIMITER ADJUST of `amount` */
};

/* The one switch over the algorithms: the model's parameters of `lim`,
 * then its decide, decide_wait (buckets; the others decide) or adjust,
 * which share their arguments but the wait. 0 with *out set, or -1 and
 * *err. */
static int store_fields_run(const struct limits_limit *lim,
                            const union store_fields *st, int64_t now_ns,
                            int64_t amount, int64_t wait_ns,
                            enum store_fields_op op,
                            struct store_fields_result *out, const char **err)
{
    switch (lim->algo) {
    case LIMITS_TOKEN_BUCKET: {
        const struct token_bucket_state *s = st ? &st->tb : NULL;
        struct token_bucket_params p;
        struct token_bucket_result r;
        int rc = store_fields_tb_params(&lim->u.token_bucket, &p, err);

        if (rc == TOKEN_BUCKET_OK) {
            rc = op == STORE_FIELDS_ADJUST
                     ? token_bucket_adjust(&p, s, now_ns, amount, &r, err)
                 : op == STORE_FIELDS_WAIT
                     ? token_bucket_decide_wait(&p, s, now_ns, amount, wait_ns,
                                                &r, err)
                     : token_bucket_decide(&p, s, now_ns, amount, &r, err);
        }
        if (rc != TOKEN_BUCKET_OK) {
            return -1;
        }
        out->next.tb = r.next;
        store_fields_take(&r.d, r.write == TOKEN_BUCKET_WRITE_SET, r.expiry_ms,
                          out);
        return 0;
    }
    case LIMITS_LEAKY_BUCKET: {
        const struct leaky_bucket_state *s = st ? &st->lb : NULL;
        struct leaky_bucket_params p;
        struct leaky_bucket_result r;
        int rc = store_fields_lb_params(&lim->u.leaky_bucket, &p, err);

        if (rc == LEAKY_BUCKET_OK) {
            rc = op == STORE_FIELDS_ADJUST
                     ? leaky_bucket_adjust(&p, s, now_ns, amount, &r, err)
                 : op == STORE_FIELDS_WAIT
                     ? leaky_bucket_decide_wait(&p, s, now_ns, amount, wait_ns,
                                                &r, err)
                     : leaky_bucket_decide(&p, s, now_ns, amount, &r, err);
        }
        if (rc != LEAKY_BUCKET_OK) {
            return -1;
        }
        out->next.lb = r.next;
        store_fields_take(&r.d, r.write == LEAKY_BUCKET_WRITE_SET, r.expiry_ms,
                          out);
        return 0;
    }
    case LIMITS_FIXED_WINDOW: {
        const struct fixed_window_state *s = st ? &st->fw : NULL;
        struct fixed_window_params p;
        struct fixed_window_result r;
        int rc = store_fields_fw_params(&lim->u.fixed_window, &p, err);

        if (rc == FIXED_WINDOW_OK) {
            rc = op == STORE_FIELDS_ADJUST
                     ? fixed_window_adjust(&p, s, now_ns, amount, &r, err)
                     : fixed_window_decide(&p, s, now_ns, amount, &r, err);
        }
        if (rc != FIXED_WINDOW_OK) {
            return -1;
        }
        out->next.fw = r.next;
        store_fields_take(&r.d, r.write == FIXED_WINDOW_WRITE_SET, r.expiry_ms,
                          out);
        return 0;
    }
    case LIMITS_SLIDING_COUNTER: {
        const struct sliding_counter_state *s = st ? &st->sc : NULL;
        struct sliding_counter_params p;
        struct sliding_counter_result r;
        int rc =
            sliding_counter_params_init(&p, lim->u.sliding_counter.max,
                                        lim->u.sliding_counter.window_ms, err);

        if (rc == SLIDING_COUNTER_OK) {
            rc = op == STORE_FIELDS_ADJUST
                     ? sliding_counter_adjust(&p, s, now_ns, amount, &r, err)
                     : sliding_counter_decide(&p, s, now_ns, amount, &r, err);
        }
        if (rc != SLIDING_COUNTER_OK) {
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

int store_fields_decide(const struct limits_limit *lim,
                        const union store_fields *st, int64_t now_ns,
                        int64_t cost, struct store_fields_result *out,
                        const char **err)
{
    return store_fields_run(lim, st, now_ns, cost, 0, STORE_FIELDS_DECIDE, out,
                            err);
}

int store_fields_adjust(const struct limits_limit *lim,
                        const union store_fields *st, int64_t now_ns,
                        int64_t delta, struct store_fields_result *out,
                        const char **err)
{
    return store_fields_run(lim, st, now_ns, delta, 0, STORE_FIELDS_ADJUST, out,
                            err);
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
    return store_fields_run(
        lim, st, now_ns, cost, wait_ns,
        wait_ns > 0 ? STORE_FIELDS_WAIT : STORE_FIELDS_DECIDE, out, err);
}
