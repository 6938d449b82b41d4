-- Deletes a queue (DeleteQueue), only at the revision asked for when one is.
-- KEYS[1] the queue's record. ARGV[1] the revision it must be at ('0': any).
-- Reply: {DELETED | NOT_FOUND, now_ms, ''}; {CONFLICT, now_ms, revision} when it is at another (nothing is
-- changed).
local now = now_ms()
local rev = redis.call('HGET', KEYS[1], 'rev')
if not rev then return {'NOT_FOUND', tostring(now), ''} end
if ARGV[1] ~= '0' and rev ~= ARGV[1] then return {'CONFLICT', tostring(now), rev} end
redis.call('DEL', KEYS[1])
return {'DELETED', tostring(now), ''}
