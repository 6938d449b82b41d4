-- Reads a queue's placement metrics: the counts of the minutes of a window, and its PENDING placements now.
-- KEYS: the queue's (queues/lib.lua). ARGV[1] the window's first minute (ms / 60000).
-- Reply: {now_ms, exists (1 | 0), pending, sum of their start ms, oldest start ms or '', {minute fields...}...}.
local now = now_ms()
local q = queue_keys(KEYS)
local exists = redis.call('EXISTS', q.record)
local oldest = redis.call('ZRANGE', q.pending, 0, 0, 'WITHSCORES')[2] or ''
local out = {int_text(now), exists, redis.call('ZCARD', q.pending), redis.call('HGET', q.record, 'psum') or '0',
  oldest}
for minute = tonumber(ARGV[1]), math.floor(now / 60000) do
  out[#out + 1] = redis.call('HGETALL', q.minute .. minute)
end
return out
