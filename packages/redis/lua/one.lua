-- The common calls decided straight through, for ops of cost 1 on Redis time under the
-- three algorithms most rules use (a sliding-window counter, a fixed window on the clock,
-- a token bucket). Runs after stack.lua, whose helpers it shares.
--
-- - A request alone in its tick under one rule: fast_of(text, plan) builds, once per
--   plan, a closure with the rule's numbers as upvalues (no table lookup, no dispatch, no
--   state table): it reads TIME and the key (GET), decides, writes and replies.
-- - A stack of several such ops, or a batch of such stacks (no key named twice): one
--   closure per plan reads TIME once and every key with one MGET, checks each op with
--   its rule's op closure (op_of, the same arithmetic), and only when every op of every
--   stack is admitted writes them all (each stack all-or-nothing; with no key shared, the
--   stacks of a batch do not see each other's writes, so deciding them all first is
--   deciding them one after the other).
--
-- Every number is worked out with the operations of the algorithm's check (its section) in
-- the same order, so the results are the same doubles. Only admissions of well-formed
-- entries (or none) are decided here; anything else — a refusal, a block, a value that is
-- not a plain entry of the rule (read as absent or as a block alone by read) — goes, before
-- anything is written, to the general path with the time and the values already read, which
-- decides it exactly as before.
--
-- An admitted entry whose expiry is unchanged is written over the one read with SETRANGE
-- key 0: the same bytes as SET ... KEEPTTL (the value read has the new one's length, and
-- its key, read in this script, is still there: Redis expires keys inside a script on the
-- script's start time), the TTL kept, and an integer reply where SET's status reply costs
-- Lua a table. Where an ACL refuses SETRANGE, SET ... KEEPTTL writes it instead.
--
-- An admission here replies now, then per op remaining and resetMs, as doubles
-- (parseDecisions in args.ts reads a reply of that length as every stack admitted, no
-- delay): fewer than half the doubles of the general reply.

local pcall_, type = redis.pcall, type

-- A lone call past its closure starts as store_rest would: the call's state reset, on
-- Redis time now.
local function one_call(plan, now)
  MIN_TTL_SUPPLIED = plan.minTtl
  if HAD_HOT then
    HOT, CACHE = {}, {}
    HAD_HOT = false
  end
  redis_now = now
  MIN_TTL, REDIS_TIME = 0, true
end

-- The general path for the lone call the closure could not decide: the plan's one stack at
-- now, with the key's value v as GET replied (decide_one, past its reads).
local function one_rest(plan, key, now, v)
  one_call(plan, now)
  return decide_one(plan.one, key, now, v, false)
end

-- A lone call's refusal that its closure's kernel found: the figures of the algorithm's
-- refused (ok, rem, reset, retry, delay, nx) for the state it read (s, nil for none; x0 the
-- expiry its key's TTL was set for). What single does with a refusal, without checking the
-- rule again: countRejected, blockFor, the write, the reply.
local function one_refused(plan, key, now, s, x0, _ok, rem, reset, retry, _delay, nx)
  one_call(plan, now)
  local run = plan.one
  local r = run.rules[1]
  local _, delay, reason, has, wb
  _, rem, reset, retry, delay, reason, has, nx, wb = check_rule(s, nil, now, r, 1, true, rem, reset, retry, nx)
  if run.consume and has then write(key, nx, wb, r, now, x0, nil) end
  local a, code = 0, 4
  if r.dry then a = 1 end
  if reason == 'l' then code = 2 elseif reason == 'b' then code = 3 end
  return pack('<dddddd', a, now, code, rem, reset, retry)
end

-- Writes an admitted entry v (on Redis time, block 0) whose key's TTL was set for x0, with
-- the expiry x (as write() does; at: x is a window's end, set as the instant).
local function one_write(key, v, x, now, at)
  if x <= now then call('DEL', key); return end
  set_expiring(key, v, x, now, 0, at)
end

-- An absent key's value as the sliding-window and fixed-window closures read it (one unpack
-- either way, no moves): no block, no TTL expiry, and a window start (-1e15) that no window
-- on Redis time matches.
local NONE_W = pack('<ddddd', 0, NO_EXPIRY, -1e15, 0, 0)
local NONE_F = pack('<dddd', 0, NO_EXPIRY, -1e15, 0)

local LONE_MAKERS, OP_MAKERS = {}, {}
LONE_MAKERS['w'] = function(plan, r, consume)
  --#include inline/one-rule.lua
  return function(keys)
    local key = keys[1]
    --#include inline/time-ms.lua
    local v = pcall_('GET', key)
    --#include inline/one-sliding-window.lua BAIL() = return one_rest(plan, key, now, v); REFUSED() = return one_refused(plan, key, now, v and { s0, p, c }, x0, r.alg.refused(start, prev, cur, now, r, 1, scaled))
    if nv then
      if xn == x0 and xn > now then
        if pcall_('SETRANGE', key, '0', nv) ~= #nv then call('SET', key, nv, 'KEEPTTL') end
      else one_write(key, nv, xn, now, xn) end
    end
    return pack('<ddd', now, rem, reset)
  end
end

LONE_MAKERS['f'] = function(plan, r, consume)
  --#include inline/one-rule.lua
  return function(keys)
    local key = keys[1]
    --#include inline/time-ms.lua
    local v = pcall_('GET', key)
    --#include inline/one-fixed-window.lua BAIL() = return one_rest(plan, key, now, v); REFUSED() = return one_refused(plan, key, now, v and { s0, c }, x0, r.alg.refused(start, count, used, e, now, r))
    if nv then
      if xn == x0 and xn > now then
        if pcall_('SETRANGE', key, '0', nv) ~= #nv then call('SET', key, nv, 'KEEPTTL') end
      else one_write(key, nv, xn, now, xn) end
    end
    return pack('<ddd', now, rem, reset)
  end
end

LONE_MAKERS['t'] = function(plan, r, consume)
  --#include inline/one-rule.lua
  return function(keys)
    local key = keys[1]
    --#include inline/time-ms.lua
    local v = pcall_('GET', key)
    --#include inline/one-token-bucket.lua BAIL() = return one_rest(plan, key, now, v); REFUSED() = return one_refused(plan, key, now, last and { last, s2 }, x0, r.alg.refused(tn, scaled, need, now, r, cap))
    if nv then
      if xn == x0 and xn > now then
        if pcall_('SETRANGE', key, '0', nv) ~= #nv then call('SET', key, nv, 'KEEPTTL') end
      elseif xn <= now then one_write(key, nv, xn, now, nil)
      else
        -- A bucket's expiry as a TTL (PX), ceil(xn - now) as -floor(now - xn).
        local d = now - xn
        local ms = -(d - d % 1)
        call('SET', key, nv, 'PX', TTL_TEXT[ms] or ttl_text(ms))
      end
    end
    return pack('<ddd', now, rem, reset)
  end
end

OP_MAKERS['w'] = function(r, consume)
  --#include inline/one-rule.lua
  return function(v, now)
    --#include inline/one-sliding-window.lua BAIL() = return false; REFUSED() = return false
    return true, rem, reset, nv, xn, x0, xn
  end
end

OP_MAKERS['f'] = function(r, consume)
  --#include inline/one-rule.lua
  return function(v, now)
    --#include inline/one-fixed-window.lua BAIL() = return false; REFUSED() = return false
    return true, rem, reset, nv, xn, x0, xn
  end
end

OP_MAKERS['t'] = function(r, consume)
  --#include inline/one-rule.lua
  return function(v, now)
    --#include inline/one-token-bucket.lua BAIL() = return false; REFUSED() = return false
    return true, rem, reset, nv, xn, x0, nil
  end
end

-- A rule's op closure for cost 1 on Redis time (consume or peek), kept with the rule; false
-- when its algorithm or options have none.
local function op_of(r, consume)
  local k = 'opp'
  if consume then k = 'opc' end
  local d = r[k]
  if d == nil then
    d = false
    local make = OP_MAKERS[r.algo]
    if make ~= nil and r.maxCost >= 1 and not r.first and not r.month then d = make(r, consume) end
    r[k] = d
  end
  return d
end

-- Per op of a stack or batch decided straight through (reused by every call): the entry to
-- write, its expiry, the expiry its key's TTL was set for, and whether it is a window's end.
local NV, NX, N0, NA = {}, {}, {}, {}
-- The reply: now, then remaining and resetMs per op.
local OUT = {}

-- The closure of a plan whose runs are all on Redis time, ops of cost 1 with op closures,
-- and no key named twice; false for other plans.
local function multi_of(plan)
  if #plan.hot > 0 then return false end
  local runs = plan.runs
  local nrun = #runs
  local DS, NS, CS = {}, {}, {}
  -- The reply's length in doubles.
  local K = 1
  for ri = 1, nrun do
    local run = runs[ri]
    if run.timed then return false end
    local sh = run.sh
    local ds = {}
    for i = 1, sh.n do
      if sh.costs[i] ~= 1 then return false end
      local d = op_of(run.rules[i], run.consume)
      if not d then return false end
      ds[i] = d
    end
    DS[ri], NS[ri], CS[ri] = ds, sh.n, run.count
    K = K + 2 * sh.n * run.count
  end
  -- The reply's format when one pack takes it (see pack_list).
  local RF = false
  if K <= 128 then RF = fmt_of(K) end
  return function(keys, argv)
    --#include inline/time-ms.lua
    local vals = call('MGET', unpack(keys))
    local k = 0
    OUT[1] = now
    for ri = 1, nrun do
      local ds, n = DS[ri], NS[ri]
      for _ = 1, CS[ri] do
        for i = 1, n do
          k = k + 1
          local ok, rem, reset, nv, xn, x0, at = ds[i](vals[k], now)
          if not ok then return store_rest(plan, keys, argv, now, vals) end
          OUT[2 * k], OUT[2 * k + 1], NV[k], NX[k], N0[k], NA[k] = rem, reset, nv, xn, x0, at
        end
      end
    end
    for j = 1, k do
      local nv = NV[j]
      if nv then
        local xn = NX[j]
        if xn == N0[j] and xn > now then
          if pcall_('SETRANGE', keys[j], '0', nv) ~= #nv then call('SET', keys[j], nv, 'KEEPTTL') end
        elseif NA[j] or xn <= now then one_write(keys[j], nv, xn, now, NA[j])
        else
          -- A bucket's new expiry, as NEW_EXPIRY.t.
          local d = now - xn
          local ms = -(d - d % 1)
          call('SET', keys[j], nv, 'PX', TTL_TEXT[ms] or ttl_text(ms))
        end
        NV[j] = nil
      end
    end
    if RF then return pack(RF, unpack(OUT, 1, K)) end
    return pack_list(OUT, K)
  end
end

-- Straight-through closures by plan text, for plans that fit (see the header); false for
-- the others.
local FAST, NFAST = {}, 0

local function fast_of(text, plan)
  local f = false
  local run = plan.one
  if run ~= nil then
    if not run.timed and run.sh.costs[1] == 1 then
      local r = run.rules[1]
      local make = LONE_MAKERS[r.algo]
      if make ~= nil and r.maxCost >= 1 and not r.first and not r.month then f = make(plan, r, run.consume) end
    end
  elseif plan.mode == 'd' and not plan.settles then f = multi_of(plan) end
  -- Emptied in place: the library's entry holds this table (see src/lua/index.ts).
  if NFAST >= CACHED_MAX then
    for k in pairs(FAST) do FAST[k] = nil end
    NFAST = 0
  end
  FAST[text] = f
  NFAST = NFAST + 1
  return f
end
