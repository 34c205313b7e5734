-- ALG.f.check of cost 1 (not first-request, not calendar) on a value v as GET or MGET
-- replied (see one.lua).
local start
if WI then start = now - now % W else start = now - fmod(now, W) end
local count, x0 = 0, nil
if v == false then
elseif #v == 32 then
  local b, x, s0, c = unpack_bin('<dddd', v)
  if not (b * b + s0 * s0 + c * c <= SANE2) or c < 0 or b > now then BAIL() end
  x0 = x
  -- A stored window later than now means time went backwards: stay in it.
  if s0 >= start then start = s0; count = c end
else BAIL() end
local e = start + W
--#include inline/fixed-window-kernel.lua REFUSED() = BAIL(); cost = 1
local xn = e
local nv = nil
if consume then nv = pack('<dddd', 0, xn, start, used) end
