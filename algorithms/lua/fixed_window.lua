-- fixed_window: the twin of algorithms/fixed_window.c (see its header for
-- the semantics). State: one HASH per key, start (the window's start, us
-- since the epoch) and count, written when a request passes with cost >= 1,
-- with PEXPIRE the time until the window ends. Times are microseconds; the
-- model's nanoseconds are exactly them times 1000.
--
-- Undo token: the start (us) of the window the check counted in. A refund
-- takes the cost back from that window while it is the stored one.

--#include xint

local FW_ERR_MAX = 'ERR fixed_window max must be between 1 and 2^53 - 1'
local FW_ERR_WINDOW = 'ERR fixed_window window must be between 1 ms and 3650 days'
local FW_ERR_STATE = 'ERR fixed_window state is malformed (negative start or count)'

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
  local start, count = now - math.fmod(now, w), 0
  if have and s_start >= start then
    -- The current window, or a later one when the clock is behind.
    start, count = s_start, s_count
  end
  local untl, ms = xint_dur_plus(start - now, w, 0, false)
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
    local max, w = tw_window_args(a1, a2, FW_ERR_MAX, FW_ERR_WINDOW)
    if not max then
      return nil, w
    end
    local have, s_start, s_count = tw_read(key, FW_ERR_STATE, 'start',
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
  prep = function(a1, a2)
    return tw_window_args(a1, a2, FW_ERR_MAX, FW_ERR_WINDOW)
  end,

  -- decide and commit of a check of one real level, fused (limiter.lua,
  -- which reads h, the key's HGETALL); the reply and the write through
  -- LIM_fused_end.
  one = function(key, h, max, w, now, cost, out, o)
    local have, s_start, s_count = tw_fields(h, FW_ERR_STATE, 'start',
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

  refund = function(key, a1, a2, a3, a4, now, cost, undo)
    local max, w = tw_window_args(a1, a2, FW_ERR_MAX, FW_ERR_WINDOW)
    if not max or cost <= 0 then
      return
    end
    local have, start, count = tw_read(key, FW_ERR_STATE, 'start', 'count')
    if not have or lib_int(undo) ~= start then
      return
    end
    count = count > cost and count - cost or 0
    -- Nothing counted in now's own window is no key; any other window
    -- (a later one, or one of another length) still holds its place.
    if count == 0 and start == now - math.fmod(now, w) then
      R_CALL('DEL', key)
    else
      R_CALL('HSET', key, 'count', lib_str(count))
    end
  end,
}
