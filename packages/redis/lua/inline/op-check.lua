-- One op of a stack on the general path (single, and store_rest's loop for longer stacks):
-- reads the entry under key (KEYS[idx]; a hot key's from CACHE), checks it once, and leaves
-- the outcome in ok, rem, reset, retry, delay, reason, and what the op would write: nx, wb
-- (false: nothing), xs (the state's expiry when its check gave it); s and x0 as read.
local s, b, x0
-- A hot key's entry is read from CACHE here (read() also drops it when expired).
local e = nil
if hot then e = CACHE[key] end
if e ~= nil and not drop then s, b = e.s, e.b
else s, b, x0 = read(key, r, now, drop, idx) end
local ok, rem, reset, retry, delay, nx, reason, wb, xs
local ran = false
if cost <= r.maxCost and (b == nil or b <= now) then
  ran = true
  ok, rem, reset, retry, delay, nx, xs = r.alg.check(s, now, r, cost)
  if ok then
    wb = false
    if nx ~= nil then wb = 0 end
  end
end
if not ok then
  local has
  ok, rem, reset, retry, delay, reason, has, nx, wb = check_rule(s, b, now, r, cost, ran, rem, reset, retry, nx)
  xs = nil
  if not has then wb = false end
end
