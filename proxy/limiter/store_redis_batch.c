/* The Redis store's script calls on their way (see store_redis_batch.h).
 *
 *   `pending` (struct store_redis_item: a store_redis_call, or a
 *        |      store_redis_group with its words made), until the flush
 *        |  pass (store_redis_batch_flush): one batch per kind, node and
 *        |  lane; a part-filled one waits in `pending` while its
 *        v  connection owes the limiter a reply (Nagle's rule,
 *           upstream_limiter_turn)
 *   one script call per batch, its words made by lua_wire ("runs" of
 *   gcra.lua, "shapes" of limiter.lua)
 *          | Function not found, NOSCRIPT...: store_redis_retry, once each
 *          | -MOVED/-ASK: followed like any command
 *          v
 *   store_redis_on_batch: the reply read by lua_wire, each call's or
 *   group's answer to the store (struct store_redis_answers)
 *   a spread call's "not served here" (flag -3, a group's error): that
 *          item queued again alone, its keys declared
 *
 * A call starts as FCALL of the library's function, after FUNCTION LOAD
 * on every connection that may carry one (store_redis_on_setup); the
 * errors that say the node lacks what it named move it down the ladder
 * FCALL -> FUNCTION LOAD and FCALL again -> EVALSHA -> EVAL, each step
 * once. A node without usable functions (Redis 6, an ACL) turns every
 * later call to EVALSHA. */
#include "proxy/limiter/store_redis_batch.h"

#include <string.h>
#include <strings.h>
#include <uv.h>

#include "algorithms/scripts.h"
#include "conf/conf.h"
#include "parser/resp.h"
#include "proxy/core/cluster.h"
#include "proxy/core/core.h"
#include "proxy/core/log.h"
#include "proxy/core/upstream.h"
#include "proxy/core/util.h"
#include "proxy/limiter/store_redis_db.h"

/* How a script call is sent. A call starts as FCALL (EVALSHA once a node
 * had no functions) and moves down this list on the errors that say the
 * node lacks what it named; each step is taken once. */
enum store_redis_via {
    STORE_REDIS_VIA_START = 0, /* not sent yet */
    STORE_REDIS_VIA_FCALL,     /* FCALL of the library's function */
    STORE_REDIS_VIA_RELOADED,  /* FCALL after FUNCTION LOAD on its node */
    STORE_REDIS_VIA_EVALSHA,   /* the script by its sha1 */
    STORE_REDIS_VIA_EVAL,      /* the script's body (caches it) */
};

/* The calls of one script call: one kind, one node and lane, in arrival
 * order. Their keys are declared when they share one slot (a MOVED moves
 * them all); across slots of one cluster node they follow the arguments
 * undeclared (`spread`, the library's allow-cross-slot-keys), and a call
 * whose slot the node turns out not to serve is sent again alone. Owned
 * by the part carrying it. */
struct store_redis_batch {
    struct store_redis_batcher *bt; /* borrowed: the queue it came from */
    unsigned n;                     /* calls */
    unsigned char kind;             /* enum store_redis_kind, of every call */
    unsigned char via;              /* enum store_redis_via */
    unsigned char spread;           /* keys of several slots: undeclared */
    uint64_t sent_ns;               /* local time (uv_hrtime) of the last
                                       send */
    struct store_redis_item *item[STORE_REDIS_BATCH_MAX]; /* owned */
};

void store_redis_part_send(struct store *st, struct resp_cmd *cmd,
                           req_reply_fn *fn, void *ctx, unsigned partno,
                           uint64_t lane, const char *key, size_t klen)
{
    struct req *part = req_own(cmd, fn, ctx);

    part->part = partno;
    part->lane = lane;
    part->limiter = 1;
    cluster_send_key(st->cl, key, klen, part);
}

/* ---------------- Calling the scripts: FCALL, or EVALSHA ---------------- */

int store_redis_down(const char *frame, size_t len)
{
    static const char *const down[] = {
        "-ERR upstream ", "-CLUSTERDOWN ", "-TRYAGAIN ",
        "-LOADING ",      "-MASTERDOWN ",  "-BUSY ",
    };
    size_t k, n;

    for (k = 0; k < ARRAY_SIZE(down); k++) {
        n = strlen(down[k]);
        if (len >= n && memcmp(frame, down[k], n) == 0) {
            return 1;
        }
    }
    return 0;
}

/* The reply to FUNCTION LOAD of the library. "Already exists" is the
 * usual one (another proxy, or an earlier run, loaded it), and a replica
 * refuses it (-READONLY): no news, nor is a node that is down. Another
 * error is logged. */
static void store_redis_on_load(struct req *req, const char *frame, size_t len)
{
    static const char exists[] = "already exists\r\n";
    size_t n = sizeof(exists) - 1;

    PX_UNUSED(req);
    if (len > 2 && frame[0] == '-' && !store_redis_down(frame, len) &&
        strncmp(frame, "-READONLY ", 10) != 0 &&
        (len < n || memcmp(frame + len - n, exists, n) != 0)) {
        /* The call that follows reports it too, with its own error. */
        log_warn("limiter: FUNCTION LOAD failed: %.*s",
                 (int)(len > 202 ? 200 : len - 2), frame);
    }
}

/* The words of FUNCTION LOAD of the library. */
static void store_redis_load_words(const char *argv[3], size_t lens[3])
{
    const struct scripts_library *lib = scripts_library();

    argv[0] = "FUNCTION";
    lens[0] = 8;
    argv[1] = "LOAD";
    lens[1] = 4;
    argv[2] = lib->body;
    lens[2] = lib->len;
}

/* FUNCTION LOAD of the library, sent to the node of `key` on lane `lane`
 * (the lane of the call that will follow it). */
static void store_redis_load(struct store *st, const char *key, size_t klen,
                             uint64_t lane)
{
    const char *argv[3];
    size_t lens[3];
    struct req *req;

    store_redis_load_words(argv, lens);
    req = req_own(resp_cmd_new(3, argv, lens), store_redis_on_load, NULL);
    req->lane = lane;
    req->limiter = 1;
    cluster_send_key(st->cl, key, klen, req);
}

/* Writes the first two words of a call of `s` sent `*via` into argv and
 * lens (a new call takes the store's way first). */
static void store_redis_head(const struct store_redis_batcher *bt,
                             const struct scripts_lua *s, unsigned char *via,
                             const char **argv, size_t *lens)
{
    if (*via == STORE_REDIS_VIA_START) {
        *via =
            bt->no_functions ? STORE_REDIS_VIA_EVALSHA : STORE_REDIS_VIA_FCALL;
    }
    switch (*via) {
    case STORE_REDIS_VIA_FCALL:
    case STORE_REDIS_VIA_RELOADED:
        argv[0] = "FCALL";
        argv[1] = s->fn;
        lens[1] = strlen(s->fn);
        break;
    case STORE_REDIS_VIA_EVALSHA:
        argv[0] = "EVALSHA";
        argv[1] = s->sha1;
        lens[1] = SCRIPTS_SHA1_LEN;
        break;
    default:
        argv[0] = "EVAL";
        argv[1] = s->body;
        lens[1] = s->len;
        break;
    }
    lens[0] = strlen(argv[0]);
}

/* True when the error `frame` starts with `prefix` and names `word`. */
static int store_redis_err_is(const char *frame, size_t len, const char *prefix,
                              const char *word)
{
    size_t n = strlen(prefix), w = word != NULL ? strlen(word) : 0, i;

    if (len < n || memcmp(frame, prefix, n) != 0) {
        return 0;
    }
    for (i = n; w > 0 && i + w <= len; i++) {
        if (strncasecmp(frame + i, word, w) == 0) {
            return 1;
        }
    }
    return w == 0;
}

/* A call sent `*via` on lane `lane` failed with `frame`: 1 when it is
 * worth sending again (*via moved on; a library reload is queued ahead of
 * it on the node of `key`, on its lane), 0 when the error is the answer. */
static int store_redis_retry(struct store_redis_batcher *bt, unsigned char *via,
                             const char *frame, size_t len, const char *key,
                             size_t klen, uint64_t lane)
{
    if (*via == STORE_REDIS_VIA_FCALL &&
        store_redis_err_is(frame, len, "-ERR Function not found", NULL)) {
        /* FUNCTION FLUSH, a replica promoted before it had the library
         * (a restart is a new connection, which loads it first): load it;
         * the call follows on the same connection, so it finds it. */
        store_redis_load(bt->st, key, klen, lane);
        *via = STORE_REDIS_VIA_RELOADED;
        return 1;
    }
    if (*via == STORE_REDIS_VIA_RELOADED &&
        store_redis_err_is(frame, len, "-ERR Function not found", NULL)) {
        /* The load went to the slot's owner, the call elsewhere (an -ASK
         * during a migration): this call runs as a script. */
        *via = STORE_REDIS_VIA_EVALSHA;
        return 1;
    }
    if ((*via == STORE_REDIS_VIA_FCALL || *via == STORE_REDIS_VIA_RELOADED) &&
        (store_redis_err_is(frame, len, "-ERR unknown command", "fcall") ||
         store_redis_err_is(frame, len, "-NOPERM", "fcall"))) {
        /* No FUNCTION here (Redis 6) or not allowed: the same code as a
         * script, from now on. */
        if (!bt->no_functions) {
            log_warn("limiter: Redis functions unusable (%.*s): calling "
                     "the scripts with EVALSHA",
                     (int)(len > 120 ? 120 : len - 2), frame + 1);
        }
        bt->no_functions = 1;
        *via = STORE_REDIS_VIA_EVALSHA;
        return 1;
    }
    if (*via == STORE_REDIS_VIA_EVALSHA && len > 10 &&
        memcmp(frame, "-NOSCRIPT ", 10) == 0) {
        /* The node's script cache is empty (restart, promotion, SCRIPT
         * FLUSH): send the body once; EVAL also caches it. */
        *via = STORE_REDIS_VIA_EVAL;
        return 1;
    }
    return 0;
}

/* The core's on_setup: every connection that may carry limiter calls
 * (a shared RESP2 one: a pool lane, the limiter's own lane, or with
 * limiter_password the limiter user's) sends FUNCTION LOAD first, at
 * start, when a node appears and after every reconnect. A call that
 * follows on that connection finds the library, even on a node that
 * restarted empty, so it never fails and comes back after commands its
 * client sent behind it. ("Already exists" is the usual reply; a replica
 * refuses it, harmlessly: a promotion finds the library replicated.) */
static void store_redis_on_setup(struct upstream *up, void *arg)
{
    struct store_redis_batcher *bt = arg;
    const char *argv[3];
    size_t lens[3];

    if (bt->no_functions || up->priv || up->proto != RESP_PROTO2 ||
        (bt->st->conf->limiter_password != NULL && !up->limiter)) {
        return;
    }
    store_redis_load_words(argv, lens);
    upstream_queue_first(up, 3, argv, lens, store_redis_on_load, NULL);
}

void store_redis_batch_init(struct store_redis_batcher *bt, struct store *st,
                            const struct store_redis_answers *answer)
{
    memset(bt, 0, sizeof(*bt));
    bt->st = st;
    bt->answer = answer;
    queue_init(&bt->pending);
    st->core->on_setup = store_redis_on_setup;
    st->core->setup_arg = bt;
}

void store_redis_batch_free(struct store_redis_batcher *bt)
{
    bt->st->core->on_setup = NULL;
}

/* ---------------- The flush pass: batches of queued calls ---------------- */

void store_redis_batch_queue(struct store_redis_batcher *bt,
                             struct store_redis_item *it)
{
    queue_insert_tail(&bt->pending, &it->link);
}

/* The key a queued call is routed by: a CL.THROTTLE's key, a group's
 * override hash (its last key). */
static const char *store_redis_item_key(const struct store_redis_item *it,
                                        size_t *len)
{
    if (it->kind == STORE_REDIS_THROTTLE) {
        const struct store_redis_call *call =
            (const struct store_redis_call *)it;
        *len = call->klen;
        return call->key;
    }
    return lua_wire_group_route(&((const struct store_redis_group *)it)->w,
                                len);
}

/* The groups of `b` (of kind STORE_REDIS_GROUP) as lua_wire sees them. */
static void store_redis_batch_groups(const struct store_redis_batch *b,
                                     const struct lua_wire_group **out)
{
    unsigned i;

    for (i = 0; i < b->n; i++) {
        out[i] = &((const struct store_redis_group *)b->item[i])->w;
    }
}

/* The script call of `b`, sent `b->via` (lua_wire makes its words). */
static struct resp_cmd *store_redis_batch_cmd(struct store_redis_batch *b)
{
    const char *head[2];
    size_t headlen[2];
    struct lua_wire_argv a;
    struct resp_cmd *cmd;
    unsigned i;

    if (b->kind == STORE_REDIS_THROTTLE) {
        struct lua_wire_throttle calls[STORE_REDIS_BATCH_MAX];
        store_redis_head(b->bt, scripts_gcra(), &b->via, head, headlen);
        for (i = 0; i < b->n; i++) {
            const struct store_redis_call *call =
                (const struct store_redis_call *)b->item[i];
            calls[i].p = &call->p;
            calls[i].key = call->key;
            calls[i].klen = call->klen;
        }
        lua_wire_runs(&a, head, headlen, calls, b->n, b->spread);
    } else {
        const struct lua_wire_group *groups[STORE_REDIS_BATCH_MAX];
        store_redis_head(b->bt, scripts_limiter(), &b->via, head, headlen);
        store_redis_batch_groups(b, groups);
        lua_wire_shapes(&a, head, headlen, groups, b->n, b->spread);
    }
    cmd = resp_cmd_new((int)a.n, a.v, a.len);
    lua_wire_argv_free(&a);
    return cmd;
}

static void store_redis_on_batch(struct req *part, const char *frame,
                                 size_t len);

/* Sends `b` as one script call to the node of its first call's key. Takes
 * `b`. */
static void store_redis_batch_send(struct store_redis_batch *b)
{
    struct resp_cmd *cmd = store_redis_batch_cmd(b);
    const struct store_redis_item *it = b->item[0];
    struct cluster *cl = b->bt->st->cl;
    unsigned db = it->db;
    uint64_t lane = it->lane;
    size_t klen;
    const char *key = store_redis_item_key(it, &klen);
    /* A refused send (the node down) fails the batch at once and frees
     * its items, key included: SELECT 0 routes by a copy. */
    char *kept = db != 0 ? px_strndup(key, klen) : NULL;

    b->sent_ns = uv_hrtime();
    store_redis_db_enter(cl, db, lane, key, klen);
    store_redis_part_send(b->bt->st, cmd, store_redis_on_batch, b, 0, lane, key,
                          klen);
    store_redis_db_leave(cl, db, lane, kept, klen);
    px_free(kept);
}

/* A call of a spread batch whose slot the node did not serve: queued
 * again, to go by itself with its keys declared, which Redis redirects. */
static void store_redis_item_alone(struct store_redis_batcher *bt,
                                   struct store_redis_item *it)
{
    it->alone = 1;
    queue_insert_tail(&bt->pending, &it->link);
}

/* Ends a queued call with the error `frame`. */
static void store_redis_item_fail(struct store_redis_batcher *bt,
                                  struct store_redis_item *it,
                                  const char *frame, size_t len)
{
    struct resp_value e;

    if (it->kind == STORE_REDIS_THROTTLE) {
        bt->answer->call_error(bt->st, (struct store_redis_call *)it, frame,
                               len);
        return;
    }
    memset(&e, 0, sizeof(e));
    e.type = '-';
    e.raw = frame;
    e.raw_len = len;
    bt->answer->group_done((struct store_redis_group *)it, &e, 0);
}

static void store_redis_on_batch(struct req *part, const char *frame,
                                 size_t len)
{
    static const char bad[] = "-" GCRA_ERR_SCRIPT "\r\n";
    struct store_redis_batch *b = part->ctx;
    struct store_redis_batcher *bt = b->bt;
    const struct lua_wire_group *groups[STORE_REDIS_BATCH_MAX];
    struct lua_wire_cursor cur;
    struct resp_value v;
    size_t used, klen;
    const char *key;
    unsigned i;
    int shaped;

    part->ctx = NULL;
    key = store_redis_item_key(b->item[0], &klen);
    if (frame[0] == '-' && store_redis_retry(bt, &b->via, frame, len, key, klen,
                                             b->item[0]->lane)) {
        store_redis_batch_send(b);
        return;
    }
    if (frame[0] == '-') {
        /* A spread batch refused whole (a node that is no master any
         * more): each call goes again by itself, where Redis redirects
         * it; unless the node is down. */
        for (i = 0; i < b->n; i++) {
            if (b->spread && !store_redis_down(frame, len)) {
                store_redis_item_alone(bt, b->item[i]);
            } else {
                store_redis_item_fail(bt, b->item[i], frame, len);
            }
        }
        px_free(b);
        return;
    }
    if (resp_value_parse(frame, len, &v, &used) != RESP_OK) {
        v.type = '?';
        v.n = 0;
        v.elem = NULL;
    }
    if (b->kind == STORE_REDIS_THROTTLE) {
        shaped = lua_wire_runs_shaped(&v, b->n);
    } else {
        store_redis_batch_groups(b, groups);
        shaped = lua_wire_shapes_shaped(&v, groups, b->n);
    }
    lua_wire_cursor_init(&cur, &v);
    for (i = 0; i < b->n; i++) {
        struct store_redis_item *it = b->item[i];
        const struct resp_value *e;
        if (!shaped) {
            store_redis_item_fail(bt, it, bad, sizeof(bad) - 1);
        } else if (it->kind == STORE_REDIS_THROTTLE) {
            if (lua_wire_runs_elsewhere(&v, b->n, i) && b->spread) {
                store_redis_item_alone(bt, it);
            } else {
                bt->answer->call_done(bt->st, (struct store_redis_call *)it, &v,
                                      i, b->n, b->sent_ns);
            }
        } else if ((e = lua_wire_next(&cur, groups[i]))->type == '-' &&
                   b->spread) {
            /* Not served here: a decided group's answer is a table. */
            store_redis_item_alone(bt, it);
        } else {
            bt->answer->group_done((struct store_redis_group *)it, e,
                                   b->sent_ns);
        }
    }
    lua_wire_cursor_end(&cur);
    resp_value_free(&v);
    px_free(b);
}

/* Batches being filled by one flush pass. */
struct store_redis_open {
    struct store_redis_batch *b; /* owned until sent */
    struct upstream *up;         /* borrowed: the shared connection it goes
                                    on (NULL: no node serves its slot) */
};

/* Sends and drops open[i]. */
static void store_redis_open_send(struct store_redis_open *open,
                                  unsigned *nopen, unsigned i)
{
    store_redis_batch_send(open[i].b);
    memmove(open + i, open + i + 1, (*nopen - i - 1) * sizeof(*open));
    (*nopen)--;
}

/* Puts the calls of open[i] back at the head of `pending`, in their order,
 * and drops the batch: it waits for a later flush. Returns how many. */
static unsigned store_redis_open_hold(struct store_redis_batcher *bt,
                                      struct store_redis_open *open, unsigned i)
{
    struct store_redis_batch *b = open[i].b;
    unsigned n = b->n, k;

    for (k = n; k > 0; k--) {
        queue_insert_head(&bt->pending, &b->item[k - 1]->link);
    }
    px_free(b);
    return n;
}

/* The queued calls, one script call per kind, node and lane (a client's
 * lane, so a call never overtakes the commands its client sent before it
 * on that connection), in arrival order within each (calls on one key
 * keep their order). In cluster mode a node's calls of several slots
 * share a call (spread), except a call sent alone. A batch goes as soon
 * as it is full; a part-filled one goes when `all`, or when its
 * connection may take one now (upstream_limiter_turn, asked of every
 * connection before any takes its turn), else its calls wait at the head
 * of `pending` for a later flush, in order ahead of the calls queued
 * meanwhile. */
void store_redis_batch_flush(struct store_redis_batcher *bt, bool all)
{
    struct store *st = bt->st;
    struct store_redis_open open[STORE_REDIS_BATCH_MAX];
    unsigned char go[STORE_REDIS_BATCH_MAX]; /* per open batch: it goes */
    unsigned nopen = 0, held = 0, i;

    while (!queue_empty(&bt->pending)) {
        struct store_redis_item *it = container_of(
            queue_head(&bt->pending), struct store_redis_item, link);
        struct node *node = cluster_sharded(st->cl)
                                ? cluster_node_for_slot(st->cl, it->slot)
                                : st->cl->single;
        struct upstream *up =
            node != NULL ? cluster_limiter_upstream(node, it->lane) : NULL;
        struct store_redis_batch *b = NULL;

        queue_remove(&it->link);
        for (i = 0; i < nopen && !it->alone; i++) {
            b = open[i].b;
            if (b->kind == it->kind && open[i].up == up &&
                b->item[0]->db == it->db &&
                (up != NULL || b->item[0]->slot == it->slot)) {
                break;
            }
            b = NULL;
        }
        if (b == NULL) {
            if (nopen == STORE_REDIS_BATCH_MAX) {
                /* Too many at once: send the oldest. */
                store_redis_open_send(open, &nopen, 0);
            }
            b = px_calloc(1, sizeof(*b));
            b->bt = bt;
            b->kind = it->kind;
            open[nopen].b = b;
            open[nopen].up = up;
            i = nopen++;
        }
        b->spread |= b->n > 0 && b->item[0]->slot != it->slot;
        b->item[b->n++] = it;
        if (b->n == STORE_REDIS_BATCH_MAX || it->alone) {
            store_redis_open_send(open, &nopen, i);
        }
    }
    /* The part-filled batches: those that go, in order; then those that
     * wait, put back newest first, so their calls keep the order they
     * arrived in. */
    for (i = 0; i < nopen; i++) {
        go[i] = all || open[i].up == NULL || upstream_limiter_turn(open[i].up);
    }
    for (i = 0; i < nopen; i++) {
        if (go[i]) {
            if (open[i].up != NULL) {
                upstream_limiter_took(open[i].up);
            }
            store_redis_batch_send(open[i].b);
        }
    }
    for (i = nopen; i > 0; i--) {
        if (!go[i - 1]) {
            held += store_redis_open_hold(bt, open, i - 1);
        }
    }
    st->queued = 0;
    st->held = held;
}

void store_redis_batch_stop(struct store_redis_batcher *bt)
{
    static const char down[] = "-ERR proxy shutting down\r\n";

    while (!queue_empty(&bt->pending)) {
        struct store_redis_item *it = container_of(
            queue_head(&bt->pending), struct store_redis_item, link);
        queue_remove(&it->link);
        store_redis_item_fail(bt, it, down, sizeof(down) - 1);
    }
}
