local start
if WI then start = now - now % W else start = now - fmod(now, W) end
local count, x0 = 0, nil
if v == false then
elseif #v == 32 then
  local b, x, s0, c = unpack_bin('<dddd', v)
  if not (b * b + s0 * s0 + c * c <= SANE2) or c < 0 or b > now then BAIL() end
  x0 = x
  if s0 >= start then start = s0; count = c end
else BAIL() end
local xn = start + W
local used = count + 1
if not (used <= L) then BAIL() end
local reset = 0
if used > 0 then reset = xn - now end
local rem = L - used
local nv = nil
if consume then nv = pack('<dddd', 0, xn, start, used) end
