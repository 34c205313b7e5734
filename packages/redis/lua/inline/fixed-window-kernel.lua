-- The fixed window's admission, shared by ALG.f.check and the cost-1 closures (one.lua),
-- which include it. In: now (the caller's reading), the window's count and end e, L, cost.
-- Out: used (the new count), rem, reset; REFUSED() where the request does not fit.
local used = count + cost
if not (used <= L) then REFUSED() end
local reset = 0
if used > 0 then reset = e - now end
local rem = L - used
