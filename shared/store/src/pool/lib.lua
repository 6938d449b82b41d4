-- Helpers shared by the game-server scripts (prepended to each of them).
--
-- A game server's hash holds: id, instance, conn (connection info), data (game-server data),
-- util (AVAILABLE | UTILIZED), istatus (ACTIVE | DRAINING | SPOT_TERMINATING), reg_ms (registered),
-- claim_ms (last claimed), claim_exp_ms (while claimed: when the claim lapses), claim_id (the live claim's id,
-- kept once the claimer makes it UTILIZED), hc_ms (last HEALTHY),
-- util_ms (became UTILIZED), labels (JSON [[key, value], ...]), annotations (likewise), counters (JSON [[name, count,
-- capacity], ...], numbers as strings), lists (JSON [[name, capacity, [value, ...]], ...]). Times are ms since the
-- epoch, from Redis' own clock.
--
-- The pool holds the AVAILABLE, unclaimed servers that may be claimed, scored tier * TIER_SPAN + idle-since ms:
-- servers on ACTIVE instances (tier 0) come before DRAINING ones (tier 1), the longest idle first (TIER, TIERS and
-- TIER_SPAN are berth_domain::allocation's, generated into the library).
-- Servers on SPOT_TERMINATING instances are kept out of it. Each location's ready processes are also in its own
-- mirror of the pool (k.lpool .. location), scored alike; `place` keeps the two together.

-- How long a location stays marked hungry after a placement found no server there: longer than the slowest retry
-- of a waiting placement (BERTH_PLACEMENT_RETRY_MS, at most 1 s), which marks it again.
local HUNGRY_MS = 5000

-- Marks location `loc` hungry from `now`: the next server to join its pool is announced (announce_capacity).
local function mark_hungry(k, loc, now)
  redis.call('BITFIELD', k.counts .. loc, 'SET', 'i64', COUNT_SLOT.hungry, int_text(now + HUNGRY_MS))
end

local function score_str(n)
  return string.format('%.0f', n)
end

-- Puts server `id` in the fleet's sorted set `set` at `score`, or takes it out (score nil), and likewise in its
-- location's mirror of that set (`mirror`: k.lpool for the pool, k.lhosting for the hosting processes); `loc` is the
-- server's location when the caller has read it (nil: read here). A FleetIQ server has no location, and so no mirror.
-- A location where a placement lately found no server (mark_hungry, by create.lua) announces this one
-- (announce_capacity).
local function place(k, set, mirror, id, score, loc)
  if score then
    score = int_text(score)
    redis.call('ZADD', set, score, id)
  elseif redis.call('ZREM', set, id) == 0 then
    -- The mirror holds only what the set does.
    return
  end
  if loc == nil then loc = redis.call('HGET', k.gs .. id, 'loc') end
  if not loc or loc == '' then return end
  if not score then
    redis.call('ZREM', mirror .. loc, id)
    return
  end
  redis.call('ZADD', mirror .. loc, score, id)
  announce_capacity(k, loc)
end

-- Puts a server in the pool at its tier, or takes it out when its instance allows no claims (`loc` as place's).
local function to_pool(k, pool, id, istatus, since, loc)
  local tier = TIER[istatus]
  if tier then
    place(k, pool, k.lpool, id, score_str(tier * TIER_SPAN + since), loc)
  else
    place(k, pool, k.lpool, id, nil, loc)
  end
end

-- Whether a server may wait in the pool: AVAILABLE and, for an SDK process, ready (not starting, hosting,
-- ending or lost) and not reporting UNHEALTHY.
local function poolable(key)
  local state = redis.call('HMGET', key, 'util', 'pstate', 'health')
  return state[1] == S.AVAILABLE and (not state[2] or state[2] == S.STANDING_BY) and state[3] ~= S.UNHEALTHY
end

-- Sets the instance status of servers `ids` (of an instance) and moves the unclaimed AVAILABLE ones to the matching
-- place in the pool, keeping how long they have been idle (claimed ones find it when their claim lapses).
local function set_istatus(k, pool, ids, istatus, now)
  for _, id in ipairs(ids) do
    local key = k.gs .. id
    if redis.call('EXISTS', key) == 1 then
      redis.call('HSET', key, 'istatus', istatus)
      tally_server(k, id)
      if poolable(key) and not redis.call('HGET', key, 'claim_exp_ms') then
        local score = redis.call('ZSCORE', pool, id)
        local since = now
        if score then since = tonumber(score) % TIER_SPAN end
        to_pool(k, pool, id, istatus, since)
      end
    end
  end
end

-- Hands one lapsed claim back: the server returns to the pool if it may wait there.
local function lapse_one(k, pool, claims, id, now)
  local key = k.gs .. id
  redis.call('ZREM', claims, id)
  redis.call('HDEL', key, 'claim_exp_ms', 'claim_id')
  if poolable(key) then to_pool(k, pool, id, redis.call('HGET', key, 'istatus'), now) end
  tally_server(k, id)
end

-- Hands up to `limit` claims that lapsed by `now` back to the pool.
local function lapse_claims(k, pool, claims, now, limit)
  local ids = redis.call('ZRANGEBYSCORE', claims, '-inf', now, 'LIMIT', 0, limit)
  for _, id in ipairs(ids) do lapse_one(k, pool, claims, id, now) end
  return #ids
end

-- The entry of `entries` (counters or lists as the record keeps them) keyed `name`, if any.
local function entry_of(entries, name)
  for _, entry in ipairs(entries) do
    if entry[1] == name then return entry end
  end
  return nil
end

-- Merges `changes` into `stored` (entries, each keyed by its first element, as the record keeps counters and lists):
-- a change replaces the entry of its key, or takes it out when `removes(change)` holds; the others stay.
local function merge_entries(stored, changes, removes)
  for _, change in ipairs(changes) do
    local found = false
    for i, entry in ipairs(stored) do
      if entry[1] == change[1] then
        found = true
        if removes(change) then table.remove(stored, i) else stored[i] = change end
        break
      end
    end
    if not found and not removes(change) then stored[#stored + 1] = change end
  end
  return stored
end

-- Lists as the record keeps them, JSON [[name, capacity, [value, ...]], ...], written by hand: cjson writes an empty
-- table as an object.
local function encode_lists(lists)
  local parts = {}
  for i, l in ipairs(lists) do
    local values = #l[3] > 0 and cjson.encode(l[3]) or '[]'
    parts[i] = '[' .. cjson.encode(l[1]) .. ',' .. string.format('%d', l[2]) .. ',' .. values .. ']'
  end
  return '[' .. table.concat(parts, ',') .. ']'
end

-- Removes game server `id` of `instance`, one registered through GameServerService (no SDK process, or a lost one),
-- from its fleet wherever it is (pool, claims, UTILIZED), with its share of the counts: DeregisterGameServer, and
-- the deletion of its fleet (GameLift FleetIQ's DeleteGameServerGroup takes its game servers with it). Uses
-- k.pool, k.claims, k.servers and k.utilized.
local function deregister_server(k, id, instance)
  tally_server(k, id, true)
  place(k, k.pool, k.lpool, id, nil)
  redis.call('DEL', k.gs .. id)
  redis.call('ZREM', k.claims, id)
  redis.call('ZREM', k.servers, id)
  redis.call('ZREM', k.utilized, id)
  redis.call('SREM', k.inst .. instance, id)
end

-- The typed reply every single-record script returns: {outcome, now_ms, hash field, value, ...}.
local function reply(outcome, now, key)
  local out = {outcome, int_text(now)}
  if key then append_fields(out, key) end
  return out
end
