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
local pk = pkey(k, psid)
-- Read whole once: the reply shows it.
local fields = redis.call('HGETALL', pk)
local p = by_name(fields)
if not p.gs then
  local ended, refused = servers_ended_player(k, ARGV[1], sid, psid)
  if not ended then return {refused, tostring(now), ''} end
  return {'ENDED', tostring(now), by_name(ended).status}
end
local s = redis.call('HMGET', gkey(k, p.gs), 'server', 'loc', 'ip', 'dns', 'port', 'status', 'act_ms', 'res_ms')
if s[1] ~= ARGV[1] then return {'NOT_YOURS', tostring(now), ''} end
if p.gs ~= sid then return {'NOT_FOUND', tostring(now), ''} end
-- A reservation past its deadline is over, whether or not the sweep got to it yet.
local endpoint = {s[2], s[3], s[4], s[5]}
local deadline = reservation_deadline(p, s[7], s[8])
if deadline and deadline <= now then
  end_player_session(k, psid, S.TIMEDOUT, now, endpoint, fields)
  index_counts(k, sid)
  return {'ENDED', tostring(now), S.TIMEDOUT}
end
if s[6] ~= S.ACTIVE and p.status == S.RESERVED then return {'NOT_ACTIVE', tostring(now), s[6]} end
if p.status == S.RESERVED then
  redis.call('HSET', pk, 'status', S.ACTIVE, 'act_ms', now)
  redis.call('ZREM', k.res_due, psid)
  fields = with_changes(fields, {status = S.ACTIVE, act_ms = tostring(now), until_ms = false})
elseif p.status ~= S.ACTIVE then
  return {'ENDED', tostring(now), p.status}
end
return {'ACCEPTED', tostring(now), '', endpoint, fields}
