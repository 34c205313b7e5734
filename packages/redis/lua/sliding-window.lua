-- Lua mirror of core/src/algorithms/sliding-window.ts. State
-- { start, prev, cur }, integer arithmetic scaled by W.

-- The earliest time prev*(W - e) + cur*W < room*W holds, room = L - cost + 1 >= 1.
local function sw_retry_at(start, prev, cur, W, room)
  local a = room - cur
  if a > 0 and prev > 0 then
    local e = floor((W * (prev - a)) / prev) + 1
    if e < W then return start + e end
  end
  if cur < room then return start + W end
  return start + W + floor((W * (cur - room)) / cur) + 1
end

-- A refusal (the kernel's REFUSED, e its time into the window): the figures of the state
-- read; with countRejected the refusal is written, and its figures describe the state it
-- leaves too (sliding-window.ts).
local function sw_refused(start, prev, cur, now, r, cost, scaled, e)
  local W, L = r.W, r.L
  local remaining = L - floor(scaled / W)
  local reset = sw_retry_at(start, prev, cur, W, 1) - now
  if not r.cr then return false, max(0, remaining), reset, sw_retry_at(start, prev, cur, W, L - cost + 1) - now, 0, nil end
  local counted = cur + cost
  local left = floor((prev * (W - e) + counted * W) / W)
  reset = max(reset, sw_retry_at(start, prev, counted, W, 1) - now)
  return false, max(0, min(remaining, L - left)), reset, sw_retry_at(start, prev, counted, W, L - cost + 1) - now, 0, { start, prev, counted }
end

-- A sliding window's estimate falls by units: the current count first, then the previous
-- window's weight (rewardSlidingWindow in key-ops.ts).
local function sw_reward(state, at, r, units)
  local W = r.W
  local start = at - fmod(at, W)
  local now = at
  local prev, cur = 0, 0
  local s0 = state[1]
  if s0 >= start then
    start = s0
    now = max(now, s0)
    prev = state[2]
    cur = state[3]
  elseif s0 == start - W then prev = state[3]
  else return state end
  local fromCur = min(cur, units)
  cur = cur - fromCur
  local left = units - fromCur
  if left > 0 and prev > 0 then
    local e = now - start
    local scaled = prev * (W - e) + cur * W
    local target = floor(scaled / W) - left
    if target < cur then prev = 0
    else
      local d = floor((scaled - (target + 1) * W) / (W - e)) + 1
      prev = max(0, prev - d)
    end
  end
  return { start, prev, cur }
end


ALG['w'] = {
  width = 3,
  -- Both counts, the previous window's and the current one's.
  count_step = 1,
  -- The current count never beyond CHARGE_MAX.
  charge = charge_by_check(3, 1, CHARGE_MAX),
  reward = sw_reward,
  retry_at = sw_retry_at,
  refused = sw_refused,
  check = function(state, now, r, cost)
    local W, L = r.W, r.L
    local start = now - fmod(now, W)
    local room = (L - cost + 1) * W
    local s0, p, c = NO_EXPIRY, 0, 0
    if state ~= nil then s0, p, c = state[1], state[2], state[3] end
    --#include inline/sliding-window-kernel.lua REFUSED() = return sw_refused(start, prev, cur, now, r, cost, scaled, e)
    -- The 7th value: the new state's expiry, which write() needs.
    return true, rem, reset, 0, 0, { start, prev, after }, xn
  end,
  refund = function(state, now, r, cost, at)
    local W = r.W
    local start = state[1]
    -- A clock behind the stored window (it stepped back): the request was counted in it.
    local atStart = at - fmod(at, W)
    if now < start then atStart = start end
    local prev, cur = state[2], state[3]
    if atStart == start then cur = max(0, cur - cost)
    elseif atStart == start - W then prev = max(0, prev - cost)
    else return state end
    -- Both counts back to 0: no state, as before the request (an exact undo).
    if prev == 0 and cur == 0 then return nil end
    return { start, prev, cur }
  end,
  expires = function(state, r)
    if state[3] > 0 then return state[1] + 2 * r.W end
    return state[1] + 1 * r.W
  end,
}
