-- Reads a page of a fleet's game servers in id order.
-- KEYS[1] fleet's server ids
-- ARGV[1] server hash key prefix, ARGV[2] id to start after ('' for the first page), ARGV[3] page size
-- Reply: {now_ms, next id to start after ('' on the last page), {{field, value, ...}, ...}}
local now = now_ms()
local size = tonumber(ARGV[3])
local min = '-'
if ARGV[2] ~= '' then min = '(' .. ARGV[2] end
local ids = redis.call('ZRANGEBYLEX', KEYS[1], min, '+', 'LIMIT', 0, size + 1)
local page, next_after = {}, ''
for i, id in ipairs(ids) do
  if i > size then
    next_after = ids[size]
    break
  end
  page[#page + 1] = redis.call('HGETALL', ARGV[1] .. id)
end
return {int_text(now), next_after, page}
