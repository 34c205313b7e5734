import { timeMs } from './stack.js';

/**
 * The common calls decided straight through, for ops of cost 1 on Redis time under the
 * three algorithms most rules use (a sliding-window counter, a fixed window on the clock,
 * a token bucket). Runs after STACK_LUA, whose helpers it shares.
 *
 * - A request alone in its tick under one rule: `fast_of(text, plan)` builds, once per
 *   plan, a closure with the rule's numbers as upvalues (no table lookup, no dispatch, no
 *   state table): it reads `TIME` and the key (`GET`), decides, writes and replies.
 * - A stack of several such ops, or a batch of such stacks (no key named twice): one
 *   closure per plan reads `TIME` once and every key with one `MGET`, checks each op with
 *   its rule's op closure (`op_of`, the same arithmetic), and only when every op of every
 *   stack is admitted writes them all (each stack all-or-nothing; with no key shared, the
 *   stacks of a batch do not see each other's writes, so deciding them all first is
 *   deciding them one after the other).
 *
 * Every number is worked out with the operations of the algorithm's check (its section) in
 * the same order, so the results are the same doubles. Only admissions of well-formed
 * entries (or none) are decided here; anything else — a refusal, a block, a value that is
 * not a plain entry of the rule (read as absent or as a block alone by `read`) — goes, before
 * anything is written, to the general path with the time and the values already read, which
 * decides it exactly as before.
 *
 * An admitted entry whose expiry is unchanged is written over the one read with `SETRANGE
 * key 0`: the same bytes as `SET ... KEEPTTL` (the value read has the new one's length, and
 * its key, read in this script, is still there: Redis expires keys inside a script on the
 * script's start time), the TTL kept, and an integer reply where SET's status reply costs
 * Lua a table. Where an ACL refuses SETRANGE, `SET ... KEEPTTL` writes it instead.
 *
 * An admission here replies now, then per op remaining and resetMs, as doubles
 * (parseDecisions in args.ts reads a reply of that length as every stack admitted, no
 * delay): fewer than half the doubles of the general reply.
 */

/**
 * An algorithm's check of cost 1 (v: the key's value as GET or MGET replied, now: the
 * call's time), in Lua: sets rem, reset, nv (the entry to write, nil when peeking; its
 * TTL expiry xn) and x0 (the expiry the key's TTL was set for), or runs `bail`.
 */
const CHECK: Record<'w' | 'f' | 't', (bail: string) => string> = {
  // ALG.w.check with cost 1 and sw_retry_at's last case (after >= 1).
  w: (bail) => `
    local start
    if WI then start = now - now % W else start = now - fmod(now, W) end
    local t = now
    local prev, cur, x0 = 0, 0, nil
    if v == false then
    elseif #v == 40 then
      local b, x, s0, p, c = unpack_bin('<ddddd', v)
      -- read()'s checks (SANE2, no negative count), and no block in force.
      if not (b * b + s0 * s0 + p * p + c * c <= SANE2) or p < 0 or c < 0 or b > now then ${bail} end
      x0 = x
      if s0 >= start then
        start = s0
        if s0 > now then t = s0 end
        prev = p
        cur = c
      elseif s0 == start - W then prev = c end
    else ${bail} end
    local e = t - start
    local scaled = prev * (W - e) + cur * W
    if not (scaled < room) then ${bail} end
    local after = cur + 1
    local reset = 0
    if prev * (W - e) + after * W >= W then
      local q = (W * (after - 1)) / after
      reset = start + W + (q - q % 1) + 1 - now
    end
    local q = scaled / W
    local rem = L - (q - q % 1) - 1
    if rem < 0 then rem = 0 end
    local nv, xn = nil, nil
    if consume then
      xn = start + W
      if after > 0 then xn = start + W2 end
      nv = pack('<ddddd', 0, xn, start, prev, after)
    end`,
  // ALG.f.check with cost 1 (not first-request, not calendar).
  f: (bail) => `
    local start
    if WI then start = now - now % W else start = now - fmod(now, W) end
    local count, x0 = 0, nil
    if v == false then
    elseif #v == 32 then
      local b, x, s0, c = unpack_bin('<dddd', v)
      if not (b * b + s0 * s0 + c * c <= SANE2) or c < 0 or b > now then ${bail} end
      x0 = x
      if s0 >= start then start = s0; count = c end
    else ${bail} end
    local xn = start + W
    local used = count + 1
    if not (used <= L) then ${bail} end
    local reset = 0
    if used > 0 then reset = xn - now end
    local rem = L - used
    local nv = nil
    if consume then nv = pack('<dddd', 0, xn, start, used) end`,
  // ALG.t.check with cost 1, its expiry as ALG.t.expires; tn: the bucket's time.
  t: (bail) => `
    local tn, scaled, x0 = now, cap, nil
    if v == false then
    elseif #v == 32 then
      local b, x, last, s2 = unpack_bin('<dddd', v)
      if not (b * b + last * last + s2 * s2 <= SANE2) or b > now then ${bail} end
      x0 = x
      if now <= last then
        tn, scaled = last, s2
        if cap < s2 then scaled = cap end
      else
        local gained = L * (now - last)
        scaled = s2
        if gained >= cap - scaled then scaled = cap else scaled = scaled + gained end
      end
    else ${bail} end
    if not (scaled >= need) then ${bail} end
    local left = scaled - need
    -- ceil((cap - left) / L) as -floor(-q), and floor(q) as q - q % 1 (exact for a finite
    -- q; no C call).
    local q = -((cap - left) / L)
    local up = -(q - q % 1)
    local reset = 0
    if left < cap then reset = up + (tn - now) end
    q = left / W
    local rem = q - q % 1
    local nv, xn = nil, nil
    if consume then
      xn = tn + up
      if 0 > xn then xn = 0 end
      nv = pack('<dddd', 0, xn, tn, left)
    end`,
};

/** The rule's numbers as a check reads them (r: the rule's table). */
const UPVALUES = `
  local L, W = r.L, r.W
  local room, W2 = (L - 1 + 1) * W, 2 * W
  local cap = r.B * W
  local need = 1 * W
  -- A whole window: on Redis time now is a whole number of ms below 2^53, so now % W (a
  -- VM operation, no C call) is exactly fmod(now, W).
  local WI = W > 0 and W % 1 == 0`;

/** Whether an algorithm's expiry is a window's end (SET ... PXAT), else a TTL (PX). */
const AT: Record<'w' | 'f' | 't', string> = { w: 'xn', f: 'xn', t: 'nil' };

/**
 * Writes nv under key with a new expiry xn (as one_write does): a window's end as the
 * instant (PXAT); a bucket's as a TTL (PX, ceil(xn - now) as -floor(now - xn)), inline.
 */
const NEW_EXPIRY: Record<'w' | 'f' | 't', (key: string) => string> = {
  w: (key) => ` one_write(${key}, nv, xn, now, xn)`,
  f: (key) => ` one_write(${key}, nv, xn, now, xn)`,
  t: (key) => ` if xn <= now then one_write(${key}, nv, xn, now, nil)
      else
        local d = now - xn
        local ms = -(d - d % 1)
        call('SET', ${key}, nv, 'PX', TTL_TEXT[ms] or ttl_text(ms))
      end`,
};

function makers(kind: 'lone' | 'op'): string {
  return (['w', 'f', 't'] as const)
    .map((a) =>
      kind === 'lone'
        ? `
LONE_MAKERS['${a}'] = function(plan, r, consume)${UPVALUES}
  return function(keys)
    local key = keys[1]${timeMs('call')}
    local v = pcall_('GET', key)${CHECK[a]('return one_rest(plan, key, now, v)')}
    if nv then
      if xn == x0 and xn > now then
        if pcall_('SETRANGE', key, '0', nv) ~= #nv then call('SET', key, nv, 'KEEPTTL') end
      else${NEW_EXPIRY[a]('key')} end
    end
    return pack('<ddd', now, rem, reset)
  end
end`
        : `
OP_MAKERS['${a}'] = function(r, consume)${UPVALUES}
  return function(v, now)${CHECK[a]('return false')}
    return true, rem, reset, nv, xn, x0, ${AT[a]}
  end
end`,
    )
    .join('\n');
}

export const ONE_LUA = `
local pcall_, type = redis.pcall, type

-- The general path for the lone call the closure could not decide: the plan's one stack at
-- now, with the key's value v as GET replied (decide_one, past its reads).
local function one_rest(plan, key, now, v)
  MIN_TTL_SUPPLIED = plan.minTtl
  if HAD_HOT then
    HOT, CACHE = {}, {}
    HAD_HOT = false
  end
  redis_now = now
  MIN_TTL, REDIS_TIME = 0, true
  return decide_one(plan.one, key, now, v, false)
end

-- Writes an admitted entry v (on Redis time, block 0) whose key's TTL was set for x0, with
-- the expiry x (as write() does; at: x is a window's end, set as the instant).
local function one_write(key, v, x, now, at)
  if x <= now then call('DEL', key); return end
  set_expiring(key, v, x, now, 0, at)
end

local LONE_MAKERS, OP_MAKERS = {}, {}
${makers('lone')}
${makers('op')}

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
  return function(keys, argv)${timeMs('call')}
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
  -- Emptied in place: the library's entry holds this table (see index.ts).
  if NFAST >= CACHED_MAX then
    for k in pairs(FAST) do FAST[k] = nil end
    NFAST = 0
  end
  FAST[text] = f
  NFAST = NFAST + 1
  return f
end
`;
