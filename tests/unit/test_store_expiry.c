/* The embedded store evicts only expired entries, on the premise that an
 * entry's expiry is the instant its state equals no state. Checked for
 * every algorithm: random decisions (costs, times) build a state with the
 * expiry its last write gave (what the store sets: now + expiry_ms, GCRA's
 * rounded up as store_local.c does); from that instant on, every cost is
 * decided as on a missing key (the same decision, remaining, retry and
 * reset; a reset just past shows as none). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/gcra.h"
#include "algorithms/rl.h"
#include "algorithms/sliding_log.h"
#include "algorithms/sliding_window.h"
#include "conf/limits.h"
#include "proxy/limiter/store_fields.h"

#define MS       INT64_C(1000000)
#define MAX_LIST 64

/* One key's stored state and when it expires. */
struct state {
    int have;
    int64_t expire_ns;
    int64_t tat;
    union store_fields f;
    struct sliding_window_slot slots[MAX_LIST];
    int64_t log[MAX_LIST];
    size_t n;
};

/* Decides `lim` on `s` (NULL: missing) at now with cost into *d, and
 * applies the write into *s when `apply`. */
static void decide(const struct limits_limit *lim, struct state *s, int have,
                   int64_t now, int64_t cost, struct rl_decision *d, int apply)
{
    const char *err = NULL;
    int write = 0;
    int64_t expiry_ms = 0;

    switch (lim->algo) {
    case LIMITS_GCRA: {
        struct gcra_params p;
        struct gcra_result r;
        cr_assert_eq(
            gcra_params_init_ns(&p, lim->u.gcra.max_burst, lim->u.gcra.count,
                                lim->u.gcra.period_ms * MS, cost, &err),
            GCRA_OK);
        cr_assert_eq(gcra_decide(&p, have, have ? s->tat : 0, now, &r, &err),
                     GCRA_OK);
        *d = r.d;
        if (apply && !r.d.limited && r.write == GCRA_WRITE_SET) {
            write = 1;
            s->tat = r.new_tat_ns;
            expiry_ms = rl_ceil_ms(r.new_tat_ns - now);
        } else if (apply && !r.d.limited && r.write == GCRA_WRITE_DEL) {
            s->have = 0;
        }
        break;
    }
    case LIMITS_SLIDING_WINDOW: {
        struct sliding_window_params p;
        struct sliding_window_result r;
        struct sliding_window_slot next[MAX_LIST];
        cr_assert_eq(sliding_window_params_init(
                         &p, lim->u.sliding_window.max,
                         lim->u.sliding_window.window_ms,
                         lim->u.sliding_window.resolution_ms, &err),
                     SLIDING_WINDOW_OK);
        cr_assert_eq(sliding_window_decide(&p, have ? s->slots : NULL,
                                           have ? s->n : 0, now, cost, next,
                                           MAX_LIST, &r, &err),
                     SLIDING_WINDOW_OK);
        *d = r.d;
        if (apply && r.write == SLIDING_WINDOW_WRITE_SET) {
            write = 1;
            memcpy(s->slots, next, r.next_n * sizeof(next[0]));
            s->n = r.next_n;
            expiry_ms = r.expiry_ms;
        }
        break;
    }
    case LIMITS_SLIDING_LOG: {
        struct sliding_log_params p;
        struct sliding_log_result r;
        int64_t next[MAX_LIST];
        cr_assert_eq(sliding_log_params_init(&p, lim->u.sliding_log.max,
                                             lim->u.sliding_log.window_ms,
                                             lim->u.sliding_log.min_interval_ms,
                                             &err),
                     SLIDING_LOG_OK);
        cr_assert_eq(sliding_log_decide(&p, have ? s->log : NULL,
                                        have ? s->n : 0, now, cost, next,
                                        MAX_LIST, &r, &err),
                     SLIDING_LOG_OK);
        *d = r.d;
        /* The log keeps refused attempts too. */
        if (apply && r.write == SLIDING_LOG_WRITE_SET) {
            write = 1;
            memcpy(s->log, next, r.next_n * sizeof(next[0]));
            s->n = r.next_n;
            expiry_ms = r.expiry_ms;
        }
        break;
    }
    default: {
        struct store_fields_result r;
        cr_assert_eq(
            store_fields_decide(lim, have ? &s->f : NULL, now, cost, &r, &err),
            0, "%s", err);
        *d = r.d;
        if (apply && r.write == 1) {
            write = 1;
            s->f = r.next;
            expiry_ms = r.expiry_ms;
        }
        break;
    }
    }
    if (write) {
        s->have = 1;
        s->expire_ns = now + expiry_ms * MS;
    }
}

/* A duration as a reply shows it: a TAT just past (a request that can
 * never pass reports it) is no wait. */
static int64_t nonneg(int64_t ns)
{
    return ns > 0 ? ns : 0;
}

/* The limits checked, each small enough to refuse often. */
static struct limits_limit limits(int i)
{
    struct limits_limit l;

    memset(&l, 0, sizeof(l));
    switch (i) {
    case 0:
        l.algo = LIMITS_GCRA;
        l.u.gcra = (struct limits_gcra){ 2, 3, 1000 };
        break;
    case 1:
        l.algo = LIMITS_TOKEN_BUCKET;
        l.u.token_bucket =
            (struct limits_token_bucket){ .capacity = 4,
                                          .refill_per_sec_micro = 3000000 };
        break;
    case 2:
        l.algo = LIMITS_LEAKY_BUCKET;
        l.u.leaky_bucket = (struct limits_leaky_bucket){ 4, 300, 1 };
        break;
    case 3:
        l.algo = LIMITS_FIXED_WINDOW;
        l.u.fixed_window = (struct limits_fixed_window){ 4, 1000, 0 };
        break;
    case 4:
        l.algo = LIMITS_SLIDING_WINDOW;
        l.u.sliding_window = (struct limits_sliding_window){ 4, 1000, 100 };
        break;
    case 5:
        l.algo = LIMITS_SLIDING_LOG;
        l.u.sliding_log = (struct limits_sliding_log){ 4, 1000, 50 };
        break;
    default:
        l.algo = LIMITS_SLIDING_COUNTER;
        l.u.sliding_counter = (struct limits_sliding_counter){ 4, 1000 };
        break;
    }
    return l;
}

Test(store_expiry, every_algorithm_is_fresh_once_its_entry_expires)
{
    int a, run, step;

    srand(11);
    for (a = 0; a <= 6; a++) {
        struct limits_limit lim = limits(a);
        for (run = 0; run < 300; run++) {
            struct state s;
            int64_t now = INT64_C(1700000000000) * MS + (rand() % 1000) * MS;
            int64_t cost, t;
            struct rl_decision d, fresh, aged;

            memset(&s, 0, sizeof(s));
            for (step = 0; step < 1 + rand() % 12; step++) {
                now += (int64_t)(rand() % 400) * MS + rand() % MS;
                decide(&lim, &s, s.have && now < s.expire_ns, now, rand() % 3,
                       &d, 1);
            }
            if (!s.have) {
                continue;
            }
            /* At its expiry and after, the stored state decides every
             * cost as no state does. */
            for (t = 0; t < 3; t++) {
                int64_t at = s.expire_ns + t * 7 * MS;
                for (cost = 0; cost <= 5; cost++) {
                    struct state copy = s;
                    decide(&lim, &copy, 1, at, cost, &aged, 0);
                    decide(&lim, &copy, 0, at, cost, &fresh, 0);
                    cr_assert(aged.limited == fresh.limited &&
                                  aged.remaining == fresh.remaining &&
                                  aged.retry_after_ns == fresh.retry_after_ns &&
                                  nonneg(aged.reset_after_ns) ==
                                      nonneg(fresh.reset_after_ns),
                              "algorithm %d run %d cost %lld at +%lld ms: "
                              "stored [%d %lld %lld %lld] fresh [%d %lld "
                              "%lld %lld]",
                              a, run, (long long)cost, (long long)t * 7,
                              aged.limited, (long long)aged.remaining,
                              (long long)aged.retry_after_ns,
                              (long long)aged.reset_after_ns, fresh.limited,
                              (long long)fresh.remaining,
                              (long long)fresh.retry_after_ns,
                              (long long)fresh.reset_after_ns);
                }
            }
        }
    }
}
