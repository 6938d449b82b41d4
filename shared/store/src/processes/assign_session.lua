-- Places a game session on a process: the session is stored ACTIVATING, becomes part of the process's desired
-- state (a new version), and the process leaves the pool. The process must have room: it is STANDING_BY or
-- ACTIVE with fewer open sessions than its max_sess.
-- KEYS/ARGV[1..3]: see fleet_context(). ARGV[4] game-server id, ARGV[5] game-session id, ARGV[6] the session and
-- its initial player sessions (GameSessionAssignment, protobuf).
-- Reply: {ASSIGNED | NOT_FOUND | BUSY | EXISTS, now_ms, replica, version}. BUSY: the process is not ready, is
-- ending, or is full. EXISTS: the session id is taken.
local k = fleet_context()
local now = now_ms()
local id, sid = ARGV[4], ARGV[5]
local key = k.server_prefix .. id
local skey = k.session_prefix .. sid
local state = redis.call('HMGET', key, 'pstate', 'max_sess')
if not state[1] then return {'NOT_FOUND', tostring(now), '', '0'} end
if redis.call('EXISTS', skey) == 1 then return process_reply('EXISTS', now, key) end
if state[1] ~= 'STANDING_BY' and state[1] ~= 'ACTIVE' then return process_reply('BUSY', now, key) end
local open = 0
for _, other in ipairs(redis.call('SMEMBERS', key .. ':sessions')) do
  local status = redis.call('HGET', k.session_prefix .. other, 'status')
  if status == 'ACTIVATING' or status == 'ACTIVE' then open = open + 1 end
end
if open >= tonumber(state[2] or '1') then return process_reply('BUSY', now, key) end
redis.call('HSET', skey, 'pb', ARGV[6], 'status', 'ACTIVATING', 'server', id, 'start_ms', now)
redis.call('SADD', key .. ':sessions', sid)
redis.call('HSET', key, 'pstate', 'ACTIVE')
redis.call('HINCRBY', key, 'ver', 1)
redis.call('ZREM', k.pool, id)
-- A claim on it is spent: the server now hosts this session, and must not lapse back into the pool.
redis.call('ZREM', k.claims, id)
redis.call('HDEL', key, 'claim_exp_ms')
return process_reply('ASSIGNED', now, key)
