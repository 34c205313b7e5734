/**
 * Lua mirror of `core/src/stack.ts` and the script's entry point.
 *
 * Every argument is text (see `../args.ts`). ARGV[1] is the call's plan, its lines
 * separated by newlines; the further ARGV are the times it names. The plan's first line is
 * the mode, the least TTL for supplied time and the number R of distinct rules the call
 * uses (`d 1000 2`); then one line per rule (rule number i = 1..R), its 7 values separated
 * by spaces: flags (algorithm, align, mode, calendar, countRejected, dryRun, one character
 * each), L, W, B, Q (a sliding-buckets rule: its blocks per window), blockForMs, maxCost. Then:
 * - `d` (decide): one line per run of stacks: its count, a space and its shape: a command
 *   (`c` consume, `p` peek; upper case when the run's `now` is supplied: the next of
 *   ARGV[2], ARGV[3], ...; else Redis `TIME`) and per op `<rule number>:<cost>`,
 *   comma-separated (`1 c1:1,2:1`); the consecutive stacks of a batch with the same shape
 *   (and time) make one run, so a batch of one limiter's stacks is one or two runs. KEYS
 *   holds each distinct key of the call once: an op takes the next key not yet used, or,
 *   when a key repeats (a tenant's, a route's or a global rule's key shared by many
 *   stacks), names it with `@<index>` (`c1:1,2:1@2`); keys named again are the call's hot
 *   keys (see read in STACK_LUA). Stacks are decided one after the other, each
 *   all-or-nothing, as if they had arrived in that order; `TIME` is read once. The reply is
 *   one string of little-endian doubles: per stack allowed (1/0) and now, then OUT_FIELDS
 *   per op (see `OUT_FIELDS` in index.ts); a call that a straight-through closure
 *   (one.ts) admits whole replies now, then remaining and resetMs per op. Doubles are
 *   exact and cost Redis and Node less than an array of integer and text replies.
 * - `r` (refund): one line, the ops' shape (`r1:1,2:1`); ARGV[2] is `now` (empty: Redis
 *   `TIME`) and ARGV[3] `at`; the reply is now.
 * - `s` (settle): as `r`, each op's cost the actual cost less the estimate (`s1:-3,2:5`):
 *   below zero a refund of the difference, above zero a charge (core's settleEntry).
 *   A settle also rides in a `d` call as a run of its own (`1 s1:-3,2:5`; `S` when its
 *   `now` is supplied), decided in its place among the stacks: its times are the next
 *   ARGV (`now` for `S`, then `at`), and its reply is allowed (1) and now, no op fields.
 *
 * A plan names no key and no time, so the calls of one limiter send the same plan again and
 * again: a function library keeps each plan parsed (see plan_of), and a call reads it with
 * one table lookup. Redis also pays per argument, hence one.
 *
 * Every key written gets its expiry in the same command (`SET ... PXAT` for a window's end
 * on Redis time, else `SET ... PX`; see set_expiring), `entryExpiresAt`, so no key is ever
 * left without expiry. An entry whose expiry has passed is read as absent, exactly as
 * `MemoryStore` does (see read in STACK_LUA).
 */
/**
 * Redis' TIME in ms into a new local \`now\` (\`callFn\`: the Lua expression of
 * redis.call): the seconds' text changes once a second, so its number is kept (last_s,
 * last_ms) rather than parsed again; the microseconds' digits but the last three are read
 * with byte() (strtod, tonumber's, costs more). Inlined where it is read (a Lua call costs
 * about a dozen arithmetic operations).
 */
export function timeMs(callFn: string): string {
  return `
    local t = ${callFn}('TIME')
    local ts, us = t[1], t[2]
    if ts ~= last_s then last_s, last_ms = ts, tonumber(ts) * 1000 end
    local ms, n = 0, #us
    if n > 3 then
      local d1, d2, d3 = byte(us, 1, n - 3)
      ms = d1 - 48
      if d2 ~= nil then
        ms = ms * 10 + d2 - 48
        if d3 ~= nil then ms = ms * 10 + d3 - 48 end
      end
    end
    local now = last_ms + ms`;
}

/**
 * The call's state and the parsing helpers: defined once (per library load, or per EVAL),
 * their state reset by each call (see `store` in STACK_LUA).
 */
export const PARSE_LUA = `
local sub, byte, match, gmatch = string.sub, string.byte, string.match, string.gmatch

-- The call being run: its keys and arguments.
local KEYS, ARGV
-- Redis expires keys on its own clock; time supplied by the caller may not follow it, so
-- keys written on supplied time live at least this many ms (read as absent once expired).
local MIN_TTL_SUPPLIED = 0
local MIN_TTL = 0
-- Whether the run being decided is on Redis' TIME (else on supplied time).
local REDIS_TIME = true

-- Redis' TIME in ms, read once per call. The seconds' text changes once a second: its
-- number is kept rather than parsed again.
local redis_now = nil
local last_s, last_ms = nil, 0
local function time_now()
  if redis_now == nil then${timeMs('redis.call')}
    redis_now = now
  end
  return redis_now
end

-- Plans, rules and shapes parsed, by their text: a function library keeps them from call
-- to call (a cache of what the text says, emptied when it holds CACHED_MAX of one kind), a
-- script builds them for its call.
local CACHED_MAX = 512
local RULES, NRULES_CACHED = {}, 0
local SHAPES, NSHAPES = {}, 0
local PLANS, NPLANS = {}, 0

-- The 7 fields of a rule's text (see the header of stack.ts), parsed into its table.
local function rule_of(text)
  local r = RULES[text]
  if r ~= nil then return r end
  local f, Ltext, W, B, Q, block, maxCost = match(text, '^(%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+)$')
  local algo = sub(f, 1, 1)
  local _, align, md, cal, cr, dry = byte(f, 1, 6)
  local L = tonumber(Ltext)
  -- The number fields that usually repeat another (maxCost and burst: the limit) or are 0
  -- are not parsed again.
  if B == Ltext then B = L else B = tonumber(B) end
  if Q == '0' then Q = 0 else Q = tonumber(Q) end
  if block == '0' then block = 0 else block = tonumber(block) end
  if maxCost == Ltext then maxCost = L else maxCost = tonumber(maxCost) end
  -- 102 'f' (first-request alignment), 113 'q' (queue mode), 109 'm' (calendar month),
  -- 49 '1' (countRejected, dryRun). The leaky bucket's queue mode has its own entry.
  local alg = ALG[algo]
  if md == 113 and algo == 'k' then alg = ALG['kq'] end
  r = {
    algo = algo, first = align == 102, queue = md == 113, month = cal == 109, cr = cr == 49, dry = dry == 49,
    L = L, W = tonumber(W), B = B, Q = Q, block = block, maxCost = maxCost, alg = alg, m = 4,
  }
  -- The fields of an entry of this rule (see read): block, TTL expiry, the state (a
  -- sliding log's and sliding buckets' vary: 0).
  if algo == 'w' then r.m = 5 elseif algo == 'k' then r.m = 3 elseif algo == 's' or algo == 'b' then r.m = 0 end
  -- Whether the state holds counts, which no value of ours has below zero (negative_count).
  r.counts = algo == 'f' or algo == 's' or algo == 'w' or algo == 'b'
  if NRULES_CACHED >= CACHED_MAX then RULES, NRULES_CACHED = {}, 0 end
  RULES[text] = r
  NRULES_CACHED = NRULES_CACHED + 1
  return r
end

-- A shape's ops: rule numbers, costs, key references (0: the next new key), count, and
-- the references to keys named again (hot keys, see read in STACK_LUA).
local function shape_of(str)
  local sh = SHAPES[str]
  if sh == nil then
    local nums, costs, refs, hot, n = {}, {}, {}, {}, 0
    for ri, c, ref in gmatch(str, '(%d+):([^,@]+)@?(%d*)') do
      n = n + 1
      -- Most rule numbers are one digit and most costs 1: byte() and a comparison are
      -- cheaper than tonumber's strtod.
      if #ri == 1 then nums[n] = byte(ri) - 48 else nums[n] = tonumber(ri) end
      if c == '1' then costs[n] = 1 else costs[n] = tonumber(c) end
      if ref == '' then refs[n] = 0
      else
        refs[n] = tonumber(ref)
        hot[#hot + 1] = refs[n]
      end
    end
    sh = { nums = nums, costs = costs, refs = refs, hot = hot, n = n }
    if NSHAPES >= CACHED_MAX then SHAPES, NSHAPES = {}, 0 end
    SHAPES[str] = sh
    NSHAPES = NSHAPES + 1
  end
  return sh
end

-- A plan (see the header): mode, least TTL on supplied time, rules; a refund's shape, or
-- a decide call's runs (count, consume or peek, whether its time is supplied, shape, and
-- the shape's rules) and the references of every hot key.
local function plan_of(text)
  local p = PLANS[text]
  if p ~= nil then return p end
  local lines, nl = {}, 0
  for line in gmatch(text, '[^\\n]+') do
    nl = nl + 1
    lines[nl] = line
  end
  local mode, minTtl, nr = match(lines[1], '^(%a) (%S+) (%d+)$')
  nr = tonumber(nr)
  local rules = {}
  for j = 1, nr do rules[j] = rule_of(lines[1 + j]) end
  p = { mode = mode, minTtl = tonumber(minTtl), rules = rules }
  if mode == 'r' or mode == 's' then p.sh = shape_of(lines[2 + nr])
  else
    local runs, hot = {}, {}
    for j = 2 + nr, nl do
      local count, str = match(lines[j], '^(%d+) (.+)$')
      local c = byte(str, 1)
      local sh = shape_of(str)
      local rr = {}
      for i = 1, sh.n do rr[i] = rules[sh.nums[i]] end
      -- 115 's', 83 'S': a settle riding in the batch (see the header).
      local settle = c == 115 or c == 83
      if settle then p.settles = true end
      runs[#runs + 1] = { count = tonumber(count), consume = c == 99 or c == 67, timed = c == 67 or c == 80 or c == 83, settle = settle, sh = sh, rules = rr }
      for i = 1, #sh.hot do hot[#hot + 1] = sh.hot[i] end
    end
    p.runs, p.hot = runs, hot
    -- One stack of one op (a request alone in its tick, one rule): the common call, which
    -- store() decides without the batch's machinery (see decide_one).
    if #runs == 1 and runs[1].count == 1 and runs[1].sh.n == 1 and not p.settles then p.one = runs[1] end
  end
  if NPLANS >= CACHED_MAX then PLANS, NPLANS = {}, 0 end
  PLANS[text] = p
  NPLANS = NPLANS + 1
  return p
end

-- The call's hot keys.
local HOT = {}
`;

/**
 * The stack decision and the call's entry point, \`store(KEYS, ARGV)\`, which the
 * assembly returns (see index.ts). Runs after the algorithm sections.
 */
export const STACK_LUA = `
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
    -- holding a number none of our writes could (SANE2, a count below zero), is read as absent and overwritten
    -- by the next write; MGET reads a key of another type (a hash, a list) as absent too.
    -- The rule's kind is in its key, so every value this build wrote fits.
    local m = -1
    if v then m = #v / 8 end
    local w = r.m
    if m == w or m == 2 or m == 1 or (w == 0 and m > 2 and m % 2 == 0) then
      -- (A value of one field, a block alone as builds before the TTL expiry wrote it,
      -- reads without one.) Two or three state fields, the common sizes, are read in one
      -- unpack, and their squares summed without a loop (y, see SANE2).
      local y
      if m == 4 then
        local s1, s2
        b, x0, s1, s2 = unpack_bin('<dddd', v)
        s = { s1, s2 }
        y = b * b + s1 * s1 + s2 * s2
      elseif m == 5 then
        local s1, s2, s3
        b, x0, s1, s2, s3 = unpack_bin('<ddddd', v)
        s = { s1, s2, s3 }
        y = b * b + s1 * s1 + s2 * s2 + s3 * s3
      elseif m < 3 then
        if m == 1 then b, x0 = (unpack_bin('<d', v)), NO_EXPIRY else b, x0 = unpack_bin('<dd', v) end
        y = b * b
      else
        b, x0 = unpack_bin('<dd', v)
        if m > 34 then s = decode(v)
        else
          local f = FMT[m - 2]
          if f == nil then f = fmt_of(m - 2) end
          s = { unpack_bin(f, v, 17) }
          s[m - 1] = nil
        end
        y = b * b
        for i = 1, m - 2 do
          local z = s[i]
          y = y + z * z
        end
      end
      if not (y <= SANE2) or (r.counts and negative_count(r.algo, s)) then b, s, x0 = nil, nil, nil end
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

-- An expiry as the text SET reads: Redis formats a Lua number argument with '%.17g' on
-- every call, while the writes of a call, and of calls close in time, mostly share one
-- (one window end). Kept from call to call by a library, as the parsed rules are; few are
-- kept (TTL_MAX): every string the library holds is traversed by each of Redis' garbage
-- collection steps, which run every 50 calls.
local TTL_TEXT, NTTL, TTL_MAX = {}, 0, 64
local function ttl_text(n)
  local t = TTL_TEXT[n]
  if t == nil then
    -- Whole numbers below 1e14 print exactly with tostring's '%.14g'.
    if n < 1e14 then t = tostring(n) else t = n end
    if NTTL >= TTL_MAX then TTL_TEXT, NTTL = {}, 0 end
    TTL_TEXT[n] = t
    NTTL = NTTL + 1
  end
  return t
end

-- SET with the expiry x. When at (on Redis time, an expiry that is a window's end), as
-- the instant itself (PXAT, whole ms up), which every key of that window shares, so its
-- text is made once. Else as a TTL (PX), of at least min ms from now: on supplied time
-- Redis' clock is not the caller's, and a bucket's refill time repeats more often than
-- the instant it ends at.
local function set_expiring(key, v, x, now, min, at)
  if at then
    if x % 1 ~= 0 then x = ceil(x) end
    call('SET', key, v, 'PXAT', ttl_text(x))
    return
  end
  local ms = ceil(x - now)
  if ms < min then ms = min end
  call('SET', key, v, 'PX', ttl_text(ms))
end

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
  -- On supplied time the TTL is not on Redis' clock: no expiry is recorded for a later
  -- KEEPTTL.
  local xk = x
  if not REDIS_TIME then xk = NO_EXPIRY end
  -- encode (common.ts), inlined for up to 30 fields.
  local v
  if m == 3 then v = pack('<ddddd', b, xk, s[1], s[2], s[3])
  elseif m == 2 then v = pack('<dddd', b, xk, s[1], s[2])
  elseif m == 0 then v = pack('<dd', b, xk)
  elseif m <= 30 then
    local f = FMT[m + 2]
    if f == nil then f = fmt_of(m + 2) end
    v = pack(f, b, xk, unpack(s))
  else v = encode(s, b, xk) end
  if x == x0 and REDIS_TIME then call('SET', key, v, 'KEEPTTL'); return end
  set_expiring(key, v, x, now, MIN_TTL, REDIS_TIME and xs)
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
        local xk = x
        if not e.redis then xk = NO_EXPIRY end
        set_expiring(key, encode(s, b, xk), x, now, e.min, false)
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

-- Per op of the stack being decided (arrays reused by every stack and call): whether its
-- rule admitted, and what it would write: state, block deadline (false: nothing), and the
-- expiry its key's TTL was set for (see read); and the state it read (nil: none).
local OK, WS, WB, X0, XS, S0 = {}, {}, {}, {}, {}, {}
-- The ops' keys and their indexes in KEYS.
local KEY, KIDX = {}, {}
-- The reply: numbers, packed as little-endian doubles at the end (see OUT_FIELDS).
local R = {}
-- Whether the previous call had hot keys.
local HAD_HOT = false

-- A stack of one op (its rule is the stack: admitted exactly when the rule admits, or is
-- a dry run): reads the entry under key (KEYS[idx]; hot: whether the call has hot keys),
-- checks it, writes what the rule would when consume, and returns the stack's reply
-- fields but now: allowed (1/0), then the op's OUT_FIELDS. The main loop of store() does
-- the same for longer stacks, keeping each op's outcome until all are known.
local function single(key, idx, r, cost, now, drop, consume, hot)
  local s, b, x0
  -- A hot key's entry is read from CACHE here (read() also drops it when expired).
  local e = nil
  if hot then e = CACHE[key] end
  if e ~= nil and not drop then s, b = e.s, e.b
  else s, b, x0 = read(key, r, now, drop, idx) end
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
  end
  if consume and wb ~= false then write(key, nx, wb, r, now, x0, xs) end
  if ok then return 1, 1, rem, reset, delay end
  local a = 0
  if r.dry then a = 1 end
  if reason == 'l' then return a, 2, rem, reset, retry end
  if reason == 'b' then return a, 3, rem, reset, retry end
  return a, 4, rem, reset, retry
end

-- The read of a call with one key (decide_one): VALS as read() takes it, reused.
local ONE_VAL = {}

-- A call deciding one stack of one op (run: the plan's only run), the common call, at now
-- with the value v that GET replied for key: no loop, and GET rather than MGET (it costs
-- Redis less); a key of another type (a hash, a list), which GET refuses, reads as absent
-- as with MGET.
local function decide_one(run, key, now, v, drop)
  if type(v) ~= 'string' then v = false end
  ONE_VAL[1] = v
  VALS = ONE_VAL
  local a, c, rem, reset, last = single(key, 1, run.rules[1], run.sh.costs[1], now, drop, run.consume, false)
  ONE_VAL[1] = nil
  return pack('<dddddd', a, now, c, rem, reset, last)
end

-- The first k numbers of R as little-endian doubles, packed in chunks: unpack() puts
-- every value on the Lua stack.
local function pack_list(R, k)
  if k <= 128 then
    local f = FMT[k]
    if f == nil then f = fmt_of(k) end
    return pack(f, unpack(R, 1, k))
  end
  local parts = {}
  for i = 1, k, 128 do
    local j = min(k, i + 127)
    parts[#parts + 1] = pack(fmt_of(j - i + 1), unpack(R, i, j))
  end
  return table.concat(parts)
end

-- The general path of a decide or refund call (defined in the entry below); the
-- straight-through closures (one.ts) hand it a call with its time and values already read.
local store_rest
`;

/**
 * The entry point, \`store(KEYS, ARGV)\`, which the assembly returns (see index.ts). Runs
 * after STACK_LUA and ONE_LUA (one.ts).
 */
export const ENTRY_LUA = `
-- The state after charging units at now without refusing (core's chargeState): the
-- algorithm's check with countRejected forced on, its next state written whatever it
-- says; no number beyond CHARGE_MAX (a sliding-log entry or block: LOG_CHARGE_MAX), far below SANE2.
local CHARGE_MAX, LOG_CHARGE_MAX = 2 ^ 50, 2 ^ 40
local function charge(s, now, r, units)
  if r.algo == 'k' then
    local base = now
    if s ~= nil and s[1] > now then base = s[1] end
    return { min(base + units * (r.W / r.L), now + CHARGE_MAX) }
  end
  local f = r.forced
  if f == nil then
    f = {}
    for k, v in pairs(r) do f[k] = v end
    f.cr = true
    r.forced = f
  end
  local _, _, _, _, _, nx = r.alg.check(s, now, f, units)
  if r.algo == 't' then nx[2] = max(nx[2], -CHARGE_MAX)
  elseif r.algo == 'f' then nx[2] = min(nx[2], CHARGE_MAX)
  elseif r.algo == 'w' then nx[3] = min(nx[3], CHARGE_MAX)
  elseif r.algo == 's' or r.algo == 'b' then nx[#nx] = min(nx[#nx], LOG_CHARGE_MAX) end
  return nx
end

-- Gives back (refund) or settles one op under key (KEYS[idx]) decided at time at. A
-- settle's cost c is the actual cost less the estimate: above zero a charge (core's
-- settleEntry), below zero a refund of the difference.
local function give_back(key, idx, r, c, now, drop, at, settle)
  local s, b = read(key, r, now, drop, idx)
  if settle and c > 0 then
    write(key, charge(s, now, r, c), b or 0, r, now)
    return
  end
  if s == nil then return end
  if settle then c = -c end
  local nx = r.alg.refund(s, now, r, c, at)
  if nx ~= nil or b ~= 0 then
    write(key, nx, b, r, now)
    return
  end
  -- Nothing left: a hot key's entry goes (flush deletes it), any other key now.
  local e = CACHE[key]
  if e ~= nil then e.s, e.b, e.dirty, e.gone = nil, nil, false, true else call('DEL', key) end
end

-- One call: the state of the previous one is dropped first (a function library keeps
-- these definitions loaded from call to call).
local function store(keys, argv)
  -- The common calls, straight through (one.ts) when their plan fits.
  local text = argv[1]
  local f = FAST[text]
  if f then return f(keys, argv) end
  local plan = PLANS[text]
  if plan == nil then plan = plan_of(text) end
  -- A lease call (lease.ts): its grants are picked before the stack is decided.
  if plan.mode == 'l' then return lease(plan, keys, argv) end
  if f == nil then
    f = fast_of(text, plan)
    if f then return f(keys, argv) end
  end
  return store_rest(plan, keys, argv, nil, nil)
end

-- The call (plan: its plan parsed) on the general path; now0 and vals0, when given, are
-- Redis' TIME and the MGET of every key of the call, already read.
store_rest = function(plan, keys, argv, now0, vals0)
  KEYS, ARGV = keys, argv
  MIN_TTL_SUPPLIED = plan.minTtl
  redis_now = now0
  -- Hot keys (and so CACHE entries) only where the previous call had some.
  if HAD_HOT then
    HOT, CACHE = {}, {}
    HAD_HOT = false
  end
  VALS = nil
  if plan.mode == 'r' or plan.mode == 's' then
    local now, drop = stack_now(ARGV[2])
    local at = tonumber(ARGV[3])
    local sh = plan.sh
    local settle = plan.mode == 's'
    VALS = call('MGET', unpack(KEYS))
    for i = 1, sh.n do give_back(KEYS[i], i, plan.rules[sh.nums[i]], sh.costs[i], now, drop, at, settle) end
    return out(now)
  end
  local run = plan.one
  if run ~= nil then
    local now, drop
    if run.timed then now, drop = stack_now(ARGV[2])
    else
      -- stack_now on Redis time, inlined.
      MIN_TTL, REDIS_TIME, drop = 0, true, false
      now = time_now()
    end
    return decide_one(run, KEYS[1], now, redis.pcall('GET', KEYS[1]), drop)
  end

  -- Every shape first: a key that a later stack names again is hot (kept in CACHE) from its
  -- first read on. So each key of the call is read from Redis once, before anything is
  -- written, and one MGET reads them all.
  local hot = false
  local h = plan.hot
  for i = 1, #h do
    HOT[KEYS[h[i]]] = true
    hot = true
    HAD_HOT = true
  end
  VALS = vals0 or call('MGET', unpack(KEYS))
  -- The reply's fields so far; the last new key used.
  local k = 0
  local nextKey = 0
  -- The index of the last time read from ARGV.
  local ti = 1
  local runs = plan.runs
  for ri = 1, #runs do
    local run = runs[ri]
    local given = nil
    if run.timed then
      ti = ti + 1
      given = ARGV[ti]
    end
    local now, drop = stack_now(given)
    local consume = run.consume
    local sh = run.sh
    local rules, costs, refs, n, count = run.rules, sh.costs, sh.refs, sh.n, run.count
    if run.settle then
      -- A settle in the batch (one stack a run): its ops given back or charged, in its
      -- place among the stacks; its reply is allowed and now, no op fields.
      ti = ti + 1
      local at = tonumber(ARGV[ti])
      for i = 1, n do
        local idx = refs[i]
        if idx == 0 then
          nextKey = nextKey + 1
          idx = nextKey
        end
        give_back(KEYS[idx], idx, rules[i], costs[i], now, drop, at, true)
      end
      R[k + 1], R[k + 2] = 1, now
      k = k + 2
      count = 0
    end
    -- Stacks of one op (a one-rule limiter's batch) go through single, without the
    -- per-op arrays.
    if n == 1 then
      local r, cost, ref = rules[1], costs[1], refs[1]
      for _ = 1, count do
        local idx = ref
        if idx == 0 then
          nextKey = nextKey + 1
          idx = nextKey
        end
        local a, c, rem, reset, last = single(KEYS[idx], idx, r, cost, now, drop, consume, hot)
        R[k + 1], R[k + 2], R[k + 3], R[k + 4], R[k + 5], R[k + 6] = a, now, c, rem, reset, last
        k = k + 6
      end
      count = 0
    end
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
        local e = nil
        if hot then e = CACHE[key] end
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
        -- Each op's outcome is kept for the write pass below (see single for one op).
        OK[i], WS[i], WB[i], X0[i], XS[i], S0[i] = ok, nx, wb, x0, xs or false, s
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
        -- delay, and the resetMs of the state it read (a check of cost 0), as core's untouched.
        for i = 1, n do
          if OK[i] then
            local p = base + 4 * i - 2
            local r = rules[i]
            local _, _, reset0 = r.alg.check(S0[i], now, r, 0)
            R[p + 2] = R[p + 2] + costs[i]
            R[p + 3] = reset0
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
  if hot then flush() end
  -- Packed in chunks: unpack() puts every value on the Lua stack.
  if k == 6 then return pack('<dddddd', R[1], R[2], R[3], R[4], R[5], R[6]) end
  return pack_list(R, k)
end
`;
