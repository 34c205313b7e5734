-- Entry lists { t1, c1, t2, c2, ... }, oldest first: a sliding log's entries and sliding
-- buckets' blocks. The helpers both algorithms share (core/src/algorithms/entries.ts),
-- included in each one's section.

-- The index of the oldest entry of s still in the window that ends at t.
local function entries_first(s, t, W)
  local first, n = 1, #s
  while first <= n and s[first] <= t - W do first = first + 2 end
  return first
end

-- Live entries from index first on, plus cost added at t (merged into a tail at t).
local function entries_append(state, first, t, cost)
  local nx = {}
  if state ~= nil then for i = first, #state do nx[#nx + 1] = state[i] end end
  if cost <= 0 then return nx end
  local m = #nx
  if m > 0 and nx[m - 1] == t then nx[m] = nx[m] + cost else nx[m + 1] = t; nx[m + 2] = cost end
  return nx
end

-- A refusal's retry time: when enough of the oldest live entries (from first on, sum in
-- all) have left the window for cost to fit under L; otherwise t.
local function entries_retry_at(state, first, sum, cost, L, W, t)
  if state == nil then return t end
  local freed = 0
  for i = first, #state, 2 do
    freed = freed + state[i + 1]
    if sum - freed + cost <= L then return state[i] + W end
  end
  return t
end

-- The refusal of cost by the live entries of state (from index first on, sum in all) at t
-- (entries.ts' refusal): retry when enough of the oldest have left (t0 when none frees
-- enough), reset when the newest has, both from the caller's reading at. A counted
-- refusal (countRejected) adds cost at t, and its figures describe the entries it leaves too.
local function entries_refused(state, first, sum, t, at, r, cost, t0)
  local W, L = r.W, r.L
  -- No entry: a charge beyond the limit (a settle's) on a key with nothing counted.
  local newest = t - W
  if state ~= nil and #state > 0 then newest = state[#state - 1] end
  if not r.cr then return false, max(0, L - sum), newest + W - at, entries_retry_at(state, first, sum, cost, L, W, t0) - at, 0, nil end
  local nx = entries_append(state, first, t, cost)
  local left = 0
  for i = 2, #nx, 2 do left = left + nx[i] end
  -- A refusal is at t or later, so every entry it leaves is live then.
  if #nx > 0 and nx[#nx - 1] > newest then newest = nx[#nx - 1] end
  return false, max(0, min(L - sum, L - left)), newest + W - at, entries_retry_at(nx, 1, left, cost, L, W, t0) - at, 0, nx
end

-- The entries with cost taken from the one at t (dropped when emptied; nil when none is
-- left); the state itself when no entry is at t.
local function entries_take_at(state, t, cost)
  for i = #state - 1, 1, -2 do
    if state[i] == t then
      local nx = {}
      local left = state[i + 1] - cost
      for j = 1, #state, 2 do
        if j ~= i then nx[#nx + 1] = state[j]; nx[#nx + 1] = state[j + 1]
        elseif left > 0 then nx[#nx + 1] = state[j]; nx[#nx + 1] = left end
      end
      if #nx > 0 then return nx end
      return nil
    end
    if state[i] < t then break end
  end
  return state
end

-- The live entries from index first on, less units taken newest first (a key's reward);
-- nil when none is left.
local function entries_trim(state, first, units)
  local nx = {}
  for i = first, #state do nx[#nx + 1] = state[i] end
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

-- An entry list's expiry: its newest entry's leaving the window.
local function entries_expires(state, r)
  if #state > 0 then return state[#state - 1] + r.W end
  return 0
end
