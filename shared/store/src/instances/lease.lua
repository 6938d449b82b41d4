-- Takes, renews or gives up the lease of a location's reconciler. The lease given back (ARGV[4]) is renewed for
-- ARGV[3] ms while it is still the live one, or given up when ARGV[3] is 0 (its replica stops, so another takes the
-- location at once); when no lease is live, a new one is taken with the location's next fence token.
-- KEYS: k.fleet. ARGV[1] location, ARGV[2] holder (unique per replica), ARGV[3] ttl ms, ARGV[4] the lease held
-- ('' for none).
-- Reply: {HELD, lease} | {HELD_ELSEWHERE, the live lease, another's} | {NO_LOCATION, ''} | {GONE, ''} (given up, or it was no
-- longer live).
local loc, ttl = ARGV[1], tonumber(ARGV[3])
local key = k.lease .. loc
local current = redis.call('GET', key)
if ttl == 0 then
  if current and current == ARGV[4] then redis.call('DEL', key) end
  return {'GONE', ''}
end
if current and current == ARGV[4] then
  redis.call('PEXPIRE', key, ttl)
  return {'HELD', current}
end
if current then return {'HELD_ELSEWHERE', current} end
if not fleet_location(k, loc) then return {'NO_LOCATION', ''} end
local lease = ARGV[2] .. ' ' .. redis.call('HINCRBY', k.fleet, loc_field(loc, 'fence'), 1)
redis.call('SET', key, lease, 'PX', ttl)
return {'HELD', lease}
