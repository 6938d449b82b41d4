-- Finishes deletions (DeleteFleet, DeleteFleetLocations) once no process and no instance is left where they apply
-- (each process ended, or was declared lost, and no new one registers there meanwhile, as attach refuses it): a DELETING location disappears
-- from its fleet (event LOCATION_REMOVED) with its counts and autoscaling state, and a DELETING fleet becomes
-- TERMINATED (event FLEET_TERMINATED), its record, events, counts and scaling policies kept for the retention, then
-- expiring.
-- KEYS: k.ended, k.events, k.fleet, k.inst_status, k.policies, k.servers, k.sessions, k.sevents, k.sevents_gone,
-- k.writers. ARGV[1] the retention, ms.
-- Reply: {outcome, now_ms, locations removed...}. Outcomes: TERMINATED; WAITING (the fleet is not finished, or not
-- DELETING); GONE (no record, as when a TERMINATED one's retention passed, and nothing of it left for a sweep: the
-- fleet may leave the list of fleets, fleets::forget).
local now = now_ms()
local f = redis.call('HMGET', k.fleet, 'status', 'locs')
local status = f[1]
-- Its servers and its sessions, live or ended, need a record to begin with; the sweeps that end them need the fleet
-- listed until they are gone.
if not status and redis.call('EXISTS', k.ended, k.servers, k.sessions) == 0 then return {'GONE', int_text(now)} end
local names = {}
for name in string.gmatch(f[2] or '', '%S+') do names[#names + 1] = name end
local deleting = {}
for _, loc in ipairs(names) do
  if redis.call('HGET', k.fleet, loc_field(loc, 'status')) == S.DELETING then deleting[loc] = true end
end
if status ~= S.DELETING and next(deleting) == nil then return {'WAITING', int_text(now)} end
-- Where processes are left.
local busy, any = {}, false
for _, id in ipairs(redis.call('ZRANGE', k.servers, 0, -1)) do
  local s = redis.call('HMGET', k.gs .. id, 'pstate', 'loc')
  if s[1] then
    any = true
    busy[s[2]] = true
  end
end
-- Where instances are left (their reconciler removes them once nothing of them runs).
for _, loc in ipairs(names) do
  if redis.call('EXISTS', k.vms .. loc) == 1 then
    any = true
    busy[loc] = true
  end
end
local out, kept = {'WAITING', int_text(now)}, {}
for _, loc in ipairs(names) do
  if deleting[loc] and not busy[loc] and status ~= S.DELETING then
    local fields = {}
    for _, name in ipairs({'status', 'msg', 'st_ms', 'min', 'max', 'desired', 'cfg', 'susp', 'c_ms', 'ver', 'first_ms',
      'seen_ms'}) do
      fields[#fields + 1] = loc_field(loc, name)
    end
    redis.call('HDEL', k.fleet, unpack(fields))
    redis.call('DEL', k.counts .. loc, k.tally .. loc, k.scale .. loc)
    fleet_event(k, now, S.LOCATION_REMOVED, '', {'location', loc})
    out[#out + 1] = loc
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
  -- Its game sessions' events, which the session sweep no longer trims to nothing once it stops, expire with it;
  -- its ended sessions are deleted by that sweep when their own retention passes, as it keeps sweeping the fleet.
  redis.call('PEXPIRE', k.sevents, ARGV[1])
  redis.call('PEXPIRE', k.sevents_gone, ARGV[1])
  redis.call('PEXPIRE', k.writers, ARGV[1])
  for _, loc in ipairs(kept) do
    redis.call('PEXPIRE', k.counts .. loc, ARGV[1])
    redis.call('PEXPIRE', k.tally .. loc, ARGV[1])
    redis.call('PEXPIRE', k.scale .. loc, ARGV[1])
  end
  -- The counts of its FleetIQ servers, which have no location (those of location '').
  redis.call('PEXPIRE', k.counts, ARGV[1])
  redis.call('PEXPIRE', k.tally, ARGV[1])
  redis.call('PEXPIRE', k.inst_status, ARGV[1])
  -- Its scaling policies, readable as long as the fleet.
  for _, name in ipairs(redis.call('ZRANGE', k.policies, 0, -1)) do
    redis.call('PEXPIRE', k.policy .. name, ARGV[1])
    redis.call('PEXPIRE', k.peval .. name, ARGV[1])
  end
  redis.call('PEXPIRE', k.policies, ARGV[1])
  out[1] = S.TERMINATED
end
return out
