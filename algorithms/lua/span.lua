-- Durations as the C models compute them, for the Lua twins that keep
-- times in microseconds (leaky_bucket, sliding_window, sliding_log).
--
-- Each of those models computes a duration as (k * step) + d in int64
-- nanoseconds, saturating at INT64_MAX: step is a whole number of ms (a
-- drip, a window, a horizon), d a difference of two times (a stored time
-- minus now). The product can reach 2^53 * 3650 days and the sum can pass
-- 2^53 us, beyond what a double holds exactly, so the sum is kept split
-- in whole ms and a remainder in us: both halves stay below 2^53.
--
-- One local table: the combined script has room for only 200 locals.

local SPAN = {
  MAX_MS = 9223372036854,        -- whole ms of INT64_MAX ns
  MAX_REM_US = 775,              -- and the us left over (INT64_MAX ns is
                                 -- 9223372036854775 us, 807 ns)
  SAT = '9223372036854775',      -- floor(INT64_MAX ns / 1000), the reply
  SAT_EXPIRY_MS = 9223372036855, -- ceil(INT64_MAX ns / 1e6), its expiry
  BATCH = 1000,                  -- arguments per redis.call for long lists
}

-- floor(d / 1000) and d mod 1000 for an integer |d| < 2^53, exact for
-- negative d too.
function SPAN.split(d)
  if d >= 0 then
    return lib_divmod(d, 1000)
  end
  local q, r = lib_divmod(-d, 1000)
  if r == 0 then
    return -q, 0
  end
  return -q - 1, 1000 - r
end

-- The duration k * step_ms + d, where d is in us (|d| < 2^53) and k >= 0,
-- as the C models compute it in ns: it saturates when k * step alone
-- passes INT64_MAX ns, or the sum does. Returns it as a reply value (us,
-- floored; a number below 2^53, else its exact decimal text), then the
-- expiry that covers it (whole ms, rounded up). The callers' durations are
-- positive; a negative one comes back as a plain number.
function SPAN.after(k, step_ms, d)
  -- A double product at or under MAX_MS < 2^53 is exact; above it, the
  -- rounded product is above it too.
  local km = k * step_ms
  if km > SPAN.MAX_MS then
    return SPAN.SAT, SPAN.SAT_EXPIRY_MS
  end
  local q, r = SPAN.split(d)
  q = q + km
  if q > SPAN.MAX_MS or (q == SPAN.MAX_MS and r > SPAN.MAX_REM_US) then
    return SPAN.SAT, SPAN.SAT_EXPIRY_MS
  end
  local ms = q
  if r > 0 then
    ms = q + 1
  end
  -- Exact when the true value is below 2^53, and at least 2^53 otherwise.
  local v = q * 1000 + r
  if v < P53 then
    return v, ms
  end
  return string.format('%.0f%03d', q, r), ms
end

-- Runs `cmd key args...` over the list `args` in batches (Lua's unpack and
-- C stack take a few thousand values at most); `per` values stay together
-- (a field and its value).
function SPAN.batch(cmd, key, args, per)
  local n = #args
  local step = SPAN.BATCH - SPAN.BATCH % per
  for i = 1, n, step do
    local j = i + step - 1
    if j > n then
      j = n
    end
    R_CALL(cmd, key, unpack(args, i, j))
  end
end
