/* The Redis limiter store (see store_redis.h): CL.THROTTLE calls and the
 * tag groups of LIMITER calls, batched into the library's "each" calls;
 * the override cache; the refusal cache. Its state (the calls not sent
 * yet, the caches) is a struct store_redis, the struct store's `impl`,
 * made by the init op; it sees the limiter only through store.h.
 *
 *   CL.THROTTLE k B C P [Q]     LIMITER CHECK|PEEK path (limiter.c: the
 *        |                       levels' limits, grouped by hash tag;
 *        |                       refunds of groups that admitted)
 *        | refused by the refusal cache? --> the reply, no Redis
 *        v
 *   `pending` (struct store_redis_item: a limiter_call, or a
 *        |      limiter_group with its words copied), until the flush pass
 *        |  (limiter_flush): one batch per kind, node and lane; a
 *        |  part-filled one waits in `pending` while its connection owes
 *        v  the limiter a reply (Nagle's rule, upstream_limiter_turn)
 *   part "FCALL <lib>_gcra n k1..kn runs R <count inc_s inc_ns dvt_s
 *         dvt_ns>..." (a run: `count` consecutive calls of one limit)
 *   part "FCALL <lib>_limiter nk <keys, the override hash last, per group>
 *         shapes '' S <mode cost n (algo p1 p2 p3 p4 tag)... m|keys>...
 *         G ([shape] (path known)...)..."    tag: a refund's undo token;
 *         a check's shadow level ("" for a real level); "keys": no
 *         pairs, the levels' paths are read from their keys (a group that
 *         assumes no run-time override)
 *        (keys of several slots on one node: 0 keys declared, the keys
 *         after the arguments: "spread")
 *          | Function not found, NOSCRIPT...: store_redis_retry, once each
 *          | -MOVED/-ASK: followed like any command
 *          v
 *   [0, now_s, now_us, per call: its TAT... then its flag...]
 *          --> gcra_decide_from_script --> five integers --> done()
 *   [0, now_s, now_us, per group: [limited, now_s, now_us, entry...] |
 *                                 ["override", value...] | -error]
 *          --> c->res[i], c->peek[i] / the override cache, c->stale /
 *              c->err; after the check's last group, c->done(c)
 *   a spread call's "not served here" (flag -3, a group's error): that
 *          item queued again alone, its keys declared
 *
 * The scripts decide and write atomically on the node that owns the keys,
 * with the node's clock; the proxy recomputes the reply from what the
 * script read, so the reply's rounding lives in one place (algorithms/).
 * When the node cannot answer, `store_down_policy` decides: fail_closed
 * passes the error on, fail_open admits and counts it (st->fail_open).
 *
 * A group names the run-time overrides this proxy assumed (the cache
 * `overrides`); a script that finds others reports them and the check is
 * started over. A group that admitted is marked (c->admitted) so the
 * commands can have it refunded ("refund" mode, each limit's undo token)
 * when another group refused or failed: a check consumes everywhere or
 * nowhere. A limit of a shadow level that refused took nothing, so its
 * group's refund leaves it out. RESET is a DEL per group, sent at once. */
#include "proxy/limiter/store_redis.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "algorithms/gcra.h"
#include "algorithms/scripts.h"
#include "algorithms/sliding_window.h"
#include "conf/conf.h"
#include "conf/limits.h"
#include "parser/resp.h"
#include "parser/resp_enc.h"
#include "parser/resp_value.h"
#include "parser/slot.h"
#include "proxy/core/cluster.h"
#include "proxy/core/core.h"
#include "proxy/core/hmap.h"
#include "proxy/core/log.h"
#include "proxy/core/queue.h"
#include "proxy/core/req.h"
#include "proxy/core/upstream.h"
#include "proxy/core/util.h"
#include "proxy/limiter/aclcheck.h"
#include "proxy/limiter/refusal.h"
#include "proxy/limiter/store.h"
#include "proxy/limiter/store_fields.h"
#include "proxy/limiter/store_redis_db.h"

#include <uv.h>

/* Most CL.THROTTLE calls sent in one script call: enough to take the
 * per-call cost of EVALSHA off Redis under load, small enough that one
 * call never holds a node for long. */
#define STORE_REDIS_BATCH_MAX 64

/* Cached run-time overrides past this many are forgotten at once: the
 * scripts verify every assumption, so the cache only saves retries. */
#define STORE_REDIS_OVERRIDE_CACHE_MAX 100000

/* Bytes of words reserved for a LIMITER group when it is queued: its
 * keys, arguments and override pairs, each with its length. */
#define STORE_REDIS_GROUP_WORDS_BYTES 512

/* Decimal room for one script argument. */
#define STORE_REDIS_ARG_MAX 24

/* The four script words of the last limit formatted, with what they were
 * made from: the groups of a batch mostly share one limit, and formatting
 * four numbers costs more than comparing them. */
struct store_redis_params {
    enum limits_algo algo;        /* the limit's algorithm; valid when used */
    int64_t v[LIMITS_MAX_PARAMS]; /* gcra: INC and DVT; else limits_params */
    size_t nv;                    /* entries of v; 0 before the first */
    char out[4][STORE_REDIS_ARG_MAX]; /* the words, NUL-ended ("" unused) */
    size_t len[4];                    /* their lengths */
};

/* The Redis store's state: a struct store's `impl`. */
struct store_redis {
    struct hmap overrides;     /* path -> owned text, the run-time overrides
                                  the scripts reported (a cache they verify on
                                  every call) */
    struct queue pending;      /* script calls of this loop turn (struct
                                  store_redis_item), in arrival order */
    struct hmap checked;       /* node name -> itself: masters whose Redis
                                  users were checked (aclcheck) */
    unsigned no_functions : 1; /* a node has no FUNCTION (Redis 6) or may
                                  not use it: scripts from now on */
    struct refusal refusals;   /* refusals answered here (CL.THROTTLE,
                                  LIMITER) */
    struct store_redis_params params;    /* the last limit's script words */
    struct sliding_window_slot *sw_next; /* owned: the sliding window
                                            model's output, for the refusal
                                            cache's decisions */
    size_t sw_cap;                       /* slots sw_next holds */
};

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

/* What a queued call runs: each kind is one script's "each" mode. */
enum store_redis_kind {
    STORE_REDIS_THROTTLE, /* a CL.THROTTLE: one key of gcra.lua */
    STORE_REDIS_GROUP,    /* one tag group of a LIMITER call: limiter.lua */
};

/* What every queued call starts with (the first member of struct
 * limiter_call and struct limiter_group). */
struct store_redis_item {
    struct queue link;   /* in `pending` until the flush pass */
    unsigned char kind;  /* enum store_redis_kind */
    unsigned char alone; /* to be sent by itself with its keys declared: a
                            batch across slots found its slot elsewhere */
    unsigned slot;       /* its keys' slot (cluster mode; else 0) */
    unsigned db;         /* a CL.THROTTLE's client's db (store_redis_db.c) */
    uint64_t cid;        /* the lane of the client it serves */
};

/* One CL.THROTTLE waiting for its script call. Queued in `pending` until
 * the flush pass, then owned by the batch that carries it. */
struct limiter_call {
    struct store_redis_item it; /* first: the queue's view */
    struct req *root;           /* borrowed: the client's request */
    struct gcra_params p;       /* parsed arguments */
    size_t klen;                /* bytes in key */
    store_done_fn *done;        /* the completion */
    char key[];                 /* a copy of the key, NUL-ended, in the
                                   call's own allocation (one per call) */
};

/* One tag group of a LIMITER CHECK, PEEK or refund waiting for its script
 * call, its words copied when it was queued (a refund outlives its check;
 * the override texts it assumed may change before the flush). Queued in
 * `pending`, then owned by the batch that carries it. */
struct limiter_group {
    struct store_redis_item it; /* first: the queue's view */
    struct store_check *c;      /* borrowed: the call it decides for; NULL
                                   for a refund, whose reply nobody waits for */
    unsigned g;                 /* its group in c */
    unsigned nk;                /* keys: its limits', then the override hash */
    unsigned nw;                /* words: the nk keys, then its arguments */
    size_t route_at;            /* where the override hash's word starts */
    unsigned char cacheable;    /* a check or peek of limits the refusal
                                   cache knows only, with no run-time override
                                   assumed: its refusal can teach the
                                   refusal cache */
    struct buf words;           /* owned: each word as its length (a size_t)
                                   then its bytes */
};

/* The calls of one script call: one kind, one node and lane, in arrival
 * order. Their keys are declared when they share one slot (a MOVED moves
 * them all); across slots of one cluster node they follow the arguments
 * undeclared (`spread`, the library's allow-cross-slot-keys), and a call
 * whose slot the node turns out not to serve is sent again alone. Owned
 * by the part carrying it. */
struct limiter_batch {
    struct store *st;     /* borrowed: the store it runs in */
    unsigned n;           /* calls */
    unsigned char kind;   /* enum store_redis_kind, of every call */
    unsigned char via;    /* enum store_redis_via */
    unsigned char spread; /* keys of several slots: sent undeclared */
    uint64_t sent_ns;     /* local time (uv_hrtime) of the last send */
    struct store_redis_item *item[STORE_REDIS_BATCH_MAX]; /* owned */
};

/* Sends `cmd` (taken; NULL: out of memory) as a proxy-made part to the
 * node that owns `key`: its reply goes to `fn` with `ctx` and part number
 * `partno`, on lane `cid`; it fails at once when no node serves the slot. */
static void store_redis_part_send(struct store *st, struct resp_cmd *cmd,
                                  req_reply_fn *fn, void *ctx, unsigned partno,
                                  uint64_t cid, const char *key, size_t klen)
{
    struct req *part = req_own(cmd, fn, ctx);

    part->part = partno;
    part->cid = cid;
    part->limiter = 1;
    cluster_send_key(st->cl, key, klen, part);
}

static int store_redis_ready(struct store *st, struct req *req,
                             void (*resume)(struct req *req))
{
    if (!cluster_ready(st->cl)) {
        cluster_hold(st->cl, req, resume);
        return 0;
    }
    return 1;
}

/* ---------------- Calling the scripts: FCALL, or EVALSHA ---------------- */

/* True for errors that mean "the store did not answer", as opposed to an
 * answer that is an error (WRONGTYPE, a range error). */
static int store_redis_down(const char *frame, size_t len)
{
    static const char *const down[] = {
        "-ERR upstream ", "-CLUSTERDOWN ", "-TRYAGAIN ",
        "-LOADING ",      "-MASTERDOWN ",
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

/* FUNCTION LOAD of the library, sent to the node of `key` on lane `cid`
 * (the lane of the call that will follow it). */
static void store_redis_load(struct store *st, const char *key, size_t klen,
                             uint64_t cid)
{
    const char *argv[3];
    size_t lens[3];
    struct req *req;

    store_redis_load_words(argv, lens);
    req = req_own(resp_cmd_new(3, argv, lens), store_redis_on_load, NULL);
    req->cid = cid;
    req->limiter = 1;
    cluster_send_key(st->cl, key, klen, req);
}

/* Writes the first two words of a call of `s` sent `*via` into argv and
 * lens (a new call takes the store's way first). */
static void store_redis_head(struct store *st, const struct scripts_lua *s,
                             unsigned char *via, const char **argv,
                             size_t *lens)
{
    struct store_redis *rs = st->impl;

    if (*via == STORE_REDIS_VIA_START) {
        *via =
            rs->no_functions ? STORE_REDIS_VIA_EVALSHA : STORE_REDIS_VIA_FCALL;
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

/* A call sent `*via` on lane `cid` failed with `frame`: 1 when it is
 * worth sending again (*via moved on; a library reload is queued ahead of
 * it on the node of `key`, on its lane), 0 when the error is the answer. */
static int store_redis_retry(struct store *st, unsigned char *via,
                             const char *frame, size_t len, const char *key,
                             size_t klen, uint64_t cid)
{
    struct store_redis *rs = st->impl;

    if (*via == STORE_REDIS_VIA_FCALL &&
        store_redis_err_is(frame, len, "-ERR Function not found", NULL)) {
        /* FUNCTION FLUSH, a replica promoted before it had the library
         * (a restart is a new connection, which loads it first): load it;
         * the call follows on the same connection, so it finds it. */
        store_redis_load(st, key, klen, cid);
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
        if (!rs->no_functions) {
            log_warn("limiter: Redis functions unusable (%.*s): calling "
                     "the scripts with EVALSHA",
                     (int)(len > 120 ? 120 : len - 2), frame + 1);
        }
        rs->no_functions = 1;
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
    struct store *st = arg;
    struct store_redis *rs = st->impl;
    const char *argv[3];
    size_t lens[3];

    if (rs->no_functions || up->priv || up->proto != RESP_PROTO2 ||
        (st->conf->limiter_password != NULL && !up->limiter)) {
        return;
    }
    store_redis_load_words(argv, lens);
    upstream_queue_first(up, 3, argv, lens, store_redis_on_load, NULL);
}

/* The periodic pass: each master's Redis users are checked once
 * (aclcheck). */
static void store_redis_cron(struct store *st)
{
    struct store_redis *rs = st->impl;
    struct node *m[64];
    unsigned n, i;

    refusal_cron(&rs->refusals);
    if (rs->no_functions || !cluster_ready(st->cl)) {
        return;
    }
    n = cluster_masters(st->cl, m, ARRAY_SIZE(m));
    for (i = 0; i < n; i++) {
        size_t len = strlen(m[i]->name);
        if (!upstream_is_ready(cluster_limiter_upstream(m[i], 0))) {
            continue; /* checked once it is up: a down node cannot say */
        }
        if (hmap_get(&rs->checked, m[i]->name, len) == NULL) {
            hmap_put(&rs->checked, m[i]->name, len, &rs->checked);
            aclcheck_node(st->cl, st->conf, m[i]);
        }
    }
}

/* ---------------- CL.THROTTLE: batched gcra.lua calls ---------------- */

static void store_redis_call_free(struct limiter_call *call)
{
    px_free(call);
}

/* Ends a call: its client's request gets `frame` turned into a reply (an
 * error frame as it is, or fail_open), or is freed when it is an orphan. */
static void store_redis_call_error(struct store *st, struct limiter_call *call,
                                   const char *frame, size_t len)
{
    struct req *root = call->root;
    struct store_reply r = { .kind = STORE_REPLY_FRAME };

    if (!req_owed_back(root)) {
        /* the client left while the node worked */
    } else if (store_redis_down(frame, len) &&
               st->conf->store_down == CONF_FAIL_OPEN) {
        r.kind = STORE_REPLY_INTS;
        r.v[0] = 0;
        r.v[1] = call->p.limit;
        r.v[2] = 0;
        r.v[3] = -1;
        r.v[4] = 0;
        r.fail_open = 1;
        st->fail_open++;
        call->done(st, root, &r);
    } else {
        r.text = frame;
        r.len = len;
        call->done(st, root, &r);
    }
    store_redis_call_free(call);
}

/* A refused GCRA decision read `raw` (NULL: no key) at `key`, at the
 * node's time `node_now` of a call sent at `sent_ns`: the refusal cache
 * remembers it (nothing, when raw is no TAT). */
static void store_redis_learn_tat(struct store_redis *rs, const char *key,
                                  size_t klen, const char *raw, size_t rawlen,
                                  int64_t node_now, uint64_t sent_ns)
{
    int64_t tat = -1;

    if (raw != NULL && gcra_parse_int64(raw, rawlen, &tat) != GCRA_OK) {
        return;
    }
    refusal_learn(&rs->refusals, key, klen, raw, rawlen,
                  raw != NULL && tat != -1, tat, node_now, sent_ns);
}

/* What a decided call teaches the refusal cache: a refusal is
 * remembered with the state it read; an admission wrote the key, which
 * this proxy then forgets (the tracker is told too, but later). */
static void store_redis_refusal_note(struct store *st,
                                     const struct limiter_call *call,
                                     const struct gcra_script_reply *sr,
                                     uint64_t sent_ns)
{
    struct store_redis *rs = st->impl;

    if (call->it.db != 0) {
        return; /* the cache holds db 0's keys */
    }
    if (!sr->limited) {
        refusal_forget(&rs->refusals, call->key, call->klen);
        return;
    }
    store_redis_learn_tat(rs, call->key, call->klen, sr->tat, sr->tat_len,
                          sr->now_s * 1000000000 + sr->now_us * 1000, sent_ns);
}

/* Ends call i of a batch from the script's "each" reply `v`; the batch
 * was sent at `sent_ns`. */
static void store_redis_call_done(struct store *st, struct limiter_call *call,
                                  const struct resp_value *v, unsigned i,
                                  unsigned n, uint64_t sent_ns)
{
    static const char wrongtype[] =
        "WRONGTYPE Operation against a key holding the wrong kind of value";
    struct req *root = call->root;
    const struct resp_value *raw = &v->elem[3 + i];
    const struct resp_value *flag = &v->elem[3 + n + i];
    struct store_reply r = { .kind = STORE_REPLY_ERROR };
    struct gcra_script_reply sr;
    struct gcra_result res;
    const char *err = NULL;

    if (!req_owed_back(root)) {
        /* the client left while the node worked */
        store_redis_call_free(call);
        return;
    }
    if (flag->integer == -1) {
        r.text = wrongtype;
    } else if (flag->integer == -2) {
        r.text = GCRA_ERR_TAT_RANGE;
    } else if (flag->integer != 0 && flag->integer != 1) {
        r.text = GCRA_ERR_SCRIPT; /* -3 with its key declared: no flag */
    } else {
        sr.limited = flag->integer;
        sr.now_s = v->elem[1].integer;
        sr.now_us = v->elem[2].integer;
        sr.tat = raw->null ? NULL : raw->str;
        sr.tat_len = raw->null ? 0 : raw->len;
        if (gcra_decide_from_script(&call->p, &sr, &res, &err) != GCRA_OK) {
            log_warn("limiter: %s", err);
            r.text = err;
        } else {
            r.kind = STORE_REPLY_INTS;
            rl_reply_ints(&res.d, r.v);
            store_redis_refusal_note(st, call, &sr, sent_ns);
        }
    }
    call->done(st, root, &r);
    store_redis_call_free(call);
}

/* Queued for the flush pass (store_redis_flush), with the other calls of
 * this loop turn. */
static void store_redis_throttle(struct store *st, struct req *req,
                                 const struct gcra_params *p, const char *key,
                                 size_t klen, unsigned db, store_done_fn *done)
{
    struct store_redis *rs = st->impl;
    struct limiter_call *call;
    struct store_reply r = { .kind = STORE_REPLY_INTS };
    struct gcra_result res;
    int64_t tat, now;
    const char *err;
    int have;

    if (db == 0 &&
        refusal_lookup(&rs->refusals, key, klen, uv_hrtime(), &have, &tat,
                       &now) &&
        gcra_decide(p, have, tat, now, &res, &err) == GCRA_OK &&
        res.d.limited) {
        /* Refused by the state Redis holds, at a time Redis has not
         * reached yet: Redis would refuse it too. */
        rs->refusals.hits++;
        rl_reply_ints(&res.d, r.v);
        done(st, req, &r);
        return;
    }
    call = px_calloc(1, sizeof(*call) + klen + 1);
    call->it.kind = STORE_REDIS_THROTTLE;
    call->it.slot = st->cl->enabled ? slot_for_key(key, klen) : 0;
    call->it.cid = req->cid;
    call->it.db = db;
    call->root = req;
    call->p = *p;
    memcpy(call->key, key, klen);
    call->klen = klen;
    call->done = done;
    req->owed++;
    queue_insert_tail(&rs->pending, &call->it.link);
    st->queued++;
}

/* ---------------- The override cache ---------------- */

/* The run-time override of `path` the scripts last reported, NUL-ended,
 * or NULL. */
static const char *store_redis_override_known(struct store *st,
                                              const char *path, size_t len)
{
    struct store_redis *rs = st->impl;

    return hmap_get(&rs->overrides, path, len);
}

/* Records what a script found for `path` ("" or NULL: nothing). */
static void store_redis_override_learn(struct store *st, const char *path,
                                       size_t len, const char *text,
                                       size_t tlen)
{
    struct store_redis *rs = st->impl;

    if (text == NULL || tlen == 0) {
        px_free(hmap_del(&rs->overrides, path, len));
        return;
    }
    if (hmap_get(&rs->overrides, path, len) == NULL &&
        rs->overrides.count >= STORE_REDIS_OVERRIDE_CACHE_MAX) {
        hmap_free(&rs->overrides, px_free);
        hmap_init(&rs->overrides);
    }
    px_free(hmap_put(&rs->overrides, path, len, px_strndup(text, tlen)));
}

/* Writes the override hash of `lev`'s identity, "<prefix>{tag}#overrides",
 * and a NUL; returns its length, or -1 when it does not fit (STORE_KEY_MAX
 * always holds it). */
static int store_redis_override_key(const struct store *st,
                                    const struct limits_level *lev, char *out,
                                    size_t outlen)
{
    /* Made for every check: pieces copied, no format string. */
    static const char tail[] = "}#overrides";
    const char *prefix = st->conf->key_prefix;
    size_t plen = strlen(prefix);
    size_t n = plen + 1 + lev->tag_len + sizeof(tail) - 1;

    if (n >= outlen) {
        return -1;
    }
    memcpy(out, prefix, plen);
    out[plen] = '{';
    memcpy(out + plen + 1, lev->tag, lev->tag_len);
    memcpy(out + plen + 1 + lev->tag_len, tail, sizeof(tail));
    return (int)n;
}

/* ---------------- LIMITER CHECK|PEEK|RESET: limiter.lua ---------------- */

/* Keys of group g. */
static unsigned store_redis_group_keys(const struct store_check *c, unsigned g)
{
    unsigned i, nk = 0;

    for (i = 0; i < c->n; i++) {
        nk += c->lim[i].group == g;
    }
    return nk;
}

/* Keeps the first error of a call, as a RESP error line. */
static void store_redis_check_error(struct store_check *c, const char *text)
{
    if (c->err.len == 0) {
        PX_CHECK_OOM(buf_append(&c->err, "-", 1));
        PX_CHECK_OOM(buf_append_str(&c->err, text));
        PX_CHECK_OOM(buf_append(&c->err, "\r\n", 2));
    }
}

/* A reply element as an int64: an integer, or a decimal bulk string (the
 * script sends durations past 2^53 us as text). 0, or -1. */
static int store_redis_elem_int(const struct resp_value *e, int64_t *out)
{
    if (e->type == ':') {
        *out = e->integer;
        return 0;
    }
    if (e->type == '$' && !e->null) {
        return gcra_parse_int64(e->str, e->len, out) == GCRA_OK ? 0 : -1;
    }
    return -1;
}

/* Microseconds of the script as nanoseconds, saturating. */
static int64_t store_redis_us_to_ns(int64_t us)
{
    if (us > INT64_MAX / 1000) {
        return INT64_MAX;
    }
    return us < INT64_MIN / 1000 ? INT64_MIN : us * 1000;
}

/* One limit's entry of a check/peek reply into c->res[i] and c->peek[i].
 * 0, or -1 when malformed (c->err is set). */
static int store_redis_entry(struct store_check *c, unsigned i,
                             const struct resp_value *e,
                             const struct gcra_script_reply *sr)
{
    struct store_limit *x = &c->lim[i];
    const char *err = NULL;
    int64_t f[5];
    unsigned j;

    if (e->type != '*' || e->null) {
        store_redis_check_error(c, GCRA_ERR_SCRIPT);
        return -1;
    }
    if (x->algo == LIMITS_GCRA) {
        struct gcra_script_reply r = *sr;
        struct gcra_result res, pk;
        struct gcra_params pp;
        if (e->n != 1) {
            store_redis_check_error(c, GCRA_ERR_SCRIPT);
            return -1;
        }
        r.tat = e->elem[0].null ? NULL : e->elem[0].str;
        r.tat_len = e->elem[0].null ? 0 : e->elem[0].len;
        gcra_params_peek(&x->p, &pp);
        if (gcra_decide_stored(&x->p, &r, &res, &err) != GCRA_OK ||
            gcra_decide_stored(&pp, &r, &pk, &err) != GCRA_OK) {
            store_redis_check_error(c, err);
            return -1;
        }
        c->res[i] = res.d;
        c->peek[i] = pk.d;
        return 0;
    }
    if (e->n != 6 || e->elem[5].type != '$' || e->elem[5].null ||
        e->elem[5].len >= STORE_UNDO_MAX) {
        store_redis_check_error(c, GCRA_ERR_SCRIPT);
        return -1;
    }
    for (j = 0; j < 5; j++) {
        if (store_redis_elem_int(&e->elem[j], &f[j]) != 0) {
            store_redis_check_error(c, GCRA_ERR_SCRIPT);
            return -1;
        }
    }
    c->res[i].limited = f[0] != 0;
    c->res[i].limit = f[1];
    c->res[i].remaining = f[2];
    c->res[i].retry_after_ns = store_redis_us_to_ns(f[3]);
    c->res[i].reset_after_ns = store_redis_us_to_ns(f[4]);
    memcpy(x->undo, e->elem[5].str, e->elem[5].len);
    x->undo[e->elem[5].len] = '\0';
    c->peek[i] = c->res[i]; /* with its cost back if taken: the caller */
    return 0;
}

/* Group g's "override" reply: the values of its levels' paths, in the
 * order they were sent. */
static void store_redis_group_overrides(struct store_check *c, unsigned g,
                                        const struct resp_value *v)
{
    size_t l, j = 1;

    for (l = 0; l < c->lv->n && j < v->n; l++) {
        const struct limits_level *lev = &c->lv->level[l];
        const struct resp_value *e = &v->elem[j];
        if (lev->group != g) {
            continue;
        }
        j++;
        store_redis_override_learn(c->st, lev->path, lev->path_len,
                                   e->type == '$' && !e->null ? e->str : NULL,
                                   e->type == '$' && !e->null ? e->len : 0);
    }
    c->stale = 1;
}

/* Group g of a CHECK or PEEK could not be asked (its node is down or did
 * not answer in time, `frame`): with store_down_policy fail_open, each of
 * its limits admits undecided, as CL.THROTTLE does ([0, limit, 0, -1, 0]),
 * and nothing is taken there, so nothing is refunded. The other groups'
 * decisions stand: a live node's refusal still refuses the check. 1 when
 * it failed open. */
static int store_redis_group_fail_open(struct store_check *c, unsigned g,
                                       const char *frame, size_t len)
{
    unsigned i;

    if (c->st->conf->store_down != CONF_FAIL_OPEN ||
        (c->op != STORE_CHECK && c->op != STORE_PEEK) ||
        !store_redis_down(frame, len)) {
        return 0;
    }
    for (i = 0; i < c->n; i++) {
        struct store_limit *x = &c->lim[i];
        if (x->group != g) {
            continue;
        }
        store_fail_open_limit(c, i);
    }
    c->admitted[g] = 0;
    c->st->fail_open++;
    return 1;
}

/* One group's answer `v` (its element of a batch's reply, or an error
 * for it): each of its limits' decision. */
static void store_redis_group_reply(struct store_check *c, unsigned g,
                                    const struct resp_value *v)
{
    struct gcra_script_reply sr;
    unsigned i, k = 0;

    if (v->type == '-') {
        if (store_redis_group_fail_open(c, g, v->raw, v->raw_len)) {
            return;
        }
        if (c->err.len == 0) {
            PX_CHECK_OOM(buf_append(&c->err, v->raw, v->raw_len));
        }
        return;
    }
    if (v->type == '*' && v->n >= 1 && v->elem[0].type == '$' &&
        resp_value_is(&v->elem[0], "override")) {
        store_redis_group_overrides(c, g, v);
        return;
    }
    if (v->type != '*' || v->n < 3 || v->elem[0].type != ':' ||
        v->elem[1].type != ':' || v->elem[2].type != ':') {
        store_redis_check_error(c, GCRA_ERR_SCRIPT);
        return;
    }
    sr.limited = v->elem[0].integer;
    sr.now_s = v->elem[1].integer;
    sr.now_us = v->elem[2].integer;
    c->admitted[g] = c->op == STORE_CHECK && sr.limited == 0;
    for (i = 0; i < c->n; i++) {
        if (c->lim[i].group != g) {
            continue;
        }
        if (3 + k >= v->n) {
            store_redis_check_error(c, GCRA_ERR_SCRIPT);
            return;
        }
        if (store_redis_entry(c, i, &v->elem[3 + k++], &sr) != 0) {
            return;
        }
    }
    /* The script's `limited` is its real limits' alone; a limit of a
     * shadow level that refused took nothing either. */
    store_shadow_mark(c);
    for (i = 0; i < c->n; i++) {
        struct store_limit *x = &c->lim[i];
        struct rl_decision *r = &c->res[i];
        if (x->group != g || x->algo == LIMITS_GCRA || sr.limited != 0 ||
            x->shadow_limited || c->cost == 0) {
            continue;
        }
        /* Taken in this group (by a check, refunded if another slot
         * refuses; what a check would take, for a peek): the state
         * without this request has its cost back. */
        c->peek[i].remaining = r->remaining > r->limit - c->cost
                                   ? r->limit
                                   : r->remaining + c->cost;
    }
}

/* The four parameters of limit x as limiter.lua takes them: gcra's split
 * INC and DVT, else the documented parameters in stored units ("" when
 * unused; an infinite rate as "inf"). Returns the words, kept in rs's
 * memo until the next call. */
static const struct store_redis_params *
store_redis_lua_params(struct store_redis *rs, const struct store_check *c,
                       const struct store_limit *x)
{
    struct store_redis_params *m = &rs->params;
    struct gcra_params wp;
    int64_t v[LIMITS_MAX_PARAMS];
    size_t nv, k;

    if (x->algo == LIMITS_GCRA) {
        /* A shadow level reserves nothing for WAIT: it never delays. */
        store_write_params(&x->p, x->shadow ? 0 : c->wait_ns, &wp);
        v[0] = wp.inc_ns;
        v[1] = wp.dvt_ns;
        nv = 2;
    } else {
        nv = limits_params(&x->lim, v);
    }
    if (m->nv == nv && m->algo == x->algo &&
        memcmp(m->v, v, nv * sizeof(v[0])) == 0) {
        return m;
    }
    memset(m, 0, sizeof(*m));
    if (x->algo == LIMITS_GCRA) {
        struct gcra_script_args sa;
        gcra_script_args(&wp, &sa);
        for (k = 0; k < 4; k++) {
            memcpy(m->out[k], sa.v[k], sa.len[k]);
            m->len[k] = sa.len[k];
        }
    } else {
        for (k = 0; k < nv && k < 4; k++) {
            if (v[k] == LIMITS_RATE_INF) {
                memcpy(m->out[k], "inf", 4);
                m->len[k] = 3;
            } else {
                m->len[k] = (size_t)resp_fmt_ll(m->out[k], (long long)v[k]);
            }
        }
    }
    m->algo = x->algo;
    memcpy(m->v, v, nv * sizeof(v[0]));
    m->nv = nv;
    return m;
}

/* The first level of group g (every group has one). */
static const struct limits_level *
store_redis_group_level(const struct store_check *c, unsigned g)
{
    size_t l;

    for (l = 0; l < c->lv->n; l++) {
        if (c->lv->level[l].group == g) {
            return &c->lv->level[l];
        }
    }
    PX_ASSERT(0);
    return NULL;
}

/* One word of a queued group: its length, then its bytes, written at
 * once into the room the group reserved (a group queues a dozen words or
 * more per LIMITER call). */
static void store_redis_word(struct limiter_group *q, const char *p, size_t len)
{
    char *at;

    PX_CHECK_OOM(buf_reserve(&q->words, sizeof(len) + len));
    at = buf_tail(&q->words);
    memcpy(at, &len, sizeof(len));
    if (len > 0) {
        memcpy(at + sizeof(len), p, len);
    }
    buf_commit(&q->words, sizeof(len) + len);
    q->nw++;
}

/* The word of `q` at byte *at (moves *at to the next one). */
static const char *store_redis_word_at(const struct limiter_group *q,
                                       size_t *at, size_t *len)
{
    const char *p = q->words.data + *at + sizeof(*len);

    memcpy(len, q->words.data + *at, sizeof(*len));
    *at += sizeof(*len) + *len;
    return p;
}

static void store_redis_group_free(struct limiter_group *q)
{
    buf_free(&q->words);
    px_free(q);
}

/* The algorithms whose refusals the cache answers: a refusal leaves
 * their state as it was (a GCRA TAT, a hash of a few integers), and with
 * no write the state only frees capacity as time passes (a TAT falls
 * behind the clock, a bucket refills or drains, a fixed window ends, a
 * sliding counter's previous window weighs less), so a refusal holds for
 * every earlier time; so do a sliding window's slots, which age out of
 * the window. A sliding log is written by a refusal. */
static int store_redis_algo_cacheable(enum limits_algo a)
{
    return a == LIMITS_GCRA || a == LIMITS_SLIDING_WINDOW ||
           store_fields_algo(a);
}

/* True when group g of `c` may be answered by the refusal cache: a check
 * or peek without WAIT whose limits all have cacheable algorithms,
 * assuming no run-time override (the cache tracks the override hash as
 * absent). */
static int store_redis_group_cacheable(const struct store_check *c, unsigned g)
{
    unsigned i;
    size_t l;

    if (c->op == STORE_RESET || c->wait_ns != 0) {
        return 0;
    }
    /* A shadow level's refusal is not the check's: a cached refusal of
     * its group could answer "limited" for a check it never refuses. */
    for (i = 0; i < c->n; i++) {
        if (c->lim[i].group == g &&
            (!store_redis_algo_cacheable(c->lim[i].algo) || c->lim[i].shadow)) {
            return 0;
        }
    }
    for (l = 0; l < c->lv->n; l++) {
        const struct limits_level *lev = &c->lv->level[l];
        if (lev->group == g && store_redis_override_known(
                                   c->st, lev->path, lev->path_len) != NULL) {
            return 0;
        }
    }
    return 1;
}

/* Limit x (gcra) decided from the cache for the local time `now_local`:
 * its decision with the cost in *res, without it in *peek; 0, or -1 when
 * the key is not cached. */
static int store_redis_cached_gcra(struct store_redis *rs,
                                   const struct store_limit *x,
                                   uint64_t now_local, struct rl_decision *res,
                                   struct rl_decision *peek)
{
    struct gcra_result r, pk;
    struct gcra_params pp;
    const char *err;
    int64_t tat, now;
    int have;

    if (!refusal_lookup(&rs->refusals, x->key, x->klen, now_local, &have, &tat,
                        &now)) {
        return -1;
    }
    gcra_params_peek(&x->p, &pp);
    if (gcra_decide(&x->p, have, tat, now, &r, &err) != GCRA_OK ||
        gcra_decide(&pp, have, tat, now, &pk, &err) != GCRA_OK) {
        return -1;
    }
    *res = r.d;
    *peek = pk.d;
    return 0;
}

/* Limit x (a sliding window) decided from the cache for the local time
 * `now_local`, with `cost`: its decision in *out; 0, or -1 when the key is
 * not cached. */
static int store_redis_cached_slots(struct store_redis *rs,
                                    const struct store_limit *x,
                                    uint64_t now_local, int64_t cost,
                                    struct rl_decision *out)
{
    struct sliding_window_slot slots[REFUSAL_SLOTS_MAX];
    struct sliding_window_params p;
    struct sliding_window_result r;
    const int64_t *v;
    const char *err;
    int64_t now;
    size_t n, i;
    int have;

    if (!refusal_lookup_slots(&rs->refusals, x->key, x->klen, now_local, &have,
                              &v, &n, &now) ||
        sliding_window_params_init(
            &p, x->lim.u.sliding_window.max, x->lim.u.sliding_window.window_ms,
            x->lim.u.sliding_window.resolution_ms, &err) != SLIDING_WINDOW_OK) {
        return -1;
    }
    for (i = 0; i < n; i++) {
        if (v[2 * i] > INT64_MAX / 1000) {
            return -1;
        }
        slots[i].start_ns = v[2 * i] * 1000;
        slots[i].count = v[2 * i + 1];
    }
    if (rs->sw_cap < (size_t)p.nslots) {
        rs->sw_cap = (size_t)p.nslots;
        rs->sw_next =
            px_realloc(rs->sw_next, rs->sw_cap * sizeof(*rs->sw_next));
    }
    if (sliding_window_decide(&p, have ? slots : NULL, have ? n : 0, now, cost,
                              rs->sw_next, rs->sw_cap, &r,
                              &err) != SLIDING_WINDOW_OK) {
        return -1;
    }
    *out = r.d;
    return 0;
}

/* Limit x (an algorithm of store_fields_algo) decided from the cache for
 * the local time `now_local`, with `cost`: its decision in *out; 0, or -1
 * when the key is not cached. */
static int store_redis_cached_fields(struct store_redis *rs,
                                     const struct store_limit *x,
                                     uint64_t now_local, int64_t cost,
                                     struct rl_decision *out)
{
    int64_t v[REFUSAL_FIELDS_MAX], now;
    struct store_fields_result r;
    union store_fields st;
    const char *err;
    int have;

    if (!refusal_lookup_hash(&rs->refusals, x->key, x->klen,
                             store_fields_names(x->algo), now_local, &have, v,
                             &now) ||
        (have && store_fields_from_hash(x->algo, v, &st) != 0) ||
        store_fields_decide(&x->lim, have ? &st : NULL, now, cost, &r, &err) !=
            0) {
        return -1;
    }
    *out = r.d;
    return 0;
}

/* Limit x (any cached algorithm but gcra, whose decision gives two
 * results) decided from the cache: as store_redis_cached_fields. */
static int store_redis_cached_hash(struct store_redis *rs,
                                   const struct store_limit *x,
                                   uint64_t now_local, int64_t cost,
                                   struct rl_decision *out)
{
    return x->algo == LIMITS_SLIDING_WINDOW
               ? store_redis_cached_slots(rs, x, now_local, cost, out)
               : store_redis_cached_fields(rs, x, now_local, cost, out);
}

/* Decides `c` from the refusal cache when every key of it and every
 * override hash are cached: 1 when that refuses it (c->res and c->peek
 * filled as the nodes' replies would fill them, at an upper bound of
 * their clocks, where a refusal is one they would make too), else 0
 * (Redis decides). */
static int store_redis_refused_here(struct store *st, struct store_check *c)
{
    struct store_redis *rs = st->impl;
    uint64_t now_local;
    char ovkey[STORE_KEY_MAX];
    unsigned char glim[LIMITS_MAX_DEPTH];
    int64_t tat, now;
    int have, limited = 0, ovlen;
    unsigned g, i;

    if (refusal_count(&rs->refusals) == 0 || c->n == 0 ||
        c->ngroups > LIMITS_MAX_DEPTH) {
        return 0;
    }
    now_local = uv_hrtime();
    for (g = 0; g < c->ngroups; g++) {
        if (!store_redis_group_cacheable(c, g)) {
            return 0;
        }
        ovlen = store_redis_override_key(st, store_redis_group_level(c, g),
                                         ovkey, sizeof(ovkey));
        PX_ASSERT(ovlen > 0 && (size_t)ovlen < sizeof(ovkey));
        if (!refusal_lookup(&rs->refusals, ovkey, (size_t)ovlen, now_local,
                            &have, &tat, &now) ||
            have) {
            return 0;
        }
        glim[g] = 0;
    }
    for (i = 0; i < c->n; i++) {
        const struct store_limit *x = &c->lim[i];
        int rc = x->algo == LIMITS_GCRA
                     ? store_redis_cached_gcra(rs, x, now_local, &c->res[i],
                                               &c->peek[i])
                     : store_redis_cached_hash(rs, x, now_local, c->cost,
                                               &c->res[i]);
        if (rc != 0) {
            return 0;
        }
        glim[x->group] |= c->res[i].limited;
        limited |= c->res[i].limited;
    }
    if (!limited) {
        return 0;
    }
    /* Another algorithm's entry in a node's reply: in a group that refused,
     * the state without this request where this level admitted; in one
     * that admitted, the decision, and the state with its cost back. */
    for (i = 0; i < c->n; i++) {
        struct store_limit *x = &c->lim[i];
        struct rl_decision *r = &c->res[i];
        if (x->algo == LIMITS_GCRA) {
            continue;
        }
        if (glim[x->group] && !r->limited &&
            store_redis_cached_hash(rs, x, now_local, 0, r) != 0) {
            return 0;
        }
        c->peek[i] = *r;
        if (!glim[x->group] && c->cost > 0) {
            c->peek[i].remaining = r->remaining > r->limit - c->cost
                                       ? r->limit
                                       : r->remaining + c->cost;
        }
    }
    return 1;
}

/* Whether limit i goes into group g's call: every limit of the group, but
 * a refund only gives back what the check took, so not the limits of a
 * shadow level that refused. */
static int store_redis_group_sends(const struct store_check *c, unsigned i,
                                   unsigned g, int refund)
{
    return c->lim[i].group == g && !(refund && c->lim[i].shadow_limited);
}

/* Whether group g of `c` may name its override fields by its keys
 * (limiter.lua's "keys" in place of its pairs): this proxy assumes no
 * run-time override at any of its levels, and every level sends a key,
 * from which the script reads the level's path back. Such a group spares
 * Redis two words a level (the path and the assumed ""), which it parses
 * whether or not an override hash exists; the script makes the paths only
 * when one does. */
static int store_redis_group_by_keys(const struct store_check *c, unsigned g)
{
    size_t l;
    unsigned i;

    for (l = 0; l < c->lv->n; l++) {
        const struct limits_level *lev = &c->lv->level[l];
        int sent = 0;
        if (lev->group != g) {
            continue;
        }
        if (store_redis_override_known(c->st, lev->path, lev->path_len) !=
            NULL) {
            return 0;
        }
        for (i = 0; i < c->n && !sent; i++) {
            sent = c->lim[i].level == l;
        }
        if (!sent) {
            return 0;
        }
    }
    return 1;
}

/* Queues group g of `c` for the flush pass in `mode` ("check", "peek" or
 * "refund"; a refund is nobody's to wait for): its keys, the override
 * hash of its tag last (which also routes a group whose levels an
 * override lifted entirely), then its "each" arguments. */
static void store_redis_group_queue(struct store_check *c, unsigned g,
                                    const char *mode)
{
    struct store_redis *rs = c->st->impl;
    int refund = strcmp(mode, "refund") == 0;
    struct limiter_group *q = px_calloc(1, sizeof(*q));
    const struct store_redis_params *args;
    char num[24], ovkey[STORE_KEY_MAX];
    unsigned i, npath = 0;
    int ovlen, k, by_keys;
    size_t l;

    q->it.kind = STORE_REDIS_GROUP;
    q->it.cid = c->root->cid;
    q->c = refund ? NULL : c;
    q->g = g;
    buf_init(&q->words);
    /* Room for a usual group's words at once, not grown word by word. */
    PX_CHECK_OOM(buf_reserve(&q->words, STORE_REDIS_GROUP_WORDS_BYTES));
    ovlen = store_redis_override_key(c->st, store_redis_group_level(c, g),
                                     ovkey, sizeof(ovkey));
    PX_ASSERT(ovlen > 0 && (size_t)ovlen < sizeof(ovkey));
    q->it.slot = c->st->cl->enabled ? slot_for_key(ovkey, (size_t)ovlen) : 0;
    for (i = 0; i < c->n; i++) {
        if (store_redis_group_sends(c, i, g, refund)) {
            store_redis_word(q, c->lim[i].key, c->lim[i].klen);
        }
    }
    q->route_at = q->words.len;
    store_redis_word(q, ovkey, (size_t)ovlen);
    q->nk = q->nw;
    store_redis_word(q, mode, strlen(mode));
    store_redis_word(q, num, resp_fmt_ll(num, (long long)c->cost));
    store_redis_word(q, num, resp_fmt_ll(num, (long long)q->nk - 1));
    for (i = 0; i < c->n; i++) {
        const char *algo = limits_algo_name(c->lim[i].algo);
        /* The last value: a refund's undo token; a check's shadow level
         * ("" for a real limit, else a name its level's limits share). */
        const char *undo = refund ? c->lim[i].undo : "";
        char level[RESP_FMT_LL_MAX + 1];
        if (!store_redis_group_sends(c, i, g, refund)) {
            continue;
        }
        if (!refund && c->lim[i].shadow) {
            resp_fmt_ll(level, (long long)c->lim[i].level + 1);
            undo = level;
        }
        args = store_redis_lua_params(rs, c, &c->lim[i]);
        store_redis_word(q, algo, strlen(algo));
        for (k = 0; k < 4; k++) {
            store_redis_word(q, args->out[k], args->len[k]);
        }
        store_redis_word(q, undo, strlen(undo));
    }
    q->cacheable = store_redis_group_cacheable(c, g) && !refund;
    by_keys = !refund && store_redis_group_by_keys(c, g);
    /* Refunds undo what was written; only checks verify overrides. */
    for (l = 0; l < c->lv->n && !refund && !by_keys; l++) {
        npath += c->lv->level[l].group == g;
    }
    if (by_keys) {
        store_redis_word(q, "keys", 4);
    } else {
        store_redis_word(q, num, resp_fmt_ll(num, (long long)npath));
    }
    for (l = 0; l < c->lv->n && !refund && !by_keys; l++) {
        const struct limits_level *lev = &c->lv->level[l];
        const char *known;
        if (lev->group != g) {
            continue;
        }
        known = store_redis_override_known(c->st, lev->path, lev->path_len);
        store_redis_word(q, lev->path, lev->path_len);
        store_redis_word(q, known != NULL ? known : "",
                         known != NULL ? strlen(known) : 0);
    }
    queue_insert_tail(&rs->pending, &q->it.link);
    c->st->queued++;
}

/* One more part of `c` answered; after the last, its completion (or the
 * orphan is freed). */
static void store_redis_check_part_done(struct store_check *c)
{
    if (--c->pending > 0) {
        return;
    }
    if (!req_owed_back(c->root)) {
        store_check_free(c);
        return;
    }
    c->done(c);
}

static const char *store_redis_item_key(const struct store_redis_item *it,
                                        size_t *len);

/* This proxy writes the keys of group g of `c`: the refusal cache forgets
 * them now, not when Redis's invalidation comes. */
static void store_redis_forget_keys(struct store_check *c, unsigned g)
{
    struct store_redis *rs = c->st->impl;
    unsigned i;

    for (i = 0; i < c->n; i++) {
        if (c->lim[i].group == g) {
            refusal_forget(&rs->refusals, c->lim[i].key, c->lim[i].klen);
        }
    }
}

/* What a decided group teaches the refusal cache (its reply `v`, sent at
 * local time `sent_ns`): a refusal of a cacheable group wrote nothing, so
 * every key it read (a TAT as the script read it, a hash state as the
 * tracker will) and its absent override hash are remembered; a check
 * it admitted wrote its keys, which this proxy forgets. */
static void store_redis_group_learn(const struct limiter_group *q,
                                    const struct resp_value *v,
                                    uint64_t sent_ns)
{
    struct store_check *c = q->c;
    struct store_redis *rs = c->st->impl;
    int64_t node_now;
    unsigned i, k = 0;
    const char *ovkey;
    size_t ovlen;

    if (v->type != '*' || v->n < 3 || v->elem[0].type != ':' ||
        v->elem[1].type != ':' || v->elem[2].type != ':') {
        return;
    }
    if (v->elem[0].integer == 0) {
        if (c->op == STORE_CHECK) {
            store_redis_forget_keys(c, q->g);
        }
        return;
    }
    if (!q->cacheable) {
        return;
    }
    node_now = v->elem[1].integer * 1000000000 + v->elem[2].integer * 1000;
    for (i = 0; i < c->n; i++) {
        const struct resp_value *e;
        if (c->lim[i].group != q->g) {
            continue;
        }
        if (3 + k >= v->n) {
            return;
        }
        e = &v->elem[3 + k++];
        if (e->type != '*') {
            return;
        }
        if (c->lim[i].algo == LIMITS_SLIDING_WINDOW) {
            /* Its entry is a decision, not the state: the tracker reads
             * the slots. */
            refusal_learn_slots(&rs->refusals, c->lim[i].key, c->lim[i].klen,
                                node_now, sent_ns);
            continue;
        }
        if (c->lim[i].algo != LIMITS_GCRA) {
            /* Its entry is a decision, not the state: the tracker reads
             * the hash. */
            refusal_learn_hash(&rs->refusals, c->lim[i].key, c->lim[i].klen,
                               store_fields_names(c->lim[i].algo), node_now,
                               sent_ns);
            continue;
        }
        if (e->n != 1) {
            return;
        }
        store_redis_learn_tat(rs, c->lim[i].key, c->lim[i].klen,
                              e->elem[0].null ? NULL : e->elem[0].str,
                              e->elem[0].null ? 0 : e->elem[0].len, node_now,
                              sent_ns);
    }
    /* No override for the identity: its hash did not exist, which the
     * tracker confirms and watches like any key. */
    ovkey = store_redis_item_key(&q->it, &ovlen);
    refusal_learn(&rs->refusals, ovkey, ovlen, NULL, 0, 0, 0, node_now,
                  sent_ns);
}

/* A queued group's answer `e` (its element of the batch's reply, sent at
 * local time `sent_ns`, or an error for it); frees `q`. */
static void store_redis_group_done(struct limiter_group *q,
                                   const struct resp_value *e, uint64_t sent_ns)
{
    if (q->c != NULL) {
        store_redis_group_reply(q->c, q->g, e);
        if (q->c->err.len == 0 && !q->c->stale) {
            store_redis_group_learn(q, e, sent_ns);
        }
        store_redis_check_part_done(q->c);
    }
    store_redis_group_free(q);
}

/* RESET's DEL of one group's keys: how many went. */
static void store_redis_reset_on_reply(struct req *part, const char *frame,
                                       size_t len)
{
    struct store_check *c = part->ctx;

    if (frame[0] == '-') {
        if (c->err.len == 0) {
            PX_CHECK_OOM(buf_append(&c->err, frame, len));
        }
    } else if (frame[0] == ':') {
        c->deleted += strtoll(frame + 1, NULL, 10);
    }
    /* Again before the client hears of it: a refusal read before the DEL
     * may have been learnt meanwhile, and Redis's invalidation of it may
     * still be on its way. */
    store_redis_forget_keys(c, part->part);
    store_redis_check_part_done(c);
}

/* RESET of group g: DEL of its keys, on the node of its tag. */
static void store_redis_reset_send(struct store_check *c, unsigned g)
{
    unsigned i, a = 0;
    const char **argv = px_calloc(c->n + 1, sizeof(*argv));
    size_t *lens = px_calloc(c->n + 1, sizeof(*lens));
    char ovkey[STORE_KEY_MAX];
    int ovlen;

    ovlen = store_redis_override_key(c->st, store_redis_group_level(c, g),
                                     ovkey, sizeof(ovkey));
    PX_ASSERT(ovlen > 0 && (size_t)ovlen < sizeof(ovkey));
    /* A check the client pipelines after the RESET must not be refused
     * from the state it deletes. */
    store_redis_forget_keys(c, g);
    argv[a] = "DEL";
    lens[a++] = 3;
    for (i = 0; i < c->n; i++) {
        if (c->lim[i].group == g) {
            argv[a] = c->lim[i].key;
            lens[a++] = c->lim[i].klen;
        }
    }
    store_redis_part_send(c->st, resp_cmd_new((int)a, argv, lens),
                          store_redis_reset_on_reply, c, g, c->root->cid, ovkey,
                          (size_t)ovlen);
    px_free(argv);
    px_free(lens);
}

/* The check op: counts the call in c->root->owed, frees the orphan
 * itself. */
static void store_redis_check(struct store *st, struct store_check *c,
                              store_check_done_fn *done)
{
    unsigned g;

    c->done = done;
    if (c->op != STORE_RESET && store_redis_refused_here(st, c)) {
        struct store_redis *rs = st->impl;
        rs->refusals.hits++;
        done(c);
        return;
    }
    /* RESET deletes keys, so a group without any has nothing to do;
     * checks call every group, to verify its overrides. */
    for (g = 0; g < c->ngroups; g++) {
        c->pending += c->op != STORE_RESET || store_redis_group_keys(c, g) > 0;
    }
    c->root->owed++;
    for (g = 0; g < c->ngroups; g++) {
        if (c->op != STORE_RESET) {
            store_redis_group_queue(c, g,
                                    c->op == STORE_PEEK ? "peek" : "check");
        } else if (store_redis_group_keys(c, g) > 0) {
            store_redis_reset_send(c, g);
        }
    }
}

/* The refund op: a "refund" call to every group that admitted; nobody
 * waits for its reply. Its keys are written again, so the refusal cache
 * forgets them. */
static void store_redis_refund(struct store *st, struct store_check *c)
{
    unsigned g;

    PX_UNUSED(st);
    for (g = 0; g < c->ngroups; g++) {
        unsigned i, takers = 0;
        for (i = 0; i < c->n; i++) {
            takers += store_redis_group_sends(c, i, g, 1);
        }
        if (c->admitted[g] && takers > 0) {
            store_redis_forget_keys(c, g);
            store_redis_group_queue(c, g, "refund");
        }
    }
}

/* ---------------- The flush pass: batches of queued calls ---------------- */

/* A script call's words as they are gathered: borrowed bytes (alive until
 * the command is made) and their lengths. */
struct store_redis_words {
    const char **v; /* owned array of borrowed words */
    size_t *len;    /* owned: their lengths */
    unsigned n;     /* words so far */
    unsigned cap;   /* room */
};

static void store_redis_words_init(struct store_redis_words *w, unsigned cap)
{
    /* Filled in order, read up to n: not zeroed (a batch holds hundreds). */
    w->v = px_mallocarray(cap, sizeof(*w->v));
    w->len = px_mallocarray(cap, sizeof(*w->len));
    w->n = 0;
    w->cap = cap;
}

static void store_redis_words_add(struct store_redis_words *w, const char *p,
                                  size_t len)
{
    PX_ASSERT(w->n < w->cap);
    w->v[w->n] = p;
    w->len[w->n++] = len;
}

/* The command of the words gathered; frees the arrays. */
static struct resp_cmd *store_redis_words_cmd(struct store_redis_words *w)
{
    struct resp_cmd *cmd = resp_cmd_new((int)w->n, w->v, w->len);

    px_free(w->v);
    px_free(w->len);
    return cmd;
}

/* Starts the words of a call of `s` with its first three: how it is sent
 * (FCALL, EVALSHA...) and the number of keys declared (none for a spread
 * batch: its keys follow the arguments). */
static void store_redis_words_head(struct store_redis_words *w,
                                   struct limiter_batch *b,
                                   const struct scripts_lua *s, unsigned nkeys,
                                   char num[16])
{
    store_redis_head(b->st, s, &b->via, w->v, w->len);
    w->n = 2;
    snprintf(num, 16, "%u", b->spread ? 0 : nkeys);
    store_redis_words_add(w, num, strlen(num));
}

/* Whether calls i and j of `b` send the same four script arguments: those
 * are INC and DVT, split (gcra_script_args). */
static int store_redis_same_run(const struct limiter_batch *b, unsigned i,
                                unsigned j)
{
    const struct gcra_params *x = &((struct limiter_call *)b->item[i])->p;
    const struct gcra_params *y = &((struct limiter_call *)b->item[j])->p;

    return x->inc_ns == y->inc_ns && x->dvt_ns == y->dvt_ns;
}

/* gcra.lua "runs": the keys, then "runs", R and per run of calls with the
 * same limit its count and four arguments, formatted once a run (batched
 * calls mostly share one limit). */
static struct resp_cmd *store_redis_throttle_cmd(struct limiter_batch *b)
{
    struct gcra_script_args *sa;
    char(*count)[16]; /* [runs]: R, then each run's count */
    struct store_redis_words w;
    struct resp_cmd *cmd;
    char num[16];
    unsigned i, j, r, runs = 0;
    int k;

    for (i = 0; i < b->n; i++) {
        runs += i == 0 || !store_redis_same_run(b, i - 1, i);
    }
    sa = px_calloc(runs, sizeof(*sa));
    count = px_calloc(runs + 1, sizeof(*count));
    store_redis_words_init(&w, 5 + b->n + 5 * runs);
    store_redis_words_head(&w, b, scripts_gcra(), b->n, num);
    for (i = 0; i < b->n && !b->spread; i++) {
        const struct limiter_call *call = (struct limiter_call *)b->item[i];
        store_redis_words_add(&w, call->key, call->klen);
    }
    store_redis_words_add(&w, "runs", 4);
    snprintf(count[runs], sizeof(*count), "%u", runs);
    store_redis_words_add(&w, count[runs], strlen(count[runs]));
    for (i = 0, r = 0; i < b->n; i = j, r++) {
        for (j = i + 1; j < b->n && store_redis_same_run(b, i, j); j++) {
        }
        gcra_script_args(&((struct limiter_call *)b->item[i])->p, &sa[r]);
        snprintf(count[r], sizeof(*count), "%u", j - i);
        store_redis_words_add(&w, count[r], strlen(count[r]));
        for (k = 0; k < GCRA_SCRIPT_NARGS; k++) {
            store_redis_words_add(&w, sa[r].v[k], sa[r].len[k]);
        }
    }
    for (i = 0; i < b->n && b->spread; i++) {
        const struct limiter_call *call = (struct limiter_call *)b->item[i];
        store_redis_words_add(&w, call->key, call->klen);
    }
    cmd = store_redis_words_cmd(&w);
    px_free(count);
    px_free(sa);
    return cmd;
}

/* Adds the keys of every group of `b`. */
static void store_redis_batch_keys(struct store_redis_words *w,
                                   const struct limiter_batch *b)
{
    unsigned i, j;

    for (i = 0; i < b->n; i++) {
        const struct limiter_group *q = (struct limiter_group *)b->item[i];
        size_t at = 0, len;
        for (j = 0; j < q->nk; j++) {
            const char *p = store_redis_word_at(q, &at, &len);
            store_redis_words_add(w, p, len);
        }
    }
}

/* Where group q's arguments start in its words (after its keys). */
static size_t store_redis_args_at(const struct limiter_group *q)
{
    size_t at = 0, len;
    unsigned j;

    for (j = 0; j < q->nk; j++) {
        store_redis_word_at(q, &at, &len);
    }
    return at;
}

/* Where group q's override pairs start in its words: after its args_at,
 * the mode, cost, n, 6 words a level (n = its keys but the override hash)
 * and m. What comes before them is the group's shape. */
static size_t store_redis_pairs_at(const struct limiter_group *q,
                                   size_t args_at)
{
    size_t at = args_at, len;
    unsigned j;

    for (j = 0; j < 4 + 6 * (q->nk - 1); j++) {
        store_redis_word_at(q, &at, &len);
    }
    return at;
}

/* Adds the words of q from byte `from` to byte `to`. */
static void store_redis_add_words(struct store_redis_words *w,
                                  const struct limiter_group *q, size_t from,
                                  size_t to)
{
    size_t len;

    while (from < to) {
        const char *word = store_redis_word_at(q, &from, &len);
        store_redis_words_add(w, word, len);
    }
}

/* limiter.lua "shapes": every group's keys, then "shapes", "" (the node's
 * clock), S and the S distinct blocks of the groups (mode, cost, n, the
 * levels and m: a block is the bytes of its words, so equal bytes are
 * equal words), then G and for each group its block's number (none when
 * S is 1) and its override pairs. The groups of one batch mostly come from
 * one tree node: they share the levels and differ in their keys and in
 * the override fields, which name the identity. */
static struct resp_cmd *store_redis_group_cmd(struct limiter_batch *b)
{
    struct store_redis_words w;
    size_t at[STORE_REDIS_BATCH_MAX], pairs[STORE_REDIS_BATCH_MAX];
    unsigned shape[STORE_REDIS_BATCH_MAX]; /* group -> its first group */
    char idx[STORE_REDIS_BATCH_MAX][RESP_FMT_LL_MAX + 1];
    unsigned i, j, nk = 0, nw = 0, ns = 0;
    char num[16], cnt[2][16];

    for (i = 0; i < b->n; i++) {
        const struct limiter_group *q = (struct limiter_group *)b->item[i];
        nk += q->nk;
        nw += q->nw;
        at[i] = store_redis_args_at(q);
        pairs[i] = store_redis_pairs_at(q, at[i]);
        shape[i] = i;
        for (j = 0; j < i; j++) {
            const struct limiter_group *r = (struct limiter_group *)b->item[j];
            size_t len = pairs[i] - at[i];
            if (shape[j] == j && pairs[j] - at[j] == len &&
                memcmp(q->words.data + at[i], r->words.data + at[j], len) ==
                    0) {
                shape[i] = j;
                break;
            }
        }
        if (shape[i] == i) {
            /* Its number among the shapes, for the groups that share it. */
            resp_fmt_ll(idx[i], (long long)++ns);
        }
    }
    store_redis_words_init(&w, 7 + nw + b->n);
    store_redis_words_head(&w, b, scripts_limiter(), nk, num);
    if (!b->spread) {
        store_redis_batch_keys(&w, b);
    }
    store_redis_words_add(&w, "shapes", 6);
    store_redis_words_add(&w, "", 0);
    snprintf(cnt[0], sizeof(cnt[0]), "%u", ns);
    store_redis_words_add(&w, cnt[0], strlen(cnt[0]));
    for (i = 0; i < b->n; i++) {
        if (shape[i] == i) {
            store_redis_add_words(&w, (struct limiter_group *)b->item[i], at[i],
                                  pairs[i]);
        }
    }
    snprintf(cnt[1], sizeof(cnt[1]), "%u", b->n);
    store_redis_words_add(&w, cnt[1], strlen(cnt[1]));
    for (i = 0; i < b->n; i++) {
        const struct limiter_group *q = (struct limiter_group *)b->item[i];
        const char *x = idx[shape[i]];
        if (ns > 1) {
            store_redis_words_add(&w, x, strlen(x));
        }
        store_redis_add_words(&w, q, pairs[i], q->words.len);
    }
    if (b->spread) {
        store_redis_batch_keys(&w, b);
    }
    return store_redis_words_cmd(&w);
}

/* The key a queued call is routed by: a CL.THROTTLE's key, a group's
 * override hash (its last key). */
static const char *store_redis_item_key(const struct store_redis_item *it,
                                        size_t *len)
{
    const struct limiter_group *q = (const struct limiter_group *)it;
    size_t at = q->route_at;

    if (it->kind == STORE_REDIS_THROTTLE) {
        const struct limiter_call *call = (const struct limiter_call *)it;
        *len = call->klen;
        return call->key;
    }
    return store_redis_word_at(q, &at, len);
}

static void store_redis_on_batch(struct req *part, const char *frame,
                                 size_t len);

/* Sends `b` as one script call to the node of its first call's key. Takes
 * `b`. */
static void store_redis_batch_send(struct limiter_batch *b)
{
    struct resp_cmd *cmd = b->kind == STORE_REDIS_THROTTLE
                               ? store_redis_throttle_cmd(b)
                               : store_redis_group_cmd(b);
    const struct store_redis_item *it = b->item[0];
    struct cluster *cl = b->st->cl;
    unsigned db = it->db;
    uint64_t cid = it->cid;
    size_t klen;
    const char *key = store_redis_item_key(it, &klen);
    /* A refused send (the node down) fails the batch at once and frees
     * its items, key included: SELECT 0 routes by a copy. */
    char *kept = db != 0 ? px_strndup(key, klen) : NULL;

    b->sent_ns = uv_hrtime();
    store_redis_db_enter(cl, db, cid, key, klen);
    store_redis_part_send(b->st, cmd, store_redis_on_batch, b, 0, cid, key,
                          klen);
    store_redis_db_leave(cl, db, cid, kept, klen);
    px_free(kept);
}

/* A call of a spread batch whose slot the node did not serve: queued
 * again, to go by itself with its keys declared, which Redis redirects. */
static void store_redis_item_alone(struct store *st,
                                   struct store_redis_item *it)
{
    struct store_redis *rs = st->impl;

    it->alone = 1;
    queue_insert_tail(&rs->pending, &it->link);
}

/* Ends a queued call with the error `frame`. */
static void store_redis_item_fail(struct store *st, struct store_redis_item *it,
                                  const char *frame, size_t len)
{
    struct resp_value e;

    if (it->kind == STORE_REDIS_THROTTLE) {
        store_redis_call_error(st, (struct limiter_call *)it, frame, len);
        return;
    }
    memset(&e, 0, sizeof(e));
    e.type = '-';
    e.raw = frame;
    e.raw_len = len;
    store_redis_group_done((struct limiter_group *)it, &e, 0);
}

/* How many elements of a "shapes" reply group q's answer takes, `e`
 * being the first: a decided group's limited then its entries (a gcra
 * entry 1, any other 6); anything else (an error, an override's or a
 * refund's table) is one. */
static size_t store_redis_flat_len(const struct limiter_group *q,
                                   const struct resp_value *e)
{
    size_t n = 1;
    unsigned i;

    if (e->type != ':' || q->c == NULL) {
        return 1;
    }
    for (i = 0; i < q->c->n; i++) {
        if (q->c->lim[i].group == q->g) {
            n += q->c->lim[i].algo == LIMITS_GCRA ? 1 : 6;
        }
    }
    return n;
}

/* Elements of a group's answer that store_redis_flat_group keeps on the
 * caller's stack: {limited, now_s, now_us} and up to 5 limits. */
#define STORE_REDIS_FLAT_SMALL 8

/* Group q's decided answer in the "shapes" reply v, from v->elem[at], as
 * mode "each" gives it ({limited, now_s, now_us, entry...}) in *g, whose
 * arrays point into v's. g->elem is `small` (STORE_REDIS_FLAT_SMALL
 * elements) when it fits, else allocated: px_free it when it is not
 * `small`. */
static void store_redis_flat_group(const struct limiter_group *q,
                                   struct resp_value *v, size_t at,
                                   struct resp_value *g,
                                   struct resp_value *small)
{
    size_t p = at + 1, k = 3;
    unsigned i;

    memset(g, 0, sizeof(*g));
    g->type = '*';
    g->n = 3;
    for (i = 0; i < q->c->n; i++) {
        g->n += q->c->lim[i].group == q->g;
    }
    g->elem = g->n <= STORE_REDIS_FLAT_SMALL
                  ? memset(small, 0, g->n * sizeof(*small))
                  : px_calloc(g->n, sizeof(*g->elem));
    g->elem[0] = v->elem[at];
    g->elem[1] = v->elem[1];
    g->elem[2] = v->elem[2];
    for (i = 0; i < q->c->n; i++) {
        struct resp_value *e = &g->elem[k];
        if (q->c->lim[i].group != q->g) {
            continue;
        }
        k++;
        e->type = '*';
        e->n = q->c->lim[i].algo == LIMITS_GCRA ? 1 : 6;
        e->elem = &v->elem[p];
        p += e->n;
    }
}

/* True when `v` has the shape of the reply to `b`: {0, now_s, now_us}
 * then per CL.THROTTLE a TAT and an integer flag, or each group's
 * elements (store_redis_flat_len). */
static int store_redis_batch_shape(const struct limiter_batch *b,
                                   const struct resp_value *v)
{
    size_t i, at = 3;

    if (v->type != '*' || v->n < 3 || v->elem[1].type != ':' ||
        v->elem[2].type != ':') {
        return 0;
    }
    if (b->kind != STORE_REDIS_THROTTLE) {
        for (i = 0; i < b->n && at < v->n; i++) {
            at += store_redis_flat_len((struct limiter_group *)b->item[i],
                                       &v->elem[at]);
        }
        return i == b->n && at == v->n;
    }
    if (v->n != 3 + 2 * (size_t)b->n) {
        return 0;
    }
    for (i = 3 + b->n; i < v->n; i++) {
        if (v->elem[i].type != ':') {
            return 0;
        }
    }
    return 1;
}

static void store_redis_on_batch(struct req *part, const char *frame,
                                 size_t len)
{
    static const char bad[] = "-" GCRA_ERR_SCRIPT "\r\n";
    struct limiter_batch *b = part->ctx;
    struct resp_value v, g, small[STORE_REDIS_FLAT_SMALL];
    size_t used, klen, at = 3, flat;
    const char *key;
    unsigned i;
    int shaped;

    part->ctx = NULL;
    key = store_redis_item_key(b->item[0], &klen);
    if (frame[0] == '-' && store_redis_retry(b->st, &b->via, frame, len, key,
                                             klen, b->item[0]->cid)) {
        store_redis_batch_send(b);
        return;
    }
    if (frame[0] == '-') {
        /* A spread batch refused whole (a node that is no master any
         * more): each call goes again by itself, where Redis redirects
         * it; unless the node is down. */
        for (i = 0; i < b->n; i++) {
            if (b->spread && !store_redis_down(frame, len)) {
                store_redis_item_alone(b->st, b->item[i]);
            } else {
                store_redis_item_fail(b->st, b->item[i], frame, len);
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
    shaped = store_redis_batch_shape(b, &v);
    for (i = 0; i < b->n; i++) {
        struct store_redis_item *it = b->item[i];
        struct limiter_group *q = (struct limiter_group *)it;
        if (!shaped) {
            store_redis_item_fail(b->st, it, bad, sizeof(bad) - 1);
        } else if (it->kind == STORE_REDIS_THROTTLE) {
            if (v.elem[3 + b->n + i].integer == -3 && b->spread) {
                store_redis_item_alone(b->st, it);
            } else {
                store_redis_call_done(b->st, (struct limiter_call *)it, &v, i,
                                      b->n, b->sent_ns);
            }
        } else if (q->c != NULL && v.elem[at].type == ':') {
            /* Decided (of any number of limits); measured before the
             * answer frees q. */
            flat = store_redis_flat_len(q, &v.elem[at]);
            store_redis_flat_group(q, &v, at, &g, small);
            at += flat;
            store_redis_group_done(q, &g, b->sent_ns);
            if (g.elem != small) {
                px_free(g.elem);
            }
        } else if (v.elem[at].type == '-' && b->spread) {
            store_redis_item_alone(b->st, it);
            at++;
        } else {
            store_redis_group_done(q, &v.elem[at++], b->sent_ns);
        }
    }
    resp_value_free(&v);
    px_free(b);
}

/* Batches being filled by one flush pass. */
struct store_redis_open {
    struct limiter_batch *b; /* owned until sent */
    struct upstream *up;     /* borrowed: the shared connection it goes on
                                (NULL: no node serves its slot) */
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
static unsigned store_redis_open_hold(struct store_redis *rs,
                                      struct store_redis_open *open, unsigned i)
{
    struct limiter_batch *b = open[i].b;
    unsigned n = b->n, k;

    for (k = n; k > 0; k--) {
        queue_insert_head(&rs->pending, &b->item[k - 1]->link);
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
static void store_redis_flush(struct store *st, bool all)
{
    struct store_redis *rs = st->impl;
    struct store_redis_open open[STORE_REDIS_BATCH_MAX];
    unsigned char go[STORE_REDIS_BATCH_MAX]; /* per open batch: it goes */
    unsigned nopen = 0, held = 0, i;

    while (!queue_empty(&rs->pending)) {
        struct store_redis_item *it = container_of(
            queue_head(&rs->pending), struct store_redis_item, link);
        struct node *node = st->cl->enabled
                                ? cluster_node_for_slot(st->cl, it->slot)
                                : st->cl->single;
        struct upstream *up =
            node != NULL ? cluster_limiter_upstream(node, it->cid) : NULL;
        struct limiter_batch *b = NULL;

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
            b->st = st;
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
            held += store_redis_open_hold(rs, open, i - 1);
        }
    }
    st->queued = 0;
    st->held = held;
}

/* Shutdown: the calls not yet sent fail. */
static void store_redis_stop(struct store *st)
{
    static const char down[] = "-ERR proxy shutting down\r\n";
    struct store_redis *rs = st->impl;

    while (!queue_empty(&rs->pending)) {
        struct store_redis_item *it = container_of(
            queue_head(&rs->pending), struct store_redis_item, link);
        queue_remove(&it->link);
        store_redis_item_fail(st, it, down, sizeof(down) - 1);
    }
}

/* ---------------- LIMITER OVERRIDE SET|DEL|GET ---------------- */

/* One OVERRIDE command on its way to the node of the override hash. */
struct limiter_override_call {
    struct store *st;    /* borrowed: the store it runs in */
    struct req *root;    /* borrowed: the client's request */
    store_done_fn *done; /* the completion */
};

/* The node's reply to an OVERRIDE command, relayed (SET's integer as
 * +OK). */
static void store_redis_override_on_reply(struct req *part, const char *frame,
                                          size_t len)
{
    static const char reply_ok[] = "+OK\r\n";
    struct limiter_override_call *oc = part->ctx;
    struct store_reply r = { .kind = STORE_REPLY_FRAME };

    r.text = frame;
    r.len = len;
    if (part->part == 1 && frame[0] == ':') {
        r.text = reply_ok;
        r.len = sizeof(reply_ok) - 1;
    }
    if (req_owed_back(oc->root)) {
        oc->done(oc->st, oc->root, &r);
    }
    px_free(oc);
}

/* HSET/HDEL/HGET of `path` in the override hash of `lev`'s identity, where
 * every proxy's checks verify it. */
static void store_redis_override(struct store *st, struct req *req,
                                 enum store_override_op op,
                                 const struct limits_level *lev,
                                 const char *path, size_t plen,
                                 const char *text, size_t tlen,
                                 store_done_fn *done)
{
    struct limiter_override_call *oc;
    char key[STORE_KEY_MAX];
    const char *argv[4];
    size_t lens[4];
    int argc = op == STORE_OVERRIDE_SET ? 4 : 3, kl, i;

    kl = store_redis_override_key(st, lev, key, sizeof(key));
    PX_ASSERT(kl > 0 && (size_t)kl < sizeof(key));
    if (op != STORE_OVERRIDE_GET) {
        /* This proxy applies it at once; the others on their next check. */
        store_redis_override_learn(
            st, path, plen, op == STORE_OVERRIDE_SET ? text : NULL, tlen);
    }
    argv[0] = op == STORE_OVERRIDE_SET   ? "HSET"
              : op == STORE_OVERRIDE_DEL ? "HDEL"
                                         : "HGET";
    argv[1] = key;
    argv[2] = path;
    argv[3] = text;
    lens[0] = 0;
    lens[1] = (size_t)kl;
    lens[2] = plen;
    lens[3] = tlen;
    for (i = 0; i < argc; i++) {
        if (lens[i] == 0) {
            lens[i] = strlen(argv[i]);
        }
    }
    oc = px_calloc(1, sizeof(*oc));
    oc->st = st;
    oc->root = req;
    oc->done = done;
    req->owed++;
    store_redis_part_send(
        st, resp_cmd_new(argc, argv, lens), store_redis_override_on_reply, oc,
        (unsigned)(op == STORE_OVERRIDE_SET), req->cid, key, (size_t)kl);
}

/* ---------------- The store interface (store.h) ---------------- */

static void store_redis_init(struct store *st)
{
    struct store_redis *rs = px_calloc(1, sizeof(*rs));

    hmap_init(&rs->overrides);
    hmap_init(&rs->checked);
    refusal_init(&rs->refusals, st->cl, st->conf->refusal_cache_size,
                 st->conf->refusal_cache_max_bytes);
    queue_init(&rs->pending);
    /* A full batch (the calls of clients that owe nothing else share one
     * connection per node): sent at once, it keeps Redis busy while
     * cellgate reads on. */
    st->early = STORE_REDIS_BATCH_MAX;
    st->impl = rs;
    st->core->on_setup = store_redis_on_setup;
    st->core->setup_arg = st;
}

/* After stop: nothing is pending any more. */
static void store_redis_free(struct store *st)
{
    struct store_redis *rs = st->impl;

    if (rs != NULL) {
        st->core->on_setup = NULL;
        hmap_free(&rs->overrides, px_free);
        hmap_free(&rs->checked, NULL);
        refusal_free(&rs->refusals);
        px_free(rs->sw_next);
        px_free(rs);
        st->impl = NULL;
    }
}

static bool store_redis_caches(struct store *st)
{
    struct store_redis *rs = st->impl;

    return refusal_count(&rs->refusals) > 0;
}

static void store_redis_forget(struct store *st, const char *key, size_t klen)
{
    struct store_redis *rs = st->impl;

    if (key == NULL) {
        refusal_forget_all(&rs->refusals);
    } else {
        refusal_forget(&rs->refusals, key, klen);
    }
}

static void store_redis_node_gone(struct store *st, const char *name)
{
    struct store_redis *rs = st->impl;

    refusal_node_gone(&rs->refusals, name);
    /* Its users are checked again where they now are (aclcheck). */
    hmap_del(&rs->checked, name, strlen(name));
}

static void store_redis_stats(struct store *st, struct store_stats *out)
{
    struct store_redis *rs = st->impl;

    out->refusal_hits = rs->refusals.hits;
    out->refusal_keys = refusal_count(&rs->refusals);
    out->refusal_bytes = rs->refusals.bytes;
    out->refusal_skipped = rs->refusals.skipped;
    out->refusal_invalidations = rs->refusals.invalidations;
}

const struct store_ops store_redis_ops = {
    .init = store_redis_init,
    .free = store_redis_free,
    .ready = store_redis_ready,
    .throttle = store_redis_throttle,
    .check = store_redis_check,
    .refund = store_redis_refund,
    .override_known = store_redis_override_known,
    .override = store_redis_override,
    .flush = store_redis_flush,
    .caches = store_redis_caches,
    .forget = store_redis_forget,
    .node_gone = store_redis_node_gone,
    .cron = store_redis_cron,
    .stop = store_redis_stop,
    .stats = store_redis_stats,
};
