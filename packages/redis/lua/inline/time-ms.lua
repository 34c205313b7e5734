-- Redis' TIME in ms into a new local `now` (included where it is read: a Lua call costs
-- about a dozen arithmetic operations). The seconds' text changes once a second, so its
-- number is kept (last_s, last_ms) rather than parsed again; the microseconds' digits but
-- the last three are read with byte() (strtod, tonumber's, costs more).
local t = call('TIME')
local ts, us = t[1], t[2]
if ts ~= last_s then last_s, last_ms = ts, tonumber(ts) * 1000 end
local ms, n = 0, #us
if n > 3 then
  local d1, d2, d3 = byte(us, 1, n - 3)
  ms = d1 - 48
  if d2 ~= nil then
    ms = ms * 10 + d2 - 48
    if d3 ~= nil then ms = ms * 10 + d3 - 48 end
  end
end
local now = last_ms + ms
