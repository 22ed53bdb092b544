/* The wire of the limiter's batched script calls: the words of one call
 * of gcra.lua's "runs" (CL.THROTTLE) and of limiter.lua's "shapes" (the
 * tag groups of LIMITER CHECK, PEEK and refunds), and the reading of
 * their replies into results per call or group. Pure: no I/O, no clock,
 * no globals; the Redis store (store_redis.c, store_redis_batch.c) sends
 * what it makes and hands it what the nodes answered. */
#ifndef PX_PROXY_LIMITER_LUA_WIRE_H
#define PX_PROXY_LIMITER_LUA_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "algorithms/gcra.h"
#include "conf/limits.h"
#include "parser/buf.h"
#include "parser/resp_enc.h"
#include "parser/resp_value.h"
#include "proxy/limiter/store.h"

/* Most calls or groups in one script call. */
#define LUA_WIRE_BATCH_MAX 64

/* The algorithm word of a gcra limit whose state is a key of its own (its
 * level is below a second "*"): limiter.lua reads "gcra" as a record of
 * the identity's state string. */
#define LUA_WIRE_GCRA_OWN_KEY "gcra.key"

/* Decimal room for one script argument. */
#define LUA_WIRE_ARG_MAX 24

/* The four script words of the last limit formatted, with what they were
 * made from: the groups of a batch mostly share one limit, and formatting
 * four numbers costs more than comparing them. Zero it to start. */
struct lua_wire_params {
    enum limits_algo algo;         /* the limit's algorithm; valid when used */
    int64_t v[LIMITS_MAX_PARAMS];  /* gcra: INC and DVT; else limits_params */
    size_t nv;                     /* entries of v; 0 before the first */
    char out[4][LUA_WIRE_ARG_MAX]; /* the words, NUL-ended ("" unused) */
    size_t len[4];                 /* their lengths */
};

/* What a group's call does (limiter.lua's mode). */
enum lua_wire_mode {
    LUA_WIRE_CHECK,    /* "check": decide and consume */
    LUA_WIRE_PEEK,     /* "peek": decide, write nothing */
    LUA_WIRE_REFUND,   /* "refund": give back what a check took */
    LUA_WIRE_ADJUST,   /* "adjust": c->delta at every limit (ADJUST) */
    LUA_WIRE_UNADJUST, /* "adjust" of -c->delta: undoes an ADJUST that
                          another group failed; nobody reads its reply */
    LUA_WIRE_RESET,    /* "reset": deletes every state of the limits
                          (RESET); answers how many records and keys
                          went */
};

/* One CL.THROTTLE of a "runs" call: borrowed for the encoding. */
struct lua_wire_throttle {
    const struct gcra_params *p; /* its parsed arguments */
    const char *key;             /* its key */
    size_t klen;                 /* bytes of key */
};

/* One tag group's words, made when it is queued (a refund outlives its
 * check; the override texts it assumed may change before it is sent):
 * its keys (its limits', then the override hash of its tag), then its
 * arguments (mode, cost, n, 6 words a limit, then "keys" or m and m
 * override pairs). */
struct lua_wire_group {
    struct store_check *c; /* borrowed: the call it decides for; NULL for
                              a refund, whose reply nobody reads */
    unsigned g;            /* its group in c */
    unsigned nk;           /* keys: its limits', then the override hash */
    unsigned nw;           /* words: the nk keys, then its arguments */
    size_t route_at;       /* where the override hash's word starts */
    size_t flat;           /* c NULL: the elements of its answer in a
                              "shapes" reply when decided (an unadjust's:
                              1 + its entries'); 0: one (a refund's) */
    struct buf words;      /* owned: each word as its length (a size_t)
                              then its bytes */
    unsigned new_only : 1; /* limiter_read_old_keys no: its call says "!"
                              before now (limiter.lua's header) */
    unsigned reset : 1;    /* mode "reset": its answer is one integer */
};

/* The words of one script call, for resp_cmd_new. */
struct lua_wire_argv {
    const char **v; /* owned array; the words are borrowed from the
                       head given, the calls or groups encoded (alive
                       until the command is made), or owned below */
    size_t *len;    /* owned: their lengths */
    unsigned n;     /* words */
    unsigned cap;   /* room in v and len */
    char (*num)[RESP_FMT_LL_MAX + 1]; /* owned: the counts formatted */
    unsigned nnum;                    /* entries of num in use */
    struct gcra_script_args *sa;      /* owned: the runs' arguments */
};

/* The run-time override of `path` this proxy assumes (NUL-ended), or
 * NULL: the override cache, asked through its owner. */
typedef const char *lua_wire_known_fn(void *arg, const char *path, size_t len);

/* Writes the override hash of `lev`'s identity, "<prefix>{tag}#overrides",
 * and a NUL; returns its length, or -1 when it does not fit in outlen
 * (STORE_KEY_MAX always holds it). */
int lua_wire_override_key(const char *prefix, const struct limits_level *lev,
                          char *out, size_t outlen);

/* The first level of group g of `c` (every group has one). */
const struct limits_level *lua_wire_group_level(const struct store_check *c,
                                                unsigned g);

/* Whether limit i goes into group g's call: every limit of the group, but
 * a refund only gives back what the check took, so not the limits of a
 * shadow level that refused. */
int lua_wire_group_sends(const struct store_check *c, unsigned i, unsigned g,
                         int refund);

/* Makes `q` (uninitialised) the words of group g of `c` in `mode`, with
 * `ovkey` its tag's override hash (lua_wire_override_key), the override
 * texts from `known` and the limits' words memoised in `memo`. Free it
 * with lua_wire_group_free. */
void lua_wire_group_encode(struct lua_wire_group *q, struct store_check *c,
                           unsigned g, enum lua_wire_mode mode,
                           const char *ovkey, size_t ovlen,
                           lua_wire_known_fn *known, void *arg,
                           struct lua_wire_params *memo);

/* Frees q's words. */
void lua_wire_group_free(struct lua_wire_group *q);

/* The key group q is routed by: its override hash (its last key), inside
 * q's words. */
const char *lua_wire_group_route(const struct lua_wire_group *q, size_t *len);

/* Makes `a` the gcra.lua "runs" call of calls[0..n) (1..LUA_WIRE_BATCH_MAX):
 * head[0..2) (FCALL and the function, EVALSHA and the sha1...), the keys
 * declared (0 when `spread`: they follow the arguments), "runs", R and per
 * run of consecutive calls with the same INC and DVT its count and four
 * arguments. Free it with lua_wire_argv_free. */
void lua_wire_runs(struct lua_wire_argv *a, const char *const head[2],
                   const size_t headlen[2],
                   const struct lua_wire_throttle *calls, unsigned n,
                   int spread);

/* Makes `a` the limiter.lua "shapes" call of groups[0..n)
 * (1..LUA_WIRE_BATCH_MAX): head, every group's keys, "shapes", "" (the
 * node's clock), S and the S distinct blocks of the groups' words from
 * the mode to m (equal bytes are equal words), then G and for each group
 * its block's number (none when S is 1) and its override pairs. `spread`
 * as for lua_wire_runs. */
void lua_wire_shapes(struct lua_wire_argv *a, const char *const head[2],
                     const size_t headlen[2],
                     const struct lua_wire_group *const *groups, unsigned n,
                     int spread);

void lua_wire_argv_free(struct lua_wire_argv *a);

/* Calls per word of a "runs" reply's refusal bits (a Lua number holds 48
 * bits exactly). */
#define LUA_WIRE_RUNS_BITS 48

/* True when `v` has the shape of the reply to a "runs" call of n calls:
 * {x, now_s, now_us}, n TATs (or, for a call not decided, an error code
 * -1, -2 or -3), then ceil(n / LUA_WIRE_RUNS_BITS) integers of refusal
 * bits (call i's is bit i % LUA_WIRE_RUNS_BITS of word i /
 * LUA_WIRE_RUNS_BITS). */
int lua_wire_runs_shaped(const struct resp_value *v, unsigned n);

/* Call i of a shaped "runs" reply of n calls: 0 with *sr filled (its TAT
 * borrowed from v, limited its refusal bit), or -1 with *err the error
 * text its code says. */
int lua_wire_runs_item(const struct resp_value *v, unsigned n, unsigned i,
                       struct gcra_script_reply *sr, const char **err);

/* True when call i of a shaped "runs" reply says its slot is not served
 * by the node (code -3: sent across slots, undeclared). */
int lua_wire_runs_elsewhere(const struct resp_value *v, unsigned n, unsigned i);

/* True when `v` has the shape of the reply to a "shapes" call of
 * groups[0..n): {x, now_s, now_us}, then per group its elements: a
 * decided group's `limited` and its entries (a gcra entry 1 element, any
 * other 6), else one (an error, an override's or a refund's table). */
int lua_wire_shapes_shaped(const struct resp_value *v,
                           const struct lua_wire_group *const *groups,
                           unsigned n);

/* Answers of a decided group that lua_wire_next keeps in the cursor:
 * {limited, now_s, now_us} and up to 5 limits. */
#define LUA_WIRE_FLAT_SMALL 8

/* Reads a shaped "shapes" reply group by group. */
struct lua_wire_cursor {
    const struct resp_value *v;                   /* borrowed: the reply */
    size_t at;                                    /* next group's element */
    struct resp_value g;                          /* the last decided group,
                                                     as mode "each" gives it */
    struct resp_value small[LUA_WIRE_FLAT_SMALL]; /* g.elem when it fits;
                                                     else g.elem is owned */
};

void lua_wire_cursor_init(struct lua_wire_cursor *cur,
                          const struct resp_value *v);

/* The answer of group q, the next of the reply: a decided group's as
 * {limited, now_s, now_us, entry...} (valid until the next call or
 * lua_wire_cursor_end), else its element (an error, a table, a reset's
 * count). */
const struct resp_value *lua_wire_next(struct lua_wire_cursor *cur,
                                       const struct lua_wire_group *q);

void lua_wire_cursor_end(struct lua_wire_cursor *cur);

/* What a group's answer was. */
enum lua_wire_answer {
    LUA_WIRE_DECIDED,   /* c->res, c->peek, undo tokens, c->admitted[g];
                           a RESET's count added to c->deleted */
    LUA_WIRE_OVERRIDE,  /* ["override", value...]: the group's levels'
                           override texts, in the order of their levels */
    LUA_WIRE_ERROR,     /* an error reply: v->raw */
    LUA_WIRE_MALFORMED, /* c->err holds GCRA_ERR_SCRIPT, or the error of
                           the first entry that could not be decided */
};

/* Reads group g's answer `v` (lua_wire_next's, or an error for it) into
 * `c`: each of its limits' decision, with the state without this request
 * in c->peek. */
enum lua_wire_answer lua_wire_group_decode(struct store_check *c, unsigned g,
                                           const struct resp_value *v);

#endif /* PX_PROXY_LIMITER_LUA_WIRE_H */
