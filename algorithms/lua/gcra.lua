-- GCRA as redis-cell stores it: one string key per limit holding the TAT
-- (theoretical arrival time) in nanoseconds, a decimal int64. Shared by
-- gcra.lua (CL.THROTTLE) and limiter.lua (LIMITER); the C twin is
-- algorithms/gcra.c.
--
-- Nanosecond timestamps reach 2^63, beyond a double's 2^53, so every time
-- is a pair (seconds, nanoseconds) with 0 <= nanoseconds < 1e9; both halves
-- stay far below 2^53.

local GCRA_NS = 1000000000
local GCRA_TAT_RANGE = 'Cell error: Store error: Stored TAT out of range: 64-bit nanoseconds would overflow'
local GCRA_NEG_QUANTITY = 'Cell error: Store error: Negative quantities are not supported'
local GCRA_BAD_ARGS = 'ERR gcra script arguments are inc_s inc_ns dvt_s dvt_ns'
-- INT64_MAX = 9223372036854775807 ns, split.
local GCRA_MAX_S, GCRA_MAX_NS = 9223372036, 854775807

-- Carries ns into s so that 0 <= ns < 1e9.
local function gcra_norm(s, ns)
  local c = math.floor(ns / GCRA_NS)
  return s + c, ns - c * GCRA_NS
end

-- True when (as, ans) > (bs, bns); both normalized.
local function gcra_gt(as, ans, bs, bns)
  return as > bs or (as == bs and ans > bns)
end

-- A stored TAT as (s, ns), or nil when it is not a signed 64-bit decimal
-- integer (the rule redis-cell's i64 parse applies). -1 is redis-cell's
-- "no TAT" and comes back as the third result.
local function gcra_parse_tat(v)
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
    local s, ns = gcra_norm(-hi, -lo)
    return s, ns, (hi == 0 and lo == 1)
  end
  return hi, lo, false
end

-- A split argument (an integer within the split range of an int64), or nil.
local function gcra_int_arg(v)
  v = tonumber(v)
  if v and v == math.floor(v) and math.abs(v) <= GCRA_MAX_S + 1 then
    return v
  end
  return nil
end

-- The four arguments of a key, INC and DVT split: inc_s, inc_ns, dvt_s,
-- dvt_ns; or nil and the error text.
local function gcra_args(a, b, c, d)
  local inc_s, inc_ns = gcra_int_arg(a), gcra_int_arg(b)
  local dvt_s, dvt_ns = gcra_int_arg(c), gcra_int_arg(d)
  if not (inc_s and inc_ns and dvt_s and dvt_ns) or inc_ns < 0 or
      inc_ns >= GCRA_NS or dvt_ns < 0 or dvt_ns >= GCRA_NS then
    return nil, GCRA_BAD_ARGS
  end
  -- The proxy refuses a negative quantity before calling; a direct caller
  -- must not store a TAT that runs backwards either.
  if inc_s < 0 then
    return nil, GCRA_NEG_QUANTITY
  end
  return inc_s, inc_ns, dvt_s, dvt_ns
end

-- Reads a key's stored TAT: its raw bytes (or false), and rel, the part of
-- the TAT ahead of now (negative when it is past). TYPE first, so a wrong
-- type never reaches GET. Returns nil when the key holds no TAT.
local function gcra_read(key, now_s, now_ns)
  local kind = redis.call('TYPE', key)['ok']
  if kind == 'none' then
    return false, 0, 0
  end
  if kind ~= 'string' then
    return nil
  end
  local v = redis.call('GET', key)
  local tat_s, tat_ns, none = gcra_parse_tat(v)
  if not tat_s then
    return nil
  end
  if none then
    return v, 0, 0
  end
  local r_s, r_ns = gcra_norm(tat_s - now_s, tat_ns - now_ns)
  return v, r_s, r_ns
end

-- The decision from rel: ttl = new_tat - now = max(rel, 0) + INC, the new
-- TAT, and whether it is refused (diff = now - (new_tat - DVT) < 0 <=>
-- ttl > DVT). Returns nil when the new TAT passes INT64_MAX.
local function gcra_decide(r_s, r_ns, inc_s, inc_ns, dvt_s, dvt_ns, now_s,
                           now_ns)
  if r_s < 0 then
    r_s, r_ns = 0, 0
  end
  local ttl_s, ttl_ns = gcra_norm(r_s + inc_s, r_ns + inc_ns)
  local new_s, new_ns = gcra_norm(now_s + ttl_s, now_ns + ttl_ns)
  if gcra_gt(new_s, new_ns, GCRA_MAX_S, GCRA_MAX_NS) then
    return nil
  end
  return gcra_gt(ttl_s, ttl_ns, dvt_s, dvt_ns), ttl_s, ttl_ns, new_s, new_ns
end

-- Stores a TAT `s, ns`, expiring when it is reached; a TTL under 1 ms
-- deletes a stored key (raw: what it held).
local function gcra_store(key, raw, ttl_s, ttl_ns, s, ns)
  local ms = ttl_s * 1000 + math.floor(ttl_ns / 1000000)
  if ms > 0 then
    -- the TAT > now > 0 here, so it prints as seconds then 9 digits.
    local val = string.format('%.0f%09.0f', s, ns)
    if s == 0 then
      val = string.format('%.0f', ns)
    end
    redis.call('SET', key, val, 'PX', string.format('%.0f', ms))
  elseif raw then
    redis.call('DEL', key)
  end
end

-- Takes INC back from a stored TAT (undoes a check that another slot
-- refused): what is left ahead of now keeps counting, the rest goes.
local function gcra_refund(key, raw, r_s, r_ns, inc_s, inc_ns, now_s, now_ns)
  if raw and gcra_gt(r_s, r_ns, 0, 0) then
    local left_s, left_ns = gcra_norm(r_s - inc_s, r_ns - inc_ns)
    if gcra_gt(left_s, left_ns, 0, 0) then
      local s, ns = gcra_norm(now_s + left_s, now_ns + left_ns)
      gcra_store(key, raw, left_s, left_ns, s, ns)
    else
      redis.call('DEL', key)
    end
  end
end
