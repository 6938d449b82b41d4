-- Drains an instance whose type is not viable: DRAINING, its servers claimed and placed on only as a last resort
-- (event INSTANCE_DRAINING).
-- KEYS: k.events, k.fleet, k.inst_status, k.pool. ARGV[1] location, ARGV[2] lease, ARGV[3] instance id.
-- Reply: {DRAINING | GONE | FENCED, now_ms}.
local now = now_ms()
local loc, id = ARGV[1], ARGV[3]
if not holds_lease(k, loc, ARGV[2]) then return {'FENCED', int_text(now)} end
local vm = k.vm .. id
local state = redis.call('HGET', vm, 'state')
if not state or state == S.TERMINATING then return {'GONE', int_text(now)} end
if state ~= S.DRAINING then
  redis.call('HSET', vm, 'state', S.DRAINING)
  tally_instance(k, id)
  redis.call('HSET', k.inst_status, id, S.DRAINING)
  set_istatus(k, k.pool, instance_servers(vm), S.DRAINING, now)
  fleet_event(k, now, S.INSTANCE_DRAINING, 'its instance type ' .. redis.call('HGET', vm, 'type') .. ' is not viable',
    {'location', loc, 'instance_id', id})
end
return {S.DRAINING, int_text(now)}
