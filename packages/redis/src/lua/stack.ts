/**
 * Lua mirror of `core/src/stack.ts` (SPEC 4, 3.6, 3.7) and the script's entry point.
 *
 * ARGV[1] is the mode, ARGV[2] the least TTL for supplied time.
 * - `d` (decide): ARGV[3] = m stacks, then per stack: command (`c` consume, `p` peek),
 *   `now` (empty: Redis `TIME`), its op count n, and per op two fields: the rule packed as
 *   RULE_FORMAT (see `../args.ts`) and the cost. KEYS holds the stacks' keys in order.
 *   Stacks are decided one after the other, each all-or-nothing, as if they had arrived in
 *   that order; `TIME` is read once. The reply is, per stack: allowed (1/0), now, then
 *   OUT_FIELDS per op (see `out` in common.ts).
 * - `r` (refund): ARGV[3] = now, ARGV[4] = at, then the ops; the reply is now.
 *
 * Every key written gets its TTL in the same command (`SET ... PX`), the time until
 * `entryExpiresAt`, so no key is ever left without expiry. An entry whose expiry has
 * passed is read as absent, exactly as `MemoryStore` does.
 */
/** Reads the arguments: mode, stacks, each op's rule and cost. Runs first. */
export const PARSE_LUA = `
local mode = ARGV[1]
-- Redis expires keys on its own clock; time supplied by the caller may not follow it, so
-- keys written on supplied time live at least ARGV[2] ms (read as absent once expired).
local MIN_TTL_SUPPLIED = tonumber(ARGV[2])
local MIN_TTL = 0
-- The algorithms this call needs: only their sections are instantiated (see index.ts).
local NEED = {}

local redis_now = nil
local function time_now()
  if redis_now == nil then
    local t = redis.call('TIME')
    redis_now = tonumber(t[1]) * 1000 + floor(tonumber(t[2]) / 1000)
  end
  return redis_now
end

-- Rules already read in this call, by their packed form: a batch repeats the same few.
local RULES = {}

local function rule_of(packed)
  local r = RULES[packed]
  if r == nil then
    local algo, L, W, B, Q, align, mode, cal, block, cr, dry, maxCost = unpack_bin(RULE_FORMAT, packed)
    r = {
      algo = algo, L = L, W = W, B = B, Q = Q, align = align, mode = mode,
      cal = cal, block = block, cr = cr == '1', dry = dry == '1', maxCost = maxCost,
    }
    RULES[packed] = r
    NEED[algo] = true
  end
  return r
end

-- n ops whose fields start after ARGV[base].
local function parse_ops(base, n)
  local ops = {}
  for i = 1, n do
    ops[i] = { r = rule_of(ARGV[base + 2 * i - 1]), cost = tonumber(ARGV[base + 2 * i]) }
  end
  return ops
end

local stacks = {}
if mode == 'r' then
  stacks[1] = { now = ARGV[3], at = tonumber(ARGV[4]), ops = parse_ops(4, #KEYS) }
else
  local a = 3
  for j = 1, tonumber(ARGV[3]) do
    local n = tonumber(ARGV[a + 3])
    stacks[j] = { cmd = ARGV[a + 1], now = ARGV[a + 2], ops = parse_ops(a + 3, n) }
    a = a + 3 + 2 * n
  end
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

-- The stack's time: Redis TIME (exact TTLs) or supplied (TTLs of at least MIN_TTL_SUPPLIED).
local function stack_now(st)
  if st.now == '' then
    MIN_TTL = 0
    return time_now()
  end
  MIN_TTL = MIN_TTL_SUPPLIED
  return tonumber(st.now)
end

if mode == 'r' then
  local st = stacks[1]
  local now = stack_now(st)
  for i = 1, #KEYS do
    local op = st.ops[i]
    local e = read(KEYS[i], op.r, now)
    if e ~= nil and e.s ~= nil then
      local nx = refund_entry(e, now, op.r, op.cost, st.at)
      if nx == nil then redis.call('DEL', KEYS[i]) else write(KEYS[i], nx, op.r, now) end
    end
  end
  return out(now)
end

local reply = {}
local k0 = 0
for j = 1, #stacks do
  local st = stacks[j]
  local now = stack_now(st)
  local ops = st.ops
  local n = #ops
  local outcomes, writes = {}, {}
  local allowed = true
  for i = 1, n do
    local op = ops[i]
    local o, w = check_rule(read(KEYS[k0 + i], op.r, now), now, op.r, op.cost)
    outcomes[i] = o
    writes[i] = w
    if not o.allowed and not op.r.dry then allowed = false end
  end
  local k = #reply
  reply[k + 1] = allowed and 1 or 0
  reply[k + 2] = out(now)
  k = k + 2
  for i = 1, n do
    local o = outcomes[i]
    -- An admitting rule consumes only when the whole stack is admitted; a rejecting rule
    -- writes its block or penalty either way.
    if st.cmd == 'c' and writes[i] ~= nil and not (o.allowed and not allowed) then write(KEYS[k0 + i], writes[i], ops[i].r, now) end
    local delay = o.delayMs
    if not allowed then delay = 0 end
    reply[k + 1] = o.allowed and 1 or 0
    reply[k + 2] = out(o.remaining)
    reply[k + 3] = out(o.resetMs)
    reply[k + 4] = out(o.retryAfterMs)
    reply[k + 5] = out(delay)
    reply[k + 6] = o.reason
    k = k + 6
  end
  k0 = k0 + n
end
return reply
`;
