-- A worker is done with a placement's request (it ended, and whatever its attempts left was given up): the entry
-- leaves the stream, and the placement its candidates (see done_with, drop_candidates).
-- KEYS: the queue's (queues/lib.lua). ARGV[1] the entry, ARGV[2] the placement id.
-- Reply: the number of entries removed (0 when another worker was done with it first).
local q = queue_keys(KEYS)
drop_candidates(q, ARGV[2])
return done_with(q, ARGV[1])
