-- The entry point, store(KEYS, ARGV), which the assembly returns (see src/lua/index.ts). Runs
-- after stack.lua, one.lua and lease.lua.

-- The state after charging units at now without refusing (core's chargeState): the
-- algorithm's check with countRejected forced on, its next state written whatever it
-- says; no number beyond CHARGE_MAX (a sliding-log entry or block: LOG_CHARGE_MAX), far below SANE2.
local CHARGE_MAX, LOG_CHARGE_MAX = 2 ^ 50, 2 ^ 40
local function charge(s, now, r, units)
  if r.algo == 'k' then
    local base = now
    if s ~= nil and s[1] > now then base = s[1] end
    return { min(base + units * (r.W / r.L), now + CHARGE_MAX) }
  end
  local f = r.forced
  if f == nil then
    f = {}
    for k, v in pairs(r) do f[k] = v end
    f.cr = true
    r.forced = f
  end
  local _, _, _, _, _, nx = r.alg.check(s, now, f, units)
  if r.algo == 't' then nx[2] = max(nx[2], -CHARGE_MAX)
  elseif r.algo == 'f' then nx[2] = min(nx[2], CHARGE_MAX)
  elseif r.algo == 'w' then nx[3] = min(nx[3], CHARGE_MAX)
  elseif r.algo == 's' or r.algo == 'b' then nx[#nx] = min(nx[#nx], LOG_CHARGE_MAX) end
  return nx
end

-- Gives back (refund) or settles one op under key (KEYS[idx]) decided at time at. A
-- settle's cost c is the actual cost less the estimate: above zero a charge (core's
-- settleEntry), below zero a refund of the difference.
local function give_back(key, idx, r, c, now, drop, at, settle)
  local s, b = read(key, r, now, drop, idx)
  if settle and c > 0 then
    write(key, charge(s, now, r, c), b or 0, r, now)
    return
  end
  if s == nil then return end
  if settle then c = -c end
  local nx = r.alg.refund(s, now, r, c, at)
  if nx ~= nil or b ~= 0 then
    write(key, nx, b, r, now)
    return
  end
  -- Nothing left: a hot key's entry goes (flush deletes it), any other key now.
  local e = CACHE[key]
  if e ~= nil then e.s, e.b, e.dirty, e.gone = nil, nil, false, true else call('DEL', key) end
end

-- One call: the state of the previous one is dropped first (a function library keeps
-- these definitions loaded from call to call).
local function store(keys, argv)
  -- The common calls, straight through (one.lua) when their plan fits.
  local text = argv[1]
  local f = FAST[text]
  if f then return f(keys, argv) end
  local plan = PLANS[text]
  if plan == nil then plan = plan_of(text) end
  -- A lease call (lease.lua): its grants are picked before the stack is decided.
  if plan.mode == 'l' then return lease(plan, keys, argv) end
  if f == nil then
    f = fast_of(text, plan)
    if f then return f(keys, argv) end
  end
  return store_rest(plan, keys, argv, nil, nil)
end

-- The call (plan: its plan parsed) on the general path; now0 and vals0, when given, are
-- Redis' TIME and the MGET of every key of the call, already read.
store_rest = function(plan, keys, argv, now0, vals0)
  KEYS, ARGV = keys, argv
  MIN_TTL_SUPPLIED = plan.minTtl
  redis_now = now0
  -- Hot keys (and so CACHE entries) only where the previous call had some.
  if HAD_HOT then
    HOT, CACHE = {}, {}
    HAD_HOT = false
  end
  VALS = nil
  if plan.mode == 'r' or plan.mode == 's' then
    local now, drop = stack_now(ARGV[2])
    local at = tonumber(ARGV[3])
    local sh = plan.sh
    local settle = plan.mode == 's'
    VALS = call('MGET', unpack(KEYS))
    for i = 1, sh.n do give_back(KEYS[i], i, plan.rules[sh.nums[i]], sh.costs[i], now, drop, at, settle) end
    return out(now)
  end
  local run = plan.one
  if run ~= nil then
    local now, drop
    if run.timed then now, drop = stack_now(ARGV[2])
    else
      -- stack_now on Redis time, inlined.
      MIN_TTL, REDIS_TIME, drop = 0, true, false
      now = time_now()
    end
    return decide_one(run, KEYS[1], now, redis.pcall('GET', KEYS[1]), drop)
  end

  -- Every shape first: a key that a later stack names again is hot (kept in CACHE) from its
  -- first read on. So each key of the call is read from Redis once, before anything is
  -- written, and one MGET reads them all.
  local hot = false
  local h = plan.hot
  for i = 1, #h do
    HOT[KEYS[h[i]]] = true
    hot = true
    HAD_HOT = true
  end
  VALS = vals0 or call('MGET', unpack(KEYS))
  -- The reply's fields so far; the last new key used.
  local k = 0
  local nextKey = 0
  -- The index of the last time read from ARGV.
  local ti = 1
  local runs = plan.runs
  for ri = 1, #runs do
    local run = runs[ri]
    local given = nil
    if run.timed then
      ti = ti + 1
      given = ARGV[ti]
    end
    local now, drop = stack_now(given)
    local consume = run.consume
    local sh = run.sh
    local rules, costs, refs, n, count = run.rules, sh.costs, sh.refs, sh.n, run.count
    if run.settle then
      -- A settle in the batch (one stack a run): its ops given back or charged, in its
      -- place among the stacks; its reply is allowed and now, no op fields.
      ti = ti + 1
      local at = tonumber(ARGV[ti])
      for i = 1, n do
        local idx = refs[i]
        if idx == 0 then
          nextKey = nextKey + 1
          idx = nextKey
        end
        give_back(KEYS[idx], idx, rules[i], costs[i], now, drop, at, true)
      end
      R[k + 1], R[k + 2] = 1, now
      k = k + 2
      count = 0
    end
    -- Stacks of one op (a one-rule limiter's batch) go through single, without the
    -- per-op arrays.
    if n == 1 then
      local r, cost, ref = rules[1], costs[1], refs[1]
      for _ = 1, count do
        local idx = ref
        if idx == 0 then
          nextKey = nextKey + 1
          idx = nextKey
        end
        local a, c, rem, reset, last = single(KEYS[idx], idx, r, cost, now, drop, consume, hot)
        R[k + 1], R[k + 2], R[k + 3], R[k + 4], R[k + 5], R[k + 6] = a, now, c, rem, reset, last
        k = k + 6
      end
      count = 0
    end
    for _ = 1, count do
      for i = 1, n do
        local ref = refs[i]
        if ref == 0 then
          nextKey = nextKey + 1
          ref = nextKey
        end
        KEY[i] = KEYS[ref]
        KIDX[i] = ref
      end
      local allowed = true
      -- The stack's reply fields are written as its rules are checked, and corrected below
      -- when the stack is refused.
      local base = k
      R[k + 2] = now
      k = k + 2
      for i = 1, n do
        local r = rules[i]
        local cost = costs[i]
        local key, idx = KEY[i], KIDX[i]
        --#include inline/op-check.lua
        if not ok and not r.dry then allowed = false end
        -- Each op's outcome is kept for the write pass below (see single for one op).
        OK[i], WS[i], WB[i], X0[i], XS[i], S0[i] = ok, nx, wb, x0, xs or false, s
        -- An admitting rule's retryAfterMs is 0 and a refusing rule's delayMs is 0: the first
        -- field is 1 or the refusal's reason code, the last the delay or the retry time.
        R[k + 2] = rem
        R[k + 3] = reset
        if ok then
          R[k + 1] = 1
          R[k + 4] = delay
        else
          if reason == 'l' then R[k + 1] = 2 elseif reason == 'b' then R[k + 1] = 3 else R[k + 1] = 4 end
          R[k + 4] = retry
        end
        k = k + 4
      end
      if allowed then R[base + 1] = 1
      else
        R[base + 1] = 0
        -- An admitting rule of a refused stack consumed nothing: report it untouched, with no
        -- delay, and the resetMs of the state it read (a check of cost 0), as core's untouched.
        for i = 1, n do
          if OK[i] then
            local p = base + 4 * i - 2
            local r = rules[i]
            local _, _, reset0 = r.alg.check(S0[i], now, r, 0)
            R[p + 2] = R[p + 2] + costs[i]
            R[p + 3] = reset0
            R[p + 4] = 0
          end
        end
      end
      if consume then
        for i = 1, n do
          local wb = WB[i]
          -- An admitting rule consumes only when the whole stack is admitted; a rejecting
          -- rule writes its block or penalty either way.
          if wb ~= false and (allowed or not OK[i]) then write(KEY[i], WS[i], wb, rules[i], now, X0[i], XS[i]) end
        end
      end
    end
  end
  if hot then flush() end
  -- Packed in chunks: unpack() puts every value on the Lua stack.
  if k == 6 then return pack('<dddddd', R[1], R[2], R[3], R[4], R[5], R[6]) end
  return pack_list(R, k)
end
