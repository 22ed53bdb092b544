-- Shared by the limiter scripts (pasted in by the build): argument and
-- state parsing, exact integer arithmetic on doubles.
--
-- Lua numbers are doubles: integers are exact up to 2^53, and every
-- helper here keeps its operands and results below that.
--
-- Everything before a script's "--#call" line is load-time code: the
-- FUNCTION library runs it once, when only `redis` exists (Redis 7.0 has
-- no string, math or tonumber at load), so it defines and names, never
-- calls.
--
-- Each algorithm's parameter parser keeps its last success, keyed by the
-- argument strings: the groups of a batch mostly share one limit, parsing
-- a number (lib_int) costs Redis thousands of instructions, and Lua
-- strings are interned, so a hit is a few comparisons. The results depend
-- on the strings alone, so the memo may outlive a call; a table it
-- returns is never written by its callers.

local WRONGTYPE = 'WRONGTYPE Operation against a key holding the wrong kind of value'

-- redis.call and redis.pcall as upvalues, bound where a call starts (the
-- lines after each script's "--#call"): a use of the global costs Redis
-- two table lookups, about 270 instructions, and a check makes several.
-- They cannot be bound at load: FUNCTION LOAD's redis has no call.
local R_CALL, R_PCALL = false, false

local P53 = 9007199254740992

-- The integer written in s (decimal digits, an optional '-'), or nil when
-- s is anything else or beyond +-(2^53 - 1). The values parsed are
-- remembered (LIB_INT, at most 4096 strings, then it starts again): a
-- pattern and a conversion cost Redis about two thousand instructions, a
-- lookup of an interned string a tenth of that, and stored fields repeat
-- (a window's start, small counts, the now of the call that wrote them).
local LIB_INT, LIB_INT_N = {}, 0
local function lib_int(s)
  if not s then
    return nil
  end
  local v = LIB_INT[s]
  if v ~= nil then
    return v
  end
  if type(s) ~= 'string' or #s > 17 or not string.find(s, '^%-?%d+$') then
    return nil
  end
  v = tonumber(s)
  if v == nil or v >= P53 or v <= -P53 then
    return nil
  end
  if LIB_INT_N >= 4096 then
    LIB_INT, LIB_INT_N = {}, 0
  end
  LIB_INT[s], LIB_INT_N = v, LIB_INT_N + 1
  return v
end

-- A sorted set's stored score as an integer, or nil when it is not one in
-- 0 .. 2^53 - 1 (the scores the C twins write always are: timestamps,
-- lease ends). Redis gives scores back as it formats doubles, so
-- tonumber, not lib_int's digits.
local function lib_score(s)
  local v = tonumber(s)
  if v == nil or v < 0 or v >= P53 or v ~= math.floor(v) then
    return nil
  end
  return v
end

-- floor(a / b) and a mod b, exact, for integers 0 <= a < 2^53, 0 < b < 2^53.
-- (a / b rounded may land on the next integer; fmod is exact.)
local function lib_divmod(a, b)
  local r = math.fmod(a, b)
  return (a - r) / b, r
end

-- ceil(a / b) for integers 0 <= a < 2^53, 0 < b < 2^53.
local function lib_ceildiv(a, b)
  local r = math.fmod(a, b)
  if r > 0 then
    return (a - r) / b + 1
  end
  return a / b
end

-- An integer for a reply or a stored field (|v| < 2^53): '%d' converts
-- through a C long, exact for these and cheaper than '%.0f'. The strings
-- made are remembered (LIB_STR, at most 4096, then it starts again): a
-- batch writes mostly the same few values (a window's start, its expiry,
-- small counts), and a lookup costs a fifth of a format. In a library the
-- memo outlives the call, which only saves more.
local LIB_STR, LIB_STR_N = {}, 0
local function lib_str(v)
  local s = LIB_STR[v]
  if s == nil then
    s = string.format('%d', v)
    if LIB_STR_N >= 4096 then
      LIB_STR, LIB_STR_N = {}, 0
    end
    if v == v then -- NaN is no table key
      LIB_STR[v], LIB_STR_N = s, LIB_STR_N + 1
    end
  end
  return s
end

-- The node's clock from t, TIME's reply: now's seconds and microseconds.
-- The instant is also kept as the decimal nanoseconds GCRA stores
-- (LIB_NOW_STR, for LIB_NOW_S and LIB_NOW_NS), made by joining TIME's own
-- digits: a format of the two numbers costs Redis 3,400 instructions, the
-- join a quarter of that, and the seconds are parsed through lib_int's
-- memo (they change once a second). TIME's microseconds have no leading
-- zeros, so LIB_PAD pads them to six digits. Seconds of any length but ten
-- (before 2001, after 2286) leave the string to a format.
local LIB_PAD = {'00000', '0000', '000', '00', '0', ''}
local LIB_NOW_S, LIB_NOW_NS, LIB_NOW_STR = false, false, false
local function lib_time(t)
  local t1, t2 = t[1], t[2]
  local s, us = lib_int(t1), tonumber(t2)
  if #t1 == 10 and LIB_PAD[#t2] then
    LIB_NOW_S, LIB_NOW_NS = s, us * 1000
    LIB_NOW_STR = t1 .. LIB_PAD[#t2] .. t2 .. '000'
  end
  return s, us
end

-- The table a call builds its reply in (LIB_REPLY), kept from call to
-- call: a reply of a batch grows by one or two elements a decision, and
-- each time it doubles Redis spends about a thousand instructions copying
-- it, then more collecting the old array, where a kept table has the room
-- already (a batch of 16 keys costs 6 % less). Redis reads a reply up to
-- its first nil, so lib_reply(o) ends it after element o and returns it;
-- one of more than 256 elements is not kept (its memory would stay).
local LIB_REPLY = {}
local function lib_reply(o)
  local t = LIB_REPLY
  t[o + 1] = nil
  if o > 256 then
    LIB_REPLY = {}
  end
  return t
end

-- A read through redis.pcall, so that a key of another type costs no TYPE
-- call first: the reply (a table, a string or false: a number's .err
-- would raise), or nil for WRONGTYPE. Any other error (a key
-- this node does not serve...) is raised as redis.call raises it.
local function lib_read(...)
  local v = R_PCALL(...)
  if v and v.err then -- a string's .err is nil too: no type() needed
    if string.find(v.err, '^WRONGTYPE') then
      return nil
    end
    return R_CALL(...)
  end
  return v
end
