-- GCRA as redis-cell's CL.THROTTLE, atomically inside Redis (the C twin is
-- algorithms/gcra.c; a differential test keeps them equal). One call checks
-- one key (CL.THROTTLE) or every limit of a LIMITER CHECK that lives in one
-- slot, all or nothing.
--
-- KEYS     the limiter keys (any bytes), n >= 1
-- ARGV     for each key, inc_s inc_ns dvt_s dvt_ns: INC = EI * Q and
--          DVT = EI * (B + 1), split as s = floor(d / 1e9), 0 <= ns < 1e9
--          (proxy-computed); then optionally a mode: "check" (default),
--          "peek" (decide, write nothing) or "refund" (take INC back from
--          each stored TAT: undoes a check that another slot refused)
-- Reply    {limited (0|1: any key refused), now_s, now_us, then each key's
--          stored TAT as given or nil}; the proxy computes the five
--          integers from these with the C model. refund replies {0, now_s,
--          now_us}.
-- Writes   check, only when every key admits: SET key <new TAT in ns> PX
--          trunc(ttl / 1 ms), or DEL key when that is 0 ms (redis-cell sets
--          an expiry of 0).
-- Errors   (nothing written) WRONGTYPE when a key holds anything but a
--          decimal int64; the TAT range error when a new TAT > INT64_MAX; a
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

local n = #KEYS
local mode = ARGV[4 * n + 1] or 'check'
if n == 0 or #ARGV > 4 * n + 1 or
    (mode ~= 'check' and mode ~= 'peek' and mode ~= 'refund') then
  return redis.error_reply(BAD_ARGS)
end
local inc_s, inc_ns, dvt_s, dvt_ns = {}, {}, {}, {}
for i = 1, n do
  local b = 4 * (i - 1)
  inc_s[i], inc_ns[i] = int_arg(b + 1), int_arg(b + 2)
  dvt_s[i], dvt_ns[i] = int_arg(b + 3), int_arg(b + 4)
  if not (inc_s[i] and inc_ns[i] and dvt_s[i] and dvt_ns[i]) or
      inc_ns[i] < 0 or inc_ns[i] >= NS or dvt_ns[i] < 0 or dvt_ns[i] >= NS then
    return redis.error_reply(BAD_ARGS)
  end
  -- The proxy refuses a negative quantity before calling; a direct caller
  -- must not store a TAT that runs backwards either.
  if inc_s[i] < 0 then
    return redis.error_reply(NEG_QUANTITY)
  end
end

local t = redis.call('TIME')
local now_s, now_us = tonumber(t[1]), tonumber(t[2])
local now_ns = now_us * 1000

-- The stored TATs; TYPE first, so a wrong type never reaches GET. rel is
-- max(tat, now) - now, the part of the TAT still ahead of now.
local raw, rel_s, rel_ns = {}, {}, {}
for i = 1, n do
  raw[i], rel_s[i], rel_ns[i] = false, 0, 0
  local kind = redis.call('TYPE', KEYS[i])['ok']
  if kind ~= 'none' then
    if kind ~= 'string' then
      return redis.error_reply(WRONGTYPE)
    end
    raw[i] = redis.call('GET', KEYS[i])
    local tat_s, tat_ns, none = parse_tat(raw[i])
    if not tat_s then
      return redis.error_reply(WRONGTYPE)
    end
    if not none then
      rel_s[i], rel_ns[i] = norm(tat_s - now_s, tat_ns - now_ns)
    end
  end
end

-- Stores a TAT `s, ns` for key i, expiring when it is reached.
local function store(i, ttl_s, ttl_ns, s, ns)
  local ms = ttl_s * 1000 + math.floor(ttl_ns / 1000000)
  if ms > 0 then
    -- the TAT > now > 0 here, so it prints as seconds then 9 digits.
    local val = string.format('%.0f%09.0f', s, ns)
    if s == 0 then
      val = string.format('%.0f', ns)
    end
    redis.call('SET', KEYS[i], val, 'PX', string.format('%.0f', ms))
  elseif raw[i] then
    redis.call('DEL', KEYS[i])
  end
end

if mode == 'refund' then
  -- tat - INC; what is left ahead of now keeps counting, the rest goes.
  for i = 1, n do
    if raw[i] and gt(rel_s[i], rel_ns[i], 0, 0) then
      local left_s, left_ns = norm(rel_s[i] - inc_s[i], rel_ns[i] - inc_ns[i])
      if gt(left_s, left_ns, 0, 0) then
        local s, ns = norm(now_s + left_s, now_ns + left_ns)
        store(i, left_s, left_ns, s, ns)
      else
        redis.call('DEL', KEYS[i])
      end
    end
  end
  return {0, now_s, now_us}
end

-- ttl = new_tat - now = max(rel, 0) + INC; new_tat must fit in 64 bits.
-- diff = now - (new_tat - DVT) < 0  <=>  ttl > DVT.
local limited = false
local ttl_s, ttl_ns, new_s, new_ns = {}, {}, {}, {}
for i = 1, n do
  local r_s, r_ns = rel_s[i], rel_ns[i]
  if r_s < 0 then
    r_s, r_ns = 0, 0
  end
  ttl_s[i], ttl_ns[i] = norm(r_s + inc_s[i], r_ns + inc_ns[i])
  new_s[i], new_ns[i] = norm(now_s + ttl_s[i], now_ns + ttl_ns[i])
  if gt(new_s[i], new_ns[i], MAX_S, MAX_NS) then
    return redis.error_reply(TAT_RANGE)
  end
  if gt(ttl_s[i], ttl_ns[i], dvt_s[i], dvt_ns[i]) then
    limited = true
  end
end
if mode == 'check' and not limited then
  for i = 1, n do
    store(i, ttl_s[i], ttl_ns[i], new_s[i], new_ns[i])
  end
end

local reply = {limited and 1 or 0, now_s, now_us}
for i = 1, n do
  reply[3 + i] = raw[i]
end
return reply
