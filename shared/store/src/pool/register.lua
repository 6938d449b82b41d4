-- Registers a game server as AVAILABLE and puts it in the pool (unless its instance allows no claims).
-- KEYS[1] server hash, KEYS[2] pool, KEYS[3] fleet's server ids, KEYS[4] instance's server set,
-- KEYS[5] instance statuses
-- ARGV[1] game-server id, ARGV[2] instance id, ARGV[3] connection info, ARGV[4] game-server data
-- Reply: {REGISTERED | EXISTS, now_ms, fields...}. Registering again exactly as before, while the server is still
-- AVAILABLE and unclaimed, is REGISTERED: a retry after a lost reply must not fail.
local now = now_ms()
if redis.call('EXISTS', KEYS[1]) == 1 then
  local cur = redis.call('HMGET', KEYS[1], 'instance', 'conn', 'data', 'util', 'claim_exp_ms')
  if cur[1] == ARGV[2] and cur[2] == ARGV[3] and cur[3] == ARGV[4] and cur[4] == S.AVAILABLE and not cur[5] then
    return reply('REGISTERED', now, KEYS[1])
  end
  return reply('EXISTS', now, KEYS[1])
end
local istatus = redis.call('HGET', KEYS[5], ARGV[2]) or S.ACTIVE
redis.call('HSET', KEYS[1], 'id', ARGV[1], 'instance', ARGV[2], 'conn', ARGV[3], 'data', ARGV[4], 'util', S.AVAILABLE,
  'istatus', istatus, 'reg_ms', now)
redis.call('ZADD', KEYS[3], 0, ARGV[1])
redis.call('SADD', KEYS[4], ARGV[1])
to_pool(KEYS[2], ARGV[1], istatus, now)
tally_server(k, ARGV[1])
return reply('REGISTERED', now, KEYS[1])
