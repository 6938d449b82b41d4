-- Records that the provisioner could not stop an instance, asked to (ARGV[4] 'stop': its processes asked to exit;
-- 'kill': killed at its kill time): event INSTANCE_STOP_FAILED with the provisioner's error, once per instance and
-- request however often the reconciler asks again (every pass while the instance runs), so that a provisioner that
-- keeps failing writes one event, not one a pass. The instance's record keeps when each request first failed
-- (stop_failed_ms, kill_failed_ms), and goes with it.
-- KEYS: k.events, k.fleet. ARGV[1] location, ARGV[2] lease, ARGV[3] instance id, ARGV[4] stop | kill, ARGV[5] the
-- event's message.
-- Reply: {RECORDED | UNCHANGED | GONE | FENCED, now_ms}. UNCHANGED: that request's failure was recorded before.
local now = now_ms()
local loc, id = ARGV[1], ARGV[3]
if not holds_lease(k, loc, ARGV[2]) then return {'FENCED', int_text(now)} end
local vm = k.vm .. id
if redis.call('EXISTS', vm) == 0 then return {'GONE', int_text(now)} end
if redis.call('HSETNX', vm, ARGV[4] .. '_failed_ms', now) == 0 then return {'UNCHANGED', int_text(now)} end
fleet_event(k, now, S.INSTANCE_STOP_FAILED, ARGV[5], {'location', loc, 'instance_id', id})
return {'RECORDED', int_text(now)}
