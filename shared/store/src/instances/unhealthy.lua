-- A DEPLOYING location failed to deploy: UNHEALTHY with why (event LOCATION_UNHEALTHY); no more launches there until
-- its capacity or launch settings change.
-- KEYS: k.events, k.fleet. ARGV[1] location, ARGV[2] lease, ARGV[3] why.
-- Reply: {UNHEALTHY | UNCHANGED | FENCED, now_ms}. UNCHANGED: it was no longer DEPLOYING.
local now = now_ms()
local loc = ARGV[1]
if not holds_lease(k, loc, ARGV[2]) then return {'FENCED', int_text(now)} end
if redis.call('HGET', k.fleet, loc_field(loc, 'status')) ~= S.DEPLOYING then return {'UNCHANGED', int_text(now)} end
redis.call('HSET', k.fleet, loc_field(loc, 'status'), S.UNHEALTHY, loc_field(loc, 'msg'), ARGV[3],
  loc_field(loc, 'st_ms'), now)
fleet_event(k, now, S.LOCATION_UNHEALTHY, ARGV[3], {'location', loc})
return {S.UNHEALTHY, int_text(now)}
