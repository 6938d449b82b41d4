-- Reads the live counts of a fleet's locations (GetFleetUtilization): a hash and a string per location, however many
-- servers it has.
-- KEYS: k.fleet. ARGV[1] the location to read ('' for every location).
-- Reply: {FOUND | NOT_FOUND | NO_LOCATION, now_ms, home location ('' unless FOUND), then per location: its name,
-- its desired instances, its tally hash (field, value, ...) followed by `waiting` (the placements waiting for a
-- server there), `waited_ms` (how long they have waited, summed) and `standby` (the effective standby target its
-- autoscaler last applied), and its counts string (berth_store::keys::counts decodes it); and last, when the home
-- location is read, the tally hash and counts of the FleetIQ servers, which have no location and count in the home
-- location, under the name ''}.
local now = now_ms()
local locs = redis.call('HGET', k.fleet, 'locs')
if not locs then return {'NOT_FOUND', int_text(now), ''} end
local home = string.match(locs, '^%S*')
local names = {}
if ARGV[1] == '' then
  for name in string.gmatch(locs, '%S+') do names[#names + 1] = name end
elseif fleet_location(k, ARGV[1]) then
  names[1] = ARGV[1]
else
  return {'NO_LOCATION', int_text(now), ''}
end
local out = {'FOUND', int_text(now), home}
for _, loc in ipairs(names) do
  out[#out + 1] = loc
  out[#out + 1] = redis.call('HGET', k.fleet, loc_field(loc, 'desired')) or '0'
  local tally = redis.call('HGETALL', k.tally .. loc)
  local waiting = redis.call('ZRANGEBYSCORE', k.wanting .. loc, '(' .. now, '+inf')
  local waited = 0
  if #waiting > 0 then
    for _, since in ipairs(redis.call('HMGET', k.wanted .. loc, unpack(waiting))) do
      waited = waited + now - tonumber(since or now)
    end
  end
  tally[#tally + 1] = 'waiting'
  tally[#tally + 1] = #waiting
  tally[#tally + 1] = 'waited_ms'
  tally[#tally + 1] = waited
  tally[#tally + 1] = 'standby'
  tally[#tally + 1] = redis.call('HGET', k.scale .. loc, 'target') or 0
  out[#out + 1] = tally
  out[#out + 1] = redis.call('GET', k.counts .. loc) or ''
end
if names[1] == home then
  out[#out + 1] = ''
  out[#out + 1] = '0'
  out[#out + 1] = redis.call('HGETALL', k.tally .. '')
  out[#out + 1] = redis.call('GET', k.counts .. '') or ''
end
return out
