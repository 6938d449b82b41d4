-- Ends a PENDING placement (see end_placement): FULFILLED by the worker whose attempt's session is ACTIVE,
-- TIMED_OUT or FAILED by a worker, CANCELLED by StopGameSessionPlacement. Whichever comes first wins; the others
-- get the placement as it ended. A worker that needs nothing more done acknowledges its request in the same step.
-- KEYS: the queue's (queues/lib.lua). ARGV[1] placement id, ARGV[2] status, ARGV[3] reason, ARGV[4] message,
-- ARGV[5] the attempt count it must be at ('' for any), ARGV[6] '1' when it may end only once its deadline has
-- passed, ARGV[7] retention ms, ARGV[8] the request's entry to acknowledge (''), then fields to set with the
-- status (name, value, ...).
-- Reply: {outcome, now_ms, detail, placement fields...}. Outcomes: FINISHED (detail: its event's position in the
-- queue's event stream; with no fields when a request's entry was acknowledged: its worker holds them); ENDED (it
-- had ended already: as it stands); CONFLICT (at another attempt); WAITING (detail: its deadline, not passed yet);
-- NOT_FOUND.
local now = now_ms()
local q = queue_keys(KEYS)
local id = ARGV[1]
local key = q.placement .. id
local live = redis.call('HGETALL', key)
local p = by_name(live)
if not p.status then
  local ended = ended_fields(q, id)
  if ended then return placement_reply('ENDED', now, '', ended) end
  return placement_reply('NOT_FOUND', now)
end
-- A hash that is not PENDING ended under an earlier release, which kept ended placements as hashes.
if p.status ~= S.PENDING then return placement_reply('ENDED', now, '', live) end
if ARGV[5] ~= '' and p.n ~= ARGV[5] then return placement_reply('CONFLICT', now, '', live) end
if ARGV[6] == '1' and now < tonumber(p.dl_ms) then return placement_reply('WAITING', now, p.dl_ms) end
local extra = {}
for i = 9, #ARGV do extra[#extra + 1] = ARGV[i] end
local values, position = end_placement(q, id, ARGV[2], ARGV[3], ARGV[4], now, tonumber(ARGV[7]), extra, ARGV[8] ~= '',
  p)
-- A worker done with the request holds the rest of the placement: it is answered no fields.
if ARGV[8] ~= '' then
  done_with(q, ARGV[8])
  return placement_reply('FINISHED', now, position)
end
return placement_reply('FINISHED', now, position, record_fields(values, ENDED))
