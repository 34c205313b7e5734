-- The token bucket's admission, shared by ALG.t.check and the cost-1 closures (one.lua),
-- which include it. In: now (the caller's reading), the state last, s2 (last nil: none),
-- L, W, cap (B * W), need (cost * W). Out: tn, left (the new state), up (ms until full again), rem,
-- reset; REFUSED() where the request does not fit.
--#include inline/token-bucket-level.lua
if not (scaled >= need) then REFUSED() end
local left = scaled - need
-- ceil((cap - left) / L) as -floor(-q), and floor(q) as q - q % 1 (exact for a finite
-- q; no C call).
local q = -((cap - left) / L)
local up = -(q - q % 1)
local reset = 0
if left < cap then reset = up + (tn - now) end
q = left / W
local rem = q - q % 1
