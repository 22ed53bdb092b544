-- LIMITER CHECK / PEEK and their refunds, atomically inside Redis: every
-- limit of one request that lives in one hash-tag slot, whatever its
-- algorithm, decided in one call, all or nothing. The C twins are
-- algorithms/<name>.c; differential tests keep each pair equal.
--
-- KEYS     k_1 .. k_n   one key per limit ("<base>#<i>:<algorithm>")
--          KEYS[n + 1]  the override hash of the slot's identity
--                       ("<prefix>{tag}#overrides", LIMITER OVERRIDE)
-- ARGV     [1] mode: "check" (decide, write when every limit admits),
--              "peek" (decide, write nothing) or "refund" (undo what a
--              check wrote, because another slot refused)
--          [2] now in microseconds since the epoch, or "" for the node's
--              TIME (the proxy always sends ""; tests step time with it)
--          [3] cost, an integer >= 0 (gcra has it folded into INC)
--          then for each key 6 values: algorithm, four parameters ("" when
--          unused), and the undo token a check returned (refund only)
--          then m, the override fields to verify, and m pairs (path, what
--          the proxy assumed the field holds, "" for nothing)
-- Parameters per algorithm (the units of conf/limits.h):
--          gcra             inc_s inc_ns dvt_s dvt_ns (see lua/gcra.lua)
--          token_bucket     capacity refill_per_sec_micro|inf
--          leaky_bucket     size drip_ms drip_size
--          fixed_window     max window_ms
--          sliding_window   max window_ms resolution_ms
--          sliding_log      max window_ms min_interval_ms
--          sliding_counter  max window_ms
-- Reply    {"override", v_1 .. v_m} when an override field differs from
--          what the proxy assumed: nothing was decided or written, the
--          proxy applies the values and calls again.
--          Otherwise {limited (0|1: any limit refused), now_s, now_us,
--          e_1 .. e_n}: e_i is {stored TAT or nil} for gcra (the proxy
--          computes its five integers with the C model), else {limited,
--          limit, remaining, retry_after_us, reset_after_us, undo} (when
--          another limit refused, a limit that admitted shows its state
--          without this request, as cost 0 would), the
--          durations floored to microseconds (a decimal string when not
--          below 2^53). refund replies {0, now_s, now_us}.
-- Writes   check: each limit's state when all admit; when one refuses,
--          only the writes an algorithm makes for a refused attempt
--          (sliding_log logs it when it refused). peek writes nothing.
-- Errors   (nothing written) WRONGTYPE, a malformed stored state, bad
--          arguments.

--#include lib

-- name -> {decide = f(key, a1, a2, a3, a4, now_us, cost) -> r | nil, err,
--          refund = f(key, a1, a2, a3, a4, now_us, cost, undo)}; r has
--          limited (boolean), limit, remaining, retry, reset (us), undo
--          (a string), commit and commit_refused (functions or nil).
local ALGO = {}

--#include gcra
--#include token_bucket
--#include leaky_bucket
--#include fixed_window
--#include sliding_window
--#include sliding_log
--#include sliding_counter

local BAD_ARGS = 'ERR limiter script arguments are malformed'

-- gcra through the common interface; its entry is the stored TAT.
ALGO.gcra = {
  decide = function(key, a1, a2, a3, a4, now_us)
    local inc_s, inc_ns, dvt_s, dvt_ns = gcra_args(a1, a2, a3, a4)
    if not inc_s then
      return nil, inc_ns
    end
    local now_s, now_ns = lib_divmod(now_us, 1000000)
    now_ns = now_ns * 1000
    local raw, r_s, r_ns = gcra_read(key, now_s, now_ns)
    if raw == nil then
      return nil, WRONGTYPE
    end
    local lim, ttl_s, ttl_ns, new_s, new_ns = gcra_decide(r_s, r_ns, inc_s,
      inc_ns, dvt_s, dvt_ns, now_s, now_ns)
    if lim == nil then
      return nil, GCRA_TAT_RANGE
    end
    return {limited = lim, tat = raw, commit = function()
      gcra_store(key, raw, ttl_s, ttl_ns, new_s, new_ns)
    end}
  end,
  refund = function(key, a1, a2, a3, a4, now_us)
    local inc_s, inc_ns = gcra_args(a1, a2, a3, a4)
    if not inc_s then
      return
    end
    local now_s, now_ns = lib_divmod(now_us, 1000000)
    now_ns = now_ns * 1000
    local raw, r_s, r_ns = gcra_read(key, now_s, now_ns)
    if raw ~= nil then
      gcra_refund(key, raw, r_s, r_ns, inc_s, inc_ns, now_s, now_ns)
    end
  end,
}

--#call
local n = #KEYS - 1
local mode, cost = ARGV[1], lib_int(ARGV[3])
local m = lib_int(ARGV[4 + 6 * n])
if n < 0 or cost == nil or cost < 0 or m == nil or m < 0 or
    #ARGV ~= 4 + 6 * n + 2 * m or
    (mode ~= 'check' and mode ~= 'peek' and mode ~= 'refund') then
  return redis.error_reply(BAD_ARGS)
end
local now_us
if ARGV[2] == '' then
  local t = redis.call('TIME')
  now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now_us = lib_int(ARGV[2])
  if now_us == nil or now_us < 0 then
    return redis.error_reply(BAD_ARGS)
  end
end
local now_s, now_frac = lib_divmod(now_us, 1000000)

local algo = {}
for i = 1, n do
  algo[i] = ALGO[ARGV[4 + 6 * (i - 1)]]
  if algo[i] == nil then
    return redis.error_reply(BAD_ARGS)
  end
end

if mode == 'refund' then
  for i = 1, n do
    local b = 4 + 6 * (i - 1)
    algo[i].refund(KEYS[i], ARGV[b + 1], ARGV[b + 2], ARGV[b + 3],
                   ARGV[b + 4], now_us, cost, ARGV[b + 5])
  end
  return {0, now_s, now_frac}
end

if m > 0 then
  local fields = {}
  for j = 1, m do
    fields[j] = ARGV[4 + 6 * n + 2 * j - 1]
  end
  local have = redis.call('HMGET', KEYS[n + 1], unpack(fields))
  local differ = false
  for j = 1, m do
    have[j] = have[j] or ''
    if have[j] ~= ARGV[4 + 6 * n + 2 * j] then
      differ = true
    end
  end
  if differ then
    table.insert(have, 1, 'override')
    return have
  end
end

local res, limited = {}, false
for i = 1, n do
  local b = 4 + 6 * (i - 1)
  local r, err = algo[i].decide(KEYS[i], ARGV[b + 1], ARGV[b + 2],
                                ARGV[b + 3], ARGV[b + 4], now_us, cost)
  if r == nil then
    return redis.error_reply(err)
  end
  res[i] = r
  limited = limited or r.limited
end

-- A refused check consumes nothing: the limits that would have admitted
-- report their state without this request (gcra's is computed by the
-- proxy from the stored TAT).
local shown = res
if limited and cost > 0 then
  shown = {}
  for i = 1, n do
    shown[i] = res[i]
    if not res[i].limited and res[i].tat == nil then
      local b = 4 + 6 * (i - 1)
      shown[i] = algo[i].decide(KEYS[i], ARGV[b + 1], ARGV[b + 2],
                                ARGV[b + 3], ARGV[b + 4], now_us, 0)
    end
  end
end

if mode == 'check' then
  for i = 1, n do
    local f = res[i].commit
    if limited then
      f = res[i].limited and res[i].commit_refused or nil
    end
    if f then
      f()
    end
  end
end

local reply = {limited and 1 or 0, now_s, now_frac}
for i = 1, n do
  local r = shown[i]
  if r.tat ~= nil then
    reply[3 + i] = {r.tat}
  else
    reply[3 + i] = {r.limited and 1 or 0, r.limit, r.remaining, r.retry,
                    r.reset, r.undo or ''}
  end
end
return reply
