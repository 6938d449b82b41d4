-- Reads a fleet's session events after a position, with the clock of the node that holds them, in one atomic step:
-- every event appended later gets a position at or after that time, so the reader knows how far it has read the
-- fleet even when nothing new is there. Also returns the position of the last event trimmed (by retention or the
-- cap), so the reader can tell whether it missed one.
-- KEYS[1] the fleet's session event stream, KEYS[2] the position of the last one trimmed. ARGV[1] where to start
-- (an XRANGE start: '(' before a position excludes it), ARGV[2] most events.
-- Reply: {now_ms, position of the last event trimmed or '', entries (as XRANGE returns them)}.
local t = redis.call('TIME')
local now = tostring(tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
return {now, redis.call('GET', KEYS[2]) or '', redis.call('XRANGE', KEYS[1], ARGV[1], '+', 'COUNT', ARGV[2])}
