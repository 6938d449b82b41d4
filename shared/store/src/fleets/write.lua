-- Writes a change of a fleet's configuration that the fleet service computed from its record at one revision:
-- only if that is still its revision and the fleet is not being deleted; the revision is then raised, and each
-- step is an event. A change computed from an older record is refused, so that two changes never undo each other.
-- KEYS: k.fleet, k.events. ARGV[1] the revision the change was computed from, ARGV[2] how many field/value pairs
-- follow, then those pairs (the fleet's fields, see lib.lua), then how many locations were given standby servers
-- and their names (each INITIALIZED one of them starts DEPLOYING, as a location given instances does), then per
-- event: its code, location and message.
-- Reply: {outcome, now_ms, detail, fleet fields...}. Outcomes: WRITTEN, with the record after the change;
-- NOT_FOUND; DELETING (detail: its status); CONFLICT (detail: its revision now).
local now = now_ms()
local s = redis.call('HMGET', k.fleet, 'status', 'rev')
if not s[1] then return {'NOT_FOUND', tostring(now), ''} end
if s[1] == S.DELETING or s[1] == S.TERMINATED then return {S.DELETING, tostring(now), s[1]} end
if s[2] ~= ARGV[1] then return {'CONFLICT', tostring(now), s[2]} end
local at = 3 + 2 * tonumber(ARGV[2])
local fields = {'rev', tonumber(s[2]) + 1, 'u_ms', now}
for i = 3, at - 1 do fields[#fields + 1] = ARGV[i] end
redis.call('HSET', k.fleet, unpack(fields))
local events_at = at + 1 + tonumber(ARGV[at])
for i = events_at, #ARGV, 3 do
  local extra = nil
  if ARGV[i + 1] ~= '' then extra = {'location', ARGV[i + 1]} end
  fleet_event(k, now, ARGV[i], ARGV[i + 2], extra)
end
for i = at + 1, events_at - 1 do
  local loc = ARGV[i]
  if redis.call('HGET', k.fleet, loc_field(loc, 'status')) == S.INITIALIZED then
    redis.call('HSET', k.fleet, loc_field(loc, 'status'), S.DEPLOYING, loc_field(loc, 'msg'), '',
      loc_field(loc, 'st_ms'), now)
    fleet_event(k, now, S.LOCATION_DEPLOYING, 'given standby servers', {'location', loc})
  end
end
local out = {'WRITTEN', tostring(now), ''}
append_fields(out, k.fleet)
return out
