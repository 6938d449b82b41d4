-- Ends a game session on request (TerminateGameSession). FORCE: TERMINATED (FORCE_TERMINATED) at once.
-- TRIGGER: TERMINATING until its server ends it, forced after the grace period. A server left hosting nothing
-- else is told to end (GameLift's onProcessTerminate); one hosting other sessions only drops this one.
-- KEYS: k.act_due, k.claims, k.due, k.ended, k.fleet, k.hosting, k.pool, k.ready, k.sevents, k.term, k.term_due,
-- k.utilized. ARGV[1] game session id, ARGV[2] FORCE | TRIGGER. The grace period is the fleet's (fleet_settings); a
-- session whose fleet's record is gone has none.
-- Reply: {outcome, now_ms, replica, version, desired state (''), server id, session fields...}. Outcomes: TERMINATED,
-- TERMINATING, NOT_FOUND, ENDED (it had ended already).
local now = now_ms()
local sid, force, deadline = ARGV[1], ARGV[2] == 'FORCE', now + termination_grace_ms(k)
local key = gkey(k, sid)
local s = redis.call('HMGET', key, 'status', 'server')
if not s[1] then
  local ended = ended_session(k, sid)
  if not ended then return session_reply('NOT_FOUND', now) end
  local server = by_name(ended.fields).server
  return session_reply('ENDED', now, server, k.gs .. server, ended.fields)
end
local outcome, fields = S.TERMINATING, nil
if s[1] == S.TERMINATED or s[1] == S.ERROR then
  outcome = 'ENDED'
elseif force then
  outcome = S.TERMINATED
  fields = end_game_session(k, sid, S.TERMINATED, S.FORCE_TERMINATED, now)
elseif s[1] ~= S.TERMINATING then
  redis.call('HSET', key, 'status', S.TERMINATING, 'reason', '', 'term_by_ms', deadline)
  redis.call('HDEL', key, 'act_by_ms')
  -- It no longer waits for its activation (in act_due, had an earlier release created it: lest a sweep of that
  -- release, still running, time it out); an activated one still waits for its players' reservations.
  if s[1] == S.ACTIVATING and redis.call('ZREM', k.due, sid) == 0 then redis.call('ZREM', k.act_due, sid) end
  redis.call('ZADD', k.term_due, deadline, sid)
  index_session(k, sid)
  session_event(k, S.GAME_SESSION_TERMINATING, key, now)
end
local server_key = k.gs .. s[2]
local pstate = redis.call('HGET', server_key, 'pstate')
if outcome ~= 'ENDED' and pstate and pstate ~= S.LOST then
  local others = 0
  for _, other in ipairs(redis.call('SMEMBERS', server_key .. ':sessions')) do
    if other ~= sid then others = others + 1 end
  end
  if others == 0 and pstate ~= S.TERMINATING then
    local stop = '0'
    if force then stop = '1' end
    ask_to_end(k, s[2], S.GAME_SESSION_TERMINATED, deadline, stop)
  else
    redis.call('HINCRBY', server_key, 'ver', 1)
    track_room(k, s[2])
    tally_server(k, s[2])
  end
end
return session_reply(outcome, now, s[2], server_key, fields or session_fields(k, sid))
