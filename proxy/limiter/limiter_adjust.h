/* LIMITER ADJUST <path> <delta> [MS] [HEADERS]: corrects what a CHECK
 * took once the real cost is known (an LLM gateway reserves an estimate
 * of tokens, then charges or gives back the difference). delta > 0
 * charges that many more units at every level of the path and is never
 * refused (the work is done: the identity may go into debt, and later
 * checks are refused until time pays it back); delta < 0 gives back,
 * never beyond a fresh state; delta 0 writes nothing. The reply is what
 * LIMITER PEEK <path> (COST 1) answers right after the change, in the
 * form asked (MS, HEADERS). docs/limiter.md says what each algorithm
 * does with it. */
#ifndef PX_PROXY_LIMITER_LIMITER_ADJUST_H
#define PX_PROXY_LIMITER_LIMITER_ADJUST_H

#include <stdint.h>

#include "conf/limits.h"

struct req;

/* Largest |delta|: the scripts carry numbers as Lua doubles, exact up to
 * 2^53 - 1 (as COST). */
#define LIMITER_ADJUST_MAX ((INT64_C(1) << 53) - 1)

/* Parses the delta (argument 3, after the path) into *delta; the
 * options after it (MS, HEADERS) are the tree's. 0, or -1 after replying
 * the error to `req`. */
int limiter_adjust_parse(struct req *req, int64_t *delta);

/* Whether a limit of algorithm `a` takes part in an ADJUST: a
 * concurrency slot is not a cost, so such levels are skipped. Pure. */
int limiter_adjust_applies(enum limits_algo a);

#endif /* PX_PROXY_LIMITER_LIMITER_ADJUST_H */
