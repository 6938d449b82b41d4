-- Removes locations from a fleet (DeleteFleetLocations): each becomes DELETING (event LOCATION_DELETING) and every
-- running process there is told to terminate (FLEET_DELETED) within the termination grace, its sessions ending
-- with it. A location disappears from the fleet once no process is left there (finish_fleet_deletion).
-- KEYS: k.claims, k.events, k.fleet, k.hosting, k.pool, k.ready, k.servers, k.term, k.utilized. ARGV[1] the grace,
-- termination ms, then the locations.
-- Reply: {outcome, now_ms, detail, {process id, replica, version}...}. Outcomes: DELETING, with the processes told;
-- NOT_FOUND; GONE (detail: the fleet's status, DELETING or TERMINATED); NO_LOCATION (detail: the location);
-- HOME (detail: the home location, which only deleting the fleet removes).
local now = now_ms()
local status = redis.call('HGET', k.fleet, 'status')
if not status then return {'NOT_FOUND', int_text(now), ''} end
if status == S.DELETING or status == S.TERMINATED then return {'GONE', int_text(now), status} end
local home = fleet_location(k, '')
local removed = {}
for i = 2, #ARGV do
  if not fleet_location(k, ARGV[i]) then return {'NO_LOCATION', int_text(now), ARGV[i]} end
  if ARGV[i] == home then return {'HOME', int_text(now), home} end
  removed[ARGV[i]] = true
end
local out = {S.DELETING, int_text(now), ''}
for i = 2, #ARGV do
  local loc = ARGV[i]
  if redis.call('HGET', k.fleet, loc_field(loc, 'status')) ~= S.DELETING then
    redis.call('HSET', k.fleet, loc_field(loc, 'status'), S.DELETING, loc_field(loc, 'msg'), '',
      loc_field(loc, 'st_ms'), now)
    fleet_event(k, now, S.LOCATION_DELETING, '', {'location', loc})
  end
end
local deadline = now + tonumber(ARGV[1])
for _, id in ipairs(redis.call('ZRANGE', k.servers, 0, -1)) do end_for_deletion(k, id, deadline, out, removed) end
return out
