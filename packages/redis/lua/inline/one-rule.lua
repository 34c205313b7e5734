-- The rule's numbers as the cost-1 closures (one.lua) read them, as upvalues.
local L, W = r.L, r.W
local room, cap, need = (L - 1 + 1) * W, r.B * W, 1 * W
-- A whole window: on Redis time now is a whole number of ms below 2^53, so now % W (a
-- VM operation, no C call) is exactly fmod(now, W).
local WI = W > 0 and W % 1 == 0
