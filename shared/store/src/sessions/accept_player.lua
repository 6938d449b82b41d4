-- A game server lets a player in (AcceptPlayerSession): the player session must be RESERVED in a game session
-- this server hosts; it becomes ACTIVE. Accepting an ACTIVE one again is ACCEPTED and changes nothing.
-- KEYS: k.sevents. ARGV[1] game-server id, ARGV[2] game session id, ARGV[3] player session
-- id.
-- Reply: {outcome, now_ms, detail, {loc, ip, dns, port}, {player session fields...}}. Outcomes: ACCEPTED;
-- NOT_FOUND (no such player session in that game session); NOT_YOURS (the player session belongs to a game
-- session of another server); NOT_ACTIVE (detail: the game session's status); ENDED (detail: the player
-- session's status, COMPLETED or TIMEDOUT).
local now = now_ms()
local sid, psid = ARGV[2], ARGV[3]
local s, v = live_player(k, psid, {'server', 'loc', 'ip', 'dns', 'port', 'status', 'act_ms', 'res_ms', 'inst', 'cur',
  'max', 'accept', 'srv_end', 'tly', 'c_ms'})
if not v then
  if s[1] then return {'NOT_FOUND', tostring(now), ''} end
  local ended, refused = servers_ended_player(k, ARGV[1], sid, psid)
  if not ended then return {refused, tostring(now), ''} end
  return {'ENDED', tostring(now), by_name(ended).status}
end
if s[1] ~= ARGV[1] then return {'NOT_YOURS', tostring(now), ''} end
if session_of(psid) ~= sid then return {'NOT_FOUND', tostring(now), ''} end
local endpoint = {s[2], s[3], s[4], s[5]}
-- A reservation past its deadline is over, whether or not the sweep got to it yet.
local deadline = reservation_deadline(v, s[7], s[8])
if deadline and deadline <= now then
  local cur = tonumber(s[10]) - 1
  redis.call('HSET', players_key(k, sid), unpack(end_player(k, sid, v, S.TIMEDOUT, now, endpoint)))
  index_counts(k, sid, {s[2], s[9], s[6], cur, s[11], s[12], s[13], s[14], s[15]},
    takes_players(s[6], s[12], s[10], s[11], s[13]), {'cur', cur})
  return {'ENDED', tostring(now), S.TIMEDOUT}
end
if s[6] ~= S.ACTIVE and v[P_STATUS] == S.RESERVED then return {'NOT_ACTIVE', tostring(now), s[6]} end
if v[P_STATUS] == S.RESERVED then
  -- Its session's reservation deadline stays: the sweep finds it accepted.
  v[P_STATUS], v[P_ACTIVATED] = S.ACTIVE, now
  redis.call('HSET', players_key(k, sid), player_field(v[1]), cmsgpack.pack(v))
elseif v[P_STATUS] ~= S.ACTIVE then
  return {'ENDED', tostring(now), v[P_STATUS]}
end
return {'ACCEPTED', tostring(now), '', endpoint, player_fields(sid, v)}
