/* Token bucket (NERD RateLimiter wiki), as a pure function of (parameters,
 * stored state, now, cost).
 *
 * A bucket holds at most `capacity` tokens and gains refill_per_sec tokens
 * per second, lazily: nothing runs in the background, a decision credits
 * the time passed since the last refill. A request of `cost` tokens passes
 * when the bucket holds at least that many whole tokens, and takes them.
 * A missing key is a full bucket.
 *
 * Parameters (conf/limits.h struct limits_token_bucket):
 *   capacity              tokens, 1 .. TOKEN_BUCKET_MAX_CAPACITY (2^53 - 1)
 *   refill_per_sec_micro  millionths of a token per second,
 *                         1 .. TOKEN_BUCKET_MAX_RATE_MICRO (1e9 tokens/s),
 *                         or TOKEN_BUCKET_RATE_INF (= LIMITS_RATE_INF):
 *                         unlimited, every request passes
 *
 * State. The level is fixed-point with 15 decimals, kept as two integers so
 * that no value exceeds 2^53 (a Lua double holds each exactly):
 *   tokens  whole tokens, at most capacity; below 0 for a debt (LIMITER
 *           ADJUST, or a warm-up's slope), at least -(2^53 - 1)
 *   frac    the part of the next token already refilled, in 1e-15 tokens
 *           (0 .. 1e15 - 1; 0 whenever the bucket is full)
 *   ts_ns   the time up to which refill has been credited (ns since the
 *           Unix epoch); it never moves backwards
 * One unit of frac is exactly what 1 ns of refill at 1 millionth of a token
 * per second brings, so the refill over e ns is exactly e * rate units:
 * nothing is rounded away, and crediting the time in many small steps gives
 * the very state one big step gives.
 *
 * Redis (the Lua twin, algorithms/lua/token_bucket.lua): one HASH per key,
 *   HSET <key> tokens <tokens> frac <frac> ts <ts_us>   (decimal integers)
 *   PEXPIRE <key> <expiry_ms>
 * written only when a request passes with cost >= 1. Times are whole
 * microseconds there (Redis's TIME has no finer unit): ts_ns = ts_us * 1000,
 * and one unit of frac is still what 1 ns of refill brings at one
 * millionth of a token per second. The expiry is the time until the bucket
 * is full again, rounded up to whole ms: by then the state equals a missing
 * key. The refill needs e * rate (up to 2^113) and the waits
 * missing_tokens * 1e15 (up to 2^103), beyond a Lua double's 2^53: the twin
 * forms them from split integers (algorithms/lua/xint.lua), as the C model
 * does with 32-bit halves, and replies with the durations floored to
 * microseconds. Its undo token is the instant (us) at which the bucket a
 * check stored is full again: a refund gives the cost back (capped at full;
 * a full bucket whose ts is not ahead of the clock is deleted), and does
 * nothing once the key is gone or its ts has reached that instant (the key
 * expired and was written anew).
 *
 * Reply fields (struct rl_decision):
 *   limited         1 when the bucket holds fewer than `cost` whole tokens,
 *                   or cost > capacity
 *   limit           capacity
 *   remaining       whole tokens left after this request (0 in a debt)
 *   retry_after_ns  when refused: the time until the bucket holds `cost`
 *                   tokens (exact: a retry at now + retry_after passes, one
 *                   ns earlier it does not); -1 s when allowed or when
 *                   cost > capacity (it can never pass)
 *   reset_after_ns  the time until the bucket is full again; 0 when full
 * Durations that do not fit an int64 (a huge capacity refilled at a tiny
 * rate) saturate at INT64_MAX.
 *
 * Cost 0 is a peek: it passes, reports the level and never writes. A
 * refused request writes nothing. With TOKEN_BUCKET_RATE_INF every request
 * passes (whatever its cost) with remaining = capacity, reset 0, and
 * nothing is written.
 *
 * Clock: when now is behind the stored ts_ns (a node's clock jumped back),
 * no time has passed: the level is the stored one, ts_ns stays where it is,
 * and refill resumes once the clock passes it again; retry_after and
 * reset_after include that gap. A stored level above capacity (the
 * capacity was lowered) reads as a full bucket.
 *
 * Debt (LIMITER ADJUST, token_bucket_adjust): work already done is
 * charged without a refusal, so the level may go below 0; every request,
 * and a peek of cost 0, is then refused until the refill has paid the
 * debt back and brought the cost, and retry_after is exactly that time.
 * A warm-up bucket's debt is the same state, so a bucket RELOADed from
 * warm-up to plain (or back) reads on.
 *
 * Warm-up (Guava's SmoothWarmingUp; token_bucket_params_warmup). With
 * `warmup` set the bucket also keeps `cold`, in ns, 0 .. warmup: how long
 * it has stood full, less what requests took since. Guava's storedPermits
 * are cold * max / warmup (in millionths of a token, floored), so they
 * grow from 0 to max over the warm-up (Guava's coolDownInterval); each
 * admitted request takes min(cost, permits) of them, and their time
 * (rounded up) off the cold. Keeping time rather than permits makes idle
 * time add up exactly, and a refund exact. A token taken at coldness
 * x costs, besides itself, (cold_factor - 1) * (x - thr) / (max - thr)
 * more tokens when x is above thr (the integral of Guava's slope over
 * the permits taken, floored to 1e-6 token), where, in millionths of a
 * token, W = warmup * rate (the tokens the warm-up would refill),
 * thr = W / 2 and max = thr + 2 * W / (1 + cold_factor). So a request
 * is still admitted when the bucket holds `cost` tokens (as today, and as
 * Guava's tryAcquire admits when nextFreeTicket is not ahead), but it pays
 * up to cold_factor times its cost: the level may go below 0 (a debt, as
 * Guava's nextFreeTicket in the future), and the next request waits for
 * the refill of what this one paid. A missing key is full and fully cold
 * (Guava starts cold). remaining is then max(0, tokens); retry_after the
 * refill to `cost` tokens (exact: the cold only changes once the bucket is
 * full); reset_after the refill to full; the expiry adds the time to cool
 * back to max, when the state equals a missing key. Guava's example:
 * 2 tokens/s, warmup 4 s, cold_factor 3: thr 4, max 8 tokens; after a
 * quiet period requests of 1 pay 2.75, 2.25, 1.75, 1.25, then 1 token
 * (1.375 s, 1.125 s, 0.875 s, 0.625 s, then 0.5 s of refill).
 *
 * Leaf layer: libc only, no globals. */
#ifndef PX_ALGORITHMS_TOKEN_BUCKET_H
#define PX_ALGORITHMS_TOKEN_BUCKET_H

#include <stdint.h>

#include "algorithms/rl.h"

#define TOKEN_BUCKET_OK     0
#define TOKEN_BUCKET_EARGS  -1 /* parameters, time or cost out of range */
#define TOKEN_BUCKET_ESTATE -2 /* a stored state no decision can come from */

/* Largest capacity: conf/limits.h LIMITS_MAX_COUNT, 2^53 - 1. */
#define TOKEN_BUCKET_MAX_CAPACITY INT64_C(9007199254740991)
/* Largest finite rate, 1e9 tokens/s: conf/limits.h LIMITS_MAX_RATE_MICRO. */
#define TOKEN_BUCKET_MAX_RATE_MICRO INT64_C(1000000000000000)
/* Unlimited rate: conf/limits.h LIMITS_RATE_INF. */
#define TOKEN_BUCKET_RATE_INF INT64_MAX
/* One token in units of frac: 1e15. */
#define TOKEN_BUCKET_FRAC_ONE INT64_C(1000000000000000)

/* Error texts (static, lowercase, fit for "-ERR <text>"). */
#define TOKEN_BUCKET_ERR_CAPACITY                                              \
    "token_bucket capacity must be between 1 and 2^53 - 1"
#define TOKEN_BUCKET_ERR_RATE                                                  \
    "token_bucket refill_per_sec must be positive and at most 1e9, or inf"
#define TOKEN_BUCKET_ERR_TIME "token_bucket time must not be negative"
#define TOKEN_BUCKET_ERR_COST "token_bucket cost must not be negative"
#define TOKEN_BUCKET_ERR_STATE                                                 \
    "token_bucket state is malformed (negative or out-of-range field)"
#define TOKEN_BUCKET_ERR_DELTA                                                 \
    "token_bucket adjustment must be between -(2^53 - 1) and 2^53 - 1"
#define TOKEN_BUCKET_ERR_WARMUP                                                \
    "token_bucket warmup must be between 1 ms and 1 day"
#define TOKEN_BUCKET_ERR_COLD                                                  \
    "token_bucket cold_factor must be an integer from 2 to 1000"
#define TOKEN_BUCKET_ERR_WARM_INF                                              \
    "token_bucket warmup needs a finite refill_per_sec"
#define TOKEN_BUCKET_ERR_WARM_SPAN                                             \
    "token_bucket warmup * refill_per_sec must be between 1 and 1e9 tokens"

/* Warm-up bounds: at most a day, cold_factor 2 .. 1000 (default 3), and
 * warmup * rate between 1 and 1e9 tokens, so that every product of the
 * warm-up math fits 128 bits and every value 2^53 (the Lua twin's). */
#define TOKEN_BUCKET_MAX_WARMUP_MS  INT64_C(86400000)
#define TOKEN_BUCKET_COLD_DEFAULT   3
#define TOKEN_BUCKET_MAX_COLD       1000
#define TOKEN_BUCKET_MICRO          INT64_C(1000000)
#define TOKEN_BUCKET_MAX_WARM_MICRO INT64_C(1000000000000000) /* 1e9 tok */

/* Validated parameters. */
struct token_bucket_params {
    int64_t capacity;   /* tokens, >= 1 */
    int64_t rate_micro; /* millionths of a token per second, >= 1 */
    int unlimited;      /* rate is TOKEN_BUCKET_RATE_INF: admit all */
    /* Warm-up (token_bucket_params_warmup); warmup_ns 0: none. The
     * lengths are in millionths of a token (see the file comment). */
    int64_t warmup_ns;   /* Guava's warmupPeriod */
    int64_t cold_factor; /* 2 .. TOKEN_BUCKET_MAX_COLD */
    int64_t thr;         /* thresholdPermits */
    int64_t span;        /* maxPermits - thresholdPermits, >= 1 */
};

/* The stored state (see the file comment). */
struct token_bucket_state {
    int64_t tokens; /* whole tokens, -(2^53 - 1) .. capacity (a debt
                       below 0: see the file comment) */
    int64_t frac;   /* 1e-15 tokens, 0 .. TOKEN_BUCKET_FRAC_ONE - 1 */
    int64_t ts_ns;  /* refill credited up to here, ns since the epoch */
    int64_t cold;   /* warm-up only: ns, 0 .. warmup (see the file comment;
                       tokens may then be negative); 0 without warm-up */
};

/* What a store does after a decision. */
enum token_bucket_write {
    TOKEN_BUCKET_WRITE_NONE, /* leave the key as it is */
    TOKEN_BUCKET_WRITE_SET,  /* HSET the fields of next, PEXPIRE expiry_ms */
};

/* The outcome of token_bucket_decide(). */
struct token_bucket_result {
    struct rl_decision d;           /* the five integers, before rounding */
    enum token_bucket_write write;  /* what to do with the key */
    struct token_bucket_state next; /* the state after this decision
                                       (refilled, cost taken if it passed);
                                       stored only when write is SET */
    int64_t expiry_ms;              /* PEXPIRE when write is SET, >= 1 */
};

/* Fills *p from the conf units. Returns TOKEN_BUCKET_OK, or
 * TOKEN_BUCKET_EARGS with *err a static text. */
int token_bucket_params_init(struct token_bucket_params *p, int64_t capacity,
                             int64_t refill_per_sec_micro, const char **err);

/* Adds the warm-up to *p (from token_bucket_params_init, finite rate):
 * warmup_ms 1 .. TOKEN_BUCKET_MAX_WARMUP_MS, cold_factor 2 ..
 * TOKEN_BUCKET_MAX_COLD (0: the default, 3). TOKEN_BUCKET_OK, or
 * TOKEN_BUCKET_EARGS with *err a static text (*p then unchanged). */
int token_bucket_params_warmup(struct token_bucket_params *p, int64_t warmup_ms,
                               int64_t cold_factor, const char **err);

/* The decision for a request of `cost` (>= 0; 0 peeks) at now_ns (>= 0)
 * against the stored state `st` (NULL when the key does not exist).
 * Returns TOKEN_BUCKET_OK with *out set; TOKEN_BUCKET_EARGS for bad
 * parameters, time or cost; TOKEN_BUCKET_ESTATE for a stored state with
 * tokens below -(2^53 - 1), another negative field or frac >= 1e15.
 * Nothing may be written on an error. */
int token_bucket_decide(const struct token_bucket_params *p,
                        const struct token_bucket_state *st, int64_t now_ns,
                        int64_t cost, struct token_bucket_result *out,
                        const char **err);

/* token_bucket_decide with WAIT (wait_ns >= 0; 0: none): a request that
 * would be refused but is due within wait_ns (retry_after <= wait_ns, to
 * the ns) is reserved: its cost is taken now (the level goes into debt,
 * as a warm take's slope is paid too) and written, and out->d says
 * limited with that retry_after (the time the reply is held), remaining
 * 0, reset_after the refill to full after the take. One ns beyond the
 * wait it is refused as without WAIT, nothing written; so is one whose
 * take would leave the level more than 2^53 - 1 tokens below full (the
 * deepest debt whose waits stay exact). */
int token_bucket_decide_wait(const struct token_bucket_params *p,
                             const struct token_bucket_state *st,
                             int64_t now_ns, int64_t cost, int64_t wait_ns,
                             struct token_bucket_result *out, const char **err);

/* LIMITER ADJUST: `delta` (|delta| <= 2^53 - 1) more tokens taken at now_ns
 * (delta > 0: never refused, the level may go below 0, a debt, down to
 * capacity - (2^53 - 1) at most, so every wait stays exact), or -delta
 * given back (delta < 0: capped at a full bucket). A warm bucket's cold
 * is untouched. out->d is what a peek of cost 1 answers after the change;
 * out->next the state (refilled to now, then adjusted), written (SET,
 * expiring when it is full again, and a warm one cold again; at least
 * 1 ms) unless nothing changed (delta 0, a full bucket given back, an
 * unlimited rate: NONE). Errors as token_bucket_decide's, and EARGS for a
 * delta out of range. */
int token_bucket_adjust(const struct token_bucket_params *p,
                        const struct token_bucket_state *st, int64_t now_ns,
                        int64_t delta, struct token_bucket_result *out,
                        const char **err);

#endif /* PX_ALGORITHMS_TOKEN_BUCKET_H */
