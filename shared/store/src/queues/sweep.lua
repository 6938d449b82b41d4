-- A queue's sweep: its placement events older than the retention or beyond the cap are trimmed.
-- KEYS: the queue's (queues/lib.lua). ARGV[1] events retention ms, ARGV[2] most events kept.
-- Reply: {placements PENDING, the sum of their start times ms, now ms}.
local now = now_ms()
local q = queue_keys(KEYS)
trim_events(q.events, q.events_gone, now - tonumber(ARGV[1]), tonumber(ARGV[2]))
return {redis.call('ZCARD', q.pending), redis.call('HGET', q.record, 'psum') or '0', int_text(now)}
