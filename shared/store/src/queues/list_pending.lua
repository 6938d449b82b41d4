-- Lists a queue's PENDING placements in the order they started, a page at a time (ListGameSessionPlacements).
-- Placements that started in the same millisecond follow one another by id, as the sorted set orders them.
-- KEYS: the queue's (queues/lib.lua). ARGV[1] start ms of the last placement of the previous page ('' for the first
-- page), ARGV[2] its id, ARGV[3] most placements to return.
-- Reply: {FOUND | NOT_FOUND (no such queue), now_ms, {placement fields...}...}.
-- Whether id `a` sorts after `b` as the sorted set orders equal scores: byte by byte (Lua's `>` on strings follows
-- the server's locale).
local function after(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x > y end
  end
  return #a > #b
end

local q = queue_keys(KEYS)
local after_ms, after_id, limit = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
if redis.call('EXISTS', q.record) == 0 then return {'NOT_FOUND', tostring(now_ms())} end
local out = {'FOUND', tostring(now_ms())}
local offset = 0
while #out < limit + 2 do
  local batch = redis.call('ZRANGEBYSCORE', q.pending, after_ms or '-inf', '+inf', 'WITHSCORES', 'LIMIT', offset, limit)
  for i = 1, #batch, 2 do
    local id, started = batch[i], tonumber(batch[i + 1])
    if #out < limit + 2 and (not after_ms or started > after_ms or after(id, after_id)) then
      local fields = redis.call('HGETALL', q.placement .. id)
      if #fields > 0 then out[#out + 1] = fields end
    end
  end
  if #batch < 2 * limit then break end
  offset = offset + limit
end
return out
