-- Changes a location's capacity (UpdateFleetCapacity). The bounds given, merged with the current ones, must hold
-- minimum ≤ desired ≤ maximum, checked here so that two changes racing cannot leave a location out of order. An
-- INITIALIZED location given desired instances, or an UNHEALTHY one given any capacity, starts DEPLOYING. Events:
-- CAPACITY_CHANGED (with the desired count before and after), and LOCATION_DEPLOYING.
-- KEYS: k.fleet, k.events. ARGV[1] the location ('' for the home location), ARGV[2] minimum, ARGV[3] maximum,
-- ARGV[4] desired ('' for each one left as it is).
-- Reply: {outcome, now_ms, detail, fleet fields...}. Outcomes: CHANGED, with the record after the change;
-- NOT_FOUND; NO_LOCATION; DELETING (detail: 'fleet' or 'location'); OUT_OF_ORDER (detail: the merged minimum,
-- maximum and desired, space-separated).
local now = now_ms()
local status = redis.call('HGET', k.fleet, 'status')
if not status then return {'NOT_FOUND', int_text(now), ''} end
if status == S.DELETING or status == S.TERMINATED then return {S.DELETING, int_text(now), 'fleet'} end
local loc = fleet_location(k, ARGV[1])
if not loc then return {'NO_LOCATION', int_text(now), ''} end
local f = function(name) return loc_field(loc, name) end
local s = redis.call('HMGET', k.fleet, f('status'), f('min'), f('max'), f('desired'))
if s[1] == S.DELETING then return {S.DELETING, int_text(now), 'location'} end
local merged = {}
for i, given in ipairs({ARGV[2], ARGV[3], ARGV[4]}) do
  if given == '' then merged[i] = tonumber(s[i + 1]) else merged[i] = tonumber(given) end
end
local min, max, desired = merged[1], merged[2], merged[3]
if not (min <= desired and desired <= max) then
  return {'OUT_OF_ORDER', int_text(now), min .. ' ' .. max .. ' ' .. desired}
end
redis.call('HSET', k.fleet, f('min'), min, f('max'), max, f('desired'), desired)
fleet_event(k, now, S.CAPACITY_CHANGED,
  'minimum ' .. min .. ', maximum ' .. max .. ', desired ' .. s[4] .. ' → ' .. desired,
  {'location', loc, 'prev', s[4], 'new', desired})
if (s[1] == S.INITIALIZED and desired > 0) or s[1] == S.UNHEALTHY then
  location_deploying(k, now, loc, 'given capacity')
end
local out = {'CHANGED', int_text(now), ''}
append_fields(out, k.fleet)
return out
