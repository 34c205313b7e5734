-- The script behind acquire, renew and count. KEYS[1] slot key; ARGV op, id, max, lease, now.

local key = KEYS[1]
local op, id = ARGV[1], ARGV[2]
local max, lease = tonumber(ARGV[3]), tonumber(ARGV[4])
local now = tonumber(ARGV[5])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- A key of another type was not written here: forgotten, or every call fails on it and the
-- failing store lets every request through, for good (it may have no TTL).
local kind = redis.call('TYPE', key)
if type(kind) == 'table' then kind = kind.ok end
if kind ~= 'zset' and kind ~= 'none' then redis.call('DEL', key) end
-- A lease whose expiry has come is gone.
redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
local function keep_ttl()
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if last[2] then redis.call('PEXPIRE', key, math.max(1, math.ceil(tonumber(last[2]) - now))) end
end
if op == 'acquire' then
  local n = redis.call('ZCARD', key)
  if redis.call('ZSCORE', key, id) then return {1, n} end
  if n >= max then return {0, n} end
  redis.call('ZADD', key, now + lease, id)
  keep_ttl()
  return {1, n + 1}
elseif op == 'renew' then
  if not redis.call('ZSCORE', key, id) then return {0, redis.call('ZCARD', key)} end
  redis.call('ZADD', key, 'XX', now + lease, id)
  keep_ttl()
  return {1, redis.call('ZCARD', key)}
end
return {0, redis.call('ZCARD', key)}
