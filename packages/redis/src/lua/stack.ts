/**
 * Lua mirror of `core/src/stack.ts` and the script's entry point.
 *
 * Every argument is text (see `../args.ts`). ARGV[1] is the mode, ARGV[2] the least TTL
 * for supplied time, ARGV[3] the number R of distinct rules the call uses, then 7 fields
 * per rule (rule number i = 1..R): flags (algorithm, align, mode, calendar, countRejected,
 * dryRun, one character each), L, W, B, Q, blockForMs, maxCost. Then:
 * - `d` (decide): runs of stacks. A run is its count, then its shape: a command (`c`
 *   consume, `p` peek; upper case when the run's `now` follows as the next field, else
 *   Redis `TIME`) and per op `<rule number>:<cost>`, comma-separated (`c1:1,2:1`); the
 *   consecutive stacks of a batch with the same shape (and time) make one run, so a batch
 *   of one limiter's stacks is one or two runs, not a field per stack. KEYS holds each
 *   distinct key of the call once: an op takes the next key not yet used, or, when a key
 *   repeats (a tenant's, a route's or a global rule's key shared by many stacks), names it
 *   with `@<index>` (`c1:1,2:1@2`). Each shape is parsed once per call, and keys named
 *   again are the call's hot keys (see read in STACK_LUA). Stacks are decided one after
 *   the other, each all-or-nothing, as if they had arrived in that order; `TIME` is read
 *   once. The reply is one string of little-endian doubles: per stack allowed (1/0) and
 *   now, then OUT_FIELDS per op (see `OUT_FIELDS` in index.ts). Doubles are exact and cost
 *   Redis and Node less than an array of integer and text replies.
 * - `r` (refund): `now` (empty: Redis `TIME`), `at`, then the ops' shape (`r1:1,2:1`);
 *   the reply is now.
 *
 * Every key written gets its TTL in the same command (`SET ... PX`), the time until
 * `entryExpiresAt`, so no key is ever left without expiry. An entry whose expiry has
 * passed is read as absent, exactly as `MemoryStore` does (see read in STACK_LUA).
 */
/** Reads the mode and the rules. Runs first. */
export const PARSE_LUA = `
local mode = ARGV[1]
-- Redis expires keys on its own clock; time supplied by the caller may not follow it, so
-- keys written on supplied time live at least ARGV[2] ms (read as absent once expired).
local MIN_TTL_SUPPLIED = tonumber(ARGV[2])
local MIN_TTL = 0
-- Whether the run being decided is on Redis' TIME (else on supplied time).
local REDIS_TIME = true
-- The algorithms this call needs: only their sections are instantiated (see index.ts); and
-- whether a rule counts calendar months.
local NEED = {}
local NEED_MONTH = false

local redis_now = nil
local function time_now()
  if redis_now == nil then
    local t = redis.call('TIME')
    redis_now = tonumber(t[1]) * 1000 + floor(tonumber(t[2]) / 1000)
  end
  return redis_now
end

local sub, byte, gmatch = string.sub, string.byte, string.gmatch
-- The call's rules, by number. Flags are read with one byte() call; the number fields that
-- usually repeat another (maxCost and burst: the limit) or are 0 are not parsed again.
local RULE = {}
local NRULES = tonumber(ARGV[3])
for i = 1, NRULES do
  local a = 3 + 7 * (i - 1)
  local f = ARGV[a + 1]
  local algo = sub(f, 1, 1)
  local _, align, md, cal, cr, dry = byte(f, 1, 6)
  local Ltext = ARGV[a + 2]
  local L = tonumber(Ltext)
  local B, Q, block, maxCost = ARGV[a + 4], ARGV[a + 5], ARGV[a + 6], ARGV[a + 7]
  if B == Ltext then B = L else B = tonumber(B) end
  if Q == '0' then Q = 0 else Q = tonumber(Q) end
  if block == '0' then block = 0 else block = tonumber(block) end
  if maxCost == Ltext then maxCost = L else maxCost = tonumber(maxCost) end
  -- 102 'f' (first-request alignment), 113 'q' (queue mode), 109 'm' (calendar month),
  -- 49 '1' (countRejected, dryRun).
  RULE[i] = {
    algo = algo, first = align == 102, queue = md == 113, month = cal == 109, cr = cr == 49, dry = dry == 49,
    L = L, W = tonumber(ARGV[a + 3]), B = B, Q = Q, block = block, maxCost = maxCost, m = 4,
  }
  -- The fields of an entry of this rule (see read): block, TTL expiry, the state (a
  -- sliding log's varies: 0).
  if algo == 'w' then RULE[i].m = 5 elseif algo == 'k' then RULE[i].m = 3 elseif algo == 's' then RULE[i].m = 0 end
  NEED[algo] = true
  if cal == 109 then NEED_MONTH = true end
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
      -- Most rule numbers are one digit and most costs 1: byte() and a comparison are
      -- cheaper than tonumber's strtod.
      if #ri == 1 then rules[n] = RULE[byte(ri) - 48] else rules[n] = RULE[tonumber(ri)] end
      if c == '1' then costs[n] = 1 else costs[n] = tonumber(c) end
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
-- Each rule's algorithm entry (the leaky bucket's queue mode has its own).
for i = 1, NRULES do
  local r = RULE[i]
  if r.algo == 'k' and r.queue then r.alg = ALG['kq'] else r.alg = ALG[r.algo] end
end

local call = redis.call

-- Entries travel as two values: the state s (nil for none) and the block deadline b.
local function expires_at(s, b, r)
  local x = 0
  if s ~= nil then x = r.alg.expires(s, r) end
  return max(x, b)
end

-- Keys that several stacks of this call count under (a tenant's, a route's, a global
-- rule's; HOT, from the shapes, all parsed before the first read): their entries are kept
-- here from their first read while the call decides, and written once at its end (flush)
-- with the TTL the last write gives them. The script runs atomically, so nothing else can
-- observe the difference; every other key is read and written in place.
-- A hot key's entry: s, b (b nil: absent); once written in this call, dirty and the rule,
-- time, least TTL and clock of that write (r, now, min, redis); gone when it was read as
-- expired and not written again (flush deletes it).
local CACHE = {}

-- The entry under key; b is nil when there is none. With supplied time (drop true) an
-- entry whose expiry has passed is read as absent and deleted, as MemoryStore drops it,
-- so that a clock stepping back later does not bring it back. On Redis time the key's
-- own TTL, set on the same clock, removes it; one read just before Redis expired it is
-- decided by every algorithm exactly as an absent one.
-- VALS: the values of every key of the call, read with one MGET at its start (idx: the
-- key's index). MGET, not GET: a key holding another type (a hash, a list) reads as nil.
local VALS = nil
local function read(key, r, now, drop, idx)
  local s, b, x0
  local e = CACHE[key]
  if e ~= nil then s, b = e.s, e.b
  else
    local v = VALS[idx]
    -- decode (common.ts), inlined. Only a value of m fields that an entry of this rule can
    -- have is decoded: its state's fields with the block and the TTL expiry (r.m), none
    -- (2), a block alone (1, older builds), or for a sliding log (r.m 0) two per entry.
    -- Any other value (another application's, a manual SET, an older build's), or one
    -- holding a number none of our writes could (SANE2), is read as absent and overwritten
    -- by the next write; MGET reads a key of another type (a hash, a list) as absent too.
    -- The rule's kind is in its key, so every value this build wrote fits.
    local m = -1
    if v then m = #v / 8 end
    local w = r.m
    if m == w or m == 2 or m == 1 or (w == 0 and m > 2 and m % 2 == 0) then
      -- (A value of one field, a block alone as builds before the TTL expiry wrote it,
      -- reads without one.)
      if m == 1 then b, x0 = (unpack_bin('<d', v)), NO_EXPIRY
      else b, x0 = unpack_bin('<dd', v) end
      if m > 34 then s = decode(v)
      elseif m > 2 then
        local f = FMT[m - 2]
        if f == nil then f = fmt_of(m - 2) end
        s = { unpack_bin(f, v, 17) }
        s[m - 1] = nil
      end
      local y = b * b
      if s ~= nil then
        for i = 1, m - 2 do
          local z = s[i]
          y = y + z * z
        end
      end
      if not (y <= SANE2) then b, s, x0 = nil, nil, nil end
    end
    if HOT[key] then
      e = { s = s, b = b }
      CACHE[key] = e
    end
  end
  if b == nil then return nil, nil end
  if drop then
    if expires_at(s, b, r) <= now then
      if e ~= nil then e.s, e.b, e.dirty, e.gone = nil, nil, false, true else call('DEL', key) end
      return nil, nil
    end
    return s, b
  end
  -- On Redis time, the expiry the key's TTL was last set for (see write); not for a hot
  -- key, which is written at flush.
  if e == nil then return s, b, x0 end
  return s, b
end

-- A TTL as the text SET reads: Redis formats a Lua number argument with '%.17g' on every
-- call, while the stacks of a batch mostly share one TTL (one now, one window end).
local TTL_TEXT = {}

-- Writes the entry, with its TTL. x0: the expiry the key's TTL was set for, as stored
-- with the entry read (see read): a write on Redis time that leaves it unchanged keeps the
-- TTL (SET KEEPTTL costs Redis less than SET PX). That TTL runs to at least x0 on Redis'
-- clock, and Redis expires keys inside a script on the script's start time, so the key
-- read is still there. Whichever rule wrote it (rules sharing a group share a key), the
-- stored x0 is what its TTL was set for.
local function write(key, s, b, r, now, x0, xs)
  local e = CACHE[key]
  if e ~= nil then
    -- A hot key: kept here; its TTL is worked out once, at flush.
    e.s, e.b, e.r, e.now, e.min, e.redis, e.dirty = s, b, r, now, MIN_TTL, REDIS_TIME, true
    return
  end
  local x = b
  local m = 0
  if s ~= nil then
    -- xs: the state's expiry when its check returned it (fixed and sliding windows).
    x = xs or r.alg.expires(s, r)
    if b > x then x = b end
    m = #s
  end
  if x <= now then call('DEL', key); return end
  local ms = ceil(x - now)
  if ms < MIN_TTL then ms = MIN_TTL end
  -- On supplied time the TTL is not on Redis' clock: no expiry is recorded for a later
  -- KEEPTTL.
  local xk = x
  if not REDIS_TIME then xk = NO_EXPIRY end
  -- encode (common.ts), inlined for up to 30 fields.
  local v
  if m == 0 then v = pack('<dd', b, xk)
  elseif m <= 30 then
    local f = FMT[m + 2]
    if f == nil then f = fmt_of(m + 2) end
    v = pack(f, b, xk, unpack(s))
  else v = encode(s, b, xk) end
  if x == x0 and REDIS_TIME then call('SET', key, v, 'KEEPTTL'); return end
  local t = TTL_TEXT[ms]
  if t == nil then
    -- Whole numbers of ms below 1e14 print exactly with tostring's '%.14g'.
    if ms < 1e14 then t = tostring(ms) else t = ms end
    TTL_TEXT[ms] = t
  end
  call('SET', key, v, 'PX', t)
end

-- Writes the hot keys' final entries: each as its last write left it, with the TTL that
-- write gives it (deleted when already expired then). A hot key whose entry was read as
-- expired and not written again is deleted.
local function flush()
  for key, e in pairs(CACHE) do
    if e.dirty then
      local s, b, now = e.s, e.b, e.now
      local x = expires_at(s, b, e.r)
      if x <= now then call('DEL', key)
      else
        local ms = ceil(x - now)
        if ms < e.min then ms = e.min end
        local xk = x
        if not e.redis then xk = NO_EXPIRY end
        if ms < 1e14 then ms = tostring(ms) end
        call('SET', key, encode(s, b, xk), 'PX', ms)
      end
    elseif e.gone then call('DEL', key) end
  end
end

-- The full check of one rule: cost above maxCost, a block, a refusal that is written
-- (countRejected) or starts a block. Returns the outcome as values (allowed, remaining,
-- resetMs, retryAfterMs, delayMs, reason), then whether to write and what (state, block
-- deadline) if committed. The main loop handles the admitted, unblocked case itself.
local function check_rule(s, b, now, r, cost)
  if cost > r.maxCost then return false, 0, 0, 0, 0, 'c', false end
  local ok, remaining, reset, retry, delay, nx = r.alg.check(s, now, r, cost)
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
    local _, aRemaining, aReset, aRetry = r.alg.check(nx, now, r, cost)
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

-- A run's time: supplied (TTLs of at least MIN_TTL_SUPPLIED) or Redis TIME (exact TTLs).
local function stack_now(given)
  if given ~= nil and given ~= '' then
    MIN_TTL = MIN_TTL_SUPPLIED
    REDIS_TIME = false
    return tonumber(given), true
  end
  MIN_TTL = 0
  REDIS_TIME = true
  return time_now(), false
end

if mode == 'r' then
  local now, drop = stack_now(ARGV[ARG + 1])
  local at = tonumber(ARGV[ARG + 2])
  local sh = shape_of(ARGV[ARG + 3])
  VALS = call('MGET', unpack(KEYS))
  for i = 1, sh.n do
    local r = sh.rules[i]
    local s, b = read(KEYS[i], r, now, drop, i)
    if s ~= nil then
      local nx = r.alg.refund(s, now, r, sh.costs[i], at)
      if nx == nil and b == 0 then call('DEL', KEYS[i]) else write(KEYS[i], nx, b, r, now) end
    end
  end
  return out(now)
end

-- Every shape first: a key that a later stack names again is hot (kept in CACHE) from its
-- first read on. So each key of the call is read from Redis once, before anything is
-- written, and one MGET reads them all.
do
  local a = ARG
  while a < NARGV do
    local str = ARGV[a + 2]
    shape_of(str)
    a = a + 2
    local c = byte(str, 1)
    if c == 67 or c == 80 then a = a + 1 end
  end
end
VALS = call('MGET', unpack(KEYS))
-- The reply: numbers, packed as little-endian doubles at the end (see OUT_FIELDS).
local R = {}
local k = 0
-- Per op of the stack being decided (arrays reused by every stack of the call): whether
-- its rule admitted, and what it would write: state, block deadline (false: nothing),
-- and the expiry its key's TTL was set for (see read).
local OK, WS, WB, X0, XS = {}, {}, {}, {}, {}
-- The ops' keys and their indexes in KEYS; the last new key used.
local KEY, KIDX = {}, {}
local nextKey = 0
while ARG < NARGV do
  -- A run: count, shape, and (upper-case command) its time.
  local count = ARGV[ARG + 1]
  if count == '1' then count = 1 else count = tonumber(count) end
  local str = ARGV[ARG + 2]
  ARG = ARG + 2
  local c = byte(str, 1)
  local given = nil
  if c == 67 or c == 80 then
    ARG = ARG + 1
    given = ARGV[ARG]
  end
  local now, drop = stack_now(given)
  local consume = c == 99 or c == 67
  local sh = shape_of(str)
  local rules, costs, refs, n = sh.rules, sh.costs, sh.refs, sh.n
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
      local key = KEY[i]
      local s, b, x0
      -- A hot key's entry is read from CACHE here (read() also drops it when expired).
      local e = CACHE[key]
      if e ~= nil and not drop then s, b = e.s, e.b
      else s, b, x0 = read(key, r, now, drop, KIDX[i]) end
      local ok, rem, reset, retry, delay, nx, reason, wb, xs
      if cost <= r.maxCost and (b == nil or b <= now) then
        ok, rem, reset, retry, delay, nx, xs = r.alg.check(s, now, r, cost)
        if ok then
          wb = false
          if nx ~= nil then wb = 0 end
        end
      end
      if not ok then
        local has
        ok, rem, reset, retry, delay, reason, has, nx, wb = check_rule(s, b, now, r, cost)
        xs = nil
        if not has then wb = false end
        if not ok and not r.dry then allowed = false end
      end
      OK[i], WS[i], WB[i], X0[i], XS[i] = ok, nx, wb, x0, xs or false
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
      -- delay.
      for i = 1, n do
        if OK[i] then
          local p = base + 4 * i - 2
          R[p + 2] = R[p + 2] + costs[i]
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
flush()
-- Packed in chunks: unpack() puts every value on the Lua stack.
local parts = {}
for i = 1, k, 128 do
  local j = min(k, i + 127)
  parts[#parts + 1] = pack(fmt_of(j - i + 1), unpack(R, i, j))
end
return table.concat(parts)
`;
