-- Lua mirror of core/src/algorithms/leaky-bucket.ts: meter (GCRA, state
-- { tat }) and queue (state { lastDeparture }), T = W / L in floating point. Like
-- the core it works on the backlog (stored time - now, a small exact number) and
-- corrects the closed-form retry time with settle; a level within half of 1/L ms above
-- the line is rounding, as in the core.

-- Moves a whole-ms candidate t to the first instant at which fits(t) holds.
local function settle(t, fits)
  while not fits(t) do t = t + 1 end
  while fits(t - 1) do t = t - 1 end
  return t
end

-- How far the stored time lies ahead of now (0 when it is in the past or absent).
local function backlog(state, now)
  if state == nil then return 0 end
  return max(0, state[1] - now)
end

-- Exact figures are whole multiples of 1/L ms, so a level within sl = 0.5/L above the line
-- is float rounding, as in the core: whole units of T in room ms, never negative.
local function lb_units(room, T, sl)
  return max(0, floor((room + sl) / T))
end

local function lb_ms(x, sl)
  return max(0, ceil(x - sl))
end

-- Both readings' refund: back by what the request still weighs, c*T less what has drained
-- since at (a clock reading before at is no time passing), as in the core.
local function lb_refund(state, now, r, cost, at)
  local weight = max(0, cost * (r.W / r.L) - max(0, now - at))
  return { max(now, state[1] - weight) }
end

-- Both readings' charge: the stored time moves on by units*T whatever the tolerance (never
-- beyond CHARGE_MAX ahead of now), as in the core.
local function lb_charge(state, now, r, units)
  local base = now
  if state ~= nil and state[1] > now then base = state[1] end
  return { min(base + units * (r.W / r.L), now + CHARGE_MAX) }
end

-- The meter. Its state is a time, no count (no count_step).
ALG['k'] = {
  width = 1,
  charge = lb_charge,
  check = function(state, now, r, cost)
    local T = r.W / r.L
    local sl = 0.5 / r.L
    local tol = r.B * T
    local ahead = backlog(state, now)
    local level = ahead + cost * T
    if level <= tol + sl then
      local tat = now + level
      return true, lb_units(tol - level, T, sl), lb_ms(level, sl), 0, 0, { tat }
    end
    if not r.cr then
      local fits = function(t) return backlog(state, t) + cost * T <= tol + sl end
      local retry = settle(now + ceil(ahead - (tol - cost * T)), fits) - now
      return false, lb_units(tol - ahead, T, sl), lb_ms(ahead, sl), retry, 0, nil
    end
    -- countRejected: the refusal is written, so its figures describe the time it leaves
    -- stored (its backlog as a later check reads it) too.
    local w = { now + level }
    local left = backlog(w, now)
    local fits = function(t) return backlog(w, t) + cost * T <= tol + sl end
    local retry = settle(now + ceil(left - (tol - cost * T)), fits) - now
    return false, min(lb_units(tol - ahead, T, sl), lb_units(tol - left, T, sl)), max(lb_ms(ahead, sl), lb_ms(left, sl)), retry, 0, w
  end,
  refund = lb_refund,
  expires = function(state, r) return ceil(state[1]) end,
}

-- The queue: rules in queue mode (mode 'q') use this entry instead (see parse.lua).
ALG['k'].queue = {
  width = 1,
  charge = lb_charge,
  check = function(state, now, r, cost)
    local T = r.W / r.L
    local sl = 0.5 / r.L
    local mx = r.Q * T
    local wait = backlog(state, now) + cost * T
    if wait <= mx + sl then
      local dep = now + wait
      return true, lb_units(mx - wait, T, sl), lb_ms(wait, sl), 0, lb_ms(wait, sl), { dep }
    end
    local ahead = backlog(state, now)
    local fits = function(t) return backlog(state, t) + cost * T <= mx + sl end
    local retry = settle(now + ceil(ahead - (mx - cost * T)), fits) - now
    return false, lb_units(mx - ahead, T, sl), lb_ms(ahead, sl), retry, 0, nil
  end,
  refund = lb_refund,
  expires = function(state, r) return ceil(state[1]) end,
}
