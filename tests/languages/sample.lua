-- A tiny event dispatcher with priorities.
local Dispatcher = {}
Dispatcher.__index = Dispatcher

local function sorted_insert(list, item)
  local i = #list + 1
  while i > 1 and list[i - 1].priority < item.priority do
    list[i] = list[i - 1]
    i = i - 1
  end
  list[i] = item
end

function Dispatcher.new()
  return setmetatable({ handlers = {} }, Dispatcher)
end

function Dispatcher:on(event, handler, priority)
  self.handlers[event] = self.handlers[event] or {}
  sorted_insert(self.handlers[event], { fn = handler, priority = priority or 0 })
end

function Dispatcher:emit(event, ...)
  local list = self.handlers[event]
  if not list then
    return 0
  end
  for _, entry in ipairs(list) do
    if entry.fn(...) == false then
      break
    end
  end
  return #list
end

local d = Dispatcher.new()
d:on("greet", function(name) print("hello " .. name) end, 1)
d:on("greet", function(name) print("urgent hello " .. name) end, 10)
if d:emit("greet", "world") ~= 2 then
  error("expected two handlers")
end
for i = 1, 3 do
  d:emit("tick", i)
end
local n = 0
repeat
  n = n + 1
until n >= 3
return Dispatcher
