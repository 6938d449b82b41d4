-- Registers a game server as AVAILABLE and puts it in the pool (unless its instance allows no claims).
-- KEYS: k.fleet, k.inst_status, k.pool, k.servers. ARGV[1] game-server id, ARGV[2] instance id, ARGV[3] connection
-- info, ARGV[4] game-server data.
-- Reply: {REGISTERED | EXISTS, now_ms, fields...}, or {NO_FLEET | NO_LOCATION | DELETING, now_ms, 'detail', why}
-- when the fleet does not exist or takes no new server. Registering again exactly as before, while the server is
-- still AVAILABLE and unclaimed, is REGISTERED: a retry after a lost reply must not fail.
local now = now_ms()
local id = ARGV[1]
local key = k.gs .. id
if redis.call('EXISTS', key) == 1 then
  local cur = redis.call('HMGET', key, 'instance', 'conn', 'data', 'util', 'claim_exp_ms')
  if cur[1] == ARGV[2] and cur[2] == ARGV[3] and cur[3] == ARGV[4] and cur[4] == S.AVAILABLE and not cur[5] then
    return reply('REGISTERED', now, key)
  end
  return reply('EXISTS', now, key)
end
local refused = refusal(k, '')
if refused then return {refused[1], int_text(now), 'detail', refused[2]} end
local istatus = redis.call('HGET', k.inst_status, ARGV[2]) or S.ACTIVE
redis.call('HSET', key, 'id', id, 'instance', ARGV[2], 'conn', ARGV[3], 'data', ARGV[4], 'util', S.AVAILABLE,
  'istatus', istatus, 'reg_ms', now)
redis.call('ZADD', k.servers, 0, id)
redis.call('SADD', k.inst .. ARGV[2], id)
to_pool(k, k.pool, id, istatus, now)
tally_server(k, id)
return reply('REGISTERED', now, key)
