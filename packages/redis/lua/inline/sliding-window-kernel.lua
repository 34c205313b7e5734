-- The sliding-window counter's admission, shared by ALG.w.check and the cost-1 closures
-- (one.lua), which include it. In: now (the caller's reading), start (the window of now),
-- the state s0, p, c (none: s0 NO_EXPIRY, -inf, which no window matches), W, L, cost and room = (L - cost + 1) * W. Out: start, prev, after (the new state),
-- rem, reset, xn (the new state's expiry); REFUSED() where the request does not fit.
local t, prev, cur = now, 0, 0
if s0 >= start then
  -- Same window, or time went backwards: decide at the stored window's start at the
  -- earliest, report resetMs (and retryAfterMs) from the caller's reading now.
  start = s0
  if s0 > now then t = s0 end
  prev = p
  cur = c
elseif s0 == start - W then prev = c end
local e = t - start
local scaled = prev * (W - e) + cur * W
if not (scaled < room) then REFUSED() end
local after = cur + cost
-- resetMs: until a request of cost L would pass (room 1), as in the core; sw_retry_at's
-- last case inline when after >= 1 (floor(q) as q - q % 1: exact for a finite q, no C call).
local reset = 0
if after >= 1 then
  local q = (W * (after - 1)) / after
  reset = start + W + (q - q % 1) + 1 - now
elseif prev * (W - e) + after * W >= W then reset = ALG.w.retry_at(start, prev, after, W, 1) - now end
local q = scaled / W
local rem = L - (q - q % 1) - cost
if rem < 0 then rem = 0 end
local xn = start + W
if after > 0 then xn = start + 2 * W end
