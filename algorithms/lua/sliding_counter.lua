-- sliding_counter: the twin of algorithms/sliding_counter.c (see its header
-- for the semantics). State: one HASH per key, start (the start of the
-- counted window, us since the epoch), count and prev, written when a
-- request passes with cost >= 1, with PEXPIRE the end of the window after
-- the current one. Times are microseconds; the model's nanoseconds are
-- exactly them times 1000, so its weights and tests come out the same.
--
-- Undo token: the start (us) of the window the check counted in. A refund
-- takes the cost back from that window's count while it is the stored one.

--#include xint

-- Error texts, one table: the function library has room for 200
-- top-level locals only.
local SC_ERR = {
  MAX = 'ERR sliding_counter max must be between 1 and 2^53 - 1',
  WINDOW = 'ERR sliding_counter window must be between 1 ms and 3650 days',
  STATE = 'ERR sliding_counter state is malformed (negative or too large field)',
}

-- ceil(prev * rem / w), at most prev (rem <= w).
local function sc_weighted(prev, rem, w)
  local p = prev * rem -- exact below 2^53; at or above it, so is the product
  if p < P53 then
    return lib_ceildiv(p, w)
  end
  local num = xint_add(xint_mul(xint_of(prev), xint_of(rem)), xint_of(w - 1))
  return xint_num((xint_divmod(num, w)))
end

-- The model's sc_retry() in nanoseconds (an xint): the least wait after
-- which a refused request of cost <= max passes, with count c, previous
-- prev, until_end = until us (a number or an xint) to the end of the
-- effective window.
local function sc_retry(max, w, c, prev, untl, cost)
  local wn = xint_mul(xint_of(w), XINT_1000)
  local un = xint_mul(type(untl) == 'number' and xint_of(untl) or untl,
                      XINT_1000)
  if xint_cmp(un, XINT_I64MAX) > 0 then
    un = XINT_I64MAX
  end
  local room1, room2 = (max - cost) - c, max - cost
  local f
  if room1 >= 0 and prev > 0 then
    -- Phase 1: prev fades in this window; the request fits once the time
    -- left in it is at most f.
    f = xint_divmod(xint_mul(xint_of(room1), wn), prev)
    if (#f > 1 or f[1] > 0) and xint_cmp(f, un) < 0 then
      return xint_sub(un, f)
    end
  end
  -- Phase 2: in the next window c is the previous count and fades.
  f = wn
  if c > 0 then
    f = xint_divmod(xint_mul(xint_of(room2), wn), c)
    if xint_cmp(f, wn) > 0 then
      f = wn
    end
  end
  f = xint_add(un, xint_sub(wn, f))
  if xint_cmp(f, XINT_I64MAX) > 0 then
    f = XINT_I64MAX
  end
  return f
end

-- Stores the counted window, expiring in ms (the end of the next one).
local function sc_commit(key, start, c, prev, ms)
  R_CALL('HSET', key, 'start', lib_str(start), 'count', lib_str(c),
         'prev', lib_str(prev))
  R_CALL('PEXPIRE', key, lib_str(ms))
end

-- The decision of cost at now on the stored state (have false: no key):
-- limited (boolean), remaining, retry and reset (reply values; retry
-- -1000000 when admitted), then the state to store when a check of cost
-- > 0 is admitted: start, count, prev and the expiry ms.
local function sc_core(max, w, have, s_start, s_count, s_prev, now, cost)
  -- Roll the stored window over to now's (a later one stays).
  local start, c, prev = now - math.fmod(now, w), 0, 0
  if have and s_start >= start then
    start, c, prev = s_start, s_count, s_prev
  elseif have and s_start >= start - w then
    prev = s_count
  end
  -- untl: a number while below 2^53 (small), else an xint.
  local untl, rem = start - now + w, w
  local small = untl < P53
  if not small then
    untl = xint_sum(start - now, w)
  elseif untl < w then
    rem = untl
  end
  local weighted = prev > 0 and sc_weighted(prev, rem, w) or 0
  -- Below 2^54: inexact only where it exceeds every max - cost.
  local est = c + weighted
  local limited, retry, remaining, reset, ms = false, -1000000, 0, 0, nil
  if cost > max then
    limited = true
  elseif est <= max - cost then
    c, est = c + cost, est + cost
  else
    limited = true
    retry = xint_out((xint_divmod(sc_retry(max, w, c, prev, untl, cost),
                                  1000)))
  end
  if est < max then
    remaining = max - est
  end
  if c > 0 then
    reset, ms = xint_dur_plus(untl, w, 0, not small)
  elseif prev > 0 then
    reset = xint_dur(untl, 0)
  end
  return limited, remaining, retry, reset, start, c, prev, ms
end

ALGO.sliding_counter = {
  decide = function(key, a1, a2, a3, a4, now, cost)
    local max, w = tw_window_args(a1, a2, SC_ERR.MAX, SC_ERR.WINDOW)
    if not max then
      return nil, w
    end
    local have, s_start, s_count, s_prev = tw_read(key, SC_ERR.STATE,
                                                   'start', 'count', 'prev')
    if have == nil then
      return nil, s_start
    end
    local limited, rem, retry, reset, start, c, prev, ms = sc_core(max, w,
      have, s_start, s_count, s_prev, now, cost)
    -- {limited, limit, remaining, retry, reset, undo}
    local e = {limited and 1 or 0, max, rem, retry, reset, ''}
    if not limited and cost > 0 then
      e[6] = lib_str(start)
      return false, e, 1, start, c, prev, ms
    end
    return limited, e
  end,

  commit = sc_commit,

  -- The parameters of `one`: max and the window in us, or nil.
  prep = function(a1, a2)
    return tw_window_args(a1, a2, SC_ERR.MAX, SC_ERR.WINDOW)
  end,

  -- decide and commit of a check of one real level, fused, as
  -- fixed_window's.
  one = function(key, h, max, w, now, cost, out, o)
    local have, s_start, s_count, s_prev = tw_fields(h, SC_ERR.STATE, 'start',
                                                     'count', 'prev')
    if have == nil then
      return false
    end
    local limited, rem, retry, reset, start, c, prev, ms = sc_core(max, w,
      have, s_start, s_count, s_prev, now, cost)
    local undo = not limited and cost > 0 and lib_str(start) or ''
    return LIM_fused_end(out, o, key, limited, max, rem, retry, reset, undo,
                         ms, 'start', start, 'count', c, 'prev', prev)
  end,

  -- LIMITER ADJUST (sliding_counter_adjust): delta (either sign) on the
  -- current window's count after the roll, as fixed_window's; the entry
  -- is a peek of cost 1 after it.
  adjust = function(key, a1, a2, a3, a4, now, delta)
    local max, w = tw_window_args(a1, a2, SC_ERR.MAX, SC_ERR.WINDOW)
    if not max then
      return nil, w
    end
    local have, s_start, s_count, s_prev = tw_read(key, SC_ERR.STATE,
                                                   'start', 'count', 'prev')
    if have == nil then
      return nil, s_start
    end
    local _, _, _, _, start, count, prev = sc_core(max, w, have, s_start,
                                                   s_count, s_prev, now, 0)
    local c = count
    if delta > 0 then
      c = count > P53 - 1 - delta and P53 - 1 or count + delta
      if c < count then
        c = count
      end
    elseif delta < 0 then
      c = count > -delta and count + delta or 0
    end
    if c ~= count then
      -- Expires as a check's write: the end of the next window, or of
      -- this one when nothing is counted in it.
      local untl = start - now + w
      if untl >= P53 then
        untl = xint_sum(start - now, w)
      end
      local _, ms
      if c > 0 then
        _, ms = xint_dur_plus(untl, w, 0, type(untl) ~= 'number')
      else
        _, ms = xint_dur(untl, 0)
      end
      sc_commit(key, start, c, prev, ms)
    end
    local limited, rem, retry, reset = sc_core(max, w, true, start, c, prev,
                                               now, 1)
    return {limited and 1 or 0, max, rem, retry, reset, ''}
  end,

  refund = function(key, a1, a2, a3, a4, now, cost, undo)
    local max, w = tw_window_args(a1, a2, SC_ERR.MAX, SC_ERR.WINDOW)
    if not max or cost <= 0 then
      return
    end
    local have, start, count, prev = tw_read(key, SC_ERR.STATE, 'start',
                                             'count', 'prev')
    if not have or lib_int(undo) ~= start then
      return
    end
    count = count > cost and count - cost or 0
    -- Nothing counted in now's own window nor before it is no key; any
    -- other window (a later one, or one of another length) holds its place.
    if count == 0 and prev == 0 and start == now - math.fmod(now, w) then
      R_CALL('DEL', key)
    else
      R_CALL('HSET', key, 'count', lib_str(count))
    end
  end,
}
