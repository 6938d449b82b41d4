-- A process ends of its own accord (ProcessEnding): its sessions end, it leaves the fleet, and the event is
-- recorded. Ending again, or ending after being declared lost, is ENDED and changes nothing more.
-- KEYS/ARGV[1..3]: see fleet_context(). ARGV[4] game-server id, ARGV[5] registration id, ARGV[6] reason given.
-- Reply: {ENDED | UNKNOWN, now_ms}.
local k = fleet_context(KEYS, ARGV)
local now = now_ms()
local id = ARGV[4]
local key = k.server_prefix .. id
local state = redis.call('HMGET', key, 'reg', 'pstate', 'instance')
if state[1] ~= ARGV[5] then
  if state[1] == false and ARGV[5] ~= '' then return {'ENDED', tostring(now)} end
  return {'UNKNOWN', tostring(now)}
end
if state[2] ~= 'LOST' then
  retire(k, id)
  local reason = 'TRIGGERED_ON_PROCESS_TERMINATE'
  if state[2] ~= 'TERMINATING' then reason = 'ENDED_BY_SERVER' end
  end_sessions(k, key, 'TERMINATED', reason, now)
  record_event(k, 'SERVER_PROCESS_TERMINATED', id, 'ProcessEnding: ' .. ARGV[6], now)
end
if state[3] then redis.call('SREM', k.instance_prefix .. state[3], id) end
redis.call('ZREM', k.servers, id)
redis.call('DEL', key, key .. ':sessions')
return {'ENDED', tostring(now)}
