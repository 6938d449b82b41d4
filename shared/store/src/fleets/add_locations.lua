-- Adds locations to a fleet (CreateFleetLocations), all or none: each INITIALIZED, or DEPLOYING when given desired
-- instances or standby servers. Events: LOCATION_ADDED (and LOCATION_DEPLOYING) per location.
-- KEYS: k.fleet, k.events. ARGV[1] most locations a fleet may have, then per location: its name, minimum, maximum
-- and desired instances, its encoded standby and viabilities, and 1 when it has standby servers (else 0).
-- Reply: {outcome, now_ms, detail, fleet fields...}. Outcomes: ADDED, with the record after the change; NOT_FOUND;
-- DELETING (detail: the fleet's status); EXISTS (detail: a location the fleet has); TOO_MANY (detail: how many it
-- has).
local now = now_ms()
local s = redis.call('HMGET', k.fleet, 'status', 'locs')
if not s[1] then return {'NOT_FOUND', int_text(now), ''} end
if s[1] == S.DELETING or s[1] == S.TERMINATED then return {S.DELETING, int_text(now), s[1]} end
local names = {}
for name in string.gmatch(s[2] or '', '%S+') do names[#names + 1] = name end
for i = 2, #ARGV, 6 do
  if fleet_location(k, ARGV[i]) then return {'EXISTS', int_text(now), ARGV[i]} end
end
if #names + (#ARGV - 1) / 6 > tonumber(ARGV[1]) then return {'TOO_MANY', int_text(now), tostring(#names)} end
for i = 2, #ARGV, 6 do names[#names + 1] = add_location(k, now, ARGV, i) end
redis.call('HSET', k.fleet, 'locs', table.concat(names, ' '))
local out = {'ADDED', int_text(now), ''}
append_fields(out, k.fleet)
return out
