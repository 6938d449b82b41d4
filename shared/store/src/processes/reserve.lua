-- A ready process holds itself out of the pool for a while (Agones Reserve): a claim on itself under the claim id
-- RESERVATION, so that no placement, claim or scale-in takes it, which lapses as any claim does (lapse_claims) and
-- returns it to the pool. Reserving again moves the end; a duration of 0 ends the reservation at once.
-- KEYS: k.claims, k.pool. ARGV[1] game-server id, ARGV[2] registration id, ARGV[3] duration ms (0 to end).
-- Reply: {HELD, now_ms, fields...}: reserved (or, for a duration of 0, no longer); {BUSY, now_ms}: it is not ready,
-- hosts a game session, or is claimed or UTILIZED, and nothing changed; {LOST, now_ms}.
local now = now_ms()
local id = ARGV[1]
local key = k.gs .. id
local s = redis.call('HMGET', key, 'reg', 'pstate', 'util', 'claim_exp_ms', 'claim_id')
if s[1] ~= ARGV[2] or s[2] == S.LOST then return reply(S.LOST, now) end
-- A claim that lapsed but was not swept yet holds nothing.
if s[4] and tonumber(s[4]) <= now then
  lapse_one(k, k.pool, k.claims, id, now)
  s[4] = false
end
local reserved = s[4] and s[5] == RESERVATION
local duration = tonumber(ARGV[3])
if duration == 0 then
  if reserved then lapse_one(k, k.pool, k.claims, id, now) end
  return reply('HELD', now, key)
end
if s[2] ~= S.STANDING_BY or s[3] ~= S.AVAILABLE or (s[4] and not reserved) then return reply('BUSY', now) end
place(k, k.pool, k.lpool, id, nil)
redis.call('ZADD', k.claims, now + duration, id)
redis.call('HSET', key, 'claim_exp_ms', now + duration, 'claim_id', RESERVATION)
tally_server(k, id)
return reply('HELD', now, key)
