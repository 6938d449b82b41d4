-- Tells a process to end (GameLift onProcessTerminate): it leaves the pool and must send ProcessEnding before its
-- deadline, or the monitor force-ends it. Asking again changes nothing.
-- KEYS/ARGV[1..3]: see fleet_context(). ARGV[4] game-server id, ARGV[5] termination reason, ARGV[6] grace ms.
-- Reply: {TERMINATING | NOT_FOUND | LOST, now_ms, replica, version}.
local k = fleet_context(KEYS, ARGV)
local now = now_ms()
local key = k.server_prefix .. ARGV[4]
local pstate = redis.call('HGET', key, 'pstate')
if not pstate then return {'NOT_FOUND', tostring(now), '', '0'} end
if pstate == 'LOST' then return process_reply('LOST', now, key) end
if pstate ~= 'TERMINATING' then ask_to_end(k, ARGV[4], ARGV[5], now + tonumber(ARGV[6]), '0') end
return process_reply('TERMINATING', now, key)
