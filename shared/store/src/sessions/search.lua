-- Reads the ACTIVE game sessions of one range of a search index, a chunk at a time; the caller evaluates the
-- filter and the sort on them. A selective filter reads a narrow range, so a search costs what it could match, not
-- what the fleet holds.
-- KEYS/ARGV[1..3]: see fleet_context(). ARGV[4] location ('*' for every one), ARGV[5] index (created | players |
-- max | free), ARGV[6] lowest score ('-inf' or a number), ARGV[7] highest score ('+inf' or a number),
-- ARGV[8] offset in the range, ARGV[9] most sessions to read.
-- Reply: the sessions' fields, each a list; fewer than asked at the end of the range.
local k = fleet_context()
local set = k.tag .. ':idx:' .. ARGV[4] .. ':' .. ARGV[5]
local out = {}
for _, sid in ipairs(redis.call('ZRANGEBYSCORE', set, ARGV[6], ARGV[7], 'LIMIT', ARGV[8], ARGV[9])) do
  out[#out + 1] = redis.call('HGETALL', gkey(k, sid))
end
return out
