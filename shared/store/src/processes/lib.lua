-- Helpers of the process scripts (prepended after the game-server helpers).
--
-- A process is a game server that speaks the SDK stream. Beside the registry's fields its hash holds: reg (the live
-- registration id), pstate (INITIALIZING | STANDING_BY | ACTIVE | TERMINATING | LOST), replica (the health replica
-- holding its stream), attach (number of its latest stream: each resume raises it, so an older stream is known
-- superseded), try (the highest attempt number a stream of the registration brought; see attach.lua), linked (1 while
-- a stream holds it, 0 once that stream closed), loc, ip, dns, port, max_sess, max_players, sdkv, ports (JSON [[name,
-- port, transport], ...]), health (HEALTHY | UNHEALTHY, last reported), unh (consecutive UNHEALTHY heartbeats),
-- gstate (game state last reported), players (connected count), ver (version of its desired state, raised by every
-- command), term_reason, term_by_ms, term_force.
-- Its game sessions' ids are in the set <hash key>:sessions (see sessions/lib.lua for the sessions).

-- Takes a process out of the pool, claims, the UTILIZED and every deadline.
local function retire(k, id)
  place(k, k.pool, k.lpool, id, nil)
  redis.call('ZREM', k.claims, id)
  redis.call('ZREM', k.utilized, id)
  redis.call('ZREM', k.hb, id)
  redis.call('ZREM', k.ready, id)
  redis.call('ZREM', k.term, id)
  redis.call('SREM', k.unhealthy, id)
  place(k, k.hosting, k.lhosting, id, nil)
end

-- A process's whole desired state as desired.lua answers it, for a caller that knows it without reading it: at
-- `version`, in state `pstate`, told nothing about ending, hosting `hosted` ({{session fields}, {player session
-- values}...} each, the players only of one ACTIVATING). As JSON, which an announcement carries to the replica
-- holding the process's stream instead of that replica reading it back (processes.rs reads both forms alike, a
-- JSON false as the reply's null).
local function desired_text(version, pstate, hosted)
  local out = {version, pstate, '', '0', '0'}
  for _, session in ipairs(hosted) do out[#out + 1] = session end
  return cjson.encode(out)
end

-- The reply of the process scripts: {outcome, now_ms, replica, version}.
local function process_reply(outcome, now, key)
  local state = redis.call('HMGET', key, 'replica', 'ver')
  return {outcome, int_text(now), state[1] or '', state[2] or '0'}
end

-- A fleet event about a process: its id, location and instance.
local function process_event(k, now, code, message, id)
  local p = redis.call('HMGET', k.gs .. id, 'loc', 'instance')
  fleet_event(k, now, code, message, {'game_server_id', id, 'location', p[1] or '', 'instance_id', p[2] or ''})
end

-- Appends {game-server id, replica, version} of a process whose desired state moved, for its health replica to be
-- told.
local function told_process(k, told, id)
  local routing = redis.call('HMGET', k.gs .. id, 'replica', 'ver')
  told[#told + 1] = {id, routing[1] or '', routing[2] or '0'}
end
