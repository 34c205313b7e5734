-- Lua mirror of core/src/algorithms/token-bucket.ts. State
-- { last, tokens * W }: a bucket gains exactly L scaled units per ms.

local function tb_level(state, now, r)
  local cap = r.B * r.W
  if state == nil then return now, cap end
  local last = state[1]
  -- min: a bucket fuller than a burst lowered since holds only the new burst.
  if now <= last then return last, min(state[2], cap) end
  local gained = r.L * (now - last)
  local scaled = state[2]
  if gained >= cap - scaled then return now, cap end
  return now, scaled + gained
end

ALG['t'] = {
  check = function(state, at, r, cost)
    -- tb_level, inlined (this is the hot path).
    local W = r.W
    local cap = r.B * W
    local now, scaled = at, cap
    if state ~= nil then
      local last = state[1]
      if at <= last then now, scaled = last, min(state[2], cap)
      else
        local gained = r.L * (at - last)
        scaled = state[2]
        if gained >= cap - scaled then scaled = cap else scaled = scaled + gained end
      end
    end
    local need = cost * W
    if scaled >= need then
      local left = scaled - need
      local reset = 0
      if left < cap then reset = ceil((cap - left) / r.L) + (now - at) end
      return true, floor(left / W), reset, 0, 0, { now, left }
    end
    local nx = nil
    if r.cr then nx = { now, scaled - need } end
    -- Never below 0: a bucket in debt (countRejected, a settle) has no tokens to offer.
    return false, max(0, floor(scaled / W)), ceil((cap - scaled) / r.L) + (now - at), ceil((need - scaled) / r.L) + (now - at), 0, nx
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
  expires = function(state, r) return state[1] + ceil((r.B * r.W - state[2]) / r.L) end,
}
