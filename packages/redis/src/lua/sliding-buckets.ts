/**
 * Lua mirror of `core/src/algorithms/sliding-buckets.ts`. State `{ s1, c1, s2, c2, ... }`:
 * the start and count of every non-empty block still in the window, oldest first. The rule's
 * Q field carries N, the blocks per window (args.ts), so a block is W / Q ms.
 */
export const SLIDING_BUCKETS_LUA = `
-- The start of the block of width b containing t (b * floor(t / b), exact as fmod is).
local function sb_start(t, b)
  local s = t - fmod(t, b)
  if s > t then s = s - b end
  return s
end

-- The block a decision at at counts in: its own, or the state's newest block when that is
-- later (time that went backwards is treated as no time passing).
local function sb_block(state, at, b)
  local k = sb_start(at, b)
  if state ~= nil then
    local n = #state
    if n > 0 and state[n - 1] > k then k = state[n - 1] end
  end
  return k
end

-- The index of the oldest block of s still in the window that ends with block k.
local function sb_first(s, k, W)
  local first, n = 1, #s
  while first <= n and s[first] <= k - W do first = first + 2 end
  return first
end

-- Live blocks from index first on, plus cost added to block k (merged into a tail at k).
local function sb_append(state, first, k, cost)
  local nx = {}
  if state ~= nil then for i = first, #state do nx[#nx + 1] = state[i] end end
  if cost <= 0 then return nx end
  local m = #nx
  if m > 0 and nx[m - 1] == k then nx[m] = nx[m] + cost else nx[m + 1] = k; nx[m + 2] = cost end
  return nx
end

ALG['b'] = {
  check = function(state, at, r, cost)
    local W = r.W
    local k = sb_block(state, at, W / r.Q)
    local first, sum, n = 1, 0, 0
    if state ~= nil then
      n = #state
      first = sb_first(state, k, W)
      for i = first + 1, n, 2 do sum = sum + state[i] end
    end
    if sum + cost <= r.L then
      local nx = sb_append(state, first, k, cost)
      local m = #nx
      -- resetMs: until the newest non-empty block has left the window. The 7th value, the
      -- new state's expiry, is a block boundary that every key of that block shares.
      local x, reset = 0, 0
      if m > 0 then x = nx[m - 1] + W; reset = x - at end
      return true, r.L - sum - cost, reset, 0, 0, nx, x
    end
    -- The first boundary at which enough of the oldest blocks have left (cost <= L).
    local freed, retryAt = 0, at
    for i = first, n, 2 do
      freed = freed + state[i + 1]
      if sum - freed + cost <= r.L then retryAt = state[i] + W; break end
    end
    local nx = nil
    if r.cr then nx = sb_append(state, first, k, cost) end
    return false, max(0, r.L - sum), state[n - 1] + W - at, retryAt - at, 0, nx
  end,
  refund = function(state, now, r, cost, at)
    local b = r.W / r.Q
    local n = #state
    -- A clock behind the newest block (it stepped back): the request was counted in it.
    local newest = state[n - 1]
    local j = sb_start(at, b)
    if sb_start(now, b) < newest and j < newest then j = newest end
    for i = n - 1, 1, -2 do
      if state[i] == j then
        local nx = {}
        local left = state[i + 1] - cost
        for q = 1, n, 2 do
          if q ~= i then nx[#nx + 1] = state[q]; nx[#nx + 1] = state[q + 1]
          elseif left > 0 then nx[#nx + 1] = state[q]; nx[#nx + 1] = left end
        end
        if #nx > 0 then return nx end
        return nil
      end
      if state[i] < j then break end
    end
    return state
  end,
  expires = function(state, r)
    if #state > 0 then return state[#state - 1] + r.W end
    return 0
  end,
  -- The live blocks lose units, newest first (a key's reward, key-ops.ts).
  reward = function(state, at, r, units)
    local W = r.W
    local nx = {}
    for i = sb_first(state, sb_block(state, at, W / r.Q), W), #state do nx[#nx + 1] = state[i] end
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
  end,
}
`;
