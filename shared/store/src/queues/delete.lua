-- Deletes a queue (DeleteQueue), only at the revision asked for when one is, and only with no placement PENDING
-- unless forced: forced, they end CANCELLED (QUEUE_DELETED), each with its event. Its events stay readable for the
-- retention, and its requests stream (with what the workers still hold of it) as long, then all expire.
-- KEYS: the queue's (queues/lib.lua). ARGV[1] the revision it must be at ('0': any), ARGV[2] '1' to force, ARGV[3]
-- retention ms.
-- Reply: {DELETED, now_ms, placements cancelled, requests left}; {NOT_FOUND, now_ms, ''}; {CONFLICT, now_ms,
-- revision} when it is at another; {HAS_PENDING, now_ms, placements pending} when not forced (nothing is changed).
local now = now_ms()
local q = queue_keys(KEYS)
local rev = redis.call('HGET', q.record, 'rev')
if not rev then return {'NOT_FOUND', int_text(now), ''} end
if ARGV[1] ~= '0' and rev ~= ARGV[1] then return {'CONFLICT', int_text(now), rev} end
local ids = redis.call('ZRANGE', q.pending, 0, -1)
if #ids > 0 and ARGV[2] ~= '1' then return {'HAS_PENDING', int_text(now), #ids} end
local retention = tonumber(ARGV[3])
for _, id in ipairs(ids) do
  end_placement(q, id, S.CANCELLED, S.QUEUE_DELETED, 'its queue was deleted', now, retention, {}, false)
end
redis.call('DEL', q.record)
redis.call('PEXPIRE', q.events, retention)
redis.call('PEXPIRE', q.events_gone, retention)
redis.call('PEXPIRE', q.requests, retention)
return {'DELETED', int_text(now), #ids, redis.call('XLEN', q.requests)}
