-- Reads a placement with Redis's clock: a worker keeps its placement's deadlines by Redis's clock, not its own.
-- KEYS: the queue's (queues/lib.lua). ARGV[1] placement id.
-- Reply: {FOUND | NOT_FOUND, now_ms, '', placement fields...}.
local fields = placement_fields(queue_keys(KEYS), ARGV[1])
return placement_reply(#fields > 0 and 'FOUND' or 'NOT_FOUND', now_ms(), '', fields)
