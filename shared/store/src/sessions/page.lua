-- Reads one page of a sorted set of session ids, skipping ids whose record is gone (expired) or does not match.
-- Serves ListGameSessions (the fleet's sessions, newest first, by location and statuses) and
-- DescribePlayerSessions (a game session's or a player's player sessions, oldest first, by status). An ended game
-- session's player sessions are read from its packed record (ended_session), in the order its set held them.
-- KEYS[1] the sorted set of ids. ARGV[1] g | p,
-- ARGV[2] DESC | ASC, ARGV[3] position to start after ('' for the first page), ARGV[4] page size,
-- ARGV[5] location ('' for any; game sessions only), ARGV[6] statuses, space-separated ('' for any), ARGV[7] the
-- game session whose player sessions KEYS[1] holds ('' for a player's).
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

-- Player sessions read so far by id, {fields, endpoint}: an ended game session is unpacked once per call, not once
-- per player.
local players = {}
local unpacked = {}
local function remember_ended(sid)
  if unpacked[sid] then return nil end
  unpacked[sid] = true
  local ended = ended_session(k, sid)
  if not ended then return nil end
  local endpoint = endpoint_of(by_name(ended.fields))
  for _, p in ipairs(ended.players) do players[p[2]] = {p, endpoint} end
  return ended
end
local function player(id)
  if not players[id] then
    local fields, endpoint = player_record(k, id)
    if not fields then
      local sid = session_of(id)
      if sid then remember_ended(sid) end
    else
      players[id] = {fields, endpoint}
    end
  end
  return players[id]
end

-- The ids of an ended game session's player sessions with their scores, as the set held them: by creation, then id.
local listed = nil
if ARGV[1] == 'p' and ARGV[7] ~= '' and redis.call('EXISTS', set) == 0 then
  local ended = remember_ended(ARGV[7])
  listed = {}
  for _, p in ipairs(ended and ended.players or {}) do
    local r = by_name(p)
    listed[#listed + 1] = {r.id, r.c_ms}
  end
end
local function range(from, offset, count)
  if desc then
    return redis.call('ZREVRANGEBYSCORE', set, from or '+inf', '-inf', 'WITHSCORES', 'LIMIT', offset, count)
  end
  if not listed then
    return redis.call('ZRANGEBYSCORE', set, from or '-inf', '+inf', 'WITHSCORES', 'LIMIT', offset, count)
  end
  local batch, floor = {}, from and tonumber(from) or -math.huge
  for _, entry in ipairs(listed) do
    if tonumber(entry[2]) >= floor then
      if offset > 0 then
        offset = offset - 1
      elseif #batch < count * 2 then
        batch[#batch + 1], batch[#batch + 2] = entry[1], entry[2]
      end
    end
  end
  return batch
end

local function fits(id)
  if ARGV[1] == 'g' then
    local s = redis.call('HMGET', gkey(k, id), 'status', 'loc')
    if not s[1] then
      local ended = ended_session(k, id)
      if not ended then return false end
      local r = by_name(ended.fields)
      s = {r.status, r.loc}
    end
    return (any_status or statuses[s[1]]) and (ARGV[5] == '' or s[2] == ARGV[5])
  end
  local p = player(id)
  return p and (any_status or statuses[by_name(p[1]).status])
end
local function record(id)
  if ARGV[1] == 'g' then return session_fields(k, id) end
  return player(id)
end
while true do
  local batch = range(cursor_score, skip, size + 50)
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
