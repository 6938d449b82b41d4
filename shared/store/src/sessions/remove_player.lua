-- A game server reports that a player left (RemovePlayerSession): the RESERVED or ACTIVE player session becomes
-- COMPLETED and its slot frees up. Removing an ended one is REMOVED and changes nothing.
-- KEYS/ARGV[1..3]: see fleet_context(). ARGV[4] game-server id, ARGV[5] game session id, ARGV[6] player session
-- id.
-- Reply: {REMOVED | NOT_FOUND | NOT_YOURS, now_ms}, as accept_player.lua tells them apart.
local k = fleet_context(KEYS, ARGV)
local now = now_ms()
local sid, psid = ARGV[5], ARGV[6]
local owner = redis.call('HGET', pkey(k, psid), 'gs')
if not owner then return {'NOT_FOUND', tostring(now)} end
if redis.call('HGET', gkey(k, owner), 'server') ~= ARGV[4] then return {'NOT_YOURS', tostring(now)} end
if owner ~= sid then return {'NOT_FOUND', tostring(now)} end
if end_player_session(k, psid, 'COMPLETED', now) then index_counts(k, sid) end
return {'REMOVED', tostring(now)}
