-- A game server reports that a player left (RemovePlayerSession): the RESERVED or ACTIVE player session becomes
-- COMPLETED and its slot frees up. Removing an ended one is REMOVED and changes nothing.
-- KEYS: k.sevents. ARGV[1] game-server id, ARGV[2] game session id, ARGV[3] player session
-- id.
-- Reply: {REMOVED | NOT_FOUND | NOT_YOURS, now_ms, ''}, as accept_player.lua tells them apart; REMOVED is followed
-- by {loc, ip, dns, port} and the player session's fields, which the server is answered.
local now = now_ms()
local sid, psid = ARGV[2], ARGV[3]
local s, v = live_player(k, psid, {'server', 'loc', 'ip', 'dns', 'port', 'inst', 'status', 'cur', 'max', 'accept',
  'srv_end', 'tly', 'c_ms'})
if not v then
  if s[1] then return {'NOT_FOUND', tostring(now), ''} end
  local fields, session = servers_ended_player(k, ARGV[1], sid, psid)
  if not fields then return {session, tostring(now), ''} end
  return {'REMOVED', tostring(now), '', endpoint_of(session), fields}
end
if s[1] ~= ARGV[1] then return {'NOT_YOURS', tostring(now), ''} end
if session_of(psid) ~= sid then return {'NOT_FOUND', tostring(now), ''} end
local endpoint = {s[2], s[3], s[4], s[5]}
local ended = end_player(k, sid, v, S.COMPLETED, now)
if ended then
  redis.call('HSET', players_key(k, sid), unpack(ended))
  -- The session's count is written with its share, in one HSET.
  local cur = tonumber(s[8]) - 1
  index_counts(k, sid, {s[2], s[6], s[7], cur, s[9], s[10], s[11], s[12], s[13]},
    takes_players(s[7], s[10], s[8], s[9], s[11]), {'cur', cur})
end
return {'REMOVED', tostring(now), '', endpoint, player_fields(sid, v)}
