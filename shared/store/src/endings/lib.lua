-- Helpers of the endings area: how processes end, asked, declared lost or with their fleet or location deleted.
-- Ending a process ends or closes its game sessions, so this area sits above both processes and sessions (its
-- helpers load after theirs), and the areas above it (instances) end processes through it.

-- Declares a process lost (silent, unhealthy, not ready in time, or deaf to a terminate): it is retired, its
-- sessions end (FLEET_DELETED rather than FORCE_TERMINATED when it was told to end for a deletion), it is told to
-- terminate at once, the event is recorded, and it leaves the fleet's listing; its record stays readable for
-- retention_ms so that a process coming back learns what happened.
local function lose(k, id, now, code, message, session_status, session_reason, retention_ms)
  local key = k.gs .. id
  retire(k, id)
  local instance = redis.call('HGET', key, 'instance')
  if instance then redis.call('SREM', k.inst .. instance, id) end
  redis.call('ZREM', k.servers, id)
  -- A process told to terminate keeps the reason it was told; one lost otherwise takes the event's.
  local told = redis.call('HMGET', key, 'pstate', 'term_reason')
  if told[1] ~= S.TERMINATING then redis.call('HSET', key, 'term_reason', code) end
  -- Forced to end with its fleet or location being deleted, its sessions end as the deletion says.
  if session_reason == S.FORCE_TERMINATED and told[1] == S.TERMINATING then
    session_reason = told_end_reason(told[2], S.FORCE_TERMINATED)
  end
  redis.call('HSET', key, 'pstate', S.LOST, 'term_by_ms', now, 'term_force', '1')
  redis.call('HDEL', key, 'claim_exp_ms', 'claim_id')
  redis.call('HINCRBY', key, 'ver', 1)
  tally_server(k, id)
  end_sessions(k, key, session_status, session_reason, now)
  redis.call('PEXPIRE', key, retention_ms)
  redis.call('PEXPIRE', key .. ':sessions', retention_ms)
  process_event(k, now, code, message, id)
end


-- Tells a process to end by `deadline` (TERMINATING): it leaves the pool and must send ProcessEnding by then, or
-- the monitor force-ends it. `force` ('1' | '0') asks it to stop at once rather than wind down.
local function ask_to_end(k, id, reason, deadline, force)
  local key = k.gs .. id
  redis.call('HSET', key, 'pstate', S.TERMINATING, 'term_reason', reason, 'term_by_ms', deadline, 'term_force', force)
  redis.call('HDEL', key, 'claim_exp_ms', 'claim_id')
  redis.call('HINCRBY', key, 'ver', 1)
  place(k, k.pool, k.lpool, id, nil)
  redis.call('ZREM', k.claims, id)
  redis.call('ZREM', k.utilized, id)
  redis.call('ZREM', k.ready, id)
  place(k, k.hosting, k.lhosting, id, nil)
  redis.call('ZADD', k.term, deadline, id)
  tally_server(k, id)
  server_ending(k, id)
end

-- Tells a running process (neither LOST nor TERMINATING already) to end because its fleet or location is deleted
-- (FLEET_DELETED), by `deadline`; only in `locations` (a set of names) when given. Appends {id, replica, version} to
-- `told`, for its health replica to be told in turn. A server registered through GameServerService, which has no
-- process and no location, is deregistered with its fleet.
local function end_for_deletion(k, id, deadline, told, locations)
  local key = k.gs .. id
  local s = redis.call('HMGET', key, 'pstate', 'loc', 'instance')
  -- A server registered through GameServerService has no process to tell: it goes with its fleet at once.
  if not s[1] and s[3] and not locations then return deregister_server(k, id, s[3]) end
  if not s[1] or s[1] == S.LOST or s[1] == S.TERMINATING then return end
  if locations and not locations[s[2]] then return end
  ask_to_end(k, id, S.FLEET_DELETED, deadline, '0')
  told_process(k, told, id)
end
