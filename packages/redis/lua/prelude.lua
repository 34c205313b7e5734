-- Lua prelude shared by every script section: number formatting and entry encoding. Each
-- algorithm's check returns the outcome of core/src/algorithms/types.ts as values.
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

-- A count below zero: what a fixed window, a sliding log, sliding buckets or a sliding-window counter
-- holds is a number of units, never negative in a value we wrote (refunds and rewards stop
-- at zero); a foreign one (-1000) would read as a thousand units of credit. A token
-- bucket's tokens go below zero as a debt (countRejected), a leaky bucket holds a time:
-- both are left as they are (a debt only refuses more).
local function negative_count(algo, s)
  if s == nil then return false end
  if algo == 'w' then return s[2] < 0 or s[3] < 0 end
  if algo == 'f' or algo == 's' or algo == 'b' then
    for i = 2, #s, 2 do
      if s[i] < 0 then return true end
    end
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
