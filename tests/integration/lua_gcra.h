/* algorithms/gcra.lua, CL.THROTTLE's script, called on a real
 * redis-server as the proxy calls it (EVALSHA, or FCALL of the library's
 * function), each call checked against the C model algorithms/gcra.c.
 *
 * The script decides at the node's TIME, which no test clock can step
 * (limiter.lua's gcra takes the test's clock, twin_walk.h): so the model is
 * fed the value the key held before the call, read in the same
 * transaction, and the `now` the script reports; its decision must be the
 * script's, and afterwards the key must hold exactly what the model says
 * to write (value, and a PTTL of the model's expiry less at most the wall
 * time the call took; a key only vanishes when that much time has
 * passed). The tables of twin rows can be replayed through it. */
#ifndef PX_TESTS_INTEGRATION_LUA_GCRA_H
#define PX_TESTS_INTEGRATION_LUA_GCRA_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "algorithms/gcra.h"
#include "tests/integration/twin_walk.h"

/* How a call is made: a check of one key (the proxy's single
 * CL.THROTTLE), or mode "runs" (a batch of one call, "runs" 1 1 before
 * the four numbers, as the proxy batches them); LUA_GCRA_RUNS_FN through
 * the FUNCTION library whatever PX_LUA_FORM says (its memo of parsed
 * limits lives from call to call only there). */
enum lua_gcra_form { LUA_GCRA_CHECK, LUA_GCRA_RUNS, LUA_GCRA_RUNS_FN };

/* A key's string value (copied, NUL-ended), or have == 0. */
struct lua_gcra_stored {
    int have;
    char val[64];
    size_t len;
};

/* A connection to the test's redis (px_env()->redis) with gcra.lua and
 * the FUNCTION library loaded; asserts the sha Redis computes is the one
 * embedded at build time. */
redisContext *lua_gcra_connect(void);

/* Parameters; asserts they are valid. */
struct gcra_params lua_gcra_params(int64_t b, int64_t count, int64_t period_s,
                                   int64_t q);

/* Sends the script for p on key in form (EVALSHA whatever PX_LUA_FORM
 * says, FCALL for LUA_GCRA_RUNS_FN); returns the raw reply (the caller
 * frees it). */
redisReply *lua_gcra_send(redisContext *c, const char *key, size_t keylen,
                          const struct gcra_params *p, enum lua_gcra_form form);

/* The flag of a one-key "runs" reply r, asserting its shape ({0, now_s,
 * now_us, raw, flag}); raw goes to *raw (borrowed from r). */
long long lua_gcra_runs_flag(const redisReply *r, const redisReply **raw,
                             const char *ctx);

/* One call checked as the top says (FCALL in the function form,
 * PX_LUA_FORM=function); the key's value before it goes to *seen (NULL:
 * nowhere). Returns the model's result. */
struct gcra_result lua_gcra_check(redisContext *c, const char *key,
                                  size_t keylen, const struct gcra_params *p,
                                  enum lua_gcra_form form,
                                  struct lua_gcra_stored *seen,
                                  const char *ctx);

/* Asserts the five integers the proxy replies for r (rl_reply_ints). */
void lua_gcra_expect_ints(const struct gcra_result *r, const int64_t want[5],
                          const char *ctx);

/* A table of twin rows (limiter.lua's gcra, twin_rows()) again through
 * gcra.lua on key "k", at the node's clock: the time a row adds is
 * simulated by moving the stored TAT back as much (SET ... KEEPTTL),
 * which the model, fed the stored value, sees exactly. Each check's
 * limited, remaining and five integers ("ints") must be the row's, its
 * durations (reset_ns, retry_ns) the row's less the real time that
 * passed; "params" rows set the limit, other ops run as commands. */
void lua_gcra_replay(const struct twin_row *rows, size_t n);

#endif /* PX_TESTS_INTEGRATION_LUA_GCRA_H */
