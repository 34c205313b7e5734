/**
 * Lua mirror of `core/src/stack.ts` (SPEC 4, 3.6, 3.7) and the script's entry point.
 *
 * KEYS: one Redis key per op. ARGV: command (`c` consume, `p` peek, `r` refund), `now`
 * (empty: Redis `TIME`), `at` (refunds), the least TTL for supplied time, then two
 * fields per op: the rule packed as RULE_FORMAT (see `../args.ts`) and the cost. The reply is
 * an array: allowed (1/0), now, then OUT_FIELDS per op (see `out` in common.ts). Every key written gets its TTL in the same command (`SET ... PX`), the
 * time until `entryExpiresAt`, so no key is ever left without expiry. An entry whose
 * expiry has passed is read as absent, exactly as `MemoryStore` does.
 */
/** Reads the arguments: command, time, and each op's rule and cost. Runs first. */
export const PARSE_LUA = `
local cmd = ARGV[1]
local now
-- Redis expires keys on its own clock; time supplied by the caller may not follow it, so
-- keys written on supplied time live at least ARGV[4] ms (read as absent once expired).
local MIN_TTL = 0
if ARGV[2] ~= '' then MIN_TTL = tonumber(ARGV[4]) end
if ARGV[2] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + floor(tonumber(t[2]) / 1000)
else
  now = tonumber(ARGV[2])
end

local n = #KEYS
local ops = {}
-- The algorithms this call needs: only their sections are instantiated (see index.ts).
local NEED = {}
for i = 1, n do
  -- Two fields per op: the rule, packed (see args.ts), and the cost.
  local algo, L, W, B, Q, align, mode, cal, block, cr, dry, maxCost = unpack_bin(RULE_FORMAT, ARGV[HEAD_FIELDS + 2 * i - 1])
  local cost = ARGV[HEAD_FIELDS + 2 * i]
  ops[i] = {
    r = {
      algo = algo, L = L, W = W, B = B, Q = Q, align = align, mode = mode,
      cal = cal, block = block, cr = cr == '1', dry = dry == '1', maxCost = maxCost,
    },
    cost = tonumber(cost),
  }
  NEED[algo] = true
end

`;

/** The stack decision and the command's body. Runs after the algorithm sections. */
export const STACK_LUA = `
local function expires_at(e, r)
  local s = 0
  if e.s ~= nil then s = ALG[r.algo].expires(e.s, r) end
  return max(s, e.b)
end

local function read(key, r, now)
  local v = redis.call('GET', key)
  if not v then return nil end
  local e = decode(v)
  if expires_at(e, r) <= now then return nil end
  return e
end

local function write(key, e, r, now)
  local x = expires_at(e, r)
  if x <= now then redis.call('DEL', key)
  else redis.call('SET', key, encode(e), 'PX', max(ceil(x - now), MIN_TTL)) end
end

local function check_rule(entry, now, r, cost)
  if cost > r.maxCost then
    return { allowed = false, remaining = 0, resetMs = 0, retryAfterMs = 0, delayMs = 0, reason = 'c' }, nil
  end
  local c = ALG[r.algo].check(entry and entry.s, now, r, cost)
  local blockedUntil = 0
  if entry ~= nil then blockedUntil = entry.b end
  if blockedUntil > now then
    local wait = blockedUntil - now
    local retry = wait
    if not c.allowed then retry = max(wait, c.retryAfterMs) end
    return { allowed = false, remaining = 0, resetMs = max(c.resetMs, wait), retryAfterMs = retry, delayMs = 0, reason = 'b' }, nil
  end
  local w = nil
  if c.next ~= nil then w = { s = c.next, b = 0 } end
  if c.allowed then return c, w end
  if c.next ~= nil then
    -- countRejected: the refusal is written, so the figures describe the state it leaves.
    local after = ALG[r.algo].check(c.next, now, r, cost)
    c.remaining = max(0, min(c.remaining, after.remaining))
    c.resetMs = max(c.resetMs, after.resetMs)
    c.retryAfterMs = after.retryAfterMs
  end
  if r.block > 0 then
    local s = c.next
    if s == nil and entry ~= nil then s = entry.s end
    w = { s = s, b = now + r.block }
    c.retryAfterMs = max(c.retryAfterMs, r.block)
    c.resetMs = max(c.resetMs, r.block)
    c.remaining = 0
  end
  return c, w
end

local function refund_entry(e, now, r, cost, at)
  if e.s == nil then return e end
  local s = ALG[r.algo].refund(e.s, now, r, cost, at)
  if s == nil and e.b == 0 then return nil end
  return { s = s, b = e.b }
end

if cmd == 'r' then
  local at = tonumber(ARGV[3])
  for i = 1, n do
    local op = ops[i]
    local e = read(KEYS[i], op.r, now)
    if e ~= nil and e.s ~= nil then
      local nx = refund_entry(e, now, op.r, op.cost, at)
      if nx == nil then redis.call('DEL', KEYS[i]) else write(KEYS[i], nx, op.r, now) end
    end
  end
  return out(now)
end

local outcomes, writes = {}, {}
local allowed = true
for i = 1, n do
  local op = ops[i]
  local o, w = check_rule(read(KEYS[i], op.r, now), now, op.r, op.cost)
  outcomes[i] = o
  writes[i] = w
  if not o.allowed and not op.r.dry then allowed = false end
end

local reply = { allowed and 1 or 0, out(now) }
for i = 1, n do
  local o = outcomes[i]
  -- An admitting rule consumes only when the whole stack is admitted; a rejecting rule
  -- writes its block or penalty either way.
  if cmd == 'c' and writes[i] ~= nil and not (o.allowed and not allowed) then write(KEYS[i], writes[i], ops[i].r, now) end
  local delay = o.delayMs
  if not allowed then delay = 0 end
  local k = 2 + (i - 1) * 6
  reply[k + 1] = o.allowed and 1 or 0
  reply[k + 2] = out(o.remaining)
  reply[k + 3] = out(o.resetMs)
  reply[k + 4] = out(o.retryAfterMs)
  reply[k + 5] = out(delay)
  reply[k + 6] = o.reason
end
return reply
`;
