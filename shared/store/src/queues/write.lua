-- Writes a queue's new configuration (UpdateQueue), only if its revision is still the one the change was computed
-- from; the revision is then raised.
-- KEYS: the queue's (queues/lib.lua). ARGV[1] the revision the change was computed from, ARGV[2] the new
-- configuration, ARGV[3] its timeout ms, ARGV[4] its maximum_pending_placements, ARGV[5] its custom event data.
-- Reply: {WRITTEN, now_ms, '', fields...}, with the record after the change; {NOT_FOUND, now_ms, ''};
-- {CONFLICT, now_ms, revision} when the queue moved on meanwhile (nothing is changed).
local now = now_ms()
local q = queue_keys(KEYS)
local rev = redis.call('HGET', q.record, 'rev')
if not rev then return {'NOT_FOUND', int_text(now), ''} end
if rev ~= ARGV[1] then return {'CONFLICT', int_text(now), rev} end
redis.call('HSET', q.record, 'cfg', ARGV[2], 'rev', tonumber(rev) + 1, 'u_ms', now, 'timeout_ms', ARGV[3],
  'maxp', ARGV[4], 'ced', ARGV[5])
return append_fields({'WRITTEN', int_text(now), ''}, q.record)
