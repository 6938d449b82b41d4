-- Writes a change of a fleet that the fleet service computed from its record: its configuration, only if the fleet
-- is still at the revision the change was computed from (the revision is then raised), and its locations' standby,
-- viabilities and suspension, each only if the location is still at the version the change was computed from and
-- is not being deleted (its version is then raised). A change computed from an older record is refused whole, so
-- that two changes never undo each other; each step is an event.
-- KEYS: k.fleet, k.events. ARGV[1] the revision the configuration change was computed from ('' when the change
-- leaves the configuration), ARGV[2] the new configuration (encoded; '' when left), ARGV[3] how many locations
-- follow, then per location: its name, version, encoded standby and viabilities, suspension (1 | 0), and 1 when
-- it has standby servers (an INITIALIZED location given them starts DEPLOYING, as one given instances does); then
-- per event: its code, location and message.
-- Reply: {outcome, now_ms, detail, fleet fields...}. Outcomes: WRITTEN, with the record after the change;
-- NOT_FOUND; DELETING (detail: the fleet's status); CONFLICT (detail: what changed since).
local now = now_ms()
local s = redis.call('HMGET', k.fleet, 'status', 'rev')
if not s[1] then return {'NOT_FOUND', tostring(now), ''} end
if s[1] == S.DELETING or s[1] == S.TERMINATED then return {S.DELETING, tostring(now), s[1]} end
if ARGV[1] ~= '' and ARGV[1] ~= s[2] then return {'CONFLICT', tostring(now), 'revision ' .. s[2]} end
local events_at = 4 + 5 * tonumber(ARGV[3])
for i = 4, events_at - 1, 5 do
  local loc = ARGV[i]
  local l = redis.call('HMGET', k.fleet, loc_field(loc, 'ver'), loc_field(loc, 'status'))
  if not fleet_location(k, loc) or l[1] ~= ARGV[i + 1] or l[2] == S.DELETING then
    return {'CONFLICT', tostring(now), 'location ' .. loc}
  end
end
if ARGV[1] ~= '' then redis.call('HSET', k.fleet, 'cfg', ARGV[2], 'rev', tonumber(s[2]) + 1, 'u_ms', now) end
for i = 4, events_at - 1, 5 do
  local loc = ARGV[i]
  redis.call('HSET', k.fleet, loc_field(loc, 'cfg'), ARGV[i + 2], loc_field(loc, 'susp'), ARGV[i + 3],
    loc_field(loc, 'ver'), redis.call('HINCRBY', k.fleet, 'lver', 1))
end
for i = events_at, #ARGV, 3 do
  local extra = nil
  if ARGV[i + 1] ~= '' then extra = {'location', ARGV[i + 1]} end
  fleet_event(k, now, ARGV[i], ARGV[i + 2], extra)
end
for i = 4, events_at - 1, 5 do
  local loc = ARGV[i]
  if ARGV[i + 4] == '1' and redis.call('HGET', k.fleet, loc_field(loc, 'status')) == S.INITIALIZED then
    redis.call('HSET', k.fleet, loc_field(loc, 'status'), S.DEPLOYING, loc_field(loc, 'msg'), '',
      loc_field(loc, 'st_ms'), now)
    fleet_event(k, now, S.LOCATION_DEPLOYING, 'given standby servers', {'location', loc})
  end
end
local out = {'WRITTEN', tostring(now), ''}
append_fields(out, k.fleet)
return out
