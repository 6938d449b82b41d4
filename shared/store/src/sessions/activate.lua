-- The process hosting a game session has it ready for players (ActivateGameSession): ACTIVATING → ACTIVE. It
-- enters the search indexes, and the reservation timers of player sessions reserved with it start now. Activating
-- again is ACTIVATED and changes nothing.
-- KEYS: k.act_due, k.res_due, k.sevents. ARGV[1] game-server id, ARGV[2] game session id.
-- Reply: {ACTIVATED | NOT_FOUND | NOT_YOURS | ENDED, now_ms, session fields...}.
local now = now_ms()
local sid = ARGV[2]
local key = gkey(k, sid)
-- Read whole once: the event shows it, and its RESERVED player sessions get their deadlines.
local fields = redis.call('HGETALL', key)
local s = by_name(fields)
if not s.server then
  local ended = ended_session(k, sid)
  if not ended then return {'NOT_FOUND', tostring(now)} end
  if by_name(ended.fields).server ~= ARGV[1] then return {'NOT_YOURS', tostring(now)} end
  return append_pairs({'ENDED', tostring(now)}, ended.fields)
end
if s.server ~= ARGV[1] then return {'NOT_YOURS', tostring(now)} end
if s.status == S.ACTIVATING then
  if not s['@'] then
    hold_players(k, sid)
    fields = redis.call('HGETALL', key)
    s = by_name(fields)
  end
  redis.call('ZREM', k.act_due, sid)
  local until_ms = now + tonumber(s.res_ms)
  -- No player is let in before its session is ACTIVE: every live player session is RESERVED still, its deadline
  -- this activation's time plus res_ms (with_deadline).
  local due, live = {}, live_players(k, sid, fields)
  for i = 2, #live, 2 do due[#due + 1], due[#due + 2] = until_ms, live[i] end
  if #due > 0 then redis.call('ZADD', k.res_due, unpack(due)) end
  -- Its new status is written with its share, in one HSET.
  index_session(k, sid, {s.loc, s.inst, S.ACTIVE, s.cur, s.max, s.accept, s.srv_end, s.tly or false, s.c_ms},
    {'status', S.ACTIVE, 'act_ms', now})
  fields = with_changes(fields, {status = S.ACTIVE, act_ms = tostring(now), act_by_ms = false})
  return append_pairs({'ACTIVATED', tostring(now)}, session_event(k, S.GAME_SESSION_ACTIVATED, key, now, fields))
elseif s.status ~= S.ACTIVE then
  return append_pairs({'ENDED', tostring(now)}, fields)
end
return append_pairs({'ACTIVATED', tostring(now)}, fields)
