-- LIMITER CHECK / PEEK and their refunds, atomically inside Redis: every
-- limit of one request that lives in one hash-tag slot, whatever its
-- algorithm, decided in one call, all or nothing. The C twins are
-- algorithms/<name>.c; differential tests keep each pair equal.
--
-- KEYS     k_1 .. k_n   one key per limit ("<base>#<i>:<algorithm>"); a
--                       gcra key "<prefix>{<tag>}<rest>#<i>:gcra" names
--                       the record "<rest>#<i>:gcra" of the state string
--                       "<prefix>{<tag>}" (hstate.lua: the state format,
--                       and the previous release's keys read once); any
--                       other algorithm's is a key of its own, as is a
--                       gcra key whose algorithm the proxy names
--                       "gcra.key" (a level below a second "*")
--          KEYS[n + 1]  the override hash of the slot's identity
--                       ("<prefix>{tag}#overrides", LIMITER OVERRIDE)
-- ARGV     [1] mode: "check" (decide, write when every limit admits),
--              "peek" (decide, write nothing) or "refund" (undo what a
--              check wrote, because another slot refused) or "adjust"
--              (LIMITER ADJUST: [3] is then a delta of either sign, |delta|
--              <= 2^53 - 1; each limit's state is first validated by a
--              decision of cost 0, then moved by the delta, never refused:
--              see docs/limiter.md; the reply is a check's, each entry a
--              peek of cost 1 after the change, its undo '') or
--              "reset" (LIMITER RESET: every limit's state goes, its
--              record, its own key and its previous release's key; no
--              override pairs are verified; the reply is the number of
--              records and keys deleted)
--          [2] now in microseconds since the epoch, or "" for the node's
--              TIME (the proxy always sends ""; tests step time with it);
--              either after a "!" when a state missing from its string is
--              not looked up at its old key (limiter_read_old_keys no);
--              every mode reads it so. Expiries are the node's clock.
--          [3] cost, an integer >= 0 (gcra has it folded into INC); a
--              check with WAIT sends "<cost>:<wait_us>" (wait_us >= 1):
--              a token_bucket or leaky_bucket limit that would refuse
--              but is due within wait_us reserves (takes its cost now,
--              as its decide_wait in C: the entry says limited with its
--              retry_after, and the limit counts as admitting, so the
--              group writes); gcra has its wait folded into DVT
--          then for each key 6 values: algorithm, four parameters ("" when
--          unused), and a tag: for refund the undo token a check returned;
--          for check and peek the limit's shadow level: "" for a real
--          limit, else any name, shared by the limits of one shadow level
--          then m, the override fields to verify, and m pairs (path, what
--          the proxy assumed the field holds, "" for nothing); or, in
--          place of m, the word "keys" and no pairs: the fields are the
--          paths of the group's keys (a key "<prefix>{<tag>}<rest>#<i>:
--          <algorithm>" names the path "<tag><rest>"; consecutive keys of
--          one path name it once), and none may hold a value. They are
--          read only when the override hash may exist: a batch that finds
--          none of its hashes reads no field and makes no path. A key of
--          another form fails its group when its override hash exists.
-- Parameters per algorithm (the units of conf/limits.h):
--          gcra             inc_s inc_ns dvt_s dvt_ns (see lua/gcra.lua)
--          token_bucket     capacity refill_per_sec_micro|inf
--          leaky_bucket     size drip_ms drip_size
--          fixed_window     max window_ms|-1 day|-2 week|-3 month [tz_min]
--          sliding_window   max window_ms resolution_ms
--          sliding_log      max window_ms min_interval_ms
--          sliding_counter  max window_ms
--          concurrency      max lease_ms token op: token the CHECK's ID
--                           ("" for none: a PEEK without ID), op
--                           "release" for LIMITER RELEASE (sent in mode
--                           "check", the path's concurrency limits only;
--                           each entry's undo is "1" when the token held
--                           a slot there, else "0"), else ""
-- Reply    {"override", v_1 .. v_m} when an override field differs from
--          what the proxy assumed: nothing was decided or written, the
--          proxy applies the values and calls again.
--          Otherwise {limited (0|1: any real limit refused), now_s, now_us,
--          e_1 .. e_n}: e_i is {stored TAT or nil} for gcra (the proxy
--          computes its five integers with the C model), else {limited,
--          limit, remaining, retry_after_us, reset_after_us, undo} (a
--          limit that admitted but takes nothing, because a real limit or
--          a limit of its shadow level refused, shows its state without
--          this request, as cost 0 would), the
--          durations floored to microseconds (a decimal string when not
--          below 2^53). refund replies {0, now_s, now_us}.
-- Writes   check: when every real limit admits, each limit's state but
--          those of a shadow level that refused (a shadow level never
--          refuses the call: it takes its cost only when it and every real
--          limit admit); when a real limit refuses, nothing; in both cases
--          also the writes an algorithm makes for a refused attempt
--          (sliding_log logs it when it refused, shadow or not). peek
--          writes nothing.
-- Errors   (nothing written) WRONGTYPE, a malformed stored state, bad
--          arguments.
--
-- Mode "each": the groups of many LIMITER calls in one call (the proxy
-- sends the CHECK/PEEK calls of one loop turn to a node together). Each
-- group is decided as one call of the form above would decide it, in
-- order, each seeing the writes of the groups before it (a key may
-- repeat), all at one `now`.
-- KEYS     for each group in order: its n_g limit keys, then its override
--          hash (n_g + 1 keys per group); or none, and the same keys
--          follow the groups' arguments in ARGV (groups of several slots on
--          one cluster node, which declared keys could not carry; the
--          library's functions allow it with allow-cross-slot-keys)
-- ARGV     [1] "each"
--          [2] now, as above ("": the node's TIME, read once per call)
--          [3] G, the number of groups (>= 1)
--          then for each group: mode (any of the first part's), cost,
--          n_g, 6 values per limit (as above), m_g and m_g override pairs
--          (as above: or "keys" and none)
-- Reply    {0, now_s, now_us, r_1 .. r_G}: r_g is exactly what the call of
--          that group alone returns ({limited, now_s, now_us, e...},
--          {"override", v...} or {0, now_s, now_us}), or an error element
--          when that group failed (bad arguments of its own, WRONGTYPE, a
--          malformed state, a slot this node does not serve: nothing of
--          it written); the other groups are decided all the same.
-- Errors   one error for the whole call, nothing written, when the
--          structure is malformed: G or an n_g that is no integer >= 0,
--          an m_g that is neither that nor "keys", or counts that do not
--          add up to #ARGV and #KEYS.
--
-- Mode "shapes": the batch of mode "each" with each distinct block of
-- levels sent once (the groups of a batch mostly share their tree node, so
-- all they differ in is their keys and override fields, which name the
-- identity), and a flat reply (Redis converts every table of a reply with
-- several lookups, which cost more than a decision's own Lua).
-- KEYS     as in mode "each" (or none, the keys then after the groups)
-- ARGV     [1] "shapes"
--          [2] now, as above
--          [3] S, the number of shapes (>= 1)
--          then S shapes, each a group's arguments in mode "each" but
--          its override pairs: mode, cost, n, 6 values per limit, m
--          then G (>= 1) and for each group its shape (1 .. S; left out
--          when S is 1) and its shape's m override pairs (every argument
--          a group repeats costs Redis about as much as a decision's
--          arithmetic)
-- Reply    {0, now_s, now_us, then each group's elements}: a group that
--          was decided gives its limited (0|1) then its entries, each
--          gcra entry one element (the stored TAT or nil) and any other
--          the 6 elements of its table; any other group one element: its
--          error, its {"override", v...} or its refund's {0, now_s,
--          now_us}. Errors as in mode "each".
--
-- The lines before "--#call" are definitions only (the FUNCTION library
-- runs them once, at load); the lines after it are one call (the body of
-- the library's function). A script runs the whole file each time.

--#include lib
--#include hstate

-- name -> {
--   decide = f(key, a1, a2, a3, a4, now_us, cost, now_s, now_ns, wait_us)
--     (wait_us: a check's WAIT, nil or 0 for none; only the buckets
--     reserve)
--     -> nil, err
--     -> limited (boolean), e, when, w1 .. w6: e is the limit's reply
--        entry; when says when commit(key, w1 .. w6) writes the decision:
--        1 when every limit of the group admits, 2 when this limit refused
--        (sliding_log logs refused attempts), nil never,
--   commit = f(key, w1 .. w6),
--   refund = f(key, a1, a2, a3, a4, now_us, cost, undo, now_s, now_ns),
--   adjust = f(key, a1, a2, a3, a4, now_us, delta, now_s, now_ns) -> e
--     (the entry of a peek of cost 1 after the change it wrote; gcra:
--     true, its entry decide's) or nil, err; nil: no ADJUST,
--   fixed = true when its entry shows the stored state as it was read
--     (gcra: the proxy computes the five integers), so a refusal of another
--     limit needs no second look; its entry is then one value, the others'
--     a table of 6 }
-- Plain values, no closure per decision: the write waits in LIM_W.
local ALGO = {}

-- Algorithms other than gcra may also offer a check of one real level
-- fused into one function (LIM_one_shape's most common group, whose
-- layers cost Redis more than the decision): prep(a1, a2, a3, a4) -> p1,
-- p2, the parsed parameters (nil: malformed), once per batch; and
-- one(key, h, p1, p2, now, cost, out, o), h the key's HGETALL (every such
-- algorithm keeps a hash; the read is the caller's), which decides and
-- writes exactly as decide and commit would for that group, puts its flat
-- reply after out[o] and returns its last index (LIM_fused_end ends it and
-- writes), or returns false, having written nothing, when the general
-- path must decide it (a read that failed, a malformed state). It writes
-- last, through redis.pcall (sliding_window's write of several commands
-- in a pcall of its own), so an error raised before (caught: the general
-- path then decides) leaves nothing behind, and a write that fails leaves
-- the group's error element. A check of fixed window costs Redis 10 %
-- fewer instructions this way, its commands included.

-- The text of an error raised inside a group (a redis.call error table or
-- a Lua error).
local function LIM_raised(e)
  return type(e) == 'table' and e.err or tostring(e)
end

-- Makes a fused check's reply after out[o] the group's error element
-- (text err), at o + 1, as LIM_one leaves it when a write fails; returns
-- its index.
local function LIM_fused_fail(out, o, err)
  for j = o + 2, o + 7 do
    out[j] = nil
  end
  out[o + 1] = redis.error_reply(err)
  return o + 1
end

-- The write of a fused check whose reply is after out[o], through
-- redis.pcall: HSET key f1 s1 f2 s2 [f3 s3], then PEXPIRE key ms (all
-- strings). Returns o + 7, or when a write failed the index of the
-- group's error element, at o + 1 in place of the reply, as LIM_one gives
-- it. A reply is told from an error table by its value (HSET's count of
-- new fields is 0 to 3, PEXPIRE's 0 or 1), not by type(), which costs
-- Redis 650 instructions.
local function LIM_fused_write(out, o, key, f1, s1, f2, s2, f3, s3, ms)
  local r
  if f3 then
    r = R_PCALL('HSET', key, f1, s1, f2, s2, f3, s3)
  else
    r = R_PCALL('HSET', key, f1, s1, f2, s2)
  end
  if r == 0 or r == 1 or r == 2 or r == 3 then
    r = R_PCALL('PEXPIRE', key, ms)
    if r == 1 or r == 0 then
      return o + 7
    end
  end
  return LIM_fused_fail(out, o, r.err)
end

-- Ends a fused check: its flat reply after out[o] (limited as 0|1, then
-- the entry: limited, limit, remaining, retry, reset, undo) and, when undo
-- is not '', its write (LIM_fused_write; the values numbers, formatted
-- here). Returns the reply's last index, or the group's error element's.
-- The formatted numbers come from lib_str's memo directly (a Lua call
-- costs Redis 300 to 900 instructions): with the write's checks, 4,800
-- instructions against 7,300 with lib_str and type() called.
local function LIM_fused_end(out, o, key, limited, limit, rem, retry, reset,
                             undo, ms, f1, v1, f2, v2, f3, v3)
  local l = limited and 1 or 0
  out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5], out[o + 6],
    out[o + 7] = l, l, limit, rem, retry, reset, undo
  if undo == '' then
    return o + 7
  end
  local S = LIB_STR
  return LIM_fused_write(out, o, key, f1, S[v1] or lib_str(v1), f2,
                         S[v2] or lib_str(v2), f3, f3 and
                         (S[v3] or lib_str(v3)), S[ms] or lib_str(ms))
end

-- A fused check of a missing key, learnt once a call: in a batch of one
-- shape, every group whose key is missing is decided alike (the same
-- parameters, cost and now, an empty hash), so the first such group runs
-- the shape's `one` with its write recorded (LIM_new_rec in place of
-- R_PCALL, passing each command on), and the others replay it on their
-- own keys: the reply's seven elements, then the same HSET and PEXPIRE
-- (any other command, through R_PCALL or R_CALL, drops the record). The
-- decision's Lua costs Redis more than the two commands' own: a new
-- identity's check costs 11 to 20 % fewer instructions. LIM_NEW: [1..7] the
-- reply; n, the HSET's words after its key (4 or 6; 0: no write), in
-- [8..13]; ms, the PEXPIRE's; ok, whether the record is whole.
local LIM_NEW, LIM_NEW_PCALL, LIM_NEW_CALL = {}, false, false

local function LIM_new_rec(cmd, key, a1, a2, a3, a4, a5, a6)
  local N = LIM_NEW
  if cmd == 'HSET' and a3 and not N.ok then
    N.n, N[8], N[9], N[10], N[11], N[12], N[13] = a5 and 6 or 4, a1, a2, a3,
      a4, a5, a6
    N.ok = true
  elseif cmd == 'PEXPIRE' and N.n > 0 and not N.ms then
    N.ms = a1
  else
    N.ok, N.n = false, -1 -- a write of another shape: nothing to replay
  end
  if a5 then
    return LIM_NEW_PCALL(cmd, key, a1, a2, a3, a4, a5, a6)
  elseif a3 then
    return LIM_NEW_PCALL(cmd, key, a1, a2, a3, a4)
  end
  return LIM_NEW_PCALL(cmd, key, a1)
end

-- R_CALL while a record is made: a command nothing replays.
local function LIM_new_other(...)
  LIM_NEW.ok, LIM_NEW.n = false, -1
  return LIM_NEW_CALL(...)
end

-- Runs fused (the shape's `one`, its parameters in f) for the missing key
-- `key` (h its empty HGETALL), its reply after out[o], recording it.
-- Returns what `one` returns, and whether LIM_NEW now holds a record to
-- replay (the group decided, its writes the usual HSET and PEXPIRE or
-- none).
local function LIM_new_learn(fused, f, key, h, now, out, o)
  local N = LIM_NEW
  N.n, N.ms, N.ok = 0, false, false
  LIM_NEW_PCALL, LIM_NEW_CALL = R_PCALL, R_CALL
  R_PCALL, R_CALL = LIM_new_rec, LIM_new_other
  local ok, r = pcall(fused, key, h, f.p1, f.p2, now, f.cost, out, o)
  R_PCALL, R_CALL = LIM_NEW_PCALL, LIM_NEW_CALL
  r = ok and r
  if r ~= o + 7 or N.n < 0 or (N.n > 0 and not N.ms) then
    return r, false
  end
  N[1], N[2], N[3], N[4], N[5], N[6], N[7] = out[o + 1], out[o + 2],
    out[o + 3], out[o + 4], out[o + 5], out[o + 6], out[o + 7]
  return r, true
end

-- LIM_NEW replayed for the missing key `key`, its reply after out[o];
-- returns as LIM_fused_end does.
local function LIM_new_replay(key, out, o)
  local N = LIM_NEW
  out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5], out[o + 6],
    out[o + 7] = N[1], N[2], N[3], N[4], N[5], N[6], N[7]
  if N.n == 0 then
    return o + 7
  end
  return LIM_fused_write(out, o, key, N[8], N[9], N[10], N[11],
                         N.n == 6 and N[12], N[13], N.ms)
end

--#include gcra
--#include token_bucket
--#include leaky_bucket
--#include fixed_window
--#include sliding_window
--#include sliding_log
--#include sliding_counter
--#include concurrency

local LIM_BAD_ARGS = 'ERR limiter script arguments are malformed'

-- lib_int of the short counts every group carries (its cost, n and m),
-- remembered: a table lookup instead of a pattern and a conversion. Only
-- integers of at most 3 characters are kept, so the memo stays under
-- 1200 entries whatever the calls send.
local LIM_INTS = {}
local function LIM_int(s)
  local v = LIM_INTS[s]
  if v == nil then
    v = lib_int(s)
    if v ~= nil and #s <= 3 then
      LIM_INTS[s] = v
    end
  end
  return v
end

-- A group's m: its override pairs (an integer >= 0), or -1 for the word
-- "keys" (no pairs: the fields are its keys' paths, see LIM_pairs); nil
-- when malformed.
local function LIM_m(s)
  if s == 'keys' then
    return -1
  end
  local m = LIM_int(s)
  return m and m >= 0 and m or nil
end

-- The last gcra limits parsed, each at its now: its four values and the
-- fast path's strings (gcra_fast). The groups of a batch mostly share
-- their limits (a path of two levels alternates between two), and Lua
-- strings are interned, so a hit is a few pointer comparisons; the values
-- depend on the strings and now alone, so the memo may outlive a call.
-- Four slots, refilled in turn.
local LG, LG_next = {{}, {}, {}, {}}, 1

-- The memo of a1 .. a4 at now; nil and the error text when the arguments
-- are malformed.
local function LIM_gcra(a1, a2, a3, a4, now_us, now_s, now_ns)
  for i = 1, 4 do
    local G = LG[i]
    if G.a1 == a1 and G.a2 == a2 and G.a3 == a3 and G.a4 == a4 and
        G.now == now_us then
      return G
    end
  end
  local inc_s, inc_ns, dvt_s, dvt_ns = gcra_args_memo(a1, a2, a3, a4)
  if not inc_s then
    return nil, inc_ns
  end
  local G = LG[LG_next]
  LG_next = LG_next % 4 + 1
  G.a1, G.a2, G.a3, G.a4, G.now = a1, a2, a3, a4, now_us
  G.inc_s, G.inc_ns, G.dvt_s, G.dvt_ns = inc_s, inc_ns, dvt_s, dvt_ns
  G.f_now, G.f_thr, G.f_top, G.f_val, G.f_ms, G.f_lo, G.f_fmt = gcra_fast(
    inc_s, inc_ns, dvt_s, dvt_ns, now_s, now_ns)
  return G
end

-- Whether the group being decided lets gcra write an absent key while it
-- reads it (gcra_fast_read): a check whose limits are all gcra, none of a
-- shadow level, on distinct keys. A fresh key admits, so the write stands
-- unless another limit refuses, and then LIM_run deletes it (the key was
-- absent before): one command instead of GET and SET for every new
-- identity. gcra's decide raises no error, so nothing else can leave the
-- write behind.
local LIM_NX = false

-- gcra through the common interface; its entry is the stored TAT (or
-- false), which the reply wraps ({TAT}) or, flat, writes as it is.
-- The write waits for the group's other limits: the fast path's is
-- (raw, val, ms) with val a string, the general path's (raw, ttl_s,
-- ttl_ns, new_s, new_ns); a key written at the read (LIM_NX) says when 3.
ALGO.gcra = {
  fixed = true,
  decide = function(key, a1, a2, a3, a4, now_us, cost, now_s, now_ns)
    local G, err = LIM_gcra(a1, a2, a3, a4, now_us, now_s, now_ns)
    if not G then
      return nil, err
    end
    local v, written
    if LIM_NX and G.f_now then
      v, written = gcra_fast_read(key, G.f_val, G.f_ms)
      if written then
        return false, v, 3
      end
    else
      v = R_PCALL('GET', key)
    end
    if G.f_now then
      local class = gcra_fast_class(v, G.f_now, G.f_thr, G.f_top)
      if class == 2 then
        return false, v, 1, v, gcra_fast_ahead(v, G.inc_s, G.inc_ns, now_s,
                                               now_ns, G.f_lo, G.f_fmt)
      elseif class then
        return class == 1, v, 1, v, G.f_val, G.f_ms
      end
    end
    local raw, lim, ttl_s, ttl_ns, new_s, new_ns = gcra_decide_v(v, G.inc_s,
      G.inc_ns, G.dvt_s, G.dvt_ns, now_s, now_ns)
    if raw == nil then
      return nil, lim or WRONGTYPE
    elseif lim == nil then
      return nil, GCRA_TAT_RANGE
    end
    return lim, raw, 1, raw, ttl_s, ttl_ns, new_s, new_ns
  end,
  commit = function(key, raw, a, b, c, d)
    if type(a) == 'string' then
      R_CALL('SET', key, a, 'PX', b)
    else
      gcra_store(key, raw, a, b, c, d)
    end
  end,
  -- LIMITER ADJUST (gcra_adjust): the TAT moves by delta INCs (INC is
  -- one emission interval: the proxy sends the parameters of cost 1).
  -- Returns true (its entry is decide's, which mode "adjust" asks after).
  adjust = function(key, a1, a2, a3, a4, now_us, delta, now_s, now_ns)
    local inc_s, inc_ns = gcra_args_memo(a1, a2, a3, a4)
    if not inc_s then
      return nil, inc_ns
    end
    local raw, r_s, r_ns = gcra_read(key, now_s, now_ns)
    if raw == nil then
      return nil, r_s or WRONGTYPE
    end
    if delta == 0 then
      return true
    end
    -- |delta| * INC as (p_s, p_ns); p_s nil when it passes 2^53 s.
    local inc = xint_add(xint_mul(xint_of(inc_s), xint_of(GCRA_NS)),
                         xint_of(inc_ns))
    local q, p_ns = xint_divmod(xint_mul(xint_of(math.abs(delta)), inc),
                                GCRA_NS)
    local p_s = xint_num(q)
    if delta < 0 then
      if not p_s then
        if raw and (r_s > 0 or (r_s == 0 and r_ns > 0)) then
          R_CALL('DEL', key)
        end
      else
        gcra_refund(key, raw, r_s, r_ns, p_s, p_ns, now_s, now_ns)
      end
      return true
    end
    if r_s < 0 then
      r_s, r_ns = 0, 0
    end
    -- The new TAT, at most INT64_MAX - INC (and never below the base).
    local cap_s, cap_ns = gcra_norm(GCRA_MAX_S - inc_s, GCRA_MAX_NS - inc_ns)
    local b_s, b_ns = gcra_norm(now_s + r_s, now_ns + r_ns)
    local n_s, n_ns = cap_s, cap_ns
    if p_s and p_s <= GCRA_MAX_S then
      n_s, n_ns = gcra_norm(b_s + p_s, b_ns + p_ns)
    end
    if n_s > cap_s or (n_s == cap_s and n_ns > cap_ns) then
      n_s, n_ns = cap_s, cap_ns
    end
    if n_s < b_s or (n_s == b_s and n_ns < b_ns) then
      n_s, n_ns = b_s, b_ns
    end
    local t_s, t_ns = gcra_norm(n_s - now_s, n_ns - now_ns)
    gcra_store(key, raw, t_s, t_ns, n_s, n_ns)
    return true
  end,

  refund = function(key, a1, a2, a3, a4, now_us, cost, undo, now_s, now_ns)
    local inc_s, inc_ns = gcra_args_memo(a1, a2, a3, a4)
    if not inc_s then
      return
    end
    local raw, r_s, r_ns = gcra_read(key, now_s, now_ns)
    if raw ~= nil then
      gcra_refund(key, raw, r_s, r_ns, inc_s, inc_ns, now_s, now_ns)
    elseif r_s then
      error(r_s, 0) -- not refunded: the caller must hear of it
    end
  end,
}
-- A gcra level below a second "*" (tenant:<t>:user:<u>) keeps a key of
-- its own: the proxy names its algorithm so, and HS.begin leaves its key
-- to Redis (the identity's string would hold every sub-identity's
-- records, and each check would rewrite them all).
ALGO[HS.OWN] = ALGO.gcra

-- Scratch of one group's decisions: its algorithms (LIM_A), entries
-- (LIM_E), refusals (LIM_L), shadow levels (LIM_S: the name, or false),
-- whether each takes its cost (LIM_T) and pending writes (LIM_W, 7 slots a
-- limit: when, w1 .. w6). Every group of every call writes a slot before
-- reading it; the library keeps them between calls instead of building
-- them anew.
local LIM_A, LIM_E, LIM_L, LIM_S, LIM_T, LIM_W = {}, {}, {}, {}, {}, {}

-- now (us), now_s and its microseconds from the argument ("": the node's
-- TIME); nil when malformed.
local function LIM_now(arg)
  if arg == '' then
    local s, us = lib_time(R_CALL('TIME'))
    HS.ms = s * 1000 + (us - us % 1000) / 1000
    return s * 1000000 + us, s, us
  end
  local now = lib_int(arg)
  if now == nil or now < 0 then
    return nil
  end
  local s, us = lib_divmod(now, 1000000)
  return now, s, us
end

-- Looks up the algorithms of n limits whose values start at ARGV[lb]
-- into LIM_A; false when one is unknown.
local function LIM_algos(ARGV, lb, n)
  for i = 1, n do
    local a = ALGO[ARGV[lb + 6 * i - 6]]
    if a == nil then
      return false
    end
    LIM_A[i] = a
  end
  return true
end

-- Whether the n keys from K[k0] are distinct (n is at most four, so the
-- pairwise comparison stays short).
local function LIM_distinct(K, k0, n)
  for i = 2, n do
    for j = 1, i - 1 do
      if K[k0 + i - 1] == K[k0 + j - 1] then
        return false
      end
    end
  end
  return true
end

-- LIM_NX's condition for n limits (algorithms in LIM_A, values from
-- ARGV[lb], keys from KEYS[k0]): up to four limits.
local function LIM_nx_ok(KEYS, k0, ARGV, lb, n)
  if n > 4 then
    return false
  end
  for i = 1, n do
    if LIM_A[i] ~= ALGO.gcra or ARGV[lb + 6 * i - 1] ~= '' then
      return false
    end
  end
  return LIM_distinct(KEYS, k0, n)
end

-- Deletes the keys of the first n limits that were written at their read
-- (LIM_W's when 3) and take nothing: T[i] false, or every one when T is
-- nil (the group failed).
local function LIM_undo(KEYS, k0, n, T)
  for i = 1, n do
    if LIM_W[7 * i - 6] == 3 and not (T and T[i]) then
      R_CALL('DEL', KEYS[k0 + i - 1])
    end
  end
end

-- A reply that stays whole: returned, or when flat written as one element
-- at out[o + 1] and its index returned.
local function LIM_whole(out, o, r)
  if out then
    out[o + 1] = r
    return o + 1
  end
  return r
end

-- True while LIM_groups decides a batch none of whose groups' override
-- hashes exists (one EXISTS of them all), so LIM_override_ok needs no
-- read; LIM_OVK holds the hashes' names for that EXISTS. LIM_NONE is
-- what an absent hash's fields read as.
local LIM_NOHASH, LIM_OVK, LIM_NONE = false, {}, {}

-- The override pairs of a group (n keys from K[k0], the override hash
-- after them) whose m pairs follow ARGV[mb]: that table, index and count;
-- for a group in "keys" form (m -1), pairs made in LIM_DP of its keys'
-- paths, each assumed to hold nothing. Nothing is made when no override
-- hash of the batch exists (LIM_NOHASH: no field can hold a value, so
-- there is nothing to verify, count 0): most batches read none, and a
-- path is a pattern match and a concatenation. nil when a key has no
-- path and its override hash exists.
local LIM_DP = {}
local function LIM_pairs(K, k0, n, ARGV, mb, m)
  if m >= 0 then
    return ARGV, mb, m
  elseif LIM_NOHASH then
    return ARGV, mb, 0
  end
  local c, last = 0, nil
  for i = 1, n do
    local tag, rest = string.match(K[k0 + i - 1],
                                   '^[^{}]*{([^{}]*)}(.-)#%d+:[%a_]+$')
    if tag == nil then
      if R_PCALL('EXISTS', K[k0 + n]) == 0 then
        return ARGV, mb, 0
      end
      return nil
    end
    local path = tag .. rest
    if path ~= last then
      LIM_DP[2 * c + 1], LIM_DP[2 * c + 2], c, last = path, '', c + 1, path
    end
  end
  return LIM_DP, 0, c
end

-- Decides one group whose algorithms are in LIM_A: n limits, the keys
-- from KEYS[k0] (the override hash after them), the limits' values from
-- ARGV[lb] (6 each), m override pairs after P[mb] (P: ARGV or LIM_pairs's
-- table). Returns the group's reply; or, with a table `out`, writes it
-- flat after out[o] (the header's mode "shapes") and returns the index of
-- its last element; or nil and the error (nothing written).
local function LIM_run(KEYS, k0, ARGV, mode, cost, n, lb, P, mb, m, now,
                       now_s, now_us, out, o, wait)
  local A, now_ns = LIM_A, now_us * 1000
  if mode == 'refund' then
    for i = 1, n do
      local b = lb + 6 * i - 6
      A[i].refund(KEYS[k0 + i - 1], ARGV[b + 1], ARGV[b + 2], ARGV[b + 3],
                  ARGV[b + 4], now, cost, ARGV[b + 5], now_s, now_ns)
    end
    return LIM_whole(out, o, {0, now_s, now_us})
  end

  -- Mode "reset" (LIMITER RESET): every level's state goes, its record in
  -- the state string, its own key (a sorted set's) and the previous
  -- release's key (which an absent record would otherwise bring back);
  -- the answer counts them. A state string that is not one goes whole.
  if mode == 'reset' then
    local c = 0
    for i = 1, n do
      local key = KEYS[k0 + i - 1]
      local r = HS.st[key]
      if r and r.t == 'e' then
        c = c + HS.rp('DEL', r.h)
      elseif r and r.v ~= false and not r.old then
        r.v, r.x, r.w, c = false, 0, true, c + 1
      elseif r and r.old then
        r.v, r.x, r.w = false, 0, true
      end
      c = c + HS.rc('DEL', key)
    end
    if out then
      out[o + 1] = c
      return o + 1
    end
    return c
  end

  if m == 1 then
    -- One field (a path of one level): HGET, no tables.
    local have = R_CALL('HGET', KEYS[k0 + n], P[mb + 1]) or ''
    if have ~= P[mb + 2] then
      return LIM_whole(out, o, {'override', have})
    end
  elseif m > 1 then
    local fields = {}
    for j = 1, m do
      fields[j] = P[mb + 2 * j - 1]
    end
    local have = R_CALL('HMGET', KEYS[k0 + n], unpack(fields))
    local differ = false
    for j = 1, m do
      have[j] = have[j] or ''
      if have[j] ~= P[mb + 2 * j] then
        differ = true
      end
    end
    if differ then
      table.insert(have, 1, 'override')
      return LIM_whole(out, o, have)
    end
  end

  -- Mode "adjust" (cost is the delta, of either sign; inline, as the
  -- library's top level is near Lua's 200 locals): every limit is first
  -- decided with cost 0 (a peek, which validates its parameters and
  -- state: an error ends the group with nothing written), then each
  -- algorithm's adjust writes its change. The reply is a check's
  -- ({limited, now_s, now_us, e...}, or flat after out[o]) with each
  -- entry a peek of cost 1 after the change: adjust's own, or decide's
  -- for an algorithm whose entry is its stored state (gcra, whose
  -- parameters carry the INC of cost 1); limited says whether a real
  -- limit would refuse that peek.
  if mode == 'adjust' then
    local E, L = LIM_E, LIM_L
    LIM_NX = false
    for i = 1, n do
      local b = lb + 6 * i - 6
      if A[i].adjust == nil then
        return nil, 'ERR ADJUST not supported for ' .. ARGV[b]
      end
      local lim, e = A[i].decide(KEYS[k0 + i - 1], ARGV[b + 1],
                                 ARGV[b + 2], ARGV[b + 3], ARGV[b + 4], now,
                                 0, now_s, now_ns)
      if lim == nil then
        return nil, e
      end
    end
    local limited = false
    for i = 1, n do
      local b, key = lb + 6 * i - 6, KEYS[k0 + i - 1]
      local e, err = A[i].adjust(key, ARGV[b + 1], ARGV[b + 2], ARGV[b + 3],
                                 ARGV[b + 4], now, cost, now_s, now_ns)
      if e == nil then
        error(err, 0) -- after a valid peek: a node that failed a write
      end
      local lim
      if A[i].fixed then
        lim, e = A[i].decide(key, ARGV[b + 1], ARGV[b + 2], ARGV[b + 3],
                             ARGV[b + 4], now, 1, now_s, now_ns)
      else
        lim = e[1] == 1
      end
      E[i], L[i] = e, lim
      limited = limited or (lim and ARGV[b + 5] == '')
    end
    local reply, j = out, o
    if out then
      j = o + 1
      out[j] = limited and 1 or 0
    else
      reply, j = {limited and 1 or 0, now_s, now_us}, 3
    end
    for i = 1, n do
      local e = E[i]
      if A[i].fixed then
        j = j + 1
        if out then
          out[j] = e
        else
          reply[j] = {e}
        end
      elseif out then
        out[j + 1], out[j + 2], out[j + 3], out[j + 4], out[j + 5],
          out[j + 6] = e[1], e[2], e[3], e[4], e[5], e[6]
        j = j + 6
      else
        j = j + 1
        reply[j] = e
      end
    end
    return out and j or reply
  end
  local E, L, S, T, W = LIM_E, LIM_L, LIM_S, LIM_T, LIM_W
  LIM_NX = mode == 'check' and LIM_nx_ok(KEYS, k0, ARGV, lb, n)
  local limited, refused = false, nil -- refused: shadow level -> true
  for i = 1, n do
    local b, w = lb + 6 * i - 6, 7 * i - 7
    local lim, e, when, w1, w2, w3, w4, w5, w6 = A[i].decide(
      KEYS[k0 + i - 1], ARGV[b + 1], ARGV[b + 2], ARGV[b + 3], ARGV[b + 4],
      now, cost, now_s, now_ns, ARGV[b + 5] == '' and wait or 0)
    if lim == nil then
      LIM_undo(KEYS, k0, i - 1, nil)
      return nil, e
    end
    local shadow = ARGV[b + 5] ~= '' and ARGV[b + 5]
    E[i], L[i], S[i] = e, lim, shadow
    W[w + 1], W[w + 2], W[w + 3], W[w + 4], W[w + 5], W[w + 6], W[w + 7] =
      when, w1, w2, w3, w4, w5, w6
    if not lim then
      -- admitted
    elseif shadow then
      refused = refused or {}
      refused[shadow] = true
    else
      limited = true
    end
  end
  for i = 1, n do
    T[i] = not limited and not (S[i] and refused and refused[S[i]])
  end

  -- A refused check consumes nothing, a shadow level that refused nothing
  -- of its own: the limits that admitted but take nothing report their
  -- state without this request (gcra's is computed by the proxy from the
  -- stored TAT).
  local reply, j = out, o
  if out then
    j = o + 1
    out[j] = limited and 1 or 0
  else
    reply, j = {limited and 1 or 0, now_s, now_us}, 3
  end
  for i = 1, n do
    local e = E[i]
    if A[i].fixed then
      j = j + 1
      if out then
        out[j] = e
      else
        reply[j] = {e}
      end
    else
      if not T[i] and cost > 0 and not L[i] then
        -- (A WAIT reservation that is not taken answers as the refusal it
        -- is without the wait.)
        local b = lb + 6 * i - 6
        local _
        _, e = A[i].decide(KEYS[k0 + i - 1], ARGV[b + 1], ARGV[b + 2],
                           ARGV[b + 3], ARGV[b + 4], now,
                           e[1] == 1 and cost or 0, now_s, now_ns)
      end
      if out then
        out[j + 1], out[j + 2], out[j + 3], out[j + 4], out[j + 5],
          out[j + 6] = e[1], e[2], e[3], e[4], e[5], e[6]
        j = j + 6
      else
        j = j + 1
        reply[j] = e
      end
    end
  end

  if mode == 'check' then
    LIM_undo(KEYS, k0, n, T)
    for i = 1, n do
      local w = 7 * i - 7
      local when = W[w + 1]
      if when == 2 or (when == 1 and T[i]) then
        A[i].commit(KEYS[k0 + i - 1], W[w + 2], W[w + 3], W[w + 4],
                    W[w + 5], W[w + 6], W[w + 7])
      end
    end
  end
  return out and j or reply
end

local function LIM_mode_ok(mode)
  return mode == 'check' or mode == 'peek' or mode == 'refund' or
    mode == 'adjust' or mode == 'reset'
end

-- One group (the layout of the header's first part).
local function LIM_single(KEYS, ARGV)
  local n = #KEYS - 1
  local mode, cost, wait = ARGV[1], LIM_int(ARGV[3]), 0
  if cost == nil then
    -- "<cost>:<wait_us>" (the header's ARGV[3]); inline: the library's
    -- main function has room for few more locals (Lua's 200).
    local a, b = string.match(ARGV[3] or '', '^(%d+):(%d+)$')
    cost, wait = lib_int(a), lib_int(b)
    cost = wait and cost
  end
  local m = LIM_m(ARGV[4 + 6 * n])
  -- cost >= 0, any sign for "adjust" (its delta).
  if n < 0 or cost == nil or (cost < 0 and mode ~= 'adjust') or m == nil or
      #ARGV ~= 4 + 6 * n + (m > 0 and 2 * m or 0) or not LIM_mode_ok(mode) or
      not LIM_algos(ARGV, 4, n) then
    return redis.error_reply(LIM_BAD_ARGS)
  end
  local now, now_s, now_us = LIM_now(ARGV[2])
  if now == nil then
    return redis.error_reply(LIM_BAD_ARGS)
  end
  LIM_NOHASH = false -- a batch's, not this call's
  local P, pb, pm = LIM_pairs(KEYS, 1, n, ARGV, 4 + 6 * n, m)
  if P == nil then
    return redis.error_reply(LIM_BAD_ARGS)
  end
  HS.begin(KEYS, 1, n, ARGV, 4)
  local r, err = LIM_run(KEYS, 1, ARGV, mode, cost, n, 4, P, pb, pm, now,
                         now_s, now_us, nil, nil, wait)
  if r == nil then
    HS.drop()
    return redis.error_reply(err)
  end
  err = HS.finish()
  if err then
    return redis.error_reply(err)
  end
  return r
end

-- Where each group's arguments start (LIM_G: 6 slots a group: the index
-- of its mode in ARGV, n, m, its first key, its shape in mode "shapes" or
-- 0, the index in ARGV after which its override pairs start: its m's in
-- mode "each"), kept like the other scratch.
local LIM_G = {}

-- The fast path of mode "shapes", per shape of the call (LIM_F[s]: its
-- strings and values, kept from call to call like the other scratch;
-- LIM_FOK[s]: true when they are made for this call, 'one' for LIM_one,
-- false when the shape takes LIM_run, nil before its first group): a
-- check of one to four gcra levels, none of a shadow level. Such a group needs none of
-- LIM_run's generality, which costs Redis more than the group's own
-- commands: it is the override read, one SET ... NX GET (or GET) per
-- level, decided as gcra.lua's batches decide a key, and a SET per level
-- to admit or a DEL per key written at its read to refuse, exactly as
-- LIM_run would do them. Anything else it meets (an override that
-- differs, a repeated key, a value that is no TAT, an error) it undoes and
-- hands the group to LIM_run, so the two never answer differently.
local LIM_F, LIM_FOK, LIM_FLD = {}, {}, {}

-- Makes f the strings and values of the shape whose block starts at
-- ARGV[a0] (9 a level: gcra_fast's five, false when the level is off its
-- fast path, then inc_s, inc_ns and gcra_fast's lo and fmt) and returns
-- true; or makes f.algo and
-- f.cost those of a LIM_one shape and returns 'one'; false when the shape
-- takes LIM_run.
local function LIM_fast_shape(f, ARGV, a0, n, now_us, now_s, now_ns)
  local cost = LIM_int(ARGV[a0 + 1])
  if ARGV[a0] ~= 'check' or cost == nil or cost < 0 or n < 1 or n > 4 then
    return false
  end
  local one = ALGO[ARGV[a0 + 3]]
  if n == 1 and one and one ~= ALGO.gcra and ARGV[a0 + 8] == '' then
    f.algo, f.cost, f.p1, f.p2 = one, cost, nil, nil
    if one.prep then
      f.p1, f.p2 = one.prep(ARGV[a0 + 4], ARGV[a0 + 5], ARGV[a0 + 6],
                            ARGV[a0 + 7])
    end
    return 'one'
  end
  f.layc = false
  -- f.DR: the levels that are records of the state string, f.nr of them;
  -- f.dmix: some other level keeps a key of its own (HS.OWN).
  local R, nr = f.DR, 0
  if R == nil then
    R = {}
    f.DR = R
  end
  f.dmix = false
  for i = 1, n do
    local b = a0 + 6 * i - 3
    local w = ARGV[b]
    if (w ~= 'gcra' and w ~= HS.OWN) or ARGV[b + 5] ~= '' then
      return false
    end
    local G = LIM_gcra(ARGV[b + 1], ARGV[b + 2], ARGV[b + 3], ARGV[b + 4],
                       now_us, now_s, now_ns)
    if not G then
      return false
    end
    local x = 9 * i - 9
    f[x + 1], f[x + 2], f[x + 3], f[x + 4], f[x + 5] =
      G.f_now or false, G.f_thr, G.f_top, G.f_val, G.f_ms
    f[x + 6], f[x + 7], f[x + 8], f[x + 9] = G.inc_s, G.inc_ns, G.f_lo, G.f_fmt
    if w == 'gcra' then
      nr = nr + 1
      R[nr] = i
    else
      f.dmix = true
    end
    -- (f.dok: every level is on its fast path, so HS.direct may decide.)
    f.dok = (i == 1 or f.dok) and G.f_now ~= nil
  end
  f.nr = nr
  -- HS.direct decides a group with a record at least, on Redis 7 (SET ...
  -- NX GET, PXAT; before it, the emulation decides).
  f.dok = f.dok and nr > 0 and GCRA_NX_GET
  return true
end

-- Deletes the keys among the first n of a fast group that were written
-- at their read (LIM_T[i] true).
local function LIM_fast_undo(K, k0, n)
  for i = 1, n do
    if LIM_T[i] then
      R_CALL('DEL', K[k0 + i - 1])
    end
  end
end

-- Ends a fast group of n > 1 levels whose reads are done: a refusal
-- deletes the keys written at their read, an admission writes the others
-- (LIM_T says which were written, LIM_W holds each write's value and ms).
local function LIM_fast_finish(K, k0, n, refused)
  if refused then
    LIM_fast_undo(K, k0, n)
    return
  end
  for i = 1, n do
    if not LIM_T[i] then
      R_CALL('SET', K[k0 + i - 1], LIM_W[2 * i - 1], 'PX', LIM_W[2 * i])
    end
  end
end

-- Whether the override hash holds what the group expects in its m
-- fields (pairs after P[mb], as LIM_pairs gives them); false too when it
-- cannot be read.
local function LIM_override_ok(hash, P, mb, m)
  if m == 1 then -- a path of one level: the common case first
    if LIM_NOHASH then
      return P[mb + 2] == ''
    end
    return (R_PCALL('HGET', hash, P[mb + 1]) or '') == P[mb + 2]
  elseif m == 0 then
    return true
  end
  local have = LIM_NONE
  if not LIM_NOHASH then
    for j = 1, m do
      LIM_FLD[j] = P[mb + 2 * j - 1]
    end
    have = R_PCALL('HMGET', hash, unpack(LIM_FLD, 1, m))
    if have.err then
      return false
    end
  end
  for j = 1, m do
    if (have[j] or '') ~= P[mb + 2 * j] then
      return false
    end
  end
  return true
end

-- Decides one group on the fast path (f from LIM_fast_shape; keys from
-- K[k0], the override hash after them; m override pairs after P[mb])
-- and writes its reply flat after out[o]: the index of its last element,
-- or false, having changed nothing, when LIM_run must decide it. Each
-- level's read goes to the reply at once; with several levels, whether it
-- was written at its read (LIM_T) and its write (LIM_W, value and ms) wait
-- for the others, while one level's write is its group's. LIM_run writes
-- over whatever elements a group it takes over left: a decided group has
-- as many, a failed one clears them.
local function LIM_fast(K, k0, f, n, P, mb, m, now_s, now_ns, out, o)
  if not LIM_override_ok(K[k0 + n], P, mb, m) or
      (n > 1 and not LIM_distinct(K, k0, n)) then
    return false
  end
  local T, W, limited = LIM_T, LIM_W, false
  out[o + 1] = 0
  for i = 1, n do
    local key, x = K[k0 + i - 1], 9 * i - 9
    local v, written, val, ms = false, false, nil, nil
    if f[x + 1] then
      v, written = gcra_fast_read(key, f[x + 4], f[x + 5])
    end
    if not written then
      local class = f[x + 1] and gcra_fast_class(v, f[x + 1], f[x + 2],
                                                 f[x + 3])
      if class == 0 then
        val, ms = f[x + 4], f[x + 5]
      elseif class == 2 then
        val, ms = gcra_fast_ahead(v, f[x + 6], f[x + 7], now_s, now_ns,
                                  f[x + 8], f[x + 9])
      elseif class == 1 then
        limited = true
      else
        LIM_fast_undo(K, k0, i - 1)
        return false
      end
    end
    out[o + 1 + i] = v
    if n == 1 then
      if val then
        R_CALL('SET', key, val, 'PX', ms)
      end
    else
      T[i], W[2 * i - 1], W[2 * i] = written, val, ms
    end
  end
  if limited then
    out[o + 1] = 1
  end
  if n > 1 then
    LIM_fast_finish(K, k0, n, limited)
  end
  return o + 1 + n
end

-- Makes group g's reply after reply[o] one error element (text err): in
-- a flat reply (out given), whatever its n levels had written there goes.
-- Returns the element's index.
local function LIM_failed(reply, out, o, n, err)
  for j = o + 1, out and o + 1 + 6 * n or 0 do
    out[j] = nil
  end
  reply[o + 1] = redis.error_reply(err)
  return o + 1
end

-- A check of one level of another algorithm (f.algo), no shadow level,
-- keys K[k0] and the override hash, m override pairs after P[mb], the
-- level's values after ARGV[a0 + 3]: LIM_run's decision without its
-- generality (for one real level, the group's flag is the level's, and
-- the level writes what its decision says). Returns as LIM_fast does; a
-- write that raised an error leaves the group's error element instead of
-- its reply, as LIM_general would.
local function LIM_one(K, k0, f, ARGV, a0, P, mb, m, now, now_s, now_ns, out,
                       o)
  if not LIM_override_ok(K[k0 + 1], P, mb, m) then
    return false
  end
  local A, key, b = f.algo, K[k0], a0 + 3
  -- decide only reads, so a raised error leaves nothing to undo: LIM_run
  -- decides again and reports it.
  local ok, lim, e, when, w1, w2, w3, w4, w5, w6 = pcall(A.decide, key,
    ARGV[b + 1], ARGV[b + 2], ARGV[b + 3], ARGV[b + 4], now, f.cost, now_s,
    now_ns)
  if not ok or lim == nil then
    return false
  end
  out[o + 1] = lim and 1 or 0
  out[o + 2], out[o + 3], out[o + 4], out[o + 5], out[o + 6], out[o + 7] =
    e[1], e[2], e[3], e[4], e[5], e[6]
  if when == 2 or (when == 1 and not lim) then
    local err
    ok, err = pcall(A.commit, key, w1, w2, w3, w4, w5, w6)
    if not ok then
      return LIM_failed(out, out, o, 1, LIM_raised(err))
    end
  end
  return o + 7
end

-- Decides the group whose block starts at ARGV[a0] (n limits, keys from
-- K[k0], m override pairs after P[mb]) through LIM_run and writes its
-- reply after reply[o] (flat when out is given): the index of its last
-- element.
local function LIM_general(K, k0, ARGV, a0, n, P, mb, m, now, now_s, now_us,
                           reply, out, o)
  local mode, cost, wait = ARGV[a0], LIM_int(ARGV[a0 + 1]), 0
  if cost == nil then
    -- "<cost>:<wait_us>", as LIM_single reads it.
    local a, b = string.match(ARGV[a0 + 1] or '', '^(%d+):(%d+)$')
    cost, wait = lib_int(a), lib_int(b)
    cost = wait and cost
  end
  local ok, r, err = true, nil, LIM_BAD_ARGS
  if cost ~= nil and (cost >= 0 or mode == 'adjust') and LIM_mode_ok(mode) and
      LIM_algos(ARGV, a0 + 3, n) then
    -- A raised error ends this group only. Its keys share one slot, so a
    -- slot this node does not serve (undeclared keys) fails the group's
    -- first command, before anything is written.
    ok, r, err = pcall(LIM_run, K, k0, ARGV, mode, cost, n, a0 + 3, P, mb,
                       m, now, now_s, now_us, out, o, wait)
    if not ok then
      r, err = nil, LIM_raised(r)
    end
  end
  if r == nil then
    return LIM_failed(reply, out, o, n, err)
  elseif out then
    return r -- flat: the index of its last element
  end
  reply[o + 1] = r
  return o + 1
end

-- Ends a group whose reply is after reply[o0], its last element at o:
-- writes its states (HS.finish), or forgets them when the group failed
-- (its element an error: nothing of it written). Returns o, or the index
-- of the group's error element when the write failed.
local function HS_end(reply, out, o0, o, n)
  local e = reply[o0 + 1]
  if type(e) == 'table' and e.err then
    HS.drop()
    return o
  end
  local err = HS.finish()
  if err then
    HS.drop()
    return LIM_failed(reply, out, o0, n, err)
  end
  return o
end

-- The direct path of a group of n gcra levels on their fast path (f
-- from LIM_fast_shape, f.dok; keys from K[k], distinct; its overrides
-- verified by the caller): the decision of LIM_fast, its reply flat after
-- out[o], on the identity's state string itself, with none of the
-- emulation's records (which cost Redis more than the commands). The
-- levels f.DR are records of one string; the others (f.dmix) keep keys of
-- their own (HS.OWN, a level below a second "*"). It takes a string that
-- holds exactly the records of those levels, in their order, each a TAT
-- of 19 digits (what it and the emulation write on the node's clock):
-- every other string goes to the emulation.
-- With no old key left to read (HS.noold), one SET ... NX PXAT ... GET
-- reads the string and, for a new identity, writes it admitted; else a GET
-- (and an EXISTS of the old keys of the records it lacks). A record past
-- its expire_at reads as absent, as HS.load has it. A key of its own is
-- read as LIM_fast reads it, SET ... NX PX ... GET, which writes a new
-- one admitted. When every level admits, one SET of the whole string
-- expiring at its latest record (PXAT), and a SET of each own key not
-- written by its read; a refusal writes nothing (what the reads wrote
-- goes). Returns the index of the reply's last element, or false, having
-- written nothing, when the emulation must decide.
function HS.direct(K, k, n, f, now_s, now_ns, out, o)
  if not HS.real then
    return false
  end
  local V, C, F, h = HS.dV, HS.dC, f.DF, nil
  local R, nr, mix = f.DR, f.nr, f.dmix
  local find, sub = string.find, string.sub
  if F and f.DFn == n then
    -- The string of the group's keys when they are the fields of the
    -- shape's last group (HS.parse's split without its pattern, which
    -- costs Redis ten thousand instructions a new key: the key up to the
    -- first "}" after the first "{", at least a character apart).
    local k1 = K[k + R[1] - 1]
    local b = find(k1, '{', 1, true)
    local c = b and find(k1, '}', b + 1, true)
    if c and c > b + 1 and sub(k1, c + 1) == F[1] then
      h = sub(k1, 1, c)
      for j = 2, nr do
        if K[k + R[j] - 1] ~= h .. F[j] then
          h = nil
          break
        end
      end
    end
  end
  if h == nil then
    F = F or {}
    for j = 1, nr do
      local p = HS.parse(K[k + R[j] - 1])
      if not p or p[3] ~= 's' or (h and p[1] ~= h) then
        f.DF = nil
        return false
      end
      h, F[j] = p[1], p[2]
    end
    f.DF, f.DFn = F, n
  end
  local L = HS.layout(f, F, nr, R)
  if not L then
    return false
  end
  local rp, v, made = HS.rp, nil, false
  if HS.noold then
    v = rp('SET', h, L.new, 'NX', 'PXAT', L.top, 'GET')
    made = v == false -- a new identity, its records written admitted
    if made and not mix then
      out[o + 1] = 0
      for i = 1, n do
        out[o + 1 + i] = false
      end
      return o + 1 + n
    end
  else
    v = rp('GET', h)
  end
  local absent, limited = 0, 0
  if v == false then
    absent = nr
    for j = 1, nr do
      V[R[j]], C[R[j]] = false, 0
    end
  elseif type(v) ~= 'string' or #v ~= L.E then
    return false
  else
    local now6 = L.now6
    for j = 1, nr do
      local i, p = R[j], L.pos[j]
      local x = 9 * i - 9
      if find(v, L.nm[j], p, true) ~= p then
        return false
      end
      local q = p + #L.nm[j]
      local t = sub(v, q, q + 18)
      if not find(t, '^%d*$') then
        return false
      end
      C[i] = 0
      if t < now6 then -- its ms (its first 13 digits) before now's
        t, absent = false, absent + 1
      elseif t > f[x + 1] then
        local c = t <= f[x + 2] and 2 or t <= f[x + 3] and 1 or nil
        if c == nil then
          return false
        end
        C[i] = c
        if c == 1 then
          limited = 1
        end
      end
      V[i] = t
    end
  end
  if absent > 0 and not HS.noold then
    -- The upgrade's lookup, as HS.begin's: a state absent from the string
    -- may live at its old key.
    local A, a = HS.a, 0
    for j = 1, nr do
      if V[R[j]] == false then
        a = a + 1
        A[a] = K[k + R[j] - 1]
      end
    end
    if rp('EXISTS', unpack(A, 1, a)) ~= 0 then
      return false
    end
  end
  if mix then
    if not HS.direct_own(K, k, n, f, made and h) then
      return false
    end
    for i = 1, n do
      if C[i] == 1 then
        limited = 1
      end
    end
  end
  out[o + 1] = limited
  for i = 1, n do
    out[o + 1 + i] = V[i]
  end
  if limited == 1 then
    if mix then
      HS.direct_undo(K, k, n, made and h)
    end
    return o + 1 + n
  end
  if not made then
    local S, top, format = HS.dS, '', string.format
    for j = 1, nr do
      local i = R[j]
      local x, w = 9 * i - 9, nil
      if C[i] == 0 then
        w = f[x + 4]
      else
        -- gcra_fast_ahead, with its two formats made one: the TAT's last
        -- 15 digits plus INC, when they exceed now's (lo) and need no
        -- carry.
        local lo, t = f[x + 8], V[i]
        local low = lo and tonumber(sub(t, 5))
        local new = low and low + (f[x + 6] * 1000000000 + f[x + 7])
        if low and low > lo and new < 1e15 then
          w = format(f[x + 9], new)
        else
          w = gcra_fast_ahead(t, f[x + 6], f[x + 7], now_s, now_ns, lo,
                              f[x + 9])
        end
      end
      local e = sub(w, 1, 13)
      if e > top then
        top = e
      end
      S[j] = L.nm[j] .. w .. ';'
    end
    local r = rp('SET', h, table.concat(S, '', 1, nr), 'PXAT', top)
    if r.err then
      if mix then
        HS.direct_undo(K, k, n, false)
      end
      return false -- an error: nothing written
    end
  end
  if mix then
    -- The keys of their own that their read did not write.
    local rc, T = HS.rc, HS.dT
    for i = 1, n do
      if T[i] == false then
        local x, key = 9 * i - 9, K[k + i - 1]
        local val, ms = f[x + 4], f[x + 5]
        if C[i] == 2 then
          val, ms = gcra_fast_ahead(V[i], f[x + 6], f[x + 7], now_s, now_ns,
                                    f[x + 8], f[x + 9])
        end
        rc('SET', key, val, 'PX', ms)
      end
    end
  end
  return o + 1 + n
end

-- HS.direct's reads of the levels of a group that keep keys of their own
-- (the levels but f.DR): each SET ... NX PX ... GET (a new key written
-- admitted: HS.dT[i] true, else false; nil for a record), its value and
-- class in HS.dV and HS.dC, as LIM_fast's (1: refused). False, having
-- undone every write of the group (the string too, when `made`: the
-- string a new identity's read wrote), when a value is off the fast path
-- or an error.
function HS.direct_own(K, k, n, f, made)
  local V, C, T, rp, find = HS.dV, HS.dC, HS.dT, HS.rp, string.find
  for i = 1, n do
    T[i] = nil
  end
  local R, nr, j = f.DR, f.nr, 1
  for i = 1, n do
    if j <= nr and R[j] == i then
      j = j + 1
    else
      local x = 9 * i - 9
      local v = rp('SET', K[k + i - 1], f[x + 4], 'NX', 'PX', f[x + 5], 'GET')
      T[i], V[i], C[i] = v == false, v, 0
      if v ~= false then
        -- (v a string or an error table, whose # is 0.)
        if #v ~= 19 or not find(v, '^%d*$') then
          T[i] = nil
          HS.direct_undo(K, k, n, made)
          return false
        elseif v > f[x + 1] then
          local c = v <= f[x + 2] and 2 or v <= f[x + 3] and 1 or nil
          if c == nil then
            T[i] = nil
            HS.direct_undo(K, k, n, made)
            return false
          end
          C[i] = c
        end
      end
    end
  end
  return true
end

-- Undoes the writes of HS.direct_own's reads (HS.dT), and the string
-- `made` (a new identity's, written by its read) unless it is false.
function HS.direct_undo(K, k, n, made)
  local T, rp = HS.dT, HS.rp
  for i = 1, n do
    if T[i] then
      rp('DEL', K[k + i - 1])
    end
  end
  if made then
    rp('DEL', made)
  end
end


-- The layout of the state string of a group of gcra levels of shape f
-- whose records are F[1 .. n], those of its levels R[1 .. n] (f.DR), on
-- this call's clock: each record's
-- "<L>:<field>=" (nm) and its position (pos) when the string holds exactly
-- these records, each a TAT of 19 digits, their total length (E), the
-- string of a new identity admitted (new, expiring at top), and the
-- clock's ms as the first 13 digits of a TAT (now6: a TAT below it has
-- expired). Kept in f for the fields of its last group
-- (f.layc: made for this call's f, LIM_fast_shape's); nil when the clock or a level's new TAT is not of
-- 13 and 19 digits.
function HS.layout(f, F, n, R)
  local L = f.lay
  if L and f.layc then
    local same = true
    for i = 1, n do
      if L.f[i] ~= F[i] then
        same = false
        break
      end
    end
    if same then
      return L
    end
  end
  local ms = HS.ms or HS.now()
  local mss = string.format('%d', ms)
  if #mss ~= 13 then
    return nil
  end
  L = L or {f = {}, nm = {}, pos = {}}
  local pos, new, top = 1, {}, ''
  for i = 1, n do
    local val = f[9 * R[i] - 5]
    if #val ~= 19 then
      return nil
    end
    local nm = #F[i] .. ':' .. F[i] .. '='
    local e = string.sub(val, 1, 13)
    L.f[i], L.nm[i], L.pos[i] = F[i], nm, pos
    new[i] = nm .. val .. ';'
    if e > top then
      top = e
    end
    pos = pos + #nm + 20
  end
  L.E, L.new, L.top, L.now6 = pos - 1, table.concat(new), top,
    mss .. '000000'
  f.lay, f.layc = L, true
  return L
end

-- Decides the G groups that LIM_G describes, their keys from K[kb + 1]:
-- the reply of mode "each", or flat that of mode "shapes".
local function LIM_groups(K, kb, ARGV, G, flat)
  local now, now_s, now_us = LIM_now(ARGV[2])
  if now == nil then
    return redis.error_reply(LIM_BAD_ARGS)
  end
  local reply, o = flat and LIB_REPLY or {}, 3
  reply[1], reply[2], reply[3] = 0, now_s, now_us
  local out, now_ns = flat and reply or nil, now_us * 1000
  -- Overrides are rare: one EXISTS of every group's override hash spares
  -- the fast paths a read each when none exists (checks never write one,
  -- so reading them all first is reading each at its group's turn). Only
  -- with declared keys (kb 0): they share a slot, or there is no cluster,
  -- so one command may name them all.
  LIM_NOHASH = false
  if flat and kb == 0 and G > 1 then
    local c = 0
    for g = 1, G do
      local x = 6 * g - 6
      if LIM_G[x + 3] ~= 0 then
        c = c + 1
        LIM_OVK[c] = K[LIM_G[x + 4] + LIM_G[x + 2]]
      end
    end
    LIM_NOHASH = c > 1 and R_PCALL('EXISTS', unpack(LIM_OVK, 1, c)) == 0
  end
  for g = 1, G do
    local x = 6 * g - 6
    local a0, n, m, k0 = LIM_G[x + 1], LIM_G[x + 2], LIM_G[x + 3], LIM_G[x + 4]
    local s, mb, r = LIM_G[x + 5], LIM_G[x + 6], false
    local o0 = o
    local P, pb, pm = LIM_pairs(K, kb + k0, n, ARGV, mb, m)
    local ok = s > 0 and LIM_FOK[s]
    if ok == nil then
      local f = LIM_F[s]
      if f == nil then
        f = {}
        LIM_F[s] = f
      end
      ok = LIM_fast_shape(f, ARGV, a0, n, now, now_s, now_ns)
      LIM_FOK[s] = ok
    end
    -- A group of gcra levels on their fast path, decided on the state
    -- string itself (HS.direct), as in LIM_one_shape; d its reply, or
    -- false.
    local d = P ~= nil and ok == true and LIM_F[s].dok and
      (n == 1 or LIM_distinct(K, kb + k0, n)) and
      LIM_override_ok(K[kb + k0 + n], P, pb, pm) and
      HS.direct(K, kb + k0, n, LIM_F[s], now_s, now_ns, reply, o)
    if d then
      r = d
    else
      HS.begin(K, kb + k0, n, ARGV, a0 + 3)
      if HS.n == 0 then
        -- No state string in the group (hash states, sorted sets): Redis
        -- directly (the emulation's wrappers cost Redis about a thousand
        -- instructions a command).
        R_CALL, R_PCALL = HS.rc, HS.rp
      end
    end
    if d then
      -- decided
    elseif P == nil then
      r = LIM_failed(reply, out, o, n, LIM_BAD_ARGS)
    elseif s > 0 then
      if ok == 'one' then
        r = LIM_one(K, kb + k0, LIM_F[s], ARGV, a0, P, pb, pm, now, now_s,
                    now_ns, out, o)
      elseif ok then
        r = LIM_fast(K, kb + k0, LIM_F[s], n, P, pb, pm, now_s, now_ns, out,
                     o)
      end
    end
    if r then
      o = r
    else
      o = LIM_general(K, kb + k0, ARGV, a0, n, P, pb, pm, now, now_s, now_us,
                      reply, out, o)
    end
    o = d or HS_end(reply, out, o0, o, n)
    R_CALL, R_PCALL = HS.call, HS.pcall
  end
  if flat then
    return lib_reply(o)
  end
  return reply
end

-- The keys of a batch of k - 1 keys whose arguments end before ARGV[a]:
-- KEYS, or when none are declared the ARGV after the arguments. Returns
-- the table and the index before the first key, or nil when the counts do
-- not add up.
local function LIM_keys(KEYS, ARGV, a, k)
  local nargv, nkeys, K, kb = #ARGV, #KEYS, KEYS, 0
  if nkeys == 0 then
    K, kb, nkeys, nargv = ARGV, a - 1, k - 1, nargv - (k - 1)
  end
  if a ~= nargv + 1 or k ~= nkeys + 1 then
    return nil
  end
  return K, kb
end

-- n and m (LIM_m's) of the group arguments (as mode "each" lays them
-- out) that start at ARGV[a]; nil when either is malformed.
local function LIM_block(ARGV, a)
  local n = LIM_int(ARGV[a + 2])
  local m = n and n >= 0 and LIM_m(ARGV[a + 3 + 6 * n])
  if not m then
    return nil
  end
  return n, m
end

-- Mode "each" (the header's second part).
local function LIM_each(KEYS, ARGV)
  local G = LIM_int(ARGV[3])
  local nargv, nkeys = #ARGV, #KEYS
  if G == nil or G < 1 then
    return redis.error_reply(LIM_BAD_ARGS)
  end
  -- The structure first, whole: a malformed batch writes nothing.
  local a, k = 4, 1
  for g = 1, G do
    local n, m = LIM_block(ARGV, a)
    if not n then
      return redis.error_reply(LIM_BAD_ARGS)
    end
    local x = 6 * g - 6
    LIM_G[x + 1], LIM_G[x + 2], LIM_G[x + 3], LIM_G[x + 4], LIM_G[x + 5],
      LIM_G[x + 6] = a, n, m, k, 0, a + 3 + 6 * n
    a, k = a + 4 + 6 * n + (m > 0 and 2 * m or 0), k + n + 1
    if a > nargv + 1 or (nkeys > 0 and k > nkeys + 1) then
      return redis.error_reply(LIM_BAD_ARGS)
    end
  end
  local K, kb = LIM_keys(KEYS, ARGV, a, k)
  if K == nil then
    return redis.error_reply(LIM_BAD_ARGS)
  end
  return LIM_groups(K, kb, ARGV, G, false)
end

-- Whether a group assumes no override at any of its m levels (the
-- values of its pairs after ARGV[mb] all "").
local function LIM_assumes_none(ARGV, mb, m)
  for j = mb + 2, mb + 2 * m, 2 do
    if ARGV[j] ~= '' then
      return false
    end
  end
  return true
end

-- Where each shape's arguments start (LIM_SH: 3 slots a shape: the index
-- of its mode in ARGV, n, m).
local LIM_SH = {}

-- Mode "shapes" when it has one shape (what a steady load on one tree node
-- sends), its groups from ARGV[a] on (G of them, n + 1 keys and m pairs
-- each): the batch LIM_groups would decide, with the same commands in the
-- same order, but in one loop, its structure checked by arithmetic. Every
-- Lua opcode costs Redis about 50 instructions, and LIM_groups's table of
-- where each group starts, filled and read back, cost more per group than
-- a one-level check's own commands.
local function LIM_one_shape(KEYS, ARGV, a, G, n, m)
  local mp = m > 0 and m or 0 -- the pairs each group carries
  local K, kb = LIM_keys(KEYS, ARGV, a + 2 * mp * G, (n + 1) * G + 1)
  local now, now_s, now_us = LIM_now(ARGV[2])
  if K == nil or now == nil then
    return redis.error_reply(LIM_BAD_ARGS)
  end
  local now_ns, a0, f = now_us * 1000, LIM_SH[1], LIM_F[1]
  if f == nil then
    f = {}
    LIM_F[1] = f
  end
  local kind = LIM_fast_shape(f, ARGV, a0, n, now, now_s, now_ns)
  -- Every level gcra on its fast path: a group that assumes no override,
  -- or whose overrides are as it assumes, is decided on the hash itself
  -- (HS.direct), without the emulation.
  local direct = kind == true and f.dok
  LIM_NOHASH = false
  if direct and not HS.noold and kb == 0 then
    -- One EXISTS of every key of the batch: when it counts none, no
    -- level's state lives at its old key (HS.direct then looks up none)
    -- and no override hash exists. It costs Redis a twentieth of a
    -- group's EXISTS a key.
    if f.dmix then
      -- Of the records and override hashes only: the keys of their own
      -- are no old keys (and mostly exist).
      local A, a, R, nr = HS.a, 0, f.DR, f.nr
      for g = 0, G - 1 do
        local kg = (n + 1) * g
        for j = 1, nr do
          A[a + j] = K[kg + R[j]]
        end
        a = a + nr + 1
        A[a] = K[kg + n + 1]
      end
      HS.noold = HS.rp('EXISTS', unpack(A, 1, a)) == 0
    else
      HS.noold = HS.rp('EXISTS', unpack(K, 1, (n + 1) * G)) == 0
    end
    LIM_NOHASH = HS.noold
  end
  -- LIM_groups's EXISTS of every override hash, for the fast paths (for
  -- one group too on the direct path, which it spares a read of the
  -- override hash).
  if not LIM_NOHASH and kind and kb == 0 and (G > 1 or direct) and m ~= 0 then
    for g = 1, G do
      LIM_OVK[g] = K[(n + 1) * g]
    end
    LIM_NOHASH = R_PCALL('EXISTS', unpack(LIM_OVK, 1, G)) == 0
  end
  -- Groups in "keys" form assume no override at all: with no override
  -- hash in the batch, nothing of theirs is verified.
  local none = m < 0
  -- One gcra level, no override hash in the batch: a group whose proxy
  -- assumes no override either is decided right here, with no call of
  -- LIM_fast (which costs Redis about a thousand instructions a group);
  -- a new key (most keys of a batch) is admitted by its read.
  local fresh = kind == true and n == 1 and (m == 1 or none) and LIM_NOHASH and
    f[1]
  -- One level of an algorithm with a fused check, no override hash in the
  -- batch: its `one`, for a group whose proxy assumes no override either.
  local fused = kind == 'one' and (m == 1 or none) and LIM_NOHASH and f.p1 and
    f.algo.one
  -- Its decision of a missing key: nil until a group learns it
  -- (LIM_new_learn), then whether LIM_NEW replays it.
  local new = nil
  -- Two to four gcra levels, every one on its fast path, no override hash
  -- in the batch: LIM_fast's decision inline too, with no function call
  -- but a TAT ahead of now's sum. LIM_fast's calls of its helpers, a
  -- read's and a level's, cost Redis more than a second level's own SET
  -- (a function doing them for the group still cost 5 % more than the
  -- loop's code does: 44,000 instructions a check of two new keys
  -- against 41,600).
  local multi = kind == true and n > 1 and LIM_NOHASH and GCRA_NX_GET
  if multi then
    for i = 1, n do
      if not f[9 * i - 8] then
        multi = false
      end
    end
  end
  local reply, o = LIB_REPLY, 3
  reply[1], reply[2], reply[3] = 0, now_s, now_us
  -- R_CALL and R_PCALL as locals, in a loop run once per group.
  local find_ = string.find
  -- One or two levels, no old key and no override hash in the batch:
  -- HS.direct's decision inline (a function call and its loops cost Redis
  -- about as much as a group's command): one SET ... NX PXAT ... GET a
  -- group, which admits a new identity, and one SET to admit one seen
  -- before. Made once a call: the shape's fields (F1, F2: those of its
  -- last group's keys, f.DF), its layout (HS.layout), each level's
  -- strings (gcra_fast's), its INC in ns and gcra_fast_ahead's lo and
  -- format.
  -- Two levels of which one (r1) is a record and the other (ro) keeps a
  -- key of its own (a level below a second "*": tenant:<t>:user:<u>) take
  -- the same way: the string's read and the key's SET ... NX PX ... GET,
  -- then their writes; the own level's strings in now2 .. w02 and mso.
  local dn = direct and n <= 2 and LIM_NOHASH and HS.noold and HS.real and
    (not f.dmix or n == 2 and f.nr == 1)
  local r1, ro, mso = 1, dn and f.dmix and 3 - f.DR[1], nil
  local two, rp, HM = n == 2 and not ro, HS.rp, HS.hm
  local sub_, format_, byte_ = string.sub, string.format, string.byte
  local F1, F2, NEW, TOP, E, now6, nm1, nm2, q1, q2, p2
  local now1, thr1, top1, w01, inc1, lo1, fm1
  local now2, thr2, top2, w02, inc2, lo2, fm2
  if dn then
    r1 = ro and 3 - ro or 1
    local F = f.DF
    if not (F and f.DFn == n) then
      local p1, p2_ = HS.parse(K[kb + r1]), two and HS.parse(K[kb + 2])
      dn = p1 and p1[3] == 's' and (not two or p2_ and p2_[3] == 's' and
                                    p2_[1] == p1[1] and p2_[2] ~= p1[2])
      F = dn and {p1[2], two and p2_[2] or nil}
      f.DF, f.DFn = F, dn and n
    end
    local L = dn and HS.layout(f, F, f.nr, f.DR)
    dn = L and true
    if dn then
      local x = 9 * r1 - 9
      F1, F2, NEW, TOP, E, now6 = F[1], F[2], L.new, L.top, L.E, L.now6
      nm1, nm2 = L.nm[1], L.nm[2]
      q1 = L.pos[1] + #nm1 -- where the first record's value starts
      now1, thr1, top1, w01 = f[x + 1], f[x + 2], f[x + 3], f[x + 4]
      inc1, lo1, fm1 = f[x + 6] * 1000000000 + f[x + 7], f[x + 8], f[x + 9]
      if ro then
        x = 9 * ro - 9
        now2, thr2, top2, w02, mso = f[x + 1], f[x + 2], f[x + 3], f[x + 4],
          f[x + 5]
      elseif two then
        p2 = L.pos[2]
        q2 = p2 + #nm2
        now2, thr2, top2, w02 = f[10], f[11], f[12], f[13]
        inc2, lo2, fm2 = f[15] * 1000000000 + f[16], f[17], f[18]
      end
    end
  end
  for g = 1, G do
    -- The group's keys from K[k], its pairs after ARGV[mb].
    -- r: nil until a way of deciding the group was tried, then false
    -- when it must go to LIM_general.
    local k, mb, r = kb + (n + 1) * g - n, a + 2 * mp * (g - 1) - 1, nil
    local o0 = o
    -- d: the direct path's reply (inline, or HS.direct), or false when
    -- the group takes the emulation (HS.begin) and the paths below.
    local d, k1, k2, h, hm = false, K[k + r1 - 1], two and K[k + 1], nil, nil
    if dn then
      -- The string of the group's keys when they are its shape's fields:
      -- remembered for each key (HM, at most 4096, then it starts again:
      -- an identity seen before costs Redis a lookup or two), else its
      -- override hash's name but the suffix, when the keys are it and the
      -- fields (HS.parse's pattern would cost Redis ten thousand
      -- instructions a new key). Fields hold no brace (paths hold none),
      -- so a key names one string ending in "}" and one field.
      h = HM[k1]
      if h == nil or (two and HM[k2] ~= h) then
        -- The group's override hash is "<string>#overrides".
        local ov = K[k + n]
        h = sub_(ov, 1, #ov - 10)
        if k1 ~= h .. F1 or (two and k2 ~= h .. F2) or
            byte_(h, -1) ~= 125 then -- "}"
          h = nil
        end
        hm = h
      end
    end
    if h and (none or m == 0 or
        ARGV[mb + 2] == '' and (m < 2 or ARGV[mb + 4] == '' and m < 3)) then
      -- Anything unusual (a string of another layout or value, an
      -- error): HS.direct, which reads again.
      d = true
      local v = rp('SET', h, NEW, 'NX', 'PXAT', TOP, 'GET')
      if hm and v then
        -- Seen before: remembered (a new identity is not, as most of
        -- them do not come back while HM holds them).
        if HS.hm_n >= 4096 then
          HS.hm, HS.hm_n = {}, 0
          HM = HS.hm
        end
        HM[k1], HS.hm_n = h, HS.hm_n + 1
        if two then
          HM[k2] = h
        end
      end
      if v == false and not ro then
        -- A new identity: its string written admitted by its read.
        reply[o + 1], reply[o + 2] = 0, false
        if two then
          reply[o + 3] = false
        end
        d = o + 1 + n
      else
        -- The first record (t1 its TAT as read, false when past its
        -- expire_at or absent; c1 its class, gcra_fast_class's, nil off the
        -- fast path) and the second level (t2, c2): another record of the
        -- string, or (ro) a key of its own read by SET ... NX PX ... GET
        -- (t2 false when the read wrote it). Anything unusual leaves d true:
        -- HS.direct, which reads again (what the reads wrote undone first).
        local t1, t2, c1, c2 = false, false, nil, 0
        local ko = ro and K[k + ro - 1]
        if ro then
          t2, c2 = rp('SET', ko, w02, 'NX', 'PX', mso, 'GET'), nil
          if t2 == false then
            c2 = 0
          elseif #t2 == 19 and find_(t2, '^%d*$') then -- (an error's # is 0)
            c2 = 0
            if t2 > now2 then
              c2 = t2 <= thr2 and 2 or t2 <= top2 and 1 or nil
            end
          end
        end
        if v == false then
          c1 = 0
        elseif #v == E and find_(v, nm1, 1, true) == 1 and
            (not two or find_(v, nm2, p2, true) == p2) then
          -- (v a string: an error table's # is 0.)
          t1 = sub_(v, q1, q1 + 18)
          if find_(t1, '^%d*$') then
            c1 = 0
            if t1 < now6 then
              t1 = false
            elseif t1 > now1 then
              c1 = t1 <= thr1 and 2 or t1 <= top1 and 1 or nil
            end
          end
          if two then
            t2, c2 = sub_(v, q2, q2 + 18), nil
            if find_(t2, '^%d*$') then
              c2 = 0
              if t2 < now6 then
                t2 = false
              elseif t2 > now2 then
                c2 = t2 <= thr2 and 2 or t2 <= top2 and 1 or nil
              end
            end
          end
        end
        local l = c1 and c2 and (c1 == 1 or c2 == 1) and 1 or 0
        if c1 and c2 then
          reply[o + 1], reply[o + 1 + r1] = l, t1
          if n == 2 then
            reply[o + 1 + (ro or 2)] = t2
          end
          d = o + 1 + n
        end
        if d ~= true and l == 0 and v then
          -- The new TATs (gcra_fast_ahead's, its two formats made one when
          -- the TAT's last 15 digits plus INC exceed now's and need no
          -- carry), each record expiring at its TAT's ms. (A new string, v
          -- false, was written admitted by its read.)
          local w1, s = w01, nil
          if c1 == 2 then
            local low = lo1 and tonumber(sub_(t1, 5))
            if low and low > lo1 and low + inc1 < 1e15 then
              w1 = format_(fm1, low + inc1)
            else
              local x = 9 * r1 - 9
              w1 = gcra_fast_ahead(t1, f[x + 6], f[x + 7], now_s, now_ns, lo1,
                                   fm1)
            end
          end
          local top = sub_(w1, 1, 13)
          if two then
            local w2 = w02
            if c2 == 2 then
              local low = lo2 and tonumber(sub_(t2, 5))
              if low and low > lo2 and low + inc2 < 1e15 then
                w2 = format_(fm2, low + inc2)
              else
                w2 = gcra_fast_ahead(t2, f[15], f[16], now_s, now_ns, lo2, fm2)
              end
            end
            local x2 = sub_(w2, 1, 13)
            if x2 > top then
              top = x2
            end
            s = nm1 .. w1 .. ';' .. nm2 .. w2 .. ';'
          else
            s = nm1 .. w1 .. ';'
          end
          if rp('SET', h, s, 'PXAT', top).err then
            d = true -- nothing of the string written: HS.direct reads again
          end
        end
        if not ro then
          -- the string alone: decided, or nothing written
        elseif d == true or l == 1 then
          if v == false then
            rp('DEL', h)
          end
          if t2 == false then
            rp('DEL', ko)
          end
        elseif t2 then
          -- The key of its own that its read did not write.
          if c2 == 0 then
            HS.rc('SET', ko, w02, 'PX', mso)
          else
            local x = 9 * ro - 9
            local val, ms = gcra_fast_ahead(t2, f[x + 6], f[x + 7], now_s,
                                            now_ns, f[x + 8], f[x + 9])
            HS.rc('SET', ko, val, 'PX', ms)
          end
        end
      end
    elseif direct and (n == 1 or n == 2 and k1 ~= k2 or
                       n > 2 and LIM_distinct(K, k, n)) then
      d = true
    end
    if d ~= true then
      -- decided inline, or not direct
    elseif LIM_NOHASH then
      d = none or m == 0 or ARGV[mb + 2] == '' and
        (m < 2 or ARGV[mb + 4] == '') and
        (m < 3 or LIM_assumes_none(ARGV, mb, m))
    else
      local P, pb, pm = LIM_pairs(K, k, n, ARGV, mb, m)
      d = P ~= nil and LIM_override_ok(K[k + n], P, pb, pm)
    end
    if d == true then
      d = HS.direct(K, k, n, f, now_s, now_ns, reply, o)
    end
    if d then
      o = d
    else
      -- A shape of one level of a hash state (kind 'one') has no state
      -- string: Redis directly, without the emulation (whose wrappers cost
      -- Redis about a thousand instructions a command); else the group's
      -- states, or none (then Redis directly too).
      if kind ~= 'one' then
        HS.begin(K, k, n, ARGV, a0 + 3)
      end
      if HS.n == 0 then
        R_CALL, R_PCALL = HS.rc, HS.rp
      end
      local call_, pcall_ = R_CALL, R_PCALL
      if fresh and (none or ARGV[mb + 2] == '') then
        -- LIM_fast's decision of one level, inline: a new key admitted by
        -- its read, a TAT ahead of now that admits, at or before now
        -- (class 0) or refused (1); LIM_general takes anything else, nothing
        -- written.
        local key, v, written = K[k], nil, false
        r = false
        if GCRA_NX_GET then -- gcra_fast_read, inline
          v = pcall_('SET', key, f[4], 'NX', 'PX', f[5], 'GET')
          written = v == false
        else
          v = pcall_('GET', key)
        end
        local class = not written and gcra_fast_class(v, f[1], f[2], f[3])
        if written then
          reply[o + 1], reply[o + 2] = 0, false
          r = o + 2
        elseif class == 2 then
          local val, ms = gcra_fast_ahead(v, f[6], f[7], now_s, now_ns, f[8],
                                          f[9])
          call_('SET', key, val, 'PX', ms)
          reply[o + 1], reply[o + 2] = 0, v
          r = o + 2
        elseif class then
          if class == 0 then
            call_('SET', key, f[4], 'PX', f[5])
          end
          reply[o + 1], reply[o + 2] = class, v
          r = o + 2
        end
      elseif fused and (none or ARGV[mb + 2] == '') then
        -- The algorithms with a fused check keep a hash: its read is here.
        local h = pcall_('HGETALL', K[k])
        r = false
        if h.err then
          -- LIM_general reports it
        elseif h[1] ~= nil then
          local ok
          ok, r = pcall(fused, K[k], h, f.p1, f.p2, now, f.cost, reply, o)
          r = ok and r
        elseif new then
          r = LIM_new_replay(K[k], reply, o)
        elseif new == nil then
          r, new = LIM_new_learn(fused, f, K[k], h, now, reply, o)
        else
          local ok
          ok, r = pcall(fused, K[k], h, f.p1, f.p2, now, f.cost, reply, o)
          r = ok and r
        end
      elseif multi and (none or ARGV[mb + 2] == '' and
                        (m < 2 or ARGV[mb + 4] == '') and
                        (m < 3 or LIM_assumes_none(ARGV, mb, m))) and
          (n == 2 and K[k] ~= K[k + 1] or n > 2 and LIM_distinct(K, k, n)) then
        r = false
        -- LIM_fast's decision of n levels, inline: each level's read (a new
        -- key written by it: T[i]) and class, then the writes of an
        -- admission or the deletes of a refusal, in LIM_fast's order;
        -- LIM_general takes a value off the fast path, nothing left written.
        local T, W, limited, x, on = LIM_T, LIM_W, 0, 0, true
        for i = 1, n do
          local key = K[k + i - 1]
          local v = pcall_('SET', key, f[x + 4], 'NX', 'PX', f[x + 5], 'GET')
          -- gcra_fast_class, inline (v a string or an error table, whose #
          -- is 0), or false for a key written at its read.
          local class = false
          if v then
            class = 0
            if #v ~= 19 or not find_(v, '^%d*$') then
              class = nil
            elseif v > f[x + 1] then
              class = v <= f[x + 2] and 2 or v <= f[x + 3] and 1 or nil
            end
          end
          T[i] = v == false
          if class == 0 then
            W[2 * i - 1], W[2 * i] = f[x + 4], f[x + 5]
          elseif class == 2 then
            W[2 * i - 1], W[2 * i] = gcra_fast_ahead(v, f[x + 6], f[x + 7],
                                                     now_s, now_ns, f[x + 8],
                                                     f[x + 9])
          elseif class == 1 then
            limited = 1
          elseif class == nil then
            LIM_fast_undo(K, k, i - 1)
            on = false
            break
          end
          reply[o + 1 + i] = v
          x = x + 9
        end
        if on then
          reply[o + 1] = limited
          for i = 1, n do
            if limited == 1 then
              if T[i] then
                call_('DEL', K[k + i - 1])
              end
            elseif not T[i] then
              call_('SET', K[k + i - 1], W[2 * i - 1], 'PX', W[2 * i])
            end
          end
          r = o + 1 + n
        end
      end
      if not r then
        local P, pb, pm = LIM_pairs(K, k, n, ARGV, mb, m)
        if P == nil then
          r = LIM_failed(reply, reply, o, n, LIM_BAD_ARGS)
        elseif r == nil and kind == 'one' then
          r = LIM_one(K, k, f, ARGV, a0, P, pb, pm, now, now_s, now_ns, reply,
                      o)
        elseif r == nil and kind then
          r = LIM_fast(K, k, f, n, P, pb, pm, now_s, now_ns, reply, o)
        end
        r = r or LIM_general(K, k, ARGV, a0, n, P, pb, pm, now, now_s, now_us,
                             reply, reply, o)
      end
      if HS.n > 0 then
        o = HS_end(reply, reply, o0, r, n)
      else
        o = r
      end
      R_CALL, R_PCALL = HS.call, HS.pcall
    end
  end
  return lib_reply(o)
end

-- Mode "shapes" (the header's third part).
local function LIM_shapes(KEYS, ARGV)
  local S = LIM_int(ARGV[3])
  local nargv = #ARGV
  if S == nil or S < 1 then
    return redis.error_reply(LIM_BAD_ARGS)
  end
  local a = 4
  for s = 1, S do
    local n, m = LIM_block(ARGV, a)
    if not n then
      return redis.error_reply(LIM_BAD_ARGS)
    end
    LIM_SH[3 * s - 2], LIM_SH[3 * s - 1], LIM_SH[3 * s] = a, n, m
    LIM_FOK[s] = nil -- made at the shape's first group, at this call's now
    a = a + 4 + 6 * n
    if a > nargv then
      return redis.error_reply(LIM_BAD_ARGS)
    end
  end
  local G = LIM_int(ARGV[a])
  if G == nil or G < 1 then
    return redis.error_reply(LIM_BAD_ARGS)
  end
  if S == 1 then
    return LIM_one_shape(KEYS, ARGV, a + 1, G, LIM_SH[2], LIM_SH[3])
  end
  -- a: the index of the next group's first argument (its shape).
  local k = 1
  a = a + 1
  for g = 1, G do
    local s = LIM_int(ARGV[a])
    if s == nil or s < 1 or s > S then
      return redis.error_reply(LIM_BAD_ARGS)
    end
    local x, y = 6 * g - 6, 3 * s - 3
    local n, m = LIM_SH[y + 2], LIM_SH[y + 3]
    a = a + 1
    -- The group's pairs follow ARGV[a - 1].
    LIM_G[x + 1], LIM_G[x + 2], LIM_G[x + 3], LIM_G[x + 4], LIM_G[x + 5],
      LIM_G[x + 6] = LIM_SH[y + 1], n, m, k, s, a - 1
    k = k + n + 1
    a = a + (m > 0 and 2 * m or 0)
    if a > nargv + 1 then
      return redis.error_reply(LIM_BAD_ARGS)
    end
  end
  local K, kb = LIM_keys(KEYS, ARGV, a, k)
  if K == nil then
    return redis.error_reply(LIM_BAD_ARGS)
  end
  return LIM_groups(K, kb, ARGV, G, true)
end

-- The call: the states of the groups' limit keys live in their
-- identities' state strings (hstate.lua), so R_CALL and R_PCALL are HS's
-- while it runs, and Redis's again when it returns or raises (CL.THROTTLE,
-- in the same library, calls Redis directly).
local function LIM_main(KEYS, ARGV)
  if ARGV[1] == 'shapes' then
    return LIM_shapes(KEYS, ARGV)
  elseif ARGV[1] == 'each' then
    return LIM_each(KEYS, ARGV)
  end
  return LIM_single(KEYS, ARGV)
end

--#call
HS.rc, HS.rp, HS.ms, HS.old = redis.call, redis.pcall, false, true
-- ARGV[2] "!<now>": the old per-level keys are not read (see the header).
if string.byte(ARGV[2] or '', 1) == 33 then
  ARGV[2], HS.old = string.sub(ARGV[2], 2), false
end
HS.real = ARGV[2] == ''
HS.noold = not HS.old
R_CALL, R_PCALL = HS.call, HS.pcall
local ok, r = pcall(LIM_main, KEYS, ARGV)
R_CALL, R_PCALL = HS.rc, HS.rp
HS.drop()
if not ok then
  error(r, 0)
end
return r
