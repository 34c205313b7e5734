-- ALG.f.check of cost 1 (not first-request, not calendar) on a value v as GET or MGET
-- replied (see one.lua): BAIL() where the value is not a plain entry of
-- the rule or holds a block in force, REFUSED() where the kernel refuses.
local start
if WI then start = now - now % W else start = now - fmod(now, W) end
-- An absent key reads as NONE_F (one.lua), so that one unpack declares the state.
if v ~= false and #v ~= 32 then BAIL() end
local b, x0, s0, c = unpack_bin('<dddd', v or NONE_F)
if not (b * b + s0 * s0 + c * c <= SANE2) or c < 0 or b > now then BAIL() end
local count = 0
-- A stored window later than now means time went backwards: stay in it. A window with
-- nothing counted is no state (its expiry is 0), as the general path and MemoryStore read it.
if s0 >= start and c > 0 then start = s0; count = c end
local e = start + W
--#include inline/fixed-window-kernel.lua cost = 1
local xn = e
local nv = nil
if consume then nv = pack('<dddd', 0, xn, start, used) end
