-- Removes a game server from its fleet, wherever it is (pool, claims, UTILIZED).
-- KEYS[1] server hash, KEYS[2] pool, KEYS[3] claims, KEYS[4] fleet's server ids, KEYS[5] UTILIZED servers
-- ARGV[1] game-server id, ARGV[2] key prefix of instance server sets
-- Reply: {DEREGISTERED | NOT_FOUND | SDK_PROCESS, now_ms}. SDK_PROCESS: the server holds an SDK stream and
-- leaves by ProcessEnding, which also ends its sessions and deadlines.
local now = now_ms()
local state = redis.call('HMGET', KEYS[1], 'instance', 'pstate')
local instance = state[1]
if not instance then return reply('NOT_FOUND', now) end
if state[2] and state[2] ~= S.LOST then return reply('SDK_PROCESS', now) end
tally_server(k, ARGV[1], true)
place(k, KEYS[2], k.lpool, ARGV[1], nil)
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[1])
redis.call('ZREM', KEYS[5], ARGV[1])
redis.call('SREM', ARGV[2] .. instance, ARGV[1])
return reply('DEREGISTERED', now)
