-- Reads, in score order, a chunk of one range of a search index of ACTIVE game sessions, with just what a filter
-- and a sort look at; the caller evaluates them and reads whole records only for the page it returns.
-- KEYS[1] the index (one location's: sessions under a member per order, see index_session). ARGV[1] lowest score,
-- ARGV[2] highest score (of one order's members: berth_store::sessions::IndexScan places them), ARGV[3] ASC | DESC,
-- ARGV[4] how many sessions at the start of the range (in reading order: the ties of its first score) were read
-- before, ARGV[5] most sessions to read, ARGV[6] how many characters the order's members hold before the session's
-- id (berth_store::sessions::IndexScan). A caller goes on from the last score it read, narrowing the range,
-- so a chunk costs what it reads wherever it lies in the range.
-- Reply: flat, per session member, score, name, props, max, cur, c_ms, accept, status (the member and score as the
-- index holds them: the caller takes the prefix off the member); fewer than asked at the range's end. Flat, so that
-- a candidate costs no table of its own.
local set = KEYS[1]
local ids
if ARGV[3] == 'DESC' then
  ids = redis.call('ZREVRANGEBYSCORE', set, ARGV[2], ARGV[1], 'WITHSCORES', 'LIMIT', ARGV[4], ARGV[5])
else
  ids = redis.call('ZRANGEBYSCORE', set, ARGV[1], ARGV[2], 'WITHSCORES', 'LIMIT', ARGV[4], ARGV[5])
end
local out = {}
-- A prefixed member becomes its record's key in one string operation, as a bare one does by one concatenation:
-- taking the id out first and then prefixing the key made each candidate cost two new strings.
local prefix = '^' .. string.rep('.', tonumber(ARGV[6]))
local records = string.gsub(k.gsess, '%%', '%%%%')
local n = 0
for i = 1, #ids, 2 do
  local member = ids[i]
  local key = prefix == '^' and gkey(k, member) or string.gsub(member, prefix, records, 1)
  local s = redis.call('HMGET', key, 'name', 'props', 'max', 'cur', 'c_ms', 'accept', 'status')
  out[n + 1], out[n + 2], out[n + 3] = member, ids[i + 1], s[1] or ''
  out[n + 4], out[n + 5], out[n + 6] = s[2] or '[]', s[3] or '0', s[4] or '0'
  out[n + 7], out[n + 8], out[n + 9] = s[5] or '0', s[6] or '0', s[7] or ''
  n = n + 9
end
return out
