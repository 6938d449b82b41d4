-- A worker is done with a placement's request (it ended, and whatever its attempts left was given up): the entry
-- leaves the stream.
-- KEYS: the queue's (queues/lib.lua). ARGV[1] the entry.
-- Reply: the number of entries removed (0 when another worker was done with it first).
local q = queue_keys(KEYS)
redis.call('XACK', q.requests, PLACEMENT_WORKERS, ARGV[1])
return redis.call('XDEL', q.requests, ARGV[1])
