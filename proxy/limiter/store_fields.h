/* The limits whose state is a few integers: token_bucket, leaky_bucket,
 * fixed_window and sliding_counter. Their state as one type, their
 * decision through the C models (algorithms/), and the hash the scripts
 * keep it in, for the stores that decide them (the embedded store) and
 * that read them back (the Redis store's refusal cache). */
#ifndef PX_PROXY_LIMITER_STORE_FIELDS_H
#define PX_PROXY_LIMITER_STORE_FIELDS_H

#include <stdint.h>

#include "algorithms/fixed_window.h"
#include "algorithms/leaky_bucket.h"
#include "algorithms/rl.h"
#include "algorithms/sliding_counter.h"
#include "algorithms/token_bucket.h"
#include "conf/limits.h"

/* The state of one such limit; which member, its algorithm says. */
union store_fields {
    struct token_bucket_state tb;
    struct leaky_bucket_state lb;
    struct fixed_window_state fw;
    struct sliding_counter_state sc;
};

/* A decision of one such limit. */
struct store_fields_result {
    struct rl_decision d;    /* the five integers, before rounding */
    int write;               /* 1: store next, expiring in expiry_ms */
    union store_fields next; /* the state after the decision */
    int64_t expiry_ms;       /* when write is 1, >= 1 */
};

/* 1 when limits of algorithm `a` keep a union store_fields. */
int store_fields_algo(enum limits_algo a);

/* Decides `lim` (an algorithm of store_fields_algo) on its state `st`
 * (NULL: no key) at `now_ns` with `cost`. 0, or -1 with *err. */
int store_fields_decide(const struct limits_limit *lim,
                        const union store_fields *st, int64_t now_ns,
                        int64_t cost, struct store_fields_result *out,
                        const char **err);

/* store_fields_decide with a CHECK ... WAIT of wait_ns (> 0): a
 * token_bucket or leaky_bucket limit due within it is reserved (its
 * <name>_decide_wait: limited, with its retry_after, and write 1); the
 * other algorithms decide as without it (the caller refuses WAIT on
 * them). */
int store_fields_decide_wait(const struct limits_limit *lim,
                             const union store_fields *st, int64_t now_ns,
                             int64_t cost, int64_t wait_ns,
                             struct store_fields_result *out, const char **err);

/* LIMITER ADJUST of `lim` (an algorithm of store_fields_algo) by delta
 * (either sign, |delta| <= 2^53 - 1) on `st` (NULL: no key) at now_ns:
 * the model's <algorithm>_adjust, never refused; out->d is a peek of
 * cost 1 after it, out->write whether next is stored. 0, or -1 with
 * *err (nothing to write). */
int store_fields_adjust(const struct limits_limit *lim,
                        const union store_fields *st, int64_t now_ns,
                        int64_t delta, struct store_fields_result *out,
                        const char **err);

/* The hash fields limiter.lua keeps the state of algorithm `a` in, in a
 * fixed order: a static, NULL-terminated array of at most 3 names. */
const char *const *store_fields_names(enum limits_algo a);

/* The state of algorithm `a` from the values of its hash fields, in the
 * order of store_fields_names (integers >= 0 as stored; times are
 * microseconds there). 0, or -1 when a time is beyond the models' range. */
int store_fields_from_hash(enum limits_algo a, const int64_t *v,
                           union store_fields *st);

#endif /* PX_PROXY_LIMITER_STORE_FIELDS_H */
