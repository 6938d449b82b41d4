-- Deletes a fleet's scaling policy and its evaluations (DeleteScalingPolicy).
-- KEYS: k.policies. ARGV[1] name, ARGV[2] the expected revision (0 for any).
-- Reply: {outcome, now_ms, detail}. Outcomes: DELETED; NOT_FOUND; REVISION (detail: the current revision).
local now = now_ms()
local key = k.policy .. ARGV[1]
local rev = redis.call('HGET', key, 'rev')
if not rev then return {'NOT_FOUND', int_text(now), ''} end
if ARGV[2] ~= '0' and ARGV[2] ~= rev then return {'REVISION', int_text(now), rev} end
redis.call('DEL', key, k.peval .. ARGV[1])
redis.call('ZREM', k.policies, ARGV[1])
return {'DELETED', int_text(now), ''}
