-- Creates a queue (CreateQueue) at revision 1, with the consumer group its workers take placements through.
-- KEYS: the queue's (queues/lib.lua). ARGV[1] its configuration (the contract's Queue, encoded), ARGV[2] its timeout
-- ms, ARGV[3] its maximum_pending_placements, ARGV[4] its custom event data.
-- Reply: {CREATED, now_ms, '', fields...}, with the new record; {EXISTS, now_ms, ''} when a queue of that name
-- exists (nothing is changed).
local now = now_ms()
local q = queue_keys(KEYS)
if redis.call('EXISTS', q.record) == 1 then return {'EXISTS', int_text(now), ''} end
redis.call('HSET', q.record, 'cfg', ARGV[1], 'rev', 1, 'c_ms', now, 'u_ms', now, 'timeout_ms', ARGV[2], 'maxp', ARGV[3],
  'ced', ARGV[4], 'psum', 0)
-- A queue of the same name deleted before may have left its requests stream (with the group) and its events, set
-- to expire.
redis.call('PERSIST', q.events)
redis.call('PERSIST', q.events_gone)
redis.call('PERSIST', q.requests)
if redis.call('EXISTS', q.requests) == 0 then
  redis.call('XGROUP', 'CREATE', q.requests, PLACEMENT_WORKERS, '$', 'MKSTREAM')
end
return append_fields({'CREATED', int_text(now), ''}, q.record)
