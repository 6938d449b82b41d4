-- Writes a change of a fleet that the fleet service computed from its record: its configuration, only if the fleet
-- is still at the revision the change was computed from (the revision is then raised), and its locations' standby,
-- viabilities and suspension, each only if the location is still at the version the change was computed from and
-- is not being deleted (its version is then raised). A change computed from an older record is refused whole, so
-- that two changes never undo each other; each step is an event.
-- KEYS: k.fleet, k.events, k.servers. ARGV[1] the revision the configuration change was computed from ('' when the
-- change leaves the configuration), ARGV[2] the new configuration (encoded; '' when left), ARGV[3] its most
-- concurrent game-session activations per instance and ARGV[4] its settings (see fleet_settings; both with the
-- configuration), ARGV[5] how many locations follow, ARGV[6] 1 when the launch settings changed (every UNHEALTHY
-- location starts DEPLOYING again, event LOCATION_DEPLOYING), then per location: its name, version, encoded
-- standby and viabilities, suspension (1 | 0), and 1 when it has standby servers (an INITIALIZED location given
-- them starts DEPLOYING, as one given instances does); then per event: its code, location and message.
-- Reply: {outcome, now_ms, detail, fleet fields...}. Outcomes: WRITTEN, with the record after the change;
-- NOT_FOUND; DELETING (detail: the fleet's status); CONFLICT (detail: what changed since).
local now = now_ms()
local s = redis.call('HMGET', k.fleet, 'status', 'rev')
if not s[1] then return {'NOT_FOUND', int_text(now), ''} end
if s[1] == S.DELETING or s[1] == S.TERMINATED then return {S.DELETING, int_text(now), s[1]} end
if ARGV[1] ~= '' and ARGV[1] ~= s[2] then return {'CONFLICT', int_text(now), 'revision ' .. s[2]} end
local events_at = 7 + 5 * tonumber(ARGV[5])
for i = 7, events_at - 1, 5 do
  local loc = ARGV[i]
  local l = redis.call('HMGET', k.fleet, loc_field(loc, 'ver'), loc_field(loc, 'status'))
  if not fleet_location(k, loc) or l[1] ~= ARGV[i + 1] or l[2] == S.DELETING then
    return {'CONFLICT', int_text(now), 'location ' .. loc}
  end
end
if ARGV[1] ~= '' then
  redis.call('HSET', k.fleet, 'cfg', ARGV[2], 'set', ARGV[4], 'rev', tonumber(s[2]) + 1, 'u_ms', now)
  if redis.call('HGET', k.fleet, 'mca') ~= ARGV[3] then
    -- The locations' counts of activatable sessions were taken with the old limit, which every instance's aggregate
    -- keeps a copy of: every instance is counted anew, those with servers and those a reconciler keeps.
    redis.call('HSET', k.fleet, 'mca', ARGV[3])
    local counted = {}
    local function recount(instance)
      if instance and not counted[instance] then
        counted[instance] = true
        tally_instance(k, instance)
      end
    end
    for loc in string.gmatch(redis.call('HGET', k.fleet, 'locs'), '%S+') do
      redis.call('HSET', k.tally .. loc, 'mca', ARGV[3])
      for _, id in ipairs(redis.call('ZRANGE', k.vms .. loc, 0, -1)) do recount(id) end
    end
    for _, id in ipairs(redis.call('ZRANGE', k.servers, 0, -1)) do
      recount(redis.call('HGET', k.gs .. id, 'instance'))
    end
  end
end
for i = 7, events_at - 1, 5 do
  local loc = ARGV[i]
  redis.call('HSET', k.fleet, loc_field(loc, 'cfg'), ARGV[i + 2], loc_field(loc, 'susp'), ARGV[i + 3],
    loc_field(loc, 'ver'), redis.call('HINCRBY', k.fleet, 'lver', 1))
end
for i = events_at, #ARGV, 3 do
  local extra = nil
  if ARGV[i + 1] ~= '' then extra = {'location', ARGV[i + 1]} end
  fleet_event(k, now, ARGV[i], ARGV[i + 2], extra)
end
for i = 7, events_at - 1, 5 do
  local loc = ARGV[i]
  if ARGV[i + 4] == '1' and redis.call('HGET', k.fleet, loc_field(loc, 'status')) == S.INITIALIZED then
    location_deploying(k, now, loc, 'given standby servers')
  end
end
if ARGV[6] == '1' then
  for loc in string.gmatch(redis.call('HGET', k.fleet, 'locs'), '%S+') do
    if redis.call('HGET', k.fleet, loc_field(loc, 'status')) == S.UNHEALTHY then
      location_deploying(k, now, loc, 'given new launch settings')
    end
  end
end
local out = {'WRITTEN', int_text(now), ''}
append_fields(out, k.fleet)
return out
