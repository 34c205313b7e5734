local start
if WI then start = now - now % W else start = now - fmod(now, W) end
local t = now
local prev, cur, x0 = 0, 0, nil
if v == false then
elseif #v == 40 then
  local b, x, s0, p, c = unpack_bin('<ddddd', v)
  -- read()'s checks (SANE2, no negative count), and no block in force.
  if not (b * b + s0 * s0 + p * p + c * c <= SANE2) or p < 0 or c < 0 or b > now then BAIL() end
  x0 = x
  if s0 >= start then
    start = s0
    if s0 > now then t = s0 end
    prev = p
    cur = c
  elseif s0 == start - W then prev = c end
else BAIL() end
local e = t - start
local scaled = prev * (W - e) + cur * W
if not (scaled < room) then BAIL() end
local after = cur + 1
local reset = 0
if prev * (W - e) + after * W >= W then
  local q = (W * (after - 1)) / after
  reset = start + W + (q - q % 1) + 1 - now
end
local q = scaled / W
local rem = L - (q - q % 1) - 1
if rem < 0 then rem = 0 end
local nv, xn = nil, nil
if consume then
  xn = start + W
  if after > 0 then xn = start + W2 end
  nv = pack('<ddddd', 0, xn, start, prev, after)
end
