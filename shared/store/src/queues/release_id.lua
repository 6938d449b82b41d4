-- Lets go of a placement id held for a request that did not start (claim_placement_id holds it with one SET, NX and
-- GET: no function is needed for that). Ids live in a slot of their own ({p:<id>}), so the queue need not be known
-- to find a placement by its id.
-- KEYS[1] the id's key. ARGV[1] what it holds for this request (queue name, newline, digest of the request).
-- Reply: RELEASED, whether or not it was held for this request (a hold for another stays).
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 'RELEASED'
