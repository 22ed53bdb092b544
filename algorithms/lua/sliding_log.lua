-- sliding_log: the Lua twin of algorithms/sliding_log.c, whose header
-- defines the semantics and the store. Times are integer microseconds
-- (the C model's ns are these times 1000).
--
-- The ZSET scores are the timestamps; the log is never read whole. The
-- decision needs only counts (ZCOUNT of the horizon, the window and the
-- future), the oldest and newest entries, and for a retry one entry by
-- rank; the log after a decision (the kept entries with this request's
-- added at now, capped at max) is known from those without building it:
-- in it the entries after now come first, then the added ones, then the
-- older ones.
--
-- Members are "<ts>:<L><j>": ts the score, j = 1, 2, ... numbering the
-- entries of one timestamp (a write takes j above the largest stored for
-- it), L a letter giving the digits of j ('a' for 1 digit, 'b' for 2, ...),
-- so that members of one score sort by j.
--
-- Undo token: the timestamp (us) of the entries an admission logged. A
-- refund removes up to cost entries with that timestamp, the newest
-- numbered first: entries of one timestamp are interchangeable, and an
-- admission never caps a live entry away, so the log decides as it did
-- before the check. Refused attempts stay logged (their token is '').

--#include span

local SL = {
  M = {}, -- the last parameters that parsed, as lib.lua's header says
  MAX_ENTRIES = 100000,
  MAX_DURATION_MS = 315360000000, -- 3650 days
  ERR_MAX = 'ERR sliding_log max must be between 1 and 100000',
  ERR_WINDOW = 'ERR sliding_log window must be between 1 ms and 3650 days',
  ERR_INTERVAL = 'ERR sliding_log min_interval must be between 0 and 3650 days',
  ERR_STATE = 'ERR sliding_log state is malformed (negative or unsorted timestamps)',
}

-- The parameters (max, window_ms, min_interval_ms), checked in the order
-- of sliding_log_params_init(); or nil and the error.
function SL.params(a1, a2, a3)
  local M = SL.M
  if M.p and M.a1 == a1 and M.a2 == a2 and M.a3 == a3 then
    return M.p
  end
  local max, w, mi = lib_int(a1), lib_int(a2), lib_int(a3)
  if max == nil or max < 1 or max > SL.MAX_ENTRIES then
    return nil, SL.ERR_MAX
  end
  if w == nil or w < 1 or w > SL.MAX_DURATION_MS then
    return nil, SL.ERR_WINDOW
  end
  if mi == nil or mi < 0 or mi > SL.MAX_DURATION_MS then
    return nil, SL.ERR_INTERVAL
  end
  local h = math.max(w, mi)
  M.a1, M.a2, M.a3 = a1, a2, a3
  M.p = {max = max, w_ms = w, w_us = w * 1000, mi_ms = mi, mi_us = mi * 1000,
         h_ms = h, h_us = h * 1000}
  return M.p
end

-- The score of the stored entry at rank r counted from the newest (0), or
-- nil when it is malformed. Every number a command takes goes as a
-- string: Redis formats a Lua number argument with snprintf's %.17g,
-- about 2,500 instructions each (a check of a new identity spent 4,900
-- on its read's two ranks).
function SL.at(key, r)
  local s = lib_str(r)
  return lib_score(R_CALL('ZREVRANGE', key, s, s, 'WITHSCORES')[2])
end

-- What SL.read gives for no log (a new identity), made once: it is only
-- read.
SL.EMPTY = {kept = 0, live = 0, fut = 0}

-- What the decision needs of the stored log at now: kept (entries in the
-- horizon), live (in the window), fut (after now) and newest (nil when the
-- log is empty). nil and the error for a wrong type or a malformed score
-- (the oldest and newest are checked; the rest lie between them).
function SL.read(key, p, now)
  -- The oldest entry first, through redis.pcall: an empty reply is no key,
  -- an error another type (no TYPE call first).
  local first = lib_read('ZRANGE', key, '0', '0', 'WITHSCORES')
  if first == nil then
    return nil, WRONGTYPE
  end
  if #first == 0 then
    return SL.EMPTY
  end
  local st = {kept = 0, live = 0, fut = 0}
  local oldest = lib_score(first[2])
  local newest = lib_score(R_CALL('ZREVRANGE', key, '0', '0', 'WITHSCORES')[2])
  if oldest == nil or newest == nil then
    return nil, SL.ERR_STATE
  end
  st.oldest, st.newest = oldest, newest
  st.kept = R_CALL('ZCOUNT', key, '(' .. lib_str(now - p.h_us), '+inf')
  -- Without a min_interval beyond the window the horizon is the window.
  st.live = p.h_us == p.w_us and st.kept or
    R_CALL('ZCOUNT', key, '(' .. lib_str(now - p.w_us), '+inf')
  if newest > now then
    st.fut = R_CALL('ZCOUNT', key, '(' .. lib_str(now), '+inf')
  end
  return st
end

-- The entry at rank r from the newest of the log after the decision, add
-- entries at now merged in (nil when malformed).
function SL.nth(key, st, add, r, now)
  if add > 0 then
    if r < st.fut then
      return SL.at(key, r)
    end
    if r < st.fut + add then
      return now
    end
    r = r - add
  end
  return SL.at(key, r)
end

-- The retry of a refused cost <= max against the log after the decision
-- (m entries, `live` of them in the window, the newest at `newest`): the
-- latest of 0, newest + min_interval (requests only) and the moment the
-- (max - cost + 1)-th newest entry leaves the window. Each candidate is
-- (t - now) + ms, kept as (t, ms) and compared exactly; only the latest
-- goes through SPAN.after (saturating is monotonic). nil when malformed.
function SL.retry(key, p, st, add, m, live, newest, now, cost)
  local bt, bms = now, 0
  if cost > 0 and p.mi_us > 0 and m > 0 and
      (newest - bt) + (p.mi_ms - bms) * 1000 > 0 then
    bt, bms = newest, p.mi_ms
  end
  local room = p.max - cost
  if live > room then
    local t = SL.nth(key, st, add, room, now)
    if t == nil then
      return nil
    end
    if (t - bt) + (p.w_ms - bms) * 1000 > 0 then
      bt, bms = t, p.w_ms
    end
  end
  return (SPAN.after(1, bms, bt - now))
end

-- Logs a entries at now after dropping those at or before `drop` (the
-- horizon's start), caps the log at `cap` entries (the oldest go) and sets
-- the expiry. What the decision read says which of these have work: drop
-- is false when the oldest entry is after it, cap false when the kept
-- entries and the added fit, top false when no entry lies at now (the
-- newest is before it), whose numbers the added would follow. A new
-- identity's check (a log read empty) skips all three; one in use mostly
-- skips the last two, and the drop while its oldest entry is in the
-- horizon.
function SL.commit(key, drop, cap, now, a, ms, top)
  local ts = lib_str(now)
  if drop then
    R_CALL('ZREMRANGEBYSCORE', key, '-inf', lib_str(drop))
  end
  if a == 1 and not top then
    -- One entry and none at now yet (most checks of cost 1): its
    -- member is "<ts>:a1", with no table for SPAN.batch.
    R_CALL('ZADD', key, ts, ts .. ':a1')
  elseif a > 0 then
    top = top and R_CALL('ZREVRANGEBYSCORE', key, ts, ts, 'LIMIT', '0', '1')[1]
    local j = 0
    if top then
      j = tonumber(string.match(top, '^%d+:[a-p](%d+)$')) or 0
    end
    local args = {}
    for i = 1, a do
      local s = lib_str(j + i)
      args[#args + 1] = ts
      args[#args + 1] = ts .. ':' .. string.char(96 + #s) .. s
    end
    SPAN.batch('ZADD', key, args, 2)
  end
  if cap then
    R_CALL('ZREMRANGEBYRANK', key, '0', lib_str(-(cap + 1)))
  end
  R_CALL('PEXPIRE', key, lib_str(ms))
end

function SL.decide(key, a1, a2, a3, a4, now, cost)
  local p, err = SL.params(a1, a2, a3)
  if p == nil then
    return nil, err
  end
  local st, rerr = SL.read(key, p, now)
  if st == nil then
    return nil, rerr
  end

  local add, refused = 0, false
  if cost == 0 then
    refused = st.live > p.max
  elseif cost > p.max then
    refused = true
  else
    local spaced = p.mi_us == 0 or st.kept == 0 or
        (st.newest <= now and now - st.newest >= p.mi_us)
    refused = not spaced or st.live > p.max - cost
    add = cost -- logged whether it passes or not
  end

  -- The log as the store holds it afterwards: m entries, live in the
  -- window, the newest at newest. Without an addition it is the kept part,
  -- uncapped, as in the model.
  local size = math.min(st.kept + add, p.max)
  local m, live, newest = st.kept, st.live, st.newest
  if add > 0 then
    m = size
    live = math.min(st.live + add, size) -- the live ones are the newest
    if st.fut == 0 then
      newest = now
    end
  end

  -- {limited, limit, remaining, retry, reset, undo}
  local e = {refused and 1 or 0, p.max, 0, -1000000, 0, ''}
  if live < p.max then
    e[3] = p.max - live
  end
  if refused and cost <= p.max then
    e[4] = SL.retry(key, p, st, add, m, live, newest, now, cost)
    if e[4] == nil then
      return nil, SL.ERR_STATE
    end
  end
  local ms
  if m > 0 then
    e[5], ms = SPAN.after(1, p.h_ms, newest - now)
  end
  if add > 0 then
    -- The added entries that survive the cap: the future ones go first.
    -- Logged when the group admits, or when this limit refused.
    local a = math.max(0, math.min(add, size - st.fut))
    local h = now - p.h_us
    local drop = st.oldest ~= nil and st.oldest <= h and h
    local cap = st.kept + a > p.max and p.max
    local top = st.newest ~= nil and st.newest >= now
    if refused then
      return true, e, 2, drop, cap, now, a, ms, top
    end
    e[6] = lib_str(now)
    return false, e, 1, drop, cap, now, a, ms, top
  end
  return refused, e
end

function SL.refund(key, a1, a2, a3, a4, now, cost, undo)
  local p = SL.params(a1, a2, a3)
  local ts = lib_int(undo)
  if p == nil or ts == nil or ts < 0 or cost <= 0 or cost > p.max then
    return
  end
  local t, left = lib_str(ts), cost
  while left > 0 do
    -- A missing key or one of another type has nothing to give back.
    local got = lib_read('ZREVRANGEBYSCORE', key, t, t, 'LIMIT', '0',
                         lib_str(math.min(left, SPAN.BATCH)))
    if got == nil or #got == 0 then
      break
    end
    R_CALL('ZREM', key, unpack(got))
    left = left - #got
  end
end

-- LIMITER ADJUST (sliding_log_adjust() in the model): delta > 0 logs
-- min(delta, max) entries at now as a check of that cost would (the same
-- drop, members and cap: later refunds and checks read them alike),
-- delta < 0 removes the -delta newest entries of the horizon (the stale
-- ones dropped first, the log capped at max after, as a check's write
-- would leave it), never more than there are: an emptied ZSET is gone.
-- Nothing to change writes nothing. limiter.lua has peeked the key first,
-- so its state is valid. Returns the entry of a cost 1 peek after the
-- change (its retry counts that attempt, as a peek's does), undo ''.
function SL.adjust(key, a1, a2, a3, a4, now, delta)
  local p, err = SL.params(a1, a2, a3)
  if p == nil then
    return nil, err
  end
  local st, rerr = SL.read(key, p, now)
  if st == nil then
    return nil, rerr
  end
  local h = now - p.h_us
  local drop = st.oldest ~= nil and st.oldest <= h and h
  if delta > 0 then
    local add = math.min(delta, p.max)
    local a = math.max(0, math.min(add, math.min(st.kept + add, p.max) -
                                          st.fut))
    local _, ms = SPAN.after(1, p.h_ms, (st.fut > 0 and st.newest or now) -
                                          now)
    SL.commit(key, drop, st.kept + a > p.max and p.max, now, a, ms,
              st.newest ~= nil and st.newest >= now)
  elseif delta < 0 and st.kept > 0 then
    local gone = math.min(-delta, st.kept)
    if drop then
      R_CALL('ZREMRANGEBYSCORE', key, '-inf', lib_str(drop))
    end
    R_CALL('ZREMRANGEBYRANK', key, lib_str(-gone), '-1')
    if gone < st.kept then
      if st.kept - gone > p.max then
        R_CALL('ZREMRANGEBYRANK', key, '0', lib_str(-(p.max + 1)))
      end
      local _, ms = SPAN.after(1, p.h_ms, SL.at(key, 0) - now)
      R_CALL('PEXPIRE', key, lib_str(ms))
    end
  end
  local lim, e = SL.decide(key, a1, a2, a3, a4, now, 1)
  if lim == nil then
    return nil, e
  end
  e[6] = ''
  return e
end

ALGO.sliding_log = {adjust = SL.adjust, decide = SL.decide,
                    commit = SL.commit, refund = SL.refund}
