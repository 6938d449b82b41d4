-- Claims one game server: the one named, or the first of the pool within the allowed tiers. First hands lapsed
-- claims back to the pool, so a lapse never waits for a sweep.
-- KEYS[1] pool, KEYS[2] claims
-- ARGV[1] server hash key prefix, ARGV[2] claim timeout ms, ARGV[3] game-server id ('' for any),
-- ARGV[4] lowest tier allowed, ARGV[5] highest tier allowed (0 ACTIVE, 1 DRAINING),
-- ARGV[6] '1' to set the game-server data to ARGV[7], ARGV[8] id of the new claim, ARGV[9] the caller's
-- idempotency token ('' for none): the claim made under it, while it holds (not lapsed, handed back or UTILIZED),
-- is answered again instead of another.
-- Reply: {CLAIMED | EXHAUSTED | NOT_FOUND | CONFLICT, now_ms, fields...}. CONFLICT: the named server is
-- claimed, UTILIZED, or on an instance the filter excludes; its fields say which.
local now = now_ms()
lapse_claims(k, KEYS[1], KEYS[2], now, 100)
local token = ARGV[9]
if token ~= '' then
  local made = redis.call('GET', k.ctok .. token)
  if made then
    local server, claim = string.match(made, '^(.-)\n(.*)$')
    local key = ARGV[1] .. server
    local held = redis.call('HMGET', key, 'claim_id', 'claim_exp_ms')
    if held[1] == claim and held[2] and tonumber(held[2]) > now then return reply('CLAIMED', now, key) end
  end
end
local lowest, highest = tonumber(ARGV[4]), tonumber(ARGV[5])
local id = ARGV[3]
if id ~= '' then
  local key = ARGV[1] .. id
  if redis.call('EXISTS', key) == 0 then return reply('NOT_FOUND', now) end
  local expires = redis.call('HGET', key, 'claim_exp_ms')
  if expires and tonumber(expires) <= now then lapse_one(k, KEYS[1], KEYS[2], id, now) end
  local score = redis.call('ZSCORE', KEYS[1], id)
  if not score then return reply('CONFLICT', now, key) end
  local tier = math.floor(tonumber(score) / TIER_SPAN)
  if tier < lowest or tier > highest then return reply('CONFLICT', now, key) end
else
  local found = redis.call('ZRANGEBYSCORE', KEYS[1], score_str(lowest * TIER_SPAN),
    '(' .. score_str((highest + 1) * TIER_SPAN), 'LIMIT', 0, 1)
  if #found == 0 then return reply('EXHAUSTED', now) end
  id = found[1]
end
local key = ARGV[1] .. id
local expires = now + tonumber(ARGV[2])
place(k, KEYS[1], k.lpool, id, nil)
redis.call('ZADD', KEYS[2], expires, id)
redis.call('HSET', key, 'claim_ms', now, 'claim_exp_ms', expires, 'claim_id', ARGV[8])
if ARGV[6] == '1' then redis.call('HSET', key, 'data', ARGV[7]) end
tally_server(k, id)
if token ~= '' then redis.call('SET', k.ctok .. token, id .. '\n' .. ARGV[8], 'PX', ARGV[2]) end
return reply('CLAIMED', now, key)
