-- Reads one page of a sorted set of session ids, skipping ids whose record is gone (expired) or does not match.
-- Serves ListGameSessions (the fleet's sessions, newest first, by location and statuses) and
-- DescribePlayerSessions (a game session's or a player's player sessions, oldest first, by status).
-- KEYS/ARGV[1..3]: see fleet_context(). ARGV[4] g | p, ARGV[5] the sorted set's name under the fleet's tag,
-- ARGV[6] DESC | ASC, ARGV[7] position to start after ('' for the first page: '<score> <id>'), ARGV[8] page size,
-- ARGV[9] location ('' for any; game sessions only), ARGV[10] statuses, space-separated ('' for any).
-- Reply: {next position ('' on the last page), records as read.lua returns them...}. At most 20 pages' worth of
-- ids are looked at per call, so a sparse filter returns a short page with a next position rather than scanning
-- without end.
local k = fleet_context()
local set = k.tag .. ':' .. ARGV[5]
local desc, size = ARGV[6] == 'DESC', tonumber(ARGV[8])
local statuses = {}
for status in string.gmatch(ARGV[10], '%S+') do statuses[status] = true end
local any_status = ARGV[10] == ''
-- Start: the first page, or just past the given position (same score: ids after it; then lower/higher scores).
local after_score, after_id = string.match(ARGV[7], '^(%S+) (%S+)$')
local out = {''}
local looked, budget = 0, size * 20
local function fits(id)
  if ARGV[4] == 'g' then
    local s = redis.call('HMGET', gkey(k, id), 'status', 'loc')
    return s[1] and (any_status or statuses[s[1]]) and (ARGV[9] == '' or s[2] == ARGV[9])
  end
  local status = redis.call('HGET', pkey(k, id), 'status')
  return status and (any_status or statuses[status])
end
local function record(id)
  if ARGV[4] == 'g' then return redis.call('HGETALL', gkey(k, id)) end
  local sid = redis.call('HGET', pkey(k, id), 'gs')
  local s = redis.call('HMGET', gkey(k, sid), 'loc', 'ip', 'dns', 'port')
  return {redis.call('HGETALL', pkey(k, id)), {s[1] or '', s[2] or '', s[3] or '', s[4] or '0'}}
end
local cursor_score, cursor_id = after_score, after_id
local taken = 0
while looked < budget do
  local batch
  if desc then
    local top = '+inf'
    if cursor_score then top = cursor_score end
    batch = redis.call('ZREVRANGEBYSCORE', set, top, '-inf', 'WITHSCORES', 'LIMIT', 0, size + 50)
  else
    local bottom = '-inf'
    if cursor_score then bottom = cursor_score end
    batch = redis.call('ZRANGEBYSCORE', set, bottom, '+inf', 'WITHSCORES', 'LIMIT', 0, size + 50)
  end
  local progressed = false
  for i = 1, #batch, 2 do
    local id, score = batch[i], batch[i + 1]
    -- Ids at the cursor's score up to and including the cursor itself were on earlier pages.
    local seen = cursor_score and score == cursor_score and
      ((not desc and id <= cursor_id) or (desc and id >= cursor_id))
    if not seen then
      progressed = true
      looked = looked + 1
      cursor_score, cursor_id = score, id
      if fits(id) then
        out[#out + 1] = record(id)
        taken = taken + 1
        if taken == size then
          out[1] = score .. ' ' .. id
          return out
        end
      end
      if looked >= budget then
        out[1] = score .. ' ' .. id
        return out
      end
    end
  end
  if not progressed then return out end
end
return out
