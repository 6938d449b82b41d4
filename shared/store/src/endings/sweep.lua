-- The health monitor's sweep of one fleet: processes whose heartbeat, ready or ProcessEnding deadline passed are
-- declared lost. Safe with any number of health replicas sweeping: a process is found late once, then retired.
-- KEYS: k.claims, k.due, k.ended, k.events, k.fleet, k.hb, k.hosting, k.pool, k.ready, k.servers, k.sevents, k.term,
-- k.term_due, k.unhealthy, k.utilized, k.writers. ARGV[1] most processes to act on per deadline,
-- ARGV[2] ms, retention ARGV[3] how long Redis has answered the monitor for this fleet, ms: heartbeat deadlines are
-- swept only once that is a whole heartbeat window of the fleet's (after an outage no heartbeat could be recorded,
-- and silence then is not death). ARGV[4] the monitor's replica, ARGV[5] how long, ms, the oldest heartbeat it holds
-- but has not written has waited.
--
-- A process whose stream the monitor's replica holds is silent once it was due longer ago than that lag: any
-- heartbeat the replica holds of it arrived later, so it would have been due later still. A process whose stream is
-- open on another replica is judged by that replica's writer (k.writers), since the monitor's own view says nothing
-- of it: a replica that wrote nothing of this fleet since the process was due (dead, or cut off from Redis, its
-- processes resuming elsewhere) gets one more window; one that fell behind gets a window from when it caught up, in
-- which the heartbeats it holds are written.
-- Reply: {processes alive, processes reporting UNHEALTHY, then (game-server id, replica, event code) for each process
-- declared lost, so that the replica holding its stream can tell it}; the counts are taken after the sweep, for
-- the health metrics, so that the monitor needs no second round trip.
local now = now_ms()
local limit, retention = tonumber(ARGV[1]), tonumber(ARGV[2])
local out = {'', ''}
-- `why(id)` gives the event code, its message, and the status and reason its game sessions end with.
-- `silent(id, replica, due)`, when given, says whether a process past its deadline `due` is silent rather than
-- waiting on its replica.
local function sweep(deadlines, why, silent)
  local due = redis.call('ZRANGEBYSCORE', deadlines, '-inf', now, 'WITHSCORES', 'LIMIT', 0, limit)
  for i = 1, #due, 2 do
    local id = due[i]
    local replica = redis.call('HGET', k.gs .. id, 'replica')
    if not replica then
      -- Its record is gone (deregistered by an operator): nothing is left to declare lost.
      retire(k, id)
    elseif not silent or silent(id, replica, tonumber(due[i + 1])) then
      local code, message, session_status, session_reason = why(id)
      lose(k, id, now, code, message, session_status, session_reason, retention)
      out[#out + 1] = id
      out[#out + 1] = replica
      out[#out + 1] = code
    end
  end
end
local set = fleet_settings(k)
if set and tonumber(ARGV[3]) >= set.window_ms then
  local window = set.window_ms
  -- Each writer's '<since>,<last>'; one that has written nothing for ten windows is forgotten (a replica gone).
  local writers, stale = {}, {}
  local listed = redis.call('HGETALL', k.writers)
  for i = 1, #listed, 2 do
    local since, last = string.match(listed[i + 1], '^(-?%d+),(%d+)$')
    if not last or now - tonumber(last) > 10 * window then
      stale[#stale + 1] = listed[i]
    else
      writers[listed[i]] = {tonumber(since), tonumber(last)}
    end
  end
  if #stale > 0 then redis.call('HDEL', k.writers, unpack(stale)) end
  local me, lag = ARGV[4], tonumber(ARGV[5])
  local function silent(id, replica, due)
    -- Another replica with no writer record wrote nothing of this fleet for ten windows: it holds nothing back.
    local w = writers[replica]
    if replica ~= me and not w then return true end
    -- A stream gone was seen going by its replica, which was there to see it.
    if redis.call('HGET', k.gs .. id, 'linked') ~= '1' then return true end
    if replica == me then return due <= now - lag end
    if w[2] >= due and now >= w[1] + window then return true end
    return now >= due + window
  end
  -- Silent with its stream open is unhealthy (hung); silent with its stream gone, and not back, is crashed.
  sweep(k.hb, function(id)
    if redis.call('HGET', k.gs .. id, 'linked') == '1' then
      return S.SERVER_PROCESS_TERMINATED_UNHEALTHY, 'no heartbeat within the health window over an open stream',
        S.ERROR, S.SERVER_UNHEALTHY
    end
    return S.SERVER_PROCESS_CRASHED, 'stream gone and no heartbeat within the health window', S.ERROR,
      S.SERVER_CRASHED
  end, silent)
end
sweep(k.ready, function()
  return S.SERVER_PROCESS_READY_TIMEOUT, 'not ready within the ready timeout', S.ERROR, S.SERVER_CRASHED
end)
sweep(k.term, function()
  return S.SERVER_PROCESS_FORCE_TERMINATED, 'no ProcessEnding within the termination grace period', S.TERMINATED,
    S.FORCE_TERMINATED
end)
out[1] = tostring(redis.call('ZCARD', k.hb))
out[2] = tostring(redis.call('SCARD', k.unhealthy))
return out
