/* The WAIT timers of LIMITER CHECK (see limiter_wait.h).
 *
 * A check with WAIT first takes a slot (limiter_wait_reserve): one more
 * for its identity and for the total, or the error at once when a cap is
 * reached, before the store is asked anything, so a refused WAIT reserves
 * nothing. When the store reserved (every refusing limit is due within
 * the wait) the reply is computed at once (limiter_aggregate_check) and
 * held here, one libuv timer per reply, each linked in `started` so
 * shutdown can end them. A client that leaves ends its waits at once
 * (root->cancel): the timer and the slot go, the reservation in the
 * store stays taken (a reservation is a consumed slot in the schedule;
 * giving it back would let later waiters move ahead of ones already
 * promised their time). Below the limiter commands: it needs only the
 * core's loop. */
#include "proxy/limiter/limiter_wait.h"

#include <string.h>
#include <uv.h>

#include "algorithms/rl.h"
#include "proxy/core/core.h"
#include "proxy/core/req.h"
#include "proxy/core/util.h"

/* The slots one identity holds. */
struct limiter_wait_ident {
    size_t n;   /* slots held */
    size_t len; /* bytes of name */
    char name[];
};

/* One slot, then a reply held until its reservation is due. */
struct limiter_wait {
    uv_timer_t timer;                 /* embedded; container_of in the
                                         callback; initialised at start */
    struct limiter_waits *ws;         /* borrowed: its owner */
    struct limiter_wait_ident *ident; /* borrowed from ws->idents */
    struct req *root;                 /* borrowed: the client's request,
                                         once started */
    char *frame;                      /* owned: the reply, a RESP frame
                                         (once started) */
    size_t frame_len;                 /* bytes of frame */
    struct queue link;                /* link in ws->started */
};

void limiter_waits_init(struct limiter_waits *ws, size_t max_per_identity,
                        size_t max_total)
{
    memset(ws, 0, sizeof(*ws));
    queue_init(&ws->started);
    hmap_init(&ws->idents);
    ws->max_per_identity = max_per_identity;
    ws->max_total = max_total;
}

void limiter_waits_free(struct limiter_waits *ws)
{
    hmap_free(&ws->idents, px_free);
}

enum limiter_wait_rc limiter_wait_reserve(struct limiter_waits *ws,
                                          const char *ident, size_t len,
                                          struct limiter_wait **out)
{
    struct limiter_wait_ident *id = hmap_get(&ws->idents, ident, len);
    struct limiter_wait *w;

    *out = NULL;
    if ((id != NULL ? id->n : 0) >= ws->max_per_identity) {
        ws->refused_identity++;
        return LIMITER_WAIT_FULL_IDENTITY;
    }
    if (ws->held >= ws->max_total) {
        ws->refused_total++;
        return LIMITER_WAIT_FULL_TOTAL;
    }
    if (id == NULL) {
        id = px_malloc(sizeof(*id) + len);
        id->n = 0;
        id->len = len;
        memcpy(id->name, ident, len);
        hmap_put(&ws->idents, ident, len, id);
    }
    id->n++;
    ws->held++;
    w = px_calloc(1, sizeof(*w));
    w->ws = ws;
    w->ident = id;
    queue_init(&w->link);
    *out = w;
    return LIMITER_WAIT_OK;
}

/* Gives w's slot back to its identity and the total. */
static void limiter_wait_release(struct limiter_wait *w)
{
    struct limiter_waits *ws = w->ws;
    struct limiter_wait_ident *id = w->ident;

    ws->held--;
    if (--id->n == 0) {
        px_free(hmap_del(&ws->idents, id->name, id->len));
    }
}

void limiter_wait_cancel(struct limiter_wait *w)
{
    if (w != NULL) {
        limiter_wait_release(w);
        px_free(w);
    }
}

static void limiter_wait_on_close(uv_handle_t *h)
{
    struct limiter_wait *w = container_of(h, struct limiter_wait, timer);

    px_free(w->frame);
    px_free(w);
}

/* Ends a started wait: replies (on_time), fails with `err`, or just lets
 * the request go (shutdown, or its client left). */
static void limiter_wait_end(struct limiter_wait *w, int on_time,
                             const char *err)
{
    struct req *root = w->root;

    root->cancel = NULL;
    root->cancel_ctx = NULL;
    queue_remove(&w->link);
    limiter_wait_release(w);
    uv_timer_stop(&w->timer);
    uv_close((uv_handle_t *)&w->timer, limiter_wait_on_close);
    if (req_owed_back(root)) {
        if (on_time) {
            req_reply(root, w->frame, w->frame_len);
        } else if (err != NULL) {
            req_reply_error(root, "%s", err);
        }
    }
}

static void limiter_wait_on_timer(uv_timer_t *t)
{
    limiter_wait_end(container_of(t, struct limiter_wait, timer), 1, NULL);
}

/* root's client left (req_orphan): the wait ends now, not in an hour. */
static void limiter_wait_on_cancel(struct req *root)
{
    limiter_wait_end(root->cancel_ctx, 0, NULL);
}

void limiter_wait_start(struct limiter_wait *w, struct core *core,
                        struct req *root, const char *frame, size_t len,
                        int64_t delay_ns)
{
    uint64_t ms = (uint64_t)((delay_ns + RL_NS_PER_MS - 1) / RL_NS_PER_MS);

    PX_ASSERT(root->cancel == NULL);
    w->frame = px_malloc(len);
    memcpy(w->frame, frame, len);
    w->frame_len = len;
    w->root = root;
    root->owed++;
    root->cancel = limiter_wait_on_cancel;
    root->cancel_ctx = w;
    queue_insert_tail(&w->ws->started, &w->link);
    uv_timer_init(core->loop, &w->timer);
    uv_timer_start(&w->timer, limiter_wait_on_timer, ms, 0);
}

void limiter_wait_stop_all(struct limiter_waits *ws)
{
    while (!queue_empty(&ws->started)) {
        limiter_wait_end(
            container_of(queue_head(&ws->started), struct limiter_wait, link),
            0, NULL);
    }
}

void limiter_wait_fail_all(struct limiter_waits *ws, const char *err)
{
    while (!queue_empty(&ws->started)) {
        limiter_wait_end(
            container_of(queue_head(&ws->started), struct limiter_wait, link),
            0, err);
    }
}
