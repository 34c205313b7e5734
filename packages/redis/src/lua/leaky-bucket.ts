/**
 * Lua mirror of `core/src/algorithms/leaky-bucket.ts` (SPEC 3.5): `meter` (GCRA, state
 * `{ tat }`) and `queue` (state `{ lastDeparture }`), T = W / L in floating point. Like
 * the core it works on the backlog (stored time - now, a small exact number) and
 * corrects the closed-form retry time with `settle`.
 */
export const LEAKY_BUCKET_LUA = `
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

local meter = {
  check = function(state, now, r, cost)
    local T = r.W / r.L
    local tol = r.B * T
    local ahead = backlog(state, now)
    local level = ahead + cost * T
    if level <= tol then return admitted(floor((tol - level) / T), ceil(level), 0, { now + level }) end
    local fits = function(t) return backlog(state, t) + cost * T <= tol end
    local retry = settle(now + ceil(ahead - (tol - cost * T)), fits) - now
    local w = nil
    if r.cr then w = { now + level } end
    return refused(max(0, floor((tol - ahead) / T)), ceil(ahead), retry, w)
  end,
  refund = function(state, now, r, cost) return { max(now, state[1] - cost * (r.W / r.L)) } end,
}

local queue = {
  check = function(state, now, r, cost)
    local T = r.W / r.L
    local mx = r.Q * T
    local wait = backlog(state, now) + cost * T
    if wait <= mx then
      local delay = ceil(wait)
      return admitted(max(0, floor((mx - wait) / T)), delay, delay, { now + wait })
    end
    local ahead = backlog(state, now)
    local fits = function(t) return backlog(state, t) + cost * T <= mx end
    local retry = settle(now + ceil(ahead - (mx - cost * T)), fits) - now
    return refused(max(0, floor((mx - ahead) / T)), ceil(ahead), retry, nil)
  end,
  refund = function(state, now, r, cost) return { max(now, state[1] - cost * (r.W / r.L)) } end,
}

local function lb(r) if r.mode == 'q' then return queue end return meter end

ALG['k'] = {
  check = function(state, now, r, cost) return lb(r).check(state, now, r, cost) end,
  refund = function(state, now, r, cost, at) return lb(r).refund(state, now, r, cost, at) end,
  expires = function(state, r) return ceil(state[1]) end,
}
`;
