-- GCRA as redis-cell's CL.THROTTLE, atomically inside Redis (the C twin is
-- algorithms/gcra.c; a differential test keeps them equal).
--
-- KEYS[1]  the limiter key (any bytes)
-- ARGV     inc_s inc_ns dvt_s dvt_ns: INC = EI * Q and DVT = EI * (B + 1),
--          split as s = floor(d / 1e9), 0 <= ns < 1e9 (proxy-computed)
-- Reply    {limited (0|1), now_s, now_us, stored TAT as given or nil}; the
--          proxy computes the five integers from these with the C model.
-- Writes   only when allowed: SET key <new TAT in ns> PX trunc(ttl / 1 ms),
--          or DEL key when that is 0 ms (redis-cell sets an expiry of 0).
-- Errors   (nothing written) WRONGTYPE when the key holds anything but a
--          decimal int64; the TAT range error when new TAT > INT64_MAX; a
--          negative INC; malformed ARGV.
--
-- Lua numbers are doubles, exact only to 2^53, while nanosecond timestamps
-- reach 2^63. So every time is a pair (seconds, nanoseconds), with
-- 0 <= nanoseconds < 1e9; both halves stay far below 2^53.

local NS = 1000000000
local WRONGTYPE = 'WRONGTYPE Operation against a key holding the wrong kind of value'
local TAT_RANGE = 'Cell error: Store error: Stored TAT out of range: 64-bit nanoseconds would overflow'
local NEG_QUANTITY = 'Cell error: Store error: Negative quantities are not supported'
local BAD_ARGS = 'ERR gcra script arguments are inc_s inc_ns dvt_s dvt_ns'
-- INT64_MAX = 9223372036854775807 ns, split.
local MAX_S, MAX_NS = 9223372036, 854775807

-- Carries ns into s so that 0 <= ns < 1e9.
local function norm(s, ns)
  local c = math.floor(ns / NS)
  return s + c, ns - c * NS
end

-- True when (as, ans) > (bs, bns); both normalized.
local function gt(as, ans, bs, bns)
  return as > bs or (as == bs and ans > bns)
end

-- A stored TAT as (s, ns), or nil when it is not a signed 64-bit decimal
-- integer (the rule redis-cell's i64 parse applies). -1 is redis-cell's
-- "no TAT" and comes back as the third result.
local function parse_tat(v)
  local sign, digits = string.match(v, '^([+-]?)(%d+)$')
  if not digits then
    return nil
  end
  digits = string.match(digits, '^0*(%d-)$')
  if digits == '' then
    digits = '0'
  end
  local max = (sign == '-') and '9223372036854775808' or '9223372036854775807'
  if #digits > 19 or (#digits == 19 and digits > max) then
    return nil
  end
  local hi = tonumber(string.sub(digits, 1, -10)) or 0
  local lo = tonumber(string.sub(digits, -9))
  if sign == '-' then
    local s, ns = norm(-hi, -lo)
    return s, ns, (hi == 0 and lo == 1)
  end
  return hi, lo, false
end

-- ARGV[i] as an integer within the split range of an int64, or nil.
local function int_arg(i)
  local v = tonumber(ARGV[i])
  if v and v == math.floor(v) and math.abs(v) <= MAX_S + 1 then
    return v
  end
  return nil
end

local key = KEYS[1]
local inc_s, inc_ns = int_arg(1), int_arg(2)
local dvt_s, dvt_ns = int_arg(3), int_arg(4)
if not (inc_s and inc_ns and dvt_s and dvt_ns) or inc_ns < 0 or
    inc_ns >= NS or dvt_ns < 0 or dvt_ns >= NS then
  return redis.error_reply(BAD_ARGS)
end
-- The proxy refuses a negative quantity before calling; a direct caller
-- must not store a TAT that runs backwards either.
if inc_s < 0 then
  return redis.error_reply(NEG_QUANTITY)
end

local t = redis.call('TIME')
local now_s, now_us = tonumber(t[1]), tonumber(t[2])
local now_ns = now_us * 1000

-- The stored TAT; TYPE first, so a wrong type never reaches GET.
local raw = false
local kind = redis.call('TYPE', key)['ok']
if kind ~= 'none' then
  if kind ~= 'string' then
    return redis.error_reply(WRONGTYPE)
  end
  raw = redis.call('GET', key)
end

-- rel = max(tat, now) - now, the part of the TAT still ahead of now.
local rel_s, rel_ns = 0, 0
if raw then
  local tat_s, tat_ns, none = parse_tat(raw)
  if not tat_s then
    return redis.error_reply(WRONGTYPE)
  end
  if not none then
    rel_s, rel_ns = norm(tat_s - now_s, tat_ns - now_ns)
    if rel_s < 0 then
      rel_s, rel_ns = 0, 0
    end
  end
end

-- ttl = new_tat - now = rel + INC; new_tat must fit in 64 bits.
local ttl_s, ttl_ns = norm(rel_s + inc_s, rel_ns + inc_ns)
local new_s, new_ns = norm(now_s + ttl_s, now_ns + ttl_ns)
if gt(new_s, new_ns, MAX_S, MAX_NS) then
  return redis.error_reply(TAT_RANGE)
end

-- diff = now - (new_tat - DVT) < 0  <=>  ttl > DVT.
local limited = gt(ttl_s, ttl_ns, dvt_s, dvt_ns)
if not limited then
  local ms = ttl_s * 1000 + math.floor(ttl_ns / 1000000)
  if ms > 0 then
    -- new_tat > now > 0 here, so it prints as seconds then 9 digits.
    local val = string.format('%.0f%09.0f', new_s, new_ns)
    if new_s == 0 then
      val = string.format('%.0f', new_ns)
    end
    redis.call('SET', key, val, 'PX', string.format('%.0f', ms))
  elseif raw then
    redis.call('DEL', key)
  end
end

return {limited and 1 or 0, now_s, now_us, raw}
