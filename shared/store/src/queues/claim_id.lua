-- Holds a placement id for one request across every queue (StartGameSessionPlacement), or lets go of a hold made
-- for a request that did not start. Ids live in a slot of their own ({p:<id>}), so the queue need not be known to
-- find a placement by its id.
-- KEYS[1] the id's key. ARGV[1] CLAIM | RELEASE, ARGV[2] what it holds (queue name, newline, digest of the request),
-- ARGV[3] how long it is held, ms.
-- Reply: {outcome, what it holds}. Outcomes: CLAIMED (held now for this request); HELD (already, for the same
-- request); TAKEN_BY (for another); RELEASED.
local held = redis.call('GET', KEYS[1])
if ARGV[1] == 'RELEASE' then
  if held == ARGV[2] then redis.call('DEL', KEYS[1]) end
  return {'RELEASED', ''}
end
if held == ARGV[2] then return {'HELD', held} end
if held then return {'TAKEN_BY', held} end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return {'CLAIMED', ARGV[2]}
