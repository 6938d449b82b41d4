-- Deletes a fleet (DeleteFleet): it reads the fleet's sessions and ends its processes.
-- Refused while game sessions are ACTIVATING, ACTIVE or TERMINATING (every session not yet ended), or servers are
-- claimed or UTILIZED (FleetIQ's SAFE_DELETE), unless forced.
-- The fleet becomes DELETING, and each of its processes still running is told to terminate (FLEET_DELETED) within
-- the termination grace: its sessions take no new players and end with it; its servers registered through
-- GameServerService (FleetIQ's) are deregistered at once. The fleet becomes TERMINATED once no process is left
-- (finish_fleet_deletion).
-- KEYS: k.claims, k.ended, k.events, k.fleet, k.hosting, k.pool, k.ready, k.servers, k.sessions, k.term, k.utilized.
-- ARGV[1] 1 to force, ARGV[2] the expected revision ('0' for any), ARGV[3] the termination grace, ms.
-- Reply: {outcome, now_ms, detail, {process id, replica, version}...}. Outcomes: DELETING, with the processes told
-- (for their health replicas to be told in turn); NOT_FOUND; GONE (detail: DELETING or TERMINATED); CONFLICT
-- (detail: its revision); LIVE (detail: how many game sessions are live, then how many servers are claimed or
-- UTILIZED).
local now = now_ms()
local s = redis.call('HMGET', k.fleet, 'status', 'rev')
if not s[1] then return {'NOT_FOUND', int_text(now), ''} end
if s[1] == S.DELETING or s[1] == S.TERMINATED then return {'GONE', int_text(now), s[1]} end
if ARGV[2] ~= '0' and ARGV[2] ~= s[2] then return {'CONFLICT', int_text(now), s[2]} end
-- Ended sessions are in both sets until they expire, so the live ones are the difference.
local live = redis.call('ZCARD', k.sessions) - redis.call('ZCARD', k.ended)
local in_use = redis.call('ZCARD', k.claims) + redis.call('ZCARD', k.utilized)
if live + in_use > 0 and ARGV[1] ~= '1' then return {'LIVE', int_text(now), tostring(live), tostring(in_use)} end
redis.call('HSET', k.fleet, 'status', S.DELETING, 'msg', '', 'st_ms', now)
fleet_event(k, now, S.FLEET_DELETING, live .. ' game session(s) live')
local out = {S.DELETING, int_text(now), ''}
local deadline = now + tonumber(ARGV[3])
for _, id in ipairs(redis.call('ZRANGE', k.servers, 0, -1)) do end_for_deletion(k, id, deadline, out) end
return out
