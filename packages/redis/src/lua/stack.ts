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

-- The rules and costs of n ops whose fields start after ARGV[base].
local function parse_ops(base, n)
  local rules, costs = {}, {}
  for i = 1, n do
    rules[i] = rule_of(ARGV[base + 2 * i - 1])
    costs[i] = tonumber(ARGV[base + 2 * i])
  end
  return rules, costs
end

local stacks = {}
if mode == 'r' then
  local rules, costs = parse_ops(4, #KEYS)
  stacks[1] = { now = ARGV[3], at = tonumber(ARGV[4]), rules = rules, costs = costs, n = #KEYS }
else
  local a = 3
  for j = 1, tonumber(ARGV[3]) do
    local n = tonumber(ARGV[a + 3])
    local rules, costs = parse_ops(a + 3, n)
    stacks[j] = { cmd = ARGV[a + 1], now = ARGV[a + 2], rules = rules, costs = costs, n = n }
    a = a + 3 + 2 * n
  end
end
`;

/** The stack decision and the command's body. Runs after the algorithm sections. */
export const STACK_LUA = `
-- Entries travel as two values: the state s (nil for none) and the block deadline b.
local function expires_at(s, b, r)
  local x = 0
  if s ~= nil then x = ALG[r.algo].expires(s, r) end
  return max(x, b)
end

-- Keys that several stacks of this call count under (a tenant's, a route's, a global
-- rule's): their entries are read from Redis once, kept here while the call decides, and
-- written once at its end with the TTL the last write gave them. The script runs
-- atomically, so nothing else can observe the difference; every other key is read and
-- written in place.
local HOT = nil
if mode ~= 'r' and #KEYS > 1 then
  local seen = {}
  for i = 1, #KEYS do
    local key = KEYS[i]
    if seen[key] then
      if HOT == nil then HOT = {} end
      HOT[key] = true
    else seen[key] = true end
  end
end
-- A hot key's entry: s, b (b nil: absent), and when written in this call: ttl (0: delete).
local CACHE = {}

local function load(key)
  local v = redis.call('GET', key)
  if not v then return nil, nil end
  return decode(v)
end

-- The entry under key; b is nil when there is none or it has expired.
local function read(key, r, now)
  local s, b
  local e = CACHE[key]
  if e ~= nil then s, b = e.s, e.b
  else
    s, b = load(key)
    if HOT ~= nil and HOT[key] then
      e = { s = s, b = b }
      CACHE[key] = e
    end
  end
  if b == nil then return nil, nil end
  if expires_at(s, b, r) <= now then
    -- Expired: dropped, as MemoryStore drops it, so that a clock stepping back later
    -- (supplied time) does not bring it back.
    if e ~= nil then e.s, e.b, e.ttl = nil, nil, 0 else redis.call('DEL', key) end
    return nil, nil
  end
  return s, b
end

local function write(key, s, b, r, now)
  local x = expires_at(s, b, r)
  local e = CACHE[key]
  if e ~= nil then
    if x <= now then e.s, e.b, e.ttl = nil, nil, 0
    else e.s, e.b, e.ttl = s, b, max(ceil(x - now), MIN_TTL) end
  elseif x <= now then redis.call('DEL', key)
  else redis.call('SET', key, encode(s, b), 'PX', max(ceil(x - now), MIN_TTL)) end
end

-- Writes the hot keys' final entries.
local function flush()
  for key, e in pairs(CACHE) do
    if e.ttl == 0 then redis.call('DEL', key)
    elseif e.ttl ~= nil then redis.call('SET', key, encode(e.s, e.b), 'PX', e.ttl) end
  end
end

-- The outcome as values (allowed, remaining, resetMs, retryAfterMs, delayMs, reason), then
-- whether to write and what (state, block deadline) if committed.
local function check_rule(s, b, now, r, cost)
  if cost > r.maxCost then return false, 0, 0, 0, 0, 'c', false end
  local ok, remaining, reset, retry, delay, nx = ALG[r.algo].check(s, now, r, cost)
  local blockedUntil = b or 0
  if blockedUntil > now then
    local wait = blockedUntil - now
    local rt = wait
    if not ok then rt = max(wait, retry) end
    return false, 0, max(reset, wait), rt, 0, 'b', false
  end
  local has = nx ~= nil
  if ok then return true, remaining, reset, retry, delay, '', has, nx, 0 end
  local ws, wb = nx, 0
  if has then
    -- countRejected: the refusal is written, so the figures describe the state it leaves.
    local _, aRemaining, aReset, aRetry = ALG[r.algo].check(nx, now, r, cost)
    remaining = max(0, min(remaining, aRemaining))
    reset = max(reset, aReset)
    retry = aRetry
  end
  if r.block > 0 then
    if ws == nil then ws = s end
    wb = now + r.block
    has = true
    retry = max(retry, r.block)
    reset = max(reset, r.block)
    remaining = 0
  end
  return false, remaining, reset, retry, delay, 'l', has, ws, wb
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
  for i = 1, st.n do
    local r = st.rules[i]
    local s, b = read(KEYS[i], r, now)
    if s ~= nil then
      local nx = ALG[r.algo].refund(s, now, r, st.costs[i], st.at)
      if nx == nil and b == 0 then redis.call('DEL', KEYS[i]) else write(KEYS[i], nx, b, r, now) end
    end
  end
  return out(now)
end

local reply = {}
-- Per-op outcomes of the stack being decided, in arrays reused by every stack of the call.
local OK, REM, RESET, RETRY, DELAY, REASON, HAS, WS, WB = {}, {}, {}, {}, {}, {}, {}, {}, {}
local k = 0
local k0 = 0
for j = 1, #stacks do
  local st = stacks[j]
  local now = stack_now(st)
  local rules, costs, n = st.rules, st.costs, st.n
  local allowed = true
  for i = 1, n do
    local r = rules[i]
    local s, b = read(KEYS[k0 + i], r, now)
    local ok
    ok, REM[i], RESET[i], RETRY[i], DELAY[i], REASON[i], HAS[i], WS[i], WB[i] = check_rule(s, b, now, r, costs[i])
    OK[i] = ok
    if not ok and not r.dry then allowed = false end
  end
  reply[k + 1] = allowed and 1 or 0
  reply[k + 2] = out(now)
  k = k + 2
  local consume = st.cmd == 'c'
  for i = 1, n do
    local ok = OK[i]
    -- An admitting rule consumes only when the whole stack is admitted; a rejecting rule
    -- writes its block or penalty either way.
    if consume and HAS[i] and not (ok and not allowed) then write(KEYS[k0 + i], WS[i], WB[i], rules[i], now) end
    local delay = DELAY[i]
    local remaining = REM[i]
    if not allowed then
      delay = 0
      -- An admitting rule of a refused stack consumed nothing: report it untouched.
      if ok then remaining = remaining + costs[i] end
    end
    reply[k + 1] = ok and 1 or 0
    reply[k + 2] = out(remaining)
    reply[k + 3] = out(RESET[i])
    reply[k + 4] = out(RETRY[i])
    reply[k + 5] = out(delay)
    reply[k + 6] = REASON[i]
    k = k + 6
  end
  k0 = k0 + n
end
flush()
return reply
`;
