-- GCRA as redis-cell's CL.THROTTLE, atomically inside Redis (the C twin is
-- algorithms/gcra.c; a differential test keeps them equal). One call checks
-- one key or several that must all admit (modes check, peek, refund), or
-- decides the independent CL.THROTTLE calls the proxy batched (mode
-- "runs"); LIMITER CHECK runs the same algorithm through limiter.lua.
--
-- KEYS     the limiter keys (any bytes), n >= 1
-- ARGV     for each key, inc_s inc_ns dvt_s dvt_ns: INC = EI * Q and
--          DVT = EI * (B + 1), split as s = floor(d / 1e9), 0 <= ns < 1e9
--          (proxy-computed); then optionally a mode: "check" (default),
--          "peek" (decide, write nothing) or "refund" (take INC back from
--          each stored TAT: undoes a check that another slot refused).
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
-- Mode "runs": independent calls batched together, each key decided in
-- turn, each seeing the writes of the ones before (a key may repeat).
-- KEYS     k_1 .. k_n; or none, and the n keys follow the runs in ARGV (a
--          batch of keys of several slots on one cluster node, which
--          declared keys could not carry; the library's functions allow it
--          with the flag allow-cross-slot-keys)
-- ARGV     "runs", R, then R runs of five: count, inc_s, inc_ns, dvt_s,
--          dvt_ns: the next `count` keys share those four (batched calls
--          mostly share one limit, so Redis parses it once, not per key);
--          the counts add up to n
-- Reply    {0, now_s, now_us, raw_1 .. raw_n, bits_1 .. bits_w}: raw_i
--          the key's stored TAT as given or nil, or in its place an
--          integer when the key was not decided: -1 not a TAT
--          (WRONGTYPE), -2 TAT out of range, -3 not served by this node
--          (nothing written); bits_j, w = ceil(n / 48), says which keys
--          were refused: key i's is bit (i - 1) % 48 of bits_(1 + (i - 1)
--          // 48). (A flag per key was n more elements, and Redis converts
--          each element of a script's reply with a table lookup and a
--          reply write: 2.7 % of a decision.)
-- Cost     as above, except that on Redis 7 a missing key (that would be
--          admitted) is read and written by one SET ... NX GET, and a key
--          in use that the fast path admits is written by PSETEX.
-- Errors   one for the whole call, nothing written: malformed runs or
--          arguments.
--
-- The lines before "--#call" are definitions only (the FUNCTION library
-- runs them once, at load); the lines after it are one call (the body of
-- the library's function). A script runs the whole file each time.

--#include lib
--#include gcra

-- The arguments of keys 1..n, parsed into the four arrays; nil and the
-- error text when one is malformed.
local function GCRA_E_args(ARGV, n, inc_s, inc_ns, dvt_s, dvt_ns)
  for i = 1, n do
    local b = 4 * i - 4
    local x, y, z, w = gcra_args_memo(ARGV[b + 1], ARGV[b + 2],
                                      ARGV[b + 3], ARGV[b + 4])
    if not x then
      return nil, y
    end
    inc_s[i], inc_ns[i], dvt_s[i], dvt_ns[i] = x, y, z, w
  end
  return true
end

-- One key of mode "runs" under one limit (its four values) that the fast
-- path left to the general one, v being its value as GET reads it (the
-- caller's read, which wrote nothing): its raw TAT (or false) and its
-- flag.
local function GCRA_E_one(key, v, inc_s, inc_ns, dvt_s, dvt_ns, now_s, now_ns)
  local raw, limited, ttl_s, ttl_ns, s, ns = gcra_decide_v(v, inc_s, inc_ns,
    dvt_s, dvt_ns, now_s, now_ns)
  if raw == nil then
    return false, limited and -3 or -1
  elseif limited == nil then
    return raw, -2
  elseif limited then
    return raw, 1
  end
  gcra_store(key, raw, ttl_s, ttl_ns, s, ns)
  return raw, 0
end

-- Mode "runs" (the header's second part). GCRA_RUN holds each run's
-- count and four values (5 numbers a run) from the structure check to the
-- decisions (kept for the next call up to 64 runs, as the proxy sends).
local GCRA_RUN = {}

local function GCRA_E_runs(KEYS, ARGV)
  local R, nargv = lib_int(ARGV[2]), #ARGV
  if not R or R < 1 or 2 + 5 * R > nargv then
    return redis.error_reply(GCRA_BAD_ARGS)
  end
  -- The whole structure first: a malformed batch writes nothing. What it
  -- parses waits in GCRA_RUN for the decisions (a second parse, even
  -- through the memos, costs Redis more than keeping five numbers).
  local n, P = 0, R <= 64 and GCRA_RUN or {}
  for r = 1, R do
    local b, x = 5 * r - 2, 5 * r - 5
    local count = lib_int(ARGV[b])
    if not count or count < 1 then
      return redis.error_reply(GCRA_BAD_ARGS)
    end
    local inc_s, inc_ns, dvt_s, dvt_ns = gcra_args_memo(ARGV[b + 1],
      ARGV[b + 2], ARGV[b + 3], ARGV[b + 4])
    if not inc_s then
      return redis.error_reply(inc_ns)
    end
    P[x + 1], P[x + 2], P[x + 3], P[x + 4], P[x + 5] = count, inc_s, inc_ns,
      dvt_s, dvt_ns
    n = n + count
  end
  local K, k0 = KEYS, 0
  if #KEYS == 0 then
    K, k0 = ARGV, 2 + 5 * R
  end
  if #K ~= k0 + n or (K == KEYS and nargv ~= 2 + 5 * R) then
    return redis.error_reply(GCRA_BAD_ARGS)
  end

  local now_s, now_us = lib_time(R_CALL('TIME'))
  local now_ns = now_us * 1000
  local reply = LIB_REPLY
  reply[1], reply[2], reply[3] = 0, now_s, now_us
  local words = (n + 47 - (n + 47) % 48) / 48
  for w = 1, words do
    reply[3 + n + w] = 0
  end
  -- R_CALL, R_PCALL and the string functions as locals, in a loop run
  -- once per key (a global's field costs Redis two table lookups).
  local i, call_, pcall_ = 0, R_CALL, R_PCALL
  local find, sub, format, floor = string.find, string.sub, string.format,
    math.floor
  for r = 1, R do
    local x = 5 * r - 5
    local count, inc_s, inc_ns, dvt_s, dvt_ns = P[x + 1], P[x + 2], P[x + 3],
      P[x + 4], P[x + 5]
    local f_now, f_thr, f_top, f_val, f_ms, f_lo, f_fmt = gcra_fast(inc_s,
      inc_ns, dvt_s, dvt_ns, now_s, now_ns)
    local nx, inc = f_now and GCRA_NX_GET, inc_s * GCRA_NS + inc_ns
    for _ = 1, count do
      i = i + 1
      local key, v = K[k0 + i], nil
      if nx then
        -- gcra_fast_read, inline: a call costs Redis about 700
        -- instructions, 4 % of what a new key's check costs here.
        v = pcall_('SET', key, f_val, 'NX', 'PX', f_ms, 'GET')
      else
        v = pcall_('GET', key)
      end
      -- Decided here, without a function call (a call of a dozen
      -- arguments costs Redis about a thousand instructions): a new key,
      -- admitted by its read (most keys of a batch), then the fast path's
      -- classes (gcra_fast_class and gcra_fast_ahead, inline: a key in use
      -- costs Redis 2,000 instructions less); the general path takes the
      -- rest.
      if v == false and nx then
        reply[3 + i] = false
      else
        local flag
        if not f_now then
          flag = nil
        elseif not v then
          flag = 0
        elseif #v == 19 and find(v, '^%d*$') then
          -- (v is a string: an error table's # is 0.)
          if v <= f_now then
            flag = 0
          elseif v <= f_thr then
            flag = 2
          elseif v <= f_top then
            flag = 1
          end
        end
        if flag == 2 then
          local val, ms = false, false
          if f_lo then
            local low = tonumber(sub(v, 5))
            local new = low + inc
            if low > f_lo and new < 1e15 then
              val, ms = format(f_fmt, new), format('%d', floor((new - f_lo) /
                                                               1000000))
            end
          end
          if not val then
            val, ms = gcra_fast_ahead(v, inc_s, inc_ns, now_s, now_ns, false,
                                      false)
          end
          -- PSETEX is SET ... PX without SET's option parsing, and its
          -- one key is found without SET's key procedure (a cluster node
          -- asks it for every command a script runs): about 600 of Redis's
          -- instructions a write, 1 % of a batch's decisions.
          call_('PSETEX', key, ms, val)
          reply[3 + i] = v
        elseif flag then
          if flag == 0 then
            call_('PSETEX', key, f_ms, f_val)
          end
          reply[3 + i] = v
        else
          local raw
          raw, flag = GCRA_E_one(key, v, inc_s, inc_ns, dvt_s, dvt_ns, now_s,
                                 now_ns)
          reply[3 + i] = flag < 0 and flag or raw
        end
        if flag == 1 then
          local b = (i - 1) % 48
          local w = 4 + n + (i - 1 - b) / 48
          -- 2^b is exact: a double holds the 48 bits of a word.
          reply[w] = reply[w] + 2 ^ b
        end
      end
    end
  end
  return lib_reply(3 + n + words)
end

-- The modes check, peek and refund see every key at once: all read, then
-- all decided.
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
if not R_CALL then
  R_CALL, R_PCALL = redis.call, redis.pcall
end
if ARGV[1] == 'runs' then
  return GCRA_E_runs(KEYS, ARGV)
end
local n = #KEYS
local mode = ARGV[4 * n + 1] or 'check'
if n < 1 or #ARGV > 4 * n + 1 or
    (mode ~= 'check' and mode ~= 'peek' and mode ~= 'refund') then
  return redis.error_reply(GCRA_BAD_ARGS)
end
local inc_s, inc_ns, dvt_s, dvt_ns = {}, {}, {}, {}
local ok, err = GCRA_E_args(ARGV, n, inc_s, inc_ns, dvt_s, dvt_ns)
if not ok then
  return redis.error_reply(err)
end
local now_s, now_us = lib_time(R_CALL('TIME'))
return GCRA_E_all(KEYS, mode, n, inc_s, inc_ns, dvt_s, dvt_ns, now_s, now_us,
                  now_us * 1000)
