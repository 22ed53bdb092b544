/* Calls algorithms/limiter.lua for one limit on a real redis-server, as the
 * differential tests of the algorithms' Lua twins need it: an explicit
 * clock (the script's ARGV[2]), one key, one algorithm, and the reply
 * entry parsed. The C model side and the shared walk are in
 * twin_walk.h.
 *
 * Durations come back in microseconds, floored, as the script sends them;
 * lua_twin_expect() compares them with a C model's rl_decision, whose
 * nanoseconds floor to the same microseconds when the twins agree. */
#ifndef PX_TESTS_INTEGRATION_LUA_TWIN_H
#define PX_TESTS_INTEGRATION_LUA_TWIN_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "algorithms/rl.h"

#define LUA_TWIN_UNDO_BYTES 128

/* One limit's entry of the script's reply (gcra's, the stored TAT, gives
 * only limited: the caller computes the rest). */
struct lua_twin_out {
    int limited;   /* the limit's own decision, 0 or 1 */
    int64_t limit; /* the five integers, durations in us */
    int64_t remaining;
    int64_t retry_us;
    int64_t reset_us;
    char undo[LUA_TWIN_UNDO_BYTES]; /* the refund token, NUL-ended */
    int64_t now_us;                 /* the time the script used */
};

/* ---- The two forms of the scripts ----
 * Redis runs algorithms/gcra.lua and limiter.lua either as scripts
 * (EVALSHA; the whole file each call) or as one Redis 7 FUNCTION library
 * made of the same sources: each entry's lines before its "--#call" line
 * at the library's top level (every "--#include"d part once for the whole
 * library), the lines after it as the body of
 * `local function <name>_call(KEYS, ARGV)`, registered as
 * LUA_TWIN_FN_PREFIX "<name>". With PX_LUA_FORM=function in the
 * environment, the differential tests call the function form. */

#define LUA_TWIN_LIBRARY   "cellgate"
#define LUA_TWIN_FN_PREFIX "cellgate_"

/* Whether the tests call the function form (PX_LUA_FORM=function). */
int lua_twin_function_form(void);

/* The first two words of a call of script `name` ("limiter" or "gcra")
 * into v[0] and v[1]: FCALL and the function when `function`, else
 * EVALSHA and the script's SHA1. Returns 2. */
int lua_twin_head(const char **v, const char *name, int function);

/* The same for limiter.lua in the run's form. */
int lua_twin_limiter_head(const char **v);

/* The library text built from the sources of algorithms/ as described
 * above; malloc'd, NUL-ended, its length in *len. Asserts on failure. */
char *lua_twin_library(size_t *len);

/* FUNCTION LOAD REPLACE of that library on c; asserts it loads. */
void lua_twin_load_library(redisContext *c);

/* A connection to the test's redis (px_env()->redis) with limiter.lua
 * loaded (and the library, in the function form); asserts the sha Redis
 * computes is the embedded one. */
redisContext *lua_twin_connect(void);

/* Runs `mode` ("check", "peek", "refund") for one limit: `algo` with its
 * parameters p[0..3] (NULL for unused) on `key` at now_us (-1: the node's
 * TIME) with `cost`; `undo` is the token for refund (NULL otherwise).
 * Returns 0 with *out filled (refund fills only now_us), or -1 with the
 * error reply's text in err. Asserts the reply's shape. */
int lua_twin_call(redisContext *c, const char *mode, const char *key,
                  const char *algo, const char *const p[4], int64_t now_us,
                  int64_t cost, const char *undo, struct lua_twin_out *out,
                  char *err, size_t errlen);

/* Asserts that the twin's entry equals the model's decision: limited,
 * limit, remaining, and each duration floored to microseconds. `ctx`
 * names the step in failure messages. */
void lua_twin_expect(const struct lua_twin_out *o, const struct rl_decision *d,
                     const char *ctx);

/* PTTL of key in ms (-2 missing, -1 no expiry). */
long long lua_twin_pttl(redisContext *c, const char *key);

/* ---- The script call in pieces, for MULTI ----
 * lua_twin_call() reads its reply at once, which a transaction cannot do
 * (the reply comes inside EXEC's). These two are its halves. */

/* The WAIT (us, 0: none) the checks of lua_twin_append() carry from now
 * on, as the cost word "<cost>:<wait_us>" (limiter.lua's header), and
 * that the models' decide hooks read (the buckets reserve). */
void lua_twin_set_wait(int64_t wait_us);
int64_t lua_twin_wait(void);

/* Appends the EVALSHA of lua_twin_call() (same arguments) to c's output
 * buffer without reading a reply. */
void lua_twin_append(redisContext *c, const char *mode, const char *key,
                     const char *algo, const char *const p[4], int64_t now_us,
                     int64_t cost, const char *undo);

/* Parses a script reply `r` (a whole reply or an EXEC element) as
 * lua_twin_call() does; `ctx` names the call in failure messages. */
int lua_twin_parse(const redisReply *r, const char *mode, const char *ctx,
                   struct lua_twin_out *out, char *err, size_t errlen);

/* An integer reply element, or a decimal bulk string (durations of 2^53
 * us and more come as text); asserts it is one or the other. */
int64_t lua_twin_reply_int(const redisReply *r, const char *ctx);

/* gcra.lua's "runs" reply r of n keys as text, each key's "+" (a TAT was
 * reported) or "-" (none) and its flag: "-0 +1 --1 ". The caller asserts
 * the shape (3 + 2n elements). */
void lua_twin_runs_text(const redisReply *r, size_t n, char *buf, size_t size);

/* A script call made in MULTI with the reads that must see what it left
 * (PTTL, a state read, PERSIST), so that wall time never expires the key
 * of a test whose clock is simulated. */
struct lua_twin_txn {
    struct lua_twin_out out; /* the entry (check, peek) */
    const redisReply *entry; /* the raw entry, borrowed from exec */
    int failed;              /* the script replied with an error */
    char err[256];           /* its text */
    long long pttl;          /* PTTL right after the script */
    const redisReply *state; /* the state read right after it, borrowed */
    long long elapsed_ms;    /* wall time of the transaction, + 1 */
    redisReply *exec;        /* the EXEC reply, owned by the caller */
};

/* Runs `mode` as lua_twin_call() would, in MULTI with PTTL, `read_fmt`
 * (one %s for the key, e.g. "HGETALL %s") and PERSIST of the key. The
 * caller frees k->exec. */
void lua_twin_call_multi(redisContext *c, const char *mode, const char *key,
                         const char *algo, const char *const p[4],
                         int64_t now_us, int64_t cost, const char *undo,
                         const char *read_fmt, struct lua_twin_txn *k,
                         const char *ctx);

/* Whether the key that k's script wrote with an expiry of expiry_ms was
 * gone by the transaction's PTTL. Redis's PEXPIRE adds the milliseconds
 * to its clock, then deletes the key if a second reading of the clock has
 * reached that instant: an expiry of 1 ms across a millisecond's edge,
 * more likely on a busy machine. Asserts that so much time passed. */
int lua_twin_expired(const struct lua_twin_txn *k, int64_t expiry_ms,
                     const char *ctx);

/* lua_twin_call() that asserts success; returns the entry. */
struct lua_twin_out lua_twin_ok(redisContext *c, const char *mode,
                                const char *key, const char *algo,
                                const char *const p[4], int64_t now_us,
                                int64_t cost, const char *undo);

/* Parses a decimal int64 in canonical form (what the twins write); 0 when
 * s is not one. */
int lua_twin_dec(const char *s, int64_t *v);

/* ---- Decisions ---- */

/* Whether two model decisions are the same five values. */
int lua_twin_same_decision(const struct rl_decision *a,
                           const struct rl_decision *b);

/* Asserts lua_twin_same_decision(), printing both on failure. */
void lua_twin_expect_same_decision(const struct rl_decision *a,
                                   const struct rl_decision *b,
                                   const char *ctx);

/* ---- Reproducible randomness ----
 * Every randomized sequence prints its seed and takes it back from an
 * environment variable, so a failure replays exactly. */

/* xorshift64*: the next number of the stream in *s (never 0). */
uint64_t lua_twin_rnd(uint64_t *s);

/* A number in [lo, hi] (hi - lo < 2^63). */
int64_t lua_twin_rnd_in(uint64_t *s, int64_t lo, int64_t hi);

/* One of v[0..n-1]. */
int64_t lua_twin_pick(uint64_t *s, const int64_t *v, size_t n);

/* The run's seed: the decimal in environment variable `env`, or one from
 * the clock and pid; printed as "<suite>: <env>=<seed>" for a replay. */
uint64_t lua_twin_seed(const char *suite, const char *env);

/* ---- Draws that several algorithms share ---- */

/* A cost: 0, 1, max, just above it, anything up to 2^53 - 1, or small. */
int64_t lua_twin_rnd_cost(uint64_t *s, int64_t max);

/* A count limit in [1, max_max] and a window in [1, max_win] ms, from tiny
 * to the conf maxima. */
void lua_twin_rnd_limit(uint64_t *s, int64_t max_max, int64_t max_win,
                        int64_t *max, int64_t *win_ms);

#endif /* PX_TESTS_INTEGRATION_LUA_TWIN_H */
