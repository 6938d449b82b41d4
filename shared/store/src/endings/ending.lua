-- A process ends of its own accord (ProcessEnding): its sessions end, it leaves the fleet, and the event is
-- recorded. Ending again, or ending after being declared lost, is ENDED and changes nothing more.
-- KEYS: k.claims, k.due, k.ended, k.events, k.fleet, k.hb, k.hosting, k.pool, k.ready, k.servers, k.sevents, k.term,
-- k.term_due, k.unhealthy, k.utilized. ARGV[1] game-server id, ARGV[2] registration id, ARGV[3]
-- reason given. Reply: {ENDED | UNKNOWN, now_ms}.
local now = now_ms()
local id = ARGV[1]
local key = k.gs .. id
local state = redis.call('HMGET', key, 'reg', 'pstate', 'instance', 'term_reason')
if state[1] ~= ARGV[2] then
  if state[1] == false and ARGV[2] ~= '' then return {'ENDED', int_text(now)} end
  return {'UNKNOWN', int_text(now)}
end
if state[2] ~= S.LOST then
  retire(k, id)
  local reason = S.ENDED_BY_SERVER
  if state[2] == S.TERMINATING then reason = told_end_reason(state[4], S.TRIGGERED_ON_PROCESS_TERMINATE) end
  end_sessions(k, key, S.TERMINATED, reason, now)
  process_event(k, now, S.SERVER_PROCESS_TERMINATED, 'ProcessEnding: ' .. ARGV[3], id)
end
if state[3] then redis.call('SREM', k.inst .. state[3], id) end
redis.call('ZREM', k.servers, id)
tally_server(k, id, true)
redis.call('DEL', key, key .. ':sessions')
return {'ENDED', int_text(now)}
