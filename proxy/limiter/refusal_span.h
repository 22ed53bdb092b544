/* The refusal cache's clock: when a cached refusal may answer, exactly.
 *
 * Design note. The cache never reads the node's clock when it answers: it
 * knows it from the calls that read it. A call sent at local time `sent`
 * whose reply, read at `recv`, carries the node's TIME `t` (truncated to a
 * microsecond) was decided at some instant between sent and recv, so the
 * node's clock minus the local one lies in [t - recv, t + 1 us - sent]:
 * every such call (the learning call, a later one that saw the same state,
 * the tracker's own TIME) narrows it, and their intersection holds. At a
 * local instant the node's clock is then within a span [lo, hi] as wide as
 * the narrowest call's round trip.
 *
 * A refusal computed at hi is one Redis makes too (refusals only get rarer
 * as time passes), but its other fields (remaining, retry_after,
 * reset_after) move with time: computed at hi they may be a rounding step
 * ahead of the instant Redis would decide at. Each field is monotone in
 * time for a fixed state (waits fall, what remains grows), and so is its
 * rounding, so a field that shows the same at both ends of the span shows
 * that at every instant between. The rule: the cache answers only when the
 * reply is the same at lo and at hi; otherwise Redis decides (a miss).
 *
 * Pure: no clock, no I/O (the cache passes the local times in). */
#ifndef PX_PROXY_LIMITER_REFUSAL_SPAN_H
#define PX_PROXY_LIMITER_REFUSAL_SPAN_H

#include <stdint.h>

#include "algorithms/gcra.h"
#include "algorithms/rl.h"

/* Bounds on the node's clock minus the local one (ns): lo <= offset <= hi
 * (the span is empty when lo > hi: the clocks drifted, nothing answers). */
struct refusal_span_clock {
    int64_t lo_ns;
    int64_t hi_ns;
};

/* The node's clock at one local instant (ns, at TIME's microsecond
 * resolution): lo <= node time <= hi. */
struct refusal_span {
    int64_t lo_ns;
    int64_t hi_ns;
};

/* How a reply shows the durations, whose equality the rule checks. */
enum refusal_span_show {
    /* whole seconds, redis-cell's rounding (rl_seconds): CL.THROTTLE */
    REFUSAL_SPAN_SECONDS,
    /* to the millisecond, rounded down and up alike: LIMITER, whose
     * replies show seconds (a function of the whole milliseconds) or
     * milliseconds rounded up */
    REFUSAL_SPAN_MS,
};

/* The clock bounds a call gives: sent at local `sent_ns`, its reply read
 * at local `recv_ns` (>= sent_ns), the node's TIME in it `node_ns`. */
void refusal_span_clock_of_call(int64_t node_ns, uint64_t sent_ns,
                                uint64_t recv_ns,
                                struct refusal_span_clock *out);

/* Narrows `clk` with the bounds `more` of another call (both hold). */
void refusal_span_clock_tighten(struct refusal_span_clock *clk,
                                const struct refusal_span_clock *more);

/* The node's clock at local time `now_local_ns` under `clk`, in *out. 1,
 * or 0 when the bounds are empty. */
int refusal_span_now(const struct refusal_span_clock *clk,
                     uint64_t now_local_ns, struct refusal_span *out);

/* 1 when decisions `a` and `b` give the same reply as `show` shows it
 * (the limited flag, limit, remaining, and both durations), else 0. */
int refusal_span_same(const struct rl_decision *a, const struct rl_decision *b,
                      enum refusal_span_show show);

/* A CL.THROTTLE with `p` on a key holding (have_tat, tat_ns), at a node
 * time within `s`: 1 when it is refused with the same reply at both ends
 * of s (*res the decision at s->hi), else 0 (Redis decides). */
int refusal_span_gcra(const struct gcra_params *p, int have_tat, int64_t tat_ns,
                      const struct refusal_span *s, struct gcra_result *res);

#endif /* PX_PROXY_LIMITER_REFUSAL_SPAN_H */
