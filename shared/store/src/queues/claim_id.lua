-- Holds a placement id for one request across every queue (StartGameSessionPlacement), or lets go of a hold made
-- for a request that did not start. Ids live in a slot of their own ({p:<id>}), so the queue need not be known to
-- find a placement by its id.
-- KEYS[1] the id's key. ARGV[1] CLAIM | RELEASE, ARGV[2] what it holds (queue name, newline, digest of the request),
-- ARGV[3] how long it is held, ms.
-- Reply: {outcome, what it holds}. Outcomes: CLAIMED (held now for this request); HELD (already, for the same
-- request); TAKEN_BY (for another); RELEASED.
if ARGV[1] == 'RELEASE' then
  if redis.call('GET', KEYS[1]) == ARGV[2] then redis.call('DEL', KEYS[1]) end
  return {'RELEASED', ''}
end
-- Held unless it is already, in one command that answers what was held before (Redis 7's SET with NX and GET).
local held = redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3], 'NX', 'GET')
if not held then return {'CLAIMED', ARGV[2]} end
if held == ARGV[2] then return {'HELD', held} end
return {'TAKEN_BY', held}
