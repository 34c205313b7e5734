-- Lua mirror of core/src/algorithms/token-bucket.ts. State
-- { last, tokens * W }: a bucket gains exactly L scaled units per ms.

local function tb_level(state, now, r)
  local L, cap = r.L, r.B * r.W
  local last, s2
  if state ~= nil then last, s2 = state[1], state[2] end
  --#include inline/token-bucket-level.lua
  return tn, scaled
end

-- A refusal (the kernel's REFUSED): the figures of the level read; with countRejected the
-- refusal is written (a debt), and its figures describe the level it leaves.
local function tb_refused(tn, scaled, need, now, r, cap)
  local nx = nil
  if r.cr then
    scaled = scaled - need
    nx = { tn, scaled }
  end
  -- Never below 0: a bucket in debt (countRejected, a settle) has no tokens to offer.
  return false, max(0, floor(scaled / r.W)), ceil((cap - scaled) / r.L) + (tn - now), ceil((need - scaled) / r.L) + (tn - now), 0, nx
end

ALG['t'] = {
  -- Its tokens go below zero as a debt (no count_step).
  width = 2,
  -- The debt never beyond CHARGE_MAX.
  charge = charge_by_check(2, -1, CHARGE_MAX),
  refused = tb_refused,
  check = function(state, now, r, cost)
    local L, W = r.L, r.W
    local cap, need = r.B * W, cost * W
    local last, s2
    if state ~= nil then last, s2 = state[1], state[2] end
    --#include inline/token-bucket-kernel.lua REFUSED() = return tb_refused(tn, scaled, need, now, r, cap)
    return true, rem, reset, 0, 0, { tn, left }
  end,
  refund = function(state, now, r, cost, at)
    local t, scaled = tb_level(state, now, r)
    -- What the request still weighs: its cost less what has refilled since at (none when
    -- the clock is behind the stored time), as in the core.
    local elapsed = 0
    if now >= state[1] then elapsed = max(0, now - at) end
    local weight = max(0, cost * r.W - r.L * elapsed)
    return { t, min(r.B * r.W, scaled + weight) }
  end,
  -- Never before the bucket's own time: one fuller than a burst lowered since is full at
  -- that time, and a clock behind it decides there (time going backwards), not afresh.
  expires = function(state, r) return state[1] + max(0, ceil((r.B * r.W - state[2]) / r.L)) end,
}
