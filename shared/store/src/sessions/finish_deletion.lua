-- Carries deletions on (DeleteFleet, DeleteFleetLocations). A process that registered where a deletion applies
-- after it began (one starting up meanwhile, an ANYWHERE server) is told to terminate too, as the deletion told the
-- others. Once no process is left where a deletion applies (each ended, or was declared lost), a DELETING location
-- disappears from its fleet (event LOCATION_REMOVED), and a DELETING fleet becomes TERMINATED (event
-- FLEET_TERMINATED), its record and events kept for the retention, then expiring.
-- KEYS: k.claims, k.events, k.fleet, k.hosting, k.pool, k.ready, k.servers, k.term. ARGV[1] the retention, ms.
-- Reply: {outcome, now_ms, {locations removed}, {{process id, replica, version} told to terminate}}. Outcomes:
-- TERMINATED; WAITING (the fleet is not finished, or not DELETING).
local now = now_ms()
local f = redis.call('HMGET', k.fleet, 'status', 'locs', 'grace_ms')
local status = f[1]
local names = {}
for name in string.gmatch(f[2] or '', '%S+') do names[#names + 1] = name end
local deleting = {}
for _, loc in ipairs(names) do
  if redis.call('HGET', k.fleet, loc_field(loc, 'status')) == S.DELETING then deleting[loc] = true end
end
if status ~= S.DELETING and next(deleting) == nil then return {'WAITING', tostring(now), {}, {}} end
local deadline = now + tonumber(f[3] or '0')
-- Where processes are left, telling those that came after the deletion to end.
local busy, any, told = {}, false, {}
for _, id in ipairs(redis.call('ZRANGE', k.servers, 0, -1)) do
  local s = redis.call('HMGET', k.gs .. id, 'pstate', 'loc')
  if s[1] then
    any = true
    busy[s[2]] = true
    if status == S.DELETING then
      end_for_deletion(k, id, deadline, told)
    elseif deleting[s[2]] then
      end_for_deletion(k, id, deadline, told, deleting)
    end
  end
end
local removed, kept = {}, {}
for _, loc in ipairs(names) do
  if deleting[loc] and not busy[loc] and status ~= S.DELETING then
    local fields = {}
    for _, name in ipairs({'status', 'msg', 'st_ms', 'min', 'max', 'desired', 'cfg', 'susp', 'c_ms', 'ver'}) do
      fields[#fields + 1] = loc_field(loc, name)
    end
    redis.call('HDEL', k.fleet, unpack(fields))
    fleet_event(k, now, S.LOCATION_REMOVED, '', {'location', loc})
    removed[#removed + 1] = loc
  else
    kept[#kept + 1] = loc
  end
end
redis.call('HSET', k.fleet, 'locs', table.concat(kept, ' '))
if status == S.DELETING and not any then
  redis.call('HSET', k.fleet, 'status', S.TERMINATED, 'msg', '', 'st_ms', now)
  fleet_event(k, now, S.FLEET_TERMINATED, '')
  redis.call('PEXPIRE', k.fleet, ARGV[1])
  redis.call('PEXPIRE', k.events, ARGV[1])
  return {S.TERMINATED, tostring(now), removed, told}
end
return {'WAITING', tostring(now), removed, told}
