-- fixed_window: the twin of algorithms/fixed_window.c (see its header for
-- the semantics). State: one HASH per key, start (the window's start, us
-- since the epoch) and count, written when a request passes with cost >= 1,
-- with PEXPIRE the time until the window ends. Times are microseconds; the
-- model's nanoseconds are exactly them times 1000.
--
-- Parameters: max, the window (ms; or -1 day, -2 week, -3 month: a
-- calendar window) and, for a calendar window, its UTC offset in minutes
-- ('' for +00:00). A calendar window is the model's arithmetic on whole
-- days (Redis's Lua has no os.date, and every node must agree): now is
-- split into days and the time of day, the offset added to the latter,
-- and the date found by civil-from-days over 400-year eras. The parsed
-- window is one number, negative for a calendar one (-(unit + 4 *
-- (offset + 840))), so the fused check's two parameters carry it.
--
-- Undo token: the start (us) of the window the check counted in. A refund
-- takes the cost back from that window while it is the stored one.

--#include xint

-- Error texts, one table: the function library has room for 200
-- top-level locals only.
local FW_ERR = {
  MAX = 'ERR fixed_window max must be between 1 and 2^53 - 1',
  WINDOW = 'ERR fixed_window window must be between 1 ms and 3650 days',
  STATE = 'ERR fixed_window state is malformed (negative start or count)',
  TZ = 'ERR fixed_window tz must be between -14:00 and +14:00 (-840 to 840 minutes)',
}
local FW_DAY = 86400000000 -- us
-- Days of the months from March (February's 28 is decided apart).
local FW_MDAYS = {31, 30, 31, 30, 31, 31, 30, 31, 30, 31, 31, 28}

-- max and the window (us, or a calendar window's negative code), or nil
-- and the error (the C model's order). The last success is kept (FW_M).
local FW_M = {}
local function fw_args(a1, a2, a3)
  local M = FW_M
  if M.max and M.a1 == a1 and M.a2 == a2 and M.a3 == a3 then
    return M.max, M.w
  end
  local unit = lib_int(a2)
  if unit == nil or unit >= 0 or unit < -3 then
    local max, w = tw_window_args(a1, a2, FW_ERR.MAX, FW_ERR.WINDOW)
    if max then
      M.a1, M.a2, M.a3, M.max, M.w = a1, a2, a3, max, w
    end
    return max, w
  end
  local max = lib_int(a1)
  if max == nil or max < 1 then
    return nil, FW_ERR.MAX
  end
  local tz = 0
  if a3 and a3 ~= '' then
    tz = lib_int(a3)
  end
  if tz == nil or tz < -840 or tz > 840 then
    return nil, FW_ERR.TZ
  end
  M.a1, M.a2, M.a3, M.max, M.w = a1, a2, a3, max, unit - 4 * (tz + 840)
  return max, M.w
end

-- The calendar window (w < 0, fw_args's code) holding t (us, 0 <= t <
-- 2^53): the us since it started and until it ends.
local function fw_cal(w, t)
  local c = -w
  local unit = math.fmod(c, 4)
  local tod = math.fmod(t, FW_DAY)
  local day = (t - tod) / FW_DAY
  tod = tod + ((c - unit) / 4 - 840) * 60000000
  if tod < 0 then
    day, tod = day - 1, tod + FW_DAY
  elseif tod >= FW_DAY then
    day, tod = day + 1, tod - FW_DAY
  end
  local first, len = day, 1
  if unit == 2 then
    -- 1970-01-01 was a Thursday, 3 days after a Monday (day >= -1).
    first, len = day - math.fmod(day + 3, 7), 7
  elseif unit == 3 then
    -- Days from 0000-03-01; years run from March, so February ends one.
    local z = day + 719468
    local doe = math.fmod(z, 146097)
    local era = (z - doe) / 146097
    local yoe = math.floor((doe - math.floor(doe / 1460) +
      math.floor(doe / 36524) - math.floor(doe / 146096)) / 365)
    local doy = doe - (365 * yoe + math.floor(yoe / 4) -
      math.floor(yoe / 100))
    local mp = math.floor((5 * doy + 2) / 153)
    first = day - (doy - math.floor((153 * mp + 2) / 5))
    if mp == 11 then
      local y = era * 400 + yoe + 1
      local leap = math.fmod(y, 4) == 0 and (math.fmod(y, 100) ~= 0 or
        math.fmod(y, 400) == 0)
      len = leap and 29 or 28
    else
      len = FW_MDAYS[mp + 1]
    end
  end
  return (day - first) * FW_DAY + tod, (first + len - day) * FW_DAY - tod
end

-- The start of now's window (a calendar window that began before the
-- epoch starts at 0).
local function fw_start(w, now)
  if w > 0 then
    return now - math.fmod(now, w)
  end
  local since = fw_cal(w, now)
  return now > since and now - since or 0
end

-- Stores the window start and count, expiring in ms (its end).
local function fw_commit(key, start, count, ms)
  R_CALL('HSET', key, 'start', lib_str(start), 'count', lib_str(count))
  R_CALL('PEXPIRE', key, lib_str(ms))
end

-- The decision of cost at now on the stored state (have false: no key):
-- limited (boolean), remaining, retry and reset (reply values; retry
-- -1000000 when admitted), then the state to store when a check of cost
-- > 0 is admitted: start, count and the expiry ms.
local function fw_core(max, w, have, s_start, s_count, now, cost)
  local start, count = fw_start(w, now), 0
  if have and s_start >= start then
    -- The current window, or a later one when the clock is behind.
    start, count = s_start, s_count
  end
  -- The end: start + window, or the end of the calendar window of start.
  local len = w
  if w < 0 then
    local _
    _, len = fw_cal(w, start)
  end
  local untl, ms = xint_dur_plus(start - now, len, 0, false)
  local limited, retry = false, -1000000
  if cost > max then
    limited = true
  elseif count <= max - cost then
    count = count + cost
  else
    limited, retry = true, untl
  end
  return limited, count < max and max - count or 0, retry,
    count > 0 and untl or 0, start, count, ms
end

ALGO.fixed_window = {
  decide = function(key, a1, a2, a3, a4, now, cost)
    local max, w = fw_args(a1, a2, a3)
    if not max then
      return nil, w
    end
    local have, s_start, s_count = tw_read(key, FW_ERR.STATE, 'start',
                                           'count')
    if have == nil then
      return nil, s_start
    end
    local limited, rem, retry, reset, start, count, ms = fw_core(max, w,
      have, s_start, s_count, now, cost)
    -- {limited, limit, remaining, retry, reset, undo}
    local e = {limited and 1 or 0, max, rem, retry, reset, ''}
    if not limited and cost > 0 then
      e[6] = lib_str(start)
      return false, e, 1, start, count, ms
    end
    return limited, e
  end,

  commit = fw_commit,

  -- The parameters of `one`: max and the window in us, or nil.
  prep = function(a1, a2, a3)
    return fw_args(a1, a2, a3)
  end,

  -- decide and commit of a check of one real level, fused (limiter.lua,
  -- which reads h, the key's HGETALL); the reply and the write through
  -- LIM_fused_end.
  one = function(key, h, max, w, now, cost, out, o)
    local have, s_start, s_count = tw_fields(h, FW_ERR.STATE, 'start',
                                             'count')
    if have == nil then
      return false
    end
    local limited, rem, retry, reset, start, count, ms = fw_core(max, w,
      have, s_start, s_count, now, cost)
    local undo = not limited and cost > 0 and lib_str(start) or ''
    return LIM_fused_end(out, o, key, limited, max, rem, retry, reset, undo,
                         ms, 'start', start, 'count', count)
  end,

  -- LIMITER ADJUST (fixed_window_adjust): delta (either sign) on the
  -- effective window's count, saturating at 2^53 - 1, floored at 0,
  -- written (with the window's expiry) when the count changes. The entry
  -- is a peek of cost 1 after it.
  adjust = function(key, a1, a2, a3, a4, now, delta)
    local max, w = fw_args(a1, a2, a3)
    if not max then
      return nil, w
    end
    local have, s_start, s_count = tw_read(key, FW_ERR.STATE, 'start',
                                           'count')
    if have == nil then
      return nil, s_start
    end
    local _, _, _, _, start, count, ms = fw_core(max, w, have, s_start,
                                                 s_count, now, 0)
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
      fw_commit(key, start, c, ms)
    end
    local limited, rem, retry, reset = fw_core(max, w, true, start, c, now, 1)
    return {limited and 1 or 0, max, rem, retry, reset, ''}
  end,

  refund = function(key, a1, a2, a3, a4, now, cost, undo)
    local max, w = fw_args(a1, a2, a3)
    if not max or cost <= 0 then
      return
    end
    local have, start, count = tw_read(key, FW_ERR.STATE, 'start', 'count')
    if not have or lib_int(undo) ~= start then
      return
    end
    count = count > cost and count - cost or 0
    -- Nothing counted in now's own window is no key; any other window
    -- (a later one, or one of another length) still holds its place.
    if count == 0 and start == fw_start(w, now) then
      R_CALL('DEL', key)
    else
      R_CALL('HSET', key, 'count', lib_str(count))
    end
  end,
}
