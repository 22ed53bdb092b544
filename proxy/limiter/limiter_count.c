/* The per-rule counting of LIMITER CHECK (see limiter_count.h): read from
 * the decisions of a store_check, written to the rules' counters. */
#include "proxy/limiter/limiter_count.h"

#include <string.h>

#include "algorithms/rl.h"
#include "proxy/core/metrics.h"
#include "proxy/limiter/store.h"

void limiter_count_error(const struct store_check *c)
{
    unsigned i;
    int seen[LIMITER_MAX_LEVELS] = { 0 };

    for (i = 0; i < c->n; i++) {
        unsigned l = c->lim[i].level;
        if (l < LIMITER_MAX_LEVELS && !seen[l]) {
            seen[l] = 1;
            metrics_rule_count(c->lim[i].rule, METRICS_ERRORS);
        }
    }
}

void limiter_count_tally(const struct metrics *m, const struct store_check *c,
                         struct limiter_count_tally *t)
{
    unsigned i;

    memset(t, 0, sizeof(*t));
    for (i = 0; i < c->n; i++) {
        const struct rl_decision *d = &c->res[i];
        unsigned l = c->lim[i].level;
        if (l >= LIMITER_MAX_LEVELS) {
            continue;
        }
        t->seen[l] = 1;
        t->rule[l] = c->lim[i].rule;
        t->shadow[l] |= c->lim[i].shadow;
        t->fail_open[l] |= c->lim[i].fail_open;
        t->limited[l] |=
            c->lim[i].shadow ? c->lim[i].shadow_limited : d->limited != 0;
        t->near[l] |=
            d->limited || metrics_near_limit(m, d->limit, d->remaining);
    }
}

void limiter_count_check(const struct limiter_count_tally *t, int admitted)
{
    unsigned i;

    for (i = 0; i < LIMITER_MAX_LEVELS; i++) {
        if (!t->seen[i]) {
            continue;
        }
        if (t->shadow[i] && t->limited[i]) {
            metrics_rule_count(t->rule[i], METRICS_SHADOW_LIMITED);
        } else if (admitted && t->fail_open[i]) {
            metrics_rule_count(t->rule[i], METRICS_FAIL_OPEN);
        } else if (admitted) {
            metrics_rule_count(t->rule[i], METRICS_ALLOWED);
            if (t->near[i]) {
                metrics_rule_count(t->rule[i], METRICS_NEAR_LIMIT);
            }
        } else if (t->limited[i]) {
            metrics_rule_count(t->rule[i], METRICS_LIMITED);
        }
    }
}
