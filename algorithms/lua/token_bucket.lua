-- token_bucket: the twin of algorithms/token_bucket.c (see its header for
-- the semantics). State: one HASH per key, tokens (whole), frac (1e-15
-- tokens) and ts (refill credited up to here, microseconds), written when a
-- request passes with cost >= 1, with PEXPIRE the time until the bucket is
-- full again. Times are microseconds; the model's nanoseconds are exactly
-- them times 1000, so one unit of frac is still what 1 ns of refill at one
-- millionth of a token per second brings.
--
-- With a warm-up (the level's third and fourth parameters, warmup ms and
-- cold_factor; '0' or '' for none) the hash also keeps cold (ns), tokens
-- may be negative, and the check takes the general path (prep declines
-- it): see "Warm-up" below and token_bucket.h.
--
-- tokens below 0 are a debt (LIMITER ADJUST's `adjust`, a WAIT reservation
-- in tb_core: token_bucket.h "Debt"), read by the plain bucket too.
--
-- Undo token: the instant (us) at which the bucket this check stored is
-- full again. A refund gives the cost back (capped at full) unless the
-- stored refill point has reached that instant: by then the bucket was
-- full, or the key is a new one, and there is nothing left to give back.

--#include xint

local TB_FRAC_ONE = 1000000000000000 -- one token in frac units, 1e15
local TB_MAX_RATE = 1000000000000000 -- 1e9 tokens/s in millionths
-- Error texts, one table: the function library has room for 200
-- top-level locals only.
local TB_ERR = {
  CAPACITY = 'ERR token_bucket capacity must be between 1 and 2^53 - 1',
  RATE = 'ERR token_bucket refill_per_sec must be positive and at most 1e9, or inf',
  STATE = 'ERR token_bucket state is malformed (negative or out-of-range field)',
  WARMUP = 'ERR token_bucket warmup must be between 1 ms and 1 day',
  COLD = 'ERR token_bucket cold_factor must be an integer from 2 to 1000',
  WARM_INF = 'ERR token_bucket warmup needs a finite refill_per_sec',
  WARM_SPAN = 'ERR token_bucket warmup * refill_per_sec must be between 1 and 1e9 tokens',
}

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
    return nil, TB_ERR.CAPACITY
  end
  local rate = false
  if a2 ~= 'inf' and a2 ~= '9223372036854775807' then
    rate = lib_int(a2)
    if rate == nil or rate < 1 or rate > TB_MAX_RATE then
      return nil, TB_ERR.RATE
    end
  end
  M.a1, M.a2, M.cap, M.rate = a1, a2, cap, rate
  return cap, rate
end

-- The state in h, an HGETALL reply: true, tokens (below 0 for a debt:
-- LIMITER ADJUST, a WAIT reservation, a warm bucket's slope), frac, ts;
-- false for no key; or nil and the error.
local function tb_fields(h)
  local n = #h
  if n == 0 then
    return false
  end
  local tok, frac, ts
  for i = 1, n, 2 do
    local f = h[i]
    if f == 'tokens' then
      tok = lib_int(h[i + 1])
    elseif f == 'frac' then
      frac = xint_field(h[i + 1])
    elseif f == 'ts' then
      ts = xint_field(h[i + 1])
    end
  end
  if not (tok and frac and ts) or frac >= TB_FRAC_ONE then
    return nil, TB_ERR.STATE
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

-- The decision of cost at now on the stored state (have false: no key),
-- with a WAIT of `wait` us (nil or 0: none; token_bucket_decide_wait):
-- limited (boolean), remaining, retry and reset (reply values; retry
-- -1000000 when admitted), the undo token ('' when nothing is written),
-- then when it is not '' the state to store: tokens, frac, ts and the
-- expiry ms. A reservation is limited with its undo token: it writes.
local function tb_core(cap, rate, have, s_tok, s_frac, s_ts, now, cost, wait)
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
  local limited, retry, taken = false, -1000000, false
  if cost > cap then
    limited = true
  elseif tok >= cost then
    tok, taken = tok - cost, true
  else
    limited = true
    local us, x, big = tb_wait(rate, tok, frac, cost)
    retry = xint_dur_plus(us, gap, x, big)
    -- A WAIT reservation when due within the wait, to the ns (gap + us
    -- us and x ns against wait us).
    local t = wait and wait > 0 and us
    if t and big then
      t = xint_num(us) -- nil: far beyond any wait
    end
    t = t and gap + t
    if t and (t < wait or (t == wait and x == 0)) and
        cost <= tok + (P53 - 1 - cap) then
      tok, taken = tok - cost, true
    end
  end
  local rem = tok < 0 and 0 or tok
  if tok >= cap then
    return limited, rem, retry, 0, ''
  end
  local us, x, big = tb_wait(rate, tok, frac, cap)
  local reset, ms = xint_dur_plus(us, gap, x, big)
  if taken and cost > 0 then
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
    return limited, rem, retry, reset, undo, tok, frac, ts, ms
  end
  return limited, rem, retry, reset, ''
end

-- ---------------- Warm-up (token_bucket.h, "Warm-up") ----------------
-- The twin of the C model's warm-up: the cold is ns (0 .. warmup), the
-- tokens may be negative (a debt), and the stored permits, the slope's
-- extra and the cold a take costs are the model's floors and ceilings,
-- formed exactly (tbw_mad) where a product passes 2^53.

local TB_MICRO = 1000000

-- floor((a * b + c) / d) for integers a, b, c >= 0 below 2^53 and d > 0,
-- when the quotient is below 2^53.
local function tbw_mad(a, b, c, d)
  local p = a * b
  if p < P53 and p + c < P53 then
    return (lib_divmod(p + c, d))
  end
  local q = xint_divmod(xint_add(xint_mul(xint_of(a), xint_of(b)),
                                 xint_of(c)), d)
  return xint_num(q)
end

-- The warm-up of a3 (ms) and a4 (cold_factor, '0' or '': 3) for the rate
-- (false: inf): nil when a3 says none, a table {wns, f, thr, span, max},
-- or false and the error (the model's order). The last is kept (TB_WM).
local TB_WM = {}
local function tbw_args(rate, a3, a4)
  if a3 == nil or a3 == '' or a3 == '0' then
    return nil
  end
  local M = TB_WM
  if M.W and M.rate == rate and M.a3 == a3 and M.a4 == a4 then
    return M.W
  end
  local w = lib_int(a3)
  local f = (a4 == nil or a4 == '' or a4 == '0') and 3 or lib_int(a4)
  if w == nil or w < 1 or w > 86400000 then
    return false, TB_ERR.WARMUP
  end
  if f == nil or f < 2 or f > 1000 then
    return false, TB_ERR.COLD
  end
  if not rate then
    return false, TB_ERR.WARM_INF
  end
  local prod = xint_mul(xint_of(w), xint_of(rate))
  if xint_cmp(prod, xint_of(1e18)) > 0 then
    return false, TB_ERR.WARM_SPAN
  end
  local W = xint_num((xint_divmod(prod, 1000)))
  if W < TB_MICRO then
    return false, TB_ERR.WARM_SPAN
  end
  local thr = lib_divmod(W, 2)
  local span = lib_divmod(2 * W, 1 + f)
  local R = {wns = w * 1000000, f = f, thr = thr, span = span,
             max = thr + span}
  M.rate, M.a3, M.a4, M.W = rate, a3, a4, R
  return R
end

-- The warm state in h (HGETALL): true, tokens (may be negative), frac,
-- ts, cold (0 when missing: a key a plain bucket wrote); false for no
-- key; or nil and the error.
local function tbw_fields(h)
  local n = #h
  if n == 0 then
    return false
  end
  local tok, frac, ts, cold
  for i = 1, n, 2 do
    local f = h[i]
    if f == 'tokens' then
      tok = lib_int(h[i + 1])
    elseif f == 'frac' then
      frac = xint_field(h[i + 1])
    elseif f == 'ts' then
      ts = xint_field(h[i + 1])
    elseif f == 'cold' then
      cold = xint_field(h[i + 1]) or -1
    end
  end
  cold = cold or 0
  if not (tok and frac and ts) or cold < 0 or frac >= TB_FRAC_ONE then
    return nil, TB_ERR.STATE
  end
  return true, tok, frac, ts, cold
end

-- What taking k millionths of a token from s stored permits costs beyond
-- k, split as whole tokens and millionths (the model's tb_extra).
local function tbw_extra(W, s, k)
  if s <= W.thr then
    return 0, 0
  end
  local a = s - k
  if a < W.thr then
    a = W.thr
  end
  local len, sum, d = s - a, s + a - 2 * W.thr, 2 * W.span
  local lf = len * (W.f - 1)
  local q
  if lf < P53 and lf * sum < P53 then
    q = lib_divmod(lf * sum, d)
    return lib_divmod(q, TB_MICRO)
  end
  q = xint_divmod(xint_mul(xint_mul(xint_of(len), xint_of(W.f - 1)),
                           xint_of(sum)), d)
  local t, r = xint_divmod(q, TB_MICRO)
  return xint_num(t), r
end

-- The cold at now: the stored one, grown by the time since the stored
-- level was full (in ns, from us times and tb_wait's us and ns).
local function tbw_cold(cap, rate, W, have, s_tok, s_frac, s_ts, s_cold, now)
  if not have then
    return W.wns
  end
  local c = s_cold > W.wns and W.wns or s_cold
  local d, x = now - s_ts, 0
  if s_tok < cap then
    local us, xx, big = tb_wait(rate, s_tok, s_frac, cap)
    if big then
      -- An xint (tb_wait's route for large products), not always large.
      us = xint_num(us)
      if not us then
        return c
      end
    end
    d, x = d - us, xx
  end
  if d <= 0 then
    return c
  end
  if d > 100000000000 then
    return W.wns
  end
  local e = d * 1000 - x
  if e >= W.wns - c then
    return W.wns
  end
  return c + e
end

-- The expiry (ms) of a stored warm bucket: the wait until full (us, x,
-- big as tb_wait gives it) plus gap, plus the time to cool from c.
local function tbw_expiry(W, us, x, big, gap, c)
  local hu, hx = lib_divmod(W.wns - c, 1000)
  local x2 = x + hx
  if x2 >= 1000 then
    x2, hu = x2 - 1000, hu + 1
  end
  local _, ms = xint_dur_plus(big and xint_sum(us, hu) or us + hu, gap, x2,
                              big)
  return ms
end

-- tb_core with a warm-up W: the same results, and the undo token
-- "<full>:<tokens>:<millionths>:<cold>" (what the check paid and took;
-- full as tb_core's), then tokens, frac, ts, cold and the expiry ms.
local function tbw_core(cap, rate, W, have, s_tok, s_frac, s_ts, s_cold,
                        now, cost, wait)
  local c = tbw_cold(cap, rate, W, have, s_tok, s_frac, s_ts, s_cold, now)
  local tok, frac, ts, gap = tb_level(cap, rate, have, s_tok, s_frac, s_ts,
                                      now)
  local limited, retry = false, -1000000
  local et, ef, took, taken = 0, 0, 0, false
  if cost > cap then
    limited = true
  else
    if tok < cost then
      limited = true
      local us, x, big = tb_wait(rate, tok, frac, cost)
      retry = xint_dur_plus(us, gap, x, big)
      local t = wait and wait > 0 and us
      if t and big then
        t = xint_num(us)
      end
      t = t and gap + t
      taken = t and (t < wait or (t == wait and x == 0)) and
        cost <= tok + (P53 - 1 - cap) or false
    else
      taken = true
    end
  end
  if taken then
    tok = tok - cost
    if cost > 0 then
      local s = tbw_mad(c, W.max, 0, W.wns)
      local k = cost > lib_divmod(s, TB_MICRO) and s or cost * TB_MICRO
      et, ef = tbw_extra(W, s, k)
      took = tbw_mad(k, W.wns, W.max - 1, W.max)
      c = c - took
      tok = tok - et
      frac = frac - ef * 1000000000
      if frac < 0 then
        frac, tok = frac + TB_FRAC_ONE, tok - 1
      end
    end
  end
  local rem = tok < 0 and 0 or tok
  if tok >= cap then
    return limited, rem, retry, 0, ''
  end
  local us, x, big = tb_wait(rate, tok, frac, cap)
  local reset = xint_dur_plus(us, gap, x, big)
  if taken and cost > 0 then
    local up = x > 0 and 1 or 0
    local full = not big and us + up + ts
    if full and full < P53 then
      full = lib_str(full)
    else
      full = xint_sum(xint_sum(us, up), ts)
      full = type(full) == 'number' and lib_str(full) or xint_str(full)
    end
    local undo = full .. ':' .. lib_str(cost + et) .. ':' .. lib_str(ef) ..
      ':' .. lib_str(took)
    return limited, rem, retry, reset, undo, tok, frac, ts, c,
      tbw_expiry(W, us, x, big, gap, c)
  end
  return limited, rem, retry, reset, ''
end

-- Stores a warm bucket.
local function tbw_store(key, tok, frac, ts, c, ms)
  R_CALL('HSET', key, 'tokens', lib_str(tok), 'frac', lib_str(frac),
         'ts', lib_str(ts), 'cold', lib_str(c))
  R_CALL('PEXPIRE', key, lib_str(ms))
end

-- The refund of a warm check: the tokens it paid and the cold it took
-- come back (capped at full and at the warm-up), unless the stored
-- refill point has reached the instant the check's bucket was full.
local function tbw_refund(key, cap, rate, W, now, undo)
  local f1, f2, f3, f4 = string.match(undo, '^(%d+):(%d+):(%d+):(%d+)$')
  local pt, pm, took = lib_int(f2), lib_int(f3), lib_int(f4)
  if not (f1 and pt and pm and took) then
    return
  end
  local h = lib_read('HGETALL', key)
  if h == nil then
    return
  end
  local have, s_tok, s_frac, s_ts, s_cold = tbw_fields(h)
  local full = lib_int(f1)
  if not have or (full and s_ts >= full) then
    return
  end
  local c = tbw_cold(cap, rate, W, true, s_tok, s_frac, s_ts, s_cold, now)
  local tok, frac, ts, gap = tb_level(cap, rate, true, s_tok, s_frac, s_ts,
                                      now)
  c = c + took > W.wns and W.wns or c + took
  tok, frac = tok + pt, frac + pm * 1000000000
  if frac >= TB_FRAC_ONE then
    tok, frac = tok + 1, frac - TB_FRAC_ONE
  end
  if tok >= cap then
    tok, frac = cap, 0
    if c >= W.wns and gap == 0 then
      R_CALL('DEL', key)
      return
    end
  end
  local us, x, big = 0, 0, false
  if tok < cap then
    us, x, big = tb_wait(rate, tok, frac, cap)
  end
  tbw_store(key, tok, frac, ts, c, tbw_expiry(W, us, x, big, gap, c))
end

ALGO.token_bucket = {
  -- LIMITER ADJUST (token_bucket_adjust): delta > 0 takes delta tokens,
  -- never refused (a debt, at most 2^53 - 1 below full), delta < 0 gives
  -- -delta back (up to full); a warm bucket's cold is as time made it. The
  -- level is the one at now; the state is written unless nothing changes,
  -- expiring when full again (and cold again) and in 1 ms at least. Returns
  -- the entry of a peek of cost 1 after it, or nil and the error.
  -- (A field, not a local: the library's main function has room for
  -- few more locals, Lua's 200.)
  adjust = function(key, a1, a2, a3, a4, now, delta)
    local cap, rate = tb_args(a1, a2)
    if not cap then
      return nil, rate
    end
    local W, werr = tbw_args(rate, a3, a4)
    if W == false then
      return nil, werr
    end
    local h = lib_read('HGETALL', key)
    if h == nil then
      return nil, WRONGTYPE
    end
    local have, s_tok, s_frac, s_ts, s_cold
    if W then
      have, s_tok, s_frac, s_ts, s_cold = tbw_fields(h)
    else
      have, s_tok, s_frac, s_ts = tb_fields(h)
    end
    if have == nil then
      return nil, s_tok
    end
    local tok, frac, ts, gap, c = cap, 0, now, 0, nil
    if rate then
      tok, frac, ts, gap = tb_level(cap, rate, have, s_tok, s_frac, s_ts, now)
      if W then
        c = tbw_cold(cap, rate, W, have, s_tok, s_frac, s_ts, s_cold, now)
      end
    end
    if rate and delta ~= 0 and (delta > 0 or tok < cap) then
      local floor = cap - (P53 - 1)
      if delta > 0 then
        if delta >= tok - floor then
          if tok > floor then
            tok, frac = floor, 0
          end
        else
          tok = tok - delta
        end
      elseif -delta >= cap - tok then
        tok, frac = cap, 0
      else
        tok = tok - delta
      end
      -- Until full again; a full bucket credited ahead of the clock
      -- (gap) until the clock reaches it.
      local us, x, big = 0, 0, false
      if tok < cap then
        us, x, big = tb_wait(rate, tok, frac, cap)
      end
      local ms
      if W then
        ms = tbw_expiry(W, us, x, big, gap, c)
      else
        local _
        _, ms = xint_dur_plus(us, gap, x, big)
      end
      if ms < 1 then
        ms = 1
      end
      if W then
        tbw_store(key, tok, frac, ts, c, ms)
      else
        tb_store(key, tok, frac, ts, ms)
      end
      have, s_tok, s_frac, s_ts, s_cold = true, tok, frac, ts, c
    end
    local limited, rem, retry, reset
    if W then
      limited, rem, retry, reset = tbw_core(cap, rate, W, have, s_tok, s_frac,
                                            s_ts, s_cold, now, 1)
    else
      limited, rem, retry, reset = tb_core(cap, rate, have, s_tok, s_frac, s_ts,
                                           now, 1)
    end
    return {limited and 1 or 0, cap, rem, retry, reset, ''}
  end,


  -- wait: a CHECK ... WAIT's, in us (limiter.lua's header), or nil.
  decide = function(key, a1, a2, a3, a4, now, cost, _, _, wait)
    local cap, rate = tb_args(a1, a2)
    if not cap then
      return nil, rate
    end
    local W, werr = tbw_args(rate, a3, a4)
    if W == false then
      return nil, werr
    end
    if W then
      local h = lib_read('HGETALL', key)
      if h == nil then
        return nil, WRONGTYPE
      end
      local have, s_tok, s_frac, s_ts, s_cold = tbw_fields(h)
      if have == nil then
        return nil, s_tok
      end
      local limited, rem, retry, reset, undo, tok, frac, ts, c, ms =
        tbw_core(cap, rate, W, have, s_tok, s_frac, s_ts, s_cold, now, cost,
                 wait)
      local e = {limited and 1 or 0, cap, rem, retry, reset, undo}
      if undo ~= '' then
        return false, e, 1, tok, frac, ts, ms, c
      end
      return limited, e
    end
    local have, s_tok, s_frac, s_ts = tb_read(key)
    if have == nil then
      return nil, s_tok
    end
    local limited, rem, retry, reset, undo, tok, frac, ts, ms = tb_core(cap,
      rate, have, s_tok, s_frac, s_ts, now, cost, wait)
    -- {limited, limit, remaining, retry, reset, undo}
    local e = {limited and 1 or 0, cap, rem, retry, reset, undo}
    if undo ~= '' then
      return false, e, 1, tok, frac, ts, ms
    end
    return limited, e
  end,

  -- The parameters of `one`: capacity and rate (false: inf), or nil
  -- (a warm-up takes the general path).
  prep = function(a1, a2, a3)
    if a3 ~= nil and a3 ~= '' and a3 ~= '0' then
      return nil
    end
    return tb_args(a1, a2)
  end,

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

  -- tokens, frac, ts, ms, and a warm bucket's cold.
  commit = function(key, tok, frac, ts, ms, c)
    if c then
      tbw_store(key, tok, frac, ts, c, ms)
    else
      tb_store(key, tok, frac, ts, ms)
    end
  end,

  refund = function(key, a1, a2, a3, a4, now, cost, undo)
    local cap, rate = tb_args(a1, a2)
    if not cap or not rate or cost <= 0 then
      return
    end
    local W = tbw_args(rate, a3, a4)
    if W then
      return tbw_refund(key, cap, rate, W, now, undo)
    end
    if W == false or not string.find(undo, '^%d+$') then
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
