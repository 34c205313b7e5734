-- The wire format of the store calls, and the parsing of their plans.
--
-- Every argument is text (see src/args.ts). ARGV[1] is the call's plan, its lines
-- separated by newlines; the further ARGV are the times it names. The plan's first line is
-- the mode, the least TTL for supplied time and the number R of distinct rules the call
-- uses (d 1000 2); then one line per rule (rule number i = 1..R), its 7 values separated
-- by spaces: flags (algorithm, align, mode, calendar, countRejected, dryRun, one character
-- each), L, W, B, Q (a sliding-buckets rule: its blocks per window), blockForMs, maxCost. Then:
-- - d (decide): one line per run of stacks: its count, a space and its shape: a command
--   (c consume, p peek; upper case when the run's now is supplied: the next of
--   ARGV[2], ARGV[3], ...; else Redis TIME) and per op <rule number>:<cost>,
--   comma-separated (1 c1:1,2:1); the consecutive stacks of a batch with the same shape
--   (and time) make one run, so a batch of one limiter's stacks is one or two runs. KEYS
--   holds each distinct key of the call once: an op takes the next key not yet used, or,
--   when a key repeats (a tenant's, a route's or a global rule's key shared by many
--   stacks), names it with @<index> (c1:1,2:1@2); keys named again are the call's hot
--   keys (see read in stack.lua). Stacks are decided one after the other, each
--   all-or-nothing, as if they had arrived in that order; TIME is read once. The reply is
--   one string of little-endian doubles: per stack allowed (1/0) and now, then OUT_FIELDS
--   per op (see OUT_FIELDS in src/lua/index.ts); a call on Redis time whose ops are all
--   admitted with no delay replies now, then remaining and resetMs per op. Doubles are
--   exact and cost Redis and Node less than an array of integer and text replies.
-- - r (refund): one line, the ops' shape (r1:1,2:1); ARGV[2] is now (empty: Redis
--   TIME) and ARGV[3] at; the reply is now.
-- - s (settle): as r, each op's cost the actual cost less the estimate (s1:-3,2:5):
--   below zero a refund of the difference, above zero a charge (core's settleEntry).
--   A settle also rides in a d call as a run of its own (1 s1:-3,2:5; S when its
--   now is supplied), decided in its place among the stacks: its times are the next
--   ARGV (now for S, then at), and its reply is allowed (1) and now, no op fields.
-- - A call that gives back (r, s, or d with a settle) is applied once: its last key is
--   its mark (`<first key> gb <id>`, in the first key's slot, the id the call's own) and
--   its last ARGV the mark's lifetime in ms. It sets the mark (SET NX PX) before giving
--   anything back; when the mark is there already, the client re-sent a call Redis ran
--   (ioredis after a reconnect), and its give-backs are skipped; a d call's stacks are
--   still decided, as its reply is needed.
--
-- A plan names no key and no time, so the calls of one limiter send the same plan again and
-- again: a function library keeps each plan parsed (see plan_of), and a call reads it with
-- one table lookup. Redis also pays per argument, hence one.
--
-- Every key written gets its expiry in the same command (SET ... PXAT for a window's end
-- on Redis time, else SET ... PX; see set_expiring), entryExpiresAt, so no key is ever
-- left without expiry. An entry whose expiry has passed is read as absent, exactly as
-- MemoryStore does (see read in stack.lua).
--
-- The call's state and the parsing helpers: defined once (per library load, or per EVAL),
-- their state reset by each call (see store in entry.lua).

local sub, byte, match, gmatch = string.sub, string.byte, string.match, string.gmatch
local call = redis.call

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
  if redis_now == nil then
    --#include inline/time-ms.lua
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

-- The 7 fields of a rule's text (see parse.lua), parsed into its table.
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
  -- 49 '1' (countRejected, dryRun). An algorithm whose state reads otherwise in queue mode
  -- has an entry for that mode (its queue).
  local alg = ALG[algo]
  if md == 113 and alg.queue then alg = alg.queue end
  -- The fields of an entry of this rule (see read): block, TTL expiry, the state's width (a
  -- state of variable width: 0); and whether the state holds counts, which no value of ours
  -- has below zero (negative_count).
  local m = alg.width
  if m > 0 then m = m + 2 end
  r = {
    algo = algo, first = align == 102, queue = md == 113, month = cal == 109, cr = cr == 49, dry = dry == 49,
    L = L, W = tonumber(W), B = B, Q = Q, block = block, maxCost = maxCost, alg = alg, m = m, counts = alg.count_step,
  }
  if NRULES_CACHED >= CACHED_MAX then RULES, NRULES_CACHED = {}, 0 end
  RULES[text] = r
  NRULES_CACHED = NRULES_CACHED + 1
  return r
end

-- r without countRejected: a check then reports the state as it is (under a block, or a
-- key's figures: nothing is counted), where a counted refusal's figures describe the state
-- it would leave.
local function uncounted(r)
  if not r.cr then return r end
  return with_cr(r, 'uncounted', false)
end

-- A shape's ops: rule numbers, costs, key references (0: the next new key), count, and
-- the references to keys named again (hot keys, see read in stack.lua).
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
  for line in gmatch(text, '[^\n]+') do
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
    -- one.lua decides straight through where it can.
    if #runs == 1 and runs[1].count == 1 and runs[1].sh.n == 1 and not p.settles then p.one = runs[1] end
  end
  if NPLANS >= CACHED_MAX then PLANS, NPLANS = {}, 0 end
  PLANS[text] = p
  NPLANS = NPLANS + 1
  return p
end

-- The call's hot keys.
local HOT = {}
