-- ALG.w.check of cost 1 on a value v as GET or MGET replied (see one.lua): BAIL() where the value is not a plain entry of
-- the rule or holds a block in force, REFUSED() where the kernel refuses.
local start
if WI then start = now - now % W else start = now - fmod(now, W) end
-- An absent key reads as NONE_W (one.lua), so that one unpack declares the state.
if v ~= false and #v ~= 40 then BAIL() end
local b, x0, s0, p, c = unpack_bin('<ddddd', v or NONE_W)
-- read()'s checks (SANE2, no negative count), and no block in force.
if not (b * b + s0 * s0 + p * p + c * c <= SANE2) or p < 0 or c < 0 or b > now then BAIL() end
--#include inline/sliding-window-kernel.lua cost = 1
local nv = nil
if consume then nv = pack('<ddddd', 0, xn, start, prev, after) end
