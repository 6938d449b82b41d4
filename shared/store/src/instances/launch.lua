-- Records an instance LAUNCHING before its provisioner is asked to launch it, so that a reconciler dying in between
-- leaves a record for the next holder to find. The location notes its first launch since it became DEPLOYING (its
-- deployment deadlines run from it), and a NEW fleet becomes ACTIVATING (event FLEET_ACTIVATING).
-- KEYS: k.events, k.fleet. ARGV[1] location, ARGV[2] lease, ARGV[3] instance id, ARGV[4] instance type, ARGV[5] its
-- server ids, space-separated.
-- Reply: {RECORDED | FENCED, now_ms}. Recording an instance again (a retry after a lost reply) changes nothing.
local now = now_ms()
local loc = ARGV[1]
if not holds_lease(k, loc, ARGV[2]) then return {'FENCED', int_text(now)} end
if redis.call('EXISTS', k.vm .. ARGV[3]) == 1 then return {'RECORDED', int_text(now)} end
local servers = 0
for _ in string.gmatch(ARGV[5], '%S+') do servers = servers + 1 end
redis.call('HSET', k.vm .. ARGV[3], 'id', ARGV[3], 'loc', loc, 'type', ARGV[4], 'state', S.LAUNCHING,
  'launch_ms', now, 'servers', ARGV[5], 'handle', '', 'kill_ms', '', 'unreg', servers)
redis.call('ZADD', k.vms .. loc, now, ARGV[3])
tally_instance(k, ARGV[3])
local l = redis.call('HMGET', k.fleet, loc_field(loc, 'status'), loc_field(loc, 'st_ms'), loc_field(loc, 'first_ms'))
if l[1] == S.DEPLOYING and (not l[3] or tonumber(l[3]) < tonumber(l[2])) then
  redis.call('HSET', k.fleet, loc_field(loc, 'first_ms'), now)
end
if redis.call('HGET', k.fleet, 'status') == S.NEW then
  redis.call('HSET', k.fleet, 'status', S.ACTIVATING, 'msg', '', 'st_ms', now)
  fleet_event(k, now, S.FLEET_ACTIVATING, 'launching its first instances')
end
return {'RECORDED', int_text(now)}
