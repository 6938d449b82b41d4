-- Records what the provisioner answered to an instance's launch: the instance RUNNING with its handle (event
-- INSTANCE_LAUNCHED), or, when the launch failed, the instance forgotten (event INSTANCE_LAUNCH_FAILED with the
-- provisioner's message).
-- KEYS: k.events, k.fleet. ARGV[1] location, ARGV[2] lease, ARGV[3] instance id, ARGV[4] handle, ARGV[5] why the
-- launch failed ('' when it did not).
-- Reply: {LAUNCHED | LAUNCH_FAILED | GONE | FENCED, now_ms}. GONE: no such instance is recorded any more.
local now = now_ms()
local loc, id = ARGV[1], ARGV[3]
if not holds_lease(k, loc, ARGV[2]) then return {'FENCED', int_text(now)} end
local vm = k.vm .. id
if redis.call('EXISTS', vm) == 0 then return {'GONE', int_text(now)} end
local extra = {'location', loc, 'instance_id', id}
if ARGV[5] ~= '' then
  forget_instance(k, loc, id)
  fleet_event(k, now, S.INSTANCE_LAUNCH_FAILED, ARGV[5], extra)
  return {'LAUNCH_FAILED', int_text(now)}
end
if redis.call('HGET', vm, 'state') == S.LAUNCHING then
  redis.call('HSET', vm, 'state', S.RUNNING)
  tally_instance(k, id)
end
redis.call('HSET', vm, 'handle', ARGV[4])
fleet_event(k, now, S.INSTANCE_LAUNCHED, redis.call('HGET', vm, 'type'), extra)
return {'LAUNCHED', int_text(now)}
