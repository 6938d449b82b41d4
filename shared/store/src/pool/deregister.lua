-- Removes a game server from its fleet, wherever it is (pool, claims, UTILIZED).
-- KEYS: k.pool, k.claims, k.servers, k.utilized. ARGV[1] game-server id.
-- Reply: {DEREGISTERED | NOT_FOUND | SDK_PROCESS, now_ms}. SDK_PROCESS: the server holds an SDK stream and
-- leaves by ProcessEnding, which also ends its sessions and deadlines.
local now = now_ms()
local state = redis.call('HMGET', k.gs .. ARGV[1], 'instance', 'pstate')
if not state[1] then return reply('NOT_FOUND', now) end
if state[2] and state[2] ~= S.LOST then return reply('SDK_PROCESS', now) end
deregister_server(k, ARGV[1], state[1])
return reply('DEREGISTERED', now)
