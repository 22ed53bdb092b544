-- token_bucket: the twin of algorithms/token_bucket.c (see its header for
-- the semantics). State: one HASH per key, tokens (whole), frac (1e-15
-- tokens) and ts (refill credited up to here, microseconds), written when a
-- request passes with cost >= 1, with PEXPIRE the time until the bucket is
-- full again. Times are microseconds; the model's nanoseconds are exactly
-- them times 1000, so one unit of frac is still what 1 ns of refill at one
-- millionth of a token per second brings.
--
-- Undo token: the instant (us) at which the bucket this check stored is
-- full again. A refund gives the cost back (capped at full) unless the
-- stored refill point has reached that instant: by then the bucket was
-- full, or the key is a new one, and there is nothing left to give back.

--#include xint

local TB_FRAC_ONE = 1000000000000000 -- one token in frac units, 1e15
local TB_MAX_RATE = 1000000000000000 -- 1e9 tokens/s in millionths
local TB_ERR_CAPACITY = 'ERR token_bucket capacity must be between 1 and 2^53 - 1'
local TB_ERR_RATE = 'ERR token_bucket refill_per_sec must be positive and at most 1e9, or inf'
local TB_ERR_STATE = 'ERR token_bucket state is malformed (negative or out-of-range field)'

-- capacity and rate (millionths of a token per second, false for inf), or
-- nil and the error. The last success is kept (TB_M), as lib.lua's header
-- says of parameters.
local TB_M = {}
local function tb_args(a1, a2)
  local M = TB_M
  if M.cap and M.a1 == a1 and M.a2 == a2 then
    return M.cap, M.rate
  end
  local cap = lib_int(a1)
  if cap == nil or cap < 1 then
    return nil, TB_ERR_CAPACITY
  end
  local rate = false
  if a2 ~= 'inf' and a2 ~= '9223372036854775807' then
    rate = lib_int(a2)
    if rate == nil or rate < 1 or rate > TB_MAX_RATE then
      return nil, TB_ERR_RATE
    end
  end
  M.a1, M.a2, M.cap, M.rate = a1, a2, cap, rate
  return cap, rate
end

-- The state in h, an HGETALL reply (tw_fields): true, tokens, frac, ts;
-- false for no key; or nil and the error.
local function tb_fields(h)
  local have, tok, frac, ts = tw_fields(h, TB_ERR_STATE, 'tokens', 'frac',
                                        'ts')
  if not have then
    return have, tok
  end
  if frac >= TB_FRAC_ONE then
    return nil, TB_ERR_STATE
  end
  return true, tok, frac, ts
end

-- The stored state (tb_fields), or nil and WRONGTYPE. One HGETALL.
local function tb_read(key)
  local h = lib_read('HGETALL', key)
  if h == nil then
    return nil, WRONGTYPE
  end
  return tb_fields(h)
end

-- Credits e > 0 us of refill to the level tok + frac / 1e15 (capped at
-- cap, where frac is 0). The refill is e * rate * 1000 frac units; e * rate
-- (up to 2^103) is formed from 1e6 halves, none of whose products reaches
-- 2^53.
local function tb_refill(cap, rate, tok, frac, e)
  if tok >= cap then
    return tok, frac
  end
  local e1, e0 = lib_divmod(e, 1000000)
  local r1, r0 = lib_divmod(rate, 1000000)
  local hh = e1 * r1
  if hh >= P53 then
    return cap, 0
  end
  local a1, a0 = lib_divmod(e1 * r0, 1000000)
  local b1, b0 = lib_divmod(e0 * r1, 1000000)
  local lh, low = lib_divmod((a0 + b0) * 1000000 + e0 * r0, 1000000000000)
  -- e * rate = ph * 1e12 + low, so the refill is ph * 1e15 + low * 1000.
  local ph = hh + a1 + b1 + lh
  local g, rem = lib_divmod(low * 1000 + frac, TB_FRAC_ONE)
  if ph + g >= cap - tok then
    return cap, 0
  end
  return tok + ph + g, rem
end

-- The level at now: tok, frac, the refill point ts and the gap (us) by
-- which the clock is behind it (token_bucket_decide's first half); have,
-- s_tok, s_frac, s_ts: the stored state (have false: no key).
local function tb_level(cap, rate, have, s_tok, s_frac, s_ts, now)
  local tok, frac, ts
  if not have or s_tok >= cap then
    tok, frac = cap, 0
    ts = (not have or s_ts < now) and now or s_ts
  else
    tok, frac, ts = s_tok, s_frac, s_ts
  end
  if now < ts then
    return tok, frac, ts, ts - now
  end
  if now > ts then
    tok, frac = tb_refill(cap, rate, tok, frac, now - ts)
  end
  return tok, frac, now, 0
end

-- The refill time until the level reaches n > tok whole tokens,
-- ceil(((n - tok) * 1e15 - frac) / rate) ns, as us = floor(ns / 1000) (a
-- number below 2^53, else an xint), x = ns mod 1000 and whether us is an
-- xint. With k = n - tok - 1 and 1e15 = q1 * rate + r1 the quotient is
-- k * q1 + floor((k * r1 + tail) / rate), in plain numbers whenever those
-- stay below 2^53.
local function tb_wait(rate, tok, frac, n)
  local k = n - tok - 1
  local tail = (TB_FRAC_ONE - frac) + (rate - 1) -- < 2e15
  local q1, r1 = lib_divmod(TB_FRAC_ONE, rate)
  local kr = k * r1
  if kr < 7e15 then
    local q = k * q1 + lib_divmod(kr + tail, rate)
    if q < P53 then
      local us, x = lib_divmod(q, 1000)
      return us, x, false
    end
  end
  local num = xint_add(xint_mul(xint_of(k), XINT_FRAC_ONE), xint_of(tail))
  local us, x = xint_divmod((xint_divmod(num, rate)), 1000)
  return us, x, true
end

-- Duration (reply value, expiry ms) of gap us plus the wait to n tokens.
local function tb_dur(rate, tok, frac, n, gap)
  local us, x, big = tb_wait(rate, tok, frac, n)
  return xint_dur_plus(us, gap, x, big)
end

-- Stores the level tok + frac / 1e15 credited up to ts, expiring in ms.
local function tb_store(key, tok, frac, ts, ms)
  R_CALL('HSET', key, 'tokens', lib_str(tok), 'frac', lib_str(frac),
         'ts', lib_str(ts))
  R_CALL('PEXPIRE', key, lib_str(ms))
end

-- What a check of cost 1 .. cap finds in a full bucket (no key, or one
-- full and credited up to now at most) depends on cap, rate and cost
-- alone, but now: the tokens left (cap - cost), the time to full again
-- (reset, the reply value, and ms, the expiry) and wait, the us from now
-- to that instant (rounded up, the undo token's offset). Kept for the last
-- cap, rate and cost (TB_N): most checks of a batch are of new identities
-- under one limit, and tb_wait and xint_dur_plus cost Redis about 8,000
-- instructions a check. nil when wait is no plain number (a rate so slow
-- that it passes 2^53 us).
local TB_N = {}
local function tb_full(cap, rate, cost)
  local N = TB_N
  if N.cap ~= cap or N.rate ~= rate or N.cost ~= cost then
    -- All made before any is kept: an entry is never half of one limit.
    local us, x, big = tb_wait(rate, cap - cost, 0, cap)
    local reset, ms
    if not big then
      reset, ms = xint_dur_plus(us, 0, x, false)
    end
    N.cap, N.rate, N.cost, N.reset, N.ms = cap, rate, cost, reset, ms
    N.wait = not big and us + (x > 0 and 1 or 0)
  end
  return N.wait and N
end

-- The decision of cost at now on the stored state (have false: no key):
-- limited (boolean), remaining, retry and reset (reply values; retry
-- -1000000 when admitted), the undo token ('' when nothing is written),
-- then when it is not '' the state to store: tokens, frac, ts and the
-- expiry ms.
local function tb_core(cap, rate, have, s_tok, s_frac, s_ts, now, cost)
  if rate and cost >= 1 and cost <= cap and
      (not have or (s_tok >= cap and s_ts <= now)) then
    local N = tb_full(cap, rate, cost)
    if N and now + N.wait < P53 then
      local tok = cap - cost
      return false, tok, -1000000, N.reset, lib_str(now + N.wait), tok, 0,
        now, N.ms
    end
  end
  if not rate then
    return false, cap, -1000000, 0, ''
  end
  local tok, frac, ts, gap = tb_level(cap, rate, have, s_tok, s_frac, s_ts,
                                      now)
  local limited, retry = false, -1000000
  if cost > cap then
    limited = true
  elseif tok >= cost then
    tok = tok - cost
  else
    limited = true
    retry = tb_dur(rate, tok, frac, cost, gap)
  end
  if tok >= cap then
    return limited, tok, retry, 0, ''
  end
  local us, x, big = tb_wait(rate, tok, frac, cap)
  local reset, ms = xint_dur_plus(us, gap, x, big)
  if not limited and cost > 0 then
    -- The instant the bucket is full again: ts + ceil(wait).
    local up = x > 0 and 1 or 0
    local full = not big and us + up + ts
    local undo
    if full and full < P53 then
      undo = lib_str(full)
    else
      us = xint_sum(xint_sum(us, up), ts)
      undo = type(us) == 'number' and lib_str(us) or xint_str(us)
    end
    return false, tok, retry, reset, undo, tok, frac, ts, ms
  end
  return limited, tok, retry, reset, ''
end

ALGO.token_bucket = {
  decide = function(key, a1, a2, a3, a4, now, cost)
    local cap, rate = tb_args(a1, a2)
    if not cap then
      return nil, rate
    end
    local have, s_tok, s_frac, s_ts = tb_read(key)
    if have == nil then
      return nil, s_tok
    end
    local limited, rem, retry, reset, undo, tok, frac, ts, ms = tb_core(cap,
      rate, have, s_tok, s_frac, s_ts, now, cost)
    -- {limited, limit, remaining, retry, reset, undo}
    local e = {limited and 1 or 0, cap, rem, retry, reset, undo}
    if undo ~= '' then
      return false, e, 1, tok, frac, ts, ms
    end
    return limited, e
  end,

  -- The parameters of `one`: capacity and rate (false: inf), or nil.
  prep = tb_args,

  -- decide and commit of a check of one real level, fused, as
  -- fixed_window's.
  one = function(key, h, cap, rate, now, cost, out, o)
    local have, s_tok, s_frac, s_ts = tb_fields(h)
    if have == nil then
      return false
    end
    local limited, rem, retry, reset, undo, tok, frac, ts, ms = tb_core(cap,
      rate, have, s_tok, s_frac, s_ts, now, cost)
    return LIM_fused_end(out, o, key, limited, cap, rem, retry, reset, undo,
                         ms, 'tokens', tok, 'frac', frac, 'ts', ts)
  end,

  commit = tb_store,

  refund = function(key, a1, a2, a3, a4, now, cost, undo)
    local cap, rate = tb_args(a1, a2)
    if not cap or not rate or cost <= 0 or not string.find(undo, '^%d+$') then
      return
    end
    local have, s_tok, s_frac, s_ts = tb_read(key)
    local full = lib_int(undo) -- nil: beyond any stored time
    if not have or (full and s_ts >= full) then
      return
    end
    local tok, frac, ts, gap = tb_level(cap, rate, true, s_tok, s_frac, s_ts,
                                        now)
    tok = tok + cost
    if tok < cap then
      local _, ms = tb_dur(rate, tok, frac, cap, gap)
      tb_store(key, tok, frac, ts, ms)
    elseif gap > 0 then
      -- Full, but the clock is behind ts: that still differs from no key.
      tb_store(key, cap, 0, ts, lib_ceildiv(gap, 1000))
    else
      R_CALL('DEL', key)
    end
  end,
}
