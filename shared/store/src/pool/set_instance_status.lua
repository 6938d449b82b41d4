-- Sets an instance's status and moves its unclaimed AVAILABLE servers to the matching place in the pool
-- (claimed ones find it when their claim lapses).
-- KEYS[1] instance's server set, KEYS[2] instance statuses, KEYS[3] pool
-- ARGV[1] instance id, ARGV[2] ACTIVE | DRAINING | SPOT_TERMINATING
-- Reply: the number of servers on the instance
local now = now_ms()
if ARGV[2] == S.ACTIVE then
  redis.call('HDEL', KEYS[2], ARGV[1])
else
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
end
local ids = redis.call('SMEMBERS', KEYS[1])
set_istatus(k, KEYS[3], ids, ARGV[2], now)
return #ids
