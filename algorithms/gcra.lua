-- GCRA as redis-cell's CL.THROTTLE, atomically inside Redis (the C twin is
-- algorithms/gcra.c; a differential test keeps them equal). One call checks
-- one key (CL.THROTTLE) or every limit of a LIMITER CHECK that lives in one
-- slot, all or nothing.
--
-- KEYS     the limiter keys (any bytes), n >= 1
-- ARGV     for each key, inc_s inc_ns dvt_s dvt_ns: INC = EI * Q and
--          DVT = EI * (B + 1), split as s = floor(d / 1e9), 0 <= ns < 1e9
--          (proxy-computed); then optionally a mode: "check" (default),
--          "peek" (decide, write nothing), "refund" (take INC back from
--          each stored TAT: undoes a check that another slot refused) or
--          "each" (independent calls batched together: see below)
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
    (mode ~= 'check' and mode ~= 'peek' and mode ~= 'refund' and
     mode ~= 'each') then
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

-- Reads key i's stored TAT: its raw bytes (or false), and rel, the part of
-- the TAT ahead of now (negative when it is past). TYPE first, so a wrong
-- type never reaches GET. Returns nil when the key holds no TAT.
local function read(i)
  local kind = redis.call('TYPE', KEYS[i])['ok']
  if kind == 'none' then
    return false, 0, 0
  end
  if kind ~= 'string' then
    return nil
  end
  local v = redis.call('GET', KEYS[i])
  local tat_s, tat_ns, none = parse_tat(v)
  if not tat_s then
    return nil
  end
  if none then
    return v, 0, 0
  end
  local r_s, r_ns = norm(tat_s - now_s, tat_ns - now_ns)
  return v, r_s, r_ns
end

-- The decision for key i from rel: ttl = new_tat - now = max(rel, 0) + INC,
-- the new TAT, and whether it is refused (diff = now - (new_tat - DVT) < 0
-- <=> ttl > DVT). Returns nil when the new TAT passes INT64_MAX.
local function decide(i, r_s, r_ns)
  if r_s < 0 then
    r_s, r_ns = 0, 0
  end
  local ttl_s, ttl_ns = norm(r_s + inc_s[i], r_ns + inc_ns[i])
  local new_s, new_ns = norm(now_s + ttl_s, now_ns + ttl_ns)
  if gt(new_s, new_ns, MAX_S, MAX_NS) then
    return nil
  end
  return gt(ttl_s, ttl_ns, dvt_s[i], dvt_ns[i]), ttl_s, ttl_ns, new_s, new_ns
end

-- Stores a TAT `s, ns` for key i, expiring when it is reached; a TTL under
-- 1 ms deletes a stored key (raw: what it held).
local function store(i, raw, ttl_s, ttl_ns, s, ns)
  local ms = ttl_s * 1000 + math.floor(ttl_ns / 1000000)
  if ms > 0 then
    -- the TAT > now > 0 here, so it prints as seconds then 9 digits.
    local val = string.format('%.0f%09.0f', s, ns)
    if s == 0 then
      val = string.format('%.0f', ns)
    end
    redis.call('SET', KEYS[i], val, 'PX', string.format('%.0f', ms))
  elseif raw then
    redis.call('DEL', KEYS[i])
  end
end

if mode == 'each' then
  -- Independent calls batched by the proxy (CL.THROTTLE): each key in
  -- turn, each seeing the writes of the ones before (a key may repeat).
  -- Reply {0, now_s, now_us, raw_1..raw_n, flag_1..flag_n}, flag 0
  -- admitted, 1 refused, -1 not a TAT (WRONGTYPE), -2 TAT out of range.
  local raws, flags = {}, {}
  for i = 1, n do
    local raw, r_s, r_ns = read(i)
    raws[i] = raw or false
    if raw == nil then
      flags[i] = -1
    else
      local limited, ttl_s, ttl_ns, s, ns = decide(i, r_s, r_ns)
      if limited == nil then
        flags[i] = -2
      elseif limited then
        flags[i] = 1
      else
        flags[i] = 0
        store(i, raw, ttl_s, ttl_ns, s, ns)
      end
    end
  end
  local reply = {0, now_s, now_us}
  for i = 1, n do
    reply[3 + i] = raws[i]
    reply[3 + n + i] = flags[i]
  end
  return reply
end

-- The other modes see every key at once: all read, then all decided.
local raw, rel_s, rel_ns = {}, {}, {}
for i = 1, n do
  raw[i], rel_s[i], rel_ns[i] = read(i)
  if raw[i] == nil then
    return redis.error_reply(WRONGTYPE)
  end
end

if mode == 'refund' then
  -- tat - INC; what is left ahead of now keeps counting, the rest goes.
  for i = 1, n do
    if raw[i] and gt(rel_s[i], rel_ns[i], 0, 0) then
      local left_s, left_ns = norm(rel_s[i] - inc_s[i], rel_ns[i] - inc_ns[i])
      if gt(left_s, left_ns, 0, 0) then
        local s, ns = norm(now_s + left_s, now_ns + left_ns)
        store(i, raw[i], left_s, left_ns, s, ns)
      else
        redis.call('DEL', KEYS[i])
      end
    end
  end
  return {0, now_s, now_us}
end

local limited = false
local ttl_s, ttl_ns, new_s, new_ns = {}, {}, {}, {}
for i = 1, n do
  local lim
  lim, ttl_s[i], ttl_ns[i], new_s[i], new_ns[i] = decide(i, rel_s[i], rel_ns[i])
  if lim == nil then
    return redis.error_reply(TAT_RANGE)
  end
  limited = limited or lim
end
if mode == 'check' and not limited then
  for i = 1, n do
    store(i, raw[i], ttl_s[i], ttl_ns[i], new_s[i], new_ns[i])
  end
end

local reply = {limited and 1 or 0, now_s, now_us}
for i = 1, n do
  reply[3 + i] = raw[i]
end
return reply
