-- Reads, in score order, a chunk of one range of a search index of ACTIVE game sessions, with just what a filter
-- and a sort look at; the caller evaluates them and reads whole records only for the page it returns.
-- KEYS[1] the index (one location's: sessions under a member per order, see index_session). ARGV[1] lowest score,
-- ARGV[2] highest score (of one order's members: berth_store::sessions::IndexScan places them), ARGV[3] ASC | DESC,
-- ARGV[4] how many sessions at the start of the range (in reading order: the ties of its first score) were read
-- before, ARGV[5] most sessions to read, ARGV[6] how many characters the order's members hold before the session's
-- id (berth_store::sessions::IndexScan). A caller goes on from the last score it read, narrowing the range,
-- so a chunk costs what it reads wherever it lies in the range.
-- Reply: per session {id, score, name, props, max, cur, c_ms, accept, status}, the score as the index holds it; fewer
-- than asked at the range's end.
local set = KEYS[1]
local ids
if ARGV[3] == 'DESC' then
  ids = redis.call('ZREVRANGEBYSCORE', set, ARGV[2], ARGV[1], 'WITHSCORES', 'LIMIT', ARGV[4], ARGV[5])
else
  ids = redis.call('ZRANGEBYSCORE', set, ARGV[1], ARGV[2], 'WITHSCORES', 'LIMIT', ARGV[4], ARGV[5])
end
local out = {}
local prefix = tonumber(ARGV[6])
for i = 1, #ids, 2 do
  local sid = ids[i]
  if prefix > 0 then sid = string.sub(sid, prefix + 1) end
  local s = redis.call('HMGET', gkey(k, sid), 'name', 'props', 'max', 'cur', 'c_ms', 'accept', 'status')
  out[#out + 1] = {sid, ids[i + 1], s[1] or '', s[2] or '[]', s[3] or '0', s[4] or '0', s[5] or '0', s[6] or '0',
    s[7] or ''}
end
return out
