-- The process hosting a game session has it ready for players (ActivateGameSession): ACTIVATING → ACTIVE. It
-- enters the search indexes, and the reservation timers of player sessions reserved with it start now. Activating
-- again is ACTIVATED and changes nothing.
-- KEYS: k.act_due, k.res_due, k.sevents. ARGV[1] game-server id, ARGV[2] game session id.
-- Reply: {ACTIVATED | NOT_FOUND | NOT_YOURS | ENDED, now_ms, session fields...}.
local now = now_ms()
local sid = ARGV[2]
local key = gkey(k, sid)
-- Read whole once: the event and the reply show the record as activation leaves it.
local live = redis.call('HGETALL', key)
local s = by_name(live)
if not s.server then
  local ended = ended_session(k, sid)
  if not ended then return {'NOT_FOUND', tostring(now)} end
  if by_name(ended.fields).server ~= ARGV[1] then return {'NOT_YOURS', tostring(now)} end
  return append_pairs({'ENDED', tostring(now)}, ended.fields)
end
if s.server ~= ARGV[1] then return {'NOT_YOURS', tostring(now)} end
local outcome = 'ACTIVATED'
if s.status == S.ACTIVATING then
  redis.call('ZREM', k.act_due, sid)
  -- No player is let in before its session is ACTIVE: every player session holding a slot is RESERVED still, its
  -- deadline this activation's time plus res_ms (reservation_deadline), which the session waits for as one.
  if tonumber(s.cur) > 0 then redis.call('ZADD', k.res_due, now + tonumber(s.res_ms), sid) end
  -- Its new status is written with its share, in one HSET.
  index_session(k, sid, {s.loc, s.inst, S.ACTIVE, s.cur, s.max, s.accept, s.srv_end or false, s.tly or false, s.c_ms},
    {'status', S.ACTIVE, 'act_ms', now})
  local fields = with_changes(live, {status = S.ACTIVE, act_ms = tostring(now)})
  return append_pairs({outcome, tostring(now)}, session_event(k, S.GAME_SESSION_ACTIVATED, key, now, fields))
elseif s.status ~= S.ACTIVE then
  outcome = 'ENDED'
end
return append_pairs({outcome, tostring(now)}, live)
