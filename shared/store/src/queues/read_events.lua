-- Reads a queue's placement events after a position, with Redis' clock and the position of the last event trimmed,
-- as sessions/read_events.lua does for a fleet. An event names its placement, whose record is joined here: every
-- placement event is of an end, after which the record does not change (but for fields no watcher is shown), so the
-- record read now is the placement just after its event, kept in Redis once rather than twice. A record gone with
-- its retention (or replaced by a later placement of the same id) has its event past the retention too: that event,
-- and the older ones, read as trimmed.
-- KEYS: the queue's (queues/lib.lua). ARGV[1] where to start (an XRANGE start: '(' before a position excludes it),
-- ARGV[2] most events.
-- Reply: {now_ms, position of the last event trimmed or '', entries: {position, {event fields, placement
-- fields}}...}.
local q = queue_keys(KEYS)
local now = tostring(now_ms())
local gone = redis.call('GET', q.events_gone) or ''
local out = {}
-- XRANGE answers nil to a COUNT of 0 (a watch asking only for the clock).
for _, entry in ipairs(redis.call('XRANGE', q.events, ARGV[1], '+', 'COUNT', ARGV[2]) or {}) do
  local fields, event = entry[2], {}
  for i = 1, #fields, 2 do event[fields[i]] = fields[i + 1] end
  -- A placement that ended under an earlier release is still a hash.
  local record = ended_fields(q, event.id or '') or redis.call('HGETALL', q.placement .. (event.id or ''))
  local ended = ''
  for i = 1, #record, 2 do
    if record[i] == 'e_ms' then ended = record[i + 1] end
    if not NOT_SHOWN[record[i]] then
      fields[#fields + 1] = record[i]
      fields[#fields + 1] = record[i + 1]
    end
  end
  -- A record that did not end with this event is of a later placement that took the id once the first expired.
  if ended == event.t then
    out[#out + 1] = {entry[1], fields}
  else
    gone, out = entry[1], {}
  end
end
return {now, gone, out}
