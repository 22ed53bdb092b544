/* One driver for the differential tests of limiter.lua's algorithms: each
 * algorithm is a `struct twin_algo` (its C model, its stored state, its
 * random draws) and the driver runs the same things for all of them:
 *
 * - a checked step: the script (check or peek) on a real redis-server at
 *   an explicit clock, in MULTI with PTTL, the state read and PERSIST;
 *   its entry must equal the C model's decision for the state the test
 *   carries, its undo token the model's, and the key must then hold
 *   exactly the model's next state with the model's expiry (a write), or
 *   be untouched with its TTL (no write, and every peek);
 * - a random walk of such steps: checks, peeks, refund cycles (peek,
 *   check, refund, peek: the refund restores the decisions), new
 *   parameters on the same key, planted states the twin would not write,
 *   and simulated expiries (past the model's expiry the state must
 *   decide like no key);
 * - ADJUST steps where the algorithm has an adjust hook: a random delta
 *   of either sign, the twin's mode "adjust" against the model's adjust;
 * - tables of rows: scripted steps with exact expected values, bad
 *   parameters and malformed states with the model's error texts;
 * - an algorithm's own step, for a script of its that the walk's clock
 *   cannot drive (gcra.lua decides at the node's TIME), on the same key
 *   among the walk's steps, checked by the algorithm.
 *
 * The key is persistent after each checked step, so wall time never
 * expires it while the test runs on its own clock. Every walk prints its
 * seed; the environment variable PX_LUA_TWIN_SEED replays it. */
#ifndef PX_TESTS_INTEGRATION_TWIN_WALK_H
#define PX_TESTS_INTEGRATION_TWIN_WALK_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "algorithms/rl.h"
#include "tests/integration/lua_twin.h"

#define TWIN_DIGITS       24 /* an int64 in decimal, sign and NUL */
#define TWIN_CTX          200
#define TWIN_ERR          256
#define TWIN_PARAMS_BYTES 128 /* bytes of the largest model params struct */

#define TWIN_T0     INT64_C(1700000000000000) /* 2023-11-14T22:13:20Z, us */
#define TWIN_US_MAX INT64_C(9007199254740991) /* the script's latest us */
#define TWIN_SAT_US INT64_C(9223372036854775) /* floor(INT64_MAX ns / 1e3) */
#define TWIN_SAT_MS INT64_C(9223372036855)    /* its expiry, ceil(/ 1e6) */
#define TWIN_DAY_US INT64_C(86400000000)
#define TWIN_SEC    INT64_C(1000000) /* us */

#define TWIN_OWN_TALLIES 8 /* counts of an algorithm's own step */

#define TWIN_E_WRONGTYPE                                                       \
    "WRONGTYPE Operation against a key holding the wrong kind of value"

/* One limit's parameters: as numbers, as the script's strings, and as
 * the C model's params struct (in p, which the algorithm casts). */
struct twin_conf {
    int64_t n[3];           /* the numbers the algorithm drew */
    char s[3][TWIN_DIGITS]; /* their text (an algorithm may change it) */
    const char *v[4];       /* the script's parameter strings */
    _Alignas(16) unsigned char p[TWIN_PARAMS_BYTES]; /* the model's params */
};

/* The model's decision for one call. */
struct twin_result {
    struct rl_decision d;
    int write;                      /* a check writes next with expiry_ms */
    int have_next;                  /* the key exists after that write */
    int64_t expiry_ms;              /* the write's PEXPIRE */
    char undo[LUA_TWIN_UNDO_BYTES]; /* the token the twin must send */
    int undo_digits; /* any non-empty decimal will do (not undo) */
};

struct twin_key;

/* One algorithm: its C model and its stored state. States are opaque
 * blocks of state_size bytes that the driver allocates; `st` is NULL for
 * "no key" where it is an input. */
struct twin_algo {
    const char *name;     /* limiter.lua's algorithm */
    int plain_key;        /* 1: the state is a key of its own (CL.THROTTLE's
                             gcra.lua, redis-cell's format), never a
                             record of an identity's state string */
    const char *read_fmt; /* the state's read, one %s for the key */
    int nparams;          /* parameters the script takes (2 or 3) */
    size_t state_size;
    /* Parses the read's reply into st (asserting its form); returns
     * whether the key exists. */
    int (*parse)(const redisReply *r, void *st, const char *ctx);
    /* Asserts two states hold the same (both exist). */
    void (*expect_same)(const void *a, const void *b, const char *ctx);
    /* Sets cf's params from n[0..2] (cf->s already holds their text);
     * returns the model's error text, NULL when they are valid. */
    const char *(*conf)(struct twin_conf *cf, const int64_t n[3]);
    /* The model's decision at now_us for cost; the next state goes to
     * next. Asserts the model accepts the state. */
    void (*decide)(const struct twin_conf *cf, const void *st, int64_t now_us,
                   int64_t cost, struct twin_result *r, void *next);
    /* The model's error text for a malformed state. */
    const char *state_error;

    /* ---- the walk's draws ---- */
    /* New parameters; `old` is the current ones (NULL at the start): a
     * draw may change only one of them. */
    void (*rnd_conf)(uint64_t *s, struct twin_conf *cf,
                     const struct twin_conf *old);
    /* A cost. */
    int64_t (*rnd_cost)(uint64_t *s, const struct twin_conf *cf);
    /* The algorithm's own grid in us: a small step, a jump back. */
    int64_t (*unit_us)(const struct twin_conf *cf);
    /* A time near one of the algorithm's own edges after now (a window's
     * start, a drip, where the oldest entry leaves); -1 for none. */
    int64_t (*rnd_edge)(uint64_t *s, const struct twin_key *k, int64_t now);
    /* Writes a valid state the twin would not write to the key and the
     * model (k->st, k->have); returns 0 when it planted nothing. NULL:
     * the algorithm plants nothing. */
    int (*plant)(uint64_t *s, struct twin_key *k, int64_t now);
    /* Asserts what a refund left (k->st, k->have, its transaction tx)
     * given the state before its check (pre, pre_have) at now; returns 0
     * when real time took the key (nothing more to compare). */
    int (*after_refund)(struct twin_key *k, const void *pre, int pre_have,
                        int64_t now, int64_t cost,
                        const struct lua_twin_txn *tx, const char *ctx);

    /* ---- what only some algorithms need (NULL, 0: nothing) ---- */
    /* The script's parameter strings for a call of cost into v, their
     * text in buf: gcra folds the cost into its INC. NULL: cf->v. */
    void (*args)(const struct twin_conf *cf, int64_t cost,
                 char buf[4][TWIN_DIGITS], const char *v[4]);
    /* For an entry that is the stored state as the script read it (gcra:
     * the TAT, of which the proxy computes the five integers): fills o's
     * five values from it as the proxy does, for cost at o->now_us. */
    void (*from_raw)(const struct twin_conf *cf, const redisReply *raw,
                     int64_t cost, struct lua_twin_out *o, const char *ctx);
    /* Past its key's expiry the state may decide otherwise than no key
     * (gcra: a refusal reports the TAT as it is, in the past, as
     * redis-cell does): the walk only deletes it there. */
    int expired_differs;
    /* A checked step of another script on the key that the walk's clock
     * cannot drive (gcra.lua, CL.THROTTLE's, decides at the node's TIME),
     * own_pct percent of the walk's operations: asserts it against the
     * model, leaves the key persistent and the model holding it
     * (twin_reread), and counts into k->own[] what own_tally names. */
    void (*own_step)(uint64_t *s, struct twin_key *k, const char *ctx);
    int own_pct;
    const char *own_tally[TWIN_OWN_TALLIES]; /* each must be reached */
    int sequences; /* the walk's sequences; 0: TWIN_SEQUENCES */

    /* ---- LIMITER ADJUST (NULL: the walk adjusts nothing) ---- */
    /* The model's <name>_adjust of delta (any sign) at now_us on st (NULL:
     * no key): r->d is what a peek of cost 1 gives right after it, r->write
     * whether it writes next with expiry_ms (r->have_next: the key exists
     * after it; a write that deletes has have_next 0). The undo token is
     * "" (r->undo zeroed). The walk calls limiter.lua's mode "adjust"
     * with the parameters of a call of cost 1 (args) and delta as its
     * cost, and compares entry, TTL and stored state as for a check. */
    void (*adjust)(const struct twin_conf *cf, const void *st, int64_t now_us,
                   int64_t delta, struct twin_result *r, void *next);
    /* A delta; NULL: +/- rnd_cost's draw, sometimes 0. */
    int64_t (*rnd_delta)(uint64_t *s, const struct twin_conf *cf);

    /* ---- CHECK ... WAIT (0: the walk sends no wait) ---- */
    /* The algorithm reserves (token_bucket, leaky_bucket): the walk also
     * checks with a WAIT (lua_twin_set_wait), drawn at the model's retry
     * give or take 1 us, and its decide hook decides with
     * lua_twin_wait(); it asserts a reservation wrote. */
    int waits;
};

/* One key as the test believes Redis holds it. */
struct twin_key {
    const struct twin_algo *a;
    redisContext *c;
    char name[64];
    struct twin_conf cf;
    int have;                 /* the key exists */
    void *st;                 /* its state (state_size bytes, owned) */
    void *next;               /* the model's scratch next state (owned) */
    void *pre;                /* a refund cycle's state before (owned) */
    int deadline_valid;       /* deadline_us applies to st and cf */
    int64_t deadline_us;      /* the model time the last write expires */
    long long ttl;            /* the key's PTTL after the last step */
    long long ttl_at;         /* px_now_ms() just before ttl was set */
    int keep_ttl;             /* put TTLs back after a step (rows) */
    long gone;                /* keys real time took */
    struct twin_result r;     /* the model's last decision */
    struct lua_twin_out out;  /* the twin's last entry */
    struct lua_twin_out mark; /* one kept by a row ("mark") */
    int text[2]; /* the entry's retry, reset came as text (>= 2^53) */
    long own[TWIN_OWN_TALLIES]; /* the algorithm's own step's counts */
};

/* k starts with no key named `name` on c (lua_twin_connect());
 * twin_key_free() frees its states, not c. */
void twin_key_init(struct twin_key *k, const struct twin_algo *a,
                   redisContext *c, const char *name);
void twin_key_free(struct twin_key *k);

/* Sets cf to the parameters x, y, z through algorithm a (their text in
 * cf->s); asserts the model accepts them. */
void twin_conf_set(const struct twin_algo *a, struct twin_conf *cf, int64_t x,
                   int64_t y, int64_t z);

/* twin_conf_set() of k's parameters. */
void twin_set(struct twin_key *k, int64_t a, int64_t b, int64_t c);

/* The model's decision at now for cost on state st (NULL: no key) under
 * k's parameters, into k->r (the next state into k->next). */
const struct twin_result *twin_model(struct twin_key *k, const void *st,
                                     int64_t now, int64_t cost);

/* The checked step (see the top): `mode` "check" or "peek"; returns the
 * model's result (k->r), the twin's entry in k->out. */
const struct twin_result *twin_step(struct twin_key *k, const char *mode,
                                    int64_t now, int64_t cost, const char *ctx);

/* The checked step of an ADJUST of delta (see the algorithm's adjust
 * hook): the twin's mode "adjust" against the model's adjust, compared
 * as a check's step; returns the model's result (k->r). */
const struct twin_result *twin_adjust(struct twin_key *k, int64_t now,
                                      int64_t delta, const char *ctx);

/* A refund of cost with the token undo (NULL: the last entry's); then
 * reads the key back into the model. */
void twin_refund(struct twin_key *k, int64_t now, int64_t cost,
                 const char *undo, const char *ctx);

/* Runs a Redis command on the key, then reads the key back into the
 * model: a planted state. The format's text is split at spaces after
 * formatting: "%%s" stands for the key's name, "''" for an empty
 * argument. */
void twin_plant(struct twin_key *k, const char *fmt, ...);

/* Reads the key into the model. */
void twin_reread(struct twin_key *k, const char *ctx);

/* Parses an HGETALL reply that holds exactly the n fields `names`, each
 * a canonical decimal, into v[0..n-1]; returns 0 for no key. */
int twin_hash(const redisReply *r, const char *const *names, int n, int64_t *v,
              const char *ctx);

/* ---- The random walk ---- */

#define TWIN_SEQUENCES 12 /* sequences per walk */
#define TWIN_OPS       30 /* operations in each */

/* One refund cycle of the walk at now: peek, check, refund, peek (the
 * refund restores the decisions, now and at later); returns 1 when a
 * refund ran (the check admitted and wrote). */
int twin_refund_cycle(struct twin_key *k, int64_t now, int64_t cost,
                      int64_t later, const char *ctx);

/* Runs the walk for algorithm a on the test's redis under suite's name;
 * asserts it reached every branch (limited and admitted checks, writes,
 * peeks, refunds, plants where the algorithm has them). */
void twin_walk(const struct twin_algo *a, const char *suite);

/* ---- Tables ---- */

/* One scripted step on one key. `op` is "check", "peek", "refund",
 * "adjust" (cost is the delta), or a
 * Redis command with one %s for the key (a planted state, a DEL, set by
 * twin_plant). `want` lists what the step must give, as "name value"
 * pairs separated by spaces, from: limited, remaining, retry_ns, reset_ns
 * (the model's exact durations), retry_us, reset_us (the twin's),
 * expiry_ms, undo (the token, "-" for none), exists (0 or 1), pttl_min,
 * pttl_max (ms, the key's TTL after the step), "field:<f>" (a hash
 * field's value), "score:<member>" (a zset member's score), "zcount:<t>"
 * (zset entries scored t), "zcard" (zset entries), "mark 1"
 * (keep the entry), "same 1" (the entry decides as the kept one), and
 * retry_text, reset_text (1: the twin sent that duration as text), ints
 * (the model's five integers as the proxy replies them, rl_reply_ints(),
 * "a,b,c,d,e"). A params
 * step is op "params" with n. */
struct twin_row {
    const char *op;
    int64_t now_us, cost;
    const char *undo; /* refund: the token; NULL: the last check's */
    const char *want;
    int64_t n[3]; /* op "params" */
};

/* Rows, shortly: a command, new parameters, a check or peek, a refund
 * (undo NULL: the last entry's token). */
#define TWIN_CMD(cmd)                                                          \
    {                                                                          \
        .op = (cmd)                                                            \
    }
#define TWIN_SET(a, b, c)                                                      \
    {                                                                          \
        .op = "params", .n = {(a), (b), (c) }                                  \
    }
#define TWIN_CALL(op_, now, cost_, w)                                          \
    {                                                                          \
        .op = (op_), .now_us = (now), .cost = (cost_), .want = (w)             \
    }
#define TWIN_REFUND(now, cost_, u, w)                                          \
    {                                                                          \
        .op = "refund", .now_us = (now), .cost = (cost_), .undo = (u),         \
        .want = (w)                                                            \
    }

/* Runs rows on a fresh key `name` (already connected as k); each step
 * named "<name> row <i>" in failure messages. */
void twin_rows(struct twin_key *k, const struct twin_row *rows, size_t n);

/* twin_rows() on a new key "k" of algorithm a on the test's redis;
 * returns the connection (lua_twin_connect()) for more checks. */
redisContext *twin_run_rows(const struct twin_algo *a,
                            const struct twin_row *rows, size_t n);

/* Runs a table of rows and closes the connection. */
#define TWIN_ROWS(a, r)                                                        \
    redisFree(twin_run_rows((a), (r), sizeof(r) / sizeof(*(r))))

/* A bad parameter set and the model's error text. */
struct twin_bad {
    const char *p[3];
    const char *err;
};

/* Asserts that check and peek with each row's parameters fail with
 * "ERR <err>" (the model gives that text where the row is decimal) and
 * write nothing, and that a refund with them is a silent no-op. */
void twin_bad_params(struct twin_key *k, const struct twin_bad *rows, size_t n);

/* Asserts that check and peek on a key of another type (a string, and
 * `other`, a command making another type with %s for the key) fail with
 * WRONGTYPE, that each malformed state (a command split at spaces, %s
 * for the key and '' for an empty argument, e.g. "HSET %s level -1 ts
 * 5") fails with the model's state error, and
 * that nothing is written (the key and its lack of TTL stay). */
void twin_bad_states(struct twin_key *k, const char *other,
                     const char *const *rows, size_t n);

/* twin_bad_params() and twin_bad_states() (under the parameters x, y, z)
 * on a new key "k" of algorithm a on the test's redis. */
void twin_run_bad_params(const struct twin_algo *a, const struct twin_bad *rows,
                         size_t n);
void twin_run_bad_states(const struct twin_algo *a, int64_t x, int64_t y,
                         int64_t z, const char *other, const char *const *rows,
                         size_t n);

#endif /* PX_TESTS_INTEGRATION_TWIN_WALK_H */
