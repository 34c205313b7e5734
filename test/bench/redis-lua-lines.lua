-- Counts the Lua virtual machine's instructions per line of the store's function library
-- for recorded FCALLs (see redis-lua-lines.mjs): lua5.1 redis-lua-lines.lua LIBRARY CALLS TOP.
-- The calls run twice, the first time to build the plans and closures and write every entry;
-- the second is counted. Only lines of the library are counted, not the stand-ins below.
local library_file, calls_file, top_n = arg[1], arg[2], tonumber(arg[3]) or 40

-- struct.pack/unpack of little-endian doubles ('<' then k 'd's), stood in for: each double
-- is an 8-character token naming its value, so entries keep their lengths and offsets
-- (SETRANGE at 0, reads at 8-byte steps) as Redis' struct library gives them.
local values, nvalues = {}, 0
struct = {
  pack = function(fmt, ...)
    local a, parts = { ... }, {}
    for i = 1, #fmt - 1 do
      nvalues = nvalues + 1
      values[nvalues] = a[i]
      parts[i] = string.format('%08d', nvalues)
    end
    return table.concat(parts)
  end,
  unpack = function(fmt, s, pos)
    pos = pos or 1
    local k, r = #fmt - 1, {}
    for i = 1, k do
      r[i] = values[tonumber(s:sub(pos, pos + 7))]
      pos = pos + 8
    end
    r[k + 1] = pos
    return unpack(r, 1, k + 1)
  end,
}

-- The commands the library sends, on a table, with Redis' replies as Lua sees them.
local db, clock, commands = {}, 1765000000000, {}
local function call(cmd, ...)
  local a = { ... }
  cmd = cmd:upper()
  commands[cmd] = (commands[cmd] or 0) + 1
  if cmd == 'TIME' then
    clock = clock + 1
    return { tostring(math.floor(clock / 1000)), tostring((clock % 1000) * 1000) }
  elseif cmd == 'MGET' then
    local r = {}
    for i = 1, #a do r[i] = db[a[i]] or false end
    return r
  elseif cmd == 'GET' then return db[a[1]] or false
  elseif cmd == 'SET' then
    for i = 3, #a do
      if tostring(a[i]):upper() == 'NX' and db[a[1]] then return false end
    end
    db[a[1]] = a[2]
    return { ok = 'OK' }
  elseif cmd == 'SETRANGE' then
    local old, at, v = db[a[1]] or '', tonumber(a[2]), a[3]
    db[a[1]] = old:sub(1, at) .. v .. old:sub(at + #v + 1)
    return #db[a[1]]
  elseif cmd == 'DEL' then
    local n = 0
    for i = 1, #a do
      if db[a[i]] then n, db[a[i]] = n + 1, nil end
    end
    return n
  end
  error('redis-lua-lines: no stand-in for ' .. cmd)
end
local functions = {}
redis = { call = call, pcall = call, register_function = function(name, f) functions[name] = f end }

local source = io.open(library_file):read('*a'):gsub('^#![^\n]*\n', '')
assert(loadstring(source, '=library'))()
local store
for name, f in pairs(functions) do
  if name:match('_store$') then store = f end
end
local calls = dofile(calls_file)
for _, c in ipairs(calls) do store(c[1], c[2]) end

local by_line, by_function, c_calls, total = {}, {}, {}, 0
local getinfo = debug.getinfo
local function hook(event)
  local at = getinfo(2, 'Sl')
  if event == 'count' then
    if at.source == '=library' then
      total = total + 1
      by_line[at.currentline] = (by_line[at.currentline] or 0) + 1
      by_function[at.linedefined] = (by_function[at.linedefined] or 0) + 1
    end
  elseif at.what == 'C' then
    local caller = getinfo(3, 'S')
    if caller and caller.source == '=library' then
      local name = getinfo(2, 'n').name or '?'
      c_calls[name] = (c_calls[name] or 0) + 1
    end
  end
end
for k in pairs(commands) do commands[k] = 0 end
debug.sethook(hook, 'c', 1)
for _, c in ipairs(calls) do store(c[1], c[2]) end
debug.sethook()

local n = #calls
local lines = {}
for l in (source .. '\n'):gmatch('([^\n]*)\n') do lines[#lines + 1] = l end
local function show(title, counts, label, limit)
  print(title)
  local keys = {}
  for k in pairs(counts) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b) return counts[a] > counts[b] end)
  for i = 1, math.min(#keys, limit) do
    print(string.format('%8.1f  %s', counts[keys[i]] / n, label(keys[i])))
  end
end
local function line(k) return string.format('%5d  %s', k, (lines[k] or ''):gsub('^%s+', ''):sub(1, 100)) end
print(string.format('VM instructions per decision: %.1f', total / n))
show('-- per function (the line that defines it)', by_function, line, top_n)
show('-- per line', by_line, line, top_n)
show('-- C functions called from the library (struct and redis stand-ins are Lua here)', c_calls, tostring, top_n)
show('-- Redis commands', commands, tostring, top_n)
