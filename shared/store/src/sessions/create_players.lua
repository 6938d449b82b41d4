-- Reserves slots in an ACTIVE game session that accepts players, for one or more players, all or none: the count
-- is checked against the maximum here, in the one script every creation runs, so no race can overfill a session.
-- A player who already holds a RESERVED or ACTIVE player session in it with the same data gets that one back and
-- takes no new slot.
-- KEYS: k.due, k.players. ARGV[1] game session id, then per player: player id, player data. A new player
-- session is numbered after the session's last (player_session_id). A reservation is no session event: its caller
-- holds the reply.
-- Reply: {outcome, now_ms, detail}, for CREATED the endpoint then each player session in the request's order
-- (players_reply, append_player). Outcomes: CREATED;
-- NOT_FOUND; NOT_ACTIVE (detail: its status); DENY_ALL; FULL (detail: free slots); PLAYER_CONFLICT (detail: the
-- player holding a live player session with other data, or named twice in the request with other data).
local now = now_ms()
local sid = ARGV[1]
local key = gkey(k, sid)
-- Its fields, then its first player session (see below) and the seats of the players asked for: one read.
local read = {'status', 'accept', 'cur', 'max', 'res_ms', 'loc', 'ip', 'dns', 'port', 'srv_end', 'c_ms', 'np', 'inst',
  'tly', 'act_ms', player_field(1)}
local first_player = #read
for i = 2, #ARGV, 2 do read[#read + 1] = seat_field(ARGV[i]) end
local s = redis.call('HMGET', key, unpack(read))
if not s[1] then
  local ended = ended_session(k, sid)
  if ended then return {'NOT_ACTIVE', int_text(now), by_name(ended.fields).status} end
  return {'NOT_FOUND', int_text(now), ''}
end
if s[1] ~= S.ACTIVE then return {'NOT_ACTIVE', int_text(now), s[1]} end
-- Its server was told to end (scale-in, unhealthy…): the session ends with it, so nobody new should join.
if s[10] == '1' then return {'NOT_ACTIVE', int_text(now), 'ACTIVE on a server that is ending'} end
if s[2] ~= '1' then return {'DENY_ALL', int_text(now), ''} end
-- Players holding a slot already (their seat names the number of their live player session): their player
-- sessions, read in one call, must carry the same data.
local numbered = tonumber(s[12] or '0')
-- A session that made player sessions keeps its first: missing, its players are an earlier release's, adopted.
if numbered > 0 and not s[first_player] and adopt_players(k, sid) then s = redis.call('HMGET', key, unpack(read)) end
local held, held_fields = {}, {}
for i = 2, #ARGV, 2 do
  local seat = s[first_player + i / 2]
  if seat and seat ~= '' then
    held[#held + 1] = i
    held_fields[#held_fields + 1] = player_field(seat)
  end
end
local held_values = {}
if #held > 0 then
  local packed = redis.call('HMGET', key, unpack(held_fields))
  for j, i in ipairs(held) do
    local v = cmsgpack.unpack(packed[j])
    if v[P_DATA] ~= ARGV[i + 1] then return {'PLAYER_CONFLICT', int_text(now), ARGV[i]} end
    held_values[i] = v
  end
end
-- Players new to the session take a slot each, however often the request names them.
local fresh, data_of = 0, {}
for i = 2, #ARGV, 2 do
  if not held_values[i] then
    local data = data_of[ARGV[i]]
    if data and data ~= ARGV[i + 1] then return {'PLAYER_CONFLICT', int_text(now), ARGV[i]} end
    if not data then fresh = fresh + 1 end
    data_of[ARGV[i]] = ARGV[i + 1]
  end
end
local cur, max = tonumber(s[3]), tonumber(s[4])
if cur + fresh > max then return {'FULL', int_text(now), tostring(max - cur)} end
local until_ms = now + tonumber(s[5])
local out = players_reply('CREATED', now, {s[6], s[7], s[8], s[9]})
-- New ones are numbered on from the session's last, written with its count and its share, in one HSET.
local also = {'cur', int_text(cur + fresh), 'np', int_text(numbered + fresh)}
local made, listed = {}, {}
for i = 2, #ARGV, 2 do
  local v = held_values[i] or made[ARGV[i]]
  if not v then
    v = {numbered + 1, ARGV[i], S.RESERVED, ARGV[i + 1], now, false, false}
    numbered = v[1]
    made[ARGV[i]] = v
    extend(also, {player_field(v[1]), cmsgpack.pack(v), seat_field(ARGV[i]), int_text(v[1])})
    extend(listed, {'0', player_entry(ARGV[i], now, player_session_id(sid, v[1]))})
  end
  append_player(out, v, reservation_deadline(v, s[15], s[5]) or false)
end
if fresh > 0 then
  redis.call('ZADD', k.players, unpack(listed))
  -- The session waits for its earliest reservation; a later one than that it already waits for changes nothing.
  redis.call('ZADD', k.due, 'LT', int_text(until_ms), sid)
  index_counts(k, sid, {s[6], s[13], s[1], cur + fresh, max, s[2], s[10], s[14], s[11]}, cur < max, also,
    fresh)
end
return out
