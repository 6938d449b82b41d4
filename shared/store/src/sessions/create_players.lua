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
local s = redis.call('HMGET', key, 'status', 'accept', 'cur', 'max', 'res_ms', 'loc', 'ip', 'dns', 'port', 'srv_end',
  'c_ms', 'np', 'inst', 'tly', 'act_ms')
if not s[1] then
  local ended = ended_session(k, sid)
  if ended then return {'NOT_ACTIVE', tostring(now), by_name(ended.fields).status} end
  return {'NOT_FOUND', tostring(now), ''}
end
if s[1] ~= S.ACTIVE then return {'NOT_ACTIVE', tostring(now), s[1]} end
-- Its server was told to end (scale-in, unhealthy…): the session ends with it, so nobody new should join.
if s[10] == '1' then return {'NOT_ACTIVE', tostring(now), 'ACTIVE on a server that is ending'} end
if s[2] ~= '1' then return {'DENY_ALL', tostring(now), ''} end
local live = key .. ':live'
-- A new player's entry in `live` is written as it is checked (one call where a read and a write would be two)
-- and taken back if the request fails.
local held, taken = {}, {}
local function give_back()
  for _, player in ipairs(taken) do redis.call('HDEL', live, player) end
end
-- New ones are numbered on from the session's last.
local numbered = tonumber(s[12] or '0')
local fresh_ids = {}
for i = 2, #ARGV, 2 do
  local next_id = player_session_id(sid, numbered + #taken + 1)
  if redis.call('HSETNX', live, ARGV[i], next_id) == 1 then
    taken[#taken + 1] = ARGV[i]
    fresh_ids[i] = next_id
  else
    local psid = redis.call('HGET', live, ARGV[i])
    if redis.call('HGET', pkey(k, psid), 'data') ~= ARGV[i + 1] then
      give_back()
      return {'PLAYER_CONFLICT', tostring(now), ARGV[i]}
    end
    held[i] = psid
  end
end
local fresh = #taken
local cur, max = tonumber(s[3]), tonumber(s[4])
if cur + fresh > max then
  give_back()
  return {'FULL', tostring(now), tostring(max - cur)}
end
local until_ms = now + tonumber(s[5])
local created = tostring(now)
local endpoint = {s[6], s[7], s[8], s[9]}
local out = {'CREATED', created, '', endpoint}
-- The hot path: a new player session's record is built here once and used for the hash and the reply,
-- rather than written and read back.
for i = 2, #ARGV, 2 do
  local psid = held[i]
  if psid then
    out[#out + 1] = with_deadline(redis.call('HGETALL', pkey(k, psid)), s[15], s[5])
  else
    psid = fresh_ids[i]
    local fields = {'id', psid, 'player', ARGV[i], 'gs', sid, 'status', S.RESERVED, 'data', ARGV[i + 1], 'c_ms', now}
    redis.call('HSET', pkey(k, psid), unpack(fields))
    -- Its deadline follows from its c_ms (with_deadline): the reply shows it, the record does not hold it.
    fields[#fields + 1], fields[#fields + 2] = 'until_ms', until_ms
    redis.call('ZADD', key .. ':ps', now, psid)
    redis.call('ZADD', k.player .. ARGV[i], now, listed_player(psid))
    redis.call('ZADD', k.res_due, until_ms, psid)
    out[#out + 1] = fields
  end
end
if fresh > 0 then
  index_counts(k, sid, {s[6], s[13], s[1], cur + fresh, max, s[2], s[10], s[14], s[11]}, cur < max,
    {'cur', cur + fresh, 'np', numbered + fresh})
end
return out
