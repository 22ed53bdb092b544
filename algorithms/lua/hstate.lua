-- One hash per identity: where LIMITER's states live (limiter.lua).
--
-- A limit key "<prefix>{<tag>}<rest>#<i>:<algorithm>" names no Redis key
-- of its own any more: its state is the field "<rest>#<i>:<algorithm>" of
-- the hash "<prefix>{<tag>}" (the key's name up to its hash tag's closing
-- brace), so every level of every path of one identity is read with one
-- HMGET and written with one HSET (and one PEXPIREAT), however many levels
-- a check has. Redis 7.0 has no TTL per field, so a field's value carries
-- its own: "<expire_at_ms>|<payload>", expire_at_ms the node's Unix time
-- in ms at which the old key would have expired (0: never), the payload
-- the old key's content (gcra's TAT string as it was; a hash state its
-- fields "<name>=<value>" joined by ","). A field past its expire_at reads
-- as absent, as the expired key did. The hash expires at its longest-lived
-- field's expire_at at the earliest (PEXPIREAT ... GT: a short-lived field
-- never shortens a long-lived one); its field "~" holds the expiry last
-- set (ms), read with the states, so most writes need no PEXPIREAT.
--
-- The algorithms are left as they were: while limiter.lua decides a group
-- (the limits of one request), R_CALL and R_PCALL are this module's
-- HS.call and HS.pcall, which emulate the commands the algorithms send on
-- the group's limit keys (GET, SET [NX] [PX] [GET], DEL, HGETALL, HGET,
-- HSET, HDEL, HLEN, HEXISTS, PEXPIRE, EXISTS, PTTL) on states held in Lua,
-- loaded by HS.begin, and HS.finish writes what changed. Every other key
-- (sorted-set algorithms, the override hash, a key of another form) and
-- every other command goes to Redis as before. The emulation is exact, so
-- a group's undo (a key written at its read, then deleted because another
-- level refused) costs nothing at all. limiter.lua's most common group,
-- gcra levels on their fast path, skips the emulation (HS.direct, and its
-- inline form): the same commands on the hash, its values parsed in place.
--
-- Upgrade (one release): a field the HMGET finds absent may still live at
-- its old key; one EXISTS of those keys, and only when it counts some,
-- their reads (GET or HGETALL, and PTTL). A state found there is the
-- field's, and when the group writes anything it moves into the hash and
-- the old key goes. HS.old (the call's flag, limiter_read_old_keys) turns
-- the lookup off.
--
-- Module state in one table (the library's top level is near Lua's 200
-- locals). The group's records: HS.st (key -> record) and HS.recs (in
-- order, HS.n of them); a record is {key, hash, field, type ('s' string,
-- 'h' hash, 'x' a wrong type, 'e' unreadable), value (a string, a flat
-- HGETALL-like array, or false when absent), expire_at ms (0 none), raw
-- (the field as HMGET read it, or false), written, old (found at the old
-- key), err (type 'e': the read's error)}.
local HS = {
  st = {}, recs = {}, n = 0,
  ms = false, -- the node's clock (ms) of this call, read once
  old = true, -- whether absent fields are looked up at their old keys
  rc = false, rp = false, -- redis.call and redis.pcall
  memo = {}, memo_n = 0, -- key -> {hash, field, type} or false
  -- the algorithms whose states live in the hash, and their type
  ALG = {gcra = 's', token_bucket = 'h', leaky_bucket = 'h',
         fixed_window = 'h', sliding_window = 'h', sliding_counter = 'h'},
  OK = {ok = 'OK'},
  nogt = false, -- the node refused PEXPIREAT ... GT (before Redis 7.0)
  -- scratch of HS.begin and HS.finish, kept between groups
  f = {}, a = {}, hs = {}, S = {}, D = {}, O = {}, pool = {},
  -- scratch of HS.direct (limiter.lua: a group of gcra levels decided on
  -- the hash itself), and its values of a level admitted from rel 0, made
  -- once a call (dms: the clock they were made at)
  dF = {}, dV = {}, dC = {}, dS = {}, dE = false, dX = false, dU = false,
  dms = false, dmss = false,
  -- true when no absent state may live at its old key: HS.old is off, or
  -- one EXISTS of every key of the batch counted none (limiter.lua)
  noold = false,
  -- what HSET's reply of a direct write may count (an error table is none)
  CNT = {[0] = true, true, true, true, true, true},
}

-- The hash, field and type of a limit key of the hash form, or false.
-- Remembered (at most 4096 keys, then it starts again): a check names the
-- same keys again and again, and a pattern costs Redis thousands of
-- instructions.
function HS.parse(key)
  local p = HS.memo[key]
  if p ~= nil then
    return p
  end
  p = false
  if type(key) == 'string' then
    local h, f, a = string.match(key, '^([^{]*{[^}]+})(.*#%d+:([%a_]+))$')
    local t = h and HS.ALG[a]
    if t then
      p = {h, f, t}
    end
  end
  if HS.memo_n >= 4096 then
    HS.memo, HS.memo_n = {}, 0
  end
  HS.memo[key], HS.memo_n = p, HS.memo_n + 1
  return p
end

-- The node's clock in ms, read once a call (TIME; limiter.lua's LIM_now
-- sets it when it reads TIME itself).
function HS.now()
  local ms = HS.ms
  if not ms then
    local t = HS.rc('TIME')
    local s, us = tonumber(t[1]), tonumber(t[2])
    ms = s * 1000 + (us - us % 1000) / 1000
    HS.ms = ms
  end
  return ms
end

-- Record r from its field's value s (HMGET's, a string).
function HS.load(r, s, ms)
  r.raw = s
  local e, pl = string.match(s, '^(%d+)|(.*)$')
  e = e and tonumber(e)
  if not e then
    -- Not of this format: a gcra level sees the bytes (and refuses them
    -- as no TAT), any other a wrong type.
    if r.t == 's' then
      r.v = s
    else
      r.t, r.v = 'x', s
    end
    return
  end
  if e ~= 0 and e < ms then
    return -- expired: absent, as the key was
  end
  r.x = e
  if r.t == 's' then
    r.v = pl
    return
  end
  local a, n = {}, 0
  for part in string.gmatch(pl, '[^,]+') do
    local k, v = string.match(part, '^([^=]+)=(.*)$')
    if not k then
      r.t, r.v, r.x = 'x', s, 0
      return
    end
    a[n + 1], a[n + 2], n = k, v, n + 2
  end
  if n == 0 then
    r.t, r.v, r.x = 'x', s, 0
    return
  end
  r.v = a
end

-- A field absent from the hash, at its old key r.key (upgrade): its state
-- and expiry, as the old key holds them.
function HS.load_old(r, ms)
  local rp = HS.rp
  local v = rp(r.t == 's' and 'GET' or 'HGETALL', r.key)
  if type(v) == 'table' and v.err then
    r.t, r.v, r.old = 'x', true, true
    return
  end
  if not v or (type(v) == 'table' and v[1] == nil) then
    return
  end
  if type(v) == 'table' and r.t == 's' then
    return
  end
  local t = rp('PTTL', r.key)
  r.v, r.old = v, true
  r.x = (type(t) == 'number' and t > 0) and ms + t or 0
end

-- Starts a group whose keys are K[k0 .. k0 + n - 1]: loads the states of
-- those of the hash form, one HMGET per hash (one: a group's keys share
-- their identity's tag), and the upgrade's reads.
function HS.begin(K, k0, n)
  local st, recs, c = HS.st, HS.recs, 0
  for i = 1, n do
    local key = K[k0 + i - 1]
    local p = HS.parse(key)
    if p and st[key] == nil then
      -- A record of the pool (HS.pool[c]), set afresh: a table a key and
      -- group would cost Redis its allocation and its collection.
      c = c + 1
      local r = HS.pool[c]
      if r == nil then
        r = {}
        HS.pool[c] = r
      end
      r.key, r.h, r.f, r.t, r.v, r.x, r.raw, r.w, r.old, r.err, r.seen,
        r.enc = key, p[1], p[2], p[3], false, 0, false, false, false, false,
        false, false
      st[key] = r
      recs[c] = r
    end
  end
  HS.n = c
  if c == 0 then
    return
  end
  local ms = HS.now()
  local done, F, absent = 0, HS.f, 0
  while done < c do
    -- The next hash's fields.
    local h, m = nil, 0
    for i = 1, c do
      local r = recs[i]
      if not r.seen and (h == nil or r.h == h) then
        h = r.h
        m = m + 1
        F[m] = r.f
        r.seen = true
      end
    end
    if m == 0 then
      break
    end
    -- With the fields, the hash's "~": the expiry (ms) HS.finish last gave
    -- the hash, so a write that needs no later one sends no PEXPIREAT.
    F[m + 1] = '~'
    local got = HS.rp('HMGET', h, unpack(F, 1, m + 1))
    local hx = not got.err and tonumber(got[m + 1]) or 0
    local j = 0
    for i = 1, c do
      local r = recs[i]
      if r.h == h then
        j = j + 1
        done = done + 1
        r.hx = hx
        if got.err then
          r.t, r.err = 'e', got.err
        elseif got[j] then
          HS.load(r, got[j], ms)
        end
        if r.v == false and not r.err then
          absent = absent + 1
        end
      end
    end
  end
  if absent > 0 and HS.old then
    local A, a = HS.a, 0
    for i = 1, c do
      local r = recs[i]
      if r.v == false and not r.err then
        a = a + 1
        A[a] = r.key
      end
    end
    local e = HS.rp('EXISTS', unpack(A, 1, a))
    if type(e) == 'number' and e > 0 then
      for i = 1, c do
        local r = recs[i]
        if r.v == false and not r.err then
          HS.load_old(r, ms)
        end
      end
    end
  end
end

-- Forgets the group (nothing of it written).
function HS.drop()
  local st, recs = HS.st, HS.recs
  for i = 1, HS.n do
    st[recs[i].key] = nil
    recs[i] = nil
  end
  HS.n = 0
end

-- A state's field value.
function HS.encode(r)
  local pl = r.v
  if r.t == 'h' then
    local a = r.v
    pl = a[1] .. '=' .. a[2]
    for i = 3, #a, 2 do
      pl = pl .. ',' .. a[i] .. '=' .. a[i + 1]
    end
  end
  -- (A number concatenates as "%.14g": exact for a time in ms.)
  return r.x .. '|' .. pl
end

-- Ends the group: writes what changed, per hash one HSET of the changed
-- fields (a state that moved from its old key included), one HDEL of the
-- fields that went (deleted, or found expired) and one PEXPIREAT, then
-- deletes the old keys moved. Returns nil, or the error of a write.
function HS.finish()
  local recs, c = HS.recs, HS.n
  if c == 0 then
    return nil
  end
  local rp, err = HS.rp, nil
  -- Which records changed (w: a write left a state other than the field
  -- read); a group that changed nothing writes nothing.
  local any = false
  for i = 1, c do
    local r = recs[i]
    if r.w then
      local cur = r.v ~= false and r.t ~= 'x' and HS.encode(r)
      if cur ~= r.raw and not (cur == false and r.raw == false and
                               not r.old) then
        r.w, r.enc, any = true, cur, true
      else
        r.w = false
      end
    end
  end
  if any then
    local hashes, nh = HS.hs, 0
    for i = 1, c do
      local r = recs[i]
      local seen = false
      for j = 1, nh do
        if hashes[j] == r.h then
          seen = true
        end
      end
      if not seen then
        nh = nh + 1
        hashes[nh] = r.h
      end
    end
    for j = 1, nh do
      local h = hashes[j]
      local S, D, ns, nd, top, found = HS.S, HS.D, 0, 0, 0, false
      local olds, no, hx = HS.O, 0, 0
      for i = 1, c do
        local r = recs[i]
        if r.h == h then
          hx = r.hx
          if r.raw or hx > 0 then
            found = true
          end
          local enc = r.w and r.enc
          if not r.w and r.old and r.v ~= false and r.t ~= 'x' then
            enc = HS.encode(r)
          end
          if enc then
            S[ns + 1], S[ns + 2], ns = r.f, enc, ns + 2
          elseif r.raw and r.v == false then
            nd = nd + 1
            D[nd] = r.f
          end
          if r.v ~= false and r.x > top and r.t ~= 'x' then
            top = r.x
          end
          if r.old and r.t ~= 'x' then
            no = no + 1
            olds[no] = r.key
          end
        end
      end
      -- The hash must live until top at least: when its "~" says it does
      -- not, it gets as much time again past top (at least a second), so
      -- the writes of a while send no PEXPIREAT (a quarter more sent one
      -- at nearly every check of a young identity, whose TAT moves by
      -- more than that; the hash outlives its fields twice at most).
      local until_ = ns > 0 and top > hx and top
      if until_ then
        local now = HS.now()
        local slack = top - now
        until_ = top + (slack > 1000 and slack or 1000)
        S[ns + 1], S[ns + 2], ns = '~', until_, ns + 2
      end
      if ns > 0 then
        local x = rp('HSET', h, unpack(S, 1, ns))
        if type(x) == 'table' and x.err then
          return x.err
        end
      end
      if nd > 0 then
        local x = rp('HDEL', h, unpack(D, 1, nd))
        if type(x) == 'table' and x.err then
          return x.err
        end
      end
      if until_ then
        err = HS.expire(h, until_, found)
        if err then
          return err
        end
      end
      if no > 0 then
        rp('DEL', unpack(olds, 1, no))
      end
    end
  end
  HS.drop()
  return nil
end

-- The hash h expires at top (ms) at the earliest: PEXPIREAT GT, which
-- keeps a later expiry; a hash without one (just made: found says the
-- group read none of its fields, so it may be new) takes it with NX.
-- Before Redis 7.0 (no NX/GT), PTTL and a plain PEXPIREAT. ts: top's
-- digits, when the caller has them.
function HS.expire(h, top, found, ts)
  local rp = HS.rp
  ts = ts or top -- redis.call formats a number as "%.17g"
  if not HS.nogt then
    local x
    if not found then
      x = rp('PEXPIREAT', h, ts, 'NX')
      if x == 1 then
        return nil
      end
    end
    if x == nil or x == 0 then
      x = rp('PEXPIREAT', h, ts, 'GT')
    end
    if type(x) ~= 'table' then
      return nil
    end
    HS.nogt = true
  end
  local t = rp('PTTL', h)
  if type(t) == 'table' then
    return t.err
  end
  if t < 0 or HS.now() + t < top then
    local x = rp('PEXPIREAT', h, ts)
    if type(x) == 'table' then
      return x.err
    end
  end
  return nil
end

-- The emulated commands on a record r: return the reply, or nil and an
-- error text.
local HS_WRONG = 'WRONGTYPE Operation against a key holding the wrong kind of value'
HS.ops = {
  GET = function(r)
    if r.v == false then
      return false
    elseif r.t ~= 's' then
      return nil, HS_WRONG
    end
    return r.v
  end,
  SET = function(r, val, a1, a2, a3, a4, ...)
    -- The forms the algorithms send, first: gcra_fast_read's SET val NX
    -- PX ms GET, and SET val PX ms.
    if a1 == 'NX' and a2 == 'PX' and a4 == 'GET' and ... == nil then
      if r.v ~= false then
        if r.t ~= 's' then
          return nil, HS_WRONG
        end
        return r.v
      end
      local px = tonumber(a3)
      if px and px > 0 then
        r.t, r.v, r.x, r.w = 's', val, HS.now() + px, true
        return false
      end
    elseif a1 == 'PX' and a3 == nil then
      local px = tonumber(a2)
      if px and px > 0 then
        r.t, r.v, r.x, r.w = 's', val, HS.now() + px, true
        return HS.OK
      end
    end
    local o, px, nx, get, keep = {a1, a2, a3, a4, ...}, nil, false, false,
      false
    local i = 1
    while o[i] do
      local w = string.upper(o[i])
      if w == 'PX' then
        px, i = tonumber(o[i + 1]), i + 2
      elseif w == 'NX' then
        nx, i = true, i + 1
      elseif w == 'GET' then
        get, i = true, i + 1
      elseif w == 'KEEPTTL' then
        keep, i = true, i + 1
      else
        return nil, 'ERR limiter hash state: SET option not emulated'
      end
    end
    local old = r.v
    if get and old ~= false and r.t ~= 's' then
      return nil, HS_WRONG
    end
    if nx and old ~= false then
      return get and old or false
    end
    if px and px <= 0 then
      return nil, 'ERR invalid expire time in \'set\' command'
    end
    local x = r.x
    if px then
      x = HS.now() + px
    elseif not keep or old == false then
      x = 0
    end
    r.t, r.v, r.x, r.w = 's', val, x, true
    if get then
      return old
    end
    return HS.OK
  end,
  DEL = function(r)
    if r.v == false then
      return 0
    end
    r.v, r.x, r.w = false, 0, true
    return 1
  end,
  EXISTS = function(r)
    return r.v == false and 0 or 1
  end,
  PTTL = function(r)
    if r.v == false then
      return -2
    elseif r.x == 0 then
      return -1
    end
    return r.x - HS.now()
  end,
  PEXPIRE = function(r, ms)
    if r.v == false then
      return 0
    end
    ms = tonumber(ms)
    if ms <= 0 then
      r.v, r.x = false, 0
    else
      r.x = HS.now() + ms
    end
    r.w = true
    return 1
  end,
  HGETALL = function(r)
    if r.v == false then
      return {}
    elseif r.t ~= 'h' then
      return nil, HS_WRONG
    end
    return r.v -- never changed in place: HSET and HDEL make a new array
  end,
  HGET = function(r, f)
    if r.v == false then
      return false
    elseif r.t ~= 'h' then
      return nil, HS_WRONG
    end
    local a = r.v
    for i = 1, #a, 2 do
      if a[i] == f then
        return a[i + 1]
      end
    end
    return false
  end,
  HEXISTS = function(r, f)
    local v, err = HS.ops.HGET(r, f)
    if v == nil then
      return nil, err
    end
    return v and 1 or 0
  end,
  HLEN = function(r)
    if r.v == false then
      return 0
    elseif r.t ~= 'h' then
      return nil, HS_WRONG
    end
    return #r.v / 2
  end,
  HSET = function(r, ...)
    if r.v ~= false and r.t ~= 'h' then
      return nil, HS_WRONG
    end
    local kv, a, added = {...}, {}, 0
    if r.v ~= false then
      for i = 1, #r.v do
        a[i] = r.v[i]
      end
    else
      r.x = 0 -- a new key has no TTL
    end
    for j = 1, #kv, 2 do
      local f, v, hit = kv[j], kv[j + 1], false
      for i = 1, #a, 2 do
        if a[i] == f then
          a[i + 1], hit = v, true
          break
        end
      end
      if not hit then
        a[#a + 1], a[#a + 2], added = f, v, added + 1
      end
    end
    r.t, r.v, r.w = 'h', a, true
    return added
  end,
  HDEL = function(r, ...)
    if r.v == false then
      return 0
    elseif r.t ~= 'h' then
      return nil, HS_WRONG
    end
    local gone, a, n, del = {...}, {}, 0, 0
    local old = r.v
    for i = 1, #old, 2 do
      local drop = false
      for j = 1, #gone do
        if gone[j] == old[i] then
          drop = true
        end
      end
      if drop then
        del = del + 1
      else
        a[n + 1], a[n + 2], n = old[i], old[i + 1], n + 2
      end
    end
    if del > 0 then
      r.w = true
      if n == 0 then
        r.v, r.x = false, 0
      else
        r.v = a
      end
    end
    return del
  end,
}

-- Runs cmd on the record r: the reply, or nil and the error text.
function HS.op(r, cmd, ...)
  if r.t == 'e' then
    return nil, r.err
  elseif r.t == 'x' and cmd ~= 'DEL' and cmd ~= 'SET' and cmd ~= 'EXISTS' then
    return nil, HS_WRONG
  end
  local f = HS.ops[cmd]
  if f == nil then
    return nil, 'ERR limiter hash state: ' .. tostring(cmd) ..
      ' not emulated'
  end
  return f(r, ...)
end

-- R_CALL and R_PCALL while limiter.lua runs: a group's limit key is
-- emulated, anything else is Redis's.
function HS.call(cmd, key, ...)
  local r = HS.st[key]
  if r == nil then
    if key == nil then -- TIME: no nil argument
      return HS.rc(cmd)
    end
    return HS.rc(cmd, key, ...)
  end
  -- A key of a wrong or unreadable type takes HS.op's checks.
  local f, v, err = r.t ~= 'e' and r.t ~= 'x' and HS.ops[cmd], nil, nil
  if f then
    v, err = f(r, ...)
  else
    v, err = HS.op(r, cmd, ...)
  end
  if v == nil then
    error({err = err})
  end
  return v
end

function HS.pcall(cmd, key, ...)
  local r = HS.st[key]
  if r == nil then
    if key == nil then -- TIME: no nil argument
      return HS.rp(cmd)
    end
    return HS.rp(cmd, key, ...)
  end
  -- A key of a wrong or unreadable type takes HS.op's checks.
  local f, v, err = r.t ~= 'e' and r.t ~= 'x' and HS.ops[cmd], nil, nil
  if f then
    v, err = f(r, ...)
  else
    v, err = HS.op(r, cmd, ...)
  end
  if v == nil then
    return {err = err}
  end
  return v
end
