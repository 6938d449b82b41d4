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

-- The clock this function call read (now_ms), and the counts it moved that are still to be written (add_count in
-- fleets/tally.lua): every function calls fleet_keys first, which forgets the last call's, so that no count a call
-- failing midway left unwritten is written by the next.
local clock = nil
local moved = {}

local function fleet_keys(KEYS, names)
  clock = nil
  moved = {}
  local k = {[0] = KEYS[1]}
  for i = 1, #names do k[names[i]] = KEYS[i] end
  return setmetatable(k, FLEET)
end

-- A game session's and a player session's keys: every area that reads sessions (a process's desired state lists
-- its own) finds them by these.
local function gkey(k, sid) return k.gsess .. sid end
local function pkey(k, psid) return k.psess .. psid end

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

-- Whether a field of a game session's record is one of its player sessions' or of its live players' (see
-- held_field), which no reply or event shows as a field of the session.
local function holds_player(name)
  local first = string.byte(name, 1)
  return first == 64 or first == 35
end

-- Appends a record's `fields` (as HGETALL answers them) to a reply, as field, value, ..., without the record's share
-- of the live counts (tly, see fleets/tally.lua), which is the store's own bookkeeping, nor a game session's player
-- sessions.
local function append_pairs(out, fields)
  for i = 1, #fields, 2 do
    if fields[i] ~= 'tly' and not holds_player(fields[i]) then
      out[#out + 1] = fields[i]
      out[#out + 1] = fields[i + 1]
    end
  end
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
  if gone then redis.call('SET', gone_key, gone) end
end

-- The id of the n-th player session (from 1) of game session `sid`: berth_domain::game_session::player_session_id,
-- whose game session is known from the id alone.
local function player_session_id(sid, n)
  return (string.gsub(sid, '/gsess%-', '/psess-', 1)) .. '-' .. n
end

-- The number of player session `psid` in game session `sid` (berth_domain::game_session::player_session_number), or
-- nil when it is not numbered in it.
local function player_number(sid, psid)
  local n = tonumber(string.match(psid, '%-(%d+)$'))
  if n and player_session_id(sid, n) == psid then return n end
  return nil
end

-- A live game session holds its player sessions in its own record, so that a player's change is one read and one
-- write of one hash, and its end reads them with the rest: field '@<n>' holds its n-th (or '@<id>' one whose id is
-- not numbered), packed by position as PLAYER_HELD lists its fields (record_values), and '#<player id>' names the
-- field of the player's live (RESERVED or ACTIVE) one, '' once it ended. Field '@' (1) marks a record that holds
-- them so; one an earlier release wrote has a hash per player session (pkey) until a script changing it moves them
-- in (hold_players). An id of two releases back, not numbered, is then found through its game session's list, not
-- alone, while the session lives.
local PLAYER_HELD = {'player', 'status', 'data', 'c_ms', 'act_ms', 'end_ms'}

-- The field holding player session `psid` in the record of its game session `sid`.
local function held_field(sid, psid)
  return '@' .. (player_number(sid, psid) or psid)
end

-- A held player session's value, from its fields by name.
local function held_value(p)
  return cmsgpack.pack(record_values(p, PLAYER_HELD))
end

-- The id of the player session held in field `field` of the record of game session `sid`.
local function held_id(sid, field)
  local ref = string.sub(field, 2)
  if string.find(ref, '^%d+$') then return player_session_id(sid, ref) end
  return ref
end

-- A held player session's fields (as HGETALL answers them) from its field's name and value in the record of game
-- session `sid`.
local function held_player(sid, field, value)
  local fields = {'id', held_id(sid, field), 'gs', sid}
  for _, part in ipairs(record_fields(cmsgpack.unpack(value), PLAYER_HELD)) do fields[#fields + 1] = part end
  return fields
end

-- The player sessions a game session's record (`fields`, as HGETALL answers them) holds, each as held_player
-- answers it, oldest first (by number; one not numbered, by its creation, before them).
local function held_players(sid, fields)
  local held = {}
  for i = 1, #fields, 2 do
    local name = fields[i]
    if #name > 1 and string.byte(name, 1) == 64 then
      local p = held_player(sid, name, fields[i + 1])
      held[#held + 1] = {tonumber(string.sub(name, 2)) or -1, tonumber(by_name(p).c_ms) or 0, p}
    end
  end
  table.sort(held, function(a, b)
    if a[1] ~= b[1] then return a[1] < b[1] end
    return a[2] < b[2]
  end)
  for i, entry in ipairs(held) do held[i] = entry[3] end
  return held
end

-- A game session's `fields` (as HGETALL answers them) without its player sessions and live players.
local function session_pairs(fields)
  local out = {}
  for i = 1, #fields, 2 do
    if not holds_player(fields[i]) then out[#out + 1], out[#out + 2] = fields[i], fields[i + 1] end
  end
  return out
end
