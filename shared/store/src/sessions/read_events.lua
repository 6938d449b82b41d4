-- Reads a fleet's session events after a position, with the clock of the node that holds them, in one atomic step:
-- every event appended later gets a position at or after that time, so the reader knows how far it has read the
-- fleet even when nothing new is there. Also returns the position of the last event trimmed (by retention or the
-- cap), so the reader can tell whether it missed one.
-- A game session's event is joined here to the session's record, live or ended: a transition's to the fields
-- written at its creation (session_event), an end's to the whole record (end_event), given as a `g` entry with
-- `players`, the JSON list of the fields of the player sessions that ended with it. One whose record is gone (past
-- the session's retention) is past the retention too: it, and the older events, read as trimmed.
-- KEYS[1] the fleet's session event stream, KEYS[2] the position of the last one trimmed. ARGV[1] where to start
-- (an XRANGE start: '(' before a position excludes it), ARGV[2] most events.
-- Reply: {now_ms, position of the last event trimmed or '', entries (as XRANGE returns them)}.
local now = tostring(now_ms())
local gone = redis.call('GET', KEYS[2]) or ''
local out = {}

-- The record of game session `sid`, live or ended, by name, with its ended player sessions (nil while live); nil
-- when it is gone.
local fixed = {}
for name in pairs(SESSION_FIXED) do fixed[#fixed + 1] = name end
local function record_of(sid)
  local live = redis.call('HMGET', gkey(k, sid), unpack(fixed))
  if live[1] then
    local record = {}
    for i, name in ipairs(fixed) do record[name] = live[i] end
    return record, nil
  end
  local ended = ended_session(k, sid)
  if ended then return by_name(ended.fields), ended end
  return nil
end

-- An end's entry: the record whole (but what no event shows), and the players named.
local function joined_end(event, ended)
  local joined = {'type', event.type, 't', event.t, 'kind', 'g'}
  for i = 1, #ended.fields, 2 do
    if not SESSION_UNSHOWN[ended.fields[i]] then
      joined[#joined + 1] = ended.fields[i]
      joined[#joined + 1] = ended.fields[i + 1]
    end
  end
  local named = {}
  for one in string.gmatch(event.with or '', '%S+') do
    named[string.match(one, '^%d+$') and player_session_id(event.id, one) or one] = true
  end
  local players = {}
  for _, p in ipairs(ended.players) do
    if named[by_name(p).id] then players[#players + 1] = p end
  end
  if #players > 0 then
    joined[#joined + 1] = 'players'
    joined[#joined + 1] = cjson.encode(players)
  end
  return joined
end

-- XRANGE answers nil to a COUNT of 0 (a watch asking only for the clock).
for _, entry in ipairs(redis.call('XRANGE', KEYS[1], ARGV[1], '+', 'COUNT', ARGV[2]) or {}) do
  local fields = entry[2]
  local event = by_name(fields)
  -- A transition appended by an earlier release carries the whole record.
  if event.kind == 'p' or (event.kind == 'g' and event.fleet) then
    out[#out + 1] = entry
  else
    local record, ended = record_of(event.id or '')
    if not record or (event.kind == 'e' and not ended) then
      gone, out = entry[1], {}
    elseif event.kind == 'e' then
      out[#out + 1] = {entry[1], joined_end(event, ended)}
    else
      for _, name in ipairs(fixed) do
        fields[#fields + 1] = name
        fields[#fields + 1] = record[name] or ''
      end
      out[#out + 1] = entry
    end
  end
end
return {now, gone, out}
