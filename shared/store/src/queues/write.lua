-- Writes a queue's new configuration (UpdateQueue), only if its revision is still the one the change was computed
-- from; the revision is then raised.
-- KEYS[1] the queue's record. ARGV[1] the revision the change was computed from, ARGV[2] the new configuration.
-- Reply: {WRITTEN, now_ms, '', fields...}, with the record after the change; {NOT_FOUND, now_ms, ''};
-- {CONFLICT, now_ms, revision} when the queue moved on meanwhile (nothing is changed).
local now = now_ms()
local rev = redis.call('HGET', KEYS[1], 'rev')
if not rev then return {'NOT_FOUND', tostring(now), ''} end
if rev ~= ARGV[1] then return {'CONFLICT', tostring(now), rev} end
redis.call('HSET', KEYS[1], 'cfg', ARGV[2], 'rev', tonumber(rev) + 1, 'u_ms', now)
return append_fields({'WRITTEN', tostring(now), ''}, KEYS[1])
