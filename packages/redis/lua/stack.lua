-- The stack decision and the call's entry point, store(KEYS, ARGV), which the
-- assembly returns (see src/lua/index.ts). Runs after the algorithm sections.

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
  if e ~= nil then s, b, x0 = e.s, e.b, e.x
  else
    local v = VALS[idx]
    -- decode (prelude.lua), inlined. Only a value of m fields that an entry of this rule can
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
      e = { s = s, b = b, x = x0 }
      CACHE[key] = e
    end
  end
  if b == nil then return nil, nil end
  if drop then
    -- Past its expiry under r and past the one it was written for (x0): a token bucket read
    -- under a burst lowered since is full now, yet its tokens decide again if the burst
    -- rises before it refills (MemoryStore keeps its row until then too).
    if expires_at(s, b, r) <= now and not (x0 and x0 > now) then
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
    -- The expiry it is written for, as a later read in this call sees it (see read).
    e.x = expires_at(s, b, r)
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
  -- x is recorded on either clock (what read compares on supplied time); only a write on
  -- Redis time compares it with x0 for KEEPTTL (read returns x0 on Redis time only).
  local xk = x
  -- encode (prelude.lua), inlined for up to 30 fields.
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
        set_expiring(key, encode(s, b, x), x, now, e.min, false)
      end
    elseif e.gone then call('DEL', key) end
  end
end

-- A refusal of one rule: cost above maxCost, a block, a refusal that is written
-- (countRejected) or starts a block. ran: the algorithm's check already ran and refused,
-- with the figures given (a refusal computes each rule's check once); else it runs here
-- (under a block, for its retry time). Returns the outcome as values (allowed, remaining,
-- resetMs, retryAfterMs, delayMs, reason), then whether to write and what (state, block
-- deadline) if committed. See inline/op-check.lua, which handles the admitted case itself.
local function check_rule(s, b, now, r, cost, ran, remaining, reset, retry, nx)
  if cost > r.maxCost then return false, 0, 0, 0, 0, 'c', false end
  local ok, delay = false, 0
  if not ran then ok, remaining, reset, retry, delay, nx = r.alg.check(s, now, r, cost) end
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
  --#include inline/op-check.lua
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
-- straight-through closures (one.lua) hand it a call with its time and values already read.
local store_rest
