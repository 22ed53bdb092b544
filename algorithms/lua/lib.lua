-- Shared by the limiter scripts (pasted in by the build): argument and
-- state parsing, exact integer arithmetic on doubles.
--
-- Lua numbers are doubles: integers are exact up to 2^53, and every
-- helper here keeps its operands and results below that.

local WRONGTYPE = 'WRONGTYPE Operation against a key holding the wrong kind of value'
local P53 = 9007199254740992

-- The integer written in s (decimal digits, an optional '-'), or nil when
-- s is anything else or beyond +-(2^53 - 1).
local function lib_int(s)
  if type(s) ~= 'string' or not string.match(s, '^%-?%d+$') or #s > 17 then
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
  local q, r = lib_divmod(a, b)
  if r > 0 then
    q = q + 1
  end
  return q
end

-- What `key` holds: true when it is of type `want`, false when it does not
-- exist, nil when it holds another type (the caller answers WRONGTYPE).
-- TYPE first, so a command of the wrong type never runs and fails.
local function lib_type(key, want)
  local kind = redis.call('TYPE', key)['ok']
  if kind == 'none' then
    return false
  end
  if kind ~= want then
    return nil
  end
  return true
end

-- An integer for a reply or a stored field: numbers under 2^53 print
-- without exponent.
local function lib_str(v)
  return string.format('%.0f', v)
end
