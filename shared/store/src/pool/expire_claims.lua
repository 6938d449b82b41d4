-- Hands the claims of a fleet that have lapsed back to the pool.
-- KEYS[1] pool, KEYS[2] claims
-- ARGV[1] most claims to hand back in one call
-- Reply: {how many were handed back, servers in the pool, servers claimed}, the sizes taken after, for metrics,
-- so that the sweeper needs no second round trip
local lapsed = lapse_claims(k, KEYS[1], KEYS[2], now_ms(), tonumber(ARGV[1]))
return {lapsed, redis.call('ZCARD', KEYS[1]), redis.call('ZCARD', KEYS[2])}
