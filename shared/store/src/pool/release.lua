-- Hands back a claim whose caller gave up before it was answered (its gRPC deadline passed): the server returns to
-- the pool, unless its claim changed meanwhile.
-- KEYS: k.claims, k.pool. ARGV[1] game-server id, ARGV[2] the claim's id.
-- Reply: 1 when handed back; 0 when that claim no longer holds the server (it lapsed, or was made UTILIZED).
local key = k.gs .. ARGV[1]
if redis.call('HGET', key, 'claim_id') ~= ARGV[2] or not redis.call('HGET', key, 'claim_exp_ms') then return 0 end
lapse_one(k, k.pool, k.claims, ARGV[1], now_ms())
return 1
