-- The entry point, store(KEYS, ARGV), which the assembly returns (see src/lua/index.ts). Runs
-- after stack.lua, one.lua and lease.lua.

-- A refund or settle call (modes r and s, see parse.lua): each op given back or settled at
-- ARGV[2] (empty: Redis TIME), the decision's time ARGV[3]; replies now. Applied once: a
-- call whose mark (the key after the ops', ARGV[4] its lifetime) is already set ran before.
local function give_back_call(plan, keys, argv)
  begin_call(keys, argv, plan.minTtl, nil)
  local now, drop = stack_now(argv[2])
  local at = tonumber(argv[3])
  local sh = plan.sh
  local n = sh.n
  if not call('SET', keys[n + 1], '1', 'NX', 'PX', argv[4]) then return out(now) end
  local settle = plan.mode == 's'
  VALS = call('MGET', unpack(keys, 1, n))
  for i = 1, n do give_back(keys[i], i, plan.rules[sh.nums[i]], sh.costs[i], now, drop, at, settle) end
  return out(now)
end

-- One call: the state of the previous one is dropped first (a function library keeps
-- these definitions loaded from call to call).
local function store(keys, argv)
  -- A decide plan's closure (one.lua), when its plan was seen before.
  local text = argv[1]
  local f = FAST[text]
  if f then return f(keys, argv) end
  local plan = PLANS[text]
  if plan == nil then plan = plan_of(text) end
  -- A lease call (lease.lua): its grants are picked before the stack is decided.
  if plan.mode == 'l' then return lease(plan, keys, argv) end
  if plan.mode == 'r' or plan.mode == 's' then return give_back_call(plan, keys, argv) end
  return fast_of(text, plan)(keys, argv)
end
