-- GCRA as redis-cell stores it: one string key per limit holding the TAT
-- (theoretical arrival time) in nanoseconds, a decimal int64. Shared by
-- gcra.lua (CL.THROTTLE) and limiter.lua (LIMITER); the C twin is
-- algorithms/gcra.c.
--
-- Nanosecond timestamps reach 2^63, beyond a double's 2^53, so every time
-- is a pair (seconds, nanoseconds) with 0 <= nanoseconds < 1e9; both halves
-- stay far below 2^53.
--
-- One decision is one GET (through redis.pcall: a key of another type is
-- WRONGTYPE without a TYPE call first) and, when it admits, one SET. The
-- halves of each sum are below 2e9, so a carry is one comparison, not a
-- division.

local GCRA_NS = 1000000000
local GCRA_TAT_RANGE = 'Cell error: Store error: Stored TAT out of range: 64-bit nanoseconds would overflow'
local GCRA_NEG_QUANTITY = 'Cell error: Store error: Negative quantities are not supported'
local GCRA_BAD_ARGS = 'ERR gcra script arguments are inc_s inc_ns dvt_s dvt_ns'
-- INT64_MAX = 9223372036854775807 ns, split.
local GCRA_MAX_S, GCRA_MAX_NS = 9223372036, 854775807

-- Carries ns into s so that 0 <= ns < 1e9 (any ns).
local function gcra_norm(s, ns)
  local c = math.floor(ns / GCRA_NS)
  return s + c, ns - c * GCRA_NS
end

-- A stored TAT that is not plain digits: an optional sign, leading zeros,
-- -1 (redis-cell's "no TAT", the third result). See gcra_parse_tat.
local function gcra_parse_signed(v)
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

-- A stored TAT as (s, ns), or nil when it is not a signed 64-bit decimal
-- integer (the rule redis-cell's i64 parse applies). What the scripts
-- write, at most 19 plain digits, takes one pattern test and two
-- conversions (digits of equal length compare as numbers do).
local function gcra_parse_tat(v)
  local n = #v
  if n <= 19 and string.find(v, '^%d+$') then
    if n == 19 and v > '9223372036854775807' then
      return nil
    end
    return tonumber(string.sub(v, 1, -10)) or 0, tonumber(string.sub(v, -9)), false
  end
  return gcra_parse_signed(v)
end

-- A split argument (an integer within the split range of an int64), or nil.
local function gcra_int_arg(v)
  v = tonumber(v)
  if v and v == math.floor(v) and v <= GCRA_MAX_S + 1 and
      v >= -(GCRA_MAX_S + 1) then
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

-- The last limits parsed: gcra_args of four argument strings, kept from
-- call to call (a proxy's batches mostly carry one limit; a path of two
-- levels alternates between two). Lua strings are interned, so a hit is
-- four pointer comparisons, where parsing costs Redis a few thousand
-- instructions a number. Four slots, refilled in turn.
local GCRA_PM, GCRA_PM_next = {{}, {}, {}, {}}, 1

-- gcra_args through the memo.
local function gcra_args_memo(a, b, c, d)
  for i = 1, 4 do
    local P = GCRA_PM[i]
    if P.a == a and P.b == b and P.c == c and P.d == d then
      return P.inc_s, P.inc_ns, P.dvt_s, P.dvt_ns
    end
  end
  local inc_s, inc_ns, dvt_s, dvt_ns = gcra_args(a, b, c, d)
  if inc_s then
    local P = GCRA_PM[GCRA_PM_next]
    GCRA_PM_next = GCRA_PM_next % 4 + 1
    P.a, P.b, P.c, P.d = a, b, c, d
    P.inc_s, P.inc_ns, P.dvt_s, P.dvt_ns = inc_s, inc_ns, dvt_s, dvt_ns
  end
  return inc_s, inc_ns, dvt_s, dvt_ns
end

-- A key's stored value, read with the GET a decision makes (through
-- redis.pcall: the caller tells a wrong type from a node that does not
-- serve the key).
--
-- rel, the part of a stored TAT ahead of now (negative when it is past),
-- from v, the GET's reply: its raw bytes (or false), r_s, r_ns. Returns
-- nil when the key holds no TAT (WRONGTYPE), nil and the node's error when
-- the node cannot read it at all (a key it does not serve, in a batch whose
-- keys were not declared: the caller reports it instead of raising, so
-- the batch's other keys are still decided).
local function gcra_rel(v, now_s, now_ns)
  if not v then
    return false, 0, 0
  end
  if type(v) ~= 'string' then
    if string.find(v.err, '^WRONGTYPE') then
      return nil
    end
    return nil, v.err
  end
  local tat_s, tat_ns, none = gcra_parse_tat(v)
  if not tat_s then
    return nil
  end
  if none then
    return v, 0, 0
  end
  -- tat_ns - now_ns is in (-1e9, 1e9): at most one borrow.
  local r_s, r_ns = tat_s - now_s, tat_ns - now_ns
  if r_ns < 0 then
    return v, r_s - 1, r_ns + GCRA_NS
  end
  return v, r_s, r_ns
end

-- Reads a key's stored TAT (one GET): gcra_rel of what it holds.
local function gcra_read(key, now_s, now_ns)
  return gcra_rel(R_PCALL('GET', key), now_s, now_ns)
end

-- The decision from rel: refused (a boolean; nil when the new TAT passes
-- INT64_MAX), ttl = new_tat - now = max(rel, 0) + INC, and the new TAT.
-- Refused <=> diff = now - (new_tat - DVT) < 0 <=> ttl > DVT.
local function gcra_decide(r_s, r_ns, inc_s, inc_ns, dvt_s, dvt_ns, now_s,
                           now_ns)
  if r_s < 0 then
    r_s, r_ns = 0, 0
  end
  local ttl_s, ttl_ns = r_s + inc_s, r_ns + inc_ns
  if ttl_ns >= GCRA_NS then
    ttl_s, ttl_ns = ttl_s + 1, ttl_ns - GCRA_NS
  end
  local new_s, new_ns = now_s + ttl_s, now_ns + ttl_ns
  if new_ns >= GCRA_NS then
    new_s, new_ns = new_s + 1, new_ns - GCRA_NS
  end
  if new_s > GCRA_MAX_S or (new_s == GCRA_MAX_S and new_ns > GCRA_MAX_NS) then
    return nil
  end
  return ttl_s > dvt_s or (ttl_s == dvt_s and ttl_ns > dvt_ns), ttl_s, ttl_ns,
    new_s, new_ns
end

-- The general path's decision of v, a GET's reply, at now: raw (as
-- gcra_rel gives it), refused, ttl_s, ttl_ns, new_s, new_ns; raw and nil
-- when the new TAT passes INT64_MAX; nil and the node's error (nil for
-- WRONGTYPE) when v holds no TAT.
local function gcra_decide_v(v, inc_s, inc_ns, dvt_s, dvt_ns, now_s, now_ns)
  local raw, r_s, r_ns = gcra_rel(v, now_s, now_ns)
  if raw == nil then
    return nil, r_s
  end
  return raw, gcra_decide(r_s, r_ns, inc_s, inc_ns, dvt_s, dvt_ns, now_s,
                          now_ns)
end

-- Stores a TAT `s, ns`, expiring when it is reached; a TTL under 1 ms
-- deletes a stored key (raw: what it held).
local function gcra_store(key, raw, ttl_s, ttl_ns, s, ns)
  local ms = ttl_s * 1000 + math.floor(ttl_ns / 1000000)
  if ms > 0 then
    -- The TAT > now > 0 here, so it prints as seconds then 9 digits ('%d'
    -- goes through a C long: exact for both halves).
    local val
    if s == 0 then
      val = string.format('%d', ns)
    else
      val = string.format('%d%09d', s, ns)
    end
    R_CALL('SET', key, val, 'PX', string.format('%d', ms))
  elseif raw then
    R_CALL('DEL', key)
  end
end

-- The fast path. Nearly every decision reads nothing, or a TAT this
-- library wrote: 19 plain digits (every instant from 2001-09-09 to
-- INT64_MAX), and strings of one length compare as the numbers they write.
-- So, for one limit at one instant, a few strings prepared once classify
-- such a key with no parsing:
--   absent, or TAT <= now         admitted as from rel 0: SET val PX ms,
--                                 val = now + INC, ms = trunc(INC / 1 ms)
--   now < TAT <= thr              admitted from the TAT: SET TAT + INC PX
--                                 trunc((TAT + INC - now) / 1 ms), both
--                                 from the TAT's two halves (gcra_fast_ahead)
--   thr < TAT <= top              refused, nothing written (thr = now +
--                                 DVT - INC; top = INT64_MAX - INC, above
--                                 which the new TAT would not fit)
-- Anything else (other forms; above top; an error) is left to the
-- general path.

-- What the fast path keeps of a limit (gcra_fast_limit): refused,
-- whether INC > DVT (every request refused); ms, the expiry of a key
-- admitted from rel 0 (trunc(INC / 1 ms)); off_s, off_ns, DVT - INC; top,
-- top_s, top_ns, INT64_MAX - INC. These depend on the four values alone,
-- so they are made once per limit, not once per call: formatting them cost
-- Redis 6,000 instructions a call. Four slots, refilled in turn.
local GCRA_FL, GCRA_FL_next = {{}, {}, {}, {}}, 1

local function gcra_fast_limit(inc_s, inc_ns, dvt_s, dvt_ns)
  for i = 1, 4 do
    local L = GCRA_FL[i]
    if L.inc_s == inc_s and L.inc_ns == inc_ns and L.dvt_s == dvt_s and
        L.dvt_ns == dvt_ns then
      return L
    end
  end
  local L = GCRA_FL[GCRA_FL_next]
  GCRA_FL_next = GCRA_FL_next % 4 + 1
  L.inc_s, L.inc_ns, L.dvt_s, L.dvt_ns = inc_s, inc_ns, dvt_s, dvt_ns
  L.refused = inc_s > dvt_s or (inc_s == dvt_s and inc_ns > dvt_ns)
  L.ms = inc_s * 1000 + math.floor(inc_ns / 1000000)
  L.f_ms = string.format('%d', L.ms)
  L.off_s, L.off_ns = gcra_norm(dvt_s - inc_s, dvt_ns - inc_ns)
  L.top_s, L.top_ns = gcra_norm(GCRA_MAX_S - inc_s, GCRA_MAX_NS - inc_ns)
  L.f_top = string.format('%d%09d', L.top_s, L.top_ns)
  return L
end

-- The strings now, thr, top, val and ms of a limit (gcra_args' four
-- values) at now, then lo and fmt for gcra_fast_ahead (false when DVT is
-- 10^6 s or more); nil when the fast path does not apply to the limit at
-- all: INC > DVT (every request refused), INC under 1 ms (its write is a
-- DEL), now before 2001 or sums beyond INT64_MAX. now's string is
-- lib_time's when now is its instant.
local GCRA_FMT_HI, GCRA_FMT = false, false
local function gcra_fast(inc_s, inc_ns, dvt_s, dvt_ns, now_s, now_ns)
  if now_s < 1000000000 then
    return nil
  end
  local L = gcra_fast_limit(inc_s, inc_ns, dvt_s, dvt_ns)
  if L.refused or L.ms <= 0 then
    return nil
  end
  -- thr = now + DVT - INC; thr < top also keeps now + INC (<= thr) under
  -- INT64_MAX.
  local thr_s, thr_ns = now_s + L.off_s, now_ns + L.off_ns
  if thr_ns >= GCRA_NS then
    thr_s, thr_ns = thr_s + 1, thr_ns - GCRA_NS
  end
  if thr_s > L.top_s or (thr_s == L.top_s and thr_ns >= L.top_ns) then
    return nil
  end
  local new_s, new_ns = now_s + inc_s, now_ns + inc_ns
  if new_ns >= GCRA_NS then
    new_s, new_ns = new_s + 1, new_ns - GCRA_NS
  end
  local f = '%d%09d'
  local f_now, f_thr, f_val
  if now_s == LIB_NOW_S and now_ns == LIB_NOW_NS then
    f_now = LIB_NOW_STR
    -- A sum that leaves now's nanoseconds as they are (an INC or DVT -
    -- INC of whole seconds, as in "15 30 60") is its seconds, ten digits
    -- (now is after 2001, thr under top), then now's last nine: a join
    -- costs Redis a sixth of a format, and lib_str's memo has the seconds
    -- (they change once a second).
    if inc_ns == 0 or L.off_ns == 0 then
      local tail = string.sub(f_now, 11)
      if inc_ns == 0 then
        f_val = lib_str(new_s) .. tail
      end
      if L.off_ns == 0 then
        f_thr = lib_str(thr_s) .. tail
      end
    end
  else
    f_now = string.format(f, now_s, now_ns)
  end
  local lo, fmt = false, false
  if dvt_s < 1000000 then
    local r = now_s % 1000000
    lo = r * GCRA_NS + now_ns
    -- fmt is now's first four digits (its seconds' millions, which change
    -- every 11.6 days) before 15 more.
    if now_s - r ~= GCRA_FMT_HI then
      GCRA_FMT_HI, GCRA_FMT = now_s - r, string.sub(f_now, 1, 4) .. '%015d'
    end
    fmt = GCRA_FMT
  end
  return f_now, f_thr or string.format(f, thr_s, thr_ns), L.f_top,
    f_val or string.format(f, new_s, new_ns), L.f_ms, lo, fmt
end

-- Redis 7 takes SET ... NX GET (6.2 refuses NX with GET; 7.0 also set
-- REDIS_VERSION_NUM, and a script runs with it on either).
local GCRA_NX_GET = redis.REDIS_VERSION_NUM ~= nil

-- The first read of a key that is decided and written at once (gcra.lua's
-- batches): GET, or on Redis 7 one command that reads the key and, when it
-- is absent, writes the admitted TAT (SET val NX PX ms GET: a missing key
-- is admitted, as the table above says, and a present one is left alone
-- and returned). Returns the key's value as GET would (false, a string or
-- an error) and whether it was written.
local function gcra_fast_read(key, f_val, f_ms)
  if GCRA_NX_GET then
    local v = R_PCALL('SET', key, f_val, 'NX', 'PX', f_ms, 'GET')
    return v, v == false
  end
  return R_PCALL('GET', key), false
end

-- The fast path's decision of a key from v, its GET's reply, with the
-- strings of gcra_fast: 0 admitted as from rel 0 (the write is SET f_val
-- PX f_ms), 1 refused, 2 admitted from its TAT ahead of now (the write is
-- gcra_fast_ahead's); nil when the general path decides.
local function gcra_fast_class(v, f_now, f_thr, f_top)
  if v then
    -- v is a string or an error table, whose # is 0. One anchored match
    -- of every digit costs Redis half what a search for a non-digit does
    -- (which tries each position).
    if #v ~= 19 or not string.find(v, '^%d*$') then
      return nil
    end
    if v > f_now then
      if v <= f_thr then
        return 2
      elseif v <= f_top then
        return 1
      end
      return nil
    end
  end
  return 0
end

-- The write of class 2 above: the new TAT and its expiry in ms, as the
-- strings SET takes. v is 19 digits, now < v <= thr, so the sum fits and
-- the expiry is at least INC >= 1 ms. lo and fmt (gcra_fast's) split at
-- 10^15 instead: v's last 15 digits are exact in a double, and when they
-- exceed now's (lo), v shares now's first four (fmt's prefix), since v -
-- now <= DVT < 10^15 ns; then a sum without carry is one parse and one
-- format (Redis spends 2,300 fewer instructions than on the halves).
local function gcra_fast_ahead(v, inc_s, inc_ns, now_s, now_ns, lo, fmt)
  if lo then
    local low = tonumber(string.sub(v, 5))
    local new = low + (inc_s * GCRA_NS + inc_ns)
    if low > lo and new < 1e15 then
      return string.format(fmt, new),
        string.format('%d', math.floor((new - lo) / 1000000))
    end
  end
  local s = tonumber(string.sub(v, 1, 10)) + inc_s
  local ns = tonumber(string.sub(v, 11)) + inc_ns
  if ns >= GCRA_NS then
    s, ns = s + 1, ns - GCRA_NS
  end
  local t_s, t_ns = s - now_s, ns - now_ns
  if t_ns < 0 then
    t_s, t_ns = t_s - 1, t_ns + GCRA_NS
  end
  return string.format('%d%09d', s, ns),
    string.format('%d', t_s * 1000 + math.floor(t_ns / 1000000))
end

-- Takes INC back from a stored TAT (undoes a check that another slot
-- refused): what is left ahead of now keeps counting, the rest goes.
local function gcra_refund(key, raw, r_s, r_ns, inc_s, inc_ns, now_s, now_ns)
  if raw and (r_s > 0 or (r_s == 0 and r_ns > 0)) then
    local left_s, left_ns = gcra_norm(r_s - inc_s, r_ns - inc_ns)
    if left_s > 0 or (left_s == 0 and left_ns > 0) then
      local s, ns = gcra_norm(now_s + left_s, now_ns + left_ns)
      gcra_store(key, raw, left_s, left_ns, s, ns)
    else
      R_CALL('DEL', key)
    end
  end
end
