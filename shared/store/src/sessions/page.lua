-- Reads one page of a sorted set of session ids, skipping ids whose record is gone (expired) or does not match.
-- Serves ListGameSessions (the fleet's sessions, newest first, by location and statuses) and
-- DescribePlayerSessions (a game session's or a player's player sessions, oldest first, by status).
-- KEYS[1] the sorted set of ids. ARGV[1] g | p,
-- ARGV[2] DESC | ASC, ARGV[3] position to start after ('' for the first page), ARGV[4] page size,
-- ARGV[5] location ('' for any; game sessions only), ARGV[6] statuses, space-separated ('' for any).
-- Reply: {next position ('' on the last page), records as read.lua returns them...}. At most 20 pages' worth of
-- ids are looked at per call, so a sparse filter returns a short page with a next position rather than scanning
-- without end.
local set = KEYS[1]
local desc, size = ARGV[2] == 'DESC', tonumber(ARGV[4])
local statuses = {}
for status in string.gmatch(ARGV[6], '%S+') do statuses[status] = true end
local any_status = ARGV[6] == ''
-- A position is '<score> <n>': the page ended after the n-th id of that score (ids of one score come in id order),
-- so that a run of ids sharing a score (a batch of player sessions made in the same ms) is paged through, not
-- skipped or repeated.
local cursor_score, skip = string.match(ARGV[3], '^(%S+) (%d+)$')
skip = tonumber(skip or '0')
local out = {''}
local looked, budget, taken = 0, size * 20, 0
local function fits(id)
  if ARGV[1] == 'g' then
    local s = redis.call('HMGET', gkey(k, id), 'status', 'loc')
    return s[1] and (any_status or statuses[s[1]]) and (ARGV[5] == '' or s[2] == ARGV[5])
  end
  local status = redis.call('HGET', pkey(k, id), 'status')
  return status and (any_status or statuses[status])
end
local function record(id)
  if ARGV[1] == 'g' then return redis.call('HGETALL', gkey(k, id)) end
  local sid = redis.call('HGET', pkey(k, id), 'gs')
  local s = redis.call('HMGET', gkey(k, sid), 'loc', 'ip', 'dns', 'port')
  return {redis.call('HGETALL', pkey(k, id)), {s[1] or '', s[2] or '', s[3] or '', s[4] or '0'}}
end
while true do
  local batch
  if desc then
    batch = redis.call('ZREVRANGEBYSCORE', set, cursor_score or '+inf', '-inf', 'WITHSCORES', 'LIMIT', skip, size + 50)
  else
    batch = redis.call('ZRANGEBYSCORE', set, cursor_score or '-inf', '+inf', 'WITHSCORES', 'LIMIT', skip, size + 50)
  end
  if #batch == 0 then return out end
  for i = 1, #batch, 2 do
    local id, score = batch[i], batch[i + 1]
    if score == cursor_score then skip = skip + 1 else cursor_score, skip = score, 1 end
    looked = looked + 1
    if fits(id) then
      out[#out + 1] = record(id)
      taken = taken + 1
    end
    if taken == size or looked >= budget then
      out[1] = cursor_score .. ' ' .. skip
      return out
    end
  end
end
