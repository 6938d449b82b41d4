-- A game server reports that a player left (RemovePlayerSession): the RESERVED or ACTIVE player session becomes
-- COMPLETED and its slot frees up. Removing an ended one is REMOVED and changes nothing.
-- KEYS: k.sevents. ARGV as accept_player.lua's: game-server id, game session id, the game session the player
-- session's id names, its number there.
-- Reply: {REMOVED | NOT_FOUND | NOT_YOURS, now_ms, ''}, as accept_player.lua tells them apart; REMOVED with the
-- endpoint and the player session as it now stands (player_reply), which the server is answered.
local now = now_ms()
local sid, own, n = ARGV[2], ARGV[3], tonumber(ARGV[4])
local s, v = live_player(k, own, n, {'server', 'loc', 'ip', 'dns', 'port', 'inst', 'status', 'cur', 'max', 'accept',
  'srv_end', 'tly', 'c_ms'})
if not v then
  if s[1] then return {'NOT_FOUND', int_text(now), ''} end
  local ended, endpoint, refused = servers_ended_player(k, ARGV[1], sid, own, n)
  if not ended then return {refused, int_text(now), ''} end
  return player_reply('REMOVED', now, endpoint, ended)
end
if s[1] ~= ARGV[1] then return {'NOT_YOURS', int_text(now), ''} end
if own ~= sid then return {'NOT_FOUND', int_text(now), ''} end
local ended = end_player(k, sid, v, S.COMPLETED, now)
if ended then players_left(k, sid, {s[2], s[6], s[7], s[8], s[9], s[10], s[11], s[12], s[13]}, ended, 1) end
return player_reply('REMOVED', now, {s[2], s[3], s[4], s[5]}, v)
