-- Reports a game server's utilization, health or data. Checks everything before writing anything.
-- KEYS[1] server hash, KEYS[2] pool, KEYS[3] claims, KEYS[4] UTILIZED servers
-- ARGV[1] game-server id, ARGV[2] '1' to set the data to ARGV[3],
-- ARGV[4] 'UTILIZED' to mark it utilized, 'AVAILABLE' to assert it is not, '' to leave it,
-- ARGV[5] '1' to record a HEALTHY check now,
-- ARGV[6] the caller's claim id ('' for none), ARGV[7] '1' when the caller may act only as the claimant,
-- ARGV[8] '1' to replace the labels with ARGV[9] (JSON [[key, value], ...]), ARGV[10] counters to set (JSON
-- [[name, count, capacity], ...], numbers as strings since they exceed a double's precision; capacity and count
-- '0' remove one), ARGV[11] most counters (and most lists) a server may keep, ARGV[12] '1' to replace the
-- annotations with ARGV[13] (JSON as the labels), ARGV[14] lists to set (JSON [[name, capacity, [value, ...]], ...];
-- capacity 0 and no values remove one), ARGV[15] counter changes (JSON [[name, capacity, count, difference], ...],
-- -1 for a capacity or count not set), ARGV[16] list changes (JSON [[name, capacity (-1: not set), replace,
-- values, add, remove], ...]), ARGV[17] labels and ARGV[18] annotations to set by key (JSON as the labels),
-- ARGV[19] most labels (and most annotations) a server may keep.
-- Reply: {UPDATED | NOT_FOUND | NOT_CLAIMANT | LAPSED | UTILIZED | TOO_MANY_COUNTERS | TOO_MANY_LISTS |
-- TOO_MANY_LABELS | TOO_MANY_ANNOTATIONS, now_ms, fields...}, or {NO_COUNTER | NO_LIST | OUT_OF_RANGE | VALUE_EXISTS | NO_VALUE, now_ms, 'detail', name} (the value
-- after the name and a newline, for the last two) when a change cannot be made; nothing is written then.
-- NOT_CLAIMANT: a claim id was given, or had to be, and it is not the server's live claim (or the claim that made
-- it UTILIZED). LAPSED: the claim made on it lapsed and it went back to the pool, so it may not be marked UTILIZED
-- without a new claim. UTILIZED: AVAILABLE was asked of a server that is UTILIZED, which never goes back.
local now = now_ms()
if redis.call('EXISTS', KEYS[1]) == 0 then return reply('NOT_FOUND', now) end
local state = redis.call('HMGET', KEYS[1], 'util', 'claim_ms', 'claim_exp_ms', 'claim_id')
local util, claimed_once, claim_exp, claim_id = state[1], state[2], state[3], state[4]
-- A server's own reservation (reserve.lua) is no claim that a caller can present.
local reserved = claim_id == RESERVATION
if reserved then claim_id = nil end
local live = claim_exp and tonumber(claim_exp) > now
if ARGV[6] ~= '' or ARGV[7] == '1' then
  if claim_id ~= ARGV[6] or not (live or util == S.UTILIZED) then return reply('NOT_CLAIMANT', now, KEYS[1]) end
end
if ARGV[4] == S.AVAILABLE and util == S.UTILIZED then return reply(S.UTILIZED, now, KEYS[1]) end
local utilize = ARGV[4] == S.UTILIZED and util == S.AVAILABLE
if utilize and claimed_once and not live then return reply('LAPSED', now, KEYS[1]) end
-- `field`'s entries ([[key, ...], ...]: those stored, or those of `replace` when given) with the entries of `set`
-- merged in by key, one that `removes` holds of taking its key out: nil when neither changes them, false when more
-- than `most` would be kept.
local function merged(field, replace, set, removes, most)
  local changes = cjson.decode(set)
  if #changes == 0 then return replace and cjson.decode(replace) end
  local entries = merge_entries(cjson.decode(replace or redis.call('HGET', KEYS[1], field) or '[]'), changes, removes)
  if #entries > most then return false end
  return entries
end
local function never() return false end
local counters = merged('counters', nil, ARGV[10], function(c) return c[2] == '0' and c[3] == '0' end,
  tonumber(ARGV[11]))
if counters == false then return reply('TOO_MANY_COUNTERS', now, KEYS[1]) end
local lists = merged('lists', nil, ARGV[14], function(l) return l[2] == 0 and #l[3] == 0 end, tonumber(ARGV[11]))
if lists == false then return reply('TOO_MANY_LISTS', now, KEYS[1]) end
local labels = merged('labels', ARGV[8] == '1' and ARGV[9] or nil, ARGV[17], never, tonumber(ARGV[19]))
if labels == false then return reply('TOO_MANY_LABELS', now, KEYS[1]) end
local annotations = merged('annotations', ARGV[12] == '1' and ARGV[13] or nil, ARGV[18], never, tonumber(ARGV[19]))
if annotations == false then return reply('TOO_MANY_ANNOTATIONS', now, KEYS[1]) end
-- Counter changes: capacity, then count, then the difference, which must leave the count in range.
local changes = cjson.decode(ARGV[15])
if #changes > 0 then
  counters = counters or cjson.decode(redis.call('HGET', KEYS[1], 'counters') or '[]')
  for _, change in ipairs(changes) do
    local c = entry_of(counters, change[1])
    if not c then return {'NO_COUNTER', int_text(now), 'detail', change[1]} end
    local capacity = change[2] >= 0 and change[2] or tonumber(c[3])
    local count = (change[3] >= 0 and change[3] or tonumber(c[2])) + change[4]
    if count < 0 or count > (capacity == 0 and 2 ^ 62 or capacity) then
      return {'OUT_OF_RANGE', int_text(now), 'detail', change[1]}
    end
    c[2], c[3] = score_str(count), score_str(capacity)
  end
end
-- List changes: capacity (cutting the values), replaced values, values added, values removed.
changes = cjson.decode(ARGV[16])
if #changes > 0 then
  lists = lists or cjson.decode(redis.call('HGET', KEYS[1], 'lists') or '[]')
  for _, change in ipairs(changes) do
    local l = entry_of(lists, change[1])
    if not l then return {'NO_LIST', int_text(now), 'detail', change[1]} end
    if change[2] >= 0 then l[2] = change[2] end
    local values = change[3] and change[4] or l[3]
    local kept, held = {}, {}
    for _, v in ipairs(values) do
      if not held[v] and #kept < l[2] then kept[#kept + 1], held[v] = v, true end
    end
    for _, v in ipairs(change[5]) do
      if held[v] then return {'VALUE_EXISTS', int_text(now), 'detail', change[1] .. '\n' .. v} end
      if #kept >= l[2] then return {'OUT_OF_RANGE', int_text(now), 'detail', change[1]} end
      kept[#kept + 1], held[v] = v, true
    end
    for _, v in ipairs(change[6]) do
      if not held[v] then return {'NO_VALUE', int_text(now), 'detail', change[1] .. '\n' .. v} end
      held[v] = nil
      for i, kept_value in ipairs(kept) do
        if kept_value == v then table.remove(kept, i) break end
      end
    end
    l[3] = kept
  end
end
if utilize then
  redis.call('HSET', KEYS[1], 'util', S.UTILIZED, 'util_ms', now)
  redis.call('HDEL', KEYS[1], 'claim_exp_ms')
  if reserved then redis.call('HDEL', KEYS[1], 'claim_id') end
  place(k, KEYS[2], k.lpool, ARGV[1], nil)
  redis.call('ZREM', KEYS[3], ARGV[1])
  redis.call('ZADD', KEYS[4], now, ARGV[1])
  tally_server(k, ARGV[1])
end
if ARGV[2] == '1' then redis.call('HSET', KEYS[1], 'data', ARGV[3]) end
if ARGV[5] == '1' then redis.call('HSET', KEYS[1], 'hc_ms', now) end
-- cjson writes an empty table as an object; the record keeps a list.
local function encoded(entries) return #entries > 0 and cjson.encode(entries) or '[]' end
if labels then redis.call('HSET', KEYS[1], 'labels', encoded(labels)) end
if annotations then redis.call('HSET', KEYS[1], 'annotations', encoded(annotations)) end
if counters then redis.call('HSET', KEYS[1], 'counters', encoded(counters)) end
if lists then redis.call('HSET', KEYS[1], 'lists', encode_lists(lists)) end
return reply('UPDATED', now, KEYS[1])
