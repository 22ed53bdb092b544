/* The tests' view of LIMITER's states (lstate.h): one script emulates the
 * previous release's per-level key on its record in the identity's state
 * string, so a test reads and plants states with the commands it always
 * used. */
#include "tests/integration/lstate.h"

#include "tests/integration/fixture.h"

#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define LSTATE_WORDS 64

static const char lstate_lua_a[] =
    "local A = {gcra = 's'}\n"
    "local function run(ARGV)\n"
    "local cmd, key = string.upper(ARGV[1]), ARGV[2]\n"
    "local h, f = string.match(key or '', '^([^{]*{[^}]+})(.*#%d+:[%a_]+)$')\n"
    "local t = h and A[string.match(f, ':([%a_]+)$')]\n"
    "if not t then return redis.call(unpack(ARGV)) end\n"
    "local tm = redis.call('TIME')\n"
    "local now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / "
    "1000)\n"
    "local function exp_of(r)\n"
    "  if not string.find(r, '%D') then\n"
    "    return tonumber(string.sub(r, 1, #r - 6)) or 1\n"
    "  end\n"
    "  return tonumber(string.match(r, '^(%d+)|') or '0')\n"
    "end\n"
    "local S = redis.call('GET', h)\n"
    "local R, names = {}, {}\n"
    "local at = 1\n"
    "while S and at <= #S do\n"
    "  local l, q = string.match(S, '^([1-9]%d*):()', at)\n"
    "  if not l and string.sub(S, at, at + 1) == '0:' then\n"
    "    l, q = '0', at + 2\n"
    "  end\n"
    "  local e = l and string.find(S, ';', q + l, true)\n"
    "  if not e or string.sub(S, q + l, q + l) ~= '=' then\n"
    "    return redis.error_reply('ERR lstate: a malformed state string')\n"
    "  end\n"
    "  local name = string.sub(S, q, q + l - 1)\n"
    "  if R[name] == nil then names[#names + 1] = name end\n"
    "  R[name] = string.sub(S, q + l + 1, e - 1)\n"
    "  at = e + 1\n"
    "end\n"
    "local s = R[f]\n"
    "local v, x = false, 0\n"
    "if s then\n"
    "  local e, pl = string.match(s, '^(%d+)|(.*)$')\n"
    "  if t == 's' and not string.find(s, '%D') then\n"
    "    e, pl = exp_of(s), s\n"
    "  end\n"
    "  if not e then v = s\n"
    "  elseif tonumber(e) == 0 or tonumber(e) >= now then\n"
    "    v, x = pl, tonumber(e)\n"
    "  end\n"
    "end\n"
    "local m, order = {}, {}\n"
    "if v and t == 'h' then\n"
    "  for part in string.gmatch(v, '[^,]+') do\n"
    "    local k, val = string.match(part, '^([^=]+)=(.*)$')\n"
    "    if k then m[k] = val; order[#order + 1] = k end\n"
    "  end\n"
    "end\n";

/* (Two pieces: C99 compilers need not hold a longer string literal.) */
static const char lstate_lua_b[] =
    "-- Writes f's record (none for nv nil or ''): the string rebuilt, SET\n"
    "-- with PXAT its records' latest expiry (none when one never expires),\n"
    "-- DEL when no record is left.\n"
    "local function put(nv, nx)\n"
    "  if not nv or nv == '' then R[f] = nil\n"
    "  else\n"
    "    if R[f] == nil then names[#names + 1] = f end\n"
    "    R[f] = string.format('%d', nx) .. '|' .. nv\n"
    "  end\n"
    "  local out, hi, forever = {}, 0, false\n"
    "  for _, k in ipairs(names) do\n"
    "    local r = R[k]\n"
    "    if r then\n"
    "      out[#out + 1] = #k .. ':' .. k .. '=' .. r .. ';'\n"
    "      local e = exp_of(r)\n"
    "      if e == 0 then forever = true elseif e > hi then hi = e end\n"
    "    end\n"
    "  end\n"
    "  if #out == 0 then redis.call('DEL', h)\n"
    "  elseif forever then redis.call('SET', h, table.concat(out))\n"
    "  else redis.call('SET', h, table.concat(out), 'PXAT', hi) end\n"
    "end\n"
    "local function enc()\n"
    "  local p = {}\n"
    "  for _, k in ipairs(order) do\n"
    "    if m[k] then p[#p + 1] = k .. '=' .. m[k] end\n"
    "  end\n"
    "  return table.concat(p, ',')\n"
    "end\n"
    "if cmd == 'EXISTS' then return v and 1 or 0\n"
    "elseif cmd == 'PTTL' then\n"
    "  if not v then return -2 elseif x == 0 then return -1 end\n"
    "  return x - now\n"
    "elseif cmd == 'TYPE' then\n"
    "  return {ok = v and (t == 's' and 'string' or 'hash') or 'none'}\n"
    "elseif cmd == 'GET' then return v\n"
    "elseif cmd == 'HGET' then return v and m[ARGV[3]] or false\n"
    "elseif cmd == 'HMGET' then\n"
    "  local r = {}\n"
    "  for i = 3, #ARGV do r[i - 2] = v and m[ARGV[i]] or false end\n"
    "  return r\n"
    "elseif cmd == 'HGETALL' then\n"
    "  local r = {}\n"
    "  for _, k in ipairs(order) do r[#r + 1] = k; r[#r + 1] = m[k] end\n"
    "  return r\n"
    "elseif cmd == 'HLEN' then return #order\n"
    "elseif cmd == 'DEL' then\n"
    "  if v then put(nil) return 1 end\n"
    "  return 0\n"
    "elseif cmd == 'PERSIST' then\n"
    "  if v and x > 0 then put(v, 0) return 1 end\n"
    "  return 0\n"
    "elseif cmd == 'PEXPIRETIME' then\n"
    "  if not v then return -2 elseif x == 0 then return -1 end\n"
    "  return x\n"
    "elseif cmd == 'PEXPIREAT' then\n"
    "  if not v then return 0 end\n"
    "  put(v, tonumber(ARGV[3]))\n"
    "  return 1\n"
    "elseif cmd == 'HKEYS' then\n"
    "  return order\n"
    "elseif cmd == 'HINCRBY' then\n"
    "  if m[ARGV[3]] == nil then order[#order + 1] = ARGV[3] end\n"
    "  m[ARGV[3]] = tostring((tonumber(m[ARGV[3]]) or 0) + "
    "tonumber(ARGV[4]))\n"
    "  put(enc(), v and x or 0)\n"
    "  return tonumber(m[ARGV[3]])\n"
    "elseif cmd == 'PEXPIRE' then\n"
    "  if not v then return 0 end\n"
    "  put(v, now + tonumber(ARGV[3]))\n"
    "  return 1\n"
    "elseif cmd == 'SET' then\n"
    "  local nx = 0\n"
    "  for i = 4, #ARGV do\n"
    "    local w = string.upper(ARGV[i])\n"
    "    if w == 'PX' then nx = now + tonumber(ARGV[i + 1])\n"
    "    elseif w == 'KEEPTTL' then nx = x end\n"
    "  end\n"
    "  put(ARGV[3], nx)\n"
    "  return {ok = 'OK'}\n"
    "elseif cmd == 'HSET' then\n"
    "  local added = 0\n"
    "  for i = 3, #ARGV, 2 do\n"
    "    if m[ARGV[i]] == nil then\n"
    "      added = added + 1; order[#order + 1] = ARGV[i]\n"
    "    end\n"
    "    m[ARGV[i]] = ARGV[i + 1]\n"
    "  end\n"
    "  put(enc(), v and x or 0)\n"
    "  return added\n"
    "elseif cmd == 'HDEL' then\n"
    "  local gone = 0\n"
    "  for i = 3, #ARGV do\n"
    "    if m[ARGV[i]] then gone = gone + 1; m[ARGV[i]] = nil end\n"
    "  end\n"
    "  if gone > 0 then put(enc(), x) end\n"
    "  return gone\n"
    "end\n"
    "return redis.error_reply('ERR lstate: ' .. cmd .. ' not emulated')\n"
    "end\n"
    "if string.upper(ARGV[1]) == 'EXISTS' and #ARGV > 2 then\n"
    "  local n = 0\n"
    "  for i = 2, #ARGV do n = n + run({'EXISTS', ARGV[i]}) end\n"
    "  return n\n"
    "end\n"
    "return run(ARGV)\n";

/* The script: its two pieces joined, once. */
static const char *lstate_lua(void)
{
    static char lua[sizeof(lstate_lua_a) + sizeof(lstate_lua_b)];

    if (lua[0] == '\0') {
        memcpy(lua, lstate_lua_a, sizeof(lstate_lua_a) - 1);
        memcpy(lua + sizeof(lstate_lua_a) - 1, lstate_lua_b,
               sizeof(lstate_lua_b));
    }
    return lua;
}

int lstate_split(const char *key, char *hash, size_t hashlen,
                 const char **field)
{
    static const char *const algos[] = { ":gcra" };
    const char *open = strchr(key, '{'), *close, *hashmark, *colon;
    size_t n;
    int ok = 0;

    if (open == NULL || (close = strchr(open + 1, '}')) == NULL ||
        close == open + 1) {
        return 0;
    }
    hashmark = strrchr(close + 1, '#');
    colon = strrchr(close + 1, ':');
    if (hashmark == NULL || colon == NULL || colon < hashmark ||
        colon == hashmark + 1 ||
        strspn(hashmark + 1, "0123456789") != (size_t)(colon - hashmark - 1)) {
        return 0;
    }
    for (size_t i = 0; i < sizeof(algos) / sizeof(algos[0]); i++) {
        ok |= strcmp(colon, algos[i]) == 0;
    }
    n = (size_t)(close + 1 - key);
    if (!ok || n >= hashlen) {
        return 0;
    }
    memcpy(hash, key, n);
    hash[n] = '\0';
    *field = close + 1;
    return 1;
}

/* Splits the command text into the arguments of EVAL: the script, 1 key
 * (the second word: the state string a limit key lives in) and the
 * words; or,
 * when no word after the command is a limit key, into the command itself
 * (Redis runs it as it is). Sets *argc and returns where the arguments
 * start; text is cut in place. */
static const char **lstate_argv(char *text, const char **argv, char *hash,
                                size_t hashlen, int *argc)
{
    const char *field;
    char *save = NULL;
    int n = 4, limit = 0;

    argv[0] = "EVAL";
    argv[1] = lstate_lua();
    argv[2] = "1";
    for (char *w = strtok_r(text, " ", &save); w != NULL;
         w = strtok_r(NULL, " ", &save)) {
        cr_assert_lt(n, LSTATE_WORDS, "lstate: too many words");
        argv[n++] = strcmp(w, "''") == 0 ? "" : w; /* an empty argument */
    }
    cr_assert_geq(n, 5, "lstate: no command");
    for (int i = 5; i < n && !limit; i++) {
        limit = lstate_split(argv[i], hash, hashlen, &field);
        /* (Only EXISTS names several keys.) */
        if (i == 5 && strcasecmp(argv[4], "EXISTS") != 0) {
            break;
        }
    }
    if (!limit) {
        *argc = n - 4;
        return argv + 4;
    }
    cr_assert(lstate_split(argv[5], hash, hashlen, &field),
              "lstate: EXISTS of a limit key after another key");
    argv[3] = hash;
    *argc = n;
    return argv;
}

redisReply *lstate_cmd(redisContext *c, const char *fmt, ...)
{
    char text[8192], hash[1024];
    const char *argv[LSTATE_WORDS], **a;
    va_list ap;
    int argc;
    redisReply *r;

    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    a = lstate_argv(text, argv, hash, sizeof(hash), &argc);
    r = redisCommandArgv(c, argc, a, NULL);
    cr_assert_not_null(r, "lstate: %s", c->errstr);
    return r;
}

void lstate_append(redisContext *c, const char *fmt, ...)
{
    char text[8192], hash[1024];
    const char *argv[LSTATE_WORDS], **a;
    va_list ap;
    int argc;

    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    a = lstate_argv(text, argv, hash, sizeof(hash), &argc);
    cr_assert_eq(redisAppendCommandArgv(c, argc, a, NULL), REDIS_OK);
}

/* The fields of the records of a state string's value v (vlen bytes)
 * into fields (at most max, each NUL-ended): their count, or -1 when v is
 * not a sequence of records (then the key is some other string). */
static int lstate_fields(const char *v, size_t vlen, char (*fields)[128],
                         int max)
{
    const char *p = v, *end = v + vlen, *semi;
    int n = 0;

    while (p < end) {
        char *colon;
        unsigned long l = strtoul(p, &colon, 10);

        if (*p < '0' || *p > '9' || colon >= end || *colon != ':' ||
            l >= (unsigned long)(end - colon - 1) || colon[1 + l] != '=' ||
            (semi = memchr(colon + 2 + l, ';',
                           (size_t)(end - colon - 2 - l))) == NULL) {
            return -1;
        }
        cr_assert_lt(n, max, "lstate: more than %d records", max);
        cr_assert_lt(l, sizeof(fields[0]), "lstate: long field");
        memcpy(fields[n], colon + 1, l);
        fields[n++][l] = '\0';
        p = semi + 1;
    }
    return n;
}

int lstate_keys(redisContext *c, char (*names)[128], int max)
{
    static char fields[256][128];
    redisReply *k = px_cmd(c, "KEYS *");
    int n = 0;

    cr_assert_eq(k->type, REDIS_REPLY_ARRAY);
    for (size_t i = 0; i < k->elements; i++) {
        const char *key = k->element[i]->str;
        size_t len = strlen(key);
        int nf = -1;

        if (len > 2 && key[len - 1] == '}' && strchr(key, '{') != NULL) {
            redisReply *t = px_cmd(c, "TYPE %s", key);

            if (strcmp(t->str, "string") == 0) {
                redisReply *g = px_cmd(c, "GET %s", key);

                if (g->type == REDIS_REPLY_STRING) {
                    nf = lstate_fields(g->str, g->len, fields, 256);
                }
                freeReplyObject(g);
            }
            freeReplyObject(t);
        }
        if (nf < 0) {
            cr_assert_lt(n, max, "lstate: more than %d keys", max);
            cr_assert_lt(len, sizeof(names[0]));
            memcpy(names[n++], key, len + 1);
            continue;
        }
        for (int j = 0; j < nf; j++) {
            char name[128];
            redisReply *e;
            size_t flen = strlen(fields[j]);

            cr_assert_lt(len + flen, sizeof(name), "lstate: long key");
            memcpy(name, key, len);
            memcpy(name + len, fields[j], flen + 1);
            e = lstate_cmd(c, "EXISTS %s", name);
            if (e->integer == 1) {
                cr_assert_lt(n, max, "lstate: more than %d keys", max);
                memcpy(names[n++], name, len + flen + 1);
            }
            freeReplyObject(e);
        }
    }
    freeReplyObject(k);
    return n;
}
