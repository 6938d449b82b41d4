-- Reads one page of a sorted set of session ids, skipping ids whose record is gone (expired) or does not match.
-- Serves ListGameSessions (the fleet's sessions, newest first, by location and statuses) and
-- DescribePlayerSessions (a game session's or a player's player sessions, oldest first, by status). A game
-- session's player sessions are read from its record, live or packed (ended_session), by number.
-- KEYS[1] the sorted set of ids, for a game session's player sessions its record, for a player's the fleet's players
-- (k.players). ARGV[1] g | p, ARGV[2] DESC | ASC, ARGV[3] position to start after ('' for the first page), ARGV[4]
-- page size, ARGV[5] location ('' for any; game sessions only), ARGV[6] statuses, space-separated ('' for any),
-- ARGV[7] the game session whose player sessions are read ('' for a player's), ARGV[8] the player whose are ('').
-- Reply: {next position ('' on the last page), records as read.lua returns them...}. At most 20 pages' worth of
-- ids are looked at per call, so a sparse filter returns a short page with a next position rather than scanning
-- without end.
local set = KEYS[1]
local desc, size = ARGV[2] == 'DESC', tonumber(ARGV[4])
local statuses = {}
for status in string.gmatch(ARGV[6], '%S+') do statuses[status] = true end
local any_status = ARGV[6] == ''
-- A position is '<score> <n>': the page ended after the n-th id of that score (ids of one score come in one order: a
-- sorted set's by id, a game session's players as listed), so that a run of ids sharing a score (a batch of player
-- sessions made in the same ms) is paged through, not skipped or repeated.
local cursor_score, skip = string.match(ARGV[3], '^(%S+) (%d+)$')
skip = tonumber(skip or '0')
local out = {''}
local looked, budget, taken = 0, size * 20, 0

-- Player sessions read so far by id, {fields, endpoint}, and what is known of their game sessions (sid → its ended
-- record, or false for one that is live or gone): an ended game session is unpacked once per call, not once per
-- player.
local players, ended_of = {}, {}
local function ended_players(sid)
  if ended_of[sid] == nil then
    local ended = ended_session(k, sid) or false
    ended_of[sid] = ended
    if ended then
      local endpoint = endpoint_of(by_name(ended.fields))
      for _, p in ipairs(ended.players) do players[p[2]] = {p, endpoint} end
    end
  end
  return ended_of[sid]
end
local function player(id)
  if not players[id] then
    local sid = session_of(id)
    if not (sid and ended_players(sid)) then
      local fields, endpoint = player_record(k, id)
      if fields then players[id] = {fields, endpoint} end
    end
  end
  return players[id]
end

-- A player's list holds its ids without their fleet (listed_player).
local by_player = ARGV[1] == 'p' and ARGV[7] == ''

-- A game session's player sessions with their creation ms, read whole from its record (KEYS[1]), live or ended, in
-- creation order as a sorted set would hold them: by creation ms, then as the record lists them (by number), whatever
-- Redis' clock did between two of them.
local listed = nil
if ARGV[1] == 'p' and ARGV[7] ~= '' then
  listed = {}
  local all = redis.call('HGETALL', set)
  if #all > 0 then
    local live, r = live_players(k, ARGV[7], true, all)
    local endpoint = endpoint_of(r)
    for _, v in ipairs(live) do
      local id = player_session_id(ARGV[7], v[1])
      players[id] = {live_player_fields(ARGV[7], v, r.act_ms, r.res_ms), endpoint}
      listed[#listed + 1] = {id, tostring(v[P_CREATED])}
    end
  else
    local ended = ended_players(ARGV[7])
    for _, p in ipairs(ended and ended.players or {}) do
      local r = by_name(p)
      listed[#listed + 1] = {r.id, r.c_ms}
    end
  end
  for i, entry in ipairs(listed) do entry[3] = i end
  table.sort(listed, function(a, b)
    local x, y = tonumber(a[2]), tonumber(b[2])
    if x ~= y then return x < y end
    return a[3] < b[3]
  end)
end
-- A player's player sessions from `from` ms on, as the ids of one sorted set by creation ms would come: the entries
-- of the fleet's player index (player_entry) and those an earlier release listed in the player's own set, in one
-- order, by ms and then id (a sorted set's order of ids sharing a score).
local function player_range(from, offset, count)
  local want = offset + count
  local merged = {}
  local older = redis.call('ZRANGEBYSCORE', k.player .. ARGV[8], from or '-inf', '+inf', 'WITHSCORES', 'LIMIT', 0,
    want)
  for i = 1, #older, 2 do merged[#merged + 1] = {older[i], tonumber(older[i + 1])} end
  local prefix = player_prefix(ARGV[8])
  local at = #prefix + 1
  for _, entry in ipairs(redis.call('ZRANGEBYLEX', set, '[' .. prefix .. (from and padded_ms(tonumber(from)) or ''),
    '(' .. prefix .. ':', 'LIMIT', 0, want)) do
    merged[#merged + 1] = {string.sub(entry, at + MS_DIGITS), tonumber(string.sub(entry, at, at + MS_DIGITS - 1))}
  end
  table.sort(merged, function(a, b)
    if a[2] ~= b[2] then return a[2] < b[2] end
    return a[1] < b[1]
  end)
  local batch = {}
  for i = offset + 1, math.min(#merged, want) do
    batch[#batch + 1], batch[#batch + 2] = merged[i][1], int_text(merged[i][2])
  end
  return batch
end

local function range(from, offset, count)
  if by_player then return player_range(from, offset, count) end
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

-- Whether the record of `id` fits the filters, and the fields of a game session that ended (read here once).
local function fits(id)
  if ARGV[1] == 'g' then
    local s = redis.call('HMGET', gkey(k, id), 'status', 'loc')
    local fields = nil
    if not s[1] then
      local ended = ended_session(k, id)
      if not ended then return false end
      fields = ended.fields
      local r = by_name(fields)
      s = {r.status, r.loc}
    end
    return (any_status or statuses[s[1]]) and (ARGV[5] == '' or s[2] == ARGV[5]), fields
  end
  local p = player(id)
  return p and (any_status or statuses[by_name(p[1]).status])
end
local function record(id, ended_fields)
  if ARGV[1] == 'g' then return ended_fields or session_record(gkey(k, id)) end
  return player(id)
end
while true do
  local batch = range(cursor_score, skip, size + 50)
  if #batch == 0 then return out end
  for i = 1, #batch, 2 do
    local id, score = batch[i], batch[i + 1]
    if by_player then id = player_of_listing(k, id) end
    if score == cursor_score then skip = skip + 1 else cursor_score, skip = score, 1 end
    looked = looked + 1
    local fit, ended_fields = fits(id)
    if fit then
      out[#out + 1] = record(id, ended_fields)
      taken = taken + 1
    end
    if taken == size or looked >= budget then
      out[1] = cursor_score .. ' ' .. skip
      return out
    end
  end
end
