-- Finishes deleting a fleet: once none of its processes is left (each ended, or was declared lost), a DELETING
-- fleet becomes TERMINATED (event FLEET_TERMINATED), and its record and events are kept for the retention, then
-- expire.
-- KEYS: k.events, k.fleet, k.servers. ARGV[1] the retention, ms.
-- Reply: {outcome, now_ms}: TERMINATED; WAITING (processes are left, or the fleet is not DELETING).
local now = now_ms()
if redis.call('HGET', k.fleet, 'status') ~= S.DELETING then return {'WAITING', tostring(now)} end
for _, id in ipairs(redis.call('ZRANGE', k.servers, 0, -1)) do
  if redis.call('HEXISTS', k.gs .. id, 'pstate') == 1 then return {'WAITING', tostring(now)} end
end
redis.call('HSET', k.fleet, 'status', S.TERMINATED, 'msg', '', 'st_ms', now)
fleet_event(k, now, S.FLEET_TERMINATED, '')
redis.call('PEXPIRE', k.fleet, ARGV[1])
redis.call('PEXPIRE', k.events, ARGV[1])
return {S.TERMINATED, tostring(now)}
