-- Creates or replaces a fleet's scaling policy (PutScalingPolicy). A policy replaced starts over: its evaluations
-- are forgotten, so that it is evaluated at once, as it now reads.
-- KEYS: k.fleet, k.policies. ARGV[1] name, ARGV[2] location ('' for every location), ARGV[3] the policy (the
-- contract's ScalingPolicy as the fleet service encodes it; no script reads it), ARGV[4] the expected revision ('' for
-- none, 0 for a policy that must not exist yet), ARGV[5] the most policies a fleet may have.
-- Reply: {outcome, now_ms, detail, policy fields...}. Outcomes: PUT, with the policy's hash: cfg, rev, c_ms, u_ms;
-- NOT_FOUND (no such fleet); NO_LOCATION; DELETING (the fleet is DELETING or TERMINATED); TOO_MANY; REVISION (detail:
-- the current revision, 0 when the policy does not exist).
local now = now_ms()
local status = redis.call('HGET', k.fleet, 'status')
if not status then return {'NOT_FOUND', int_text(now), ''} end
if status == S.DELETING or status == S.TERMINATED then return {S.DELETING, int_text(now), ''} end
if ARGV[2] ~= '' and not fleet_location(k, ARGV[2]) then return {'NO_LOCATION', int_text(now), ''} end
local key = k.policy .. ARGV[1]
local rev = tonumber(redis.call('HGET', key, 'rev') or '0')
if ARGV[4] ~= '' and tonumber(ARGV[4]) ~= rev then return {'REVISION', int_text(now), tostring(rev)} end
if rev == 0 and redis.call('ZCARD', k.policies) >= tonumber(ARGV[5]) then return {'TOO_MANY', int_text(now), ''} end
redis.call('HSET', key, 'cfg', ARGV[3], 'rev', rev + 1, 'u_ms', now)
redis.call('HSETNX', key, 'c_ms', now)
redis.call('ZADD', k.policies, 0, ARGV[1])
redis.call('DEL', k.peval .. ARGV[1])
return append_fields({'PUT', int_text(now), ''}, key)
