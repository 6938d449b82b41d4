-- A worker still works on these requests: each one it still holds has its idle time started again, so that no
-- other worker takes it over; those it no longer holds (another took them over while it was silent, or they are
-- done with) are named, for it to let go of.
-- KEYS: the queue's (queues/lib.lua). ARGV[1] the worker (consumer), then the entries it works on.
-- Reply: the entries it no longer holds.
local q = queue_keys(KEYS)
local mine, gone = {}, {}
for i = 2, #ARGV do
  local pending = redis.call('XPENDING', q.requests, PLACEMENT_WORKERS, ARGV[i], ARGV[i], 1)[1]
  if pending and pending[2] == ARGV[1] then mine[#mine + 1] = ARGV[i] else gone[#gone + 1] = ARGV[i] end
end
-- In slices: Lua unpacks at most a few thousand values at once.
for first = 1, #mine, 1000 do
  redis.call('XCLAIM', q.requests, PLACEMENT_WORKERS, ARGV[1], 0,
    unpack(mine, first, math.min(first + 999, #mine)), 'JUSTID')
end
return gone
