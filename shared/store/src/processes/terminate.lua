-- Tells a process to end (GameLift onProcessTerminate): it leaves the pool and must send ProcessEnding before its
-- deadline, or the monitor force-ends it. Asking again changes nothing.
-- KEYS/ARGV[1..3]: see fleet_context(). ARGV[4] game-server id, ARGV[5] termination reason, ARGV[6] grace ms.
-- Reply: {TERMINATING | NOT_FOUND | LOST, now_ms, replica, version}.
local k = fleet_context()
local now = now_ms()
local key = k.server_prefix .. ARGV[4]
local pstate = redis.call('HGET', key, 'pstate')
if not pstate then return {'NOT_FOUND', tostring(now), '', '0'} end
if pstate == 'LOST' then return process_reply('LOST', now, key) end
if pstate ~= 'TERMINATING' then
  local deadline = now + tonumber(ARGV[6])
  redis.call('HSET', key, 'pstate', 'TERMINATING', 'term_reason', ARGV[5], 'term_by_ms', deadline, 'term_force', '0')
  redis.call('HDEL', key, 'claim_exp_ms', 'claim_id')
  redis.call('HINCRBY', key, 'ver', 1)
  redis.call('ZREM', k.pool, ARGV[4])
  redis.call('ZREM', k.claims, ARGV[4])
  redis.call('ZREM', k.ready, ARGV[4])
  redis.call('ZADD', k.term, deadline, ARGV[4])
end
return process_reply('TERMINATING', now, key)
