-- A game server lets a player in (AcceptPlayerSession): the player session must be RESERVED in a game session
-- this server hosts; it becomes ACTIVE. Accepting an ACTIVE one again is ACCEPTED and changes nothing.
-- KEYS: k.sevents. ARGV[1] game-server id, ARGV[2] game session id, ARGV[3] the game session the player session's
-- id names (ARGV[2] unless the server named another's), ARGV[4] the player session's number in it (the caller
-- parses the id: berth_domain::game_session::player_session_number).
-- Reply: {outcome, now_ms, detail}, and for ACCEPTED the endpoint and the player session (player_reply). Outcomes:
-- ACCEPTED; NOT_FOUND (no such player session in that game session); NOT_YOURS (the player session belongs to a game
-- session of another server); NOT_ACTIVE (detail: the game session's status); ENDED (detail: the player session's
-- status, COMPLETED or TIMEDOUT).
local now = now_ms()
local sid, own, n = ARGV[2], ARGV[3], tonumber(ARGV[4])
-- What an accept needs; a reservation that timed out reads what its counts need apart (below).
local s, v = live_player(k, own, n, {'server', 'status', 'act_ms', 'res_ms', 'loc', 'ip', 'dns', 'port'})
if not v then
  if s[1] then return {'NOT_FOUND', int_text(now), ''} end
  local ended, _, refused = servers_ended_player(k, ARGV[1], sid, own, n)
  if not ended then return {refused, int_text(now), ''} end
  return {'ENDED', int_text(now), ended[P_STATUS]}
end
if s[1] ~= ARGV[1] then return {'NOT_YOURS', int_text(now), ''} end
if own ~= sid then return {'NOT_FOUND', int_text(now), ''} end
local endpoint = {s[5], s[6], s[7], s[8]}
-- A reservation past its deadline is over, whether or not the sweep got to it yet.
local deadline = reservation_deadline(v, s[3], s[4])
if deadline and deadline <= now then
  local t = redis.call('HMGET', gkey(k, sid), 'inst', 'cur', 'max', 'accept', 'srv_end', 'tly', 'c_ms')
  players_left(k, sid, {s[5], t[1], s[2], t[2], t[3], t[4], t[5], t[6], t[7]},
    end_player(k, sid, v, S.TIMEDOUT, now, endpoint), 1)
  return {'ENDED', int_text(now), S.TIMEDOUT}
end
if s[2] ~= S.ACTIVE and v[P_STATUS] == S.RESERVED then return {'NOT_ACTIVE', int_text(now), s[2]} end
if v[P_STATUS] == S.RESERVED then
  -- Its session's reservation deadline stays: the sweep finds it accepted.
  v[P_STATUS], v[P_ACTIVATED] = S.ACTIVE, now
  redis.call('HSET', gkey(k, sid), player_field(n), cmsgpack.pack(v))
elseif v[P_STATUS] ~= S.ACTIVE then
  return {'ENDED', int_text(now), v[P_STATUS]}
end
return player_reply('ACCEPTED', now, endpoint, v)
