-- Reads one game server with Redis' clock, so that a lapsed claim is judged by the same clock that set it.
-- KEYS[1] server hash
-- Reply: {FOUND | NOT_FOUND, now_ms, fields...}
local now = now_ms()
if redis.call('EXISTS', KEYS[1]) == 0 then return reply('NOT_FOUND', now) end
return reply('FOUND', now, KEYS[1])
