/* Concurrency limit: holders with leases (see concurrency.h).
 *
 * Flow: the store reads the key's holders into an array, calls
 * concurrency_decide() (CHECK, PEEK) or concurrency_release() (RELEASE)
 * with the node's time and an output array of n + 1 holders, and writes
 * the next holders when told. One pass keeps the live holders in their
 * stored order (the token's own taken out and put last on a renewal), so
 * a list is never sorted; the earliest and latest lease ends come from
 * the same pass. */
#include "algorithms/concurrency.h"

#include <string.h>

int concurrency_params_init(struct concurrency_params *p, int64_t max,
                            int64_t lease_ms, const char **err)
{
    memset(p, 0, sizeof(*p));
    if (max < 1 || max > CONCURRENCY_MAX_HOLDERS) {
        *err = CONCURRENCY_ERR_MAX;
        return CONCURRENCY_EARGS;
    }
    if (lease_ms < 1 || lease_ms > CONCURRENCY_MAX_LEASE_MS) {
        *err = CONCURRENCY_ERR_LEASE;
        return CONCURRENCY_EARGS;
    }
    p->max = max;
    p->lease_ns = lease_ms * RL_NS_PER_MS;
    return CONCURRENCY_OK;
}

/* The live holders of h other than `token` into next (their count in
 * *kept), whether token holds a live slot (*mine), and the earliest and
 * latest lease ends among the kept ones (0 when none). CONCURRENCY_OK,
 * or an error for a malformed holder or too small a buffer. */
static int cc_scan(const struct concurrency_holder *h, size_t n,
                   const char *token, size_t len, int64_t now,
                   struct concurrency_holder *next, size_t next_cap,
                   size_t *kept, int *mine, int64_t *first, int64_t *last,
                   const char **err)
{
    size_t i, k = 0;

    *mine = 0;
    *first = 0;
    *last = 0;
    if (n > 0 && h == NULL) {
        *err = CONCURRENCY_ERR_STATE;
        return CONCURRENCY_ESTATE;
    }
    if (next_cap < n + 1) {
        *err = CONCURRENCY_ERR_BUFFER;
        return CONCURRENCY_EARGS;
    }
    for (i = 0; i < n; i++) {
        if (h[i].until_ns < 0 || h[i].len < 1 ||
            h[i].len > CONCURRENCY_MAX_TOKEN || h[i].token == NULL) {
            *err = CONCURRENCY_ERR_STATE;
            return CONCURRENCY_ESTATE;
        }
        if (h[i].until_ns <= now) {
            continue; /* its lease ran out: its slot is free */
        }
        if (len > 0 && h[i].len == len && memcmp(h[i].token, token, len) == 0) {
            *mine = 1;
            continue;
        }
        if (k == 0 || h[i].until_ns < *first) {
            *first = h[i].until_ns;
        }
        if (h[i].until_ns > *last) {
            *last = h[i].until_ns;
        }
        next[k++] = h[i];
    }
    *kept = k;
    return CONCURRENCY_OK;
}

/* The five integers for `live` holders whose last lease ends at `last`. */
static void cc_state(const struct concurrency_params *p, size_t live,
                     int64_t last, int64_t now, struct concurrency_result *out)
{
    out->d.limit = p->max;
    out->d.remaining = (int64_t)live < p->max ? p->max - (int64_t)live : 0;
    out->d.retry_after_ns = -RL_NS_PER_SEC;
    out->d.reset_after_ns = live > 0 ? last - now : 0;
    out->expiry_ms = live > 0 ? rl_ceil_ms(last - now) : 0;
}

static int cc_check_args(const struct concurrency_params *p, int64_t now,
                         const char *token, size_t len, int need_token,
                         const char **err)
{
    if (p->max < 1 || p->max > CONCURRENCY_MAX_HOLDERS || p->lease_ns < 1 ||
        p->lease_ns > CONCURRENCY_MAX_LEASE_MS * RL_NS_PER_MS) {
        *err = p->max < 1 || p->max > CONCURRENCY_MAX_HOLDERS
                   ? CONCURRENCY_ERR_MAX
                   : CONCURRENCY_ERR_LEASE;
        return CONCURRENCY_EARGS;
    }
    if (now < 0) {
        *err = CONCURRENCY_ERR_TIME;
        return CONCURRENCY_EARGS;
    }
    if ((need_token || len > 0) &&
        (token == NULL || len < 1 || len > CONCURRENCY_MAX_TOKEN)) {
        *err = CONCURRENCY_ERR_TOKEN;
        return CONCURRENCY_EARGS;
    }
    return CONCURRENCY_OK;
}

int concurrency_decide(const struct concurrency_params *p,
                       const struct concurrency_holder *h, size_t n,
                       const char *token, size_t len, int64_t now_ns,
                       int64_t cost, struct concurrency_holder *next,
                       size_t next_cap, struct concurrency_result *out,
                       const char **err)
{
    size_t kept;
    int mine, rc;
    int64_t first, last, until;

    memset(out, 0, sizeof(*out));
    if (cost < 0) {
        *err = CONCURRENCY_ERR_COST;
        return CONCURRENCY_EARGS;
    }
    rc = cc_check_args(p, now_ns, token, len, 0, err);
    if (rc == CONCURRENCY_OK) {
        rc = cc_scan(h, n, token, len, now_ns, next, next_cap, &kept, &mine,
                     &first, &last, err);
    }
    if (rc != CONCURRENCY_OK) {
        return rc;
    }
    if (cost == 0) {
        /* The state as it is: the token's own slot counts as held. */
        size_t live = kept;
        if (mine) {
            size_t i;
            for (i = 0; i < n; i++) {
                if (h[i].until_ns > now_ns && h[i].len == len &&
                    memcmp(h[i].token, token, len) == 0) {
                    next[kept] = h[i];
                    last = h[i].until_ns > last ? h[i].until_ns : last;
                    break;
                }
            }
            live++;
        }
        out->next_n = live;
        cc_state(p, live, last, now_ns, out);
        out->d.limited = (int64_t)live > p->max;
        return CONCURRENCY_OK;
    }
    if (!mine && (int64_t)kept >= p->max) {
        /* Full: refused, nothing written. */
        out->next_n = kept;
        cc_state(p, kept, last, now_ns, out);
        out->d.limited = 1;
        out->d.remaining = 0;
        out->d.retry_after_ns = first - now_ns;
        return CONCURRENCY_OK;
    }
    until = rl_add_sat(now_ns, p->lease_ns);
    cc_state(p, kept + 1, until > last ? until : last, now_ns, out);
    if (len == 0) {
        /* No token (a PEEK without ID): what a new holder would get. */
        out->next_n = kept;
        return CONCURRENCY_OK;
    }
    next[kept].token = token;
    next[kept].len = len;
    next[kept].until_ns = until;
    out->next_n = kept + 1;
    out->took = mine ? 2 : 1;
    out->write = CONCURRENCY_WRITE_SET;
    return CONCURRENCY_OK;
}

int concurrency_release(const struct concurrency_params *p,
                        const struct concurrency_holder *h, size_t n,
                        const char *token, size_t len, int64_t now_ns,
                        struct concurrency_holder *next, size_t next_cap,
                        struct concurrency_result *out, const char **err)
{
    size_t kept;
    int mine, rc;
    int64_t first, last;

    memset(out, 0, sizeof(*out));
    rc = cc_check_args(p, now_ns, token, len, 1, err);
    if (rc == CONCURRENCY_OK) {
        rc = cc_scan(h, n, token, len, now_ns, next, next_cap, &kept, &mine,
                     &first, &last, err);
    }
    if (rc != CONCURRENCY_OK) {
        return rc;
    }
    out->next_n = kept;
    cc_state(p, kept, last, now_ns, out);
    out->d.limited = (int64_t)kept > p->max;
    if (mine) {
        out->took = 1;
        out->write = kept > 0 ? CONCURRENCY_WRITE_SET : CONCURRENCY_WRITE_DEL;
    }
    return CONCURRENCY_OK;
}
