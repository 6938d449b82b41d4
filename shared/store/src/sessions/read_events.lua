-- Reads a fleet's session events after a position, with the clock of the node that holds them, in one atomic step:
-- every event appended later gets a position at or after that time, so the reader knows how far it has read the
-- fleet even when nothing new is there. Also tells whether events after the reader's position were trimmed (by
-- retention or the cap) before it could read them.
-- KEYS[1] the fleet's session event stream. ARGV[1] where to start (an XRANGE start: '(' before a position
-- excludes it), ARGV[2] most events, ARGV[3] the position read up to, as <ms>-<seq>.
-- Reply: {now_ms, 1 when events after ARGV[3] were trimmed else 0, entries (as XRANGE returns them)}.
local t = redis.call('TIME')
local now = tostring(tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
if redis.call('EXISTS', KEYS[1]) == 0 then return {now, 0, {}} end
local info = {}
local raw = redis.call('XINFO', 'STREAM', KEYS[1])
for i = 1, #raw, 2 do info[raw[i]] = raw[i + 1] end
local function position(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return tonumber(ms), tonumber(seq)
end
local trimmed = 0
-- Trimming removes the oldest entries: some are gone when fewer are kept than were ever added, and the reader
-- missed some when its position is older than the oldest left (or than the last added, when none is left).
if info['entries-added'] > info['length'] then
  local oldest = info['recorded-first-entry-id']
  if info['length'] == 0 then oldest = info['last-generated-id'] end
  local oms, oseq = position(oldest)
  local ms, seq = position(ARGV[3])
  if ms < oms or (ms == oms and seq < oseq) then trimmed = 1 end
end
return {now, trimmed, redis.call('XRANGE', KEYS[1], ARGV[1], '+', 'COUNT', ARGV[2])}
