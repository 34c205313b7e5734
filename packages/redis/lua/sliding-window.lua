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

ALG['w'] = {
  check = function(state, at, r, cost)
    local W = r.W
    local prev, cur = 0, 0
    local now = at
    local start = now - fmod(now, W)
    if state ~= nil then
      local s0 = state[1]
      if s0 >= start then
        -- Same window, or time went backwards: decide at the stored window's start at the
        -- earliest, report resetMs and retryAfterMs from the caller's reading at.
        start = s0
        now = max(now, s0)
        prev = state[2]
        cur = state[3]
      elseif s0 == start - W then prev = state[3] end
    end
    local e = now - start
    local scaled = prev * (W - e) + cur * W
    local floorEstimate = floor(scaled / W)
    if scaled < (r.L - cost + 1) * W then
      local after = cur + cost
      -- resetMs: until a request of cost L would pass (room 1), as in the core.
      local reset = 0
      if prev * (W - e) + after * W >= W then reset = sw_retry_at(start, prev, after, W, 1) - at end
      -- The 7th value: the new state's expiry (see expires), which write() needs.
      local xn = start + W
      if after > 0 then xn = start + 2 * W end
      return true, max(0, r.L - floorEstimate - cost), reset, 0, 0, { start, prev, after }, xn
    end
    local reset = sw_retry_at(start, prev, cur, W, 1) - at
    local nx = nil
    if r.cr then nx = { start, prev, cur + cost } end
    return false, max(0, r.L - floorEstimate), reset, sw_retry_at(start, prev, cur, W, r.L - cost + 1) - at, 0, nx
  end,
  refund = function(state, now, r, cost, at)
    local W = r.W
    local start = state[1]
    -- A clock behind the stored window (it stepped back): the request was counted in it.
    local atStart = at - fmod(at, W)
    if now < start then atStart = start end
    if atStart == start then return { start, state[2], max(0, state[3] - cost) } end
    if atStart == start - W then return { start, max(0, state[2] - cost), state[3] } end
    return state
  end,
  expires = function(state, r)
    if state[3] > 0 then return state[1] + 2 * r.W end
    return state[1] + 1 * r.W
  end,
}
