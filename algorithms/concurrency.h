/* Concurrency (in-flight) limit: at most `max` holders at once, each a
 * client-chosen token holding one slot until it is released or its lease
 * runs out, as a pure function of (parameters, stored holders, token,
 * now, cost).
 *
 * A holder is (token, lease end). It is live while its lease end is after
 * now: a holder that crashed frees its slot by itself when its lease runs
 * out. A request with a token and cost >= 1 (the slot is one whatever the
 * cost: the cost is for the rate limits beside it)
 *   - renews the lease of its token when the token holds a live slot
 *     (admitted, no second slot),
 *   - else takes a slot when fewer than max holders are live (admitted),
 *   - else is refused and writes nothing.
 * Cost 0 (a peek of the state) takes nothing and is refused only when more
 * than max holders are live (max lowered under them).
 * A release frees the token's live slot, if it holds one.
 *
 * Bounded memory: the holders after a decision are the live ones, plus the
 * new one, so a list never grows past max (it may hold more only when max
 * was lowered under live holders, until their leases run out).
 *
 * Parameters (conf/limits.h struct limits_concurrency):
 *   max       1 .. CONCURRENCY_MAX_HOLDERS
 *   lease_ms  1 .. CONCURRENCY_MAX_LEASE_MS (1 day), default 60 s
 * A token is 1 .. CONCURRENCY_MAX_TOKEN bytes (any bytes).
 *
 * Redis (the Lua twin, algorithms/lua/concurrency.lua): one ZSET per key,
 *   member  the token
 *   score   the lease end in microseconds since the epoch
 *   a take or renewal: ZREMRANGEBYSCORE key -inf <now> (the expired),
 *   ZADD key <now + lease> <token>, PEXPIRE key <until the last lease end>;
 *   a release: ZREM key <token> (counted only when its lease was live).
 *
 * Reply fields (struct rl_decision):
 *   limited         1 when refused
 *   limit           max
 *   remaining       max - live holders after this request, at least 0
 *   retry_after_ns  when refused: until the earliest lease ends; -1 s when
 *                   admitted
 *   reset_after_ns  until the last lease ends (then the key is as good as
 *                   missing); 0 with no live holder
 *
 * Clock: a lease end from the future stays live until then, so a clock
 * jump back never frees a slot early.
 *
 * Leaf layer: libc only, no globals, no allocation: the caller provides
 * the output array, whose tokens point into the input or at `token`. */
#ifndef PX_ALGORITHMS_CONCURRENCY_H
#define PX_ALGORITHMS_CONCURRENCY_H

#include <stddef.h>
#include <stdint.h>

#include "algorithms/rl.h"

#define CONCURRENCY_OK     0
#define CONCURRENCY_EARGS  -1 /* parameters, time, cost, token or buffer */
#define CONCURRENCY_ESTATE -2 /* a stored list no decision can come from */

/* Most holders of one key: conf/limits.h says it again. */
#define CONCURRENCY_MAX_HOLDERS 100000
/* Longest lease, 1 day, in ms. */
#define CONCURRENCY_MAX_LEASE_MS INT64_C(86400000)
/* Longest token (LIMITER CHECK ... ID <token>), bytes. */
#define CONCURRENCY_MAX_TOKEN 512

/* Error texts (static, lowercase, fit for "-ERR <text>"). */
#define CONCURRENCY_ERR_MAX   "concurrency max must be between 1 and 100000"
#define CONCURRENCY_ERR_LEASE "concurrency lease must be between 1 ms and 1 day"
#define CONCURRENCY_ERR_TIME  "concurrency time must not be negative"
#define CONCURRENCY_ERR_COST  "concurrency cost must not be negative"
#define CONCURRENCY_ERR_TOKEN "concurrency ID must be between 1 and 512 bytes"
#define CONCURRENCY_ERR_BUFFER                                                 \
    "concurrency output buffer holds fewer than the holders and one more"
#define CONCURRENCY_ERR_STATE                                                  \
    "concurrency state is malformed (negative lease end or bad token)"

/* Validated parameters, the lease in ns. */
struct concurrency_params {
    int64_t max;      /* 1 .. CONCURRENCY_MAX_HOLDERS */
    int64_t lease_ns; /* lease_ms * 1e6 */
};

/* One holder: its token (borrowed) and when its lease ends. */
struct concurrency_holder {
    const char *token; /* borrowed: len bytes, not NUL-ended */
    size_t len;        /* 1 .. CONCURRENCY_MAX_TOKEN */
    int64_t until_ns;  /* lease end, ns since the epoch */
};

/* What a store does after a decision. */
enum concurrency_write {
    CONCURRENCY_WRITE_NONE, /* leave the key as it is */
    CONCURRENCY_WRITE_SET,  /* make the holders next[0 .. next_n), PEXPIRE
                               expiry_ms */
    CONCURRENCY_WRITE_DEL,  /* no holder is left: delete the key */
};

/* The outcome of a decision or a release. */
struct concurrency_result {
    struct rl_decision d;         /* the five integers, before rounding */
    enum concurrency_write write; /* what to do with the key */
    size_t next_n;                /* holders in next (the live ones after
                                     the change) */
    int took;                     /* 1: a new slot, 2: a renewal, 0: none
                                     (a release: 1 when it freed one) */
    int64_t expiry_ms;            /* PEXPIRE when write is SET, >= 1 */
};

/* Fills *p from the conf units. CONCURRENCY_OK, or CONCURRENCY_EARGS with
 * *err a static text. */
int concurrency_params_init(struct concurrency_params *p, int64_t max,
                            int64_t lease_ms, const char **err);

/* The decision for `token` (len bytes) with `cost` (>= 0; 0 peeks) at
 * now_ns (>= 0) against the n stored holders h (NULL when n is 0: also a
 * missing key). The live holders after it go to next[0 .. next_n) (next
 * has room for next_cap >= n + 1 and must not overlap h); when write is
 * NONE they are the live ones, for information. Without a token (NULL,
 * len 0: a PEEK without ID) the decision is a new holder's, and nothing is
 * written. CONCURRENCY_OK with *out set, else
 * CONCURRENCY_EARGS or CONCURRENCY_ESTATE with *err. */
int concurrency_decide(const struct concurrency_params *p,
                       const struct concurrency_holder *h, size_t n,
                       const char *token, size_t len, int64_t now_ns,
                       int64_t cost, struct concurrency_holder *next,
                       size_t next_cap, struct concurrency_result *out,
                       const char **err);

/* Frees the live slot of `token`: out->took 1 when it held one (then
 * write is SET or DEL), else 0 (write NONE). out->d is the state after
 * it, as cost 0 shows it. Same buffers and errors as decide. */
int concurrency_release(const struct concurrency_params *p,
                        const struct concurrency_holder *h, size_t n,
                        const char *token, size_t len, int64_t now_ns,
                        struct concurrency_holder *next, size_t next_cap,
                        struct concurrency_result *out, const char **err);

#endif /* PX_ALGORITHMS_CONCURRENCY_H */
