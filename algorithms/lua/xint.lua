-- Shared by the twins of token_bucket, fixed_window and sliding_counter:
-- exact integers beyond 2^53 (their C models multiply in 128 bits), the
-- conversion of the models' saturating nanoseconds to the reply's
-- microseconds and expiries, and the parsing of stored HASH fields and of
-- the (max, window) parameters.
--
-- An xint is a non-negative integer as an array of limbs in base 2^24,
-- least significant first, without leading zero limbs (0 is {0}). Every
-- product or sum of limbs stays below 2^53, so every step is exact.

local XINT_B = 16777216 -- 2^24, the limb base
local XINT_1000 = {1000}
local XINT_FRAC_ONE = {13008896, 9272996, 3} -- 1e15
local XINT_I64MAX = {16777215, 16777215, 32767} -- 2^63 - 1
-- floor(INT64_MAX / 1000): a saturated duration in microseconds.
local XINT_MAX_US = {14898167, 12884901, 32}
local XINT_MAX_US_STR = '9223372036854775'
local XINT_MAX_MS = 9223372036855 -- ceil(INT64_MAX / 1e6)

-- Drops leading zero limbs (keeps one); returns a.
local function xint_norm(a)
  local n = #a
  while n > 1 and a[n] == 0 do
    a[n] = nil
    n = n - 1
  end
  return a
end

-- The xint of v, an integer-valued double >= 0 (exact at any size: the
-- limbs come from fmod and exact divisions by a power of two).
local function xint_of(v)
  local a, n = {}, 0
  repeat
    local r = math.fmod(v, XINT_B)
    n = n + 1
    a[n] = r
    v = (v - r) / XINT_B
  until v == 0
  return a
end

-- -1, 0 or 1 as a < b, a == b, a > b.
local function xint_cmp(a, b)
  if #a ~= #b then
    return #a < #b and -1 or 1
  end
  for i = #a, 1, -1 do
    if a[i] ~= b[i] then
      return a[i] < b[i] and -1 or 1
    end
  end
  return 0
end

local function xint_add(a, b)
  local out, carry = {}, 0
  for i = 1, math.max(#a, #b) do
    local t = (a[i] or 0) + (b[i] or 0) + carry
    carry = t >= XINT_B and 1 or 0
    out[i] = t - carry * XINT_B
  end
  if carry > 0 then
    out[#out + 1] = carry
  end
  return out
end

-- a - b for a >= b.
local function xint_sub(a, b)
  local out, borrow = {}, 0
  for i = 1, #a do
    local t = a[i] - (b[i] or 0) - borrow
    borrow = t < 0 and 1 or 0
    out[i] = t + borrow * XINT_B
  end
  return xint_norm(out)
end

local function xint_mul(a, b)
  local out, na, nb = {}, #a, #b
  for i = 1, na + nb do
    out[i] = 0
  end
  for i = 1, na do
    local ai, carry = a[i], 0
    for j = 1, nb do
      -- < 2^24 + 2^48 + 2^25: exact.
      local t = out[i + j - 1] + ai * b[j] + carry
      carry = math.floor(t / XINT_B)
      out[i + j - 1] = t - carry * XINT_B
    end
    out[i + nb] = carry
  end
  return xint_norm(out)
end

-- floor(a / d) as an xint and a mod d, for a number 1 <= d < 2^53. Long
-- division one limb at a time: the quotient limb is estimated in floating
-- point (off by at most one) and corrected with the exact remainder, which
-- is kept split as hi * 2^24 + lo against d = dh * 2^24 + dl.
local function xint_divmod(a, d)
  local dl = math.fmod(d, XINT_B)
  local dh = (d - dl) / XINT_B
  local q, r = {}, 0
  for i = #a, 1, -1 do
    local qd = math.floor((r * XINT_B + a[i]) / d)
    -- rem = (r - qd * dh) * 2^24 + (a[i] - qd * dl); both parts exact.
    local hi, lo = r - qd * dh, a[i] - qd * dl
    local c = math.floor(lo / XINT_B)
    hi, lo = hi + c, lo - c * XINT_B
    while hi < 0 do
      qd = qd - 1
      hi, lo = hi + dh, lo + dl
      if lo >= XINT_B then
        hi, lo = hi + 1, lo - XINT_B
      end
    end
    while hi > dh or (hi == dh and lo >= dl) do
      qd = qd + 1
      hi, lo = hi - dh, lo - dl
      if lo < 0 then
        hi, lo = hi - 1, lo + XINT_B
      end
    end
    q[i] = qd
    r = hi * XINT_B + lo
  end
  return xint_norm(q), r
end

-- a as a number when below 2^53, else nil.
local function xint_num(a)
  local n = #a
  if n > 3 or (n == 3 and a[3] >= 32) then
    return nil
  end
  return ((a[3] or 0) * XINT_B + (a[2] or 0)) * XINT_B + a[1]
end

-- a in decimal.
local function xint_str(a)
  local v = xint_num(a)
  if v then
    return lib_str(v)
  end
  local parts, r = {}, 0
  while #a > 1 or a[1] >= 10000000 do
    a, r = xint_divmod(a, 10000000)
    table.insert(parts, 1, string.format('%07.0f', r))
  end
  table.insert(parts, 1, lib_str(a[1]))
  return table.concat(parts)
end

-- a as a reply value: a number below 2^53, else its decimal string.
local function xint_out(a)
  return xint_num(a) or xint_str(a)
end

-- u + g for a number g, u a number or an xint (both >= 0, or u > -g): a
-- number when below 2^53, else an xint.
local function xint_sum(u, g)
  if type(u) == 'number' then
    local s = u + g -- exact below 2^53; at or above it, so is the true sum
    if s < P53 then
      return s
    end
    u = xint_of(u)
  end
  return xint_add(u, xint_of(g))
end

-- A C model's duration of u * 1000 + x ns (u: microseconds, a number or an
-- xint; 0 <= x < 1000), saturating at INT64_MAX ns as the model does: the
-- reply value (floored to microseconds, see xint_out) and the expiry in
-- whole ms, rounded up (rl_ceil_ms).
local function xint_dur(u, x)
  local ms, sub
  if type(u) == 'number' then
    ms, sub = lib_divmod(u, 1000)
  else
    -- From u = MAX_US on, the ns reach INT64_MAX (or the model's sum
    -- saturated there): floor and ceil are those of INT64_MAX.
    if xint_cmp(u, XINT_MAX_US) >= 0 then
      return XINT_MAX_US_STR, XINT_MAX_MS
    end
    ms, sub = xint_divmod(u, 1000)
    ms = xint_num(ms)
    u = xint_out(u)
  end
  if sub > 0 or x > 0 then
    ms = ms + 1
  end
  return u, ms
end

-- xint_dur(xint_sum(u, g), x) with no type() (which costs Redis a string
-- lookup) when u is a number (big false) and the sum stays below 2^53:
-- what the twins compute for nearly every decision.
local function xint_dur_plus(u, g, x, big)
  if not big then
    local s = u + g
    if s < P53 then
      local ms, sub = lib_divmod(s, 1000)
      if sub > 0 or x > 0 then
        ms = ms + 1
      end
      return s, ms
    end
  end
  return xint_dur(xint_sum(u, g), x)
end

-- A stored field: the integer (0 .. 2^53 - 1), or nil when it is missing,
-- negative or not a decimal integer.
local function xint_field(v)
  v = lib_int(v)
  if v == nil or v < 0 then
    return nil
  end
  return v
end

-- ---------------- Helpers of the window twins ----------------

local TW_MAX_WINDOW_MS = 315360000000 -- 3650 days

-- max and the window in us, or nil and the error (the C model's order).
-- The last success is kept (TW_M), as lib.lua's header says of parameters.
local TW_M = {}
local function tw_window_args(a1, a2, err_max, err_window)
  local M = TW_M
  if M.max and M.a1 == a1 and M.a2 == a2 then
    return M.max, M.w
  end
  local max = lib_int(a1)
  if max == nil or max < 1 then
    return nil, err_max
  end
  local ms = lib_int(a2)
  if ms == nil or ms < 1 or ms > TW_MAX_WINDOW_MS then
    return nil, err_window
  end
  M.a1, M.a2, M.max, M.w = a1, a2, max, ms * 1000
  return max, ms * 1000
end

-- The fields f1, f2 (and f3) of h, an HGETALL reply, as integers >= 0:
-- true and the values, false for no key (an empty reply: Redis keeps no
-- empty hash, where HMGET could not tell a missing key from a hash without
-- these fields), or nil and err_state.
local function tw_fields(h, err_state, f1, f2, f3)
  local n = #h
  if n == 0 then
    return false
  end
  local x, y, z
  for i = 1, n, 2 do
    local f = h[i]
    if f == f1 then
      x = h[i + 1]
    elseif f == f2 then
      y = h[i + 1]
    elseif f == f3 then
      z = h[i + 1]
    end
  end
  if f3 == nil then
    z = y
  end
  x, y, z = xint_field(x), xint_field(y), xint_field(z)
  if not (x and y and z) then
    return nil, err_state
  end
  return true, x, y, z
end

-- tw_fields of the HASH at key, read with one HGETALL; nil and WRONGTYPE
-- for another type.
local function tw_read(key, err_state, f1, f2, f3)
  local h = lib_read('HGETALL', key)
  if h == nil then
    return nil, WRONGTYPE
  end
  return tw_fields(h, err_state, f1, f2, f3)
end
