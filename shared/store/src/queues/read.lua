-- Reads a placement with Redis's clock: a worker keeps its placement's deadlines by Redis's clock, not its own.
-- KEYS: the queue's (queues/lib.lua). ARGV[1] placement id.
-- Reply: {FOUND | NOT_FOUND, now_ms, '', placement fields...}.
local now = now_ms()
local key = queue_keys(KEYS).placement .. ARGV[1]
if redis.call('EXISTS', key) == 0 then return placement_reply('NOT_FOUND', now) end
return placement_reply('FOUND', now, '', key)
