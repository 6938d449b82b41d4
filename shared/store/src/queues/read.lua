-- Reads a placement with Redis's clock: a worker keeps its placement's deadlines by Redis's clock, not its own.
-- KEYS: the queue's (queues/lib.lua). ARGV[1] placement id.
-- Reply: {FOUND | NOT_FOUND, now_ms, '', placement fields...}.
local now = now_ms()
local out = placement_reply('FOUND', now, '', queue_keys(KEYS).placement .. ARGV[1])
-- No fields after the outcome, the clock and the detail: no such placement.
if #out == 3 then out[1] = 'NOT_FOUND' end
return out
