-- Lua mirror of core/src/algorithms/sliding-log.ts. State
-- { t1, c1, t2, c2, ... }, oldest first, same-millisecond entries merged.

-- Live entries from index first on, plus (now, cost) merged into a same-ms tail.
local function sl_append(state, first, now, cost)
  local nx = {}
  if state ~= nil then for i = first, #state do nx[#nx + 1] = state[i] end end
  if cost <= 0 then return nx end
  local m = #nx
  if m > 0 and nx[m - 1] == now then nx[m] = nx[m] + cost else nx[m + 1] = now; nx[m + 2] = cost end
  return nx
end

-- A sliding log's live entries lose units, newest first (rewardSlidingLog in key-ops.ts).
local function sl_reward(state, at, r, units)
  local n = #state
  if n == 0 then return state end
  local W = r.W
  local now = max(at, state[n - 1])
  local first = 1
  while first <= n and state[first] <= now - W do first = first + 2 end
  local nx = {}
  for i = first, n do nx[#nx + 1] = state[i] end
  local left = units
  while left > 0 and #nx > 0 do
    local m = #nx
    local c = nx[m]
    if c > left then
      nx[m] = c - left
      left = 0
    else
      left = left - c
      nx[m] = nil
      nx[m - 1] = nil
    end
  end
  if #nx > 0 then return nx end
  return nil
end


ALG['s'] = {
  reward = sl_reward,
  check = function(state, at, r, cost)
    local W = r.W
    local first = 1
    local sum = 0
    local n = 0
    -- Time that goes backwards is treated as no time passing: decide at the newest entry's
    -- time, report resetMs and retryAfterMs from the caller's reading at.
    local now = at
    if state ~= nil then n = #state end
    if n > 0 then
      now = max(at, state[n - 1])
      while first <= n and state[first] <= now - W do first = first + 2 end
      for i = first + 1, n, 2 do sum = sum + state[i] end
    end
    if sum + cost <= r.L then
      local newest
      if cost > 0 then newest = now elseif sum > 0 then newest = state[n - 1] else newest = now - W end
      return true, r.L - sum - cost, newest + W - at, 0, 0, sl_append(state, first, now, cost)
    end
    local freed = 0
    local retryAt = now
    for i = first, n, 2 do
      freed = freed + state[i + 1]
      if sum - freed + cost <= r.L then retryAt = state[i] + W; break end
    end
    local nx = nil
    if r.cr then nx = sl_append(state, first, now, cost) end
    return false, max(0, r.L - sum), state[n - 1] + W - at, retryAt - at, 0, nx
  end,
  refund = function(state, now, r, cost, at)
    -- A clock behind the newest entry (it stepped back): the request was merged into it.
    local newest = state[#state - 1]
    if now < newest and at < newest then at = newest end
    for i = #state - 1, 1, -2 do
      if state[i] == at then
        local nx = {}
        local left = state[i + 1] - cost
        for j = 1, #state, 2 do
          if j ~= i then nx[#nx + 1] = state[j]; nx[#nx + 1] = state[j + 1]
          elseif left > 0 then nx[#nx + 1] = state[j]; nx[#nx + 1] = left end
        end
        if #nx > 0 then return nx end
        return nil
      end
      if state[i] < at then break end
    end
    return state
  end,
  expires = function(state, r)
    if #state > 0 then return state[#state - 1] + r.W end
    return 0
  end,
}
