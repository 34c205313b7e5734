-- The common call decided straight through: a request alone in its tick under one rule, an
-- op of cost 1 on Redis time under a sliding-window counter, a fixed window on the clock or
-- a token bucket. A specialisation of the stack decision (stack.lua) for that plan, from the
-- same kernels (inline/<algorithm>-kernel.lua, as the op closures of ops.lua): fast_of
-- builds, once per plan, a closure with the rule's numbers as upvalues that reads TIME and
-- the key (GET), decides, writes and replies, with no Lua call between them. Runs after
-- stack.lua, whose helpers it shares.
--
-- A refusal is answered from its kernel's refusal figures (one_refused: check_rule and the
-- write, as the stack decision does), never decided again. A value that is not a plain entry
-- of the rule (read as absent or as a block alone by read) or holds a block in force goes,
-- before the kernel runs, to the plan's stack closure with the time and the value read.
--
-- An admitted entry whose expiry is unchanged is written over the one read with SETRANGE
-- key 0: the same bytes as SET ... KEEPTTL (the value read has the new one's length, and
-- its key, read in this script, is still there: Redis expires keys inside a script on the
-- script's start time), the TTL kept, and an integer reply where SET's status reply costs
-- Lua a table. Where an ACL refuses SETRANGE, SET ... KEEPTTL writes it instead. The stack
-- decision writes its op closures' admissions the same way.
--
-- An admission replies now, remaining and resetMs, as the stack decision's short reply.

-- The call the closure did not decide (see above): the plan's stack closure at now, with
-- the key's value v as GET replied.
local function one_rest(plan, keys, argv, now, v)
  if type(v) ~= 'string' then v = false end
  ONE_VAL[1] = v
  return plan_stack(plan)(keys, argv, now, ONE_VAL)
end

-- A lone call's refusal that its closure's kernel found: the figures of the algorithm's
-- refused (ok, rem, reset, retry, delay, nx) for the state it read (s, nil for none; x0 the
-- expiry its key's TTL was set for). What the stack decision does with a refusal, without
-- checking the rule again: blockFor, the write, the reply.
local function one_refused(plan, keys, argv, now, s, x0, _ok, rem, reset, retry, _delay, nx)
  begin_call(keys, argv, plan.minTtl, now)
  MIN_TTL, REDIS_TIME = 0, true
  local run = plan.one
  local r = run.rules[1]
  local _, delay, reason, has, wb
  _, rem, reset, retry, delay, reason, has, nx, wb = check_rule(s, nil, now, r, 1, rem, reset, retry, nx)
  if run.consume and has then write(keys[1], nx, wb, r, now, x0, nil) end
  local a, code = 0, 4
  if r.dry then a = 1 end
  if reason == 'l' then code = 2 elseif reason == 'b' then code = 3 end
  return pack('<dddddd', a, now, code, rem, reset, retry)
end

local LONE_MAKERS = {}

LONE_MAKERS['w'] = function(plan, r, consume)
  --#include inline/one-rule.lua
  return function(keys, argv)
    local key = keys[1]
    --#include inline/time-ms.lua
    local v = pcall_('GET', key)
    --#include inline/one-sliding-window.lua BAIL() = return one_rest(plan, keys, argv, now, v); REFUSED() = return one_refused(plan, keys, argv, now, v and { s0, p, c } or nil, x0, r.alg.refused(start, prev, cur, now, r, 1, scaled, e))
    if nv then
      if xn == x0 and xn > now then
        if pcall_('SETRANGE', key, '0', nv) ~= #nv then call('SET', key, nv, 'KEEPTTL') end
      else write_packed(key, nv, xn, now, xn) end
    end
    return pack('<ddd', now, rem, reset)
  end
end

LONE_MAKERS['f'] = function(plan, r, consume)
  --#include inline/one-rule.lua
  return function(keys, argv)
    local key = keys[1]
    --#include inline/time-ms.lua
    local v = pcall_('GET', key)
    --#include inline/one-fixed-window.lua BAIL() = return one_rest(plan, keys, argv, now, v); REFUSED() = return one_refused(plan, keys, argv, now, v and { s0, c } or nil, x0, r.alg.refused(start, count, used, e, now, r))
    if nv then
      if xn == x0 and xn > now then
        if pcall_('SETRANGE', key, '0', nv) ~= #nv then call('SET', key, nv, 'KEEPTTL') end
      else write_packed(key, nv, xn, now, xn) end
    end
    return pack('<ddd', now, rem, reset)
  end
end

LONE_MAKERS['t'] = function(plan, r, consume)
  --#include inline/one-rule.lua
  return function(keys, argv)
    local key = keys[1]
    --#include inline/time-ms.lua
    local v = pcall_('GET', key)
    --#include inline/one-token-bucket.lua BAIL() = return one_rest(plan, keys, argv, now, v); REFUSED() = return one_refused(plan, keys, argv, now, last and { last, s2 } or nil, x0, r.alg.refused(tn, scaled, need, now, r, cap))
    if nv then
      if xn == x0 and xn > now then
        if pcall_('SETRANGE', key, '0', nv) ~= #nv then call('SET', key, nv, 'KEEPTTL') end
      elseif xn <= now then write_packed(key, nv, xn, now, nil)
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

-- The closures of decide plans by plan text: a lone call's specialisation where its plan
-- fits (see the header), else the plan's stack closure.
local FAST, NFAST = {}, 0

local function fast_of(text, plan)
  local f = nil
  local run = plan.one
  if run ~= nil and not run.timed and run.sh.costs[1] == 1 and has_op(run.rules[1]) then
    f = LONE_MAKERS[run.rules[1].algo](plan, run.rules[1], run.consume)
  else f = plan_stack(plan) end
  -- Emptied in place: the library's entry holds this table (see src/lua/index.ts).
  if NFAST >= CACHED_MAX then
    for k in pairs(FAST) do FAST[k] = nil end
    NFAST = 0
  end
  FAST[text] = f
  NFAST = NFAST + 1
  return f
end
