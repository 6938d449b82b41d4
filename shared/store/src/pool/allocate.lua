-- Allocates one game server of the fleet by selector (Agones' allocation API, a claim made by what a server is
-- rather than by name): the first server that matches, in the order asked, is claimed (when READY) and gets the
-- metadata patch and the counter and list actions in the same step. Hands lapsed claims back to the pool first, as
-- a claim does.
-- KEYS: k.pool, k.claims, k.utilized.
-- ARGV[1] claim timeout ms, ARGV[2] id of the new claim, ARGV[3] the allocation as JSON (berth_domain::agones::
-- Allocation::to_lua: allocated, labels, exprs, players, counters, lists, distributed, priorities, patch_labels,
-- patch_annotations, counter_actions, list_actions), ARGV[4] seed that breaks Distributed's ties, ARGV[5] most
-- labels and ARGV[6] most annotations a server may keep.
-- Reply: {ALLOCATED, now_ms, fields...} | {EXHAUSTED, now_ms} | {TOO_MANY_LABELS | TOO_MANY_ANNOTATIONS, now_ms,
-- fields...}: the patch would leave the first match with more than it may keep, and nothing changed.
local now = now_ms()
lapse_claims(k, k.pool, k.claims, now, 100)
local a = cjson.decode(ARGV[3])
local fleet = fleet_id(k)

-- JSON [[key, value], ...] of a hash field as a table by key.
local function pairs_of(text)
  local by_key = {}
  for _, pair in ipairs(cjson.decode(text or '[]')) do by_key[pair[1]] = pair[2] end
  return by_key
end

-- A server's counters {name = {count, capacity}} and lists {name = {capacity, values}}.
local function counters_of(text)
  local out = {}
  for _, c in ipairs(cjson.decode(text or '[]')) do out[c[1]] = {tonumber(c[2]), tonumber(c[3])} end
  return out
end
local function lists_of(text)
  local out = {}
  for _, l in ipairs(cjson.decode(text or '[]')) do out[l[1]] = {l[2], l[3]} end
  return out
end

-- Berth's counters take capacity 0 for no limit (2^62, COUNTER_MAX).
local NO_LIMIT = 2 ^ 62
local function room_of(counter)
  return (counter[2] == 0 and NO_LIMIT or counter[2]) - counter[1]
end

local function within(value, least, most)
  return value >= least and (most == 0 or value <= most)
end

-- The fleet's label is the fleet's own: matched once here rather than on every server.
local labels_asked = {}
for _, l in ipairs(a.labels) do
  if l[1] ~= 'agones.dev/fleet' then
    labels_asked[#labels_asked + 1] = l
  elseif l[2] ~= fleet then
    return reply('EXHAUSTED', now)
  end
end
-- What a server's stored JSON is decoded for: the labels when the selector looks at them, the counters and lists
-- when it or a priority does.
local by_labels = #labels_asked > 0 or #a.exprs > 0
local by_counts = #a.counters > 0 or #a.lists > 0 or #a.priorities > 0

-- What a server is, if it matches the selector: its labels, counters and lists as read.
local function match(id)
  local f = redis.call('HMGET', k.gs .. id, 'labels', 'counters', 'lists', 'max_players', 'players', 'health', 'pstate')
  if f[6] == S.UNHEALTHY or f[7] == S.TERMINATING or f[7] == S.LOST then return nil end
  if by_labels then
    local labels = pairs_of(f[1])
    labels['agones.dev/fleet'] = fleet
    for _, l in ipairs(labels_asked) do
      if labels[l[1]] ~= l[2] then return nil end
    end
    for _, e in ipairs(a.exprs) do
      local value, found = labels[e[1]], false
      for _, v in ipairs(e[3]) do if v == value then found = true end end
      if (e[2] == 'In' and not found) or (e[2] == 'NotIn' and found) or (e[2] == 'Exists' and value == nil)
        or (e[2] == 'DoesNotExist' and value ~= nil) then return nil end
    end
  end
  -- A server that does not track players passes, as on Agones.
  if a.players ~= cjson.null and f[4] then
    local room = tonumber(f[4]) - tonumber(f[5] or '0')
    if not within(room, a.players[1], a.players[2]) then return nil end
  end
  if not by_counts then return {id = id, labels = f[1]} end
  local counters, lists = counters_of(f[2]), lists_of(f[3])
  for _, s in ipairs(a.counters) do
    local c = counters[s[1]]
    if not c or not within(c[1], s[2], s[3]) or not within(room_of(c), s[4], s[5]) then return nil end
  end
  for _, s in ipairs(a.lists) do
    local l = lists[s[1]]
    if not l or not within(l[1] - #l[2], s[3], s[4]) then return nil end
    if s[2] ~= '' then
      local holds = false
      for _, v in ipairs(l[2]) do if v == s[2] then holds = true end end
      if not holds then return nil end
    end
  end
  return {id = id, labels = f[1], counters = counters, lists = lists}
end

-- The candidates from `offset` on, in the order they are looked at: `count` of the pool's (tier, then longest idle)
-- for READY; for ALLOCATED, all at once (offset 0) up to CANDIDATES_LOOKED, the live claims by when they lapse,
-- then the UTILIZED servers by when they became so.
local function candidates(offset, count)
  local out = {}
  if not a.allocated then
    local ids = redis.call('ZRANGE', k.pool, offset, offset + count - 1, 'WITHSCORES')
    for i = 1, #ids, 2 do out[#out + 1] = {ids[i], math.floor(tonumber(ids[i + 1]) / TIER_SPAN)} end
    return out
  end
  if offset > 0 then return out end
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', k.claims, '(' .. now, '+inf', 'LIMIT', 0, CANDIDATES_LOOKED)) do
    if redis.call('HGET', k.gs .. id, 'claim_id') ~= RESERVATION then out[#out + 1] = {id, 0} end
  end
  if #out < CANDIDATES_LOOKED then
    for _, id in ipairs(redis.call('ZRANGE', k.utilized, 0, CANDIDATES_LOOKED - #out - 1)) do out[#out + 1] = {id, 0} end
  end
  return out
end

-- A server's room in the counter or list a priority names; nil when it has none.
local function room(server, p)
  if p[1] == 'counter' then
    local c = server.counters[p[2]]
    return c and room_of(c)
  end
  local l = server.lists[p[2]]
  return l and l[1] - #l[2]
end

-- Whether server x goes before server y: Packed by tier first; then each priority (a server without its counter
-- or list after those with it); then Packed by the pool's order, Distributed by a draw.
local function before(x, y)
  if not a.distributed and x.tier ~= y.tier then return x.tier < y.tier end
  for _, p in ipairs(a.priorities) do
    local rx, ry = room(x, p), room(y, p)
    if rx ~= ry then
      if rx == nil then return false end
      if ry == nil then return true end
      if p[3] then return rx > ry end
      return rx < ry
    end
  end
  if a.distributed then return x.draw < y.draw end
  return x.position < y.position
end

local chosen = nil
local ordered = #a.priorities > 0 or a.distributed
if a.distributed then math.randomseed(tonumber(ARGV[4])) end
-- Read a batch at a time: Packed without priorities takes the first match, which no later one goes before, so its
-- batches start at one server and grow (the first mostly matches); an ordered allocation reads whole batches, and
-- looks at up to CANDIDATES_LOOKED.
local position, size = 0, ordered and CANDIDATES_BATCH or 1
while position < CANDIDATES_LOOKED and not (chosen and not ordered) do
  local batch = candidates(position, size)
  for _, candidate in ipairs(batch) do
    position = position + 1
    local server = match(candidate[1])
    if server then
      server.tier, server.position = candidate[2], position
      if a.distributed then server.draw = math.random() end
      if not chosen or before(server, chosen) then chosen = server end
      if not ordered then break end
    end
  end
  if #batch < size then break end
  size = math.min(size * 4, CANDIDATES_BATCH)
end
if not chosen then return reply('EXHAUSTED', now) end
local id, key = chosen.id, k.gs .. chosen.id

-- Everything is checked before anything is written.
local function patched(text, patch, most)
  if #patch == 0 then return nil end
  local merged = cjson.decode(text or '[]')
  for _, p in ipairs(patch) do
    local found = false
    for _, m in ipairs(merged) do
      if m[1] == p[1] then
        m[2], found = p[2], true
      end
    end
    if not found then merged[#merged + 1] = p end
  end
  if #merged > most then return false end
  return cjson.encode(merged)
end
local labels = patched(chosen.labels, a.patch_labels, tonumber(ARGV[5]))
if labels == false then return reply('TOO_MANY_LABELS', now, key) end
local annotations = nil
if #a.patch_annotations > 0 then
  annotations = patched(redis.call('HGET', key, 'annotations'), a.patch_annotations, tonumber(ARGV[6]))
end
if annotations == false then return reply('TOO_MANY_ANNOTATIONS', now, key) end

if not a.allocated then
  local expires = now + tonumber(ARGV[1])
  place(k, k.pool, k.lpool, id, nil)
  redis.call('ZADD', k.claims, expires, id)
  redis.call('HSET', key, 'claim_ms', now, 'claim_exp_ms', expires, 'claim_id', ARGV[2])
  tally_server(k, id)
end
if labels then redis.call('HSET', key, 'labels', labels) end
if annotations then redis.call('HSET', key, 'annotations', annotations) end

-- Counter and list actions as Agones applies them: capacity first, then the change, clamped to 0 and the
-- capacity; an action on a counter or list the server lacks is skipped, and the allocation stands.
if #a.counter_actions > 0 then
  local stored = cjson.decode(redis.call('HGET', key, 'counters') or '[]')
  for _, act in ipairs(a.counter_actions) do
    for _, c in ipairs(stored) do
      if c[1] == act[1] then
        local count, capacity = tonumber(c[2]), tonumber(c[3])
        if act[3] >= 0 then capacity = act[3] end
        count = math.max(0, math.min(capacity == 0 and NO_LIMIT or capacity, count + act[2]))
        c[2], c[3] = score_str(count), score_str(capacity)
      end
    end
  end
  redis.call('HSET', key, 'counters', #stored > 0 and cjson.encode(stored) or '[]')
end
if #a.list_actions > 0 then
  local stored = cjson.decode(redis.call('HGET', key, 'lists') or '[]')
  for _, act in ipairs(a.list_actions) do
    for _, l in ipairs(stored) do
      if l[1] == act[1] then
        if act[4] >= 0 then l[2] = act[4] end
        local values, held = {}, {}
        for _, v in ipairs(l[3]) do values[#values + 1], held[v] = v, true end
        for _, v in ipairs(act[2]) do
          if not held[v] then values[#values + 1], held[v] = v, true end
        end
        local dropped = {}
        for _, v in ipairs(act[3]) do dropped[v] = true end
        local kept = {}
        for i, v in ipairs(values) do
          if i <= l[2] and not dropped[v] then kept[#kept + 1] = v end
        end
        l[3] = kept
      end
    end
  end
  redis.call('HSET', key, 'lists', encode_lists(stored))
end
return reply('ALLOCATED', now, key)
