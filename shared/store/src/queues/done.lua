-- A worker is done with a placement's request (it ended, and whatever its attempts left was given up): the entry
-- leaves the stream (see done_with).
-- KEYS: the queue's (queues/lib.lua). ARGV[1] the entry, ARGV[2] the placement id.
-- Reply: the number of entries removed (0 when another worker was done with it first).
return done_with(queue_keys(KEYS), ARGV[2], ARGV[1])
