/* The WAIT timers of LIMITER CHECK (see limiter_wait.h).
 *
 * A check with WAIT that the store reserved (every refusing limit is due
 * within the wait) is answered when the reservation is due: the reply is
 * computed at once (limiter_aggregate_check) and held here, one libuv
 * timer per reply, each linked in the caller's queue of waits (the
 * limiter's) so shutdown can end them. Below the limiter commands: it
 * needs only the core's loop and that queue. */
#include "proxy/limiter/limiter_wait.h"

#include <string.h>
#include <uv.h>

#include "algorithms/rl.h"
#include "proxy/core/core.h"
#include "proxy/core/queue.h"
#include "proxy/core/req.h"
#include "proxy/core/util.h"

/* A reply held until its reservation is due. */
struct limiter_wait {
    uv_timer_t timer;    /* embedded; container_of in the callback */
    struct req *root;    /* borrowed: the client's request */
    int64_t v[5];        /* the reply */
    limiter_wait_fn *fn; /* writes it */
    struct queue link;   /* link in the caller's queue of waits */
};

static void limiter_wait_on_close(uv_handle_t *h)
{
    px_free(container_of(h, struct limiter_wait, timer));
}

/* Ends a wait: replies (on_time) or just lets the request go. */
static void limiter_wait_end(struct limiter_wait *w, int on_time)
{
    struct req *root = w->root;

    queue_remove(&w->link);
    uv_timer_stop(&w->timer);
    uv_close((uv_handle_t *)&w->timer, limiter_wait_on_close);
    if (req_owed_back(root) && on_time) {
        w->fn(root, w->v);
    }
}

static void limiter_wait_on_timer(uv_timer_t *t)
{
    limiter_wait_end(container_of(t, struct limiter_wait, timer), 1);
}

void limiter_wait_start(struct core *core, struct queue *waits,
                        struct req *root, const int64_t v[5], int64_t delay_ns,
                        limiter_wait_fn *fn)
{
    struct limiter_wait *w = px_calloc(1, sizeof(*w));
    uint64_t ms = (uint64_t)((delay_ns + RL_NS_PER_MS - 1) / RL_NS_PER_MS);

    memcpy(w->v, v, sizeof(w->v));
    w->root = root;
    w->fn = fn;
    root->owed++;
    queue_insert_tail(waits, &w->link);
    uv_timer_init(core->loop, &w->timer);
    uv_timer_start(&w->timer, limiter_wait_on_timer, ms, 0);
}

void limiter_wait_stop_all(struct queue *waits)
{
    while (!queue_empty(waits)) {
        limiter_wait_end(
            container_of(queue_head(waits), struct limiter_wait, link), 0);
    }
}
