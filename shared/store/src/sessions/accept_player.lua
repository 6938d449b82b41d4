-- A game server lets a player in (AcceptPlayerSession): the player session must be RESERVED in a game session
-- this server hosts; it becomes ACTIVE. Accepting an ACTIVE one again is ACCEPTED and changes nothing.
-- KEYS: k.res_due, k.sevents. ARGV[1] game-server id, ARGV[2] game session id, ARGV[3] player session
-- id.
-- Reply: {outcome, now_ms, detail, {loc, ip, dns, port}, {player session fields...}}. Outcomes: ACCEPTED;
-- NOT_FOUND (no such player session in that game session); NOT_YOURS (the player session belongs to a game
-- session of another server); NOT_ACTIVE (detail: the game session's status); ENDED (detail: the player
-- session's status, COMPLETED or TIMEDOUT).
local now = now_ms()
local sid, psid = ARGV[2], ARGV[3]
-- Its game session is named by its id (one of an earlier release not numbered: the one the server names).
local gs = session_of(psid) or sid
local s, fields, field = player_context(k, gs, psid)
if not fields then
  local ended, refused = servers_ended_player(k, ARGV[1], sid, psid)
  if not ended then return {refused, tostring(now), ''} end
  return {'ENDED', tostring(now), by_name(ended).status}
end
if s.server ~= ARGV[1] then return {'NOT_YOURS', tostring(now), ''} end
if gs ~= sid then return {'NOT_FOUND', tostring(now), ''} end
local p = by_name(fields)
-- A reservation past its deadline is over, whether or not the sweep got to it yet.
local deadline = reservation_deadline(p, s.act_ms, s.res_ms)
if deadline and deadline <= now then
  leave(k, sid, s, fields, field, S.TIMEDOUT, now)
  return {'ENDED', tostring(now), S.TIMEDOUT}
end
if s.status ~= S.ACTIVE and p.status == S.RESERVED then return {'NOT_ACTIVE', tostring(now), s.status} end
if p.status == S.RESERVED then
  fields = with_changes(fields, {status = S.ACTIVE, act_ms = tostring(now)})
  redis.call('HSET', gkey(k, sid), field, held_value(by_name(fields)))
  redis.call('ZREM', k.res_due, psid)
elseif p.status ~= S.ACTIVE then
  return {'ENDED', tostring(now), p.status}
end
return {'ACCEPTED', tostring(now), '', endpoint_of(s), fields}
