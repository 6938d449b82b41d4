-- The process hosting a game session has it ready for players (ActivateGameSession): ACTIVATING → ACTIVE. It
-- enters the search indexes, and the reservation timers of player sessions reserved with it start now. Activating
-- again is ACTIVATED and changes nothing.
-- KEYS: k.act_due, k.res_due, k.sevents. ARGV[1] game-server id, ARGV[2] game session id.
-- Reply: {ACTIVATED | NOT_FOUND | NOT_YOURS | ENDED, now_ms, session fields...}.
local now = now_ms()
local sid = ARGV[2]
local key = gkey(k, sid)
-- Only the fields it needs: reading the record whole here and taking it apart in Lua costs Redis more than this
-- read and the one the event makes.
local s = redis.call('HMGET', key, 'server', 'status', 'res_ms', 'loc', 'inst', 'cur', 'max', 'accept', 'srv_end',
  'tly', 'c_ms')
if not s[1] then
  local ended = ended_session(k, sid)
  if not ended then return {'NOT_FOUND', int_text(now)} end
  if by_name(ended.fields).server ~= ARGV[1] then return {'NOT_YOURS', int_text(now)} end
  return append_pairs({'ENDED', int_text(now)}, ended.fields)
end
if s[1] ~= ARGV[1] then return {'NOT_YOURS', int_text(now)} end
local outcome = 'ACTIVATED'
if s[2] == S.ACTIVATING then
  redis.call('ZREM', k.act_due, sid)
  -- No player is let in before its session is ACTIVE: every player session holding a slot is RESERVED still, its
  -- deadline this activation's time plus res_ms (reservation_deadline), which the session waits for as one.
  if tonumber(s[6]) > 0 then redis.call('ZADD', k.res_due, int_text(now + tonumber(s[3])), sid) end
  -- Its new status is written with its share, in one HSET.
  index_session(k, sid, {s[4], s[5], S.ACTIVE, s[6], s[7], s[8], s[9], s[10], s[11]},
    {'status', S.ACTIVE, 'act_ms', int_text(now)})
  return append_pairs({outcome, int_text(now)}, session_event(k, S.GAME_SESSION_ACTIVATED, key, now))
elseif s[2] ~= S.ACTIVE then
  outcome = 'ENDED'
end
return reply(outcome, now, key)
