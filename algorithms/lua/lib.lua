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
local P53 = 9007199254740992

-- The integer written in s (decimal digits, an optional '-'), or nil when
-- s is anything else or beyond +-(2^53 - 1).
local function lib_int(s)
  if type(s) ~= 'string' or #s > 17 or not string.find(s, '^%-?%d+$') then
    return nil
  end
  local v = tonumber(s)
  if v == nil or v >= P53 or v <= -P53 then
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
-- through a C long, exact for these and cheaper than '%.0f'.
local function lib_str(v)
  return string.format('%d', v)
end

-- A read through redis.pcall, so that a key of another type costs no TYPE
-- call first: the reply, or nil for WRONGTYPE. Any other error (a key
-- this node does not serve...) is raised as redis.call raises it.
local function lib_read(...)
  local v = redis.pcall(...)
  if type(v) == 'table' and v.err then
    if string.find(v.err, '^WRONGTYPE') then
      return nil
    end
    return redis.call(...)
  end
  return v
end
