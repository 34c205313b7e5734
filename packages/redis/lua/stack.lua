-- The stack decision: every decide call (a lone op, a stack, a batch of stacks; any cost,
-- Redis or supplied time, every algorithm, blockFor, countRejected, dryRun) is decided by
-- its plan's closure (stack_of, below), on the entries read here and written here. Runs
-- after the algorithm sections and the op closures (ops.lua).

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
      if not (y <= SANE2) or (r.counts and negative_count(s, r.counts)) then b, s, x0 = nil, nil, nil end
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

-- A refusal of one rule, past its check: cost above maxCost; a block in force (b), under
-- which the check runs here, without countRejected since nothing is written; else the
-- refusal the check gave (its figures and nx, the state a counted refusal writes), and a
-- block it starts. The check is not run again: a counted refusal's figures are its own.
-- Returns the outcome as values (allowed, remaining, resetMs, retryAfterMs, delayMs,
-- reason), then whether to write and what (state, block deadline) if committed.
local function check_rule(s, b, now, r, cost, remaining, reset, retry, nx)
  if cost > r.maxCost then return false, 0, 0, 0, 0, 'c', false end
  local blockedUntil = b or 0
  if blockedUntil > now then
    local ok
    ok, remaining, reset, retry = r.alg.check(s, now, uncounted(r), cost)
    local wait = blockedUntil - now
    local rt = wait
    if not ok then rt = max(wait, retry) end
    return false, 0, max(reset, wait), rt, 0, 'b', false
  end
  local has = nx ~= nil
  local ws, wb = nx, 0
  if r.block > 0 then
    if ws == nil then ws = s end
    wb = now + r.block
    has = true
    retry = max(retry, r.block)
    reset = max(reset, r.block)
    remaining = 0
  end
  return false, remaining, reset, retry, 0, 'l', has, ws, wb
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

-- Whether the previous call had hot keys.
local HAD_HOT = false

-- A call's state reset, as every call starts (a function library keeps it from call to
-- call): its keys and arguments, least TTL on supplied time, Redis' TIME when already read.
local function begin_call(keys, argv, minTtl, now)
  KEYS, ARGV = keys, argv
  MIN_TTL_SUPPLIED = minTtl
  redis_now = now
  if HAD_HOT then
    HOT, CACHE = {}, {}
    HAD_HOT = false
  end
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

-- Writes an admitted entry v, packed, on Redis time (block 0), with the expiry x (as
-- write() does; at: x is a window's end, set as the instant).
local function write_packed(key, v, x, now, at)
  if x <= now then call('DEL', key); return end
  set_expiring(key, v, x, now, 0, at)
end

-- Gives back (refund) or settles one op under key (KEYS[idx]) decided at time at. A
-- settle's cost c is the actual cost less the estimate: above zero a charge (core's
-- settleEntry: the algorithm's charge, the state after charging c without refusing), below
-- zero a refund of the difference.
local function give_back(key, idx, r, c, now, drop, at, settle)
  local s, b = read(key, r, now, drop, idx)
  if settle and c > 0 then
    write(key, r.alg.charge(s, now, r, c), b or 0, r, now)
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

-- Per op of the stack being decided (op i; arrays reused by every stack and call): the
-- index of its key in KEYS, and what it writes when committed. Admitted by its op
-- closure: NV its entry packed (nil for a peek), NX its expiry, N0 the one read, NA whether
-- it is a window's end. Else NV is false, and WB the block deadline (false: nothing), WS
-- the state, X0 the expiry its key's TTL was set for (see read), XS the state's expiry;
-- S0 the state it read.
local KIDX, NV, NX, N0, NA, WB, WS, X0, XS, S0 = {}, {}, {}, {}, {}, {}, {}, {}, {}, {}
-- The same of each op a call run straight through admitted (op j of the call; see stack_of).
local SNV, SNX, SN0, SNA = {}, {}, {}, {}
-- The reply, gathered while deciding: OUT holds now, then remaining and resetMs per op of
-- the call (op j at 2j and 2j + 1); an op that is not a plain admission (refused, or
-- admitted with a delay) also has its reply code and last field (retryAfterMs or delayMs)
-- in CODE and LAST, a refused stack a mark in STACK_REFUSED (by stack), each run its time
-- in NOWS. CODE and STACK_REFUSED are cleared with false, not nil: a slot set to nil and
-- set again after a garbage collection step is a new key, and a table of a few hundred
-- such slots is rebuilt again and again.
local OUT, CODE, LAST, STACK_REFUSED, NOWS = {}, {}, {}, {}, {}
-- Whether a call left them unfinished (an error in a command stops a script midway).
local UNFINISHED = false
-- The read of a call with one key: VALS as read() takes it, reused.
local ONE_VAL = {}
-- The general reply, built from the above (long_reply).
local R = {}

-- The reply of a call with a refusal, a delay or supplied time: per stack allowed (1/0)
-- and now, then per op OUT_FIELDS (see src/lua/index.ts): 1 or the refusal's reason code,
-- remaining, resetMs, then the delay or the retry time. A settle in the batch replies
-- allowed and now alone. Clears CODE and STACK_REFUSED for the next call.
local function long_reply(runs)
  local k, j, st = 0, 0, 0
  for ri = 1, #runs do
    local run = runs[ri]
    local now = NOWS[ri]
    if run.settle then
      R[k + 1], R[k + 2] = 1, now
      k = k + 2
    else
      local n = run.sh.n
      for _ = 1, run.count do
        st = st + 1
        local a = 1
        if STACK_REFUSED[st] then a, STACK_REFUSED[st] = 0, false end
        R[k + 1], R[k + 2] = a, now
        k = k + 2
        for _ = 1, n do
          j = j + 1
          local code, last = CODE[j], 0
          if not code then code = 1 else last, CODE[j] = LAST[j], false end
          R[k + 1], R[k + 2], R[k + 3], R[k + 4] = code, OUT[2 * j], OUT[2 * j + 1], last
          k = k + 4
        end
      end
    end
  end
  if k == 6 then return pack('<dddddd', R[1], R[2], R[3], R[4], R[5], R[6]) end
  return pack_list(R, k)
end

-- A call whose ops all have op closures (on Redis time, no key named twice, no settle) is
-- run straight through: its op closures one after the other (flat, by op of the call), no
-- stack machinery (general, the stack loop, which begins each call by resetting its state),
-- and when all admit, their writes. At the first op that does not, general takes over with
-- the outcomes so far: nothing is decided again.
local function straight_of(general, flat, K, RF)
  local nflat = #flat
  -- No key is hot here, so the hot keys' cache is neither read nor reset: every path that
  -- reads it (general, begin_call's callers) resets it first, as one.lua's closures rely on.
  return function(keys, argv, now0, vals0)
    -- Several keys (a lone op is one.lua's closure), so MGET.
    local vals = vals0 or call('MGET', unpack(keys))
    if now0 == nil then
      --#include inline/time-ms.lua
      now0 = now
    end
    local now = now0
    for k = 1, nflat do
      local a, v2, v3, v4, v5, v6, v7 = flat[k](vals[k], now)
      if not a then return general(keys, argv, now, vals, k, a, v2, v3, v4, v5, v6, v7) end
      OUT[2 * k], OUT[2 * k + 1], SNV[k], SNX[k], SN0[k], SNA[k] = v2, v3, v4, v5, v6, v7
    end
    for k = 1, nflat do
      local nv = SNV[k]
      if nv then
        -- x0 and at read where the write needs them (at: a fixed window's writes alone).
        local key, xn = keys[k], SNX[k]
        --#include inline/write-admitted.lua x0 = SN0[k]; at = SNA[k]
        SNV[k] = nil
      end
    end
    OUT[1] = now
    if RF then return pack(RF, unpack(OUT, 1, K)) end
    return pack_list(OUT, K)
  end
end

-- The closure that decides the calls of a decide plan (kept with it, see plan_stack):
-- called with the call's keys and arguments, and Redis' TIME and the values of its keys
-- when they were already read (now0, vals0). Stacks are decided one after the other, each
-- all-or-nothing, as if they had arrived in that order, and each stack's writes are made
-- before the next is decided. Each op is checked once: by its rule's op closure (ops.lua)
-- where it has one and its value is a plain entry, else by its algorithm's check; a
-- refusal is answered from that check (check_rule). A call on Redis time whose ops are all
-- admitted with no delay replies now, then remaining and resetMs per op (parseDecisions in
-- args.ts reads a reply of that length so), else long_reply.
local function stack_of(plan)
  local runs, hotRefs = plan.runs, plan.hot
  local nrun = #runs
  -- Per run, each op's closure (false: the general check): ops of cost 1 on Redis time, in
  -- a call that names no key twice (an op closure reads the value MGET replied).
  local DS = {}
  -- Whether the call is on Redis time throughout (one now: the short reply is possible),
  -- and the short reply's length in doubles.
  local onRedisTime, K = true, 1
  for ri = 1, nrun do
    local run = runs[ri]
    local sh = run.sh
    local ds = {}
    if run.timed then onRedisTime = false end
    for i = 1, sh.n do
      ds[i] = #hotRefs == 0 and not run.timed and not run.settle and sh.costs[i] == 1 and op_of(run.rules[i], run.consume)
    end
    DS[ri] = ds
    if not run.settle then K = K + 2 * sh.n * run.count end
  end
  local RF = false
  if K <= 128 then RF = fmt_of(K) end
  -- The op closures of a call run straight through (see straight_of), by op of the call.
  local FLAT = #hotRefs == 0 and not plan.settles and onRedisTime and {}
  if FLAT then
    for ri = 1, nrun do
      local ds = DS[ri]
      for _ = 1, runs[ri].count do
        for i = 1, #ds do
          if not ds[i] then FLAT = false; break end
          FLAT[#FLAT + 1] = ds[i]
        end
        if not FLAT then break end
      end
      if not FLAT then break end
    end
  end
  local general = function(keys, argv, now0, vals0, pre, pa, p2, p3, p4, p5, p6, p7)
    -- begin_call, inlined (a Lua call costs about a dozen arithmetic operations).
    KEYS, ARGV = keys, argv
    MIN_TTL_SUPPLIED = plan.minTtl
    redis_now = now0
    if HAD_HOT then
      HOT, CACHE = {}, {}
      HAD_HOT = false
    end
    -- Keys that a later stack names again are hot (kept in CACHE) from their first read on.
    -- So each key of the call is read from Redis once, before anything is written.
    local hot = false
    for i = 1, #hotRefs do
      HOT[keys[hotRefs[i]]] = true
      hot = true
      HAD_HOT = true
    end
    -- A call with settles gives back once: its last key is its mark, the last argument the
    -- mark's lifetime (see finish in src/args.ts); when the mark is already there (the client
    -- re-sent a call Redis ran), its stacks are decided again and its settles skipped.
    local nk, give = nil, true
    if plan.settles then
      nk = #keys - 1
      give = call('SET', keys[nk + 1], '1', 'NX', 'PX', argv[#argv])
    end
    if vals0 then VALS = vals0
    elseif nk then VALS = call('MGET', unpack(keys, 1, nk))
    elseif keys[2] == nil then
      -- One key: GET costs Redis less than MGET. A key of another type (a hash, a list),
      -- which GET refuses, reads as absent, as with MGET.
      local v = pcall_('GET', keys[1])
      if type(v) ~= 'string' then v = false end
      ONE_VAL[1] = v
      VALS = ONE_VAL
    else VALS = call('MGET', unpack(keys)) end
    if UNFINISHED then
      for k in pairs(CODE) do CODE[k] = false end
      for k in pairs(STACK_REFUSED) do STACK_REFUSED[k] = false end
    end
    UNFINISHED = true
    -- The op the straight run stopped at (0: none) and its op closure's values.
    pre = pre or 0
    -- Every op so far a plain admission (the short reply).
    local plain = onRedisTime
    -- Ops, stacks and new keys so far; the index of the last time read from ARGV.
    local j, st, nextKey, ti = 0, 0, 0, 1
    local now, drop
    for ri = 1, nrun do
      local run = runs[ri]
      if run.timed then
        ti = ti + 1
        now, drop = stack_now(argv[ti])
      else
        -- stack_now on Redis time, inlined.
        MIN_TTL, REDIS_TIME, drop = 0, true, false
        if redis_now == nil then
          --#include inline/time-ms.lua
          redis_now = now
        end
        now = redis_now
      end
      NOWS[ri] = now
      local ds, sh = DS[ri], run.sh
      local rules, costs, refs, n, count = run.rules, sh.costs, sh.refs, sh.n, run.count
      if run.settle then
        -- A settle in the batch (one stack a run): its ops given back or charged, in its
        -- place among the stacks.
        ti = ti + 1
        local at = tonumber(argv[ti])
        for i = 1, n do
          local idx = refs[i]
          if idx == 0 then
            nextKey = nextKey + 1
            idx = nextKey
          end
          if give then give_back(keys[idx], idx, rules[i], costs[i], now, drop, at, true) end
        end
        count = 0
      end
      local consume = run.consume
      for _ = 1, count do
        st = st + 1
        local allowed = true
        local j0 = j
        for i = 1, n do
          local idx = refs[i]
          if idx == 0 then
            nextKey = nextKey + 1
            idx = nextKey
          end
          KIDX[i] = idx
          j = j + 1
          local d = ds[i]
          local a, v2, v3, v4, v5, v6, v7
          if j < pre then
            a, v2, v3, v4, v5, v6, v7 = true, OUT[2 * j], OUT[2 * j + 1], SNV[j], SNX[j], SN0[j], SNA[j]
            SNV[j] = nil
          elseif j == pre then a, v2, v3, v4, v5, v6, v7 = pa, p2, p3, p4, p5, p6, p7
          elseif d then a, v2, v3, v4, v5, v6, v7 = d(VALS[idx], now) end
          if a then
            NV[i], NX[i], N0[i], NA[i] = v4, v5, v6, v7
            OUT[2 * j], OUT[2 * j + 1] = v2, v3
          else
            local r, cost, key = rules[i], costs[i], keys[idx]
            local ok, rem, reset, retry, delay, nx, reason, wb, xs, s, b, x0
            if a == false then
              -- Refused by its op closure's kernel, whose figures check_rule finishes.
              rem, reset, retry, nx, s, x0 = v2, v3, v4, v5, v6, v7
            else
              -- The general check: the entry read (a hot key's from CACHE), checked once.
              local e = nil
              if hot then e = CACHE[key] end
              if e ~= nil and not drop then s, b = e.s, e.b
              else s, b, x0 = read(key, r, now, drop, idx) end
              if cost <= r.maxCost and (b == nil or b <= now) then
                ok, rem, reset, retry, delay, nx, xs = r.alg.check(s, now, r, cost)
                if ok then
                  wb = false
                  if nx ~= nil then wb = 0 end
                end
              end
            end
            if not ok then
              local has
              ok, rem, reset, retry, delay, reason, has, nx, wb = check_rule(s, b, now, r, cost, rem, reset, retry, nx)
              xs = nil
              if not has then wb = false end
              if not r.dry then allowed = false end
            end
            NV[i], WB[i], WS[i], X0[i], XS[i], S0[i] = false, wb, nx, x0, xs or false, s
            OUT[2 * j], OUT[2 * j + 1] = rem, reset
            if not ok then
              -- The refusal's reason code: 2 limit, 3 blocked, 4 cost above maxCost.
              local c = 4
              if reason == 'l' then c = 2 elseif reason == 'b' then c = 3 end
              CODE[j], LAST[j] = c, retry
              plain = false
            elseif delay ~= 0 then
              CODE[j], LAST[j] = 1, delay
              plain = false
            end
          end
        end
        if not allowed then
          STACK_REFUSED[st] = true
          -- An admitting rule of a refused stack consumed nothing: report it untouched, with
          -- no delay, and the resetMs of the state it read (a check of cost 0), as core's.
          for i = 1, n do
            local jj = j0 + i
            local code = CODE[jj]
            if not code or code == 1 then
              local r = rules[i]
              local s0 = S0[i]
              if NV[i] ~= false then s0 = read(keys[KIDX[i]], r, now, drop, KIDX[i]) end
              local _, _, reset0 = r.alg.check(s0, now, r, 0)
              OUT[2 * jj] = OUT[2 * jj] + costs[i]
              OUT[2 * jj + 1] = reset0
              CODE[jj] = false
            end
          end
        end
        -- The stack's writes: an admitting rule's only when the whole stack is admitted; a
        -- refusing rule's block or penalty either way.
        if consume then
          for i = 1, n do
            local key = keys[KIDX[i]]
            local nv = NV[i]
            if nv then
              if allowed then
                local xn, x0, at = NX[i], N0[i], NA[i]
                --#include inline/write-admitted.lua
              end
              NV[i] = nil
            elseif nv == false then
              local wb = WB[i]
              if wb ~= false and (allowed or CODE[j0 + i]) then write(key, WS[i], wb, rules[i], now, X0[i], XS[i]) end
            end
          end
        end
      end
    end
    if hot then flush() end
    ONE_VAL[1] = nil
    UNFINISHED = false
    if not plain then return long_reply(runs) end
    OUT[1] = now
    if RF then return pack(RF, unpack(OUT, 1, K)) end
    return pack_list(OUT, K)
  end
  if FLAT then return straight_of(general, FLAT, K, RF) end
  return general
end

-- A decide plan's closure (stack_of), kept with the plan.
local function plan_stack(plan)
  local f = plan.stack
  if f == nil then
    f = stack_of(plan)
    plan.stack = f
  end
  return f
end
