-- Records a placement's next attempt before it creates anything: its number, its candidates (the fleets where
-- its game session may be created, under the attempt's token), and how far its attempts have got. Only the worker
-- that read the attempt before it can record it, so two workers never make the same attempt twice.
-- KEYS: the queue's (queues/lib.lua). ARGV[1] placement id, ARGV[2] the attempt count it was read at, ARGV[3] the
-- candidates, ARGV[4] the reason it would time out with now.
-- Reply: {outcome, now_ms, detail, placement fields...}. Outcomes: RECORDED (detail: the new attempt count; no
-- fields, the worker holds them); CONFLICT (another worker moved it on); ENDED (no longer PENDING); NOT_FOUND.
local now = now_ms()
local q = queue_keys(KEYS)
local key = q.placement .. ARGV[1]
local p = redis.call('HMGET', key, 'status', 'n')
if not p[1] then
  local ended = ended_fields(q, ARGV[1])
  if ended then return placement_reply('ENDED', now, '', ended) end
  return placement_reply('NOT_FOUND', now)
end
-- A hash that is not PENDING ended under an earlier release, which kept ended placements as hashes.
if p[1] ~= S.PENDING then return placement_reply('ENDED', now, '', redis.call('HGETALL', key)) end
if p[2] ~= ARGV[2] then return placement_reply('CONFLICT', now, '', redis.call('HGETALL', key)) end
local n = tonumber(p[2]) + 1
redis.call('HSET', key, 'n', n, 'cands', ARGV[3], 'why', ARGV[4])
return placement_reply('RECORDED', now, n)
