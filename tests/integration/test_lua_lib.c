/* The helpers algorithms/lua/lib.lua gives every algorithm, inside the
 * FUNCTION library on a real redis-server: lib_int and lib_str remember
 * what they parsed and formatted, and those memos must stay bounded and
 * answer exactly what a fresh parse or format would; lib_time joins TIME's
 * digits into the nanoseconds GCRA stores, and gcra_fast keeps what
 * depends on a limit alone, both of which must equal the formats they
 * replace.
 *
 * The library is loaded with one more function at its end, a probe that
 * sees the library's locals: it parses and formats many distinct values,
 * counts what the memos hold, and checks the answers after the churn. */
#include "tests/integration/fixture.h"
#include "tests/integration/lua_twin.h"
#include "tests/support/px_test.h"

#include <stdlib.h>
#include <string.h>

PX_TEST_SUITE(it_lua_lib);

/* What lib.lua promises: at most this many values in each memo. */
#define LIB_MEMO_MAX 4096

static void it_init(void)
{
    px_redis_start(&px_env()->redis, NULL);
}

/* The probe: ARGV[1] distinct strings parsed and integers formatted, then
 * {entries of LIB_INT, its count, entries of LIB_STR, its count, then 1 or
 * 0 for each answer checked after the churn}. */
static const char probe[] =
    "redis.register_function('cellgate_probe', function(keys, args)\n"
    "  local n = tonumber(args[1])\n"
    "  for i = 1, n do\n"
    "    lib_int(tostring(1000000 + i))\n"
    "    lib_str(2000000 + i)\n"
    "  end\n"
    "  local ok = {\n"
    "    lib_int('12345') == 12345, lib_int('12345') == 12345,\n"
    "    lib_int('007') == 7, lib_int('-5') == -5,\n"
    "    lib_int('9007199254740991') == 9007199254740991,\n"
    "    lib_int('9007199254740992') == nil, lib_int('0x10') == nil,\n"
    "    lib_int(' 1') == nil, lib_int('1e3') == nil, lib_int('') == nil,\n"
    "    lib_int(false) == nil, lib_int(nil) == nil,\n"
    "    lib_int(tostring(1000000 + n)) == 1000000 + n,\n"
    "    lib_str(12345) == '12345', lib_str(12345) == '12345',\n"
    "    lib_str(-7) == '-7', lib_str(2000000 + n) == tostring(2000000 + n),\n"
    "    (pcall(lib_str, 0 / 0)),\n"
    "  }\n"
    "  local ci, cs = 0, 0\n"
    "  for _ in pairs(LIB_INT) do ci = ci + 1 end\n"
    "  for _ in pairs(LIB_STR) do cs = cs + 1 end\n"
    "  local out = {ci, LIB_INT_N, cs, LIB_STR_N}\n"
    "  for i = 1, #ok do out[4 + i] = ok[i] and 1 or 0 end\n"
    "  return out\n"
    "end)\n"
    /* {1 or 0 per check}: lib_time on TIME replies of every length of
     * microseconds, then gcra_fast's strings against the formats of the
     * sums they stand for, for limits that churn its memo of four. */
    "local function ref(s, ns)\n"
    "  local c = math.floor(ns / 1e9)\n"
    "  return string.format('%d%09d', s + c, ns - c * 1e9)\n"
    "end\n"
    "redis.register_function('cellgate_probe_time', function(keys, args)\n"
    "  local ok = {}\n"
    "  local function check(v) ok[#ok + 1] = v and 1 or 0 end\n"
    "  for _, t2 in ipairs({'0', '7', '42', '999', '1234', '12345',\n"
    "                       '999999'}) do\n"
    "    local s, us = lib_time({'1795577545', t2})\n"
    "    check(s == 1795577545 and us == tonumber(t2))\n"
    "    check(LIB_NOW_S == s and LIB_NOW_NS == us * 1000)\n"
    "    check(LIB_NOW_STR == string.format('%d%09d', s, us * 1000))\n"
    "    local f_now, f_thr, _, f_val = gcra_fast(2, 0, 32, 0, s, us * 1000)\n"
    "    check(f_now == LIB_NOW_STR)\n"
    "    check(f_thr == ref(s + 30, us * 1000))\n"
    "    check(f_val == ref(s + 2, us * 1000))\n"
    "    check(gcra_fast(2, 0, 32, 0, s, us * 1000 + 1) ==\n"
    "          ref(s, us * 1000 + 1))\n"
    "  end\n"
    "  local s, us = lib_time({'999999999', '5'})\n"
    "  check(s == 999999999 and us == 5 and LIB_NOW_S == 1795577545)\n"
    "  local limits = {{2, 0, 32, 0}, {0, 600000000, 60, 0},\n"
    "    {1, 999999999, 3, 500000000}, {5, 0, 5, 0}, {0, 1000000, 0, 1000000},\n"
    "    {2, 0, 30, 0}, {2, 0, 32, 0}, {0, 600000000, 60, 600000000},\n"
    "    {2, 0, 32, 500000000}}\n"
    "  local nows = {{1795577545, 0}, {1795577545, 999999000},\n"
    "                {1795577545, 600000000}, {1795577545, 400000000},\n"
    "                {1799999999, 999999999}}\n"
    "  for round = 1, 2 do\n"
    "    for _, l in ipairs(limits) do\n"
    "      for _, n in ipairs(nows) do\n"
    "        local f_now, f_thr, f_top, f_val, f_ms, lo, fmt =\n"
    "          gcra_fast(l[1], l[2], l[3], l[4], n[1], n[2])\n"
    "        local inc, ms = l[1] * 1e9 + l[2], l[1] * 1000 + l[2] / 1e6\n"
    "        check(f_now == ref(n[1], n[2]))\n"
    "        check(f_thr == ref(n[1] + l[3] - l[1], n[2] + l[4] - l[2]))\n"
    "        check(f_top == ref(9223372036 - l[1], 854775807 - l[2]))\n"
    "        check(f_val == ref(n[1] + l[1], n[2] + l[2]))\n"
    "        check(f_ms == string.format('%d', math.floor(ms)))\n"
    "        check(lo == (n[1] % 1e6) * 1e9 + n[2])\n"
    "        check(fmt == string.sub(f_now, 1, 4) .. '%015d')\n"
    "      end\n"
    "    end\n"
    "  end\n"
    "  -- INC above DVT refuses everything; INC under 1 ms writes a DEL;\n"
    "  -- a now whose threshold passes INT64_MAX: none takes the fast path.\n"
    "  check(gcra_fast(33, 0, 32, 0, 1795577545, 0) == nil)\n"
    "  check(gcra_fast(3, 500000000, 3, 400000000, 1795577545, 0) == nil)\n"
    "  check(gcra_fast(0, 999999, 32, 0, 1795577545, 0) == nil)\n"
    "  check(gcra_fast(2, 0, 32, 0, 9223372006, 0) == nil)\n"
    "  check(gcra_fast(2, 0, 32, 0, 1795577545, 0) ~= nil)\n"
    "  return ok\n"
    "end)\n";

/* Checks cellgate_probe_time makes: 7 microsecond lengths of 7, one
 * 9-digit second, 2 rounds of 9 limits at 5 instants of 7, and 5. */
#define PROBE_TIME_CHECKS (7 * 7 + 1 + 2 * 9 * 5 * 7 + 5)

#define PROBE_CHECKS 18

static redisContext *probe_connect(void)
{
    redisContext *c = px_redis_connect(&px_env()->redis, NULL);
    size_t len;
    char *lib = lua_twin_library(&len);
    char *text = malloc(len + sizeof(probe));

    cr_assert_not_null(text);
    memcpy(text, lib, len);
    memcpy(text + len, probe, sizeof(probe));
    px_check_str(
        px_cmd(c, "FUNCTION LOAD REPLACE %b", text, len + sizeof(probe) - 1),
        LUA_TWIN_LIBRARY);
    free(text);
    free(lib);
    return c;
}

/* Calls the probe with n distinct values; asserts its answers and returns
 * the entries of LIB_INT and LIB_STR. */
static void probe_run(redisContext *c, int n, long long *ints, long long *strs)
{
    redisReply *r = px_cmd(c, "FCALL cellgate_probe 0 %d", n);

    cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "probe: %s",
                 r->type == REDIS_REPLY_ERROR ? r->str : "not an array");
    cr_assert_eq(r->elements, 4 + PROBE_CHECKS);
    for (size_t i = 0; i < r->elements; i++) {
        cr_assert_eq(r->element[i]->type, REDIS_REPLY_INTEGER);
    }
    for (size_t i = 4; i < r->elements; i++) {
        cr_expect_eq(r->element[i]->integer, 1,
                     "check %zu of the probe failed after %d values", i - 3, n);
    }
    /* The counters say how many entries each memo holds. */
    cr_assert_eq(r->element[0]->integer, r->element[1]->integer);
    cr_assert_eq(r->element[2]->integer, r->element[3]->integer);
    *ints = r->element[0]->integer;
    *strs = r->element[2]->integer;
    freeReplyObject(r);
}

Test(it_lua_lib, memos_answer_as_a_fresh_parse_and_stay_bounded,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = probe_connect();
    long long ints, strs;

    /* A few values: all remembered. */
    probe_run(c, 100, &ints, &strs);
    cr_assert_geq(ints, 100);
    cr_assert_geq(strs, 100);
    cr_assert_leq(ints, LIB_MEMO_MAX);
    cr_assert_leq(strs, LIB_MEMO_MAX);

    /* Far more distinct values than a memo holds, twice: each starts
     * again when full, and the answers stay right across the restarts. */
    for (int round = 0; round < 2; round++) {
        probe_run(c, 3 * LIB_MEMO_MAX + 100, &ints, &strs);
        cr_assert_gt(ints, 0);
        cr_assert_gt(strs, 0);
        cr_assert_leq(ints, LIB_MEMO_MAX);
        cr_assert_leq(strs, LIB_MEMO_MAX);
    }
    redisFree(c);
}

Test(it_lua_lib, time_and_gcra_fast_strings_equal_their_formats,
     .init = it_init, .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = probe_connect();
    redisReply *r = px_cmd(c, "FCALL cellgate_probe_time 0");

    cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "probe: %s",
                 r->type == REDIS_REPLY_ERROR ? r->str : "not an array");
    cr_assert_eq(r->elements, PROBE_TIME_CHECKS);
    for (size_t i = 0; i < r->elements; i++) {
        cr_assert_eq(r->element[i]->type, REDIS_REPLY_INTEGER);
        cr_expect_eq(r->element[i]->integer, 1, "check %zu of the probe failed",
                     i + 1);
    }
    freeReplyObject(r);
    redisFree(c);
}

/* FCALL of the library's function `fn` with keys[0..nk-1] declared and
 * the arguments tail[0..nt-1]. Asserts an array of `want` elements, which
 * it returns (the caller frees it); `ctx` names the call. */
static redisReply *lib_fcall(redisContext *c, const char *fn, char (*keys)[32],
                             int nk, const char *const *tail, int nt,
                             size_t want, const char *ctx)
{
    const char **argv = calloc((size_t)(nk + nt) + 3, sizeof(*argv));
    char num[16];
    int argc = 0;

    cr_assert_not_null(argv);
    snprintf(num, sizeof(num), "%d", nk);
    argv[argc++] = "FCALL";
    argv[argc++] = fn;
    argv[argc++] = num;
    for (int i = 0; i < nk; i++) {
        argv[argc++] = keys[i];
    }
    for (int i = 0; i < nt; i++) {
        argv[argc++] = tail[i];
    }
    redisReply *r = redisCommandArgv(c, argc, argv, NULL);
    free(argv);
    cr_assert_not_null(r);
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s: %s", ctx,
                 r->type == REDIS_REPLY_ERROR ? r->str : "not an array");
    cr_assert_eq(r->elements, want, "%s: %zu elements", ctx, r->elements);
    return r;
}

/* FCALL of the library's gcra, mode "runs": n fresh keys "<tag>:<i>",
 * the first half under INC 1 s, the rest under INC 500 s (DVT 1000 s for
 * both; one run when n is 1). Asserts the reply: 3 + 2n elements, each key
 * read as nil and admitted; and the expiry each run's last key got. */
static void expect_gcra_runs(redisContext *c, const char *tag, int n)
{
    char(*keys)[32] = calloc((size_t)n, sizeof(*keys));
    int n1 = n > 1 ? n / 2 : n;
    char c1[16], c2[16];

    cr_assert_not_null(keys);
    for (int i = 0; i < n; i++) {
        snprintf(keys[i], sizeof(keys[i]), "%s:%d", tag, i);
    }
    snprintf(c1, sizeof(c1), "%d", n1);
    snprintf(c2, sizeof(c2), "%d", n - n1);
    const char *tail[] = { "runs", n > 1 ? "2" : "1",
                           c1,     "1",
                           "0",    "1000",
                           "0",    c2,
                           "500",  "0",
                           "1000", "0" };
    redisReply *r =
        lib_fcall(c, LUA_TWIN_FN_PREFIX "gcra", keys, n, tail, n > 1 ? 12 : 7,
                  3 + (size_t)n + (n + 47) / 48, tag);
    for (int i = 0; i < n; i++) {
        cr_assert_eq(r->element[3 + i]->type, REDIS_REPLY_NIL);
    }
    /* Nobody refused: every word of refusal bits (48 keys a word) is 0. */
    for (int w = 0; w < (n + 47) / 48; w++) {
        cr_assert_eq(r->element[3 + n + w]->type, REDIS_REPLY_INTEGER);
        cr_assert_eq(r->element[3 + n + w]->integer, 0);
    }
    freeReplyObject(r);
    redisReply *t = px_cmd(c, "PTTL %s", keys[n1 - 1]);
    cr_assert(t->integer > 0 && t->integer <= 1000, "%s: PTTL %lld", tag,
              t->integer);
    freeReplyObject(t);
    if (n > 1) {
        t = px_cmd(c, "PTTL %s", keys[n - 1]);
        cr_assert(t->integer > 1000 && t->integer <= 500000, "%s: PTTL %lld",
                  tag, t->integer);
        freeReplyObject(t);
    }
    free(keys);
}

/* FCALL of the library's limiter, mode "shapes": g groups of one shape,
 * one gcra level (INC 1 s, DVT 3 s) and no override pair, on fresh keys
 * "<tag>:<i>" (override hashes "<tag>:o<i>"). Asserts the flat reply:
 * 3 + 2g elements, each group admitted with no TAT before it. */
static void expect_limiter_shapes(redisContext *c, const char *tag, int g)
{
    char(*keys)[32] = calloc(2 * (size_t)g, sizeof(*keys));
    char ng[16];

    cr_assert_not_null(keys);
    for (int i = 0; i < g; i++) {
        snprintf(keys[2 * i], sizeof(keys[0]), "%s:%d", tag, i);
        snprintf(keys[2 * i + 1], sizeof(keys[0]), "%s:o%d", tag, i);
    }
    snprintf(ng, sizeof(ng), "%d", g);
    const char *tail[] = { "shapes", "",  "1", "check", "1", "1", "gcra",
                           "1",      "0", "3", "0",     "",  "0", ng };
    redisReply *r =
        lib_fcall(c, LUA_TWIN_FN_PREFIX "limiter", keys, 2 * g, tail,
                  (int)(sizeof(tail) / sizeof(*tail)), 3 + 2 * (size_t)g, tag);
    for (int i = 0; i < g; i++) {
        cr_assert_eq(r->element[3 + 2 * i]->type, REDIS_REPLY_INTEGER);
        cr_assert_eq(r->element[3 + 2 * i]->integer, 0);
        cr_assert_eq(r->element[4 + 2 * i]->type, REDIS_REPLY_NIL);
    }
    freeReplyObject(r);
    free(keys);
}

/* The library builds each batch's reply in one table it keeps from call
 * to call (lib_reply): a shorter reply after a longer one must end where
 * its own elements end, whichever function built the longer one, also
 * after one too long to keep (over 256 elements), whose table the next
 * call replaces. gcra's batches of one run and of two take the runs table
 * (GCRA_RUN) from one to the other. */
Test(it_lua_lib, a_kept_reply_table_ends_where_each_reply_ends, .init = it_init,
     .fini = px_env_fini, .timeout = 60)
{
    redisContext *c = px_redis_connect(&px_env()->redis, NULL);

    lua_twin_load_library(c);
    expect_gcra_runs(c, "a", 40);
    expect_limiter_shapes(c, "b", 5);
    expect_gcra_runs(c, "c", 1);
    expect_limiter_shapes(c, "d", 30);
    expect_limiter_shapes(c, "e", 1);
    expect_gcra_runs(c, "f", 130);
    expect_gcra_runs(c, "g", 2);
    expect_limiter_shapes(c, "h", 200);
    expect_gcra_runs(c, "i", 3);
    /* Every key was new and admitted: each batch wrote all of its own. */
    px_check_int(px_cmd(c, "DBSIZE"), 40 + 5 + 1 + 30 + 1 + 130 + 2 + 200 + 3);
    redisFree(c);
}
