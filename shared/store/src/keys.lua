-- How a function reaches its fleet's keys (first of the helpers; KEY, the suffix of every key by name, is generated
-- from keys.rs before it, and S, every stored state by name, from the domain's enums).
--
-- Each function sees them as `k`: k.<name> of a fixed key is the one it received in KEYS, in the order its top
-- comment declares them (`-- KEYS: k.pool, k.claims.`); k.<name> of a kind of record (KEY's suffixes ending in
-- ':', such as k.gsess) is the start of such a record's key, built from the hash tag of KEYS[1]. Reaching for a
-- fixed key it did not declare is an error, so no function touches a key its caller did not name.

-- k[0] holds KEYS[1], for the one metatable every function's k shares.
local FLEET = {__index = function(known, name)
  local suffix = KEY[name]
  if not suffix or string.sub(suffix, -1) ~= ':' then error('undeclared key: ' .. tostring(name)) end
  -- Fleet ids hold no braces, so the tag ends at the first.
  local key = string.match(known[0], '^[^}]*}') .. suffix
  rawset(known, name, key)
  return key
end}

-- The clock this function call read (now_ms), the counts it moved that are still to be written (add_count in
-- fleets/tally.lua) and the locations where a server joined the pool or the hosting set (announce_capacity, there
-- too): every function calls fleet_keys first, which forgets the last call's, so that nothing a call failing midway
-- left unwritten is written by the next.
local clock, clock_text = nil, nil
local moved, joined = {}, {}

local function fleet_keys(KEYS, names)
  clock, clock_text = nil, nil
  moved, joined = {}, {}
  local k = {[0] = KEYS[1]}
  for i = 1, #names do k[names[i]] = KEYS[i] end
  return setmetatable(k, FLEET)
end

-- A game session's key: every area that reads sessions finds them by it.
local function gkey(k, sid) return k.gsess .. sid end

-- The fleet a game session's or player session's id names (berth_domain::game_session::fleet_of), if any.
local function fleet_of(id)
  return id and string.match(id, '^([^/]*)/')
end

-- The id of the fleet whose keys `k` reaches, from their hash tag.
local function fleet_id(k)
  return string.match(k[0], '{f:([^}]*)}')
end

-- Redis's clock, ms since the epoch, read once per function call: every time a function stores is taken from it,
-- never from a replica's.
local function now_ms()
  if not clock then
    local t = redis.call('TIME')
    clock = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return clock
end

-- A number as text, for a reply, a key or a value to store. Lua turns a number it concatenates or hands to redis.call
-- into text with sprintf's %.14g or %.17g, thousands of machine instructions each (load-tests/replay/icount.sh counts
-- them): the small integers functions write over and over (counts, player numbers, states) are formatted once per
-- library load, the clock once per call, any other integer with the cheaper %d. Text passes through.
local small_ints = {}
local function int_text(n)
  if type(n) ~= 'number' then return n end
  local text = small_ints[n]
  if text then return text end
  if n == clock then
    clock_text = clock_text or string.format('%d', n)
    return clock_text
  end
  text = string.format('%d', n)
  if n >= 0 and n < 4096 then small_ints[n] = text end
  return text
end

-- Appends a record's `fields` (as HGETALL answers them) to a reply, as field, value, ..., without the record's share
-- of the live counts (tly, see fleets/tally.lua), which is the store's own bookkeeping.
local function append_pairs(out, fields)
  for i = 1, #fields, 2 do
    if fields[i] ~= 'tly' then
      out[#out + 1] = fields[i]
      out[#out + 1] = fields[i + 1]
    end
  end
  return out
end

-- Appends the flat list `more` to the flat list `out`.
local function extend(out, more)
  for i = 1, #more do out[#out + 1] = more[i] end
  return out
end

-- Appends the hash at `key` to a reply, as append_pairs does.
local function append_fields(out, key)
  return append_pairs(out, redis.call('HGETALL', key))
end

-- An ended record is kept for its retention as one msgpack value rather than as a hash: a hash holding one value
-- longer than 64 bytes (an encoded request, JSON properties) leaves Redis' compact encoding and costs several times
-- its size. Its values go by the position of their fields in a list of names (false for a field it lacks), and a
-- value that is an integer written plainly (a time in ms, a count, a port) as a msgpack integer: 9 bytes for a time
-- where its digits take 14. Records packed before, whose values are all strings, read the same.
local function packed_value(value)
  if type(value) == 'string' and #value <= 15 and (value == '0' or string.find(value, '^-?[1-9]%d*$')) then
    return tonumber(value)
  end
  return value
end

local function record_values(record, names)
  local values = {}
  for i, name in ipairs(names) do values[i] = packed_value(record[name] or false) end
  return values
end

-- The fields of a record from its values by position (record_values), as HGETALL answers them (the fields it
-- lacked left out).
local function record_fields(values, names)
  local fields = {}
  for i, name in ipairs(names) do
    local value = values[i]
    if value then
      fields[#fields + 1] = name
      fields[#fields + 1] = type(value) == 'number' and string.format('%d', value) or value
    end
  end
  return fields
end

-- A record's fields (as HGETALL answers them) by name.
local function by_name(fields)
  local record = {}
  for i = 1, #fields, 2 do record[fields[i]] = fields[i + 1] end
  return record
end

-- `fields` (a flat name/value list) with the values of `changed` by name: a value replaced, added when new, left out
-- when false.
local function with_changes(fields, changed)
  local out, seen = {}, {}
  for i = 1, #fields, 2 do
    local name, value = fields[i], fields[i + 1]
    if changed[name] ~= nil then value = changed[name] end
    seen[name] = true
    if value ~= false then out[#out + 1], out[#out + 2] = name, value end
  end
  for name, value in pairs(changed) do
    if not seen[name] and value ~= false then out[#out + 1], out[#out + 2] = name, value end
  end
  return out
end

-- Trims an event stream to the events from `cutoff_ms` on, and to at most `cap` of them, recording the position of
-- the last one trimmed at `gone_key`: a watcher whose position is before it missed it. The trim is exact (an
-- approximate one keeps whole blocks of 100 entries, so a quiet stream would keep its old events for good).
local function trim_events(events, gone_key, cutoff_ms, cap)
  local gone
  local cutoff = tostring(cutoff_ms) .. '-0'
  local first = redis.call('XRANGE', events, '-', '+', 'COUNT', 1)[1]
  -- XREVRANGE walks the whole stream when nothing lies below its end, so it runs only when something does.
  if first and tonumber(string.match(first[1], '^(%d+)')) < cutoff_ms then
    gone = redis.call('XREVRANGE', events, '(' .. cutoff, '-', 'COUNT', 1)[1][1]
    redis.call('XTRIM', events, 'MINID', cutoff)
  end
  if redis.call('XLEN', events) > cap then
    -- Keeping one more first shows which is the last to go.
    redis.call('XTRIM', events, 'MAXLEN', cap + 1)
    gone = redis.call('XRANGE', events, '-', '+', 'COUNT', 1)[1][1]
    redis.call('XTRIM', events, 'MAXLEN', cap)
  end
  -- The stream of a deleted queue or fleet is set to expire, and its marker, which a trim may create only after the
  -- deletion, goes with it.
  if gone then
    local ttl = redis.call('PTTL', events)
    if ttl > 0 then
      redis.call('SET', gone_key, gone, 'PX', ttl)
    else
      redis.call('SET', gone_key, gone)
    end
  end
end
