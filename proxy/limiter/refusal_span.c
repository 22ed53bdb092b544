/* The refusal cache's clock (see refusal_span.h). */
#include "proxy/limiter/refusal_span.h"

/* Nanoseconds per microsecond: TIME's resolution. */
#define REFUSAL_SPAN_NS_PER_US 1000

void refusal_span_clock_of_call(int64_t node_ns, uint64_t sent_ns,
                                uint64_t recv_ns,
                                struct refusal_span_clock *out)
{
    /* The node read its clock at a local instant in [sent, recv]; TIME
     * drops the part below a microsecond, so its clock then was in
     * [node_ns, node_ns + 1 us). */
    out->lo_ns = node_ns - (int64_t)recv_ns;
    out->hi_ns = node_ns + REFUSAL_SPAN_NS_PER_US - (int64_t)sent_ns;
}

void refusal_span_clock_tighten(struct refusal_span_clock *clk,
                                const struct refusal_span_clock *more)
{
    clk->lo_ns = more->lo_ns > clk->lo_ns ? more->lo_ns : clk->lo_ns;
    clk->hi_ns = more->hi_ns < clk->hi_ns ? more->hi_ns : clk->hi_ns;
}

/* `ns` rounded down to TIME's microsecond (ns >= 0). */
static int64_t refusal_span_us(int64_t ns)
{
    return ns - ns % REFUSAL_SPAN_NS_PER_US;
}

int refusal_span_now(const struct refusal_span_clock *clk,
                     uint64_t now_local_ns, struct refusal_span *out)
{
    if (clk->lo_ns > clk->hi_ns) {
        return 0;
    }
    /* A script reads TIME, truncated: at a node time in [lo, hi] it sees
     * one in [lo, hi] truncated at both ends. */
    out->lo_ns = refusal_span_us((int64_t)now_local_ns + clk->lo_ns);
    out->hi_ns = refusal_span_us((int64_t)now_local_ns + clk->hi_ns);
    return 1;
}

/* A duration as `show` shows it is the same for `a` and `b`. */
static int refusal_span_same_ns(int64_t a, int64_t b,
                                enum refusal_span_show show)
{
    if (show == REFUSAL_SPAN_SECONDS) {
        return rl_seconds(a) == rl_seconds(b);
    }
    /* -1 s (never, or admitted) is a whole millisecond count too. */
    return a / RL_NS_PER_MS == b / RL_NS_PER_MS &&
           rl_ceil_ms(a) == rl_ceil_ms(b);
}

int refusal_span_same(const struct rl_decision *a, const struct rl_decision *b,
                      enum refusal_span_show show)
{
    return (a->limited != 0) == (b->limited != 0) && a->limit == b->limit &&
           a->remaining == b->remaining &&
           refusal_span_same_ns(a->retry_after_ns, b->retry_after_ns, show) &&
           refusal_span_same_ns(a->reset_after_ns, b->reset_after_ns, show);
}

int refusal_span_gcra(const struct gcra_params *p, int have_tat, int64_t tat_ns,
                      const struct refusal_span *s, struct gcra_result *res)
{
    struct gcra_result lo;
    const char *err;

    return s->lo_ns <= s->hi_ns &&
           gcra_decide(p, have_tat, tat_ns, s->hi_ns, res, &err) == GCRA_OK &&
           res->d.limited &&
           gcra_decide(p, have_tat, tat_ns, s->lo_ns, &lo, &err) == GCRA_OK &&
           refusal_span_same(&lo.d, &res->d, REFUSAL_SPAN_SECONDS);
}
