-- Creates a queue (CreateQueue) at revision 1.
-- KEYS[1] the queue's record. ARGV[1] its configuration (the contract's Queue, encoded).
-- Reply: {CREATED, now_ms, '', fields...}, with the new record; {EXISTS, now_ms, ''} when a queue of that name
-- exists (nothing is changed).
local now = now_ms()
if redis.call('EXISTS', KEYS[1]) == 1 then return {'EXISTS', tostring(now), ''} end
redis.call('HSET', KEYS[1], 'cfg', ARGV[1], 'rev', 1, 'c_ms', now, 'u_ms', now)
return append_fields({'CREATED', tostring(now), ''}, KEYS[1])
