/* The helpers algorithms/lua/lib.lua gives every algorithm, inside the
 * FUNCTION library on a real redis-server: lib_int and lib_str remember
 * what they parsed and formatted, and those memos must stay bounded and
 * answer exactly what a fresh parse or format would.
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
    "end)\n";

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
