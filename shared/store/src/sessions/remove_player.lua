-- A game server reports that a player left (RemovePlayerSession): the RESERVED or ACTIVE player session becomes
-- COMPLETED and its slot frees up. Removing an ended one is REMOVED and changes nothing.
-- KEYS: k.res_due, k.sevents. ARGV[1] game-server id, ARGV[2] game session id, ARGV[3] player session
-- id.
-- Reply: {REMOVED | NOT_FOUND | NOT_YOURS, now_ms}, as accept_player.lua tells them apart.
local now = now_ms()
local sid, psid = ARGV[2], ARGV[3]
local owner = redis.call('HGET', pkey(k, psid), 'gs')
if not owner then return {'NOT_FOUND', tostring(now)} end
if redis.call('HGET', gkey(k, owner), 'server') ~= ARGV[1] then return {'NOT_YOURS', tostring(now)} end
if owner ~= sid then return {'NOT_FOUND', tostring(now)} end
if end_player_session(k, psid, S.COMPLETED, now) then index_counts(k, sid) end
return {'REMOVED', tostring(now)}
