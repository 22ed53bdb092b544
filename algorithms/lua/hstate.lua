-- One string per identity: where LIMITER's states live (limiter.lua).
--
-- A gcra limit key "<prefix>{<tag>}<rest>#<i>:gcra" names no Redis key of
-- its own any more: its state is the record "<rest>#<i>:gcra" (its field)
-- of the identity's state string, the string key
-- "<prefix>{<tag>}" (the key's name up to its hash tag's closing brace).
-- So every level of every path of one identity is read with one GET (or
-- one SET ... NX GET, which also admits a new identity) and written with
-- one SET, however many levels a check has: a hash would need HMGET,
-- HSET and a PEXPIREAT of its own (Redis 7.0 has no TTL per field), which
-- cost Redis more than a whole check of one level on a string.
--
-- The string is its records one after another, "<L>:<field>=<value>;",
-- L the field's length in bytes in decimal (the field may hold any byte),
-- the value never a ";". A level's value is its TAT alone (decimal ns,
-- as redis-cell stores it), which expires with itself: at the TAT's ms,
-- its digits but the last six; or, written by a test that steps time,
-- "<expire_at_ms>|<TAT>" (0: never), its expiry in the node's time. A
-- record past its expiry reads as absent, as the expired key did, and goes
-- at the next write of the string; the string expires (PXAT) at its latest
-- record's expiry, or never when a record never does. The algorithms with
-- a hash state keep their own keys: their commands emulated here cost
-- Redis two to three times the commands themselves. So does a gcra level
-- below a second "*" of the tree (the proxy names it HS.OWN): under the
-- tag tenant:<t>, every user's records would make one string, each check
-- reading and rewriting them all.
--
-- gcra's code is left as it was: while limiter.lua decides a group (the
-- limits of one request), R_CALL and R_PCALL are this module's HS.call
-- and HS.pcall, which emulate the commands gcra sends on the group's limit
-- keys (GET, SET [NX] [PX] [GET], DEL, PEXPIRE, EXISTS, PTTL) on states
-- held in Lua,
-- loaded by HS.begin, and HS.finish writes the string whole when one
-- changed. Every other key (sorted-set algorithms, the override hash, a
-- key of another form) and every other command goes to Redis as before.
-- The emulation is exact, so a group's undo (a key written at its read,
-- then deleted because another level refused) costs nothing at all.
-- limiter.lua's most common group, gcra levels on their fast path, skips
-- the emulation (HS.direct, and its inline form): a string that holds
-- exactly the path's records is decided and rewritten in place.
--
-- Upgrade (one release): a record the string lacks may still live at its
-- old per-level key; one EXISTS of those keys, and only when it counts
-- some, their reads (GET and PTTL). A state found there is
-- the record's, and when the group writes anything it moves into the
-- string and the old key goes. HS.old (the call's flag,
-- limiter_read_old_keys) turns the lookup off.
--
-- Module state in one table (the library's top level is near Lua's 200
-- locals). The group's records: HS.st (key -> record) and HS.recs (in
-- order, HS.n of them); a record is {key, string (h), field, type ('s' a
-- TAT, 'x' a wrong type at its old key, 'e' unreadable), value (a string,
-- or false when absent), expire_at ms (0 none),
-- raw (the value as the string held it, or false), written, old (found at
-- the old key), err (type 'e': the read's error)}.
local HS_WRONG = 'WRONGTYPE Operation against a key holding the wrong kind of value'
local HS = {
  st = {}, recs = {}, n = 0,
  ms = false, -- the node's clock (ms) of this call, read once
  old = true, -- whether absent fields are looked up at their old keys
  rc = false, rp = false, -- redis.call and redis.pcall
  memo = {}, memo_n = 0, -- key -> {string, field, type} or false
  -- key -> its state string (limiter.lua's inline direct path)
  hm = {}, hm_n = 0,
  -- the algorithms whose states live in the string, and their type: gcra's
  -- TAT (a hash state keeps its key: emulating its commands on a string
  -- cost Redis two to three times the commands themselves)
  ALG = {gcra = 's'},
  -- the word the proxy sends in place of "gcra" for a level below a
  -- second "*" of the tree (tenant:<t>:user:<u>), whose state keeps a key
  -- of its own: in the identity's string, every sub-identity's records
  -- would be one value that each check reads and rewrites whole
  OWN = 'gcra.key',
  -- SET ... PXAT (Redis 6.2) where REDIS_VERSION_NUM says 7.0 or later;
  -- before 7.0 the string's expiry is PX from the call's clock (and the
  -- direct paths, which need SET ... NX GET, are not taken)
  pxat = redis.REDIS_VERSION_NUM ~= nil,
  OK = {ok = 'OK'},
  real = true, -- the call runs on the node's clock (not a test's now)
  -- scratch of HS.begin and HS.finish, kept between groups
  f = {}, a = {}, S = {}, O = {}, pool = {}, seen = {},
  -- the group's state strings: their records (string -> doc {h, n, f, v,
  -- found}), from HS.dpool (HS.nd of them in use)
  docs = {}, dpool = {}, nd = 0,
  -- scratch of HS.direct (limiter.lua: a group of gcra levels decided on
  -- its state string itself)
  dV = {}, dC = {}, dS = {}, dT = {},
  -- true when no absent state may live at its old key: HS.old is off, or
  -- one EXISTS of every key of the batch counted none (limiter.lua)
  noold = false,
}

-- The string, field and type of a limit key of the state-string form, or
-- false.
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

-- The expiry (ms, 0: none) of a record's value v: a gcra TAT alone (all
-- digits) expires at its own ms (its digits but the last six); any other
-- value says it first, "<expire_at_ms>|"; nil when it does not.
function HS.expiry(v)
  if not string.find(v, '%D') then
    return tonumber(string.sub(v, 1, #v - 6)) or 1
  end
  return tonumber(string.match(v, '^(%d+)|'))
end

-- Record r from its value s (a string).
function HS.load(r, s, ms)
  r.raw = s
  local e, pl = nil, s
  if r.t == 's' and not string.find(s, '%D') then
    e = HS.expiry(s)
  else
    e, pl = string.match(s, '^(%d+)|(.*)$')
    e = e and tonumber(e)
  end
  if not e then
    -- Not of this format: gcra sees the bytes (and refuses them as no
    -- TAT).
    r.v = s
    return
  end
  if e ~= 0 and e < ms then
    return -- expired: absent, as the key was
  end
  r.x, r.v = e, pl
end

-- A record absent from the string, at its old key r.key (upgrade): its state
-- and expiry, as the old key holds them.
function HS.load_old(r, ms)
  local rp = HS.rp
  local v = rp('GET', r.key)
  if type(v) == 'table' then -- an error: a key of another type
    r.t, r.v, r.old = 'x', true, true
    return
  end
  if not v then
    return
  end
  local t = rp('PTTL', r.key)
  r.v, r.old = v, true
  r.x = (type(t) == 'number' and t > 0) and ms + t or 0
end

-- The records of a state string s into RF (fields) and RV (values), in
-- order: their count, or nil when s is not a sequence of records
-- "<L>:<field>=<value>;" (L the field's length in decimal, no leading
-- zero; a value holds no ";").
function HS.records(s, RF, RV)
  local find, sub, byte = string.find, string.sub, string.byte
  local p, c, len = 1, 0, #s
  while p <= len do
    local q = find(s, ':', p, true)
    if not q or q == p or q - p > 9 or not find(s, '^[1-9]%d*:', p) then
      return nil
    end
    local e = q + tonumber(sub(s, p, q - 1)) -- the field's last byte
    if byte(s, e + 1) ~= 61 then -- "="
      return nil
    end
    local z = find(s, ';', e + 2, true)
    if not z then
      return nil
    end
    c = c + 1
    RF[c], RV[c] = sub(s, q + 1, e), sub(s, e + 2, z - 1)
    p = z + 1
  end
  return c
end

-- Starts a group whose keys are K[k0 .. k0 + n - 1], their algorithms
-- W[w0], W[w0 + 6] ...: loads the states of those of the state-string
-- form (but a level named HS.OWN), one GET per string (one: a group's
-- keys share their identity's tag), and the upgrade's reads. The string's
-- records wait in HS.docs (by string) for HS.finish, which writes it whole.
function HS.begin(K, k0, n, W, w0)
  local st, recs, c, own = HS.st, HS.recs, 0, HS.OWN
  for i = 1, n do
    local key = K[k0 + i - 1]
    local p = W[w0 + 6 * i - 6] ~= own and HS.parse(key)
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
  local done, absent, nd = 0, 0, 0
  while done < c do
    -- The next string's records.
    local h = nil
    for i = 1, c do
      if not recs[i].seen then
        h = recs[i].h
        break
      end
    end
    if h == nil then
      break
    end
    nd = nd + 1
    local doc = HS.dpool[nd]
    if doc == nil then
      doc = {f = {}, v = {}}
      HS.dpool[nd] = doc
    end
    doc.h, doc.n = h, 0
    HS.docs[h] = doc
    local got, err = HS.rp('GET', h), nil
    if type(got) == 'table' then
      err = got.err or HS_WRONG
    elseif got then
      doc.n = HS.records(got, doc.f, doc.v)
      if doc.n == nil then
        doc.n, err = 0, HS_WRONG
      end
    end
    doc.found = got and not err
    for i = 1, c do
      local r = recs[i]
      if r.h == h then
        r.seen = true
        done = done + 1
        if err then
          r.t, r.err = 'e', err
        else
          local F = doc.f
          for j = 1, doc.n do
            if F[j] == r.f then
              HS.load(r, doc.v[j], ms)
              break
            end
          end
        end
        if r.v == false and not r.err then
          absent = absent + 1
        end
      end
    end
  end
  HS.nd = nd
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
  for j = 1, HS.nd do
    HS.docs[HS.dpool[j].h] = nil
  end
  HS.nd = 0
end

-- A state's record value. A gcra TAT (decimal ns) is written alone and
-- expires with itself (HS.expiry), which the direct path reads and
-- writes without any arithmetic; but only on the node's clock (a test
-- that steps time keeps the expiry its SET gave, in the node's time, as
-- "<expire_at_ms>|<TAT>").
function HS.encode(r)
  local pl = r.v
  if HS.real and #pl > 6 and not string.find(pl, '%D') then
    r.x = HS.expiry(pl)
    return pl
  end
  -- (A number concatenates as "%.14g": exact for a time in ms.)
  return r.x .. '|' .. pl
end

-- Ends the group: writes what changed, per state string one SET of all
-- its records (those of other paths as they were, those that expired left
-- out) expiring at the latest expire_at (PXAT; none when a record never
-- expires), or its DEL when no record is left; then deletes the old keys
-- moved. Returns nil, or the error of a write.
function HS.finish()
  local recs, c = HS.recs, HS.n
  if c == 0 then
    return nil
  end
  local rp = HS.rp
  -- Which records changed (w: a write left a state other than the value
  -- read, or moved it from its old key); a group that changed nothing
  -- writes nothing.
  local any = false
  for i = 1, c do
    local r = recs[i]
    if r.w then
      local enc = r.v ~= false and r.t ~= 'x' and HS.encode(r)
      if enc ~= r.raw and not (enc == false and r.raw == false and
                               not r.old) then
        r.w, r.enc, any = true, enc, true
      else
        r.w = false
      end
    end
  end
  if not any then
    HS.drop()
    return nil
  end
  -- A state found at its old key moves into the string with the group's
  -- writes (and the old key goes).
  for i = 1, c do
    local r = recs[i]
    if r.old and not r.w and r.v ~= false and r.t ~= 'x' then
      r.w, r.enc = true, HS.encode(r)
    end
  end
  local ms, S = HS.now(), HS.S
  for j = 1, HS.nd do
    local doc = HS.dpool[j]
    local h, ns, top, never, olds, no = doc.h, 0, 0, false, HS.O, 0
    local changed = false
    for i = 1, c do
      local r = recs[i]
      if r.h == h then
        changed = changed or r.w
        if r.old and r.t ~= 'x' then
          no = no + 1
          olds[no] = r.key
        end
      end
    end
    if changed then
      -- The string's records in their order, then the group's new ones.
      local F, V, seen = doc.f, doc.v, HS.seen
      for i = 1, doc.n do
        local f, v = F[i], V[i]
        local r = HS.st[h .. f]
        if r and r.h == h then
          seen[f] = true
          if r.w then
            v = r.enc
          end
        end
        if v then
          local e = HS.expiry(v)
          if e == nil or e == 0 then
            never = true
          elseif e < ms then
            v = false -- expired: left out
          elseif e > top then
            top = e
          end
        end
        if v then
          S[ns + 1], ns = #f .. ':' .. f .. '=' .. v .. ';', ns + 1
        end
      end
      for i = 1, c do
        local r = recs[i]
        if r.h == h and not seen[r.f] and r.enc then
          local x = r.x
          if x == 0 then
            never = true
          elseif x > top then
            top = x
          end
          S[ns + 1], ns = #r.f .. ':' .. r.f .. '=' .. r.enc .. ';', ns + 1
        end
      end
      for i = 1, doc.n do
        seen[F[i]] = nil
      end
      local x
      if ns == 0 then
        x = doc.found and rp('DEL', h) or 0
      elseif never then
        x = rp('SET', h, table.concat(S, '', 1, ns))
      elseif HS.pxat then
        x = rp('SET', h, table.concat(S, '', 1, ns), 'PXAT', top)
      else
        x = rp('SET', h, table.concat(S, '', 1, ns), 'PX',
               math.max(1, top - ms))
      end
      if type(x) == 'table' and x.err then
        return x.err
      end
    end
    if no > 0 then
      rp('DEL', unpack(olds, 1, no))
    end
  end
  HS.drop()
  return nil
end

-- The emulated commands on a record r: return the reply, or nil and an
-- error text.
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
        return nil, 'ERR limiter state string: SET option not emulated'
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
    return nil, 'ERR limiter state string: ' .. tostring(cmd) ..
      ' not emulated'
  end
  return f(r, ...)
end

-- A command on a group's limit key, emulated (its reply, or nil and the
-- error text), or Redis's (`redis`: HS.rc or HS.rp) on any other key.
function HS.run(redis, cmd, key, ...)
  local r = HS.st[key]
  if r == nil then
    if key == nil then -- TIME: no nil argument
      return redis(cmd)
    end
    return redis(cmd, key, ...)
  end
  -- A key of a wrong or unreadable type takes HS.op's checks.
  local f = r.t ~= 'e' and r.t ~= 'x' and HS.ops[cmd]
  if f then
    return f(r, ...)
  end
  return HS.op(r, cmd, ...)
end

-- R_CALL and R_PCALL while limiter.lua runs: HS.run, an emulated error
-- raised or returned as Redis's would be.
function HS.call(cmd, key, ...)
  local v, err = HS.run(HS.rc, cmd, key, ...)
  if v == nil then
    error({err = err})
  end
  return v
end

function HS.pcall(cmd, key, ...)
  local v, err = HS.run(HS.rp, cmd, key, ...)
  if v == nil then
    return {err = err}
  end
  return v
end
