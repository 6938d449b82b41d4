-- Starts a placement in a queue (StartGameSessionPlacement): PENDING, its deadline the queue's timeout from now,
-- handed to the workers through the requests stream (a start is not a placement event: its caller holds the reply,
-- and the minute's count tells GetQueueMetrics). A placement of the same id already here, PENDING or ended, is
-- returned as it stands when the request is the same (a retry), and refused when it is another.
-- KEYS: the queue's (queues/lib.lua). ARGV[1] placement id, ARGV[2] digest of the request, ARGV[3] the request
-- (encoded), ARGV[4] the caller's trace context (W3C traceparent, '' for none), for the worker to continue.
-- Reply: {outcome, now_ms, detail, placement fields...}. Outcomes: CREATED; EXISTING; TOKEN_REUSED (the id is in use
-- with another request); NOT_FOUND (no such queue); FULL (detail: the queue's maximum_pending_placements).
local now = now_ms()
local q = queue_keys(KEYS)
local id = ARGV[1]
local key = q.placement .. id
-- A new id, as most are, is told apart from one in use (PENDING or ended) in one read.
if redis.call('EXISTS', key, q.ended .. id) > 0 then
  local digest = redis.call('HGET', key, 'digest')
  local ended = not digest and ended_fields(q, id)
  if ended then digest = by_name(ended).digest end
  if digest == ARGV[2] then return placement_reply('EXISTING', now, '', ended or redis.call('HGETALL', key)) end
  if digest then return placement_reply('TOKEN_REUSED', now) end
end
local queue = redis.call('HMGET', q.record, 'timeout_ms', 'maxp')
if not queue[1] then return placement_reply('NOT_FOUND', now) end
local limit = tonumber(queue[2])
if limit > 0 and redis.call('ZCARD', q.pending) >= limit then return placement_reply('FULL', now, limit) end
local deadline = now + tonumber(queue[1])
local record = {'id', id, 'queue', string.match(KEYS[1], '{q:([^}]*)}'), 'req', ARGV[3], 'digest', ARGV[2],
  'status', S.PENDING, 's_ms', int_text(now), 'dl_ms', int_text(deadline), 'n', '0'}
redis.call('HSET', key, unpack(record))
redis.call('ZADD', q.pending, int_text(now), id)
redis.call('HINCRBY', q.record, 'psum', int_text(now))
-- The entry carries the request whole, so that the worker taking it first needs no read of the record.
if ARGV[4] == '' then
  redis.call('XADD', q.requests, '*', 'id', id, 'dl_ms', int_text(deadline), 'req', ARGV[3])
else
  redis.call('XADD', q.requests, '*', 'id', id, 'dl_ms', int_text(deadline), 'req', ARGV[3], 'tp', ARGV[4])
end
count_minute(q, now, {S.STARTED})
return placement_reply('CREATED', now, '', record)
