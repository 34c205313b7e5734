-- The cost-1 op closures: one op of cost 1 on Redis time under a sliding-window counter, a
-- fixed window on the clock or a token bucket, checked by its algorithm's kernel (the
-- inline/<algorithm>-kernel.lua that ALG.<code>.check includes too) with the rule's
-- numbers as upvalues: no table lookup, no dispatch, no state table. Runs after the
-- algorithm sections; the stack decision (stack.lua) asks them first.
--
-- An op closure decides the value v that MGET or GET replied for its key, at now:
-- - admitted: true, remaining, resetMs, the entry to write (packed; nil for a peek), its
--   expiry, the expiry the key's TTL was set for, and whether the expiry is a window's end;
-- - refused: false, then its kernel's refusal (r.alg.refused, countRejected's figures
--   included): remaining, resetMs, retryAfterMs, the state it writes (nil: none), and the
--   state read and the expiry its key's TTL was set for, which check_rule finishes (blockFor);
-- - nil, before its kernel runs, for a value that is not a plain entry of the rule (read
--   as absent or as a block alone by read) or holds a block in force: the general check
--   decides it.
--
-- Every number is worked out with the operations of the algorithm's check in the same
-- order, so the results are the same doubles.

local pcall_, type = redis.pcall, type

-- An absent key's value as the sliding-window and fixed-window closures read it (one unpack
-- either way, no moves): no block, no TTL expiry, and a window start (-1e15) that no window
-- on Redis time matches.
local NONE_W = pack('<ddddd', 0, NO_EXPIRY, -1e15, 0, 0)
local NONE_F = pack('<dddd', 0, NO_EXPIRY, -1e15, 0)

-- A kernel's refusal as an op closure returns it (see above): the state read s and x0, then
-- r.alg.refused's values.
local function op_refused(s, x0, _, rem, reset, retry, _, nx)
  return false, rem, reset, retry, nx, s, x0
end

local OP_MAKERS = {}

OP_MAKERS['w'] = function(r, consume)
  --#include inline/one-rule.lua
  return function(v, now)
    --#include inline/one-sliding-window.lua BAIL() = return nil; REFUSED() = return op_refused(v and { s0, p, c } or nil, x0, r.alg.refused(start, prev, cur, now, r, 1, scaled, e))
    return true, rem, reset, nv, xn, x0, xn
  end
end

OP_MAKERS['f'] = function(r, consume)
  --#include inline/one-rule.lua
  return function(v, now)
    --#include inline/one-fixed-window.lua BAIL() = return nil; REFUSED() = return op_refused(v and { s0, c } or nil, x0, r.alg.refused(start, count, used, e, now, r))
    return true, rem, reset, nv, xn, x0, xn
  end
end

OP_MAKERS['t'] = function(r, consume)
  --#include inline/one-rule.lua
  return function(v, now)
    --#include inline/one-token-bucket.lua BAIL() = return nil; REFUSED() = return op_refused(last and { last, s2 } or nil, x0, r.alg.refused(tn, scaled, need, now, r, cap))
    return true, rem, reset, nv, xn, x0, nil
  end
end

-- Whether a rule has op closures: their algorithms, cost 1 within maxCost, windows on the clock.
local function has_op(r)
  return OP_MAKERS[r.algo] ~= nil and r.maxCost >= 1 and not r.first and not r.month
end

-- A rule's op closure for cost 1 on Redis time (consume or peek), kept with the rule; false
-- when its algorithm or options have none.
local function op_of(r, consume)
  local k = 'opp'
  if consume then k = 'opc' end
  local d = r[k]
  if d == nil then
    d = false
    if has_op(r) then d = OP_MAKERS[r.algo](r, consume) end
    r[k] = d
  end
  return d
end
