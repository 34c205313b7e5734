local tn, scaled, x0 = now, cap, nil
if v == false then
elseif #v == 32 then
  local b, x, last, s2 = unpack_bin('<dddd', v)
  if not (b * b + last * last + s2 * s2 <= SANE2) or b > now then BAIL() end
  x0 = x
  if now <= last then
    tn, scaled = last, s2
    if cap < s2 then scaled = cap end
  else
    local gained = L * (now - last)
    scaled = s2
    if gained >= cap - scaled then scaled = cap else scaled = scaled + gained end
  end
else BAIL() end
if not (scaled >= need) then BAIL() end
local left = scaled - need
-- ceil((cap - left) / L) as -floor(-q), and floor(q) as q - q % 1 (exact for a finite
-- q; no C call).
local q = -((cap - left) / L)
local up = -(q - q % 1)
local reset = 0
if left < cap then reset = up + (tn - now) end
q = left / W
local rem = q - q % 1
local nv, xn = nil, nil
if consume then
  xn = tn + up
  if 0 > xn then xn = 0 end
  nv = pack('<dddd', 0, xn, tn, left)
end
