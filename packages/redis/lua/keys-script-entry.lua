-- The operations by key as one Lua script (EVALSHA): only the rule's algorithm is built.
-- Follows init_keys (see src/lua/index.ts).
local NEED = { [string.sub(ARGV[1], 1, 1)] = true }
return init_keys(NEED, string.byte(ARGV[1], 4) == 109)(KEYS, ARGV)
