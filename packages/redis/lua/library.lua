-- The function library's functions (FUNCTION LOAD, then FCALL), after init (see
-- src/lua/index.ts). Their names, STORE_FN, SLOTS_FN and KEYS_FN here, carry a hash of the
-- library's source and are set by index.ts (function names are global in Redis, so two
-- versions of the application on one server each call their own). ALL, every algorithm's
-- code, precedes this file (index.ts derives it from core's registry).
-- The common calls' closures (one.lua) are looked up here, one Lua call fewer.
local store, FAST, keyop = nil, nil, nil
redis.register_function('STORE_FN', function(keys, args)
  if store == nil then store, FAST, keyop = init(ALL, true) end
  local f = FAST[args[1]]
  if f then return f(keys, args) end
  return store(keys, args)
end)
redis.register_function('SLOTS_FN', function(KEYS, ARGV)
  --#include slots.lua
end)
redis.register_function('KEYS_FN', function(keys, args)
  if keyop == nil then store, FAST, keyop = init(ALL, true) end
  return keyop(keys, args)
end)
