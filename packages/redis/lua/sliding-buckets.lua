-- Lua mirror of core/src/algorithms/sliding-buckets.ts. State { s1, c1, s2, c2, ... }: the
-- start and count of every non-empty block still in the window, oldest first. The rule's
-- Q field carries N, the blocks per window (src/args.ts), so a block is W / Q ms. Its entry
-- lists are a sliding log's (inline/entries.lua), with block starts for times.

--#include inline/entries.lua

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

ALG['b'] = {
  width = 0,
  -- Each block's count, after its start.
  count_step = 2,
  -- The newest block's count never beyond LOG_CHARGE_MAX.
  charge = charge_by_check(-1, 1, LOG_CHARGE_MAX),
  check = function(state, at, r, cost)
    local W = r.W
    local k = sb_block(state, at, W / r.Q)
    local first, sum, n = 1, 0, 0
    if state ~= nil then
      n = #state
      first = entries_first(state, k, W)
      for i = first + 1, n, 2 do sum = sum + state[i] end
    end
    if sum + cost <= r.L then
      local nx = entries_append(state, first, k, cost)
      local m = #nx
      -- resetMs: until the newest non-empty block has left the window. The 7th value, the
      -- new state's expiry, is a block boundary that every key of that block shares.
      local x, reset = 0, 0
      if m > 0 then x = nx[m - 1] + W; reset = x - at end
      return true, r.L - sum - cost, reset, 0, 0, nx, x
    end
    -- Retry at the first boundary at which enough of the oldest blocks have left (cost <= L).
    return entries_refused(state, first, sum, k, at, r, cost, at)
  end,
  refund = function(state, now, r, cost, at)
    local b = r.W / r.Q
    -- A clock behind the newest block (it stepped back): the request was counted in it.
    local newest = state[#state - 1]
    local j = sb_start(at, b)
    if sb_start(now, b) < newest and j < newest then j = newest end
    return entries_take_at(state, j, cost)
  end,
  expires = entries_expires,
  -- The live blocks lose units, newest first (a key's reward, key-ops.ts).
  reward = function(state, at, r, units)
    local W = r.W
    return entries_trim(state, entries_first(state, sb_block(state, at, W / r.Q), W), units)
  end,
}
