-- Reads the fleets with the clock of the node that holds their set, in one atomic step: a fleet added later is
-- added at or after that time.
-- KEYS[1] the set of fleets.
-- Reply: {now_ms, fleet ids}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return {int_text(now), redis.call('SMEMBERS', KEYS[1])}
