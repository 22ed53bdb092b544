-- concurrency: the Lua twin of algorithms/concurrency.c, whose header
-- defines the semantics and the store (a ZSET: member the token, score its
-- lease end in microseconds). Times are integer microseconds (the C
-- model's ns are these times 1000).
--
-- Parameters: a1 max, a2 lease_ms, a3 the token ('' for none: a peek
-- without ID decides as a new holder and writes nothing), a4 'release'
-- for LIMITER RELEASE (the call's mode is "check"), else ''.
--
-- The set is never read whole: the live holders are a ZCOUNT after now,
-- the token's own lease a ZSCORE, the last lease ends the two highest
-- scores, the earliest live one (a refusal's retry) the first score after
-- now. A write drops the expired holders first, so the set holds at most
-- max members (more only after max was lowered under live ones).
--
-- Undo token of a check: 'n' when it took a new slot (a refund removes
-- the token), else the lease end it renewed (a refund puts it back). A
-- RELEASE's entry has undo '1' when the token held a live slot, else '0';
-- its other values are the state after it as cost 0 shows it.

--#include span

local CC = {
  M = {}, -- the last parameters that parsed, as lib.lua's header says
  MAX_HOLDERS = 100000,
  MAX_LEASE_MS = 86400000, -- 1 day
  MAX_TOKEN = 512,
  ERR_MAX = 'ERR concurrency max must be between 1 and 100000',
  ERR_LEASE = 'ERR concurrency lease must be between 1 ms and 1 day',
  ERR_TOKEN = 'ERR concurrency ID must be between 1 and 512 bytes',
  ERR_STATE = 'ERR concurrency state is malformed (negative lease end or bad token)',
}

-- The parameters (max, lease_ms), checked in the order of
-- concurrency_params_init(); or nil and the error.
function CC.params(a1, a2)
  local M = CC.M
  if M.p and M.a1 == a1 and M.a2 == a2 then
    return M.p
  end
  local max, lease = lib_int(a1), lib_int(a2)
  if max == nil or max < 1 or max > CC.MAX_HOLDERS then
    return nil, CC.ERR_MAX
  end
  if lease == nil or lease < 1 or lease > CC.MAX_LEASE_MS then
    return nil, CC.ERR_LEASE
  end
  M.a1, M.a2 = a1, a2
  M.p = {max = max, lease_us = lease * 1000}
  return M.p
end

-- What the decision needs of the set at now for token t: live holders,
-- the token's live lease end (nil: it holds no slot) and the last live
-- lease end of the others (0: none). nil and the error for a wrong type
-- or a malformed score.
function CC.read(key, t, now)
  -- The two highest first, through redis.pcall (lib_read): an empty reply
  -- is no key, an error another type.
  local top = lib_read('ZREVRANGE', key, '0', '1', 'WITHSCORES')
  if top == nil then
    return nil, WRONGTYPE
  end
  if #top == 0 then
    return 0, nil, 0
  end
  local live = R_CALL('ZCOUNT', key, '(' .. lib_str(now), '+inf')
  if live == 0 then
    return 0, nil, 0
  end
  local mine
  if t ~= '' then
    local s = R_CALL('ZSCORE', key, t)
    if s then
      mine = lib_score(s)
      if mine == nil then
        return nil, CC.ERR_STATE
      end
      if mine <= now then
        mine = nil
      end
    end
  end
  -- The last lease end: the highest unless it is the token's own.
  local last = 0
  for j = 1, #top, 2 do
    local v = lib_score(top[j + 1])
    if v == nil then
      return nil, CC.ERR_STATE
    end
    if top[j] ~= t or mine == nil then
      last = v > now and v or 0
      break
    end
  end
  return live, mine, last
end

-- e for `held` live holders whose last lease ends at `last`.
function CC.state(p, held, last, now)
  local e = {0, p.max, 0, -1000000, 0, ''}
  if held < p.max then
    e[3] = p.max - held
  end
  local ms
  if held > 0 then
    e[5], ms = SPAN.after(0, 0, last - now)
  end
  return e, ms
end

function CC.decide(key, a1, a2, a3, a4, now, cost)
  local p, err = CC.params(a1, a2)
  if p == nil then
    return nil, err
  end
  if #a3 > CC.MAX_TOKEN or (a4 == 'release' and a3 == '') then
    return nil, CC.ERR_TOKEN
  end
  local live, mine, last = CC.read(key, a3, now)
  if live == nil then
    return nil, mine
  end
  if a4 == 'release' then
    -- The others stay; the token's slot goes.
    local held = mine and live - 1 or live
    local e = CC.state(p, held, last, now)
    e[1] = held > p.max and 1 or 0
    if mine then
      e[6] = '1'
      return false, e, 1, a3
    end
    e[6] = '0'
    return false, e
  end
  if cost == 0 then
    -- The state as it is: the token's own slot counts as held.
    if mine and mine > last then
      last = mine
    end
    local e = CC.state(p, live, last, now)
    e[1] = live > p.max and 1 or 0
    return live > p.max, e
  end
  local others = mine and live - 1 or live
  if not mine and others >= p.max then
    -- Full: refused, nothing written; retry when the earliest lease ends.
    local e = CC.state(p, others, last, now)
    local first = lib_score(R_CALL('ZRANGEBYSCORE', key, '(' .. lib_str(now),
                                  '+inf', 'WITHSCORES', 'LIMIT', '0', '1')[2])
    if first == nil then
      return nil, CC.ERR_STATE
    end
    e[1], e[3] = 1, 0
    e[4] = (SPAN.after(0, 0, first - now))
    return true, e
  end
  local untl = now + p.lease_us
  local e, ms = CC.state(p, others + 1, math.max(untl, last), now)
  if a3 == '' then
    return false, e -- a peek without ID: a new holder's view
  end
  e[6] = mine and lib_str(mine) or 'n'
  return false, e, 1, a3, lib_str(untl), lib_str(ms), lib_str(now)
end

-- Takes or renews (w2: the lease end) or, with no w2, releases token t.
function CC.commit(key, t, untl, ms, now)
  if not untl then
    R_CALL('ZREM', key, t)
    return
  end
  R_CALL('ZREMRANGEBYSCORE', key, '-inf', now)
  R_CALL('ZADD', key, untl, t)
  R_CALL('PEXPIRE', key, ms)
end

function CC.refund(key, a1, a2, a3, a4, now, cost, undo)
  if a3 == '' or a4 == 'release' or undo == '' then
    return
  end
  -- A key of another type has nothing to give back (redis.pcall: its
  -- error is dropped).
  if undo == 'n' then
    R_PCALL('ZREM', key, a3)
  elseif lib_int(undo) then
    R_PCALL('ZADD', key, 'XX', undo, a3)
  end
end

-- LIMITER ADJUST skips concurrency levels (a slot is not a cost); called
-- anyway, it writes nothing and shows the state as cost 0 does.
function CC.adjust(key, a1, a2, a3, a4, now)
  local lim, e = CC.decide(key, a1, a2, a3 or '', '', now, 0)
  if lim == nil then
    return nil, e
  end
  return e
end

ALGO.concurrency = {decide = CC.decide, commit = CC.commit,
                    refund = CC.refund, adjust = CC.adjust}
