-- ALG.t.check of cost 1 on a value v as GET or MGET replied, its expiry as ALG.t.expires
-- (see one.lua): BAIL() where the value is not a plain entry of
-- the rule or holds a block in force, REFUSED() where the kernel refuses.
local last, s2, x0
if v == false then
elseif #v == 32 then
  local b, x
  b, x, last, s2 = unpack_bin('<dddd', v)
  if not (b * b + last * last + s2 * s2 <= SANE2) or b > now then BAIL() end
  x0 = x
else BAIL() end
--#include inline/token-bucket-kernel.lua
local nv, xn = nil, nil
if consume then
  xn = tn + up
  if 0 > xn then xn = 0 end
  nv = pack('<dddd', 0, xn, tn, left)
end
