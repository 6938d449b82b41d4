-- Tells a process to end (GameLift onProcessTerminate): it leaves the pool and must send ProcessEnding before its
-- deadline, or the monitor force-ends it. Asking again changes nothing.
-- KEYS: k.claims, k.fleet, k.hosting, k.pool, k.ready, k.term, k.utilized. ARGV[1] game-server id, ARGV[2] reason.
-- termination The deadline is the fleet's termination grace (fleet_settings); a process whose fleet's record is gone
-- has none. Reply: {TERMINATING | NOT_FOUND | LOST, now_ms, replica, version}.
local now = now_ms()
local key = k.gs .. ARGV[1]
local pstate = redis.call('HGET', key, 'pstate')
if not pstate then return {'NOT_FOUND', int_text(now), '', '0'} end
if pstate == S.LOST then return process_reply(S.LOST, now, key) end
if pstate ~= S.TERMINATING then
  ask_to_end(k, ARGV[1], ARGV[2], now + termination_grace_ms(k), '0')
end
return process_reply(S.TERMINATING, now, key)
