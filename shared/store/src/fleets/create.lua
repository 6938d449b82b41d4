-- Creates a fleet (CreateFleet): NEW, revision 1, with its locations, each INITIALIZED, or DEPLOYING when it is
-- given desired instances or standby servers. Every step is an event: FLEET_CREATED, then per location
-- LOCATION_ADDED (and LOCATION_DEPLOYING).
-- KEYS: k.fleet, k.events. ARGV[1] the configuration (encoded), then per location: its name, minimum, maximum and
-- desired instances, its encoded standby and viabilities, and 1 when it has standby servers (else 0).
-- Reply: {outcome, now_ms, fleet fields...}: CREATED, with the new record; EXISTS, with nothing changed.
local now = now_ms()
if redis.call('EXISTS', k.fleet) == 1 then return {'EXISTS', tostring(now)} end
local fields = {'cfg', ARGV[1], 'status', S.NEW, 'msg', '', 'st_ms', now, 'rev', 1, 'c_ms', now, 'u_ms', now}
local names, deploying = {}, {}
for i = 2, #ARGV, 6 do
  local loc = ARGV[i]
  local status = S.INITIALIZED
  if tonumber(ARGV[i + 3]) > 0 or ARGV[i + 5] == '1' then
    status = S.DEPLOYING
    deploying[#deploying + 1] = loc
  end
  names[#names + 1] = loc
  local values = {status = status, msg = '', st_ms = now, min = ARGV[i + 1], max = ARGV[i + 2],
    desired = ARGV[i + 3], cfg = ARGV[i + 4], susp = 0, c_ms = now}
  for name, value in pairs(values) do
    fields[#fields + 1] = loc_field(loc, name)
    fields[#fields + 1] = value
  end
end
fields[#fields + 1] = 'locs'
fields[#fields + 1] = table.concat(names, ' ')
redis.call('HSET', k.fleet, unpack(fields))
fleet_event(k, now, S.FLEET_CREATED, 'created with ' .. #names .. ' location(s)')
for _, loc in ipairs(names) do fleet_event(k, now, S.LOCATION_ADDED, '', {'location', loc}) end
for _, loc in ipairs(deploying) do
  fleet_event(k, now, S.LOCATION_DEPLOYING, 'given capacity or standby', {'location', loc})
end
local out = {'CREATED', tostring(now)}
append_fields(out, k.fleet)
return out
