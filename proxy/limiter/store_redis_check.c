/* The Redis store's LIMITER calls (see store_redis_check.h): one
 * limiter.lua call per tag group of a tree call.
 *
 *   store_check (limits of every level, grouped by hash tag)
 *        |  per group g: "EVALSHA <limiter sha> nk+1 <keys of g>
 *        |                <prefix{tag}#overrides> check|peek '' cost
 *        |                (algo p1 p2 p3 p4 undo)... npaths (path known)..."
 *        |  (RESET: DEL <keys of g>)
 *        v
 *   [limited, now_s, now_us, entry...]   --> c->res[i], c->peek[i]
 *   ["override", value...]               --> the cache learns, c->stale
 *   -NOSCRIPT                            --> once more as EVAL
 *   -error                               --> c->err (the first one)
 *        |
 *        v  the last group answered: c->done(c), or the orphan is freed
 *
 * A group that admitted is marked (c->admitted) so the commands can have
 * it refunded ("refund" mode, each limit's undo token) when another group
 * refused or failed: a check consumes everywhere or nowhere. */
#include "proxy/limiter/store_redis_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/gcra.h"
#include "algorithms/scripts.h"
#include "conf/limits.h"
#include "parser/resp.h"
#include "parser/resp_value.h"
#include "proxy/core/req.h"
#include "proxy/core/util.h"
#include "proxy/limiter/limiter.h"
#include "proxy/limiter/store.h"
#include "proxy/limiter/store_redis.h"

/* Decimal room for one script argument. */
#define STORE_REDIS_ARG_MAX 24

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
                             const struct gcra_script_reply *sr, int admitted)
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
    c->peek[i] = c->res[i];
    if (admitted && c->cost > 0) {
        /* Taken here, refunded if another slot refuses: the state without
         * this request has its cost back. */
        c->peek[i].remaining = c->res[i].remaining > c->res[i].limit - c->cost
                                   ? c->res[i].limit
                                   : c->res[i].remaining + c->cost;
    }
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
        store_redis_override_learn(c->lm, lev->path, lev->path_len,
                                   e->type == '$' && !e->null ? e->str : NULL,
                                   e->type == '$' && !e->null ? e->len : 0);
    }
    c->stale = 1;
}

/* One group's script reply: each of its limits' decision. */
static void store_redis_group_reply(struct store_check *c, unsigned g,
                                    const char *frame, size_t len)
{
    struct gcra_script_reply sr;
    struct resp_value v;
    size_t used;
    unsigned i, k = 0;

    if (frame[0] == '-') {
        if (c->err.len == 0) {
            PX_CHECK_OOM(buf_append(&c->err, frame, len));
        }
        return;
    }
    if (c->op == STORE_RESET) {
        if (frame[0] == ':') {
            c->deleted += strtoll(frame + 1, NULL, 10);
        }
        return;
    }
    if (resp_value_parse(frame, len, &v, &used) != RESP_OK) {
        v.type = '?';
        v.n = 0;
        v.elem = NULL;
    }
    if (v.type == '*' && v.n >= 1 && v.elem[0].type == '$' &&
        resp_value_is(&v.elem[0], "override")) {
        store_redis_group_overrides(c, g, &v);
        resp_value_free(&v);
        return;
    }
    if (v.type != '*' || v.n < 3 || v.elem[0].type != ':' ||
        v.elem[1].type != ':' || v.elem[2].type != ':') {
        resp_value_free(&v);
        store_redis_check_error(c, GCRA_ERR_SCRIPT);
        return;
    }
    sr.limited = v.elem[0].integer;
    sr.now_s = v.elem[1].integer;
    sr.now_us = v.elem[2].integer;
    c->admitted[g] = c->op == STORE_CHECK && sr.limited == 0;
    for (i = 0; i < c->n; i++) {
        if (c->lim[i].group != g) {
            continue;
        }
        if (3 + k >= v.n) {
            store_redis_check_error(c, GCRA_ERR_SCRIPT);
            break;
        }
        if (store_redis_entry(c, i, &v.elem[3 + k++], &sr, c->admitted[g]) !=
            0) {
            break;
        }
    }
    resp_value_free(&v);
}

static void store_redis_group_send(struct store_check *c, unsigned g,
                                   const char *mode);

static void store_redis_check_on_reply(struct req *part, const char *frame,
                                       size_t len)
{
    struct store_check *c = part->ctx;
    unsigned g = part->part;

    if (c == NULL) {
        return; /* a refund: nobody waits for it */
    }
    if (len > 10 && memcmp(frame, "-NOSCRIPT ", 10) == 0 && !c->noscript[g]) {
        c->noscript[g] = 1;
        part->ctx = NULL;
        store_redis_group_send(c, g, c->op == STORE_PEEK ? "peek" : "check");
        return;
    }
    store_redis_group_reply(c, g, frame, len);
    if (--c->pending > 0) {
        return;
    }
    if (!req_owed_back(c->root)) {
        store_check_free(c);
        return;
    }
    c->done(c);
}

/* The four parameters of limit x as limiter.lua takes them: gcra's split
 * INC and DVT, else the documented parameters in stored units ("" when
 * unused; an infinite rate as "inf"). */
static void store_redis_lua_params(const struct store_check *c,
                                   const struct store_limit *x,
                                   char out[4][STORE_REDIS_ARG_MAX])
{
    int64_t v[LIMITS_MAX_PARAMS];
    size_t nv, k;

    memset(out, 0, 4 * STORE_REDIS_ARG_MAX);
    if (x->algo == LIMITS_GCRA) {
        struct gcra_params wp;
        struct gcra_script_args sa;
        store_write_params(&x->p, c->wait_ns, &wp);
        gcra_script_args(&wp, &sa);
        for (k = 0; k < 4; k++) {
            memcpy(out[k], sa.v[k], sa.len[k]);
        }
        return;
    }
    nv = limits_params(&x->lim, v);
    for (k = 0; k < nv && k < 4; k++) {
        if (v[k] == LIMITS_RATE_INF) {
            memcpy(out[k], "inf", 4);
        } else {
            snprintf(out[k], STORE_REDIS_ARG_MAX, "%lld", (long long)v[k]);
        }
    }
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

/* Sends group g's call: limiter.lua over the group's keys in `mode`, or
 * DEL of them (RESET). A refund carries no context: its reply is dropped.
 * Every call names the override hash of the group's tag last, which also
 * routes a group whose levels an override lifted entirely. */
static void store_redis_group_send(struct store_check *c, unsigned g,
                                   const char *mode)
{
    const struct scripts_lua *s = scripts_limiter();
    int refund = strcmp(mode, "refund") == 0;
    unsigned i, nk = 0, a = 0, cap = 8 + 7 * c->n + 2 * c->lv->n;
    const char **argv = px_calloc(cap, sizeof(*argv));
    size_t *lens = px_calloc(cap, sizeof(*lens));
    char(*args)[4][STORE_REDIS_ARG_MAX] =
        px_calloc(c->n > 0 ? c->n : 1, sizeof(*args));
    char nkeys[16], cost[24], npaths[16], ovkey[STORE_KEY_MAX];
    unsigned npath = 0;
    struct resp_cmd *cmd;
    int ovlen;
    size_t l;

    ovlen = store_redis_override_key(c->lm, store_redis_group_level(c, g),
                                     ovkey, sizeof(ovkey));
    PX_ASSERT(ovlen > 0 && (size_t)ovlen < sizeof(ovkey));
    nk = store_redis_group_keys(c, g);
    if (c->op == STORE_RESET) {
        argv[a++] = "DEL";
    } else {
        argv[a++] = c->noscript[g] ? "EVAL" : "EVALSHA";
        argv[a] = c->noscript[g] ? s->body : s->sha1;
        lens[a++] = c->noscript[g] ? s->len : SCRIPTS_SHA1_LEN;
        snprintf(nkeys, sizeof(nkeys), "%u", nk + 1);
        argv[a++] = nkeys;
    }
    for (i = 0; i < c->n; i++) {
        if (c->lim[i].group == g) {
            argv[a] = c->lim[i].key;
            lens[a++] = c->lim[i].klen;
        }
    }
    if (c->op != STORE_RESET) {
        argv[a] = ovkey;
        lens[a++] = (size_t)ovlen;
        argv[a++] = mode;
        argv[a++] = "";
        snprintf(cost, sizeof(cost), "%lld", (long long)c->cost);
        argv[a++] = cost;
        for (i = 0; i < c->n; i++) {
            int k;
            if (c->lim[i].group != g) {
                continue;
            }
            store_redis_lua_params(c, &c->lim[i], args[i]);
            argv[a++] = limits_algo_name(c->lim[i].algo);
            for (k = 0; k < 4; k++) {
                argv[a++] = args[i][k];
            }
            argv[a++] = refund ? c->lim[i].undo : "";
        }
        /* Refunds undo what was written; only checks verify overrides. */
        for (l = 0; l < c->lv->n && !refund; l++) {
            npath += c->lv->level[l].group == g;
        }
        snprintf(npaths, sizeof(npaths), "%u", npath);
        argv[a++] = npaths;
        for (l = 0; l < c->lv->n && !refund; l++) {
            const struct limits_level *lev = &c->lv->level[l];
            const char *known;
            if (lev->group != g) {
                continue;
            }
            known = store_redis_override_known(c->lm, lev->path, lev->path_len);
            argv[a] = lev->path;
            lens[a++] = lev->path_len;
            argv[a++] = known != NULL ? known : "";
        }
    }
    PX_ASSERT(a <= cap);
    for (i = 0; i < a; i++) {
        if (lens[i] == 0 && argv[i][0] != '\0') {
            lens[i] = strlen(argv[i]);
        }
    }
    cmd = resp_cmd_new((int)a, argv, lens);
    px_free(argv);
    px_free(lens);
    px_free(args);
    store_redis_part_send(c->lm, cmd, store_redis_check_on_reply,
                          refund ? NULL : c, g, c->root->cid, ovkey,
                          (size_t)ovlen);
}

void store_redis_check(struct limiter *lm, struct store_check *c,
                       store_check_done_fn *done)
{
    unsigned g;

    PX_UNUSED(lm);
    c->done = done;
    /* RESET deletes keys, so a group without any has nothing to do;
     * checks call every group, to verify its overrides. */
    for (g = 0; g < c->ngroups; g++) {
        c->pending += c->op != STORE_RESET || store_redis_group_keys(c, g) > 0;
    }
    c->root->owed++;
    for (g = 0; g < c->ngroups; g++) {
        if (c->op != STORE_RESET || store_redis_group_keys(c, g) > 0) {
            store_redis_group_send(c, g,
                                   c->op == STORE_PEEK ? "peek" : "check");
        }
    }
}

void store_redis_refund(struct limiter *lm, struct store_check *c)
{
    unsigned g;

    PX_UNUSED(lm);
    for (g = 0; g < c->ngroups; g++) {
        if (c->admitted[g]) {
            store_redis_group_send(c, g, "refund");
        }
    }
}
