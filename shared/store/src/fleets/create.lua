-- Creates a fleet (CreateFleet): NEW, revision 1, with its locations, each INITIALIZED, or DEPLOYING when it is
-- given desired instances or standby servers. Every step is an event: FLEET_CREATED, then per location
-- LOCATION_ADDED (and LOCATION_DEPLOYING).
-- KEYS: k.fleet, k.events. ARGV[1] the configuration (encoded), ARGV[2] how long its events are kept (ms), ARGV[3]
-- its most concurrent game-session activations per instance (0 for no limit), ARGV[4] its settings (see
-- fleet_settings), then per location: its name, minimum, maximum and desired instances, its encoded standby and
-- viabilities, and 1 when it has standby servers (else 0).
-- Reply: {outcome, now_ms, '', fleet fields...}: CREATED, with the new record; EXISTS, with nothing changed.
local now = now_ms()
if redis.call('EXISTS', k.fleet) == 1 then return {'EXISTS', int_text(now), ''} end
redis.call('HSET', k.fleet, 'cfg', ARGV[1], 'ret_ms', ARGV[2], 'mca', ARGV[3], 'set', ARGV[4], 'status', S.NEW,
  'msg', '', 'st_ms', now, 'rev', 1, 'c_ms', now, 'u_ms', now, 'multi', 0)
fleet_event(k, now, S.FLEET_CREATED, 'created with ' .. (#ARGV - 4) / 6 .. ' location(s)')
local names = {}
for i = 5, #ARGV, 6 do names[#names + 1] = add_location(k, now, ARGV, i) end
redis.call('HSET', k.fleet, 'locs', table.concat(names, ' '))
local out = {'CREATED', int_text(now), ''}
append_fields(out, k.fleet)
return out
