-- A process is ready (StandingBy): it joins the pool and may be given game sessions or be claimed, at the
-- endpoint it registered or, when it only knows its port now, the one it gives.
-- KEYS/ARGV[1..3]: see fleet_context(). ARGV[4] game-server id, ARGV[5] registration id, ARGV[6] '1' to move its
-- endpoint to ip ARGV[7], dns ARGV[8], port ARGV[9], with connection info ARGV[10].
-- Reply: {READY | LOST, now_ms, replica, version}. Saying ready again is READY and changes nothing.
local k = fleet_context(KEYS, ARGV)
local now = now_ms()
local key = k.server_prefix .. ARGV[4]
local state = redis.call('HMGET', key, 'reg', 'pstate', 'istatus')
if state[1] ~= ARGV[5] or state[2] == 'LOST' then return {'LOST', tostring(now), '', '0'} end
if state[2] == 'INITIALIZING' then
  if ARGV[6] == '1' then redis.call('HSET', key, 'ip', ARGV[7], 'dns', ARGV[8], 'port', ARGV[9], 'conn', ARGV[10]) end
  redis.call('HSET', key, 'pstate', 'STANDING_BY')
  redis.call('ZREM', k.ready, ARGV[4])
  to_pool(k.pool, ARGV[4], state[3], now)
end
return process_reply('READY', now, key)
