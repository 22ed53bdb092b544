-- GCRA as redis-cell's CL.THROTTLE, atomically inside Redis (the C twin is
-- algorithms/gcra.c; a differential test keeps them equal). One call checks
-- one key (CL.THROTTLE) or several batched calls (mode "each"); LIMITER
-- CHECK runs the same algorithm through limiter.lua.
--
-- KEYS     the limiter keys (any bytes), n >= 1
-- ARGV     for each key, inc_s inc_ns dvt_s dvt_ns: INC = EI * Q and
--          DVT = EI * (B + 1), split as s = floor(d / 1e9), 0 <= ns < 1e9
--          (proxy-computed); then optionally a mode: "check" (default),
--          "peek" (decide, write nothing), "refund" (take INC back from
--          each stored TAT: undoes a check that another slot refused) or
--          "each" (independent calls batched together: see below).
--          With no KEYS, "each" only: the n keys follow it in ARGV (a
--          batch of keys of several slots on one cluster node, which
--          declared keys could not carry; the library's functions allow
--          it with the flag allow-cross-slot-keys).
-- Reply    {limited (0|1: any key refused), now_s, now_us, then each key's
--          stored TAT as given or nil}; the proxy computes the five
--          integers from these with the C model. refund replies {0, now_s,
--          now_us}.
-- Writes   check, only when every key admits: SET key <new TAT in ns> PX
--          trunc(ttl / 1 ms), or DEL key when that is 0 ms (redis-cell sets
--          an expiry of 0).
-- Errors   (nothing written) WRONGTYPE when a key holds anything but a
--          decimal int64; the TAT range error when a new TAT > INT64_MAX; a
--          negative INC; malformed ARGV.
-- Cost     per key one GET, plus one SET (or DEL) when it admits: a refused
--          key is read once and not written.
--
-- The lines before "--#call" are definitions only (the FUNCTION library
-- runs them once, at load); the lines after it are one call (the body of
-- the library's function). A script runs the whole file each time.

--#include lib
--#include gcra

-- The arguments of keys 1..n, parsed into the four arrays (when given);
-- nil and the error text when one is malformed. Batched keys mostly share
-- one limit: the same four strings (Lua strings are interned, so comparing
-- them is comparing pointers) are not parsed again.
local function GCRA_E_args(ARGV, n, inc_s, inc_ns, dvt_s, dvt_ns)
  local pa, pb, pc, pd = false, false, false, false -- ARGV holds no false
  local x, y, z, w
  for i = 1, n do
    local b = 4 * i - 4
    local a1, a2, a3, a4 = ARGV[b + 1], ARGV[b + 2], ARGV[b + 3], ARGV[b + 4]
    if a1 ~= pa or a2 ~= pb or a3 ~= pc or a4 ~= pd then
      x, y, z, w = gcra_args(a1, a2, a3, a4)
      if not x then
        return nil, y
      end
      pa, pb, pc, pd = a1, a2, a3, a4
    end
    if inc_s then
      inc_s[i], inc_ns[i], dvt_s[i], dvt_ns[i] = x, y, z, w
    end
  end
  return true
end

-- Mode "each": independent calls batched by the proxy (CL.THROTTLE): each
-- key in turn, each seeing the writes of the ones before (a key may
-- repeat). Key i is K[k0 + i] (KEYS, or ARGV after "each" when the keys
-- were not declared). Reply {0, now_s, now_us, raw_1..raw_n,
-- flag_1..flag_n}, flag 0 admitted, 1 refused, -1 not a TAT (WRONGTYPE),
-- -2 TAT out of range, -3 not served by this node (not decided, nothing
-- written). The arguments were checked (GCRA_E_args); they are parsed
-- again only where they differ from the previous key's.
local function GCRA_E_each(K, k0, ARGV, n, now_s, now_us, now_ns)
  local reply = {0, now_s, now_us}
  local pa, pb, pc, pd = false, false, false, false
  local inc_s, inc_ns, dvt_s, dvt_ns
  for i = 1, n do
    local b = 4 * i - 4
    local a1, a2, a3, a4 = ARGV[b + 1], ARGV[b + 2], ARGV[b + 3], ARGV[b + 4]
    if a1 ~= pa or a2 ~= pb or a3 ~= pc or a4 ~= pd then
      inc_s, inc_ns, dvt_s, dvt_ns = gcra_args(a1, a2, a3, a4)
      pa, pb, pc, pd = a1, a2, a3, a4
    end
    local key = K[k0 + i]
    local raw, r_s, r_ns = gcra_read(key, now_s, now_ns)
    local flag = -1
    if raw == nil and r_s then
      flag = -3
    elseif raw ~= nil then
      local limited, ttl_s, ttl_ns, s, ns = gcra_decide(r_s, r_ns, inc_s,
        inc_ns, dvt_s, dvt_ns, now_s, now_ns)
      if limited == nil then
        flag = -2
      elseif limited then
        flag = 1
      else
        flag = 0
        gcra_store(key, raw, ttl_s, ttl_ns, s, ns)
      end
    end
    reply[3 + i] = raw or false
    reply[3 + n + i] = flag
  end
  return reply
end

-- The other modes see every key at once: all read, then all decided.
local function GCRA_E_all(KEYS, mode, n, inc_s, inc_ns, dvt_s, dvt_ns, now_s,
                          now_us, now_ns)
  local raw, rel_s, rel_ns = {}, {}, {}
  for i = 1, n do
    raw[i], rel_s[i], rel_ns[i] = gcra_read(KEYS[i], now_s, now_ns)
    if raw[i] == nil then
      return redis.error_reply(rel_s[i] or WRONGTYPE)
    end
  end

  if mode == 'refund' then
    for i = 1, n do
      gcra_refund(KEYS[i], raw[i], rel_s[i], rel_ns[i], inc_s[i], inc_ns[i],
                  now_s, now_ns)
    end
    return {0, now_s, now_us}
  end

  local limited = false
  local ttl_s, ttl_ns, new_s, new_ns = {}, {}, {}, {}
  for i = 1, n do
    local lim
    lim, ttl_s[i], ttl_ns[i], new_s[i], new_ns[i] = gcra_decide(rel_s[i],
      rel_ns[i], inc_s[i], inc_ns[i], dvt_s[i], dvt_ns[i], now_s, now_ns)
    if lim == nil then
      return redis.error_reply(GCRA_TAT_RANGE)
    end
    limited = limited or lim
  end
  if mode == 'check' and not limited then
    for i = 1, n do
      gcra_store(KEYS[i], raw[i], ttl_s[i], ttl_ns[i], new_s[i], new_ns[i])
    end
  end

  local reply = {limited and 1 or 0, now_s, now_us}
  for i = 1, n do
    reply[3 + i] = raw[i]
  end
  return reply
end

--#call
local n, K, k0, nargs = #KEYS, KEYS, 0, 4 * #KEYS + 1
if n == 0 then
  -- "each" across slots (cluster mode): the keys follow "each", undeclared.
  n = (#ARGV - 1) / 5
  K, k0, nargs = ARGV, 4 * n + 1, 5 * n + 1
end
local mode = ARGV[4 * n + 1] or 'check'
if n < 1 or n % 1 ~= 0 or #ARGV > nargs or (K ~= KEYS and mode ~= 'each') or
    (mode ~= 'check' and mode ~= 'peek' and mode ~= 'refund' and
     mode ~= 'each') then
  return redis.error_reply(GCRA_BAD_ARGS)
end
if mode == 'each' then
  local ok, err = GCRA_E_args(ARGV, n)
  if not ok then
    return redis.error_reply(err)
  end
  local t = redis.call('TIME')
  local now_s, now_us = tonumber(t[1]), tonumber(t[2])
  return GCRA_E_each(K, k0, ARGV, n, now_s, now_us, now_us * 1000)
end
local inc_s, inc_ns, dvt_s, dvt_ns = {}, {}, {}, {}
local ok, err = GCRA_E_args(ARGV, n, inc_s, inc_ns, dvt_s, dvt_ns)
if not ok then
  return redis.error_reply(err)
end
local t = redis.call('TIME')
local now_s, now_us = tonumber(t[1]), tonumber(t[2])
return GCRA_E_all(KEYS, mode, n, inc_s, inc_ns, dvt_s, dvt_ns, now_s, now_us,
                  now_us * 1000)
