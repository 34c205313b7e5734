/**
 * Lua mirror of `core/src/stack.ts` (SPEC 4, 3.6, 3.7) and the script's entry point.
 *
 * Every argument is text (see `../args.ts`). ARGV[1] is the mode, ARGV[2] the least TTL
 * for supplied time, ARGV[3] the number R of distinct rules the call uses, then 7 fields
 * per rule (rule number i = 1..R): flags (algorithm, align, mode, calendar, countRejected,
 * dryRun, one character each), L, W, B, Q, blockForMs, maxCost. Then:
 * - `d` (decide): per stack its shape, a command (`c` consume, `p` peek; upper case when
 *   the stack's `now` follows as the next field, else Redis `TIME`) and per op
 *   `<rule number>:<cost>`, comma-separated (`c1:1,2:1`). KEYS holds each distinct key
 *   of the call once: an op takes the next key not yet used, or, when a key repeats (a
 *   tenant's, a route's or a global rule's key shared by many stacks), names it with
 *   `@<index>` (`c1:1,2:1@2`). A batch repeats a few shapes, each parsed once, and keys
 *   named again are the call's hot keys (see read in STACK_LUA). Stacks are decided one after
 *   the other, each all-or-nothing, as if they had arrived in that order; `TIME` is read
 *   once. The reply is, per stack: allowed (1/0), now, then OUT_FIELDS per op (see
 *   `OUT_FIELDS` in index.ts; numbers as `out` in common.ts sends them).
 * - `r` (refund): `now` (empty: Redis `TIME`), `at`, then the ops' shape (`r1:1,2:1`);
 *   the reply is now.
 *
 * Every key written gets its TTL in the same command (`SET ... PX`), the time until
 * `entryExpiresAt`, so no key is ever left without expiry. An entry whose expiry has
 * passed is read as absent and dropped, exactly as `MemoryStore` does.
 */
/** Reads the mode and the rules. Runs first. */
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

local sub, byte, gmatch = string.sub, string.byte, string.gmatch
-- The call's rules, by number.
local RULE = {}
local NRULES = tonumber(ARGV[3])
for i = 1, NRULES do
  local a = 3 + 7 * (i - 1)
  local f = ARGV[a + 1]
  local algo = sub(f, 1, 1)
  RULE[i] = {
    algo = algo, align = sub(f, 2, 2), mode = sub(f, 3, 3), cal = sub(f, 4, 4),
    cr = sub(f, 5, 5) == '1', dry = sub(f, 6, 6) == '1',
    L = tonumber(ARGV[a + 2]), W = tonumber(ARGV[a + 3]), B = tonumber(ARGV[a + 4]),
    Q = tonumber(ARGV[a + 5]), block = tonumber(ARGV[a + 6]), maxCost = tonumber(ARGV[a + 7]),
  }
  NEED[algo] = true
end
-- The last field read so far.
local ARG = 3 + 7 * NRULES
local NARGV = #ARGV

-- A shape's ops: rules, costs, key references (0: the next new key) and count, parsed once
-- per distinct shape and call. Keys named again are hot.
local SHAPES = {}
local HOT = {}
local function shape_of(str)
  local sh = SHAPES[str]
  if sh == nil then
    local rules, costs, refs, n = {}, {}, {}, 0
    for ri, c, ref in gmatch(str, '(%d+):([^,@]+)@?(%d*)') do
      n = n + 1
      rules[n] = RULE[tonumber(ri)]
      costs[n] = tonumber(c)
      if ref == '' then refs[n] = 0
      else
        refs[n] = tonumber(ref)
        HOT[KEYS[refs[n]]] = true
      end
    end
    sh = { rules = rules, costs = costs, refs = refs, n = n }
    SHAPES[str] = sh
  end
  return sh
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
-- rule's; HOT, from the shapes): from their second use on, their entries are kept here
-- while the call decides and written once at its end with the TTL the last write gave
-- them (the first use read and wrote Redis, so the entry kept starts from that). The
-- script runs atomically, so nothing else can observe the difference; every other key is
-- read and written in place.
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
    if HOT[key] then
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

-- A TTL as the text SET reads: Redis formats a Lua number argument with '%.17g' on every
-- call, while the stacks of a batch mostly share one TTL (one now, one window end).
local TTL_TEXT = {}
local function ttl_text(ms)
  local t = TTL_TEXT[ms]
  if t == nil then
    -- Whole numbers of ms below 1e14 print exactly with tostring's '%.14g'.
    if ms < 1e14 then t = tostring(ms) else t = ms end
    TTL_TEXT[ms] = t
  end
  return t
end

local function write(key, s, b, r, now)
  local x = expires_at(s, b, r)
  local e = CACHE[key]
  if e ~= nil then
    if x <= now then e.s, e.b, e.ttl = nil, nil, 0
    else e.s, e.b, e.ttl = s, b, max(ceil(x - now), MIN_TTL) end
  elseif x <= now then redis.call('DEL', key)
  else redis.call('SET', key, encode(s, b), 'PX', ttl_text(max(ceil(x - now), MIN_TTL))) end
end

-- Writes the hot keys' final entries.
local function flush()
  for key, e in pairs(CACHE) do
    if e.ttl == 0 then redis.call('DEL', key)
    elseif e.ttl ~= nil then redis.call('SET', key, encode(e.s, e.b), 'PX', ttl_text(e.ttl)) end
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

-- A stack's time: supplied (TTLs of at least MIN_TTL_SUPPLIED) or Redis TIME (exact TTLs).
local function stack_now(given)
  if given ~= nil and given ~= '' then
    MIN_TTL = MIN_TTL_SUPPLIED
    return tonumber(given)
  end
  MIN_TTL = 0
  return time_now()
end

if mode == 'r' then
  local now = stack_now(ARGV[ARG + 1])
  local at = tonumber(ARGV[ARG + 2])
  local sh = shape_of(ARGV[ARG + 3])
  for i = 1, sh.n do
    local r = sh.rules[i]
    local s, b = read(KEYS[i], r, now)
    if s ~= nil then
      local nx = ALG[r.algo].refund(s, now, r, sh.costs[i], at)
      if nx == nil and b == 0 then redis.call('DEL', KEYS[i]) else write(KEYS[i], nx, b, r, now) end
    end
  end
  return out(now)
end

local reply = {}
-- Per-op outcomes of the stack being decided, in arrays reused by every stack of the call.
local OK, REM, RESET, RETRY, DELAY, REASON, HAS, WS, WB = {}, {}, {}, {}, {}, {}, {}, {}, {}
local k = 0
-- The ops' keys; the last new key used.
local KEY = {}
local nextKey = 0
while ARG < NARGV do
  ARG = ARG + 1
  local str = ARGV[ARG]
  local c = byte(str, 1)
  -- 'C' / 'P': the stack's own time follows.
  local given = nil
  if c == 67 or c == 80 then
    ARG = ARG + 1
    given = ARGV[ARG]
  end
  local now = stack_now(given)
  local sh = shape_of(str)
  local rules, costs, refs, n = sh.rules, sh.costs, sh.refs, sh.n
  for i = 1, n do
    local ref = refs[i]
    if ref == 0 then
      nextKey = nextKey + 1
      ref = nextKey
    end
    KEY[i] = KEYS[ref]
  end
  local allowed = true
  for i = 1, n do
    local r = rules[i]
    local s, b = read(KEY[i], r, now)
    local ok
    ok, REM[i], RESET[i], RETRY[i], DELAY[i], REASON[i], HAS[i], WS[i], WB[i] = check_rule(s, b, now, r, costs[i])
    OK[i] = ok
    if not ok and not r.dry then allowed = false end
  end
  reply[k + 1] = allowed and 1 or 0
  reply[k + 2] = out(now)
  k = k + 2
  local consume = c == 99 or c == 67
  for i = 1, n do
    local ok = OK[i]
    -- An admitting rule consumes only when the whole stack is admitted; a rejecting rule
    -- writes its block or penalty either way.
    if consume and HAS[i] and not (ok and not allowed) then write(KEY[i], WS[i], WB[i], rules[i], now) end
    local delay = DELAY[i]
    local remaining = REM[i]
    if not allowed then
      delay = 0
      -- An admitting rule of a refused stack consumed nothing: report it untouched.
      if ok then remaining = remaining + costs[i] end
    end
    -- An admitting rule's retryAfterMs is 0 and a refusing rule's delayMs is 0: the first
    -- field is 1 or the refusal's reason, the last the delay or the retry time.
    reply[k + 2] = out(remaining)
    reply[k + 3] = out(RESET[i])
    if ok then
      reply[k + 1] = 1
      reply[k + 4] = out(delay)
    else
      reply[k + 1] = REASON[i]
      reply[k + 4] = out(RETRY[i])
    end
    k = k + 4
  end
end
flush()
return reply
`;
