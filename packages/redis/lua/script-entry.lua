-- The store as one Lua script (EVALSHA): which algorithms the call's rules use (the first
-- flag of each rule line of its plan) and whether one counts months, so that init builds
-- only those; then the call. Follows init (see src/lua/index.ts).
local NEED, NEED_MONTH = {}, false
local nr, j = nil, 0
for line in string.gmatch(ARGV[1], '[^\n]+') do
  if nr == nil then nr = tonumber(string.match(line, '(%d+)$'))
  elseif j < nr then
    j = j + 1
    NEED[string.sub(line, 1, 1)] = true
    if string.byte(line, 4) == 109 then NEED_MONTH = true end
  else break end
end
return (init(NEED, NEED_MONTH))(KEYS, ARGV)
