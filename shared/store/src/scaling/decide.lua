-- Records an autoscaling pass of a location under its lease: the evaluations it made, its state, and the desired
-- count it decided, set only if the desired count is still the one it decided from and within the location's
-- current bounds (an operator's change meanwhile wins, and the next pass decides from it). Also forgets the
-- placements whose wait there lapsed.
-- KEYS: k.fleet, k.events. ARGV[1] location, ARGV[2] lease, ARGV[3] the desired count decided from, ARGV[4] the new
-- desired count ('' for no change), ARGV[5] the winning policy's name (or 'standby'), ARGV[6] the change's message,
-- ARGV[7] the location's hist and ARGV[8] its sb (see read.lua), ARGV[9] its effective standby target (server
-- processes), ARGV[10] its count of servers lost as this pass saw it, then per policy evaluated: its name, the
-- revision evaluated (a policy replaced meanwhile keeps its fresh start), its evaluation's state, and why it failed
-- when that is news ('' otherwise: no SCALING_POLICY_FAILED event).
-- Reply: {outcome, now_ms, detail}. Outcomes: SCALED; UNCHANGED (nothing to change, or the desired count or bounds
-- moved meanwhile); FENCED (the lease is no longer the live one: nothing was written).
local now = now_ms()
local loc, lease = ARGV[1], ARGV[2]
if not holds_lease(k, loc, lease) then return {'FENCED', int_text(now), ''} end
for i = 11, #ARGV, 4 do
  local name = ARGV[i]
  if redis.call('HGET', k.policy .. name, 'rev') == ARGV[i + 1] then
    redis.call('HSET', k.peval .. name, 'e:' .. loc, ARGV[i + 2])
    if ARGV[i + 3] ~= '' then
      fleet_event(k, now, S.SCALING_POLICY_FAILED, ARGV[i + 3], {'location', loc, 'policy', name})
    end
  end
end
redis.call('HSET', k.scale .. loc, 'hist', ARGV[7], 'sb', ARGV[8], 'target', ARGV[9], 'lost', ARGV[10])
local lapsed = redis.call('ZRANGEBYSCORE', k.wanting .. loc, '-inf', now)
if #lapsed > 0 then
  redis.call('ZREMRANGEBYSCORE', k.wanting .. loc, '-inf', now)
  redis.call('HDEL', k.wanted .. loc, unpack(lapsed))
end
if ARGV[4] == '' then return {'UNCHANGED', int_text(now), ''} end
local f = function(name) return loc_field(loc, name) end
local s = redis.call('HMGET', k.fleet, f('status'), f('min'), f('max'), f('desired'))
local desired = tonumber(ARGV[4])
if s[4] ~= ARGV[3] or desired < tonumber(s[2]) or desired > tonumber(s[3]) or s[1] == S.DELETING then
  return {'UNCHANGED', int_text(now), ''}
end
redis.call('HSET', k.fleet, f('desired'), desired)
if redis.call('EXISTS', k.policy .. ARGV[5]) == 1 then redis.call('HSET', k.peval .. ARGV[5], 'a:' .. loc, now) end
fleet_event(k, now, S.SCALING_ACTION, ARGV[6], {'location', loc, 'prev', s[4], 'new', desired, 'policy', ARGV[5]})
if s[1] == S.INITIALIZED and desired > 0 then
  location_deploying(k, now, loc, 'scaled up by ' .. ARGV[5])
end
return {'SCALED', int_text(now), ''}
