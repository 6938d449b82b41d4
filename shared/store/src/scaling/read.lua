-- Reads a fleet's scaling policies in name order with their evaluations, and a location's autoscaling state.
-- KEYS: k.fleet, k.policies. ARGV[1] location ('' for the evaluations in every location, and no location state).
-- Reply: {FOUND | NOT_FOUND, now_ms, '', then per policy: its name, its hash (cfg, rev, c_ms, u_ms) and its
-- evaluations (e:<location>: the evaluation's state, a:<location>: ms when its proposal last won there), and last,
-- when a location is given, its state: hist (the winning values that may still count, '<ms>:<instances>' each,
-- space-separated), sb (the standby rule's state), target (its effective standby target) and lost (the count of
-- servers lost its last pass saw)}.
local now = now_ms()
if redis.call('EXISTS', k.fleet) == 0 then return {'NOT_FOUND', int_text(now), ''} end
local out = {'FOUND', int_text(now), ''}
local loc = ARGV[1]
for _, name in ipairs(redis.call('ZRANGE', k.policies, 0, -1)) do
  out[#out + 1] = name
  out[#out + 1] = redis.call('HGETALL', k.policy .. name)
  if loc == '' then
    out[#out + 1] = redis.call('HGETALL', k.peval .. name)
  else
    local e = redis.call('HMGET', k.peval .. name, 'e:' .. loc, 'a:' .. loc)
    out[#out + 1] = {'e:' .. loc, e[1] or '', 'a:' .. loc, e[2] or ''}
  end
end
if loc ~= '' then out[#out + 1] = redis.call('HGETALL', k.scale .. loc) end
return out
