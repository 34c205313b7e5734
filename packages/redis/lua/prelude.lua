-- Lua prelude shared by every script section: number formatting and entry encoding. Each
-- algorithm's check returns the outcome of core/src/algorithms/types.ts as values.
--
-- Each algorithm's section (<algorithm>.lua) defines ALG[code], everything the shared code
-- knows of it, named as in core's registry (core/src/algorithms/types.ts) where it has the
-- fact: check, refund, expires (expiresAt), charge; width, the numbers of its state (0: a
-- list of variable width); count_step, where its state holds counts (see negative_count;
-- nil: none); reward, where its own differs from a refund at now; queue, the entry that
-- rules in queue mode use (mode 'q': another reading of the same state); refused (and any
-- helper such as retry_at), which its kernel inlined in the cost-1 closures (ops.lua,
-- one.lua) calls.
--
-- Redis runs Lua 5.1, whose numbers are IEEE doubles like JavaScript's, so the same
-- operations in the same order give the same results. Decisions leave the script as
-- packed doubles and states are stored as packed doubles, so both round-trip exactly.
-- The refund's reply (its time) is an integer reply when whole, else %.17g text (17
-- significant digits round-trip every double).

local floor, ceil, max, min, fmod = math.floor, math.ceil, math.max, math.min, math.fmod
local format, tonumber = string.format, tonumber

local function fmt(x) return format('%.17g', x) end

-- A check's outcome travels as multiple values, not a table (no allocation per check):
-- allowed, remaining, resetMs, retryAfterMs, delayMs, next state (nil: nothing to write).
-- Each algorithm returns them directly: a Lua function call costs about as much as a
-- dozen arithmetic operations in Redis' interpreter, so the hot path makes few.

-- An entry is stored as packed little-endian doubles (Redis' struct library): the block
-- deadline, the expiry it was written for (under the rule that wrote it; on Redis time also
-- what the key's TTL was set for; -inf in builds before), then the algorithm's state. Exact, compact, and no number
-- formatting. No state fields means no state (an empty sliding log decides like none).
local pack, unpack_bin, rep = struct.pack, struct.unpack, string.rep
local NO_EXPIRY = -1 / 0

-- '<' followed by k 'd's: constants up to 8 (an entry's fields, a one-op stack's reply),
-- built once per call above that.
local FMT = { '<d', '<dd', '<ddd', '<dddd', '<ddddd', '<dddddd', '<ddddddd', '<dddddddd' }
local function fmt_of(k)
  local f = FMT[k]
  if f == nil then f = '<' .. rep('d', k); FMT[k] = f end
  return f
end

-- Every number of an entry we write is a time in ms (about 1.8e12 today), a count or a
-- level. An entry whose numbers' squares sum beyond SANE2 (squares: no cancellation) holds
-- NaN, an infinity or a number beyond 1e16 in magnitude: a value we did not write, whose
-- TTL could not even be set. Entries of ours stay far below it (a sliding log would need
-- tens of millions of entries to reach it).
local SANE2 = 1e32

-- A count below zero: a count of units is never negative in a value we wrote (refunds and
-- rewards stop at zero); a foreign one (-1000) would read as a thousand units of credit.
-- step: the algorithm's count_step, its counts being every step-th number of its state from
-- the second. A state without counts (a debt that may go below zero, a time) has no
-- count_step and is left as it is (a debt only refuses more).
local function negative_count(s, step)
  if s == nil then return false end
  for i = 2, #s, step do
    if s[i] < 0 then return true end
  end
  return false
end

-- The state (nil for none), block deadline and TTL expiry of a stored value (see above).
local function decode(v)
  local n = #v / 8
  if n == 1 then return nil, (unpack_bin('<d', v)), NO_EXPIRY end
  local b, x = unpack_bin('<dd', v)
  if n == 2 then return nil, b, x end
  local s
  if n <= 34 then
    -- unpack returns the n - 2 state fields and then the next position: drop the latter.
    s = { unpack_bin(fmt_of(n - 2), v, 17) }
    s[n - 1] = nil
  else
    s = {}
    for i = 3, n do s[i - 2] = (unpack_bin('<d', v, (i - 1) * 8 + 1)) end
  end
  return s, b, x
end

local function encode(s, b, x)
  local n = 0
  if s ~= nil then n = #s end
  if n == 0 then return pack('<dd', b, x) end
  if n <= 30 then return pack(fmt_of(n + 2), b, x, unpack(s)) end
  local parts = { pack('<dd', b, x) }
  for i = 1, n do parts[i + 1] = pack('<d', s[i]) end
  return table.concat(parts)
end

-- The refund's reply: a whole number as an integer reply (no formatting), others as text.
local function out(x)
  if x == floor(x) and x < 9007199254740992 and x > -9007199254740992 then return x end
  return fmt(x)
end

-- The most a charge leaves in a state (core's CHARGE_MAX; each sliding-log entry or block:
-- LOG_CHARGE_MAX), far below SANE2, so no pile of charges turns a debt into a fresh budget.
local CHARGE_MAX, LOG_CHARGE_MAX = 2 ^ 50, 2 ^ 40

-- r with countRejected set to cr: a copy made once and kept on r under name.
local function with_cr(r, name, cr)
  local u = r[name]
  if u == nil then
    u = {}
    for k, v in pairs(r) do u[k] = v end
    u.cr = cr
    r[name] = u
  end
  return u
end

-- A charge by the algorithm's own check with countRejected forced on (core's chargeByCheck):
-- the state an admitted request of units would leave whatever is left, its number at i
-- (from the end when negative, -1 the last) kept within limit, below it (sign 1) or above
-- its negative (sign -1). An algorithm's charge (see the algorithm sections).
local function charge_by_check(i, sign, limit)
  return function(s, now, r, units)
    local _, _, _, _, _, nx = r.alg.check(s, now, with_cr(r, 'forced', true), units)
    local j = i
    if j < 0 then j = #nx + 1 + j end
    if sign > 0 then nx[j] = min(nx[j], limit) else nx[j] = max(nx[j], -limit) end
    return nx
  end
end
