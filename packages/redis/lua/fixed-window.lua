-- Lua mirror of core/src/algorithms/fixed-window.ts.
-- State { windowStart, count }. UTC months use the days-from-civil arithmetic of
-- H. Hinnant's date algorithms, which Redis' Lua (without os.date) needs.

local DAY = 86400000

-- Calendar months: defined only for a call with a monthly rule.
local civil, month_start
if NEED_MONTH then
  -- The UTC year and month (1..12) of the instant t.
  civil = function(t)
    local z = floor(t / DAY) + 719468
    local era = floor(z / 146097)
    local doe = z - era * 146097
    local yoe = floor((doe - floor(doe / 1460) + floor(doe / 36524) - floor(doe / 146096)) / 365)
    local doy = doe - (365 * yoe + floor(yoe / 4) - floor(yoe / 100))
    local mp = floor((5 * doy + 2) / 153)
    local m = mp < 10 and mp + 3 or mp - 9
    local y = yoe + era * 400
    if m <= 2 then y = y + 1 end
    return y, m
  end

  -- Date.UTC(y, m - 1, 1): the first instant of month m of year y.
  month_start = function(y, m)
    if m > 12 then y = y + 1; m = m - 12 end
    if m <= 2 then y = y - 1 end
    local era = floor(y / 400)
    local yoe = y - era * 400
    local mp = m > 2 and m - 3 or m + 9
    local doy = floor((153 * mp + 2) / 5)
    local doe = yoe * 365 + floor(yoe / 4) - floor(yoe / 100) + doy
    return (era * 146097 + doe - 719468) * DAY
  end
end

local function fw_start(t, r)
  if r.month then local y, m = civil(t); return month_start(y, m) end
  return t - fmod(t, r.W)
end

local function fw_end(start, r)
  if r.month then local y, m = civil(start); return month_start(y, m + 1) end
  return start + r.W
end

local function fw_window_end(start, r)
  if r.first then return start + r.W end
  return fw_end(start, r)
end

-- A refusal (the kernel's REFUSED): the figures of the window read; with countRejected the
-- refusal is written, and its figures describe the count it leaves. max: a count above a
-- limit lowered since (limit per request, or an update).
local function fw_refused(start, count, used, e, now, r)
  local nx = nil
  if r.cr then nx, count = { start, used }, used end
  return false, max(0, r.L - count), e - now, e - now, 0, nx
end

ALG['f'] = {
  width = 2,
  count_step = 2,
  -- The count never beyond CHARGE_MAX.
  charge = charge_by_check(2, 1, CHARGE_MAX),
  refused = fw_refused,
  check = function(state, now, r, cost)
    local start, e
    local count = 0
    if r.first then
      if state ~= nil and state[2] > 0 and now < state[1] + r.W then start = state[1]; count = state[2] else start = now end
      e = start + r.W
    else
      -- The windows of the clock (or calendar months): inlined for the common fixed width.
      if r.month then start = fw_start(now, r) else start = now - fmod(now, r.W) end
      -- A stored window later than now means time went backwards: stay in it. One with
      -- nothing counted is no state (its expiry is 0), on Redis time as on supplied time.
      if state ~= nil and state[2] > 0 and state[1] >= start then start = state[1]; count = state[2] end
      if r.month then e = fw_end(start, r) else e = start + r.W end
    end
    local L = r.L
    --#include inline/fixed-window-kernel.lua REFUSED() = return fw_refused(start, count, used, e, now, r)
    -- The 7th value: the new state's expiry (its window's end), which write() needs;
    -- nothing counted (cost 0 in an empty window): none, so no window is opened.
    if used == 0 then e = 0 end
    return true, rem, reset, 0, 0, { start, used }, e
  end,
  refund = function(state, now, r, cost, at)
    local start = state[1]
    local e = fw_window_end(start, r)
    -- A clock behind the stored window (it stepped back): the request was counted in it.
    if now < start then at = start end
    if at < start or at >= e or now >= e then return state end
    -- Back to 0: no state, as before the request (an exact undo).
    local left = max(0, state[2] - cost)
    if left > 0 then return { start, left } end
    return nil
  end,
  expires = function(state, r)
    -- Nothing counted: no state (no window opened, on every write path).
    if state[2] == 0 then return 0 end
    if r.month and not r.first then return fw_end(state[1], r) end
    return state[1] + r.W
  end,
}
