-- Lua mirror of core/src/key-ops.ts: operations on one (rule, key) entry without a
-- request (read, block, unblock, penalize, reward), each one atomic call and one round
-- trip. Assembled in src/lua/index.ts after the prelude, the plan parser and the algorithm
-- sections (it uses their ALG, rule_of, decode, encode), as the library's keys function and
-- as a script of its own.
--
-- KEYS[1] is the entry's Redis key (on a Cluster the call goes to its slot); KEYS[2], with
-- an operation id, the id's mark (in the entry's slot: it holds the entry key's hash tag).
-- ARGV[1] is the rule's 7 fields as the store's plan lists them (args.ts ruleText);
-- ARGV[2] the operation: g (get), b <ms> (block), u (unblock), p <units>
-- (penalize), w <units> (reward); ARGV[3] the time (empty: Redis TIME); ARGV[4] the
-- least TTL, in ms, of a key written on supplied time; ARGV[5] the operation id (empty:
-- none) and ARGV[6] how long its mark lives, in ms: an operation whose mark is already
-- there was applied before (a retry) and only reads. The reply is 6 little-endian
-- doubles: now, whether state exists (1/0), remaining, resetMs, retryAfterMs and the block
-- deadline (0: none), the figures of keyFigures after the operation.
--
-- An entry is read as the store reads it (read in stack.lua): a value of another shape, or
-- holding a number no write of ours could, is absent; one past its expiry is absent.

local call = redis.call

local function ko_expires(s, b, r)
  local x = 0
  if s ~= nil then x = r.alg.expires(s, r) end
  return max(x, b)
end

-- The entry under key: state (nil: none), block deadline and the expiry it was written
-- for; b nil when there is none.
local function ko_read(key, r)
  local v = call('MGET', key)[1]
  if not v then return nil, nil, nil end
  local m = #v / 8
  local w = r.m
  if not (m == w or m == 2 or m == 1 or (w == 0 and m > 2 and m % 2 == 0)) then return nil, nil, nil end
  local s, b, x = decode(v)
  local y = b * b
  if s ~= nil then for i = 1, #s do y = y + s[i] * s[i] end end
  if not (y <= SANE2) or (r.counts and negative_count(s, r.counts)) then return nil, nil, nil end
  return s, b, x
end

-- Up to units of what is left now, never beyond empty (penalized in key-ops.ts).
local function ko_penalize(s, now, r, units)
  local _, rem = r.alg.check(s, now, r, 0)
  local k = min(units, max(0, rem))
  while k > 0 do
    local ok, _, _, _, _, nx = r.alg.check(s, now, r, k)
    if ok then return nx end
    k = k - 1
  end
  return s
end

-- A reward: the algorithm's own where it has one (a window's estimate, a log's entries),
-- else a refund of units at now (rewarded in key-ops.ts).
local function ko_reward(s, now, r, units)
  local reward = r.alg.reward
  if reward then return reward(s, now, r, units) end
  return r.alg.refund(s, now, r, units, now)
end

-- Writes the entry with its TTL (as write in stack.lua), or deletes it when it decides like none.
local function ko_write(key, s, b, r, now, redisTime, minTtl)
  local x = ko_expires(s, b, r)
  if x <= now then call('DEL', key); return end
  local ms = ceil(x - now)
  if not redisTime and ms < minTtl then ms = minTtl end
  call('SET', key, encode(s, b, x), 'PX', ms)
end

local function keyop(KEYS, ARGV)
  -- The rule's fields as the store's plans list them, parsed as theirs are (parse.lua).
  local r = rule_of(ARGV[1])
  local op = string.sub(ARGV[2], 1, 1)
  local amount = tonumber(string.sub(ARGV[2], 3))
  local now, redisTime
  if ARGV[3] ~= nil and ARGV[3] ~= '' then
    now, redisTime = tonumber(ARGV[3]), false
  else
    local t = call('TIME')
    now, redisTime = tonumber(t[1]) * 1000 + floor(tonumber(t[2]) / 1000), true
  end
  local minTtl = tonumber(ARGV[4]) or 0
  local key = KEYS[1]
  local s, b, x0 = ko_read(key, r)
  local present = b ~= nil
  if present and ko_expires(s, b, r) <= now and not (x0 > now) then
    -- Past its expiry, under r and as written (a token bucket under a burst lowered since:
    -- see read in stack.lua): absent, and on supplied time deleted (as MemoryStore drops
    -- it), so that a clock stepping back later does not bring it back.
    if not redisTime then call('DEL', key) end
    s, b, present = nil, nil, false
  end
  if b == nil then b = 0 end
  -- An id applied before (a retried call): nothing changes, the figures are read.
  local id = ARGV[5]
  if op ~= 'g' and id ~= nil and id ~= '' then
    if redisTime then
      if not call('SET', KEYS[2], '1', 'NX', 'PX', ARGV[6]) then op = 'g' end
    else
      -- On supplied time the mark holds its end on that clock (Redis' TTL runs on its own,
      -- as MemoryStore's marks run on the supplied one); '1' is a mark made on Redis time.
      local v = call('GET', KEYS[2])
      local u = nil
      if v then u = tonumber(v) end
      if v == '1' or (u ~= nil and u > now) then op = 'g'
      else call('SET', KEYS[2], string.format('%.17g', now + tonumber(ARGV[6])), 'PX', ARGV[6]) end
    end
  end
  if op == 'b' then
    b = max(b, now + amount)
    present = true
  elseif op == 'u' then
    b = 0
    if s == nil then present = false end
  elseif op == 'p' then
    s = ko_penalize(s, now, r, amount)
    present = not (s == nil and b == 0)
  elseif op == 'w' then
    if s ~= nil then
      s = ko_reward(s, now, r, amount)
      present = not (s == nil and b == 0)
    end
  end
  if op ~= 'g' then
    if present then ko_write(key, s, b, r, now, redisTime, minTtl) else call('DEL', key) end
  end
  -- The figures after the operation (keyFigures in key-ops.ts).
  local q = uncounted(r)
  local ok1, _, _, retry1 = r.alg.check(s, now, q, 1)
  local _, rem0, reset0 = r.alg.check(s, now, q, 0)
  local blocked = 0
  if present and b > now then blocked = b end
  local retry = 0
  if not ok1 then retry = retry1 end
  local exists = 0
  if present and ko_expires(s, b, r) > now then exists = 1 end
  local remaining, reset = max(0, rem0), max(reset0, 0)
  if blocked > 0 then
    remaining = 0
    reset = max(reset0, blocked - now)
    retry = max(blocked - now, retry)
  end
  return pack('<dddddd', now, exists, remaining, reset, retry, blocked)
end
