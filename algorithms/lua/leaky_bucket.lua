-- leaky_bucket: the Lua twin of algorithms/leaky_bucket.c, whose header
-- defines the semantics and the store. Times are integer microseconds
-- (the C model's ns are these times 1000): a drip is drip_ms * 1000 us.
--
-- The stored HASH holds level and ts (the last drip boundary, us). The
-- drain compares drips with ceil(level / drip_size) instead of multiplying
-- them, and the waits go through SPAN.after, so nothing passes 2^53.
--
-- A level above the size is a debt (LIMITER ADJUST's LB.adjust, a WAIT
-- reservation in LB.core), drained like any level.
--
-- Undo token: the stored ts after the check, in us. A refund gives the
-- cost back only while the bucket keeps that drip phase (ts moved by whole
-- drips from the token): a bucket that emptied and restarted is another
-- bucket.

--#include span

local LB = {
  M = {}, -- the last parameters that parsed, as lib.lua's header says
  MAX_DRIP_MS = 315360000000, -- 3650 days
  ERR_SIZE = 'ERR leaky_bucket size must be between 1 and 2^53 - 1',
  ERR_DRIP_MS = 'ERR leaky_bucket drip_ms must be between 1 and 315360000000 (3650 days)',
  ERR_DRIP_SIZE = 'ERR leaky_bucket drip_size must be between 1 and 2^53 - 1',
  ERR_STATE = 'ERR leaky_bucket state is malformed (negative level or time)',
}

-- The parameters (size, drip_ms, drip_size), checked in the order of
-- leaky_bucket_params_init(); or nil and the error.
function LB.params(a1, a2, a3)
  local M = LB.M
  if M.p and M.a1 == a1 and M.a2 == a2 and M.a3 == a3 then
    return M.p
  end
  local size, drip_ms, drip_size = lib_int(a1), lib_int(a2), lib_int(a3)
  if size == nil or size < 1 then
    return nil, LB.ERR_SIZE
  end
  if drip_ms == nil or drip_ms < 1 or drip_ms > LB.MAX_DRIP_MS then
    return nil, LB.ERR_DRIP_MS
  end
  if drip_size == nil or drip_size < 1 then
    return nil, LB.ERR_DRIP_SIZE
  end
  M.a1, M.a2, M.a3 = a1, a2, a3
  M.p = {size = size, drip_ms = drip_ms, drip_us = drip_ms * 1000,
         drip_size = drip_size}
  return M.p
end

-- The state in h, an HGETALL reply: true, level, ts; false when the key
-- is missing (an empty reply); nil and the error for a malformed field
-- (not an integer in 0 .. 2^53 - 1: legal use never stores more).
function LB.fields(h)
  local n = #h
  if n == 0 then
    return false
  end
  local level, ts
  for i = 1, n, 2 do
    if h[i] == 'level' then
      level = h[i + 1]
    elseif h[i] == 'ts' then
      ts = h[i + 1]
    end
  end
  level, ts = lib_int(level), lib_int(ts)
  if level == nil or ts == nil or level < 0 or ts < 0 then
    return nil, LB.ERR_STATE
  end
  return true, level, ts
end

-- The stored state (LB.fields), or nil and WRONGTYPE. One HGETALL.
function LB.read(key)
  local h = lib_read('HGETALL', key)
  if h == nil then
    return nil, WRONGTYPE
  end
  return LB.fields(h)
end

-- level and ts after the whole drips that fell by now (none when now is
-- behind ts); drips * drip_size is never formed.
function LB.drain(p, level, ts, now)
  if level == 0 or now <= ts then
    return level, ts
  end
  local drips = lib_divmod(now - ts, p.drip_us)
  if drips == 0 then
    return level, ts
  end
  if drips >= lib_ceildiv(level, p.drip_size) then
    level = 0
  else
    level = level - drips * p.drip_size -- < level: exact
  end
  return level, ts + drips * p.drip_us -- <= now
end

-- The time until the bucket is empty: the reply value and the expiry (ms).
function LB.reset(p, level, ts, now)
  if level == 0 then
    return 0, 0
  end
  return SPAN.after(lib_ceildiv(level, p.drip_size), p.drip_ms, ts - now)
end

-- Stores level and ts, expiring in ms (when the bucket is empty).
function LB.commit(key, level, ts, ms)
  R_CALL('HSET', key, 'level', lib_str(level), 'ts', lib_str(ts))
  R_CALL('PEXPIRE', key, lib_str(ms))
end

-- The decision of cost at now on the stored state (have false: no key),
-- with a WAIT of `wait` us (nil or 0: none; leaky_bucket_decide_wait):
-- limited (boolean), remaining, retry and reset (reply values; retry
-- -1000000 when admitted), then the state to store when a check of cost
-- > 0 is admitted or reserved: level, ts and the expiry ms; then whether
-- it took its cost (admitted, or reserved: limited, due within wait).
function LB.core(p, have, level, ts, now, cost, wait)
  if have then
    level, ts = LB.drain(p, level, ts, now)
  else
    level, ts = 0, now
  end
  if level == 0 then
    ts = now -- empty: no phase, the drip clock starts now
  end
  local limited, retry, remaining, taken = false, -1000000, 0, false
  if cost > p.size then
    limited = true
  elseif level <= p.size - cost then
    level, taken = level + cost, true
  else
    -- Drips needed until level - k * drip_size <= size - cost.
    local k = lib_ceildiv(level - (p.size - cost), p.drip_size)
    limited = true
    retry = SPAN.after(k, p.drip_ms, ts - now)
    local room = wait and wait - (ts - now) or -1
    if wait and wait > 0 and room >= 0 and k <= lib_divmod(room, p.drip_us) then
      -- Due within the wait: poured now, past the size (at most 2^53 - 1).
      local max = P53 - 1
      level, taken = cost >= max - level and max or level + cost, true
    end
  end
  if level < p.size then
    remaining = p.size - level
  end
  local reset, ms = LB.reset(p, level, ts, now)
  return limited, remaining, retry, reset, level, ts, ms, taken
end

function LB.decide(key, a1, a2, a3, a4, now, cost, _, _, wait)
  local p, err = LB.params(a1, a2, a3)
  if p == nil then
    return nil, err
  end
  local have, s_level, s_ts = LB.read(key)
  if have == nil then
    return nil, s_level
  end
  local limited, rem, retry, reset, level, ts, ms, taken = LB.core(p, have,
    s_level, s_ts, now, cost, wait)
  -- {limited, limit, remaining, retry, reset, undo}
  local e = {limited and 1 or 0, p.size, rem, retry, reset, ''}
  if taken and cost > 0 then
    e[6] = lib_str(ts)
    return false, e, 1, level, ts, ms
  end
  return limited, e
end

-- decide and commit of a check of one real level, fused, as
-- fixed_window's; p from LB.params.
function LB.one(key, h, p, _, now, cost, out, o)
  local have, s_level, s_ts = LB.fields(h)
  if have == nil then
    return false
  end
  local limited, rem, retry, reset, level, ts, ms = LB.core(p, have, s_level,
                                                           s_ts, now, cost)
  local undo = not limited and cost > 0 and lib_str(ts) or ''
  return LIM_fused_end(out, o, key, limited, p.size, rem, retry, reset, undo,
                       ms, 'level', level, 'ts', ts)
end

function LB.refund(key, a1, a2, a3, a4, now, cost, undo)
  local p = LB.params(a1, a2, a3)
  local t0 = lib_int(undo)
  if p == nil or t0 == nil or cost <= 0 then
    return
  end
  local have, level, ts = LB.read(key)
  if not have or ts < t0 or math.fmod(ts - t0, p.drip_us) ~= 0 then
    return -- gone, or another bucket since the check
  end
  level, ts = LB.drain(p, level, ts, now)
  if level == 0 then
    return -- what the check poured has drained already
  end
  if level <= cost then
    R_CALL('DEL', key)
  else
    local _, ms = LB.reset(p, level - cost, ts, now)
    LB.commit(key, level - cost, ts, ms)
  end
end

-- LIMITER ADJUST (leaky_bucket_adjust): delta > 0 pours delta, never
-- refused (past the size: a debt, at most 2^53 - 1), delta < 0 takes
-- -delta out (down to empty), of the level drained to now; written unless
-- nothing changes, expiring when empty and in 1 ms at least. Returns the
-- entry of a peek of cost 1 after it, or nil and the error.
function LB.adjust(key, a1, a2, a3, a4, now, delta)
  local p, err = LB.params(a1, a2, a3)
  if p == nil then
    return nil, err
  end
  local have, level, ts = LB.read(key)
  if have == nil then
    return nil, level
  end
  if have then
    level, ts = LB.drain(p, level, ts, now)
  else
    level, ts = 0, now
  end
  if level == 0 then
    ts = now
  end
  if delta > 0 or (delta < 0 and level > 0) then
    local max = P53 - 1
    if delta > 0 then
      level = delta >= max - level and max or level + delta
    else
      level = -delta >= level and 0 or level + delta
    end
    local _, ms = LB.reset(p, level, ts, now)
    LB.commit(key, level, ts, ms < 1 and 1 or ms)
    have = true
  end
  local limited, rem, retry, reset = LB.core(p, have, level, ts, now, 1)
  return {limited and 1 or 0, p.size, rem, retry, reset, ''}
end

ALGO.leaky_bucket = {decide = LB.decide, commit = LB.commit,
                     refund = LB.refund, prep = LB.params, one = LB.one,
                     adjust = LB.adjust}
