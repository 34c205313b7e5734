import { timeMs } from './stack.js';

/**
 * The common call decided straight through: one op of cost 1 on Redis time, a request
 * alone in its tick under one rule, for the three algorithms most rules use (a
 * sliding-window counter, a fixed window on the clock, a token bucket). Runs after
 * STACK_LUA, whose helpers it shares.
 *
 * `fast_of(plan)` builds, once per plan, a closure `f(key)` with the rule's numbers as
 * upvalues (no table lookup, no dispatch, no state table): it reads `TIME` and the key,
 * decides, writes and replies. Every number is worked out with the operations of the
 * algorithm's check (its section) in the same order, so the results are the same doubles.
 * Only the case that ends in an admission of a well-formed entry (or none) is decided here;
 * anything else — a refusal, a block, a value that is not a plain entry of the rule (read
 * as absent or as a block alone by `read`) — goes to the general path (`one_rest`) with
 * the time and the value already read, which decides it exactly as before.
 *
 * An admission here replies three doubles, now, remaining and resetMs (parseDecisions in
 * args.ts reads them as the stack admitted with its one op admitted, no delay): half the
 * packing of the general reply's six.
 */
/**
 * Writes the admitted entry v (on Redis time, block 0) under key, whose TTL was set for
 * x0, with the expiry x, as write() (stack.ts) does; at: x is a window's end, set as the
 * instant. The common case, an unchanged expiry, inline.
 */
const WRITE = (v: string, x: string, now: string, at: string): string => `
      if ${x} == x0 and ${x} > ${now} then call('SET', key, ${v}, 'KEEPTTL')
      else one_write(key, ${v}, ${x}, ${now}, ${at}) end`;

export const ONE_LUA = `
local pcall_, type = redis.pcall, type

-- The general path for the call the closure could not decide: the plan's one stack at now,
-- with the key's value v as GET replied (decide_one, past its reads).
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

local FAST_MAKERS = {}

-- Sliding-window counter: ALG.w.check with cost 1, then write.
FAST_MAKERS['w'] = function(plan, r, consume)
  local L, W = r.L, r.W
  local room = (L - 1 + 1) * W
  local W2 = 2 * W
  return function(key)${timeMs('call')}
    local v = pcall_('GET', key)
    local start = now - fmod(now, W)
    local t = now
    local prev, cur, x0 = 0, 0, nil
    if v == false then
    elseif type(v) == 'string' and #v == 40 then
      local b, x, s0, p, c = unpack_bin('<ddddd', v)
      -- read()'s checks (SANE2, no negative count), and no block in force.
      if not (b * b + s0 * s0 + p * p + c * c <= SANE2) or p < 0 or c < 0 or b > now then
        return one_rest(plan, key, now, v)
      end
      x0 = x
      if s0 >= start then
        start = s0
        t = max(now, s0)
        prev = p
        cur = c
      elseif s0 == start - W then prev = c end
    else return one_rest(plan, key, now, v) end
    local e = t - start
    local scaled = prev * (W - e) + cur * W
    if not (scaled < room) then return one_rest(plan, key, now, v) end
    local after = cur + 1
    local reset = 0
    if prev * (W - e) + after * W >= W then
      -- sw_retry_at(start, prev, after, W, 1): after >= 1, so its last case.
      reset = start + W + floor((W * (after - 1)) / after) + 1 - now
    end
    if consume then
      local xn = start + W
      if after > 0 then xn = start + W2 end
      local v = pack('<ddddd', 0, xn, start, prev, after)${WRITE('v', 'xn', 'now', 'xn')}
    end
    return pack('<ddd', now, max(0, L - floor(scaled / W) - 1), reset)
  end
end

-- Fixed window on the clock (not first-request, not calendar): ALG.f.check with cost 1.
FAST_MAKERS['f'] = function(plan, r, consume)
  local L, W = r.L, r.W
  return function(key)${timeMs('call')}
    local v = pcall_('GET', key)
    local start = now - fmod(now, W)
    local count, x0 = 0, nil
    if v == false then
    elseif type(v) == 'string' and #v == 32 then
      local b, x, s0, c = unpack_bin('<dddd', v)
      if not (b * b + s0 * s0 + c * c <= SANE2) or c < 0 or b > now then
        return one_rest(plan, key, now, v)
      end
      x0 = x
      if s0 >= start then start = s0; count = c end
    else return one_rest(plan, key, now, v) end
    local e = start + W
    local used = count + 1
    if not (used <= L) then return one_rest(plan, key, now, v) end
    local reset = 0
    if used > 0 then reset = e - now end
    if consume then
      local v = pack('<dddd', 0, e, start, used)${WRITE('v', 'e', 'now', 'e')}
    end
    return pack('<ddd', now, L - used, reset)
  end
end

-- Token bucket: ALG.t.check with cost 1; its expiry as ALG.t.expires.
FAST_MAKERS['t'] = function(plan, r, consume)
  local L, W = r.L, r.W
  local cap = r.B * W
  local need = 1 * W
  return function(key)${timeMs('call')}
    local at = now
    local v = pcall_('GET', key)
    local scaled, x0 = cap, nil
    if v == false then
    elseif type(v) == 'string' and #v == 32 then
      local b, x, last, s2 = unpack_bin('<dddd', v)
      if not (b * b + last * last + s2 * s2 <= SANE2) or b > at then
        return one_rest(plan, key, at, v)
      end
      x0 = x
      if at <= last then now, scaled = last, min(s2, cap)
      else
        local gained = L * (at - last)
        scaled = s2
        if gained >= cap - scaled then scaled = cap else scaled = scaled + gained end
      end
    else return one_rest(plan, key, at, v) end
    if not (scaled >= need) then return one_rest(plan, key, at, v) end
    local left = scaled - need
    local reset = 0
    if left < cap then reset = ceil((cap - left) / L) + (now - at) end
    if consume then
      local x = now + ceil((r.B * r.W - left) / L)
      if 0 > x then x = 0 end
      local v = pack('<dddd', 0, x, now, left)${WRITE('v', 'x', 'at', 'nil')}
    end
    return pack('<ddd', at, floor(left / W), reset)
  end
end

-- Fast closures by plan text, for plans that fit (see the header); false for the others.
local FAST, NFAST = {}, 0

local function fast_of(text, plan)
  local f = false
  local run = plan.one
  if run ~= nil and not run.timed and run.sh.costs[1] == 1 then
    local r = run.rules[1]
    local make = FAST_MAKERS[r.algo]
    if make ~= nil and r.maxCost >= 1 and not r.first and not r.month then f = make(plan, r, run.consume) end
  end
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
