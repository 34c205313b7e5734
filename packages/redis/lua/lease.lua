-- A lease call (mode `l`, see src/lease/): one stack, consumed at sizes the server picks.
-- The plan is a decide plan of one run of one stack whose costs are the request's
-- (`l 1000 2`, rules, `1 c1:1,2:1`; `C` when its time is ARGV[2]); ARGV[3] is the most units
-- one lease may take and ARGV[4] the share of what is left that one lease may take (left /
-- share). Per op the grant is that size when a request of that cost would be admitted now,
-- else the request's own cost; the stack is then decided by the stack decision at those
-- costs, so a refusal is exactly the refusal of the request (countRejected, blockFor and
-- all). The reply is the decide reply followed by one double per op, its grant. Runs after
-- stack.lua and one.lua, before entry.lua (whose store() calls it).

local LEASE_GRANTS = {}
local function lease(plan, keys, argv)
  begin_call(keys, argv, plan.minTtl, nil)
  local run = plan.runs[1]
  local given = nil
  if run.timed then given = argv[2] end
  local now, drop = stack_now(given)
  local most, share = tonumber(argv[3]), tonumber(argv[4])
  VALS = call('MGET', unpack(keys))
  local sh, rules = run.sh, run.rules
  local n = sh.n
  local costs = {}
  for i = 1, n do
    local r, c = rules[i], sh.costs[i]
    local g = c
    local s, b = read(keys[i], r, now, drop, i)
    if c <= r.maxCost and (b == nil or b <= now) then
      local _, left = r.alg.check(s, now, r, 0)
      local want = floor(left / share)
      if want > most then want = most end
      if want > c and (r.alg.check(s, now, r, want)) then g = want end
    end
    costs[i] = g
    LEASE_GRANTS[i] = g
  end
  local decide = {
    count = 1, consume = true, timed = run.timed, rules = rules,
    sh = { nums = sh.nums, costs = costs, refs = sh.refs, hot = sh.hot, n = n },
  }
  local p = { mode = 'd', minTtl = plan.minTtl, rules = plan.rules, runs = { decide }, hot = {} }
  local out = stack_of(p)(keys, argv, redis_now, VALS)
  return out .. pack_list(LEASE_GRANTS, n)
end
