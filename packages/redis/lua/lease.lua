-- A lease call (mode `l`, see src/lease/): the lease requests of one tick, each one stack
-- consumed at sizes the server picks. The plan is a decide plan whose stacks are the
-- requests at their costs (`l 1000 2`, rules, then `1 c1:1,2:1` per request; `C` when its
-- time is supplied); no key belongs to two requests. ARGV[2] is the share of what is left
-- that one lease may take (left / share); then per request j its time (ARGV[1 + 2j], ''
-- for Redis TIME) and the most units one of its leases may take (ARGV[2 + 2j]). Per op the
-- grant is that size when a request of that cost would be admitted now, else the
-- request's own cost; the requests are then decided by the stack decision at those costs,
-- one after the other, so a refusal is exactly the request's refusal (countRejected,
-- blockFor and all). The reply is the decide reply (per request) followed by one double
-- per op of every request, its grant. Runs after stack.lua and one.lua, before entry.lua
-- (whose store() calls it).

-- Reused by every call: the grants, and the decide call's arguments (plan, supplied times).
local LEASE_GRANTS, LEASE_ARGV = {}, {}

-- The grants of one request's ops (keys from index k + 1) at now; returns their costs.
local function lease_costs(sh, rules, k, now, drop, most, share)
  local costs = {}
  for i = 1, sh.n do
    local r, c = rules[i], sh.costs[i]
    local grant = c
    local s, b = read(KEYS[k + i], r, now, drop, k + i)
    if c <= r.maxCost and (b == nil or b <= now) then
      local _, left = r.alg.check(s, now, r, 0)
      local want = floor(left / share)
      if want > most then want = most end
      if want > c and (r.alg.check(s, now, r, want)) then grant = want end
    end
    costs[i] = grant
    LEASE_GRANTS[k + i] = grant
  end
  return costs
end

local function lease(plan, keys, argv)
  begin_call(keys, argv, plan.minTtl, nil)
  VALS = call('MGET', unpack(keys))
  local share = tonumber(argv[2])
  local decides = {}
  LEASE_ARGV[1] = argv[1]
  -- Keys (and grants) used so far, requests seen, supplied times passed on.
  local k, j, nt = 0, 0, 1
  local runs = plan.runs
  for ri = 1, #runs do
    local run = runs[ri]
    local sh, rules = run.sh, run.rules
    for _ = 1, run.count do
      j = j + 1
      local given = argv[1 + 2 * j]
      local now, drop = stack_now(given)
      local costs = lease_costs(sh, rules, k, now, drop, tonumber(argv[2 + 2 * j]), share)
      k = k + sh.n
      if run.timed then
        nt = nt + 1
        LEASE_ARGV[nt] = given
      end
      decides[j] = {
        count = 1, consume = true, timed = run.timed, rules = rules,
        sh = { nums = sh.nums, costs = costs, refs = sh.refs, hot = sh.hot, n = sh.n },
      }
    end
  end
  for i = nt + 1, #LEASE_ARGV do LEASE_ARGV[i] = nil end
  local p = { mode = 'd', minTtl = plan.minTtl, rules = plan.rules, runs = decides, hot = {} }
  local out = stack_of(p)(keys, LEASE_ARGV, redis_now, VALS)
  return out .. pack_list(LEASE_GRANTS, k)
end
