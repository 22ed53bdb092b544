-- sliding_window: the Lua twin of algorithms/sliding_window.c, whose header
-- defines the semantics and the store. Times are integer microseconds
-- (the C model's ns are these times 1000).
--
-- The HASH maps each slot start (us, decimal) to its count, plus "total".
-- The work is proportional to the stored slots (at most N after any
-- admission), never to N itself: the live slots are collected in a table
-- keyed by slot number and sorted once.
--
-- Undo token: the start (us) of the slot the check counted its cost in. A
-- refund takes the cost back from that slot while it is still in the
-- window.

--#include span

local SW = {
  M = {}, -- the last parameters that parsed, as lib.lua's header says
  MAX_WINDOW_MS = 315360000000, -- 3650 days
  MAX_SLOTS = 3600,
  ERR_MAX = 'ERR sliding_window max must be between 1 and 2^53 - 1',
  ERR_WINDOW = 'ERR sliding_window window must be between 1 ms and 3650 days',
  ERR_RESOLUTION = 'ERR sliding_window resolution must be at least 1 ms and divide the window',
  ERR_SLOTS = 'ERR sliding_window window / resolution must be at most 3600 slots',
  ERR_STATE = 'ERR sliding_window state is malformed (negative slot start or count, or counts whose sum does not fit)',
}

-- The parameters (max, window_ms, resolution_ms), checked in the order of
-- sliding_window_params_init(); or nil and the error.
function SW.params(a1, a2, a3)
  local M = SW.M
  if M.p and M.a1 == a1 and M.a2 == a2 and M.a3 == a3 then
    return M.p
  end
  local max, window_ms, res_ms = lib_int(a1), lib_int(a2), lib_int(a3)
  if max == nil or max < 1 then
    return nil, SW.ERR_MAX
  end
  if window_ms == nil or window_ms < 1 or window_ms > SW.MAX_WINDOW_MS then
    return nil, SW.ERR_WINDOW
  end
  if res_ms == nil or res_ms < 1 or math.fmod(window_ms, res_ms) ~= 0 then
    return nil, SW.ERR_RESOLUTION
  end
  local n = window_ms / res_ms -- exact: res_ms divides window_ms
  if n > SW.MAX_SLOTS then
    return nil, SW.ERR_SLOTS
  end
  M.a1, M.a2, M.a3 = a1, a2, a3
  M.p = {max = max, window_ms = window_ms, res_us = res_ms * 1000, n = n}
  return M.p
end

-- The time until slot k leaves the window, (k * res - now) + window: the
-- reply value and the expiry (ms). k * res never exceeds a stored start
-- or now, so it is exact.
function SW.until_expired(p, k, now)
  return SPAN.after(1, p.window_ms, k * p.res_us - now)
end

-- Reads the key: true and its fields as a flat list (HGETALL); false when
-- it is missing (an empty reply: Redis keeps no empty hash); nil and the
-- error for a wrong type.
function SW.read(key)
  local f = lib_read('HGETALL', key)
  if f == nil then
    return nil, WRONGTYPE
  end
  return #f > 0, f
end

-- The live slots of the stored fields at now: a table slot number ->
-- count (duplicates merged), their sorted numbers, their total, and the
-- effective slot (the later of now's slot and the newest non-empty stored
-- one). nil when a field is malformed: a start or count that is not an
-- integer in 0 .. 2^53 - 1, or a total of 2^53 or more (legal use keeps it
-- at most max). "total" itself is not read, as in the model.
function SW.slots(p, f, now)
  local starts, counts = {}, {}
  local k_eff = lib_divmod(now, p.res_us)
  for i = 1, #f, 2 do
    if f[i] ~= 'total' then
      local s, c = lib_int(f[i]), lib_int(f[i + 1])
      if s == nil or c == nil or s < 0 or c < 0 then
        return nil
      end
      local k = lib_divmod(s, p.res_us)
      if c > 0 then
        starts[#starts + 1] = k
        counts[#counts + 1] = c
        if k > k_eff then
          k_eff = k
        end
      end
    end
  end
  local base = k_eff - (p.n - 1)
  local live, ks, total = {}, {}, 0
  for i = 1, #starts do
    local k = starts[i]
    if k >= base then
      if live[k] == nil then
        live[k] = 0
        ks[#ks + 1] = k
      end
      live[k] = live[k] + counts[i]
      total = total + counts[i]
      if total >= P53 then
        return nil
      end
    end
  end
  table.sort(ks)
  return live, ks, total, k_eff
end

-- For a refused cost <= max: the time until the oldest slots whose counts
-- free enough room have left the window (the newest frees everything).
function SW.retry(p, live, ks, total, now, cost)
  local left = total
  for i = 1, #ks do
    left = left - live[ks[i]]
    if left <= p.max - cost then
      return (SW.until_expired(p, ks[i], now))
    end
  end
  return (SW.until_expired(p, ks[#ks], now)) -- not reached
end

-- Makes the HASH hold exactly the live slots and their total (f: the
-- fields it holds now; res_us: the slot length), expiring after ms: stale,
-- empty and duplicate fields go, changed counts are set.
function SW.commit(key, res_us, f, live, ks, total, ms)
  if #f == 0 and #ks == 1 then
    -- A new key (most checks: new identities): its one slot and the
    -- total, with none of the tables below (each costs Redis about a
    -- thousand instructions to make and collect).
    R_CALL('HSET', key, lib_str(ks[1] * res_us), lib_str(total), 'total',
           lib_str(total))
    R_CALL('PEXPIRE', key, lib_str(ms))
    return
  end
  local want, del, set = {}, {}, {}
  for i = 1, #ks do
    want[lib_str(ks[i] * res_us)] = lib_str(live[ks[i]])
  end
  for i = 1, #f, 2 do
    if f[i] ~= 'total' then
      if want[f[i]] == f[i + 1] then
        want[f[i]] = nil -- already stored as it should be
      elseif want[f[i]] == nil then
        del[#del + 1] = f[i]
      end
    end
  end
  if #del > 0 then
    SPAN.batch('HDEL', key, del, 1)
  end
  for field, count in pairs(want) do
    set[#set + 1] = field
    set[#set + 1] = count
  end
  set[#set + 1] = 'total'
  set[#set + 1] = lib_str(total)
  SPAN.batch('HSET', key, set, 2)
  R_CALL('PEXPIRE', key, lib_str(ms))
end

-- The decision of cost at now under p on the key's fields f (have false:
-- no key): what decide returns once it has read them.
function SW.decide_f(p, have, f, now, cost)
  if not have and cost > 0 and cost <= p.max then
    -- A new key admitted: what SW.slots and the general steps below make
    -- of an empty hash, without their four tables and sort. Its one slot
    -- is now's, holding cost.
    local k = lib_divmod(now, p.res_us)
    local e = {0, p.max, p.max - cost, -1000000, 0, lib_str(k * p.res_us)}
    local ms
    e[5], ms = SW.until_expired(p, k, now)
    return false, e, 1, p.res_us, f, {[k] = cost}, {k}, cost, ms
  end
  local live, ks, total, k_eff = SW.slots(p, f, now)
  if live == nil then
    return nil, SW.ERR_STATE
  end

  -- {limited, limit, remaining, retry, reset, undo}
  local e = {0, p.max, 0, -1000000, 0, ''}
  local limited = false
  if cost > p.max then
    limited = true
  elseif total <= p.max - cost then
    if cost > 0 then
      if live[k_eff] == nil then
        live[k_eff] = 0
        ks[#ks + 1] = k_eff -- the newest slot: ks stays sorted
      end
      live[k_eff] = live[k_eff] + cost
      total = total + cost
    end
  else
    limited = true
    e[4] = SW.retry(p, live, ks, total, now, cost)
  end
  if limited then
    e[1] = 1
  end
  if total < p.max then
    e[3] = p.max - total
  end
  local ms
  if #ks > 0 then
    e[5], ms = SW.until_expired(p, ks[#ks], now)
  end
  if not limited and cost > 0 then
    e[6] = lib_str(k_eff * p.res_us)
    return false, e, 1, p.res_us, f, live, ks, total, ms
  end
  return limited, e
end

function SW.decide(key, a1, a2, a3, a4, now, cost)
  local p, err = SW.params(a1, a2, a3)
  if p == nil then
    return nil, err
  end
  local have, f = SW.read(key)
  if have == nil then
    return nil, f
  end
  return SW.decide_f(p, have, f, now, cost)
end

-- decide and commit of a check of one real level, fused (limiter.lua,
-- which reads h, the key's HGETALL, and parsed p once per batch): a new
-- key admitted is its one slot and total, written through LIM_fused_end
-- as the other algorithms' states; a key in use is decided by decide_f
-- and written by commit, whose error leaves the group's error element, as
-- LIM_one's would. false, nothing written: the general step decides (a
-- malformed state, a new key's cost of 0 or above max).
function SW.one(key, h, p, _, now, cost, out, o)
  if #h == 0 then
    if cost < 1 or cost > p.max then
      return false
    end
    local k = lib_divmod(now, p.res_us)
    local slot = lib_str(k * p.res_us)
    local reset, ms = SW.until_expired(p, k, now)
    return LIM_fused_end(out, o, key, false, p.max, p.max - cost, -1000000,
                         reset, slot, ms, slot, cost, 'total', cost)
  end
  local limited, e, when, res_us, f, live, ks, total, ms = SW.decide_f(p,
    true, h, now, cost)
  if limited == nil then
    return false
  end
  out[o + 1] = limited and 1 or 0
  out[o + 2], out[o + 3], out[o + 4], out[o + 5], out[o + 6], out[o + 7] =
    e[1], e[2], e[3], e[4], e[5], e[6]
  if when == 1 and not limited then
    local ok, err = pcall(SW.commit, key, res_us, f, live, ks, total, ms)
    if not ok then
      return LIM_fused_fail(out, o, LIM_raised(err))
    end
  end
  return o + 7
end

function SW.refund(key, a1, a2, a3, a4, now, cost, undo)
  local p = SW.params(a1, a2, a3)
  local s = lib_int(undo)
  if p == nil or s == nil or s < 0 or cost <= 0 then
    return
  end
  -- Out of the window at now: it counts for nothing any more.
  local k = lib_divmod(s, p.res_us)
  if k < lib_divmod(now, p.res_us) - (p.n - 1) then
    return
  end
  -- A missing key or one of another type has nothing to give back.
  local c = lib_int(lib_read('HGET', key, undo))
  if c == nil or c <= 0 then
    return
  end
  local x = math.min(c, cost)
  if c == x then
    R_CALL('HDEL', key, undo)
  else
    R_CALL('HSET', key, undo, lib_str(c - x))
  end
  local t = lib_int(R_CALL('HGET', key, 'total'))
  if t ~= nil and t >= x then
    R_CALL('HSET', key, 'total', lib_str(t - x))
  end
  -- Only "total" left: the key is worth nothing.
  if R_CALL('HLEN', key) == 1 and
      R_CALL('HEXISTS', key, 'total') == 1 then
    R_CALL('DEL', key)
  end
end

-- LIMITER ADJUST (sliding_window_adjust() in the model): delta > 0 adds
-- to the effective slot (debt past max allowed; the total stays below
-- 2^53, the excess dropped), delta < 0 takes from the live slots newest
-- first, floored at 0. A change rewrites the HASH as a check's commit does
-- (or deletes it when no count is left); nothing changed writes nothing.
-- limiter.lua has peeked the key first, so its state is valid. Returns
-- the entry of a cost 1 peek after the change, undo ''.
function SW.adjust(key, a1, a2, a3, a4, now, delta)
  local p, err = SW.params(a1, a2, a3)
  if p == nil then
    return nil, err
  end
  local have, f = SW.read(key)
  if have == nil then
    return nil, f
  end
  local live, ks, total, k_eff = SW.slots(p, f, now)
  if live == nil then
    return nil, SW.ERR_STATE
  end
  local moved = 0
  if delta > 0 then
    moved = math.min(delta, P53 - 1 - total)
    if moved > 0 then
      if live[k_eff] == nil then
        live[k_eff] = 0
        ks[#ks + 1] = k_eff -- the newest slot: ks stays sorted
      end
      live[k_eff] = live[k_eff] + moved
    end
  elseif delta < 0 then
    local want, left = -delta, {}
    for i = #ks, 1, -1 do
      local x = math.min(live[ks[i]], want)
      live[ks[i]], want, moved = live[ks[i]] - x, want - x, moved + x
    end
    for i = 1, #ks do
      if live[ks[i]] > 0 then
        left[#left + 1] = ks[i]
      end
    end
    ks = left
    moved = -moved
  end
  if moved ~= 0 then
    if #ks == 0 then
      R_CALL('DEL', key)
    else
      local _, ms = SW.until_expired(p, ks[#ks], now)
      SW.commit(key, p.res_us, f, live, ks, total + moved, ms)
    end
  end
  local lim, e = SW.decide(key, a1, a2, a3, a4, now, 1)
  if lim == nil then
    return nil, e
  end
  e[6] = ''
  return e
end

ALGO.sliding_window = {
  adjust = SW.adjust,
  decide = SW.decide,
  commit = SW.commit,
  refund = SW.refund,
  one = SW.one,
  prep = SW.params, -- the parameters of one: p, or nil
}
