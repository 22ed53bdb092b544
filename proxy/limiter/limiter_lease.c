/* Leases for hot admitted identities (see limiter_lease.h).
 *
 * Design: a lease is keyed by the path of a check's deepest level (the
 * node with `lease: N`), so every path that charges the same keys shares
 * it. The CHECK that takes one is the client's own call with its cost
 * replaced by N (limiter_tree.c builds and runs it as any other), so every
 * level is charged N at Redis before anything is admitted: the proxy
 * never admits what Redis did not grant it. A take that Redis refuses is
 * followed by the plain check of the client's cost, so near the limit a
 * lease never refuses what a plain check would admit. What is left of a
 * lease goes back as the client call LIMITER ADJUST <path> -units would,
 * through the same tree code, from a request of the proxy's own whose
 * reply is dropped (best effort: a give-back lost on the way leaves the
 * units charged, the safe side).
 *
 * While a take is in flight, the other checks of its path wait for it
 * (parked through their request's unode, at most LIMITER_LEASE_QUEUE_MAX,
 * past that plain): each still holds its place in its client's replies,
 * so nothing is reordered. Once the take settles (granted, refused,
 * failed, or its client left) they move to the leases' ready list, and
 * the loop's flush pass runs them again in arrival order from the
 * limiter's entry (limiter_leases_drain): from the new lease, or as the
 * plain checks they would have been. Never run again from inside the
 * decision that settled them, so nothing here is re-entered while the
 * map is swept or a lease is held. A waiter whose client leaves is
 * unlinked and freed at once (req->cancel). */
#include "proxy/limiter/limiter_lease.h"

#include <stdio.h>
#include <string.h>

#include <uv.h>

#include "conf/conf.h"
#include "conf/limits.h"
#include "parser/resp.h"
#include "proxy/core/core.h"
#include "proxy/core/req.h"
#include "proxy/core/util.h"
#include "proxy/limiter/limiter_reply.h"
#include "proxy/limiter/store.h"

enum limiter_lease_use limiter_lease_use(const struct limiter_lease *l,
                                         int64_t n, int64_t cost, bool eligible)
{
    if (!eligible || n <= 0 || cost > n) {
        return LIMITER_LEASE_PLAIN;
    }
    if (l == NULL) {
        return LIMITER_LEASE_TAKE;
    }
    if (l->state == LIMITER_LEASE_LIVE && l->n == n && l->units >= cost) {
        return LIMITER_LEASE_LOCAL;
    }
    if (l->state == LIMITER_LEASE_IN_FLIGHT && l->taker != NULL && l->n == n &&
        l->nwait < LIMITER_LEASE_QUEUE_MAX &&
        l->wait_units + cost <= LIMITER_LEASE_QUEUE_TAKES * n) {
        return LIMITER_LEASE_QUEUE;
    }
    /* A take in flight with its queue full, one that failed, refused
     * lately, or a lease of another N (a reload) that the caller has not
     * given back yet. */
    return LIMITER_LEASE_PLAIN;
}

bool limiter_lease_expired(const struct limiter_lease *l, uint64_t now_ms,
                           unsigned ms)
{
    /* A take still on its way is waited for far longer: dropping it
     * would leave its N charged and never given back. Only a take whose
     * client left before the store answered (nobody records it) stays
     * in flight that long. */
    if (l->state == LIMITER_LEASE_IN_FLIGHT && ms < LIMITER_LEASE_FLIGHT_MS) {
        ms = LIMITER_LEASE_FLIGHT_MS;
    }
    return now_ms >= l->since_ms + ms;
}

void limiter_lease_reply(const struct limiter_lease *l, int64_t elapsed_ns,
                         struct rl_decision *out)
{
    *out = l->taken;
    out->limited = 0;
    out->remaining = l->taken.remaining + l->units;
    out->retry_after_ns = -RL_NS_PER_SEC;
    out->reset_after_ns = l->taken.reset_after_ns > elapsed_ns
                              ? l->taken.reset_after_ns - elapsed_ns
                              : 0;
}

void limiter_leases_init(struct limiter_leases *ls, unsigned ms)
{
    memset(ls, 0, sizeof(*ls));
    hmap_init(&ls->map);
    queue_init(&ls->ready);
    ls->ms = ms;
    ls->max = LIMITER_LEASE_MAX_HELD;
}

/* Loop time now, in ms. */
static uint64_t limiter_lease_now(const struct limiter_leases *ls)
{
    return uv_now(ls->core->loop);
}

static void limiter_lease_taker_left(struct req *req);

/* The take of `l` settled (or `l` is about to go): its taker's `cancel`
 * is no longer the lease's, and the checks queued behind it are ready
 * to run again, in order. */
static void limiter_lease_settle(struct limiter_leases *ls,
                                 struct limiter_lease *l)
{
    struct req *t = l->taker;

    if (t != NULL && t->cancel == limiter_lease_taker_left) {
        t->cancel = NULL;
        t->cancel_ctx = NULL;
    }
    l->taker = NULL;
    while (!queue_empty(&l->waiting)) {
        struct queue *n = queue_head(&l->waiting);

        queue_remove(n);
        container_of(n, struct req, unode)->cancel_ctx = NULL;
        queue_insert_tail(&ls->ready, n);
    }
    l->nwait = 0;
    l->wait_units = 0;
}

/* A queued check's client left (req_orphan): it leaves the queue (or
 * the ready list) and, owing nothing, is freed. Its units stay counted
 * in the queue's until the take settles (the bound only gets tighter). */
static void limiter_lease_waiter_left(struct req *req)
{
    struct limiter_lease *l = req->cancel_ctx;

    queue_remove(&req->unode);
    if (l != NULL) {
        l->nwait--;
    }
    req->cancel = NULL;
    req->cancel_ctx = NULL;
    if (req->owed == 0) {
        req_free(req);
    }
}

/* The taker's client left while its take was on its way: the store
 * drops the answer, so nobody would record the lease. The path stays
 * without one (plain checks) until LIMITER_LEASE_FLIGHT_MS after the
 * take was sent, and what waited on it goes on now. */
static void limiter_lease_taker_left(struct req *req)
{
    struct limiter_lease *l = req->cancel_ctx;

    req->cancel = NULL;
    req->cancel_ctx = NULL;
    limiter_lease_settle(l->ls, l);
    if (!queue_linked(&req->unode) && req->owed == 0) {
        req_free(req);
    }
}

void limiter_leases_drain(struct limiter_leases *ls)
{
    while (!queue_empty(&ls->ready)) {
        struct req *req =
            container_of(queue_head(&ls->ready), struct req, unode);

        req->cancel = NULL;
        req->cancel_ctx = NULL;
        req_resume(req); /* unlinks it, then the limiter's entry again */
    }
}

/* The reply of a give-back: only a shutdown waits for it (whatever it
 * says: a failed one leaves the units charged, the safe side). */
static void limiter_lease_gave(struct req *req, const char *frame, size_t len)
{
    struct limiter_leases *ls = req->ctx;

    (void)frame;
    (void)len;
    if (ls->giving > 0) {
        ls->giving--;
    }
}

bool limiter_leases_stop_from(struct limiter_leases *ls, uint64_t now_ms)
{
    ls->stop_by = now_ms + LIMITER_LEASE_STOP_MS;
    return ls->giving > 0;
}

bool limiter_leases_stop_waits(const struct limiter_leases *ls, uint64_t now_ms)
{
    return ls->giving > 0 && now_ms < ls->stop_by;
}

/* Where a give-back goes on when the store held it (a cluster before its
 * slot map). */
static void limiter_lease_resume(struct req *req)
{
    struct limiter_leases *ls = req->ctx;

    ls->adjust(ls->adjust_ctx, req, limiter_lease_resume);
}

/* Sends LIMITER ADJUST <path> -<units> as the proxy's own request. */
static void limiter_lease_send_back(struct limiter_leases *ls,
                                    const struct limiter_lease *l)
{
    char num[32];
    const char *argv[4] = { "LIMITER", "ADJUST", l->path, num };
    struct req *req;

    if (l->state != LIMITER_LEASE_LIVE || l->units <= 0) {
        return;
    }
    snprintf(num, sizeof(num), "%lld", -(long long)l->units);
    ls->returned_units += (uint64_t)l->units;
    req = req_own_argv(4, argv, limiter_lease_gave, ls);
    ls->giving++;
    ls->adjust(ls->adjust_ctx, req, limiter_lease_resume);
}

/* A lease that has left the map (or is leaving it with the sweep): what
 * waited on its take goes on, what it holds goes back when asked, and it
 * is freed. */
static void limiter_lease_end(struct limiter_leases *ls,
                              struct limiter_lease *l, bool give_back)
{
    limiter_lease_settle(ls, l);
    if (give_back) {
        limiter_lease_send_back(ls, l);
    }
    px_free(l);
}

/* hmap_sweep's visitor: gives back and frees what expired. */
static int limiter_lease_sweep(void *val, void *arg)
{
    struct limiter_lease *l = val;
    struct limiter_leases *ls = arg;

    if (!limiter_lease_expired(l, limiter_lease_now(ls), ls->ms)) {
        return 0;
    }
    limiter_lease_end(ls, l, true);
    return 1;
}

/* hmap_sweep's visitor for all: gives back and frees every lease. */
static int limiter_lease_sweep_all(void *val, void *arg)
{
    limiter_lease_end(arg, val, true);
    return 1;
}

/* A RELOAD replaced the tree: every lease goes back (its N, its levels
 * may have changed). */
static void limiter_lease_tree_check(struct limiter_leases *ls)
{
    if (*ls->limits != ls->tree) {
        limiter_leases_give_back_all(ls);
        ls->tree = *ls->limits;
    }
}

void limiter_leases_cron(struct limiter_leases *ls, uint64_t now_ms)
{
    (void)now_ms; /* the sweep reads the loop's clock itself */
    if (!ls->on || ls->map.count == 0) {
        return;
    }
    limiter_lease_tree_check(ls);
    ls->cursor = 0;
    hmap_sweep(&ls->map, &ls->cursor, ls->map.nbuckets, limiter_lease_sweep,
               ls);
}

void limiter_leases_give_back_all(struct limiter_leases *ls)
{
    if (!ls->on || ls->map.count == 0) {
        return;
    }
    ls->cursor = 0;
    hmap_sweep(&ls->map, &ls->cursor, ls->map.nbuckets, limiter_lease_sweep_all,
               ls);
}

void limiter_leases_free(struct limiter_leases *ls)
{
    hmap_free(&ls->map, px_free);
}

void limiter_lease_drop(struct limiter_leases *ls, const char *path,
                        size_t plen, bool give_back)
{
    struct limiter_lease *l;

    if (ls == NULL || !ls->on) {
        return;
    }
    l = hmap_del(&ls->map, path, plen);
    if (l != NULL) {
        limiter_lease_end(ls, l, give_back);
    }
}

/* Whether no level of `lv` is shadow (a shadow level never refuses, so
 * what a lease took there could not be told from what it admitted) and
 * none holds a concurrency limit (a slot is a token's, taken by each
 * check: a lease would admit without taking it). */
static bool limiter_lease_no_shadow(const struct limiter_leases *ls,
                                    const struct limits_levels *lv)
{
    size_t i, k;

    if (ls->conf->limiter_shadow) {
        return false;
    }
    for (i = 0; i < lv->n; i++) {
        if (lv->level[i].shadow) {
            return false;
        }
        for (k = 0; k < lv->level[i].nlimits; k++) {
            if (lv->level[i].limits[k].algo == LIMITS_CONCURRENCY) {
                return false;
            }
        }
    }
    return true;
}

int limiter_lease_before(struct limiter_leases *ls, struct req *req,
                         const struct limits_levels *lv, int64_t *cost,
                         int64_t wait_ns, unsigned form,
                         void (*resume)(struct req *req))
{
    const struct limits_level *deep;
    struct limiter_lease *l;
    struct rl_decision d;
    uint64_t now;
    int64_t v[5];
    bool eligible;

    if (ls == NULL || !ls->on) {
        return 0;
    }
    ls->taking = NULL; /* whatever was decided before was not sent */
    if (lv->n == 0) {
        return 0;
    }
    deep = &lv->level[lv->n - 1];
    if (deep->lease <= 0) {
        return 0;
    }
    limiter_lease_tree_check(ls);
    now = limiter_lease_now(ls);
    l = hmap_get(&ls->map, deep->path, deep->path_len);
    if (l != NULL && l->state == LIMITER_LEASE_IN_FLIGHT && l->taker == req) {
        /* The same take tried again (overrides changed under it). */
        *cost = l->n;
        return 0;
    }
    if (l != NULL && (limiter_lease_expired(l, now, ls->ms) ||
                      (l->state == LIMITER_LEASE_LIVE &&
                       (l->units < *cost || l->n != deep->lease)))) {
        /* Over, or too little left for this check: given back first. */
        hmap_del(&ls->map, deep->path, deep->path_len);
        limiter_lease_end(ls, l, true);
        l = NULL;
    }
    eligible = wait_ns == 0 && !(form & LIMITER_REPLY_HEADERS) &&
               limiter_lease_no_shadow(ls, lv);
    switch (limiter_lease_use(l, deep->lease, *cost, eligible)) {
    case LIMITER_LEASE_PLAIN:
        return 0;
    case LIMITER_LEASE_LOCAL:
        l->units -= *cost;
        ls->hits++;
        limiter_lease_reply(l, (int64_t)(now - l->since_ms) * RL_NS_PER_MS, &d);
        if (form & LIMITER_REPLY_MS) {
            rl_reply_ints_ms(&d, v);
        } else {
            rl_reply_ints(&d, v);
        }
        limiter_reply_ints(req, v);
        return 1;
    case LIMITER_LEASE_QUEUE:
        /* It keeps its place among its client's replies; it runs again
         * from the limiter's entry once the take settles. */
        req_park(&l->waiting, req, resume, NULL);
        req->cancel = limiter_lease_waiter_left;
        req->cancel_ctx = l;
        l->nwait++;
        l->wait_units += *cost;
        ls->waits++;
        return 1;
    case LIMITER_LEASE_TAKE:
        break;
    }
    if (ls->map.count >= ls->max) {
        return 0;
    }
    /* The lease is in flight once the call is sent (limiter_lease_sending):
     * a check that fails before it leaves none behind. */
    ls->taking = req;
    ls->taking_cost = *cost;
    *cost = deep->lease;
    return 0;
}

void limiter_lease_sending(struct limiter_leases *ls, struct store_check *c)
{
    const struct limits_level *deep;
    struct limiter_lease *l;

    if (ls == NULL || ls->taking == NULL || ls->taking != c->root ||
        c->op != STORE_CHECK || c->lv->n == 0) {
        return;
    }
    ls->taking = NULL;
    deep = &c->lv->level[c->lv->n - 1];
    if (deep->lease <= 0 || c->cost != deep->lease ||
        hmap_get(&ls->map, deep->path, deep->path_len) != NULL) {
        return;
    }
    l = px_calloc(1, sizeof(*l) + deep->path_len + 1);
    l->state = LIMITER_LEASE_IN_FLIGHT;
    l->n = deep->lease;
    l->since_ms = limiter_lease_now(ls);
    l->taker = c->root;
    l->taker_cost = ls->taking_cost;
    queue_init(&l->waiting);
    l->ls = ls;
    l->plen = deep->path_len;
    memcpy(l->path, deep->path, deep->path_len);
    hmap_put(&ls->map, l->path, l->plen, l);
    if (c->root->cancel == NULL) {
        c->root->cancel = limiter_lease_taker_left;
        c->root->cancel_ctx = l;
    }
}

/* The lease in flight whose take check `c` is, now settled (what waited
 * on it goes on, its age counts from now), or NULL when `c` took none. */
static struct limiter_lease *limiter_lease_took(struct limiter_leases *ls,
                                                const struct store_check *c)
{
    const struct limits_level *deep;
    struct limiter_lease *l;

    if (ls == NULL || !ls->on || c->op != STORE_CHECK || c->lv->n == 0) {
        return NULL;
    }
    deep = &c->lv->level[c->lv->n - 1];
    l = hmap_get(&ls->map, deep->path, deep->path_len);
    if (l == NULL || l->state != LIMITER_LEASE_IN_FLIGHT ||
        l->taker != c->root) {
        return NULL;
    }
    limiter_lease_settle(ls, l);
    l->since_ms = limiter_lease_now(ls);
    return l;
}

void limiter_lease_failed(struct limiter_leases *ls, struct store_check *c)
{
    (void)limiter_lease_took(ls, c);
}

int limiter_lease_after(struct limiter_leases *ls, struct store_check *c,
                        struct rl_decision *agg)
{
    struct limiter_lease *l = limiter_lease_took(ls, c);
    unsigned i;

    if (l == NULL) {
        return 0;
    }
    if (agg->limited) {
        l->state = LIMITER_LEASE_OFF;
        return 1;
    }
    for (i = 0; i < c->n; i++) {
        if (c->lim[i].fail_open) {
            /* Admitted undecided (the store down, fail_open): nothing
             * was taken, so there is nothing to lease or give back. */
            l->state = LIMITER_LEASE_OFF;
            return 0;
        }
    }
    ls->takes++;
    l->state = LIMITER_LEASE_LIVE;
    l->units = l->n - l->taker_cost;
    l->taken = *agg;
    agg->remaining += l->units;
    return 0;
}

void limiter_lease_drop_arg(struct limiter_leases *ls, struct req *req, int arg,
                            bool give_back)
{
    const char *p;
    size_t len;

    if (!ls->on || ls->map.count == 0 || req->cmd->argc <= arg) {
        return;
    }
    p = resp_cmd_arg(req->cmd, arg, &len);
    limiter_lease_drop(ls, p, len, give_back);
}
