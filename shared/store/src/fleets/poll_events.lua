-- Reads a fleet's events after a position, with the clock of the node that holds them, in one atomic step: every
-- event appended later gets a position at or after that time, so a watcher knows how far it has read the fleet even
-- when nothing new is there. Also returns the position of the last event trimmed (see last_trimmed), so the watcher
-- can tell whether it missed one.
-- KEYS: k.events. ARGV[1] where to start (an XRANGE start: '(' before a position excludes it), ARGV[2] most events.
-- Reply: {now_ms, position of the last event trimmed or '', entries (as XRANGE returns them)}.
return {tostring(now_ms()), last_trimmed(k), redis.call('XRANGE', k.events, ARGV[1], '+', 'COUNT', ARGV[2])}
