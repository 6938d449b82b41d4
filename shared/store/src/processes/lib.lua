-- Helpers of the process scripts (prepended after the game-server helpers).
--
-- A process is a game server that speaks the SDK stream. Beside the registry's fields its hash holds: reg (the
-- live registration id), pstate (INITIALIZING | STANDING_BY | ACTIVE | TERMINATING | LOST), replica (the health
-- replica holding its stream), loc, ip, dns, port, max_sess, max_players, sdkv, health (HEALTHY | UNHEALTHY, last
-- reported), unh (consecutive UNHEALTHY heartbeats), gstate (game state last reported), players (connected count),
-- ver (version of its desired state, raised by every command), term_reason, term_by_ms, term_force.
-- Its game sessions' ids are in the set <hash key>:sessions; each session is a hash <session prefix><id> holding
-- pb (its GameSessionAssignment, protobuf: the session as placed and its initial player sessions), status,
-- reason (a GameSessionStatusReason name), server.
--
-- Every process script takes the same first keys and arguments, read by fleet_context():
-- KEYS[1] pool, KEYS[2] claims, KEYS[3] hb (heartbeat due, ms), KEYS[4] ready (ready due), KEYS[5] term
-- (ProcessEnding due), KEYS[6] events (stream), KEYS[7] fleet's server ids, KEYS[8] processes now reporting
-- UNHEALTHY;
-- ARGV[1] server hash key prefix, ARGV[2] instance set key prefix, ARGV[3] game-session key prefix.

local function fleet_context()
  return {
    pool = KEYS[1], claims = KEYS[2], hb = KEYS[3], ready = KEYS[4], term = KEYS[5], events = KEYS[6],
    servers = KEYS[7], unhealthy = KEYS[8], server_prefix = ARGV[1], instance_prefix = ARGV[2], session_prefix = ARGV[3],
  }
end

local function record_event(k, code, id, message, now)
  redis.call('XADD', k.events, 'MAXLEN', '~', 10000, '*', 'code', code, 'game_server_id', id, 'message', message,
    'time_ms', now)
end

-- Ends every open game session of a process.
local function end_sessions(k, key, status, reason, now)
  for _, sid in ipairs(redis.call('SMEMBERS', key .. ':sessions')) do
    local skey = k.session_prefix .. sid
    local current = redis.call('HGET', skey, 'status')
    if current and current ~= 'TERMINATED' and current ~= 'ERROR' then
      redis.call('HSET', skey, 'status', status, 'reason', reason, 'end_ms', now)
    end
  end
end

-- Takes a process out of the pool, claims and every deadline.
local function retire(k, id)
  redis.call('ZREM', k.pool, id)
  redis.call('ZREM', k.claims, id)
  redis.call('ZREM', k.hb, id)
  redis.call('ZREM', k.ready, id)
  redis.call('ZREM', k.term, id)
  redis.call('SREM', k.unhealthy, id)
end

-- Declares a process lost (silent, unhealthy, not ready in time, or deaf to a terminate): it is retired, its
-- sessions end, it is told to terminate at once, the event is recorded, and it leaves the fleet's listing; its
-- record stays readable for retention_ms so that a process coming back learns what happened.
local function lose(k, id, now, code, message, session_status, session_reason, retention_ms)
  local key = k.server_prefix .. id
  retire(k, id)
  local instance = redis.call('HGET', key, 'instance')
  if instance then redis.call('SREM', k.instance_prefix .. instance, id) end
  redis.call('ZREM', k.servers, id)
  -- A process told to terminate keeps the reason it was told; one lost otherwise takes the event's.
  if redis.call('HGET', key, 'pstate') ~= 'TERMINATING' then redis.call('HSET', key, 'term_reason', code) end
  redis.call('HSET', key, 'pstate', 'LOST', 'term_by_ms', now, 'term_force', '1')
  redis.call('HDEL', key, 'claim_exp_ms', 'claim_id')
  redis.call('HINCRBY', key, 'ver', 1)
  end_sessions(k, key, session_status, session_reason, now)
  redis.call('PEXPIRE', key, retention_ms)
  redis.call('PEXPIRE', key .. ':sessions', retention_ms)
  record_event(k, code, id, message, now)
end

-- The reply of the process scripts: {outcome, now_ms, replica, version}.
local function process_reply(outcome, now, key)
  local state = redis.call('HMGET', key, 'replica', 'ver')
  return {outcome, tostring(now), state[1] or '', state[2] or '0'}
end
