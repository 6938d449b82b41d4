-- Changes a game session (UpdateGameSession); what is not given keeps its value. Its server is told through its
-- desired state (a new version) unless only the protection changed.
-- KEYS: k.sevents. ARGV[1] game session id, ARGV[2] maximum players (''), ARGV[3] accept
-- players (1 | 0 | ''), ARGV[4] protected (1 | 0 | ''), ARGV[5] 1 to set the name to ARGV[6], ARGV[7] 1 to set the
-- matchmaker data to ARGV[8], ARGV[9] properties to merge (JSON [[key, value], ...]; an empty value removes the
-- key), ARGV[10] most properties a session may hold.
-- Reply: session_reply's {outcome, now_ms, replica, version, desired state, detail, session fields...}. Outcomes:
-- UPDATED; NOT_FOUND; ENDED (detail: its status); BELOW_COUNT (detail: its player session count); ABOVE_SERVER (detail:
-- the most players its server takes); TOO_MANY_PROPERTIES (detail: how many the merge would leave).
local now = now_ms()
local sid = ARGV[1]
local key = gkey(k, sid)
local s = redis.call('HMGET', key, 'status', 'cur', 'props', 'server')
if not s[1] then
  local ended = ended_session(k, sid)
  if ended then return session_reply('ENDED', now, by_name(ended.fields).status) end
  return session_reply('NOT_FOUND', now)
end
if s[1] == S.TERMINATED or s[1] == S.ERROR then return session_reply('ENDED', now, s[1]) end
if ARGV[2] ~= '' and tonumber(ARGV[2]) < tonumber(s[2]) then return session_reply('BELOW_COUNT', now, s[2]) end
local server_max = redis.call('HGET', k.gs .. s[4], 'max_players')
if ARGV[2] ~= '' and server_max and tonumber(ARGV[2]) > tonumber(server_max) then
  return session_reply('ABOVE_SERVER', now, server_max)
end
local props = cjson.decode(s[3])
for _, change in ipairs(cjson.decode(ARGV[9])) do
  local found = false
  for i, prop in ipairs(props) do
    if prop[1] == change[1] then
      found = true
      if change[2] == '' then table.remove(props, i) else prop[2] = change[2] end
      break
    end
  end
  if not found and change[2] ~= '' then props[#props + 1] = change end
end
if #props > tonumber(ARGV[10]) then return session_reply('TOO_MANY_PROPERTIES', now, tostring(#props)) end
local told = false
local function set(field, value, tell)
  redis.call('HSET', key, field, value)
  told = told or tell
end
if ARGV[2] ~= '' then set('max', ARGV[2], true) end
if ARGV[3] ~= '' then set('accept', ARGV[3], true) end
if ARGV[4] ~= '' then set('prot', ARGV[4], false) end
if ARGV[5] == '1' then set('name', ARGV[6], true) end
if ARGV[7] == '1' then set('mm', ARGV[8], true) end
if #cjson.decode(ARGV[9]) > 0 then
  -- cjson writes an empty table as an object; the record keeps a list.
  local encoded = '[]'
  if #props > 0 then encoded = cjson.encode(props) end
  set('props', encoded, true)
end
index_session(k, sid)
local fields = session_event(k, S.GAME_SESSION_UPDATED, key, now)
local server_key = k.gs .. s[4]
if told and redis.call('HGET', server_key, 'pstate') then redis.call('HINCRBY', server_key, 'ver', 1) end
return session_reply('UPDATED', now, nil, server_key, fields)
