/**
 * Lua prelude shared by every script section: number formatting, entry encoding and
 * the `admitted` / `refused` constructors of `core/src/algorithms/types.ts`.
 *
 * Redis runs Lua 5.1, whose numbers are IEEE doubles like JavaScript's, so the same
 * operations in the same order give the same results. Numbers leave the script as
 * `%.17g` strings: an integer reply would truncate fractions, and 17 significant
 * digits round-trip every double exactly.
 */
export const COMMON_LUA = `
local floor, ceil, max, min, fmod = math.floor, math.ceil, math.max, math.min, math.fmod
local format, tonumber = string.format, tonumber

local function fmt(x) return format('%.17g', x) end

local function admitted(remaining, resetMs, delayMs, nx)
  return { allowed = true, remaining = remaining, resetMs = resetMs, retryAfterMs = 0, delayMs = delayMs, reason = '', next = nx }
end

local function refused(remaining, resetMs, retryAfterMs, nx)
  return { allowed = false, remaining = remaining, resetMs = resetMs, retryAfterMs = retryAfterMs, delayMs = 0, reason = 'l', next = nx }
end

-- An entry is stored as "b,s1,s2,...": the block deadline, then the algorithm's state.
-- No state fields means no state (an empty sliding log decides like none).
local function decode(v)
  local b, s = nil, nil
  for part in string.gmatch(v, '[^,]+') do
    if b == nil then b = tonumber(part) else
      if s == nil then s = {} end
      s[#s + 1] = tonumber(part)
    end
  end
  return { s = s, b = b or 0 }
end

local function encode(e)
  local parts = { fmt(e.b) }
  if e.s ~= nil then for i = 1, #e.s do parts[i + 1] = fmt(e.s[i]) end end
  return table.concat(parts, ',')
end
`;
