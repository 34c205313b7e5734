-- The token bucket's level at now (the caller's reading): tn, scaled, from the state last, s2
-- (last nil: none), L and cap (B * W). Included by the kernel and tb_level.
local tn, scaled = now, cap
if last ~= nil then
  if now <= last then
    -- A clock behind the stored time is no time passing; a bucket fuller than a burst
    -- lowered since holds only the new burst.
    tn, scaled = last, s2
    if cap < s2 then scaled = cap end
  else
    local gained = L * (now - last)
    scaled = s2
    if gained >= cap - scaled then scaled = cap else scaled = scaled + gained end
  end
end
