-- Lua mirror of core/src/algorithms/sliding-log.ts. State
-- { t1, c1, t2, c2, ... }, oldest first, same-millisecond entries merged.

--#include inline/entries.lua

ALG['s'] = {
  width = 0,
  -- Each entry's count, after its time.
  count_step = 2,
  -- The newest entry's count never beyond LOG_CHARGE_MAX.
  charge = charge_by_check(-1, 1, LOG_CHARGE_MAX),
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
      first = entries_first(state, now, W)
      for i = first + 1, n, 2 do sum = sum + state[i] end
    end
    if sum + cost <= r.L then
      local newest
      if cost > 0 then newest = now elseif sum > 0 then newest = state[n - 1] else newest = now - W end
      return true, r.L - sum - cost, newest + W - at, 0, 0, entries_append(state, first, now, cost)
    end
    return entries_refused(state, first, sum, now, at, r, cost, now)
  end,
  refund = function(state, now, r, cost, at)
    -- A clock behind the newest entry (it stepped back): the request was merged into it.
    local newest = state[#state - 1]
    if now < newest and at < newest then at = newest end
    return entries_take_at(state, at, cost)
  end,
  expires = entries_expires,
  -- The live entries lose units, newest first (rewardSlidingLog in key-ops.ts).
  reward = function(state, at, r, units)
    local n = #state
    if n == 0 then return state end
    return entries_trim(state, entries_first(state, max(at, state[n - 1]), r.W), units)
  end,
}
