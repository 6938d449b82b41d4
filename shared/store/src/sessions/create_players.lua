-- Reserves slots in an ACTIVE game session that accepts players, for one or more players, all or none: the count
-- is checked against the maximum here, in the one script every creation runs, so no race can overfill a session.
-- A player who already holds a RESERVED or ACTIVE player session in it with the same data gets that one back and
-- takes no new slot.
-- KEYS: k.res_due. ARGV[1] game session id, then per player: player id, player data. A new player session is
-- numbered after the session's last (player_session_id). A reservation is no session event: its caller holds the
-- reply.
-- Reply: {outcome, now_ms, detail, {loc, ip, dns, port}, {player session fields...}...}. Outcomes: CREATED;
-- NOT_FOUND; NOT_ACTIVE (detail: its status); DENY_ALL; FULL (detail: free slots); PLAYER_CONFLICT (detail: the
-- player holding a live player session with other data).
local now = now_ms()
local sid = ARGV[1]
local key = gkey(k, sid)
local names = {'status', 'accept', 'cur', 'max', 'res_ms', 'loc', 'ip', 'dns', 'port', 'srv_end', 'c_ms', 'np', 'inst',
  'tly', 'act_ms', '@'}
-- The players' live entries (held_field) are read with the session, in one HMGET.
for i = 2, #ARGV, 2 do names[#names + 1] = '#' .. ARGV[i] end
local s = redis.call('HMGET', key, unpack(names))
if not s[1] then
  local ended = ended_session(k, sid)
  if ended then return {'NOT_ACTIVE', tostring(now), by_name(ended.fields).status} end
  return {'NOT_FOUND', tostring(now), ''}
end
if s[1] ~= S.ACTIVE then return {'NOT_ACTIVE', tostring(now), s[1]} end
-- Its server was told to end (scale-in, unhealthy…): the session ends with it, so nobody new should join.
if s[10] == '1' then return {'NOT_ACTIVE', tostring(now), 'ACTIVE on a server that is ending'} end
if s[2] ~= '1' then return {'DENY_ALL', tostring(now), ''} end
if not s[16] then
  hold_players(k, sid)
  s = redis.call('HMGET', key, unpack(names))
end
-- A player holding a live player session gets it back when the data is the same; new ones are numbered on from the
-- session's last. Nothing is written before every player is known to fit.
-- A player named twice in one request (which the service refuses) is held once.
local numbered = tonumber(s[12] or '0')
local held, fresh, written, named = {}, {}, {}, {}
for i = 2, #ARGV, 2 do
  local player, data = ARGV[i], ARGV[i + 1]
  local live = s[16 + i / 2]
  if named[player] or (live and live ~= '') then
    held[i] = named[player] or held_player(sid, live, redis.call('HGET', key, live))
    if by_name(held[i]).data ~= data then return {'PLAYER_CONFLICT', tostring(now), player} end
  else
    numbered = numbered + 1
    local psid = player_session_id(sid, numbered)
    held[i] = {'id', psid, 'gs', sid, 'player', player, 'status', S.RESERVED, 'data', data, 'c_ms', now}
    fresh[i], named[player] = psid, held[i]
    written[#written + 1], written[#written + 2] = '@' .. numbered, held_value(by_name(held[i]))
    written[#written + 1], written[#written + 2] = '#' .. player, '@' .. numbered
  end
end
local cur, max = tonumber(s[3]), tonumber(s[4])
local added = numbered - tonumber(s[12] or '0')
if cur + added > max then return {'FULL', tostring(now), tostring(max - cur)} end
local until_ms = now + tonumber(s[5])
local out = {'CREATED', tostring(now), '', {s[6], s[7], s[8], s[9]}}
local due = {}
for i = 2, #ARGV, 2 do
  local psid = fresh[i]
  if psid then
    due[#due + 1], due[#due + 2] = until_ms, psid
    redis.call('ZADD', k.player .. ARGV[i], now, listed_player(psid))
  end
  -- Its deadline follows from its c_ms and the session's activation (with_deadline): the reply shows it, the record
  -- does not hold it.
  out[#out + 1] = with_deadline(held[i], s[15], s[5])
end
if added > 0 then
  redis.call('ZADD', k.res_due, unpack(due))
  written[#written + 1], written[#written + 2] = 'cur', cur + added
  written[#written + 1], written[#written + 2] = 'np', numbered
  index_counts(k, sid, {s[6], s[13], s[1], cur + added, max, s[2], s[10], s[14], s[11]}, cur < max, written)
end
return out
