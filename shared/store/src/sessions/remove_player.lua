-- A game server reports that a player left (RemovePlayerSession): the RESERVED or ACTIVE player session becomes
-- COMPLETED and its slot frees up. Removing an ended one is REMOVED and changes nothing.
-- KEYS: k.res_due, k.sevents. ARGV[1] game-server id, ARGV[2] game session id, ARGV[3] player session
-- id.
-- Reply: {REMOVED | NOT_FOUND | NOT_YOURS, now_ms, ''}, as accept_player.lua tells them apart; REMOVED is followed
-- by {loc, ip, dns, port} and the player session's fields, which the server is answered.
local now = now_ms()
local sid, psid = ARGV[2], ARGV[3]
local gs = session_of(psid) or sid
local s, fields, field = player_context(k, gs, psid)
if not fields then
  local ended, session = servers_ended_player(k, ARGV[1], sid, psid)
  if not ended then return {session, tostring(now), ''} end
  return {'REMOVED', tostring(now), '', endpoint_of(session), ended}
end
if s.server ~= ARGV[1] then return {'NOT_YOURS', tostring(now), ''} end
if gs ~= sid then return {'NOT_FOUND', tostring(now), ''} end
local status = by_name(fields).status
if status == S.RESERVED or status == S.ACTIVE then fields = leave(k, sid, s, fields, field, S.COMPLETED, now) end
return {'REMOVED', tostring(now), '', endpoint_of(s), fields}
