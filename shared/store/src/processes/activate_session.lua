-- The process hosting a game session has it ready for players (ActivateGameSession): ACTIVATING → ACTIVE.
-- Activating again is ACTIVATED and changes nothing.
-- KEYS/ARGV[1..3]: see fleet_context(). ARGV[4] game-server id, ARGV[5] game-session id.
-- Reply: {ACTIVATED | NOT_FOUND | NOT_YOURS | ENDED, now_ms, status}.
local k = fleet_context()
local now = now_ms()
local skey = k.session_prefix .. ARGV[5]
local state = redis.call('HMGET', skey, 'server', 'status')
if not state[1] then return {'NOT_FOUND', tostring(now), ''} end
if state[1] ~= ARGV[4] then return {'NOT_YOURS', tostring(now), state[2]} end
if state[2] == 'ACTIVATING' then
  redis.call('HSET', skey, 'status', 'ACTIVE', 'active_ms', now)
  return {'ACTIVATED', tostring(now), 'ACTIVE'}
end
if state[2] == 'ACTIVE' then return {'ACTIVATED', tostring(now), 'ACTIVE'} end
return {'ENDED', tostring(now), state[2]}
